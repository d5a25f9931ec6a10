//! Token introspection (RFC 7662) at `POST /oauth/introspect`, for confidential clients allowed
//! to introspect (created with `gatehouse client add --introspect`).

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use serde_json::json;

use super::OAuthError;
use super::client_auth::ClientForm;
use crate::domain::resource::ResourceIndicator;
use crate::domain::secret::Secret;
use crate::state::AppState;
use crate::store::now;

/// `POST /oauth/introspect`: `{active: false}` for anything not a live access token (unknown,
/// expired, revoked, its grant revoked or its account disabled, or a scope beyond what its
/// consent now approves: the same lookup as every MCP request); otherwise
/// `active`, `scope`, `client_id`, `sub`, `aud`, `exp`, `iat`, `iss`, `token_type` (§2.2),
/// and two members of our own (§2.2 allows them) saying what the token reaches: `grant_type`,
/// the grant the token descends from (`authorization_code` for a person's consent in a
/// browser, `urn:ietf:params:oauth:grant-type:device_code` for one on the device page (RFC
/// 8628), `client_credentials` for a service client acting for its owner,
/// `urn:ietf:params:oauth:grant-type:jwt-bearer` for an enterprise identity assertion or a
/// workload's token (RFC 7523); a refreshed token names its family's first grant), and `project_id` when
/// the token reaches only that one project of `sub` (a project service client): a resource
/// server must not treat such a token as `sub`'s account-wide access.
///
/// Each introspecting client speaks for one resource: a registered resource's client (made by
/// `gatehouse resource add … --introspect`, its resource URL in its stored metadata) or, for
/// any other, Gatehouse's own MCP endpoint. A token bound to another resource is
/// `{active: false}` to it, so one resource server cannot learn of (or accept) tokens minted
/// for another (RFC 7662 §4, RFC 8707). The answer comes from the same validation-cached lookup
/// as every MCP request: no extra read.
pub async fn introspect(
    State(state): State<AppState>,
    ClientForm {
        client,
        params,
        mut reads,
    }: ClientForm,
) -> Result<impl IntoResponse, OAuthError> {
    if !client.can_introspect || !client.is_confidential() {
        return Err(OAuthError::UnauthorizedClient(
            "this client is not allowed to introspect tokens".into(),
        ));
    }
    let token = params
        .get("token")
        .ok_or_else(|| OAuthError::InvalidRequest("token is required".into()))?;
    let hash = Secret::from_presented(token.clone()).hash();
    let registered: Option<ResourceIndicator>;
    let audience = match client.metadata.get("resource").and_then(|r| r.as_str()) {
        Some(url) => {
            registered = ResourceIndicator::parse(url).ok();
            registered.as_ref()
        }
        None => Some(&state.config.resource),
    };
    // Counted, not audited: introspection is a hot path and writes nothing.
    crate::metrics::resource_token_event(
        crate::domain::audit::ResourceTokenEvent::Introspected,
        client
            .metadata
            .get("resource")
            .and_then(|r| r.as_str())
            .unwrap_or(&state.config.mcp_server_url),
    );
    let body = match reads.live_access_token(&hash, now()).await? {
        Some(g) if audience.is_some_and(|a| a.matches(&g.resource)) => {
            let mut body = json!({
                "active": true,
                "scope": g.scope,
                "client_id": g.client_id,
                "sub": g.account_id,
                "aud": g.resource,
                "exp": g.expires_at,
                "iat": g.issued_at,
                "iss": state.config.issuer,
                "token_type": if g.jkt.is_some() { crate::domain::dpop::TOKEN_TYPE } else { "Bearer" },
                "grant_type": g.grant_type,
            });
            if let Some(jkt) = &g.jkt {
                // RFC 9449 §6.2: the confirmation of a DPoP-bound token.
                body["cnf"] = json!({ "jkt": jkt });
            }
            if let Some(project) = &g.project_id {
                body["project_id"] = json!(project);
            }
            // The person's project choice (issue 37): the project ids the grant is limited
            // to; absent when it reaches every project of the account.
            if let Some(chosen) = g.chosen_projects.as_deref() {
                let ids: Vec<String> = serde_json::from_str(chosen).unwrap_or_default();
                body["gatehouse_projects"] = json!(ids);
            }
            body
        }
        _ => json!({"active": false}),
    };
    Ok(([(header::CACHE_CONTROL, "no-store")], Json(body)))
}
