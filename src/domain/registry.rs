//! Registered resources: other MCP servers (resource servers) that use Gatehouse as their
//! authorization server (RFC 8707 resource indicators, RFC 9728 `authorization_servers`).
//!
//! Each one has a name, a URL (its RFC 8707 resource indicator: https, or http on a loopback
//! host for development), its own scopes described in words for the consent page, the format
//! of the access tokens issued for it and their lifetime. Gatehouse's own MCP endpoint
//! (`MCP_SERVER_URL`) is the built-in resource and is not in the registry.

use std::fmt;

use super::loopback::is_loopback_host;
use super::resource::ResourceIndicator;
use super::scope::{Scope, is_scope_token};
use super::text::check_line;

/// Shortest access-token lifetime a resource may ask for, in seconds.
pub const MIN_TOKEN_TTL_SECS: i64 = 60;
/// Longest access-token lifetime a resource may ask for, in seconds (one day).
pub const MAX_TOKEN_TTL_SECS: i64 = 86_400;
/// Access-token lifetime of a resource registered without `--token-ttl`, in seconds.
pub const DEFAULT_TOKEN_TTL_SECS: i64 = 900;
/// Most scopes one resource may declare.
pub const MAX_SCOPES: usize = 32;
/// Longest scope description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 200;

/// Why a resource registration was refused (each message names the rule).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// The name is not 1–64 of `a-z 0-9 - _`, starting with a letter or digit.
    #[error(
        "a resource name must be 1 to 64 characters of a-z, 0-9, '-' and '_', starting with a letter or digit"
    )]
    Name,
    /// The URL is not an absolute URI without a fragment (RFC 8707 §2).
    #[error("the resource URL must be an absolute URI without a fragment (RFC 8707 §2)")]
    Url,
    /// The URL is not https and its host is not loopback.
    #[error("the resource URL must use https (http only on a loopback host such as 127.0.0.1)")]
    NotHttps,
    /// A scope outside the RFC 6749 §3.3 grammar.
    #[error("scope {0:?} is not a valid scope token (RFC 6749 §3.3)")]
    Scope(String),
    /// `offline_access` is not a permission on a resource.
    #[error("offline_access is not a resource scope (refresh tokens are issued with every grant)")]
    OfflineAccess,
    /// The same scope twice.
    #[error("scope {0} is given twice")]
    DuplicateScope(String),
    /// Too many scopes.
    #[error("a resource declares at most {MAX_SCOPES} scopes")]
    TooManyScopes,
    /// No scope at all.
    #[error("a resource needs at least one --scope")]
    NoScope,
    /// Scope descriptions do not pair with scopes.
    #[error("give one --scope-description after each --scope ({0} scopes, {1} descriptions)")]
    Descriptions(usize, usize),
    /// A description is empty, too long, or holds a control character.
    #[error("the description of {0} must be 1 to {MAX_DESCRIPTION_CHARS} characters on one line")]
    Description(String),
    /// The lifetime is out of bounds.
    #[error("--token-ttl must be from {MIN_TOKEN_TTL_SECS} to {MAX_TOKEN_TTL_SECS} seconds")]
    Ttl,
    /// Unknown token format.
    #[error("--token-format must be opaque or jwt")]
    Format,
}

/// A resource's name, as given to `gatehouse resource add` (its key in the registry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceName(String);

