//! Authorization-server metadata (RFC 8414) and the ChatGPT Apps domain-verification token.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::config::Config;
use crate::state::AppState;

/// The grant types a registered client may use (dynamic registration accepts only these).
pub const GRANT_TYPES: [&str; 2] = ["authorization_code", "refresh_token"];
/// The grant types the token endpoint accepts: [`GRANT_TYPES`] and `client_credentials`, which
/// only service clients made on the command line may use (RFC 6749 §4.4).
pub const SUPPORTED_GRANT_TYPES: [&str; 3] =
    ["authorization_code", "refresh_token", "client_credentials"];
/// The grant types a client registered for `registered` may use (RFC 7591 §2 `grant_types`):
/// the registered ones, plus `refresh_token` whenever `authorization_code` is there, since the
/// token endpoint issues a refresh token with every code (OAuth 2.1 §4.1.3, §4.3) and a client
/// must be able to use it. Order: as registered, `refresh_token` appended.
pub fn effective_grant_types(registered: &[String]) -> Vec<String> {
    let mut grants = registered.to_vec();
    if grants.iter().any(|g| g == "authorization_code")
        && !grants.iter().any(|g| g == "refresh_token")
    {
        grants.push("refresh_token".into());
    }
    grants
}

/// Whether a client registered for `registered` grant types may use `grant`
/// ([`effective_grant_types`]).
pub fn permits_grant(registered: &[String], grant: &str) -> bool {
    effective_grant_types(registered).iter().any(|g| g == grant)
}

/// The client authentication methods the token endpoint accepts.
pub const AUTH_METHODS: [&str; 3] = ["none", "client_secret_basic", "client_secret_post"];

/// The RFC 8414 §2 document. `issuer` is byte-identical to the configured issuer (§3.3), and
/// only what the server accepts is advertised.
pub fn document(config: &Config) -> Value {
    let url = |p: &str| format!("{}{}", config.issuer, p);
    json!({
        "issuer": config.issuer,
        "authorization_endpoint": url("/oauth/authorize"),
        "token_endpoint": url("/oauth/token"),
        "registration_endpoint": url("/oauth/register"),
        "revocation_endpoint": url("/oauth/revoke"),
        "introspection_endpoint": url("/oauth/introspect"),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": SUPPORTED_GRANT_TYPES,
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": AUTH_METHODS,
        "revocation_endpoint_auth_methods_supported": AUTH_METHODS,
        "introspection_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        "scopes_supported": ["mcp:read", "mcp:write", "offline_access"],
        "authorization_response_iss_parameter_supported": true,
        "client_id_metadata_document_supported": true,
        "protected_resources": [config.mcp_server_url],
    })
}

/// `GET /.well-known/oauth-authorization-server` (and its path-inserted form, and
/// `/.well-known/mcp-configuration`).
pub async fn authorization_server(State(state): State<AppState>) -> Response {
    (
        [(header::CACHE_CONTROL, "public, max-age=3600")],
        Json(document(&state.config)),
    )
        .into_response()
}

/// `GET /.well-known/openai-apps-challenge`: the configured token as text/plain, 404 when unset.
pub async fn openai_apps_challenge(State(state): State<AppState>) -> Response {
    match &state.config.openai_apps_challenge {
        Some(token) => (
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            token.clone(),
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "not configured").into_response(),
    }
}
