//! DNS-rebinding and cross-origin protection of the MCP route (MCP Streamable HTTP transport,
//! §Security Warning; 2025-11-25 and later: an invalid present `Origin` is answered 403).
//!
//! Runs before authentication, so a foreign page is refused whether or not it holds a token:
//! - the request names one host (RFC 9112 §3.2): more than one `Host` line, a `Host` that is
//!   not a host, or none in an HTTP/1.1 request is answered `400`; an absolute-form request
//!   target's authority (or HTTP/2's `:authority`) is the host, whatever `Host` says
//!   (RFC 9112 §3.2.2);
//! - at most one `Origin`, written as a serialized origin (RFC 6454 §6.2, §7), which
//!   must be the issuer's origin or one of `GATEHOUSE_ALLOWED_ORIGINS`
//!   (`*` allows any), or — when the server listens on a loopback address or `MCP_SERVER_URL`
//!   is loopback — itself a loopback origin (`http(s)://localhost`, `127.0.0.0/8`, `[::1]`,
//!   any port): a page served from the user's own machine is not a DNS-rebinding attempt, and
//!   this route's credentials are bearer tokens, never cookies. A request without `Origin` (a
//!   non-browser client) passes;
//! - when the server listens on a loopback address, the host must be a loopback name
//!   (`localhost`, `127.0.0.0/8`, `[::1]`, any port) or the host of `MCP_SERVER_URL`, the issuer
//!   or `FRONTEND_URL` (so a reverse proxy in front of a loopback listener keeps working).
//!
//! rmcp's own Host/Origin checks are switched off in favour of these, so there is one rule.

use crate::domain::loopback::is_loopback_host;

use axum::extract::Request;
use axum::http::{StatusCode, Version, header};
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

/// The host of a `Host` header value (`name[:port]`, `[v6][:port]`), lowercased, brackets off.
fn host_of(value: &str) -> Option<String> {
    let authority: http::uri::Authority = value.parse().ok()?;
    // `host[:port]` only: no user info, a port of digits (RFC 3986 §3.2).
    let port = authority.as_str().get(authority.host().len()..)?;
    let port_ok = port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()));
    if authority.host().is_empty() || authority.as_str().contains('@') || !port_ok {
        return None;
    }
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
        let configured = [
            config.resource.url(),
            &config.issuer_url,
            config.frontend_url.url(),
        ]
        .into_iter()
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

    /// Whether a request naming this host (from [`request_host`]: lowercased, brackets off)
    /// may proceed. An HTTP/1.0 request that names none passes (no browser sends one).
    pub fn allows(&self, host: Option<&str>) -> bool {
        let (Some(allowed), Some(host)) = (&self.allowed, host) else {
            return true;
        };
        is_loopback_host(host) || allowed.iter().any(|a| a == host)
    }
}

/// Which browser origins the MCP route serves: `GATEHOUSE_ALLOWED_ORIGINS` (with the issuer's
/// origin), and any loopback origin when the server itself is loopback.
#[derive(Debug, Clone)]
pub struct OriginPolicy {
    allowed: AllowedOrigins,
    /// The listener or `MCP_SERVER_URL` is loopback: loopback origins are the user's own.
    loopback: bool,
}

/// Whether an origin's URL is `http(s)` on a loopback host (`localhost` and its subdomains,
/// `127.0.0.0/8`, `[::1]`).
fn is_loopback_origin(url: &Url) -> bool {
    matches!(url.scheme(), "http" | "https")
        && match url.host() {
            Some(url::Host::Domain(d)) => is_loopback_host(&d.to_ascii_lowercase()),
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        }
}

/// Whether `value` is written as a serialized origin (RFC 6454 §6.2, §7.1):
/// `scheme "://" host [ ":" port ]` — no user info, path, query, fragment or surrounding
/// space, a port of digits. `null` is not one (it names no origin to compare).
fn is_serialized_origin(value: &str) -> bool {
    let Some((scheme, authority)) = value.split_once("://") else {
        return false;
    };
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    // The host and port: the port after the last `:` outside brackets.
    let (host, port) = match authority.rfind(':') {
        Some(i) if !authority[i..].contains(']') => (&authority[..i], Some(&authority[i + 1..])),
        _ => (authority, None),
    };
    let host_ok = !host.is_empty()
        && !host
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b.is_ascii_control() || b"/?#@\\".contains(&b));
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    scheme_ok && host_ok && port_ok
}

