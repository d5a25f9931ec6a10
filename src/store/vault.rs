//! Connections to per-person upstreams (`upstream add --per-person-oauth`): how Gatehouse is
//! an OAuth client there (`upstream_oauth`), the links given to MCP clients
//! (`connection_requests`), the authorization requests in flight (`connection_states`) and the
//! vault of each person's grant (`upstream_grants`).
//!
//! Tokens, client secrets and PKCE verifiers arrive sealed with the server key
//! ([`crate::domain::server_key`]); random handles (`state`, link ids) are stored as their
//! SHA-256 only. This layer never sees a secret in the clear.

use sqlx::Row;

use super::upstreams::NewUpstream;
use super::{Store, StoreError};

/// How Gatehouse is registered as a client at a per-person upstream's authorization server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamOAuth {
    /// The upstream's name.
    pub upstream: String,
    /// RFC 8707 `resource`: the upstream's MCP URL as its protected-resource metadata names it.
    pub resource: String,
    /// The authorization server's issuer identifier (RFC 8414 §2).
    pub issuer: String,
    /// Where people are sent to sign in and consent.
    pub authorization_endpoint: String,
    /// Where codes and refresh tokens are redeemed.
    pub token_endpoint: String,
    /// RFC 7009 revocation endpoint, when the server has one.
    pub revocation_endpoint: Option<String>,
    /// `pre-registered`, `dynamic` (RFC 7591) or `metadata-document` (a client ID metadata
    /// document Gatehouse serves).
    pub registration: String,
    /// The client ID there.
    pub client_id: String,
    /// The client secret, sealed; `None` for a public client.
    pub client_secret_sealed: Option<String>,
    /// The scope asked for (`None`: the server's default).
    pub scope: Option<String>,
}

/// An authorization request in flight, as the callback finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionState {
    /// The upstream it is for.
    pub upstream: String,
    /// The person who started it.
    pub account_id: String,
    /// SHA-256 hex of the browser's binding secret.
    pub session_hash: String,
    /// The MCP client whose call led to it, if any.
    pub client_id: Option<String>,
    /// The PKCE verifier, sealed.
    pub verifier_sealed: String,
}

/// A person's grant at an upstream, tokens sealed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The person.
    pub account_id: String,
    /// The upstream.
    pub upstream: String,
    /// The access token, sealed.
    pub access_sealed: String,
    /// The refresh token, sealed, if one was issued.
    pub refresh_sealed: Option<String>,
    /// When the access token ends (Unix seconds), if the server said.
    pub expires_at: Option<i64>,
    /// The scope granted.
    pub scope: Option<String>,
    /// The MCP client whose call led to the connection.
    pub client_id: Option<String>,
    /// Connected (Unix seconds).
    pub connected_at: i64,
    /// Last used for a call (Unix seconds), at a minute's precision.
    pub last_used_at: Option<i64>,
    /// Until when a refresh is under way (Unix seconds; 0: none).
    pub refresh_lease_until: i64,
}

/// What a refresh brought, sealed.
#[derive(Debug, Clone, Copy)]
pub struct Refreshed<'a> {
    /// The new access token, sealed.
    pub access_sealed: &'a str,
    /// The new refresh token, sealed, if one was issued.
    pub refresh_sealed: Option<&'a str>,
    /// When the new access token ends (Unix seconds), if the server said.
    pub expires_at: Option<i64>,
    /// The scope granted, if the server said.
    pub scope: Option<&'a str>,
}

/// A link given to an MCP client, as the start page finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionRequest {
    /// The upstream.
    pub upstream: String,
    /// The only person the link works for.
    pub account_id: String,
    /// The MCP client that asked.
    pub client_id: Option<String>,
}

const GRANT_COLUMNS: &str = "account_id, upstream, access_sealed, refresh_sealed, expires_at, scope, \
     client_id, connected_at, last_used_at, refresh_lease_until";

