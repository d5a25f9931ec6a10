//! The OAuth 2.1 authorization server: metadata (RFC 8414), dynamic client registration
//! (RFC 7591), the token endpoint, revocation (RFC 7009) and introspection (RFC 7662). The
//! authorization endpoint's pages live in `web`, which calls [`authorize`] for the rules.

use axum::Router;
use axum::http::{Method, header};
use axum::routing::{get, post};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::state::AppState;

pub mod authorize;
pub mod client_assertion;
pub mod client_auth;
/// The client resolver ([`crate::clients`]), here under the name it has always had.
pub use crate::clients;
pub mod device;
pub mod error;
pub mod fallbacks;
pub mod id_jag;
pub mod introspect;
pub mod jwt;
pub mod metadata;
pub mod register;
pub mod revoke;
pub mod token;
pub mod token_response;
pub mod workload;

pub use error::OAuthError;

/// CORS for the machine-facing OAuth endpoints and metadata: any origin, `GET`/`POST`, no
/// cookies, and `WWW-Authenticate` readable by browser-based clients ([`crate::cors::layer`]).
pub fn cors() -> CorsLayer {
    crate::cors::layer(
        AllowOrigin::any(),
        &[Method::GET, Method::POST],
        &[header::WWW_AUTHENTICATE],
    )
}

/// The OAuth routes that carry no browser session.
pub fn router(state: AppState) -> Router {
    let mut router = Router::new()
        .route(
            "/.well-known/oauth-authorization-server",
            get(metadata::authorization_server),
        )
        .route(
            "/.well-known/mcp-configuration",
            get(metadata::authorization_server),
        )
        .route("/oauth/register", post(register::register))
        .route("/oauth/token", post(token::token))
        .route(
            "/oauth/device_authorization",
            post(device::device_authorization),
        )
        .route("/oauth/revoke", post(revoke::revoke))
        .route("/oauth/introspect", post(introspect::introspect))
        .route("/oauth/jwks", get(jwt::jwks));
    // RFC 8414 §3.1: for an issuer with a path, the well-known segment goes before the path.
    let path = state.config.issuer_url.path().trim_end_matches('/');
    if !path.is_empty() {
        router = router.route(
            &format!("/.well-known/oauth-authorization-server{path}"),
            get(metadata::authorization_server),
        );
    }
    // The same document with the MCP path inserted, which some clients probe (they take the MCP
    // URL for the issuer, RFC 8414 §3.1).
    let mcp_path = state.config.mcp_path.as_str();
    if mcp_path != path {
        router = router.route(
            &format!("/.well-known/oauth-authorization-server{mcp_path}"),
            get(metadata::authorization_server),
        );
    }
    router = fallbacks::routes(router, mcp_path);
    let router = router.layer(cors());
    Router::new()
        .route(
            "/.well-known/openai-apps-challenge",
            get(metadata::openai_apps_challenge),
        )
        .merge(router)
        .with_state(state)
}
