//! RFC 8707 resource indicators: which protected resource a grant or a token is for.
//!
//! One rule compares them everywhere (authorization request, token request, the audience of an
//! access token at the MCP endpoint, service clients): both sides are parsed as absolute URIs
//! and compared after the WHATWG URL normalisation (scheme and host lowercased, default port
//! dropped, percent-encoding normalised); nothing else is forgiven, so `…/mcp` and `…/mcp/`
//! are two resources (RFC 8707 §2; the MCP authorization spec's canonical server URI). A value
//! that does not parse, or carries a fragment (RFC 8707 §2), names no resource and matches
//! nothing.

use std::fmt;

use url::Url;

/// An RFC 8707 resource indicator: an absolute URI without a fragment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceIndicator(Url);

/// Why a value is not a resource indicator (RFC 8707 §2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceError {
    /// Not an absolute URI.
    #[error("a resource must be an absolute URI")]
    NotAbsolute,
    /// It has a fragment component.
    #[error("a resource must not have a fragment")]
    Fragment,
}

impl ResourceIndicator {
    /// Parses a resource indicator. Errors: [`ResourceError`].
    pub fn parse(value: &str) -> Result<Self, ResourceError> {
        let url = Url::parse(value).map_err(|_| ResourceError::NotAbsolute)?;
        if url.fragment().is_some() {
            return Err(ResourceError::Fragment);
        }
        Ok(Self(url))
    }

    /// The one comparison: whether `other` (as sent or as stored) names this resource. A value
    /// spelled exactly as this resource's normalised URL matches without being parsed again
    /// (the WHATWG serialization of a URL parses back to the same URL), which is how a stored
    /// grant's resource is usually spelled.
    pub fn matches(&self, other: &str) -> bool {
        other == self.0.as_str() || Self::parse(other).is_ok_and(|o| o == *self)
    }

    /// The normalised URL.
    pub fn url(&self) -> &Url {
        &self.0
    }
}

impl fmt::Display for ResourceIndicator {
    /// The normalised URL.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_normalised_spelling_matches_as_its_parse_does() {
        for value in [
            "https://gate.example/mcp",
            "HTTPS://Gate.Example:443/mcp",
            "http://127.0.0.1:8080/mcp/",
            "https://gate.example/a%7eb?x=1",
            "https://gate.example",
        ] {
            let resource = ResourceIndicator::parse(value).unwrap();
            let normalised = resource.to_string();
            assert_eq!(
                ResourceIndicator::parse(&normalised).unwrap(),
                resource,
                "{value}"
            );
            assert!(resource.matches(&normalised), "{value}");
            assert!(resource.matches(value), "{value}");
        }
        let mcp = ResourceIndicator::parse("https://gate.example/mcp").unwrap();
        assert!(!mcp.matches("https://gate.example/mcp#x"));
    }

    #[test]
    fn one_rule_for_every_comparison() {
        let mcp = ResourceIndicator::parse("https://gate.example/mcp").unwrap();
        assert!(mcp.matches("https://gate.example/mcp"));
        assert!(mcp.matches("HTTPS://Gate.Example:443/mcp"), "normalised");
        assert!(
            !mcp.matches("https://gate.example/mcp/"),
            "a trailing slash is another path"
        );
        assert!(
            !mcp.matches("https://gate.example/MCP"),
            "paths are case-sensitive"
        );
        assert!(!mcp.matches("http://gate.example/mcp"), "another scheme");
        assert!(
            !mcp.matches("https://gate.example:8443/mcp"),
            "another port"
        );
        assert!(
            !mcp.matches("https://gate.example/mcp#x"),
            "a fragment names no resource"
        );
        assert!(!mcp.matches("/mcp"), "relative");
        assert!(!mcp.matches(""));
    }

    #[test]
    fn parse_refuses_what_rfc_8707_refuses() {
        assert_eq!(
            ResourceIndicator::parse("mcp"),
            Err(ResourceError::NotAbsolute)
        );
        assert_eq!(
            ResourceIndicator::parse("https://a.example/mcp#f"),
            Err(ResourceError::Fragment)
        );
        let r = ResourceIndicator::parse("https://a.example/mcp?x=1").unwrap();
        assert_eq!(r.to_string(), "https://a.example/mcp?x=1");
    }
}
