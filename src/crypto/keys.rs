//! Asymmetric keys: the server's signing keys (RS256, ES256, EdDSA) and the RSA key pairs handed
//! to machine users and applications in key files.

use aws_lc_rs::encoding::{AsDer, PublicKeyX509Der};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::{KeyPair as RsaKeyPair, KeySize, PublicKeyComponents};
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, ED25519, EcdsaKeyPair, Ed25519KeyPair, KeyPair,
    ParsedPublicKey, RSA_PKCS1_2048_8192_SHA256, RSA_PKCS1_SHA256,
};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::CryptoError;

/// JWS algorithms latch signs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum KeyAlg {
    RS256,
    ES256,
    EdDSA,
}

impl KeyAlg {
    pub fn as_str(self) -> &'static str {
        match self {
            KeyAlg::RS256 => "RS256",
            KeyAlg::ES256 => "ES256",
            KeyAlg::EdDSA => "EdDSA",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "RS256" => Some(KeyAlg::RS256),
            "ES256" => Some(KeyAlg::ES256),
            "EdDSA" => Some(KeyAlg::EdDSA),
            _ => None,
        }
    }
}

/// What kind of key to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeySpec {
    Rsa { bits: u32 },
    EcP256,
    Ed25519,
}

impl KeySpec {
    /// What latch makes when nothing else is asked for (OIDC requires RS256).
    pub const DEFAULT: KeySpec = KeySpec::Rsa { bits: 2048 };

    pub fn alg(self) -> KeyAlg {
        match self {
            KeySpec::Rsa { .. } => KeyAlg::RS256,
            KeySpec::EcP256 => KeyAlg::ES256,
            KeySpec::Ed25519 => KeyAlg::EdDSA,
        }
    }

    /// The name stored with a key: `rsa-2048`, `ecdsa-p256`, `ed25519`.
    pub fn name(self) -> String {
        match self {
            KeySpec::Rsa { bits } => format!("rsa-{bits}"),
            KeySpec::EcP256 => "ecdsa-p256".into(),
            KeySpec::Ed25519 => "ed25519".into(),
        }
    }

    /// The spec a stored [`name`](Self::name) stands for.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "ecdsa-p256" => Some(KeySpec::EcP256),
            "ed25519" => Some(KeySpec::Ed25519),
            _ => name.strip_prefix("rsa-")?.parse().ok().map(|bits| KeySpec::Rsa { bits }),
        }
    }
}

enum Inner {
    Rsa(RsaKeyPair),
    Ec(EcdsaKeyPair),
    Ed(Ed25519KeyPair),
}

/// A private key ready to sign.
pub struct SigningKey {
    alg: KeyAlg,
    inner: Inner,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SigningKey({})", self.alg.as_str())
    }
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

