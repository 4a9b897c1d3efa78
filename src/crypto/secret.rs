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

#[cfg(test)]
mod tests {
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
