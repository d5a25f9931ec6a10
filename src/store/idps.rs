//! The registry of trusted identity providers (`identity_providers`, migration 0045), the
//! links between a provider's subject and an account (`identity_links`), and the provider
//! sign-ins under way (`idp_signins`).
//!
//! Client secrets and the sign-ins' nonce and PKCE verifier arrive sealed with the server key
//! ([`crate::domain::server_key`]); this layer stores and returns them as opaque text. Every
//! instance reads the registry from the database when a sign-in or an assertion needs it, so a
//! change reaches every instance at once.

use sqlx::Row;

use super::{Store, StoreError};
use crate::domain::secret::TokenHash;

/// A trusted identity provider as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityProvider {
    /// `[a-z0-9-]{1,20}`.
    pub name: String,
    /// The issuer URL (`iss` of its tokens, base of its discovery document).
    pub issuer: String,
    /// The sign-in button's words; `None`: the name.
    pub display_name: Option<String>,
    /// Sign-in: our client id at the provider; `None`: not used for sign-in.
    pub client_id: Option<String>,
    /// Sign-in: the client secret, sealed ([`crate::domain::idp::client_secret_context`]).
    pub client_secret_sealed: Option<String>,
    /// The email domains whose people it may sign in or link; `None`: any.
    pub domains: Option<Vec<String>>,
    /// A first sign-in with no account for its email may make one.
    pub create_accounts: bool,
    /// Assertions: the key set its assertions are verified with.
    pub jwks_uri: Option<String>,
    /// Trusted for ID-JAG assertions.
    pub assertions: bool,
    /// Added (Unix seconds).
    pub created_at: i64,
}

impl IdentityProvider {
    /// Whether it signs people in (has a client id).
    pub fn signs_in(&self) -> bool {
        self.client_id.is_some()
    }

    /// The words of its sign-in button.
    pub fn label(&self) -> &str {
        self.display_name.as_deref().unwrap_or(&self.name)
    }
}

/// A provider sign-in under way, taken back once by the callback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingSignin {
    /// The provider's name.
    pub provider: String,
    /// Sealed JSON with the nonce and PKCE verifier ([`crate::domain::idp::signin_context`]).
    pub sealed: String,
    /// Where the browser goes once signed in (already checked to stay on this server).
    pub next: String,
}

const COLUMNS: &str = "name, issuer, display_name, client_id, client_secret_sealed, domains, \
     create_accounts, jwks_uri, assertions, created_at";

fn provider_of(row: &sqlx::any::AnyRow) -> Result<IdentityProvider, sqlx::Error> {
    let domains: Option<String> = row.try_get("domains")?;
    Ok(IdentityProvider {
        name: row.try_get("name")?,
        issuer: row.try_get("issuer")?,
        display_name: row.try_get("display_name")?,
        client_id: row.try_get("client_id")?,
        client_secret_sealed: row.try_get("client_secret_sealed")?,
        domains: domains.and_then(|d| serde_json::from_str(&d).ok()),
        create_accounts: row.try_get::<i64, _>("create_accounts")? != 0,
        jwks_uri: row.try_get("jwks_uri")?,
        assertions: row.try_get::<i64, _>("assertions")? != 0,
        created_at: row.try_get("created_at")?,
    })
}

impl Store {
    /// Adds a provider.
    ///
    /// Errors: [`StoreError::Conflict`] when the name is taken.
    pub async fn create_identity_provider(&self, p: &IdentityProvider) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO identity_providers (name, issuer, display_name, client_id, \
             client_secret_sealed, domains, create_accounts, jwks_uri, assertions, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(&p.name)
        .bind(&p.issuer)
        .bind(p.display_name.as_deref())
        .bind(p.client_id.as_deref())
        .bind(p.client_secret_sealed.as_deref())
        .bind(
            p.domains
                .as_ref()
                .map(|d| serde_json::Value::from(d.clone()).to_string()),
        )
        .bind(i64::from(p.create_accounts))
        .bind(p.jwks_uri.as_deref())
        .bind(i64::from(p.assertions))
        .bind(p.created_at)
        .execute(&self.writer())
        .await
        .map_err(|e| StoreError::from_insert(e, &format!("identity provider {}", p.name)))?;
        Ok(())
    }