impl OriginPolicy {
    /// The policy for `config`.
    pub fn new(config: &Config) -> OriginPolicy {
        let url_is_loopback = is_loopback_origin(config.resource.url());
        OriginPolicy {
            allowed: config.allowed_origins.clone(),
            loopback: config.bind.ip().is_loopback() || url_is_loopback,
        }
    }

    /// Whether a present `Origin` header value is allowed (compared as an RFC 6454 ASCII
    /// serialization, so `http://h:80` equals `http://h`). `null`, unparsable values and
    /// values that are not written as a serialized origin ([`is_serialized_origin`]: user info,
    /// a path, query or fragment, surrounding space) are allowed only under `*`.
    pub fn allows(&self, origin: &str) -> bool {
        if matches!(self.allowed, AllowedOrigins::Any) {
            return true;
        }
        if !is_serialized_origin(origin) {
            return false;
        }
        match Url::parse(origin) {
            Ok(url) if url.has_host() => {
                (self.loopback && is_loopback_origin(&url))
                    || self.allowed.allows(&url.origin().ascii_serialization())
            }
            _ => false,
        }
    }
}

/// The host a request names (RFC 9112 §3.2, §3.2.2), lowercased, brackets off: the request
/// target's authority when it has one (absolute form, HTTP/2), else the one `Host`. `Ok(None)`
/// for an HTTP/1.0 request without `Host`. `Err` (answered `400`) for more than one `Host`
/// line, a `Host` that is not `host[:port]`, or an HTTP/1.1 request without one.
pub fn request_host(request: &Request) -> Result<Option<String>, &'static str> {
    let mut lines = request.headers().get_all(header::HOST).iter();
    let host = lines.next();
    if lines.next().is_some() {
        return Err("more than one Host header");
    }
    let host = match host {
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .and_then(host_of)
                .ok_or("the Host header is not a host")?,
        ),
        None => None,
    };
    if let Some(authority) = request.uri().authority() {
        return host_of(authority.as_str())
            .map(Some)
            .ok_or("the request target's authority is not a host");
    }
    if host.is_none() && request.version() == Version::HTTP_11 {
        return Err("an HTTP/1.1 request needs a Host header");
    }
    Ok(host)
}

fn refusal(status: StatusCode, message: &'static str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": message}})
            .to_string(),
    )
        .into_response()
}

