//! The one CORS builder of the machine-facing routes (the Fetch standard's CORS protocol, as
//! tower-http implements it). Three routes use it with their own origins, methods and exposed
//! headers: the OAuth endpoints and RFC 8414 metadata (any origin), the RFC 9728
//! protected-resource metadata (any origin) and the MCP route (the origins its guard allows).
//! Browser pages get no CORS at all. No route allows credentials (cookies): every machine
//! request carries its credential in a header.

use std::time::Duration;

use axum::http::{HeaderName, Method, header};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::domain::api_key::API_KEY_HEADER;

/// How long a browser may cache a preflight answer: one day.
pub const PREFLIGHT_MAX_AGE: Duration = Duration::from_secs(86_400);

/// The request headers a browser-based MCP or OAuth client may send: `Authorization`,
/// `X-Api-Key`, `Content-Type`, `Accept`, `MCP-Protocol-Version`, the 2026-07-28
/// `MCP-Method` / `MCP-Name`, and `DPoP` (RFC 9449 §4.1).
pub fn request_headers() -> [HeaderName; 8] {
    [
        header::AUTHORIZATION,
        HeaderName::from_static(API_KEY_HEADER),
        header::CONTENT_TYPE,
        header::ACCEPT,
        HeaderName::from_static("mcp-protocol-version"),
        HeaderName::from_static("mcp-method"),
        HeaderName::from_static("mcp-name"),
        HeaderName::from_static("dpop"),
    ]
}

/// A CORS layer for `origins` and `methods` (`OPTIONS` is always answered), the
/// [`request_headers`], `expose` readable by the page (e.g. `WWW-Authenticate`), no
/// credentials, preflights cached for [`PREFLIGHT_MAX_AGE`].
pub fn layer(origins: AllowOrigin, methods: &[Method], expose: &[HeaderName]) -> CorsLayer {
    CorsLayer::new()
        .allow_origin(origins)
        .allow_methods(methods.to_vec())
        .allow_headers(request_headers())
        .expose_headers(expose.to_vec())
        .max_age(PREFLIGHT_MAX_AGE)
}
