//! Secrets handed to clients (client secrets, machine secrets, personal access tokens): 256-bit
//! random values, stored only as SHA-256 digests and compared in constant time. A slow password
//! hash is unnecessary for values with 256 bits of entropy and would cost every token request.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

/// `N` random bytes from the operating system's generator.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    // aws-lc's DRBG only fails if the OS entropy source is broken; that is fatal.
    #[allow(clippy::expect_used)]
    aws_lc_rs::rand::fill(&mut buf).expect("the system random generator failed");
    buf
}

/// A new 256-bit secret, base64url without padding (43 characters).
pub fn new_secret() -> String {
    URL_SAFE_NO_PAD.encode(random_bytes::<32>())
}

/// A new unguessable identifier: 128 random bits, base64url without padding (22 characters).
/// For the ids that are no primary key but that revocations are keyed by (token `jti`, grant
/// ids): unlike [`crate::id::new_id`], two replicas cannot make the same one (a collision is a
/// 2^-64 chance after 2^32 ids), and none can be guessed from another.
pub fn random_id() -> String {
    URL_SAFE_NO_PAD.encode(random_bytes::<16>())
}

/// The SHA-256 digest under which a secret is stored.
pub fn digest(secret: &str) -> Vec<u8> {
    Sha256::digest(secret.as_bytes()).to_vec()
}

/// Compares a stored digest with the digest of a presented secret in constant time.
pub fn matches(stored_digest: &[u8], presented: &str) -> bool {
    let presented = digest(presented);
    aws_lc_rs::constant_time::verify_slices_are_equal(stored_digest, &presented).is_ok()
}

/// An HMAC-SHA256 key derived from the master key (HKDF-SHA256, label `latch {label} v1`), for
/// digests of short secrets that a reader of the store must not be able to find by trying them
/// all (a plain digest of a 40-bit code falls in minutes on a GPU).
pub struct KeyedDigest(aws_lc_rs::hmac::Key);

impl std::fmt::Debug for KeyedDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyedDigest(..)")
    }
}

impl KeyedDigest {
    pub fn derive(master: &[u8; 32], label: &str) -> Result<Self, super::CryptoError> {
        use aws_lc_rs::hkdf::{HKDF_SHA256, Salt};
        let prk = Salt::new(HKDF_SHA256, b"latch").extract(master);
        let info = format!("latch {label} v1");
        let parts = [info.as_bytes()];
        let okm = prk.expand(&parts, aws_lc_rs::hmac::HMAC_SHA256)?;
        Ok(Self(aws_lc_rs::hmac::Key::from(okm)))
    }

    /// The digest of `parts`, each length-prefixed so that no two lists give the same input.
    pub fn digest(&self, parts: &[&str]) -> Vec<u8> {
        let mut ctx = aws_lc_rs::hmac::Context::with_key(&self.0);
        for p in parts {
            ctx.update(&(p.len() as u64).to_be_bytes());
            ctx.update(p.as_bytes());
        }
        ctx.sign().as_ref().to_vec()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn keyed_digests_depend_on_the_key_and_label_and_keep_parts_apart() {
        let a = super::KeyedDigest::derive(&[1; 32], "x").unwrap();
        let b = super::KeyedDigest::derive(&[2; 32], "x").unwrap();
        let c = super::KeyedDigest::derive(&[1; 32], "y").unwrap();
        let parts = ["user", "purpose", "CODE"];
        assert_eq!(a.digest(&parts), a.digest(&parts));
        assert_ne!(a.digest(&parts), b.digest(&parts));
        assert_ne!(a.digest(&parts), c.digest(&parts));
        assert_ne!(a.digest(&["ab", "c"]), a.digest(&["a", "bc"]));
        assert_eq!(a.digest(&parts).len(), 32);
    }

    use super::*;

    #[test]
    fn secrets_are_random_and_verify() {
        let a = new_secret();
        let b = new_secret();
        assert_ne!(a, b);
        assert_eq!(a.len(), 43);
        let d = digest(&a);
        assert!(matches(&d, &a));
        assert!(!matches(&d, &b));
        assert!(!matches(&d[..31], &a));
    }

    #[test]
    fn random_ids_carry_128_random_bits() {
        let ids: std::collections::HashSet<String> = (0..1000).map(|_| random_id()).collect();
        assert_eq!(ids.len(), 1000);
        for id in &ids {
            assert_eq!(URL_SAFE_NO_PAD.decode(id).map(|b| b.len()).ok(), Some(16), "{id}");
        }
    }
}
