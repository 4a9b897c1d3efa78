//! Password hashes. New hashes are argon2id with the OWASP parameters (19 MiB, t=2, p=1),
//! computed on the blocking pool; a semaphore bounds how many run at once so memory stays flat
//! under a login storm. Hashes imported in other formats verify through [`super::hashes`].

use std::sync::Arc;

use argon2::password_hash::{PasswordHash, PasswordHasher as _, PasswordVerifier as _, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use tokio::sync::Semaphore;

use super::hashes::{self, HashError};
use super::secret::random_bytes;

#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    #[error("the stored password hash is unusable: {0}")]
    Stored(#[from] HashError),
    #[error("password hashing failed: {0}")]
    Hashing(String),
}

/// argon2id parameters.
#[derive(Clone, Copy, Debug)]
pub struct Argon2Params {
    pub memory_kib: u32,
    pub iterations: u32,
    pub parallelism: u32,
}

impl Default for Argon2Params {
    /// OWASP's recommendation: 19 MiB, two passes, one lane.
    fn default() -> Self {
        Self { memory_kib: 19 * 1024, iterations: 2, parallelism: 1 }
    }
}

#[derive(Clone)]
pub struct PasswordHasher {
    params: Argon2Params,
    permits: Arc<Semaphore>,
    /// A hash of a random password, verified against when the user is unknown so that unknown
    /// and known users take the same time.
    dummy: Arc<std::sync::OnceLock<String>>,
}

impl std::fmt::Debug for PasswordHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PasswordHasher").field("params", &self.params).finish()
    }
}

impl PasswordHasher {
    /// `concurrency` hashes may run at once (one per core is the sensible bound).
    pub fn new(params: Argon2Params, concurrency: usize) -> Self {
        Self {
            params,
            permits: Arc::new(Semaphore::new(concurrency.max(1))),
            dummy: Arc::new(std::sync::OnceLock::new()),
        }
    }

    /// Spends the time of one verification, for a user that does not exist.
    pub async fn verify_nobody(&self, password: &str) {
        let params = self.params;
        let dummy = self.dummy.clone();
        let hash = match dummy.get() {
            Some(h) => h.clone(),
            None => {
                let h = tokio::task::spawn_blocking(move || Self::hash_blocking(params, &super::secret::new_secret()))
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .unwrap_or_default();
                dummy.get_or_init(|| h).clone()
            }
        };
        let _ = self.verify(password, &hash).await;
    }

    /// Whether a stored hash should be replaced by one with the current parameters.
    pub fn needs_rehash(&self, stored: &str) -> bool {
        let p = self.params;
        !stored.starts_with(&format!("$argon2id$v=19$m={},t={},p={}$", p.memory_kib, p.iterations, p.parallelism))
    }

    pub fn params(&self) -> Argon2Params {
        self.params
    }

    fn argon2(params: Argon2Params) -> Result<Argon2<'static>, PasswordError> {
        let p = Params::new(params.memory_kib, params.iterations, params.parallelism, None)
            .map_err(|e| PasswordError::Hashing(e.to_string()))?;
        Ok(Argon2::new(Algorithm::Argon2id, Version::V0x13, p))
    }

    /// Hashes synchronously (for start-up and benchmarks).
    pub fn hash_blocking(params: Argon2Params, password: &str) -> Result<String, PasswordError> {
        let salt = SaltString::encode_b64(&random_bytes::<16>()).map_err(|e| PasswordError::Hashing(e.to_string()))?;
        Self::argon2(params)?
            .hash_password(password.as_bytes(), &salt)
            .map(|h| h.to_string())
            .map_err(|e| PasswordError::Hashing(e.to_string()))
    }

    /// Verifies synchronously. argon2 hashes verify here with whatever parameters they carry
    /// (latch's own may exceed the import bounds, within the configuration's); every other format
    /// goes through [`hashes::verify`].
    pub fn verify_blocking(password: &str, stored: &str) -> Result<bool, PasswordError> {
        match PasswordHash::new(stored) {
            Ok(parsed) if parsed.algorithm.as_str().starts_with("argon2") => {
                Ok(Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok())
            }
            _ => Ok(hashes::verify(stored, password)?),
        }
    }

    pub async fn hash(&self, password: &str) -> Result<String, PasswordError> {
        let _permit = self.permits.acquire().await.map_err(|e| PasswordError::Hashing(e.to_string()))?;
        let params = self.params;
        let password = password.to_string();
        tokio::task::spawn_blocking(move || Self::hash_blocking(params, &password))
            .await
            .map_err(|e| PasswordError::Hashing(e.to_string()))?
    }

    pub async fn verify(&self, password: &str, stored: &str) -> Result<bool, PasswordError> {
        let _permit = self.permits.acquire().await.map_err(|e| PasswordError::Hashing(e.to_string()))?;
        let password = password.to_string();
        let stored = stored.to_string();
        tokio::task::spawn_blocking(move || Self::verify_blocking(&password, &stored))
            .await
            .map_err(|e| PasswordError::Hashing(e.to_string()))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_and_verify() {
        let p = Argon2Params { memory_kib: 1024, iterations: 1, parallelism: 1 };
        let h = PasswordHasher::hash_blocking(p, "Password1!").unwrap();
        assert!(h.starts_with("$argon2id$v=19$m=1024,t=1,p=1$"));
        assert!(PasswordHasher::verify_blocking("Password1!", &h).unwrap());
        assert!(!PasswordHasher::verify_blocking("password1!", &h).unwrap());
        assert!(PasswordHasher::verify_blocking("x", "$2b$10$abc").is_err());
        // Imported formats delegate to `hashes` (Auth0's bcrypt of "password2").
        let bcrypt = "$2b$10$JyDM8jzGYVTdDzZaPAQ2Lu2uZ7xFA3dgQNoHGblMmpkkeIfG2GEYa";
        assert!(PasswordHasher::verify_blocking("password2", bcrypt).unwrap());
        assert!(!PasswordHasher::verify_blocking("password1", bcrypt).unwrap());
    }
}
