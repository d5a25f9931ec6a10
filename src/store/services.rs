//! Service clients and their `client_credentials` tokens (RFC 6749 §4.4; product spec
//! "Personal MCP URLs and service clients").
//!
//! A service client is a confidential OAuth client acting for its owner account (or one project
//! of it). It is created with one consent row (redirect URI empty: there is no browser flow) and
//! one token family, and every access token it gets descends from that family, so the one-query
//! access-token lookup ([`Store::authenticate_access_token`]) checks a service token like any
//! other: consent and family live, account active, scope within the consent. Revoking the
//! consent (the owner's Connected apps page) cuts the service off.

use super::oauth::ClientRecord;
use super::workloads::WorkloadIdentity;
use super::{Store, StoreError, new_id};
use crate::domain::grant::GrantType;
use crate::domain::secret::TokenHash;

/// What a service client acts for.
#[derive(Debug, Clone)]
pub struct NewService<'a> {
    /// The owner account.
    pub account_id: &'a str,
    /// The one project it reaches; `None`: every active project of the owner.
    pub project_id: Option<&'a str>,
    /// The most it may get: `mcp:read` or `mcp:read mcp:write`.
    pub scope: &'a str,
    /// The resource its tokens are bound to (`MCP_SERVER_URL`).
    pub resource: &'a str,
    /// The issuer that creates it.
    pub issuer: &'a str,
}

/// A live service client, as the token endpoint needs it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ServiceClient {
    /// Its `client_id`.
    pub client_id: String,
    /// The owner account (active).
    pub account_id: String,
    /// The one project it reaches, if limited to one.
    pub project_id: Option<String>,
    /// The most it may get (the consent's scope).
    pub scope: String,
    /// The family its tokens descend from (live).
    pub family_id: String,
}

impl Store {
    /// Creates a confidential client `client` that acts for `service` in one transaction:
    /// the client, its consent, its token family and the service row.
    ///
    /// Errors: [`StoreError::Conflict`] if the client id exists.
    pub async fn create_service_client(
        &self,
        client: &ClientRecord,
        service: &NewService<'_>,
        now: i64,
    ) -> Result<(), StoreError> {
        self.create_service_client_with(client, service, None, now)
            .await
    }

    /// [`Store::create_service_client`] for a client that stands for a workload
    /// (`workload.client_id` is `client.client_id`), its workload identity recorded in the
    /// same transaction.
    ///
    /// Errors: [`StoreError::Conflict`] if the client id exists or another client stands for
    /// this issuer and subject.
    pub async fn create_workload_client(
        &self,
        client: &ClientRecord,
        service: &NewService<'_>,
        workload: &WorkloadIdentity,
        now: i64,
    ) -> Result<(), StoreError> {
        self.create_service_client_with(client, service, Some(workload), now)
            .await
    }

    async fn create_service_client_with(
        &self,
        client: &ClientRecord,
        service: &NewService<'_>,
        workload: Option<&WorkloadIdentity>,
        now: i64,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO oauth_clients (client_id, client_secret_hash, auth_method, client_name, redirect_uris, \
             grant_types, scope, metadata, can_introspect, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(&client.client_id)
        .bind(client.client_secret_hash.as_ref().map(|h| h.as_str().to_string()))
        .bind(&client.token_endpoint_auth_method)
        .bind(&client.client_name)
        .bind(serde_json::Value::from(client.redirect_uris.clone()).to_string())
        .bind(serde_json::Value::from(client.grant_types.clone()).to_string())
        .bind(&client.scope)
        .bind(client.metadata.to_string())
        .bind(i64::from(client.can_introspect))
        .bind(client.created_at)
        .execute(&mut *tx)
        .await
        .map_err(|e| StoreError::from_insert(e, &format!("client {}", client.client_id)))?;
        let consent_id = new_id();
        sqlx::query(
            "INSERT INTO consents (id, account_id, client_id, redirect_uri, scope, created_at, updated_at) \
             VALUES ($1, $2, $3, '', $4, $5, $5)",
        )
        .bind(&consent_id)
        .bind(service.account_id)
        .bind(&client.client_id)
        .bind(service.scope)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        let family_id = new_id();
        sqlx::query(
            "INSERT INTO token_families (id, account_id, client_id, consent_id, scope, resource, issuer, created_at, grant_type) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'client_credentials')",
        )
        .bind(&family_id)
        .bind(service.account_id)
        .bind(&client.client_id)
        .bind(&consent_id)
        .bind(service.scope)
        .bind(service.resource)
        .bind(service.issuer)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO service_clients (client_id, account_id, project_id, scope, consent_id, family_id, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&client.client_id)
        .bind(service.account_id)
        .bind(service.project_id)
        .bind(service.scope)
        .bind(&consent_id)
        .bind(&family_id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        if let Some(w) = workload {
            sqlx::query(
                "INSERT INTO workload_identities (client_id, issuer, subject, jwks_uri, created_at) \
                 VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(&w.client_id)
            .bind(&w.issuer)
            .bind(&w.subject)
            .bind(&w.jwks_uri)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(|e| {
                StoreError::from_insert(
                    e,
                    &format!(
                        "a workload client for subject {} of {}",
                        w.subject, w.issuer
                    ),
                )
            })?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The service behind `client_id` if it is one and is live (consent and family not revoked,
    /// owner active); `None` for any other client.
    pub async fn service_client(
        &self,
        client_id: &str,
    ) -> Result<Option<ServiceClient>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT s.client_id AS client_id, s.account_id AS account_id, s.project_id AS project_id, c.scope AS scope, \
             s.family_id AS family_id \
             FROM service_clients s \
             JOIN consents c ON c.id = s.consent_id \
             JOIN token_families f ON f.id = s.family_id \
             JOIN accounts a ON a.id = s.account_id \
             WHERE s.client_id = $1 AND c.revoked_at IS NULL AND f.revoked_at IS NULL \
             AND a.status = 'active'",
        )
        .bind(client_id)
        .fetch_optional(&self.pool())
        .await?)
    }

    /// Whether `client_id` was created as a service client (live or not).
    pub async fn is_service_client(&self, client_id: &str) -> Result<bool, StoreError> {
        Ok(
            sqlx::query("SELECT 1 AS one FROM service_clients WHERE client_id = $1")
                .bind(client_id)
                .fetch_optional(&self.pool())
                .await?
                .is_some(),
        )
    }

    /// Stores an access token (only its SHA-256) for `service` in its family, bound to
    /// `resource`, with `scope`, expiring at `expires_at` (Unix seconds), bound to the DPoP key
    /// whose thumbprint is `jkt` (RFC 9449 §6; `None`: a bearer token), issued by `grant_type`
    /// (what introspection names). No refresh token.
    #[allow(clippy::too_many_arguments)]
    pub async fn insert_service_token(
        &self,
        service: &ServiceClient,
        hash: &TokenHash,
        scope: &str,
        resource: &str,
        now: i64,
        expires_at: i64,
        jkt: Option<&str>,
        grant_type: GrantType,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO access_tokens (token_hash, family_id, account_id, client_id, scope, audience, created_at, expires_at, jkt, grant_type) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(hash.as_str())
        .bind(&service.family_id)
        .bind(&service.account_id)
        .bind(&service.client_id)
        .bind(scope)
        .bind(resource)
        .bind(now)
        .bind(expires_at)
        .bind(jkt)
        .bind(grant_type.as_str())
        .execute(&self.writer())
        .await?;
        Ok(())
    }
}
