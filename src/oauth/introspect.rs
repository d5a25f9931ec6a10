//! Token introspection (RFC 7662) at `POST /oauth/introspect`, for confidential clients allowed
//! to introspect (created with `gatehouse client add --introspect`).

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::OAuthError;
use super::client_auth::{authenticate_client, read_form};
use crate::domain::secret::Secret;
use crate::state::AppState;
use crate::store::now;

/// `POST /oauth/introspect`: `{active: false}` for anything not a live access token (unknown,
/// expired, revoked, its grant revoked or its account disabled, or a scope beyond what its
/// consent now approves: the same lookup as every MCP request); otherwise
/// `active`, `scope`, `client_id`, `sub`, `aud`, `exp`, `iat`, `iss`, `token_type` (§2.2).
pub async fn introspect(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    let result = async {
        let params = read_form(&headers, body).await?;
        let client = authenticate_client(&state, &headers, &params).await?;
        if !client.can_introspect || client.client_secret_hash.is_none() {
            return Err(OAuthError::UnauthorizedClient(
                "this client is not allowed to introspect tokens".into(),
            ));
        }
        let token = params
            .get("token")
            .ok_or_else(|| OAuthError::InvalidRequest("token is required".into()))?;
        let hash = Secret::from_presented(token.clone()).hash();
        Ok(match state.store.live_access_token(&hash, now()).await? {
            Some(g) => json!({
                "active": true,
                "scope": g.scope,
                "client_id": g.client_id,
                "sub": g.account_id,
                "aud": g.audience,
                "exp": g.expires_at,
                "iat": g.issued_at,
                "iss": state.config.issuer,
                "token_type": "Bearer",
            }),
            None => json!({"active": false}),
        })
    }
    .await;
    match result {
        Ok(v) => ([(header::CACHE_CONTROL, "no-store")], Json(v)).into_response(),
        Err(e) => e.into_response(),
    }
}
