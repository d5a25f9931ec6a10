//! The OAuth 2.1 authorization server: metadata (RFC 8414), dynamic client registration
//! (RFC 7591), the token endpoint, introspection (RFC 7662) and revocation (RFC 7009). The
//! authorization endpoint's pages live in `web`, which calls [`authorize`] for the rules.

use axum::Router;

use crate::app::AppState;

/// The OAuth routes that carry no browser session (CORS-enabled).
pub fn router(state: AppState) -> Router {
    Router::new().with_state(state)
}
