//! Encryption at rest under the master key (AES-256-GCM). Each purpose gets its own key derived
//! from the master key with HKDF-SHA256, and every ciphertext is bound to the id of the row it
//! belongs to (associated data), so a ciphertext copied to another row does not decrypt.

use aws_lc_rs::aead::{AES_256_GCM, AES_256_GCM_SIV, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use aws_lc_rs::hkdf::{HKDF_SHA256, Salt};

use super::CryptoError;
use super::secret::random_bytes;

/// What a derived key is used for; part of the HKDF info, so keys never overlap.
#[derive(Clone, Copy, Debug)]
pub enum Purpose {
    SigningKey,
    TokenKey,
    OtpSecret,
}

impl Purpose {
    fn label(self) -> &'static [u8] {
        match self {
            Purpose::SigningKey => b"latch signing-key encryption v1",
            Purpose::TokenKey => b"latch token-key encryption v1",
            Purpose::OtpSecret => b"latch otp-secret encryption v1",
        }
    }
}

/// An AES-256-GCM key.
pub struct Aead {
    key: LessSafeKey,
}

impl std::fmt::Debug for Aead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Aead(..)")
    }
}

impl Aead {
    /// A key used directly (for example a token key loaded from the store).
    pub fn from_raw(raw: &[u8; 32]) -> Result<Self, CryptoError> {
        Ok(Self { key: LessSafeKey::new(UnboundKey::new(&AES_256_GCM, raw)?) })
    }

    /// An AES-256-GCM-SIV key derived from `raw` for `label` (HKDF-SHA256, so the raw key is
    /// never used by two algorithms). GCM-SIV resists nonce reuse: two seals under one random
    /// nonce reveal at most that their plaintexts were equal, where plain GCM would give away
    /// its authentication key, so a key that seals without limit stays safe.
    pub fn siv_from_raw(raw: &[u8; 32], label: &[u8]) -> Result<Self, CryptoError> {
        let prk = Salt::new(HKDF_SHA256, b"latch").extract(raw);
        let info = [label];
        let okm = prk.expand(&info, &AES_256_GCM_SIV)?;
        Ok(Self { key: LessSafeKey::new(UnboundKey::from(okm)) })
    }

    /// A key derived from the master key for one purpose.
    pub fn derive(master: &[u8; 32], purpose: Purpose) -> Result<Self, CryptoError> {
        let salt = Salt::new(HKDF_SHA256, b"latch");
        let prk = salt.extract(master);
        let info = [purpose.label()];
        let okm = prk.expand(&info, &AES_256_GCM)?;
        Ok(Self { key: LessSafeKey::new(UnboundKey::from(okm)) })
    }

    /// `nonce || ciphertext || tag`.
    pub fn seal(&self, aad: &[u8], plaintext: &[u8]) -> Result<Vec<u8>, CryptoError> {
        let nonce_bytes = random_bytes::<NONCE_LEN>();
        let mut buf = plaintext.to_vec();
        self.key.seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce_bytes), Aad::from(aad), &mut buf)?;
        let mut out = Vec::with_capacity(NONCE_LEN + buf.len());
        out.extend_from_slice(&nonce_bytes);
        out.extend_from_slice(&buf);
        Ok(out)
    }

    pub fn open(&self, aad: &[u8], sealed: &[u8]) -> Result<Vec<u8>, CryptoError> {
        if sealed.len() < NONCE_LEN + AES_256_GCM.tag_len() {
            return Err(CryptoError::Decrypt);
        }
        let (nonce, ciphertext) = sealed.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| CryptoError::Decrypt)?;
        let mut buf = ciphertext.to_vec();
        let plain = self.key.open_in_place(nonce, Aad::from(aad), &mut buf).map_err(|_| CryptoError::Decrypt)?;
        Ok(plain.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_binding() {
        let k = Aead::derive(&[7u8; 32], Purpose::SigningKey).unwrap();
        let sealed = k.seal(b"row-1", b"private key").unwrap();
        assert_eq!(k.open(b"row-1", &sealed).unwrap(), b"private key");
        assert!(k.open(b"row-2", &sealed).is_err(), "bound to its row");
        let other = Aead::derive(&[8u8; 32], Purpose::SigningKey).unwrap();
        assert!(other.open(b"row-1", &sealed).is_err(), "wrong master key");
        let purpose = Aead::derive(&[7u8; 32], Purpose::TokenKey).unwrap();
        assert!(purpose.open(b"row-1", &sealed).is_err(), "purposes are separate");
        let mut tampered = sealed.clone();
        let last = tampered.len() - 1;
        tampered[last] ^= 1;
        assert!(k.open(b"row-1", &tampered).is_err());
        assert!(k.open(b"row-1", &sealed[..10]).is_err());
    }
}