    /// Every provider, by name.
    pub async fn identity_providers(&self) -> Result<Vec<IdentityProvider>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM identity_providers ORDER BY name"
        ))
        .fetch_all(&self.pool())
        .await?;
        Ok(rows
            .iter()
            .map(provider_of)
            .collect::<Result<Vec<_>, _>>()?)
    }

    /// The provider named `name`, if any.
    pub async fn identity_provider(
        &self,
        name: &str,
    ) -> Result<Option<IdentityProvider>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM identity_providers WHERE name = $1"
        ))
        .bind(name)
        .fetch_optional(&self.pool())
        .await?;
        Ok(row.as_ref().map(provider_of).transpose()?)
    }

    /// The providers trusted for assertions whose issuer is `issuer` (exactly).
    pub async fn assertion_providers(
        &self,
        issuer: &str,
    ) -> Result<Vec<IdentityProvider>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM identity_providers WHERE issuer = $1 AND assertions = 1 \
             ORDER BY name"
        ))
        .bind(issuer)
        .fetch_all(&self.pool())
        .await?;
        Ok(rows
            .iter()
            .map(provider_of)
            .collect::<Result<Vec<_>, _>>()?)
    }

    /// Removes a provider with its links and the sign-ins under way at it.
    ///
    /// Errors: [`StoreError::NotFound`] when no provider has that name.
    pub async fn remove_identity_provider(&self, name: &str) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        sqlx::query("DELETE FROM idp_signins WHERE provider = $1")
            .bind(name)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM identity_links WHERE provider = $1")
            .bind(name)
            .execute(&mut *tx)
            .await?;
        let done = sqlx::query("DELETE FROM identity_providers WHERE name = $1")
            .bind(name)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound(format!("identity provider {name}")));
        }
        tx.commit().await?;
        Ok(())
    }

    /// How many accounts are linked to each provider: (name, count).
    pub async fn identity_link_counts(&self) -> Result<Vec<(String, i64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT provider, COUNT(*) AS n FROM identity_links GROUP BY provider ORDER BY provider",
        )
        .fetch_all(&self.pool())
        .await?;
        Ok(rows
            .iter()
            .map(|r| Ok((r.try_get("provider")?, r.try_get("n")?)))
            .collect::<Result<Vec<_>, sqlx::Error>>()?)
    }

    /// The account linked to `provider`'s `subject`, if any; the link's last use becomes
    /// `now`.
    pub async fn linked_account(
        &self,
        provider: &str,
        subject: &str,
        now: i64,
    ) -> Result<Option<String>, StoreError> {
        let row = sqlx::query(
            "UPDATE identity_links SET last_used_at = $3 WHERE provider = $1 AND subject = $2 \
             RETURNING account_id",
        )
        .bind(provider)
        .bind(subject)
        .bind(now)
        .fetch_optional(&self.writer())
        .await?;
        Ok(row.map(|r| r.try_get("account_id")).transpose()?)
    }

    /// Links `provider`'s `subject` to `account_id`.
    ///
    /// Errors: [`StoreError::Conflict`] when the subject is linked already (to any account).
    pub async fn link_identity(
        &self,
        provider: &str,
        subject: &str,
        account_id: &str,
        now: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO identity_links (provider, subject, account_id, created_at, last_used_at) \
             VALUES ($1, $2, $3, $4, $4)",
        )
        .bind(provider)
        .bind(subject)
        .bind(account_id)
        .bind(now)
        .execute(&self.writer())
        .await
        .map_err(|e| StoreError::from_insert(e, &format!("link {provider} {subject}")))?;
        Ok(())
    }

    /// Makes an active account for `email` and links `provider`'s `subject` to it, in one
    /// transaction. The account's password hash is `password_hash` (a value no password
    /// verifies against, for an account that signs in through its provider).
    ///
    /// Errors: [`StoreError::Conflict`] when the email has an account or the subject a link.
    pub async fn create_linked_account(
        &self,
        email: &crate::domain::account::Email,
        password_hash: &str,
        provider: &str,
        subject: &str,
        now: i64,
    ) -> Result<super::accounts::Account, StoreError> {
        let mut tx = self.begin_write().await?;
        let account = super::accounts::insert_account(&mut *tx, email, password_hash, now).await?;
        sqlx::query(
            "INSERT INTO identity_links (provider, subject, account_id, created_at, last_used_at) \
             VALUES ($1, $2, $3, $4, $4)",
        )
        .bind(provider)
        .bind(subject)
        .bind(&account.id)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(|e| StoreError::from_insert(e, &format!("link {provider} {subject}")))?;
        tx.commit().await?;
        Ok(account)
    }

    /// Records a provider sign-in under way under the SHA-256 of its `state`, until
    /// `expires_at` (Unix seconds); expired ones are swept in the same call.
    ///
    /// Errors: [`StoreError::Database`].
    pub async fn begin_idp_signin(
        &self,
        state_hash: &TokenHash,
        pending: &PendingSignin,
        expires_at: i64,
        now: i64,
    ) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM idp_signins WHERE expires_at <= $1")
            .bind(now)
            .execute(&self.writer())
            .await?;
        sqlx::query(
            "INSERT INTO idp_signins (state_hash, provider, sealed, next, expires_at) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(state_hash.as_str())
        .bind(&pending.provider)
        .bind(&pending.sealed)
        .bind(&pending.next)
        .bind(expires_at)
        .execute(&self.writer())
        .await?;
        Ok(())
    }

    /// Takes the sign-in under way whose `state` hashes to `state_hash`: removed in the same
    /// statement, so it is taken once on every instance; `None` when unknown, taken already or
    /// expired at `now`.
    ///
    /// Errors: [`StoreError::Database`].
    pub async fn take_idp_signin(
        &self,
        state_hash: &TokenHash,
        now: i64,
    ) -> Result<Option<PendingSignin>, StoreError> {
        let row = sqlx::query(
            "DELETE FROM idp_signins WHERE state_hash = $1 \
             RETURNING provider, sealed, next, expires_at",
        )
        .bind(state_hash.as_str())
        .fetch_optional(&self.writer())
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        if row.try_get::<i64, _>("expires_at")? <= now {
            return Ok(None);
        }
        Ok(Some(PendingSignin {
            provider: row.try_get("provider")?,
            sealed: row.try_get("sealed")?,
            next: row.try_get("next")?,
        }))
    }

    /// Records an access token issued for an identity assertion (ID-JAG): the live consent of
    /// `account_id` for `client_id` under [`crate::domain::client_assertion::JWT_BEARER_GRANT`] is made or
    /// widened to `scope` (so the client shows on Connected apps and can be revoked there),
    /// then a token family of its own and the access token (its SHA-256 `access_hash`, bound to
    /// `resource`, expiring at `expires_at`, bound to the DPoP key `jkt` if any) are inserted
    /// in one transaction. No refresh token.
    ///
    /// Errors: [`StoreError::Database`].
    #[allow(clippy::too_many_arguments)]
    pub async fn issue_assertion_token(
        &self,
        account_id: &str,
        client_id: &str,
        scope: &str,
        resource: &str,
        issuer: &str,
        access_hash: &TokenHash,
        now: i64,
        expires_at: i64,
        jkt: Option<&str>,
    ) -> Result<(), StoreError> {
        let consent_id = self
            .approve_consent_for(
                account_id,
                client_id,
                crate::domain::client_assertion::JWT_BEARER_GRANT,
                super::oauth::BUILT_IN,
                scope,
                now,
            )
            .await?;
        let family_id = super::new_id();
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO token_families (id, account_id, client_id, consent_id, scope, resource, issuer, created_at, grant_type) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(&family_id)
        .bind(account_id)
        .bind(client_id)
        .bind(&consent_id)
        .bind(scope)
        .bind(resource)
        .bind(issuer)
        .bind(now)
        .bind(crate::domain::client_assertion::JWT_BEARER_GRANT)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO access_tokens (token_hash, family_id, account_id, client_id, scope, audience, created_at, expires_at, jkt) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(access_hash.as_str())
        .bind(&family_id)
        .bind(account_id)
        .bind(client_id)
        .bind(scope)
        .bind(resource)
        .bind(now)
        .bind(expires_at)
        .bind(jkt)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }
}
