//! Workload identities of service clients (table `workload_identities`, migration 0023): the
//! issuer and subject whose JWTs a service client redeems with the JWT-bearer grant
//! ([`crate::oauth::workload`]).

use super::{Store, StoreError};

/// The workload a service client stands for.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct WorkloadIdentity {
    /// The service client's `client_id`.
    pub client_id: String,
    /// The workload issuer's URL (the JWT's `iss`), as configured.
    pub issuer: String,
    /// The workload's `sub`.
    pub subject: String,
    /// The issuer's key set; `None`: named by the issuer's discovery document.
    pub jwks_uri: Option<String>,
}

impl Store {
    /// The workload identities of clients not revoked whose issuer is `issuer` (compared with
    /// and without one trailing slash), or whose `client_id` is `client_id`: at most a few
    /// rows, in one query.
    pub async fn workload_candidates(
        &self,
        issuer: &str,
        client_id: Option<&str>,
    ) -> Result<Vec<WorkloadIdentity>, StoreError> {
        let bare = issuer.strip_suffix('/').unwrap_or(issuer);
        Ok(sqlx::query_as(
            "SELECT w.client_id AS client_id, w.issuer AS issuer, w.subject AS subject, \
             w.jwks_uri AS jwks_uri FROM workload_identities w \
             JOIN oauth_clients c ON c.client_id = w.client_id \
             WHERE c.revoked_at IS NULL AND (w.issuer = $1 OR w.issuer = $2 OR w.client_id = $3) \
             ORDER BY w.created_at LIMIT 20",
        )
        .bind(bare)
        .bind(format!("{bare}/"))
        .bind(client_id)
        .fetch_all(&self.pool())
        .await?)
    }
}
