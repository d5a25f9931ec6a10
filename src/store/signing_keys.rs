//! Keys that sign JWT access tokens (RFC 9068): at most one current key, retired keys kept
//! published until the tokens they signed have expired ([`crate::oauth::jwt`]).

use super::{Store, StoreError};

/// A stored signing key.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SigningKeyRecord {
    /// Its key id (`kid`).
    pub kid: String,
    /// The PKCS#8 private key sealed with the server key (the kid as associated data).
    pub sealed_key: String,
    /// The public key as a JWK (RFC 7517), JSON text.
    pub public_jwk: String,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds it stopped signing; `None` for the current key.
    pub retired_at: Option<i64>,
}

impl Store {
    /// The current signing key, if there is one.
    pub async fn current_signing_key(&self) -> Result<Option<SigningKeyRecord>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT kid, sealed_key, public_jwk, created_at, retired_at FROM signing_keys \
             WHERE retired_at IS NULL",
        )
        .fetch_optional(&self.pool())
        .await?)
    }

    /// Stores `key` as the current signing key unless another one already is (two instances
    /// creating one at the same moment: the first wins, the other's is dropped). Returns
    /// whether it was stored.
    pub async fn insert_signing_key(&self, key: &SigningKeyRecord) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO signing_keys (kid, sealed_key, public_jwk, created_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT DO NOTHING",
        )
        .bind(&key.kid)
        .bind(&key.sealed_key)
        .bind(&key.public_jwk)
        .bind(key.created_at)
        .execute(&self.writer())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// The keys to publish at `now`: the current one and those retired after `retired_since`
    /// (their tokens may still be live), newest first.
    pub async fn published_signing_keys(
        &self,
        retired_since: i64,
    ) -> Result<Vec<SigningKeyRecord>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT kid, sealed_key, public_jwk, created_at, retired_at FROM signing_keys \
             WHERE retired_at IS NULL OR retired_at > $1 ORDER BY created_at DESC, kid",
        )
        .bind(retired_since)
        .fetch_all(&self.pool())
        .await?)
    }

    /// Retires the current signing key at `now` (the next token signed gets a new key) and
    /// deletes keys retired at or before `retired_before` (every token they signed has
    /// expired). Returns the kid retired, if there was a current key.
    pub async fn retire_signing_key(
        &self,
        now: i64,
        retired_before: i64,
    ) -> Result<Option<String>, StoreError> {
        let mut tx = self.begin_write().await?;
        sqlx::query("DELETE FROM signing_keys WHERE retired_at IS NOT NULL AND retired_at <= $1")
            .bind(retired_before)
            .execute(&mut *tx)
            .await?;
        let kid: Option<String> = sqlx::query_scalar(
            "UPDATE signing_keys SET retired_at = $1 WHERE retired_at IS NULL RETURNING kid",
        )
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(kid)
    }
}