impl ResourceName {
    /// Parses a name: 1–64 characters of `a-z 0-9 - _`, the first a letter or digit.
    /// Errors: [`RegistryError::Name`].
    pub fn parse(value: &str) -> Result<Self, RegistryError> {
        let ok = (1..=64).contains(&value.len())
            && value
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
            && value
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphanumeric());
        if ok {
            Ok(Self(value.to_string()))
        } else {
            Err(RegistryError::Name)
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ResourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Parses a resource server's URL: an RFC 8707 resource indicator using https, or http on a
/// loopback host. Returns it normalised (the one spelling stored and compared; see
/// [`ResourceIndicator`]). Errors: [`RegistryError::Url`], [`RegistryError::NotHttps`].
pub fn parse_resource_url(value: &str) -> Result<ResourceIndicator, RegistryError> {
    let resource = ResourceIndicator::parse(value).map_err(|_| RegistryError::Url)?;
    let url = resource.url();
    let Some(host) = url.host_str() else {
        return Err(RegistryError::Url);
    };
    match url.scheme() {
        "https" => Ok(resource),
        "http" if is_loopback_host(host) => Ok(resource),
        _ => Err(RegistryError::NotHttps),
    }
}

/// One scope of a registered resource and its words for the consent page.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ResourceScope {
    /// The scope token (RFC 6749 §3.3), e.g. `files:read`.
    pub scope: String,
    /// What it lets an application do, e.g. "Read your files".
    pub description: String,
}

/// Pairs `--scope` values with `--scope-description` values (the same count, in order; a
/// scope without a description is described by its own token only when no description is
/// given at all). Errors: the first [`RegistryError`] found.
pub fn parse_scopes(
    scopes: &[String],
    descriptions: &[String],
) -> Result<Vec<ResourceScope>, RegistryError> {
    if scopes.is_empty() {
        return Err(RegistryError::NoScope);
    }
    if scopes.len() > MAX_SCOPES {
        return Err(RegistryError::TooManyScopes);
    }
    if !descriptions.is_empty() && descriptions.len() != scopes.len() {
        return Err(RegistryError::Descriptions(
            scopes.len(),
            descriptions.len(),
        ));
    }
    let mut out: Vec<ResourceScope> = Vec::with_capacity(scopes.len());
    for (i, scope) in scopes.iter().enumerate() {
        if !is_scope_token(scope) {
            return Err(RegistryError::Scope(scope.clone()));
        }
        if scope == Scope::OfflineAccess.as_str() {
            return Err(RegistryError::OfflineAccess);
        }
        if out.iter().any(|s| &s.scope == scope) {
            return Err(RegistryError::DuplicateScope(scope.clone()));
        }
        let description = descriptions
            .get(i)
            .map_or_else(|| scope.clone(), |d| d.trim().to_string());
        if description.is_empty()
            || description.chars().count() > MAX_DESCRIPTION_CHARS
            || check_line(&description).is_err()
        {
            return Err(RegistryError::Description(scope.clone()));
        }
        out.push(ResourceScope {
            scope: scope.clone(),
            description,
        });
    }
    Ok(out)
}

/// The format of the access tokens issued for a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenFormat {
    /// A random string, checked by introspection (RFC 7662).
    Opaque,
    /// A signed JWT (RFC 9068), checked offline against the published keys.
    Jwt,
}

impl TokenFormat {
    /// Parses `opaque` or `jwt`. Errors: [`RegistryError::Format`].
    pub fn parse(value: &str) -> Result<Self, RegistryError> {
        match value {
            "opaque" => Ok(Self::Opaque),
            "jwt" => Ok(Self::Jwt),
            _ => Err(RegistryError::Format),
        }
    }

    /// `opaque` or `jwt`, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Opaque => "opaque",
            Self::Jwt => "jwt",
        }
    }
}

/// Checks an access-token lifetime in seconds. Errors: [`RegistryError::Ttl`].
pub fn check_token_ttl(secs: i64) -> Result<i64, RegistryError> {
    if (MIN_TOKEN_TTL_SECS..=MAX_TOKEN_TTL_SECS).contains(&secs) {
        Ok(secs)
    } else {
        Err(RegistryError::Ttl)
    }
}

/// Why the scope of a request for a registered resource was refused: the `invalid_scope`
/// error (RFC 6749 §4.1.2.1, §5.2), its text the `error_description`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceScopeError {
    /// A token outside the RFC 6749 §3.3 grammar (not echoed back).
    #[error("scope contains a character not allowed by RFC 6749 §3.3")]
    Malformed,
    /// A scope that is not one of this resource's (another resource's, or unknown); carries
    /// the scope and this resource's scopes.
    #[error("scope \"{0}\" is not a scope of this resource (its scopes: {1})")]
    NotOfResource(String, String),
    /// A scope of this resource the client did not register for (RFC 7591 §2 `scope`).
    #[error("this application may only request \"{0}\"")]
    NotRegistered(String),
}

