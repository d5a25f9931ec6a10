//! The default endpoints of MCP 2025-03-26 (§Authorization, "Fallbacks for Servers without
//! Metadata Discovery"): clients that find no metadata, or ignore it, use `/authorize`,
//! `/token` and `/register` at the root of the MCP server's origin. Gatehouse serves the MCP
//! endpoint and the authorization server from one origin, so these paths are answered here:
//! `/token` and `/register` by the real endpoints' handlers (no redirect for a `POST` to
//! follow), `/authorize` by a `307 Temporary Redirect` to the real authorization endpoint with
//! the query unchanged (the browser keeps the method and, for a `POST`, the body; RFC 9110
//! §15.4.8). A path the MCP endpoint itself uses is left to it.

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use super::{register, token};
use crate::state::AppState;

/// The fallback paths of MCP 2025-03-26 and the endpoints they stand for.
pub const FALLBACK_PATHS: [(&str, &str); 3] = [
    ("/authorize", "/oauth/authorize"),
    ("/token", "/oauth/token"),
    ("/register", "/oauth/register"),
];

/// Adds the fallback routes to `router`, except a path equal to the MCP endpoint's `mcp_path`
/// (or under it).
pub fn routes(mut router: Router<AppState>, mcp_path: &str) -> Router<AppState> {
    let taken = |path: &str| path == mcp_path || path.starts_with(&format!("{mcp_path}/"));
    if !taken("/authorize") {
        router = router.route("/authorize", get(authorize).post(authorize));
    }
    if !taken("/token") {
        router = router.route("/token", post(token::token));
    }
    if !taken("/register") {
        router = router.route("/register", post(register::register));
    }
    router
}

/// `GET/POST /authorize`: `307` to the authorization endpoint (`<issuer>/oauth/authorize`)
/// with the same query. The target is this server's own endpoint, never one taken from the
/// request.
async fn authorize(State(state): State<AppState>, RawQuery(query): RawQuery) -> Response {
    let mut target = state.config.url("/oauth/authorize");
    if let Some(q) = query.filter(|q| !q.is_empty()) {
        target.push('?');
        target.push_str(&q);
    }
    match HeaderValue::try_from(target) {
        Ok(location) => (
            StatusCode::TEMPORARY_REDIRECT,
            [
                (header::LOCATION, location),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            ],
        )
            .into_response(),
        // A query the header cannot hold came from no real client.
        Err(_) => super::OAuthError::InvalidRequest("the query cannot be forwarded".into())
            .into_response(),
    }
}
