//! The bearer lookup behind every MCP request: an access token's hash read together with its
//! refresh-token family, its consent (the grant) and its account, in one round trip.

use sqlx::Row;

use super::{Store, StoreError};
use crate::domain::secret::TokenHash;

/// What an access token carries and whether anything above it was revoked. The caller decides
/// (with the clock it read once) whether it is still good: see `mcp::auth`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessTokenGrant {
    /// The account the token acts for.
    pub account_id: String,
    /// The OAuth client it was issued to.
    pub client_id: String,
    /// Space-delimited scopes of the token.
    pub scope: String,
    /// The resource it is bound to (RFC 8707).
    pub audience: String,
    /// Unix seconds.
    pub expires_at: i64,
    /// The token, its family or its consent has been revoked.
    pub revoked: bool,
    /// The account's status is `active`.
    pub account_active: bool,
}

impl Store {
    /// Looks up an access token by its SHA-256, joined with its family, consent and account.
    /// `None` for an unknown token.
    pub async fn access_token_grant(
        &self,
        hash: &TokenHash,
    ) -> Result<Option<AccessTokenGrant>, StoreError> {
        let row = sqlx::query(
            "SELECT t.account_id AS account_id, t.client_id AS client_id, t.scope AS scope, \
             t.audience AS audience, t.expires_at AS expires_at, \
             CASE WHEN t.revoked_at IS NULL AND f.revoked_at IS NULL AND c.revoked_at IS NULL \
                  THEN 0 ELSE 1 END AS revoked, \
             a.status AS account_status \
             FROM access_tokens t \
             JOIN token_families f ON f.id = t.family_id \
             JOIN accounts a ON a.id = t.account_id \
             LEFT JOIN consents c ON c.id = f.consent_id \
             WHERE t.token_hash = $1",
        )
        .bind(hash.as_str())
        .fetch_optional(self.pool())
        .await?;
        row.map(|r| {
            let revoked: i64 = r.try_get("revoked")?;
            let status: String = r.try_get("account_status")?;
            Ok(AccessTokenGrant {
                account_id: r.try_get("account_id")?,
                client_id: r.try_get("client_id")?,
                scope: r.try_get("scope")?,
                audience: r.try_get("audience")?,
                expires_at: r.try_get("expires_at")?,
                revoked: revoked != 0,
                account_active: status == "active",
            })
        })
        .transpose()
    }
}
