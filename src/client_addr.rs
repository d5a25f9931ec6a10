//! The client address of every request, decided once by [`attach`] (a middleware on the
//! whole router) from the TCP peer, `X-Forwarded-For` and `GATEHOUSE_TRUSTED_PROXIES`
//! ([`crate::domain::forwarded::client_address`]), and read by handlers through the
//! [`ClientAddr`] extractor: project-key allow-lists, sign-in throttling, registration limits
//! and audit source addresses all use this one value.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderName, StatusCode};
use ipnet::IpNet;

use crate::domain::forwarded::client_address;

/// The header proxies append their peer to.
pub const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// The address of the client that sent a request (canonical: no IPv4-mapped IPv6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub IpAddr);

impl ClientAddr {
    /// The address of a request's parts: the one [`attach`] stored, else the TCP peer
    /// (`None` when neither is known, as in a router driven without a listener).
    pub fn of(parts: &http::Extensions) -> Option<ClientAddr> {
        parts.get::<ClientAddr>().copied().or_else(|| {
            parts
                .get::<ConnectInfo<SocketAddr>>()
                .map(|c| ClientAddr(c.0.ip().to_canonical()))
        })
    }
}

impl std::fmt::Display for ClientAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for ClientAddr {
    type Rejection = (StatusCode, &'static str);

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        ClientAddr::of(&parts.extensions).ok_or((
            StatusCode::INTERNAL_SERVER_ERROR,
            "The client address is unknown.",
        ))
    }
}

/// Stores the request's [`ClientAddr`] in its extensions (behind trusted proxies, the
/// forwarded one, from the proxies of `trusted_proxies` (`GATEHOUSE_TRUSTED_PROXIES`);
/// [`client_address`]); done for every route by [`crate::app::router`].
pub fn attach(trusted_proxies: &[IpNet], request: &mut Request) {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    if let Some(peer) = peer {
        let forwarded = request
            .headers()
            .get_all(X_FORWARDED_FOR)
            .iter()
            .map(|v| v.to_str().unwrap_or(""));
        let addr = client_address(peer, forwarded, trusted_proxies);
        request.extensions_mut().insert(ClientAddr(addr));
    }
}
