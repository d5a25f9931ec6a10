//! The second factor's storage (issue 36, item 3): one TOTP authenticator per account
//! (`totp_factors`, its secret sealed with the server key) and single-use recovery codes
//! (`recovery_codes`, SHA-256 only). See `migrations/*/0051_second_factor.sql`.

use super::{Store, StoreError};
use crate::domain::secret::TokenHash;

/// An account's TOTP authenticator as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TotpFactor {
    /// The shared secret, sealed with the server key (context [`totp_seal_context`]).
    pub secret_sealed: String,
    /// Unix seconds.
    pub created_at: i64,
    /// When the person entered the first right code (Unix seconds); `None` while enrolling.
    pub confirmed_at: Option<i64>,
    /// The RFC 6238 time step of the last code accepted (0: none yet).
    pub last_step: i64,
}

/// The context a TOTP secret is sealed under: it opens for this account only.
pub fn totp_seal_context(account_id: &str) -> Vec<u8> {
    format!("totp:{account_id}").into_bytes()
}

impl Store {
    /// The account's TOTP authenticator, confirmed or being enrolled, if any.
    pub async fn totp_factor(&self, account_id: &str) -> Result<Option<TotpFactor>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT secret_sealed, created_at, confirmed_at, last_step FROM totp_factors \
             WHERE account_id = $1",
        )
        .bind(account_id)
        .fetch_optional(&self.pool())
        .await?)
    }

    /// Whether the account has a confirmed second factor (then a password sign-in asks for it).
    pub async fn has_second_factor(&self, account_id: &str) -> Result<bool, StoreError> {
        Ok(self
            .totp_factor(account_id)
            .await?
            .is_some_and(|f| f.confirmed_at.is_some()))
    }

    /// Starts (or starts again) enrolling a TOTP authenticator with the sealed secret: an
    /// unconfirmed one is replaced. Returns `false`, writing nothing, when the account already
    /// has a confirmed one.
    pub async fn start_totp(
        &self,
        account_id: &str,
        secret_sealed: &str,
        now: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO totp_factors (account_id, secret_sealed, created_at) VALUES ($1, $2, $3) \
             ON CONFLICT (account_id) DO UPDATE SET secret_sealed = excluded.secret_sealed, \
             created_at = excluded.created_at, last_step = 0 \
             WHERE totp_factors.confirmed_at IS NULL",
        )
        .bind(account_id)
        .bind(secret_sealed)
        .bind(now)
        .execute(&self.writer())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Confirms the account's TOTP authenticator being enrolled, with the code of time step
    /// `step`, and replaces its recovery codes with `codes` (SHA-256 hashes), atomically.
    /// Returns `false`, writing nothing, when there is no enrolment to confirm (already
    /// confirmed, or none).
    pub async fn confirm_totp(
        &self,
        account_id: &str,
        step: i64,
        codes: &[TokenHash],
        now: i64,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin_write().await?;
        let done = sqlx::query(
            "UPDATE totp_factors SET confirmed_at = $1, last_step = $2 \
             WHERE account_id = $3 AND confirmed_at IS NULL",
        )
        .bind(now)
        .bind(step)
        .bind(account_id)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() != 1 {
            return Ok(false);
        }
        sqlx::query("DELETE FROM recovery_codes WHERE account_id = $1")
            .bind(account_id)
            .execute(&mut *tx)
            .await?;
        for code in codes {
            sqlx::query(
                "INSERT INTO recovery_codes (code_hash, account_id, created_at) VALUES ($1, $2, $3)",
            )
            .bind(code.as_str())
            .bind(account_id)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    /// Accepts a TOTP code of time step `step` for the account's confirmed authenticator:
    /// `true` (and the step remembered) only when no code of this or a later step was accepted
    /// before (RFC 6238 §5.2: a code is accepted once).
    pub async fn accept_totp_step(&self, account_id: &str, step: i64) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE totp_factors SET last_step = $1 \
             WHERE account_id = $2 AND confirmed_at IS NOT NULL AND last_step < $1",
        )
        .bind(step)
        .bind(account_id)
        .execute(&self.writer())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Spends one of the account's recovery codes (by its SHA-256): `true` when it was unused.
    pub async fn use_recovery_code(
        &self,
        account_id: &str,
        code: &TokenHash,
        now: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE recovery_codes SET used_at = $1 \
             WHERE code_hash = $2 AND account_id = $3 AND used_at IS NULL",
        )
        .bind(now)
        .bind(code.as_str())
        .bind(account_id)
        .execute(&self.writer())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// How many unused recovery codes the account has.
    pub async fn recovery_codes_left(&self, account_id: &str) -> Result<i64, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT COUNT(*) AS n FROM recovery_codes WHERE account_id = $1 AND used_at IS NULL",
        )
        .bind(account_id)
        .fetch_one(&self.pool())
        .await?)
    }

    /// Removes the account's second factor: its TOTP authenticator and recovery codes.
    /// Returns whether it had a confirmed one.
    pub async fn remove_second_factor(&self, account_id: &str) -> Result<bool, StoreError> {
        let mut tx = self.begin_write().await?;
        let done = sqlx::query(
            "DELETE FROM totp_factors WHERE account_id = $1 AND confirmed_at IS NOT NULL",
        )
        .bind(account_id)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM recovery_codes WHERE account_id = $1")
            .bind(account_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }
}
