//! The one rule for "this names the local machine", used wherever a host is judged loopback:
//! redirect URIs (where the port of a loopback redirect may vary, RFC 8252 §7.3), the MCP
//! route's `Host` and `Origin` checks (DNS-rebinding protection on a loopback listener),
//! the issuer's own origins and the plain-http warning at start.

use std::net::{Ipv4Addr, Ipv6Addr};

/// True if `host` (a URI host without port: `localhost`, `127.0.0.1`, `[::1]`, or `::1`
/// without brackets as a `Host` header parser leaves it) names the local machine:
/// `localhost` and names under `.localhost` (RFC 6761 §6.3), ASCII case-insensitive; an IPv4
/// literal in 127.0.0.0/8 written in dotted-decimal form (RFC 8252 §8.3; `127.1` and other
/// shorthand are not); the IPv6 literal `::1`. Nothing else, and never a trailing dot.
pub fn is_loopback_host(host: &str) -> bool {
    let lower = host.to_ascii_lowercase();
    if lower == "localhost"
        || lower
            .strip_suffix(".localhost")
            .is_some_and(|label| !label.is_empty() && !label.ends_with('.'))
    {
        return true;
    }
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(ip) = bare.parse::<Ipv6Addr>() {
        return ip == Ipv6Addr::LOCALHOST;
    }
    host.parse::<Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_and_literals() {
        for host in [
            "127.0.0.1",
            "127.255.0.9",
            "[::1]",
            "::1",
            "localhost",
            "LOCALHOST",
            "app.localhost",
            "A.B.Localhost",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "128.0.0.1",
            "10.0.0.1",
            "[::2]",
            "::1x",
            "[127.0.0.1]",
            "localhost.",
            ".localhost",
            "a..localhost",
            "localhost.example",
            "evillocalhost",
            "127.1",
            "0x7f.0.0.1",
            "example.com",
            "",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }
}
