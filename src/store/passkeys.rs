//! Passkeys' storage (issue 36, item 2): the `WebAuthn` credentials of each account
//! (`passkeys`) and the ceremonies begun and not yet finished (`webauthn_ceremonies`, keyed by
//! the SHA-256 of the id the browser holds). See `migrations/*/0052_passkeys.sql`.

use super::{Store, StoreError};
use crate::domain::secret::TokenHash;

/// A passkey as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct StoredPasskey {
    /// Our id of the passkey (UUID text): what the account page names it by.
    pub id: String,
    /// The account it signs in to.
    pub account_id: String,
    /// The credential id, unpadded base64url.
    pub credential_id: String,
    /// The name the person gave it.
    pub name: String,
    /// The webauthn-rs `Passkey` as JSON (public key, counter, backup flags).
    pub passkey: String,
    /// Unix seconds.
    pub created_at: i64,
    /// The last sign-in with it (Unix seconds); `None`: never used.
    pub last_used_at: Option<i64>,
}

/// What a ceremony is for: the value of `webauthn_ceremonies.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CeremonyKind {
    /// Adding a passkey to a signed-in account.
    Register,
    /// Signing in with a discoverable passkey (no account known yet).
    SignIn,
}

impl CeremonyKind {
    fn as_str(self) -> &'static str {
        match self {
            CeremonyKind::Register => "register",
            CeremonyKind::SignIn => "signin",
        }
    }
}

/// A ceremony taken from the table (and so gone from it).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TakenCeremony {
    /// The account that began it (registration only).
    pub account_id: Option<String>,
    /// The name of the passkey being added (registration only).
    pub name: Option<String>,
    /// The webauthn-rs ceremony state as JSON.
    pub state: String,
}

const PASSKEY_COLUMNS: &str =
    "id, account_id, credential_id, name, passkey, created_at, last_used_at";

impl Store {
    /// The account's passkeys, oldest first.
    pub async fn passkeys_of(&self, account_id: &str) -> Result<Vec<StoredPasskey>, StoreError> {
        Ok(sqlx::query_as(&format!(
            "SELECT {PASSKEY_COLUMNS} FROM passkeys WHERE account_id = $1 \
             ORDER BY created_at, id"
        ))
        .bind(account_id)
        .fetch_all(&self.pool())
        .await?)
    }

    /// The passkey with this credential id (unpadded base64url), if any.
    pub async fn passkey_by_credential(
        &self,
        credential_id: &str,
    ) -> Result<Option<StoredPasskey>, StoreError> {
        Ok(sqlx::query_as(&format!(
            "SELECT {PASSKEY_COLUMNS} FROM passkeys WHERE credential_id = $1"
        ))
        .bind(credential_id)
        .fetch_optional(&self.pool())
        .await?)
    }

    /// Adds a passkey to the account and returns its id. Errors: [`StoreError::Conflict`] when
    /// the credential id is already registered (to any account).
    pub async fn add_passkey(
        &self,
        account_id: &str,
        credential_id: &str,
        name: &str,
        passkey_json: &str,
        now: i64,
    ) -> Result<String, StoreError> {
        let id = super::new_id();
        sqlx::query(
            "INSERT INTO passkeys (id, account_id, credential_id, name, passkey, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&id)
        .bind(account_id)
        .bind(credential_id)
        .bind(name)
        .bind(passkey_json)
        .bind(now)
        .execute(&self.writer())
        .await
        .map_err(|e| StoreError::from_insert(e, "passkey"))?;
        Ok(id)
    }

    /// Records a sign-in with the passkey at `now`, with its updated JSON (a new counter or
    /// backup state) when `passkey_json` is given. Returns `false` when the passkey is gone
    /// (removed meanwhile).
    pub async fn passkey_used(
        &self,
        id: &str,
        passkey_json: Option<&str>,
        now: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE passkeys SET last_used_at = $1, passkey = COALESCE($2, passkey) WHERE id = $3",
        )
        .bind(now)
        .bind(passkey_json)
        .bind(id)
        .execute(&self.writer())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Removes the account's passkey `id`; returns its name, `None` when the account has no
    /// such passkey.
    pub async fn remove_passkey(
        &self,
        account_id: &str,
        id: &str,
    ) -> Result<Option<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "DELETE FROM passkeys WHERE id = $1 AND account_id = $2 RETURNING name",
        )
        .bind(id)
        .bind(account_id)
        .fetch_optional(&self.writer())
        .await?)
    }

    /// Stores a ceremony begun, good until `expires_at` (Unix seconds); `id` is kept only as
    /// its SHA-256. Expired ceremonies are pruned on the way.
    #[allow(clippy::too_many_arguments)]
    pub async fn begin_ceremony(
        &self,
        id: &TokenHash,
        kind: CeremonyKind,
        account_id: Option<&str>,
        name: Option<&str>,
        state_json: &str,
        expires_at: i64,
        now: i64,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        sqlx::query("DELETE FROM webauthn_ceremonies WHERE expires_at <= $1")
            .bind(now)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO webauthn_ceremonies (id_hash, kind, account_id, name, state, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(id.as_str())
        .bind(kind.as_str())
        .bind(account_id)
        .bind(name)
        .bind(state_json)
        .bind(expires_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Takes the ceremony `id` of `kind` (and, for a registration, of `account_id`): deleted
    /// in the same statement, so no ceremony is taken twice. `None` when there is no such
    /// ceremony, it has expired, or it was already taken.
    pub async fn take_ceremony(
        &self,
        id: &TokenHash,
        kind: CeremonyKind,
        account_id: Option<&str>,
        now: i64,
    ) -> Result<Option<TakenCeremony>, StoreError> {
        let taken: Option<(Option<String>, Option<String>, String, i64)> = sqlx::query_as(
            "DELETE FROM webauthn_ceremonies WHERE id_hash = $1 AND kind = $2 \
             RETURNING account_id, name, state, expires_at",
        )
        .bind(id.as_str())
        .bind(kind.as_str())
        .fetch_optional(&self.writer())
        .await?;
        Ok(taken.and_then(|(owner, name, state, expires_at)| {
            (expires_at > now && owner.as_deref() == account_id).then_some(TakenCeremony {
                account_id: owner,
                name,
                state,
            })
        }))
    }
}
