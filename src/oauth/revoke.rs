//! Token revocation (RFC 7009) at `POST /oauth/revoke`.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::client_auth::{authenticate_client, read_form};
use crate::domain::secret::Secret;
use crate::state::AppState;
use crate::store::audit::AuditEvent;
use crate::store::now;

/// `POST /oauth/revoke`: the client authenticates as registered; a refresh token revokes its
/// whole family, an access token itself. Unknown or foreign tokens answer 200 too (§2.2).
pub async fn revoke(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    let result = async {
        let params = read_form(&headers, body).await?;
        let client = authenticate_client(&state, &headers, &params).await?;
        let token = params
            .get("token")
            .ok_or_else(|| super::OAuthError::InvalidRequest("token is required".into()))?;
        let now = now();
        let hash = Secret::from_presented(token.clone()).hash();
        if let Some(family) = state
            .store
            .revoke_token(&hash, &client.client_id, now)
            .await?
        {
            crate::metrics::token_event("revoked");
            state
                .store
                .audit(
                    AuditEvent {
                        event: "family_revoked",
                        outcome: "success",
                        client_id: Some(&client.client_id),
                        subject: Some(&family),
                        detail: Some("revoked by the client"),
                        ..Default::default()
                    },
                    now,
                )
                .await;
        }
        Ok::<_, super::OAuthError>(())
    }
    .await;
    match result {
        Ok(()) => (StatusCode::OK, [(header::CACHE_CONTROL, "no-store")]).into_response(),
        Err(e) => e.into_response(),
    }
}
