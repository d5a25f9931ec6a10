//! Browsers that signed in before (table `signin_devices`, migration 0016): the device cookie
//! a successful sign-in sets is stored as its SHA-256, with its account and expiry
//! ([`crate::signin`] decides what a recognised device may do).

use super::{Store, StoreError};
use crate::domain::secret::TokenHash;

/// Most recognised browsers kept per account; a new sign-in past it forgets the oldest.
pub const MAX_DEVICES_PER_ACCOUNT: i64 = 20;

impl Store {
    /// The account a device cookie (its SHA-256) was given to, if it is on record and not
    /// expired at `now` (Unix seconds).
    ///
    /// Errors: [`StoreError::Database`].
    pub async fn device_account(
        &self,
        hash: &TokenHash,
        now: i64,
    ) -> Result<Option<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT account_id FROM signin_devices WHERE device_hash = $1 AND expires_at > $2",
        )
        .bind(hash.as_str())
        .bind(now)
        .fetch_optional(&self.pool())
        .await?)
    }

    /// Records a device cookie (its SHA-256) for `account_id` until `expires_at`, and forgets
    /// the account's oldest devices beyond [`MAX_DEVICES_PER_ACCOUNT`].
    ///
    /// Errors: [`StoreError::Database`].
    pub async fn remember_device(
        &self,
        hash: &TokenHash,
        account_id: &str,
        now: i64,
        expires_at: i64,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO signin_devices (device_hash, account_id, created_at, expires_at) \
             VALUES ($1, $2, $3, $4)",
        )
        .bind(hash.as_str())
        .bind(account_id)
        .bind(now)
        .bind(expires_at)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "DELETE FROM signin_devices WHERE account_id = $1 AND device_hash NOT IN \
             (SELECT device_hash FROM signin_devices WHERE account_id = $1 \
              ORDER BY created_at DESC, device_hash LIMIT $2)",
        )
        .bind(account_id)
        .bind(MAX_DEVICES_PER_ACCOUNT)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Forgets a device cookie (its SHA-256): replaced at sign-in, or burnt by a wrong
    /// password sent with it while the account's delay ran.
    ///
    /// Errors: [`StoreError::Database`].
    pub async fn forget_device(&self, hash: &TokenHash) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM signin_devices WHERE device_hash = $1")
            .bind(hash.as_str())
            .execute(&self.writer())
            .await?;
        Ok(())
    }

    /// Forgets every device of `account_id` (its password changed, or it signed out
    /// everywhere).
    ///
    /// Errors: [`StoreError::Database`].
    pub async fn forget_devices(&self, account_id: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM signin_devices WHERE account_id = $1")
            .bind(account_id)
            .execute(&self.writer())
            .await?;
        Ok(())
    }
}