impl SigningKey {
    /// Generates a key; returns it with its PKCS#8 DER encoding (for storage).
    pub fn generate(spec: KeySpec) -> Result<(Self, Vec<u8>), CryptoError> {
        let pkcs8 = match spec {
            KeySpec::Rsa { bits } => {
                let size = match bits {
                    2048 => KeySize::Rsa2048,
                    3072 => KeySize::Rsa3072,
                    4096 => KeySize::Rsa4096,
                    _ => {
                        return Err(CryptoError::KeyRejected(format!("unsupported RSA size {bits}")));
                    }
                };
                let kp = RsaKeyPair::generate(size)?;
                AsDer::<aws_lc_rs::encoding::Pkcs8V1Der>::as_der(&kp)?.as_ref().to_vec()
            }
            KeySpec::EcP256 => {
                let rng = SystemRandom::new();
                EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)?.as_ref().to_vec()
            }
            KeySpec::Ed25519 => {
                let rng = SystemRandom::new();
                Ed25519KeyPair::generate_pkcs8(&rng)?.as_ref().to_vec()
            }
        };
        let key = Self::from_pkcs8(spec.alg(), &pkcs8)?;
        Ok((key, pkcs8))
    }

    pub fn from_pkcs8(alg: KeyAlg, der: &[u8]) -> Result<Self, CryptoError> {
        let inner = match alg {
            KeyAlg::RS256 => Inner::Rsa(RsaKeyPair::from_pkcs8(der)?),
            KeyAlg::ES256 => Inner::Ec(EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der)?),
            KeyAlg::EdDSA => Inner::Ed(Ed25519KeyPair::from_pkcs8_maybe_unchecked(der)?),
        };
        Ok(Self { alg, inner })
    }

    pub fn alg(&self) -> KeyAlg {
        self.alg
    }

    /// Size of an RSA key in bits.
    pub fn rsa_bits(&self) -> Option<usize> {
        match &self.inner {
            Inner::Rsa(kp) => Some(kp.public_modulus_len() * 8),
            _ => None,
        }
    }

    /// The raw JWS signature of `msg`.
    pub fn sign(&self, msg: &[u8]) -> Result<Vec<u8>, CryptoError> {
        match &self.inner {
            Inner::Rsa(kp) => {
                let mut sig = vec![0u8; kp.public_modulus_len()];
                kp.sign(&RSA_PKCS1_SHA256, &SystemRandom::new(), msg, &mut sig)?;
                Ok(sig)
            }
            Inner::Ec(kp) => Ok(kp.sign(&SystemRandom::new(), msg)?.as_ref().to_vec()),
            Inner::Ed(kp) => Ok(kp.sign(msg).as_ref().to_vec()),
        }
    }

    /// The public half, parsed once, for verifying this key's signatures.
    pub fn verifier(&self) -> Result<ParsedPublicKey, CryptoError> {
        Ok(match &self.inner {
            Inner::Rsa(kp) => ParsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, kp.public_key().as_ref())?,
            Inner::Ec(kp) => ParsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, kp.public_key().as_ref())?,
            Inner::Ed(kp) => ParsedPublicKey::new(&ED25519, kp.public_key().as_ref())?,
        })
    }

    /// The public half as a JWK with `kid`, `use` and `alg`.
    pub fn public_jwk(&self, kid: &str) -> serde_json::Value {
        match &self.inner {
            Inner::Rsa(kp) => {
                let c = PublicKeyComponents::<Vec<u8>>::from(kp.public_key());
                json!({"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
                       "n": b64(&c.n), "e": b64(&c.e)})
            }
            Inner::Ec(kp) => {
                let point = kp.public_key().as_ref();
                // Uncompressed point: 0x04 || x || y.
                let (x, y) = point[1..].split_at(32);
                json!({"kty": "EC", "kid": kid, "use": "sig", "alg": "ES256", "crv": "P-256",
                       "x": b64(x), "y": b64(y)})
            }
            Inner::Ed(kp) => {
                json!({"kty": "OKP", "kid": kid, "use": "sig", "alg": "EdDSA", "crv": "Ed25519",
                       "x": b64(kp.public_key().as_ref())})
            }
        }
    }
}

/// An RSA key pair for a key file: the private key as PKCS#8 PEM (given to the caller once, not
/// kept) and the public key as SubjectPublicKeyInfo PEM (kept to verify assertions).
pub struct ClientKeyPair {
    pub private_pem: String,
    pub public_pem: String,
}

pub fn generate_client_key() -> Result<ClientKeyPair, CryptoError> {
    let kp = RsaKeyPair::generate(KeySize::Rsa2048)?;
    let private = AsDer::<aws_lc_rs::encoding::Pkcs8V1Der>::as_der(&kp)?;
    let public: PublicKeyX509Der = kp.public_key().as_der()?;
    Ok(ClientKeyPair {
        private_pem: super::pem::encode("PRIVATE KEY", private.as_ref()),
        public_pem: super::pem::encode("PUBLIC KEY", public.as_ref()),
    })
}

/// The family of an uploaded public key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PublicKeyFamily {
    Rsa,
    Ec,
    Ed,
}

/// The DER of the object identifier of the P-256 curve (1.2.840.10045.3.1.7), as an EC key's
/// SubjectPublicKeyInfo names its curve.
const P256_OID: [u8; 10] = [0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];

