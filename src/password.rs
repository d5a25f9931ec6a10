//! Password hashing with argon2id (RFC 9106), run off the async runtime.
//!
//! Parameters follow the OWASP Password Storage Cheat Sheet's first argon2id configuration:
//! 19 MiB of memory, 2 iterations, 1 degree of parallelism. Verification of an unknown email runs
//! against a dummy hash so that timing does not reveal which emails exist.

use std::sync::OnceLock;

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use rand::rngs::OsRng;

/// Memory cost in KiB (19 MiB).
pub const MEMORY_KIB: u32 = 19 * 1024;
/// Iterations.
pub const ITERATIONS: u32 = 2;
/// Lanes.
pub const PARALLELISM: u32 = 1;

fn hasher() -> Argon2<'static> {
    let params = Params::new(MEMORY_KIB, ITERATIONS, PARALLELISM, None)
        .expect("argon2 parameters are valid constants");
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// Errors from hashing.
#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    /// argon2 refused the input.
    #[error("password hashing failed: {0}")]
    Hash(String),
    /// The blocking task was lost.
    #[error("password hashing task failed")]
    Join,
}

fn hash_blocking(password: &str) -> Result<String, PasswordError> {
    let salt = SaltString::generate(&mut OsRng);
    hasher()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| PasswordError::Hash(e.to_string()))
}

fn dummy_hash() -> &'static str {
    static DUMMY: OnceLock<String> = OnceLock::new();
    DUMMY.get_or_init(|| {
        hash_blocking("gatehouse-dummy-password-for-timing").expect("dummy hash must succeed")
    })
}

/// Hashes a password into an argon2id PHC string, on the blocking thread pool.
pub async fn hash_password(password: String) -> Result<String, PasswordError> {
    tokio::task::spawn_blocking(move || hash_blocking(&password))
        .await
        .map_err(|_| PasswordError::Join)?
}

/// Verifies `password` against `stored` (a PHC string), on the blocking thread pool. With
/// `stored = None` (unknown account) it verifies against a dummy hash and returns `false`, so both
/// paths cost the same.
pub async fn verify_password(password: String, stored: Option<String>) -> bool {
    tokio::task::spawn_blocking(move || {
        let known = stored.is_some();
        let phc = stored.unwrap_or_else(|| dummy_hash().to_string());
        let ok = match PasswordHash::new(&phc) {
            Ok(parsed) => hasher()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok(),
            Err(_) => false,
        };
        ok && known
    })
    .await
    .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hashes_are_argon2id_with_owasp_parameters_and_verify() {
        let h = hash_password("a-long-password".into()).await.unwrap();
        assert!(h.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{h}");
        assert!(verify_password("a-long-password".into(), Some(h.clone())).await);
        assert!(!verify_password("wrong-password".into(), Some(h)).await);
        assert!(!verify_password("a-long-password".into(), None).await);
    }
}
