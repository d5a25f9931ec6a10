//! DNS-rebinding and cross-origin protection of the MCP route (MCP Streamable HTTP transport,
//! §Security Warning; 2025-11-25 and later: an invalid present `Origin` is answered 403).
//!
//! Runs before authentication, so a foreign page is refused whether or not it holds a token:
//! - a present `Origin` must be the issuer's origin or one of `GATEHOUSE_ALLOWED_ORIGINS`
//!   (`*` allows any); a request without `Origin` (a non-browser client) passes;
//! - when the server listens on a loopback address, the `Host` must be a loopback name
//!   (`localhost`, `127.0.0.0/8`, `[::1]`, any port) or the host of `MCP_SERVER_URL`, the issuer
//!   or `FRONTEND_URL` (so a reverse proxy in front of a loopback listener keeps working).
//!
//! rmcp's own Host/Origin checks are switched off in favour of these, so there is one rule.

use std::net::IpAddr;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use url::Url;

use super::McpState;
use crate::config::{AllowedOrigins, Config};

/// Which `Host` values the MCP route accepts.
#[derive(Debug, Clone)]
pub struct HostPolicy {
    /// `None`: any host (the server listens on a public address).
    allowed: Option<Vec<String>>,
}

fn is_loopback_host(host: &str) -> bool {
    host == "localhost"
        || host.ends_with(".localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The host of a `Host` header value (`name[:port]`, `[v6][:port]`), lowercased, brackets off.
fn host_of(value: &str) -> Option<String> {
    let authority: axum::http::uri::Authority = value.parse().ok()?;
    Some(
        authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase(),
    )
}

impl HostPolicy {
    /// The policy for `config`: loopback-only (plus the configured hosts) when bound to a
    /// loopback address, anything otherwise.
    pub fn new(config: &Config) -> HostPolicy {
        if !config.bind.ip().is_loopback() {
            return HostPolicy { allowed: None };
        }
        let configured = [&config.mcp_server_url, &config.issuer, &config.frontend_url]
            .into_iter()
            .filter_map(|u| Url::parse(u).ok())
            .filter_map(|u| {
                u.host_str().map(|h| {
                    h.trim_start_matches('[')
                        .trim_end_matches(']')
                        .to_ascii_lowercase()
                })
            })
            .collect();
        HostPolicy {
            allowed: Some(configured),
        }
    }

    /// Whether a request with this `Host` header may proceed. A missing header passes (no
    /// browser sends a request without one).
    pub fn allows(&self, host_header: Option<&str>) -> bool {
        let (Some(allowed), Some(value)) = (&self.allowed, host_header) else {
            return true;
        };
        match host_of(value) {
            Some(host) => is_loopback_host(&host) || allowed.contains(&host),
            None => false,
        }
    }
}

/// Whether a present `Origin` header value is allowed (compared as an RFC 6454 ASCII
/// serialization, so `http://h:80` equals `http://h`). `null` and unparsable values are
/// allowed only under `*`.
pub fn origin_allowed(origin: &str, allowed: &AllowedOrigins) -> bool {
    if matches!(allowed, AllowedOrigins::Any) {
        return true;
    }
    match Url::parse(origin) {
        Ok(url) if url.has_host() => allowed.allows(&url.origin().ascii_serialization()),
        _ => false,
    }
}

fn forbidden(message: &'static str) -> Response {
    (
        StatusCode::FORBIDDEN,
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": message}})
            .to_string(),
    )
        .into_response()
}

/// Middleware: 403 for a foreign `Origin` or, on a loopback listener, a foreign `Host`.
pub async fn guard(State(mcp): State<McpState>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    if let Some(origin) = headers.get(header::ORIGIN) {
        let ok = origin
            .to_str()
            .is_ok_and(|o| origin_allowed(o, &mcp.app.config.allowed_origins));
        if !ok {
            tracing::warn!(origin = ?origin, "MCP request from a foreign Origin refused");
            return forbidden("Forbidden: this Origin may not call the MCP endpoint");
        }
    }
    let host = headers
        .get(header::HOST)
        .map(|h| h.to_str().unwrap_or("\u{0}"));
    if !mcp.hosts.allows(host) {
        tracing::warn!(host = ?host, "MCP request with a foreign Host refused (DNS rebinding?)");
        return forbidden("Forbidden: this Host is not served here");
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_policy() {
        let policy = HostPolicy {
            allowed: Some(vec!["mcp.example.com".into()]),
        };
        for ok in [
            "127.0.0.1:8080",
            "localhost",
            "LOCALHOST:3000",
            "[::1]:8080",
            "127.1.2.3",
            "mcp.example.com",
        ] {
            assert!(policy.allows(Some(ok)), "{ok}");
        }
        for bad in ["evil.example", "evil.example:8080", "10.0.0.1", "", "a b"] {
            assert!(!policy.allows(Some(bad)), "{bad}");
        }
        assert!(policy.allows(None));
        assert!(HostPolicy { allowed: None }.allows(Some("evil.example")));
    }

    #[test]
    fn origins() {
        let list = AllowedOrigins::List(vec!["http://127.0.0.1:8080".into()]);
        assert!(origin_allowed("http://127.0.0.1:8080", &list));
        assert!(!origin_allowed("http://127.0.0.1:8081", &list));
        assert!(!origin_allowed("https://evil.example", &list));
        assert!(!origin_allowed("null", &list));
        let https = AllowedOrigins::List(vec!["https://app.example".into()]);
        assert!(origin_allowed("https://app.example:443", &https));
        assert!(origin_allowed("null", &AllowedOrigins::Any));
    }
}