fn grant_of(row: &sqlx::any::AnyRow) -> Result<Grant, sqlx::Error> {
    Ok(Grant {
        account_id: row.try_get("account_id")?,
        upstream: row.try_get("upstream")?,
        access_sealed: row.try_get("access_sealed")?,
        refresh_sealed: row.try_get("refresh_sealed")?,
        expires_at: row.try_get("expires_at")?,
        scope: row.try_get("scope")?,
        client_id: row.try_get("client_id")?,
        connected_at: row.try_get("connected_at")?,
        last_used_at: row.try_get("last_used_at")?,
        refresh_lease_until: row.try_get("refresh_lease_until")?,
    })
}

fn oauth_of(row: &sqlx::any::AnyRow) -> Result<UpstreamOAuth, sqlx::Error> {
    Ok(UpstreamOAuth {
        upstream: row.try_get("upstream")?,
        resource: row.try_get("resource")?,
        issuer: row.try_get("issuer")?,
        authorization_endpoint: row.try_get("authorization_endpoint")?,
        token_endpoint: row.try_get("token_endpoint")?,
        revocation_endpoint: row.try_get("revocation_endpoint")?,
        registration: row.try_get("registration")?,
        client_id: row.try_get("client_id")?,
        client_secret_sealed: row.try_get("client_secret_sealed")?,
        scope: row.try_get("scope")?,
    })
}

