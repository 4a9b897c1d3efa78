//! Cryptography, all through aws-lc-rs (and the argon2 crate for password hashes; bcrypt, scrypt
//! and sha-crypt for hashes imported from other systems).

pub mod aead;
pub mod hashes;
pub mod keys;
pub mod password;
pub mod pem;
pub mod secret;
pub mod totp;

/// Makes aws-lc-rs the TLS provider of the process (outgoing HTTPS: buckets, service-account
/// token endpoints). Call before the first HTTP client is built; later calls do nothing.
pub fn install_tls_provider() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

#[derive(Debug, thiserror::Error)]
pub enum CryptoError {
    #[error("decryption failed: wrong key or tampered data")]
    Decrypt,
    #[error("key rejected: {0}")]
    KeyRejected(String),
    #[error("cryptographic operation failed")]
    Unspecified,
}

impl From<aws_lc_rs::error::Unspecified> for CryptoError {
    fn from(_: aws_lc_rs::error::Unspecified) -> Self {
        CryptoError::Unspecified
    }
}

impl From<aws_lc_rs::error::KeyRejected> for CryptoError {
    fn from(e: aws_lc_rs::error::KeyRejected) -> Self {
        CryptoError::KeyRejected(e.to_string())
    }
}