/// The first check of an MCP request ([`super::layers`]): `Err` with the answer — 400 when the
/// request does not name one host; 403 for a foreign `Origin` or, on a loopback listener, a
/// foreign host (a JSON-RPC error body either way).
#[allow(
    clippy::result_large_err,
    reason = "a step of the MCP layers answers a refused request with the response itself, moved once on that rare path"
)]
pub fn check(mcp: &McpState, request: &Request) -> Result<(), Response> {
    let host = match request_host(request) {
        Ok(host) => host,
        Err(why) => {
            tracing::info!(why, "MCP request without one valid host refused");
            return Err(refusal(
                StatusCode::BAD_REQUEST,
                "Bad Request: the request must name one host (one valid Host header)",
            ));
        }
    };
    let mut origins = request.headers().get_all(header::ORIGIN).iter();
    if let Some(origin) = origins.next() {
        // One origin per request (RFC 6454 §7.3: the header holds one serialized origin); a
        // second line could be read by another component instead of the one checked here.
        let ok = origins.next().is_none() && origin.to_str().is_ok_and(|o| mcp.origins.allows(o));
        if !ok {
            tracing::warn!(origin = ?origin, "MCP request from a foreign Origin refused");
            return Err(refusal(
                StatusCode::FORBIDDEN,
                "Forbidden: this Origin may not call the MCP endpoint",
            ));
        }
    }
    if !mcp.hosts.allows(host.as_deref()) {
        tracing::warn!(host = ?host, "MCP request with a foreign Host refused (DNS rebinding?)");
        return Err(refusal(
            StatusCode::FORBIDDEN,
            "Forbidden: this Host is not served here",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(version: Version, target: &str, hosts: &[&str]) -> Request {
        let mut builder = http::Request::builder()
            .method("POST")
            .uri(target)
            .version(version);
        for h in hosts {
            builder = builder.header(header::HOST, *h);
        }
        builder.body(axum::body::Body::empty()).unwrap()
    }

    #[test]
    fn one_host_per_request() {
        #[allow(non_snake_case)]
        let (HTTP_10, HTTP_11, HTTP_2) = (Version::HTTP_10, Version::HTTP_11, Version::HTTP_2);
        let host = |v, t, h: &[&str]| request_host(&request(v, t, h));
        assert_eq!(
            host(HTTP_11, "/mcp", &["127.0.0.1:8080"]),
            Ok(Some("127.0.0.1".into()))
        );
        assert_eq!(
            host(HTTP_11, "/mcp", &["[::1]:8080"]),
            Ok(Some("::1".into()))
        );
        assert_eq!(
            host(HTTP_11, "/mcp", &["LOCALHOST"]),
            Ok(Some("localhost".into()))
        );
        assert!(host(HTTP_11, "/mcp", &["127.0.0.1", "evil.example"]).is_err());
        assert!(host(HTTP_11, "/mcp", &["127.0.0.1", "127.0.0.1"]).is_err());
        assert!(host(HTTP_11, "/mcp", &[]).is_err());
        for bad in ["", "a b", "u@evil.example", "h:port"] {
            assert!(host(HTTP_11, "/mcp", &[bad]).is_err(), "{bad:?}");
        }
        assert_eq!(host(HTTP_10, "/mcp", &[]), Ok(None));
        // The target's authority wins over Host (RFC 9112 §3.2.2), and stands in for it in
        // HTTP/2.
        assert_eq!(
            host(HTTP_11, "http://evil.example/mcp", &["127.0.0.1"]),
            Ok(Some("evil.example".into()))
        );
        assert_eq!(
            host(HTTP_11, "http://127.0.0.1:9/mcp", &["evil.example"]),
            Ok(Some("127.0.0.1".into()))
        );
        assert!(host(HTTP_11, "http://127.0.0.1/mcp", &["a", "b"]).is_err());
        assert_eq!(
            host(HTTP_2, "http://localhost:9/mcp", &[]),
            Ok(Some("localhost".into()))
        );
    }

    #[test]
    fn loopback_policy() {
        let policy = HostPolicy {
            allowed: Some(vec!["mcp.example.com".into()]),
        };
        for ok in [
            "127.0.0.1",
            "localhost",
            "::1",
            "127.1.2.3",
            "mcp.example.com",
        ] {
            assert!(policy.allows(Some(ok)), "{ok}");
        }
        for bad in ["evil.example", "10.0.0.1", "localhost.evil.example"] {
            assert!(!policy.allows(Some(bad)), "{bad}");
        }
        assert!(policy.allows(None));
        assert!(HostPolicy { allowed: None }.allows(Some("evil.example")));
    }

    fn origins(allowed: AllowedOrigins, loopback: bool) -> OriginPolicy {
        OriginPolicy { allowed, loopback }
    }

    #[test]
    fn origin_lists() {
        let list = origins(
            AllowedOrigins::List(vec!["http://127.0.0.1:8080".into()]),
            false,
        );
        assert!(list.allows("http://127.0.0.1:8080"));
        assert!(!list.allows("http://127.0.0.1:8081"));
        assert!(!list.allows("https://evil.example"));
        assert!(!list.allows("null"));
        let https = origins(
            AllowedOrigins::List(vec!["https://app.example".into()]),
            false,
        );
        assert!(https.allows("https://app.example:443"));
        assert!(origins(AllowedOrigins::Any, false).allows("null"));
    }

    #[test]
    fn loopback_origins_on_a_loopback_server() {
        let own = AllowedOrigins::List(vec!["http://127.0.0.1:8080".into()]);
        let local = origins(own.clone(), true);
        for ok in [
            "http://127.0.0.1:8081",
            "http://localhost:6274",
            "http://[::1]:3000",
            "https://localhost",
            "http://app.localhost:5173",
            "http://127.9.9.9",
        ] {
            assert!(local.allows(ok), "{ok}");
            assert!(
                !origins(own.clone(), false).allows(ok),
                "{ok} on a public server"
            );
        }
        for bad in [
            " http://localhost:1",
            "http://localhost:1 ",
            "http://evil.com@localhost",
            "http://localhost:1/path",
            "http://127.0.0.1:6274/",
            "http://127.0.0.1:6274#x",
            "http://localhost.evil.example",
            "http://127.0.0.1.nip.io",
            "http://0.0.0.0:8080",
            "http://[::ffff:127.0.0.1]:1",
            "file://localhost/x",
            "null",
            "https://evil.example",
        ] {
            assert!(!local.allows(bad), "{bad}");
        }
    }
}