impl Store {
    /// Adds a per-person upstream: the registry entry ([`Store::create_upstream`]) and how
    /// Gatehouse is a client there, in one transaction (both or neither).
    ///
    /// Errors: [`StoreError::Conflict`] when the name is taken.
    pub async fn create_per_person_upstream(
        &self,
        new: &NewUpstream,
        oauth: &UpstreamOAuth,
        now: i64,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO upstreams (name, transport, url, header_names, timeout_ms, max_concurrency, \
             trust_definitions, enabled, accounts, projects, created_at, updated_at) \
             VALUES ($1, 'http', $2, '[]', $3, $4, $5, 1, $6, $7, $8, $8)",
        )
        .bind(&new.name)
        .bind(new.url.as_deref())
        .bind(new.timeout_ms)
        .bind(new.max_concurrency)
        .bind(i64::from(new.trust_definitions))
        .bind(
            new.accounts
                .as_deref()
                .map(|a| serde_json::Value::from(a.to_vec()).to_string()),
        )
        .bind(
            new.projects
                .as_deref()
                .map(|p| serde_json::Value::from(p.to_vec()).to_string()),
        )
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(|e| StoreError::from_insert(e, &format!("upstream {}", new.name)))?;
        sqlx::query(
            "INSERT INTO upstream_oauth (upstream, resource, issuer, authorization_endpoint, \
             token_endpoint, revocation_endpoint, registration, client_id, client_secret_sealed, \
             scope, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(&oauth.upstream)
        .bind(&oauth.resource)
        .bind(&oauth.issuer)
        .bind(&oauth.authorization_endpoint)
        .bind(&oauth.token_endpoint)
        .bind(oauth.revocation_endpoint.as_deref())
        .bind(&oauth.registration)
        .bind(&oauth.client_id)
        .bind(oauth.client_secret_sealed.as_deref())
        .bind(oauth.scope.as_deref())
        .bind(now)
        .execute(&mut *tx)
        .await?;
        sqlx::query("UPDATE upstream_registry SET version = version + 1 WHERE id = 1")
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// How Gatehouse is a client of the per-person upstream `upstream`; `None` when the
    /// upstream is not per person (or does not exist).
    pub async fn upstream_oauth(
        &self,
        upstream: &str,
    ) -> Result<Option<UpstreamOAuth>, StoreError> {
        let row = sqlx::query("SELECT * FROM upstream_oauth WHERE upstream = $1")
            .bind(upstream)
            .fetch_optional(&self.pool())
            .await?;
        Ok(row.as_ref().map(oauth_of).transpose()?)
    }

    /// Every per-person upstream's client settings, by name.
    pub async fn upstream_oauths(&self) -> Result<Vec<UpstreamOAuth>, StoreError> {
        let rows = sqlx::query("SELECT * FROM upstream_oauth ORDER BY upstream")
            .fetch_all(&self.pool())
            .await?;
        Ok(rows.iter().map(oauth_of).collect::<Result<_, _>>()?)
    }

    /// Records a link given to an MCP client for `account_id` (valid until `expires_at`);
    /// links past their end are deleted on the way.
    pub async fn create_connection_request(
        &self,
        id_hash: &str,
        request: &ConnectionRequest,
        expires_at: i64,
        now: i64,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        sqlx::query("DELETE FROM connection_requests WHERE expires_at < $1")
            .bind(now)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO connection_requests (id_hash, upstream, account_id, client_id, expires_at) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(id_hash)
        .bind(&request.upstream)
        .bind(&request.account_id)
        .bind(request.client_id.as_deref())
        .bind(expires_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The link whose id hashes to `id_hash`, if it has not ended.
    pub async fn connection_request(
        &self,
        id_hash: &str,
        now: i64,
    ) -> Result<Option<ConnectionRequest>, StoreError> {
        let row = sqlx::query(
            "SELECT upstream, account_id, client_id FROM connection_requests \
             WHERE id_hash = $1 AND expires_at >= $2",
        )
        .bind(id_hash)
        .bind(now)
        .fetch_optional(&self.pool())
        .await?;
        Ok(row
            .map(|r| -> Result<ConnectionRequest, sqlx::Error> {
                Ok(ConnectionRequest {
                    upstream: r.try_get("upstream")?,
                    account_id: r.try_get("account_id")?,
                    client_id: r.try_get("client_id")?,
                })
            })
            .transpose()?)
    }

    /// Records an authorization request in flight; states past their end are deleted on
    /// the way.
    pub async fn create_connection_state(
        &self,
        state_hash: &str,
        state: &ConnectionState,
        expires_at: i64,
        now: i64,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        sqlx::query("DELETE FROM connection_states WHERE expires_at < $1")
            .bind(now)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO connection_states (state_hash, upstream, account_id, session_hash, \
             client_id, verifier_sealed, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(state_hash)
        .bind(&state.upstream)
        .bind(&state.account_id)
        .bind(&state.session_hash)
        .bind(state.client_id.as_deref())
        .bind(&state.verifier_sealed)
        .bind(expires_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Takes (reads and deletes, once) the state whose hash is `state_hash`, if it has not
    /// ended: a second take of the same state finds nothing.
    pub async fn take_connection_state(
        &self,
        state_hash: &str,
        now: i64,
    ) -> Result<Option<ConnectionState>, StoreError> {
        let mut tx = self.begin_write().await?;
        let row = sqlx::query(
            "DELETE FROM connection_states WHERE state_hash = $1 \
             RETURNING upstream, account_id, session_hash, client_id, verifier_sealed, expires_at",
        )
        .bind(state_hash)
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        let Some(row) = row else {
            return Ok(None);
        };
        if row.try_get::<i64, _>("expires_at")? < now {
            return Ok(None);
        }
        Ok(Some(ConnectionState {
            upstream: row.try_get("upstream")?,
            account_id: row.try_get("account_id")?,
            session_hash: row.try_get("session_hash")?,
            client_id: row.try_get("client_id")?,
            verifier_sealed: row.try_get("verifier_sealed")?,
        }))
    }

    /// Stores (or replaces) a person's grant at an upstream.
    pub async fn put_grant(&self, grant: &Grant) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        sqlx::query("DELETE FROM upstream_grants WHERE account_id = $1 AND upstream = $2")
            .bind(&grant.account_id)
            .bind(&grant.upstream)
            .execute(&mut *tx)
            .await?;
        sqlx::query(&format!(
            "INSERT INTO upstream_grants ({GRANT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 0)"
        ))
        .bind(&grant.account_id)
        .bind(&grant.upstream)
        .bind(&grant.access_sealed)
        .bind(grant.refresh_sealed.as_deref())
        .bind(grant.expires_at)
        .bind(grant.scope.as_deref())
        .bind(grant.client_id.as_deref())
        .bind(grant.connected_at)
        .bind(grant.last_used_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// A person's grant at an upstream, if any.
    pub async fn grant(
        &self,
        account_id: &str,
        upstream: &str,
    ) -> Result<Option<Grant>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {GRANT_COLUMNS} FROM upstream_grants WHERE account_id = $1 AND upstream = $2"
        ))
        .bind(account_id)
        .bind(upstream)
        .fetch_optional(&self.pool())
        .await?;
        Ok(row.as_ref().map(grant_of).transpose()?)
    }

    /// Every grant of a person, by upstream.
    pub async fn grants_of(&self, account_id: &str) -> Result<Vec<Grant>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {GRANT_COLUMNS} FROM upstream_grants WHERE account_id = $1 ORDER BY upstream"
        ))
        .bind(account_id)
        .fetch_all(&self.pool())
        .await?;
        Ok(rows.iter().map(grant_of).collect::<Result<_, _>>()?)
    }

    /// Takes the right to refresh a grant until `until`, if no one holds it now and the grant
    /// still holds the refresh token `refresh_sealed` (so that of two callers that read the
    /// same grant, only one rotates its refresh token, on any instance). Returns whether it
    /// was taken.
    pub async fn lease_grant_refresh(
        &self,
        account_id: &str,
        upstream: &str,
        refresh_sealed: &str,
        now: i64,
        until: i64,
    ) -> Result<bool, StoreError> {
        let taken = sqlx::query(
            "UPDATE upstream_grants SET refresh_lease_until = $5 \
             WHERE account_id = $1 AND upstream = $2 AND refresh_sealed = $3 AND refresh_lease_until < $4",
        )
        .bind(account_id)
        .bind(upstream)
        .bind(refresh_sealed)
        .bind(now)
        .bind(until)
        .execute(&self.writer())
        .await?
        .rows_affected();
        Ok(taken == 1)
    }

    /// Stores the tokens of a refresh and ends the lease (a refresh token or scope not sent
    /// again keeps the one stored, RFC 6749 §6).
    pub async fn finish_grant_refresh(
        &self,
        account_id: &str,
        upstream: &str,
        tokens: &Refreshed<'_>,
        now: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE upstream_grants SET access_sealed = $3, refresh_sealed = COALESCE($4, refresh_sealed), \
             expires_at = $5, scope = COALESCE($6, scope), refreshed_at = $7, refresh_lease_until = 0 \
             WHERE account_id = $1 AND upstream = $2",
        )
        .bind(account_id)
        .bind(upstream)
        .bind(tokens.access_sealed)
        .bind(tokens.refresh_sealed)
        .bind(tokens.expires_at)
        .bind(tokens.scope)
        .bind(now)
        .execute(&self.writer())
        .await?;
        Ok(())
    }