/// The scopes granted at the authorization endpoint for a registered resource whose scopes
/// are `offered`, for the `scope` parameter `requested` of a client whose registered `scope`
/// (RFC 7591 §2) is `registered`:
///
/// - `offline_access` is ignored (refresh tokens are issued with every code);
/// - every other requested token must be one of the resource's scopes (a scope of another
///   resource, `mcp:read` included, is refused: tokens carry only their resource's scopes);
/// - when the client registered some of the resource's scopes, it may ask for those only;
/// - when none is requested, the client's registered scopes of this resource apply, or every
///   scope of the resource.
///
/// Returned in the resource's order, with their words. Errors: [`ResourceScopeError`].
pub fn granted_resource_scopes(
    requested: Option<&str>,
    registered: Option<&str>,
    offered: &[ResourceScope],
) -> Result<Vec<ResourceScope>, ResourceScopeError> {
    let offered_names = || {
        offered
            .iter()
            .map(|s| s.scope.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut asked: Vec<&str> = Vec::new();
    for token in requested.unwrap_or("").split_ascii_whitespace() {
        if !is_scope_token(token) {
            return Err(ResourceScopeError::Malformed);
        }
        if token == Scope::OfflineAccess.as_str() {
            continue;
        }
        if !offered.iter().any(|s| s.scope == token) {
            return Err(ResourceScopeError::NotOfResource(
                token.to_string(),
                offered_names(),
            ));
        }
        asked.push(token);
    }
    let allowed: Vec<&str> = registered
        .unwrap_or("")
        .split_ascii_whitespace()
        .filter(|t| offered.iter().any(|s| s.scope == *t))
        .collect();
    if !allowed.is_empty() && asked.iter().any(|t| !allowed.contains(t)) {
        return Err(ResourceScopeError::NotRegistered(allowed.join(" ")));
    }
    let chosen: Vec<&str> = if !asked.is_empty() {
        asked
    } else if !allowed.is_empty() {
        allowed
    } else {
        offered.iter().map(|s| s.scope.as_str()).collect()
    };
    Ok(offered
        .iter()
        .filter(|s| chosen.contains(&s.scope.as_str()))
        .cloned()
        .collect())
}

/// Whether every token of `held` (a space-delimited scope string of a code, family or token)
/// stays within `granted` (the live consent's scopes): literally granted, or `mcp:read` where
/// `mcp:write` is granted; `offline_access` is not a permission and is ignored. A token
/// outside the RFC 6749 §3.3 grammar is never within.
pub fn scopes_within(granted: &str, held: &str) -> bool {
    let granted: Vec<&str> = granted.split_ascii_whitespace().collect();
    held.split_ascii_whitespace().all(|s| {
        is_scope_token(s)
            && (s == Scope::OfflineAccess.as_str()
                || granted.contains(&s)
                || (s == Scope::McpRead.as_str() && granted.contains(&Scope::McpWrite.as_str())))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_short_lowercase_words() {
        assert!(ResourceName::parse("files").is_ok());
        assert!(ResourceName::parse("files-2_b").is_ok());
        for bad in ["", "-x", "Files", "a b", "a/b", &"a".repeat(65)] {
            assert_eq!(ResourceName::parse(bad), Err(RegistryError::Name), "{bad}");
        }
    }

    #[test]
    fn urls_are_https_or_loopback_http_and_normalised() {
        assert_eq!(
            parse_resource_url("HTTPS://Files.Example:443/mcp")
                .unwrap()
                .to_string(),
            "https://files.example/mcp"
        );
        assert!(parse_resource_url("http://127.0.0.1:9000/mcp").is_ok());
        assert!(parse_resource_url("http://localhost:9000/mcp").is_ok());
        assert_eq!(
            parse_resource_url("http://files.example/mcp"),
            Err(RegistryError::NotHttps)
        );
        assert_eq!(
            parse_resource_url("ftp://files.example/mcp"),
            Err(RegistryError::NotHttps)
        );
        assert_eq!(
            parse_resource_url("https://files.example/mcp#x"),
            Err(RegistryError::Url)
        );
        assert_eq!(parse_resource_url("/mcp"), Err(RegistryError::Url));
    }

    #[test]
    fn scopes_pair_with_their_descriptions() {
        let scopes = parse_scopes(
            &["files:read".into(), "files:write".into()],
            &["Read your files".into(), "Change your files".into()],
        )
        .unwrap();
        assert_eq!(scopes[1].scope, "files:write");
        assert_eq!(scopes[1].description, "Change your files");
        assert_eq!(
            parse_scopes(&["files:read".into()], &[]).unwrap()[0].description,
            "files:read"
        );
        assert_eq!(parse_scopes(&[], &[]), Err(RegistryError::NoScope));
        assert_eq!(
            parse_scopes(&["a".into(), "b".into()], &["x".into()]),
            Err(RegistryError::Descriptions(2, 1))
        );
        assert_eq!(
            parse_scopes(&["a b".into()], &[]),
            Err(RegistryError::Scope("a b".into()))
        );
        assert_eq!(
            parse_scopes(&["offline_access".into()], &[]),
            Err(RegistryError::OfflineAccess)
        );
        assert_eq!(
            parse_scopes(&["a".into(), "a".into()], &[]),
            Err(RegistryError::DuplicateScope("a".into()))
        );
        assert_eq!(
            parse_scopes(&["a".into()], &["line\nbreak".into()]),
            Err(RegistryError::Description("a".into()))
        );
    }

    #[test]
    fn formats_and_lifetimes() {
        assert_eq!(TokenFormat::parse("jwt"), Ok(TokenFormat::Jwt));
        assert_eq!(TokenFormat::parse("opaque").unwrap().as_str(), "opaque");
        assert_eq!(TokenFormat::parse("JWT"), Err(RegistryError::Format));
        assert_eq!(check_token_ttl(900), Ok(900));
        assert_eq!(check_token_ttl(59), Err(RegistryError::Ttl));
        assert_eq!(check_token_ttl(86_401), Err(RegistryError::Ttl));
    }

    #[test]
    fn a_request_gets_only_its_resources_scopes() {
        let offered = parse_scopes(
            &["files:read".into(), "files:write".into()],
            &["Read your files".into(), "Change your files".into()],
        )
        .unwrap();
        let names =
            |v: Vec<ResourceScope>| v.into_iter().map(|s| s.scope).collect::<Vec<_>>().join(" ");
        assert_eq!(
            names(granted_resource_scopes(None, None, &offered).unwrap()),
            "files:read files:write"
        );
        assert_eq!(
            names(
                granted_resource_scopes(
                    Some("files:write offline_access files:read"),
                    None,
                    &offered
                )
                .unwrap()
            ),
            "files:read files:write",
            "the resource's order, offline_access left out"
        );
        assert_eq!(
            granted_resource_scopes(Some("files:read mcp:read"), None, &offered),
            Err(ResourceScopeError::NotOfResource(
                "mcp:read".into(),
                "files:read files:write".into()
            ))
        );
        assert_eq!(
            granted_resource_scopes(Some("a\\b"), None, &offered),
            Err(ResourceScopeError::Malformed)
        );
        assert_eq!(
            names(granted_resource_scopes(None, Some("mcp:read files:read"), &offered).unwrap()),
            "files:read",
            "the client's registered scopes of this resource"
        );
        assert_eq!(
            granted_resource_scopes(Some("files:write"), Some("files:read"), &offered),
            Err(ResourceScopeError::NotRegistered("files:read".into()))
        );
        assert_eq!(
            names(granted_resource_scopes(Some("files:read"), Some("mcp:read"), &offered).unwrap()),
            "files:read",
            "registered scopes of other resources do not restrict this one"
        );
    }

    #[test]
    fn held_scopes_stay_within_the_granted_ones() {
        assert!(scopes_within("mcp:write", "mcp:read"));
        assert!(scopes_within(
            "mcp:read mcp:write",
            "mcp:read mcp:write offline_access"
        ));
        assert!(!scopes_within("mcp:read", "mcp:write"));
        assert!(scopes_within("files:read files:write", "files:read"));
        assert!(!scopes_within("files:read", "files:write"));
        assert!(!scopes_within("files:read", "mcp:read"));
        assert!(!scopes_within("a\"b", "a\"b"), "outside the grammar");
        assert!(scopes_within("files:read", ""));
    }
}