/// The bit length of the modulus of a PKCS#1 `RSAPublicKey` (`RSA PUBLIC KEY`: a SEQUENCE of
/// the INTEGERs n and e), which aws-lc reads only inside a SubjectPublicKeyInfo.
fn pkcs1_modulus_bits(der: &[u8]) -> Option<usize> {
    fn header(d: &[u8], tag: u8) -> Option<(usize, &[u8])> {
        let (&t, rest) = d.split_first()?;
        let (&l, rest) = rest.split_first()?;
        if t != tag {
            return None;
        }
        if l < 0x80 {
            return Some((usize::from(l), rest));
        }
        let n = usize::from(l & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        Some((rest[..n].iter().fold(0, |a, &b| (a << 8) | usize::from(b)), &rest[n..]))
    }
    let (_, seq) = header(der, 0x30)?;
    let (len, rest) = header(seq, 0x02)?;
    let n = rest.get(..len)?;
    let n = &n[n.iter().position(|&b| b != 0)?..];
    Some(n.len() * 8 - n[0].leading_zeros() as usize)
}

/// Checks that `pem` is a public key latch can verify signatures with: an RSA key of 2048 to
/// 8192 bits (RS256), an EC key on P-256 (ES256) or an Ed25519 key. Any other is refused when it is
/// registered, rather than accepted and then failing every assertion signed with it.
pub fn classify_public_pem(pem: &str) -> Option<PublicKeyFamily> {
    use jsonwebtoken::DecodingKey;
    let bytes = pem.as_bytes();
    let (label, der) = super::pem::decode(pem)?;
    if label != "PUBLIC KEY" && label != "RSA PUBLIC KEY" {
        return None;
    }
    if DecodingKey::from_rsa_pem(bytes).is_ok() {
        let bits = if label == "PUBLIC KEY" {
            aws_lc_rs::rsa::PublicEncryptingKey::from_der(&der).ok()?.key_size_bits()
        } else {
            pkcs1_modulus_bits(&der)?
        };
        (2048..=8192).contains(&bits).then_some(PublicKeyFamily::Rsa)
    } else if DecodingKey::from_ec_pem(bytes).is_ok() {
        der.windows(P256_OID.len()).any(|w| w == P256_OID).then_some(PublicKeyFamily::Ec)
    } else if DecodingKey::from_ed_pem(bytes).is_ok() {
        Some(PublicKeyFamily::Ed)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{Algorithm, DecodingKey, Validation};

    fn verify_with_jwk(alg: Algorithm, key: &SigningKey) {
        let header = b64(format!(r#"{{"alg":"{}","kid":"k1"}}"#, key.alg().as_str()).as_bytes());
        let payload = b64(br#"{"sub":"x","exp":99999999999}"#);
        let input = format!("{header}.{payload}");
        let sig = b64(&key.sign(input.as_bytes()).unwrap());
        let token = format!("{input}.{sig}");
        let jwk: jsonwebtoken::jwk::Jwk = serde_json::from_value(key.public_jwk("k1")).unwrap();
        let dk = DecodingKey::from_jwk(&jwk).unwrap();
        let mut v = Validation::new(alg);
        v.validate_aud = false;
        v.required_spec_claims.clear();
        jsonwebtoken::decode::<serde_json::Value>(&token, &dk, &v).unwrap();
    }

    #[test]
    fn only_keys_that_can_verify_an_assertion_are_taken() {
        let rsa1024 = "-----BEGIN PUBLIC KEY-----\n\
MIGfMA0GCSqGSIb3DQEBAQUAA4GNADCBiQKBgQDZlPhs3vZCQZQSHjOrPVvgvczH\n\
TObC135SQbob16Xp1rwxMviZoZVAU4wl+hMZMQxt1TzX0au/b1SbkOJB8gZyrxGc\n\
z6LSET1janRTtSkzT+o9QKEjjBjsHQuW8hK8Fcf4IiL18NKfd/0bTBdyKavjsC2s\n\
mXuq28uFuNjmrcEsLwIDAQAB\n\
-----END PUBLIC KEY-----\n";
        let p384 = "-----BEGIN PUBLIC KEY-----\n\
MHYwEAYHKoZIzj0CAQYFK4EEACIDYgAExAzGXteChXFl+mCfK/ZYPpSm15gMMW8W\n\
KMwoNCAA3Vmc2+V0kshwDQPlP4HsST3KYma9C+/g0TFx51SM8H69hYXjqyFXSvYe\n\
wDL17Dy4RaBjt0HCMFE7aYpUbfIE2eHc\n\
-----END PUBLIC KEY-----\n";
        assert_eq!(classify_public_pem(rsa1024), None, "RSA under 2048 bits");
        let pkcs1_1024 = "-----BEGIN RSA PUBLIC KEY-----\n\
MIGJAoGBANNEA8IYRtiqJB7YKslSGIhifpOIL0QQbiwEipYD9H1+NumVLsl5RUib\n\
yj7kSpJ52jkQuIVWD2+P7YbHkkyXfApsOej/EFi8YJKd0N7rSQrpGhOfQ5xJ+Dv3\n\
JgwmpE1meXasmjMicIqsYWtq3mnw2v9HJx2a6yHrTUSdyLqEcotHAgMBAAE=\n\
-----END RSA PUBLIC KEY-----\n";
        let pkcs1_2048 = "-----BEGIN RSA PUBLIC KEY-----\n\
MIIBCgKCAQEAoZ4cp9Bgc1BKKwMYSQMY1m1qTobj7JCyH2Nnbs1FL7ERZASpDwba\n\
lBZuqnQkm/ydAcsbDnMVxK8TAt7nROMb2F0Ur//yK1Efj9VDNmxqTBYc84+PCeRa\n\
0G1JcMnBcp0RIn0LFXs+LuA5HzLOAnxiCOa/pBM0YvLCeBhR4BKF2KV9/zTxtPmn\n\
o3r8m1qRjbtBJm82WNyHEbNJ7l/pWRRpWx02b8AkwDZGq5mxJMn9IBRVzzIO4O/b\n\
RLak7L9S/jejBAb4ZFGR9SfChxDj6hvXgjvUDbl46W5bT3bLXOpoTNH+d8WACMPC\n\
mzF9e2rb2dId928E1aL6d/fD1CzrBuxDyQIDAQAB\n\
-----END RSA PUBLIC KEY-----\n";
        assert_eq!(classify_public_pem(pkcs1_1024), None, "PKCS#1 RSA under 2048 bits");
        assert_eq!(classify_public_pem(pkcs1_2048), Some(PublicKeyFamily::Rsa));
        assert_eq!(pkcs1_modulus_bits(&[0x30, 0x03, 0x02, 0x81]), None, "truncated");
        assert_eq!(classify_public_pem(p384), None, "EC on P-384");
        assert_eq!(classify_public_pem(&generate_client_key().unwrap().public_pem), Some(PublicKeyFamily::Rsa));
        let p256 = "-----BEGIN PUBLIC KEY-----\n\
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEJqqkrblgxutKxqvtAyR4Ee2m472q\n\
gNdddkj3xB0cZXvamjoE5ng2jIFCPKxacWv4DMiA+qVrULeeyxdafw7VRg==\n\
-----END PUBLIC KEY-----\n";
        let ed25519 = "-----BEGIN PUBLIC KEY-----\n\
MCowBQYDK2VwAyEAloouq0zuJCZ+74C7uxyGHjlGi22ULc8ZWdiv6eTlICA=\n\
-----END PUBLIC KEY-----\n";
        assert_eq!(classify_public_pem(p256), Some(PublicKeyFamily::Ec));
        assert_eq!(classify_public_pem(ed25519), Some(PublicKeyFamily::Ed));
    }

    #[test]
    fn every_algorithm_signs_verifiably_and_reloads() {
        for (spec, alg) in [
            (KeySpec::Rsa { bits: 2048 }, Algorithm::RS256),
            (KeySpec::EcP256, Algorithm::ES256),
            (KeySpec::Ed25519, Algorithm::EdDSA),
        ] {
            let (key, der) = SigningKey::generate(spec).unwrap();
            verify_with_jwk(alg, &key);
            let again = SigningKey::from_pkcs8(spec.alg(), &der).unwrap();
            verify_with_jwk(alg, &again);
        }
    }

    #[test]
    fn spec_names_round_trip() {
        for spec in [KeySpec::Rsa { bits: 2048 }, KeySpec::Rsa { bits: 4096 }, KeySpec::EcP256, KeySpec::Ed25519] {
            assert_eq!(KeySpec::parse(&spec.name()), Some(spec));
        }
        assert_eq!(KeySpec::parse("rsa-"), None);
        assert_eq!(KeySpec::parse("dsa-1024"), None);
    }

    #[test]
    fn client_keys_are_usable_pem() {
        let kp = generate_client_key().unwrap();
        assert!(kp.private_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
        assert_eq!(classify_public_pem(&kp.public_pem), Some(PublicKeyFamily::Rsa));
        assert!(jsonwebtoken::EncodingKey::from_rsa_pem(kp.private_pem.as_bytes()).is_ok());
        assert_eq!(classify_public_pem("not a key"), None);
        assert_eq!(classify_public_pem(&kp.private_pem), None, "a private key is not a public key");
    }
}
