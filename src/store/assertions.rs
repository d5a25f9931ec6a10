//! Spent one-time proofs, each accepted once by every instance sharing the database:
//! - client assertions (table `client_assertion_jtis`, migration 0020): each `jti` of an
//!   accepted `private_key_jwt` assertion is recorded until the assertion expires (RFC 7523
//!   §3 rule 7);
//! - confirmations of destructive upstream calls (table `spent_confirmations`, migration
//!   0074): each `requestState` answered is recorded until it expires
//!   ([`crate::mcp::upstream::confirm`]).

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

    /// Spends the confirmation state `state_hash` (the SHA-256 of a sealed `requestState` of
    /// [`crate::mcp::upstream::confirm`]), valid until `expires_at` (Unix seconds): `true`
    /// the first time, `false` once it was spent (a replay). One conditional statement, so
    /// concurrent uses on any number of instances cannot both win.
    ///
    /// Errors: [`StoreError::Database`].
    pub async fn spend_confirmation(
        &self,
        state_hash: &TokenHash,
        expires_at: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO spent_confirmations (state_hash, expires_at) VALUES ($1, $2) \
             ON CONFLICT (state_hash) DO NOTHING",
        )
        .bind(state_hash.as_str())
        .bind(expires_at)
        .execute(&self.writer())
        .await?;
        Ok(done.rows_affected() == 1)
    }
}
