//! Spent client assertions (table `client_assertion_jtis`, migration 0020): each `jti` of an
//! accepted `private_key_jwt` assertion is recorded until the assertion expires, so that it
//! is accepted once by every instance sharing the database (RFC 7523 §3 rule 7).

use super::{Store, StoreError};
use crate::domain::secret::TokenHash;

impl Store {
    /// Spends the assertion `jti_hash` (the SHA-256 of its `jti`) of `client_id`, valid until
    /// `expires_at` (Unix seconds): `true` the first time, `false` while an earlier use has not
    /// expired at `now` (a replay). One conditional statement, so concurrent uses on any
    /// number of instances cannot both win.
    ///
    /// Errors: [`StoreError::Database`].
    pub async fn spend_client_assertion(
        &self,
        client_id: &str,
        jti_hash: &TokenHash,
        expires_at: i64,
        now: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO client_assertion_jtis (client_id, jti_hash, expires_at) VALUES ($1, $2, $3) \
             ON CONFLICT (client_id, jti_hash) DO UPDATE SET expires_at = excluded.expires_at \
             WHERE client_assertion_jtis.expires_at <= $4",
        )
        .bind(client_id)
        .bind(jti_hash.as_str())
        .bind(expires_at)
        .bind(now)
        .execute(&self.writer())
        .await?;
        Ok(done.rows_affected() == 1)
    }
}
