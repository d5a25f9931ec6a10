//! OAuth 2.0 Protected Resource Metadata (RFC 9728) for the MCP endpoint, served at the
//! path-suffixed well-known URL (`/.well-known/oauth-protected-resource/mcp`, RFC 9728 §3.1)
//! and at the root (`/.well-known/oauth-protected-resource`), which older MCP clients probe.
//! Any origin may read it (CORS), like the authorization-server metadata.

use axum::extract::State;
use axum::http::{HeaderValue, Method, header};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use tower_http::cors::AllowOrigin;

use crate::config::Config;
use crate::domain::scope::Scope;
use crate::state::AppState;

/// The metadata document (RFC 9728 §2).
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct ProtectedResourceMetadata {
    /// Exactly `MCP_SERVER_URL` (RFC 9728 §3.3: identical to the URL the client asked about).
    pub resource: String,
    /// The issuer (MCP requires at least one).
    pub authorization_servers: Vec<String>,
    /// The scopes a client may ask for; never `offline_access` (MCP 2026-07-28, SEP-2207).
    pub scopes_supported: Vec<&'static str>,
    /// Tokens are accepted in the `Authorization` header only.
    pub bearer_methods_supported: Vec<&'static str>,
    /// A name to show people.
    pub resource_name: &'static str,
    /// The algorithms of the DPoP proofs accepted with bound tokens (RFC 9449 §5.1, RFC 9728
    /// §2): [`crate::domain::dpop::SIGNING_ALGS`].
    pub dpop_signing_alg_values_supported: [&'static str; 4],
    /// `false`: bearer tokens stay accepted; a token bound with DPoP is accepted only with a
    /// proof (RFC 9728 §2).
    pub dpop_bound_access_tokens_required: bool,
}

impl ProtectedResourceMetadata {
    /// The document for `config`.
    pub fn for_config(config: &Config) -> Self {
        ProtectedResourceMetadata {
            resource: config.mcp_server_url.clone(),
            authorization_servers: vec![config.issuer.clone()],
            scopes_supported: Scope::resource_scopes().map(Scope::as_str).collect(),
            bearer_methods_supported: vec!["header"],
            resource_name: "Gatehouse MCP server",
            dpop_signing_alg_values_supported: crate::domain::dpop::SIGNING_ALGS,
            dpop_bound_access_tokens_required: false,
        }
    }
}

async fn protected_resource_metadata(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CACHE_CONTROL,
            HeaderValue::from_static("public, max-age=300"),
        )],
        Json(ProtectedResourceMetadata::for_config(&state.config)),
    )
}

/// The metadata routes (mounted only while OAuth is on).
pub fn router(state: AppState) -> Router {
    let suffixed = format!(
        "/.well-known/oauth-protected-resource{}",
        state.config.mcp_path
    );
    let cors = crate::cors::layer(AllowOrigin::any(), &[Method::GET], &[]);
    Router::new()
        .route(
            "/.well-known/oauth-protected-resource",
            get(protected_resource_metadata),
        )
        .route(&suffixed, get(protected_resource_metadata))
        .layer(cors)
        .with_state(state)
}
