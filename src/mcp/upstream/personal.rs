//! Where a person's own upstream may be (issue "Connections", item 5): checked like a client
//! ID metadata document ([`crate::clients::HttpsFetcher`]) — https only, and never a host
//! that is or resolves to a loopback, private or link-local address ([`is_forbidden_ip`]) —
//! unless the operator allows the host with `GATEHOUSE_UPSTREAM_ALLOW_HOSTS`.
//!
//! The URL is checked when the person adds it ([`check_url`]), the literal address again when
//! an instance starts serving it ([`literal_refusal`]), and every name lookup of every
//! connection goes through [`GuardedResolver`], so a DNS answer that changes later (DNS
//! rebinding) still cannot reach a forbidden address.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use url::Url;

use crate::config::AllowedHost;
use crate::domain::cimd::is_forbidden_ip;
use crate::domain::upstream::parse_url;

/// The longest DNS lookup when a URL is checked or a connection is made.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether `url`'s host and port are in the operator's allow list.
pub fn allowed(allow: &[AllowedHost], url: &Url) -> bool {
    let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
        return false;
    };
    allow.iter().any(|a| a.allows(host, port))
}

/// Why `url` may not be served without resolving it: not https, `localhost`, or a forbidden
/// address literal; `None` when it passes (or the operator allows its host).
pub fn literal_refusal(allow: &[AllowedHost], url: &Url) -> Option<&'static str> {
    if allowed(allow, url) {
        return None;
    }
    if url.scheme() != "https" {
        return Some("The address must start with https://.");
    }
    let forbidden =
        "The address must be a public server: not a loopback, private or link-local address.";
    match url.host() {
        Some(url::Host::Ipv4(v4)) if is_forbidden_ip(IpAddr::V4(v4)) => Some(forbidden),
        Some(url::Host::Ipv6(v6)) if is_forbidden_ip(IpAddr::V6(v6)) => Some(forbidden),
        Some(url::Host::Domain(d))
            if d.eq_ignore_ascii_case("localhost")
                || d.to_ascii_lowercase().ends_with(".localhost") =>
        {
            Some(forbidden)
        }
        None => Some("The address has no host."),
        _ => None,
    }
}

/// Checks the URL a person gives for their own upstream: an MCP endpoint URL
/// ([`parse_url`]) passing [`literal_refusal`], whose host resolves, only to public addresses
/// (unless allowed). Returns it parsed.
///
/// Errors: one sentence for the page.
pub async fn check_url(allow: &[AllowedHost], text: &str) -> Result<Url, String> {
    let url = parse_url(text.trim()).map_err(|_| {
        "The address must be a full URL such as https://mcp.example.com/mcp, without a user, password or #fragment.".to_string()
    })?;
    if let Some(why) = literal_refusal(allow, &url) {
        return Err(why.to_string());
    }
    if allowed(allow, &url) {
        return Ok(url);
    }
    if let Some(url::Host::Domain(host)) = url.host() {
        let port = url.port_or_known_default().unwrap_or(443);
        let addrs = lookup(host, port).await?;
        if addrs.iter().any(|a| is_forbidden_ip(a.ip())) {
            return Err(
                "The address must be a public server: its name leads to a loopback, private or link-local address."
                    .to_string(),
            );
        }
    }
    Ok(url)
}

async fn lookup(host: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
    let addrs: Vec<SocketAddr> =
        tokio::time::timeout(LOOKUP_TIMEOUT, tokio::net::lookup_host((host, port)))
            .await
            .map_err(|_| "The server's name could not be looked up in time.".to_string())?
            .map_err(|_| "The server's name could not be found.".to_string())?
            .collect();
    if addrs.is_empty() {
        return Err("The server's name has no address.".to_string());
    }
    Ok(addrs)
}

/// The name resolver of a person's upstream's HTTP client: a name in the operator's allow
/// list resolves as usual; any other name fails when one of its addresses is forbidden
/// ([`is_forbidden_ip`]).
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    allow: Vec<AllowedHost>,
}

impl GuardedResolver {
    /// A resolver allowing `allow`'s hosts.
    pub fn new(allow: Vec<AllowedHost>) -> GuardedResolver {
        GuardedResolver { allow }
    }
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        let trusted = self
            .allow
            .iter()
            .any(|a| a.host.eq_ignore_ascii_case(&host));
        Box::pin(async move {
            let addrs = lookup(&host, 0)
                .await
                .map_err(|e| -> Box<dyn std::error::Error + Send + Sync> { e.into() })?;
            if !trusted && addrs.iter().any(|a| is_forbidden_ip(a.ip())) {
                return Err("the upstream's name leads to a forbidden address".into());
            }
            let addrs: reqwest::dns::Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(list: &[&str]) -> Vec<AllowedHost> {
        list.iter()
            .map(|e| AllowedHost::parse(e).unwrap())
            .collect()
    }

    #[tokio::test]
    async fn refused_forms_name_the_reason() {
        let none = allow(&[]);
        for (url, why) in [
            ("http://mcp.example.com/mcp", "https://"),
            ("https://127.0.0.1/mcp", "public server"),
            ("https://10.1.2.3/mcp", "public server"),
            ("https://169.254.169.254/latest", "public server"),
            ("https://[::1]/mcp", "public server"),
            ("https://localhost:8443/mcp", "public server"),
            ("ftp://mcp.example.com/", "full URL"),
            ("https://user:pw@mcp.example.com/", "full URL"),
        ] {
            let e = check_url(&none, url).await.unwrap_err();
            assert!(e.contains(why), "{url}: {e}");
        }
        // An allowed host and port may be plain http on loopback; another port may not.
        let some = allow(&["127.0.0.1:8080"]);
        assert!(check_url(&some, "http://127.0.0.1:8080/mcp").await.is_ok());
        assert!(check_url(&some, "http://127.0.0.1:8081/mcp").await.is_err());
        let any_port = allow(&["localhost"]);
        assert!(check_url(&any_port, "http://localhost:9/mcp").await.is_ok());
    }
}
