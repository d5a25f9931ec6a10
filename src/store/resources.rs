//! The registry of resources (other MCP servers using Gatehouse as their authorization server;
//! [`crate::domain::registry`]). Read from the database whenever it is needed (authorization
//! requests, token requests for a registered resource, metadata), never cached, so every
//! running instance sees `gatehouse resource add|remove` at its next request.

use super::oauth::ClientRecord;
use super::{Store, StoreError};
use crate::domain::registry::{ResourceScope, TokenFormat};

/// A registered resource as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceRecord {
    /// Its name (`gatehouse resource add NAME`).
    pub name: String,
    /// Its URL: the normalised RFC 8707 resource indicator tokens are bound to (`aud`).
    pub url: String,
    /// Its scopes and their words for the consent page.
    pub scopes: Vec<ResourceScope>,
    /// The format of its access tokens.
    pub token_format: TokenFormat,
    /// Lifetime of its access tokens, in seconds.
    pub token_ttl: i64,
    /// The confidential client its server introspects with (RFC 7662), if any.
    pub introspection_client_id: Option<String>,
    /// Unix seconds.
    pub created_at: i64,
}

impl ResourceRecord {
    /// The scope tokens, in registration order.
    pub fn scope_names(&self) -> impl Iterator<Item = &str> {
        self.scopes.iter().map(|s| s.scope.as_str())
    }

    /// The words for `scope`, if it is one of this resource's.
    pub fn describe(&self, scope: &str) -> Option<&str> {
        self.scopes
            .iter()
            .find(|s| s.scope == scope)
            .map(|s| s.description.as_str())
    }
}

type Row = (String, String, String, String, i64, Option<String>, i64);

const COLUMNS: &str =
    "name, url, scopes, token_format, token_ttl, introspection_client_id, created_at";

fn record(row: Row) -> Result<ResourceRecord, StoreError> {
    let (name, url, scopes, format, token_ttl, introspection_client_id, created_at) = row;
    let scopes = serde_json::from_str(&scopes)
        .map_err(|e| StoreError::Database(sqlx::Error::Decode(Box::new(e))))?;
    let token_format = match format.as_str() {
        "jwt" => TokenFormat::Jwt,
        _ => TokenFormat::Opaque,
    };
    Ok(ResourceRecord {
        name,
        url,
        scopes,
        token_format,
        token_ttl,
        introspection_client_id,
        created_at,
    })
}

impl Store {
    /// Registers `resource`, and its introspection client first when `introspection` is given,
    /// in one transaction. Errors: [`StoreError::Conflict`] when the name or URL is taken.
    pub async fn add_resource(
        &self,
        resource: &ResourceRecord,
        introspection: Option<&ClientRecord>,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        if let Some(client) = introspection {
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
        }
        let scopes = serde_json::to_string(&resource.scopes)
            .map_err(|e| StoreError::Database(sqlx::Error::Encode(Box::new(e))))?;
        sqlx::query(&format!(
            "INSERT INTO resources ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"
        ))
        .bind(&resource.name)
        .bind(&resource.url)
        .bind(scopes)
        .bind(resource.token_format.as_str())
        .bind(resource.token_ttl)
        .bind(&resource.introspection_client_id)
        .bind(resource.created_at)
        .execute(&mut *tx)
        .await
        .map_err(|e| {
            StoreError::from_insert(
                e,
                &format!("resource {} or {}", resource.name, resource.url),
            )
        })?;
        tx.commit().await?;
        Ok(())
    }

    /// Every registered resource, by name.
    pub async fn resources(&self) -> Result<Vec<ResourceRecord>, StoreError> {
        let rows: Vec<Row> =
            sqlx::query_as(&format!("SELECT {COLUMNS} FROM resources ORDER BY name"))
                .fetch_all(&self.pool())
                .await?;
        rows.into_iter().map(record).collect()
    }

    /// The registered resource whose normalised URL is `url`, if any.
    pub async fn resource_by_url(&self, url: &str) -> Result<Option<ResourceRecord>, StoreError> {
        let row: Option<Row> =
            sqlx::query_as(&format!("SELECT {COLUMNS} FROM resources WHERE url = $1"))
                .bind(url)
                .fetch_optional(&self.pool())
                .await?;
        row.map(record).transpose()
    }

    /// The registered resource whose introspection client is `client_id`, if any.
    pub async fn resource_of_introspector(
        &self,
        client_id: &str,
    ) -> Result<Option<ResourceRecord>, StoreError> {
        let row: Option<Row> = sqlx::query_as(&format!(
            "SELECT {COLUMNS} FROM resources WHERE introspection_client_id = $1"
        ))
        .bind(client_id)
        .fetch_optional(&self.pool())
        .await?;
        row.map(record).transpose()
    }

    /// Removes the resource `name` at `now` (Unix seconds) in one transaction: every consent
    /// for it is revoked with its families and access tokens (tokens stop at once), unused
    /// codes for it are used up, its introspection client loses the right to introspect, and
    /// the row is deleted. Returns the removed record, `None` when there is no such resource.
    pub async fn remove_resource(
        &self,
        name: &str,
        now: i64,
    ) -> Result<Option<ResourceRecord>, StoreError> {
        let mut tx = self.begin_write().await?;
        let row: Option<Row> =
            sqlx::query_as(&format!("SELECT {COLUMNS} FROM resources WHERE name = $1"))
                .bind(name)
                .fetch_optional(&mut *tx)
                .await?;
        let Some(found) = row.map(record).transpose()? else {
            return Ok(None);
        };
        sqlx::query(
            "UPDATE access_tokens SET revoked_at = $1 WHERE revoked_at IS NULL AND family_id IN \
             (SELECT id FROM token_families WHERE resource = $2)",
        )
        .bind(now)
        .bind(&found.url)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE token_families SET revoked_at = $1, revoked_reason = 'resource_removed' \
             WHERE revoked_at IS NULL AND resource = $2",
        )
        .bind(now)
        .bind(&found.url)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE authorization_codes SET used_at = $1 WHERE used_at IS NULL AND resource = $2",
        )
        .bind(now)
        .bind(&found.url)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE consents SET revoked_at = $1 WHERE revoked_at IS NULL AND resource = $2",
        )
        .bind(now)
        .bind(&found.url)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM resources WHERE name = $1")
            .bind(name)
            .execute(&mut *tx)
            .await?;
        if let Some(client) = &found.introspection_client_id {
            sqlx::query("UPDATE oauth_clients SET can_introspect = 0 WHERE client_id = $1")
                .bind(client)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        self.auth_changed().await;
        Ok(Some(found))
    }
}