    /// Ends a refresh lease without a change (the token endpoint could not be reached: the
    /// grant is kept for the next try).
    pub async fn release_grant_refresh(
        &self,
        account_id: &str,
        upstream: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE upstream_grants SET refresh_lease_until = 0 WHERE account_id = $1 AND upstream = $2",
        )
        .bind(account_id)
        .bind(upstream)
        .execute(&self.writer())
        .await?;
        Ok(())
    }

    /// Forgets a person's grant at an upstream. Returns whether there was one.
    pub async fn delete_grant(&self, account_id: &str, upstream: &str) -> Result<bool, StoreError> {
        let removed =
            sqlx::query("DELETE FROM upstream_grants WHERE account_id = $1 AND upstream = $2")
                .bind(account_id)
                .bind(upstream)
                .execute(&self.writer())
                .await?
                .rows_affected();
        Ok(removed > 0)
    }

    /// Notes that a grant was used at `now`, writing at most once a minute per grant.
    pub async fn touch_grant(
        &self,
        account_id: &str,
        upstream: &str,
        now: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE upstream_grants SET last_used_at = $3 WHERE account_id = $1 AND upstream = $2 \
             AND (last_used_at IS NULL OR last_used_at < $4)",
        )
        .bind(account_id)
        .bind(upstream)
        .bind(now)
        .bind(now - 60)
        .execute(&self.writer())
        .await?;
        Ok(())
    }
}
