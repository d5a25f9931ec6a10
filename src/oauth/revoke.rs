//! Token revocation (RFC 7009) at `POST /oauth/revoke`.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;

use super::OAuthError;
use super::client_auth::ClientForm;
use crate::domain::audit::{Event, Outcome};
use crate::domain::secret::Secret;
use crate::state::AppState;
use crate::store::audit::AuditEvent;
use crate::store::now;

/// `POST /oauth/revoke`: the client authenticates as registered; a refresh token revokes its
/// whole family, an access token itself. Unknown or foreign tokens answer 200 too (§2.2).
pub async fn revoke(
    State(state): State<AppState>,
    ClientForm { client, params, .. }: ClientForm,
) -> Result<impl IntoResponse, OAuthError> {
    let token = params
        .get("token")
        .ok_or_else(|| OAuthError::InvalidRequest("token is required".into()))?;
    let now = now();
    let hash = Secret::from_presented(token.clone()).hash();
    if let Some(family) = state
        .store
        .revoke_token(&hash, &client.client_id, now)
        .await?
    {
        crate::metrics::token_event(crate::domain::audit::TokenEvent::Revoked);
        let row = AuditEvent {
            client_id: Some(&client.client_id),
            subject: Some(&family),
            detail: Some("revoked by the client"),
            ..AuditEvent::new(Event::FamilyRevoked, Outcome::Success)
        };
        state.store.audit(row, now).await;
    }
    Ok((StatusCode::OK, [(header::CACHE_CONTROL, "no-store")]))
}
