//! Personal MCP URLs (issue "Credentials beyond the browser"): `<MCP path>/<secret>` for
//! clients that cannot send a header. Created and revoked from the command line, looked up by
//! the SHA-256 of the presented secret on every request (one query), their last use written at
//! most once a minute (the keys' mechanism, [`Store::record_key_use`]).

use super::keys::{KeyGrant, KeyUse, NewApiKey, Pick};
use super::{Store, StoreError};
use crate::domain::principal::IssuedCredential;
use crate::domain::secret::TokenHash;

/// A personal URL to create.
#[derive(Debug, Clone)]
pub struct NewPersonalUrl<'a> {
    /// The account it acts for.
    pub account_id: &'a str,
    /// The one project it reaches; `None`: every active project of the account.
    pub project_id: Option<&'a str>,
    /// Its name (checked by [`crate::domain::api_key::parse_name`]).
    pub name: &'a str,
    /// `mcp:read` or `mcp:read mcp:write`.
    pub scope: &'a str,
    /// Expiry, Unix seconds; `None`: none.
    pub expires_at: Option<i64>,
}

/// A personal URL as `gatehouse url list` shows it (never the secret).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct PersonalUrlRecord {
    /// URL id (UUID text): what `gatehouse url revoke` takes.
    pub id: String,
    /// The account it acts for.
    pub account_id: String,
    /// That account's email.
    #[sqlx(rename = "email")]
    pub account_email: String,
    /// The one project it reaches (`None`: every active project of the account).
    pub project_id: Option<String>,
    /// Its name.
    pub name: String,
    /// `mcp:read` or `mcp:read mcp:write`.
    pub scope: String,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds; `None`: no expiry.
    pub expires_at: Option<i64>,
    /// Unix seconds, to within a minute; `None`: never used.
    pub last_used_at: Option<i64>,
    /// Unix seconds; `None`: live.
    pub revoked_at: Option<i64>,
    /// The tools it may use, stored form of [`crate::domain::principal::ToolFilter`]
    /// (`None`: every tool).
    pub tool_filter: Option<String>,
}

impl Store {
    /// Stores a new personal URL under `hash` (the SHA-256 of its secret, which is not kept).
    /// Returns its id.
    pub async fn create_personal_url(
        &self,
        url: &NewPersonalUrl<'_>,
        hash: &TokenHash,
        now: i64,
    ) -> Result<String, StoreError> {
        let new = NewApiKey {
            account_id: url.account_id,
            project_id: url.project_id,
            name: url.name,
            scope: url.scope,
            allowed_ips: &[],
            expires_at: url.expires_at,
        };
        self.insert_credential(IssuedCredential::PersonalUrl, &new, hash, now)
            .await
    }

    /// Every personal URL, or those of one account, oldest first.
    pub async fn personal_urls(
        &self,
        account_id: Option<&str>,
    ) -> Result<Vec<PersonalUrlRecord>, StoreError> {
        self.credentials(IssuedCredential::PersonalUrl, Pick::Account(account_id))
            .await
    }

    /// One personal URL by id.
    pub async fn personal_url(&self, id: &str) -> Result<Option<PersonalUrlRecord>, StoreError> {
        Ok(self
            .credentials(IssuedCredential::PersonalUrl, Pick::Id(id))
            .await?
            .pop())
    }

    /// Revokes a personal URL at once. Returns `false` if it was already revoked.
    ///
    /// Errors: [`StoreError::NotFound`] for an unknown id.
    pub async fn revoke_personal_url(&self, id: &str, now: i64) -> Result<bool, StoreError> {
        self.revoke_credential(IssuedCredential::PersonalUrl, id, now)
            .await
    }

    /// The live personal URL whose secret's SHA-256 is `hash`, in one query, with the same
    /// conditions as [`Store::authenticate_api_key`] (not revoked, not expired at `now`, an
    /// active account, and for a project URL an active project the account is a member of).
    /// The grant has no address allow-list.
    pub async fn authenticate_personal_url(
        &self,
        hash: &TokenHash,
        now: i64,
    ) -> Result<Option<KeyGrant>, StoreError> {
        Ok(self
            .personal_url_lookup(hash, now)
            .await?
            .map(|(grant, _)| grant))
    }

    /// [`Store::authenticate_personal_url`] with the URL's expiry (Unix seconds, `None`: none).
    pub(crate) async fn personal_url_lookup(
        &self,
        hash: &TokenHash,
        now: i64,
    ) -> Result<Option<(KeyGrant, Option<i64>)>, StoreError> {
        self.credential_lookup(IssuedCredential::PersonalUrl, hash, now)
            .await
    }

    /// Writes a use of personal URL `id` at `now`, at most once a minute across requests and
    /// instances (see [`Store::record_key_use`]).
    pub async fn record_url_use(
        &self,
        id: &str,
        first: bool,
        now: i64,
    ) -> Result<KeyUse, StoreError> {
        self.record_use(IssuedCredential::PersonalUrl, id, first, now)
            .await
    }
}
