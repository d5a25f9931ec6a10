//! Trusted identity providers: the rules of what the operator may register with `gatehouse idp
//! add` (names, issuers, email domains) and the rules a provider's word about a person must
//! meet before it signs someone in.
//!
//! One registry serves two uses: OpenID Connect sign-in (OpenID Connect Core 1.0 §3.1, the
//! authorization-code flow with PKCE, RFC 7636) with a client id and secret at the provider,
//! and assertions the provider signs (the Identity Assertion JWT Authorization Grant, redeemed
//! with the JWT-bearer grant of RFC 7523), verified against its `jwks_uri`.

use url::Url;

use super::loopback::is_loopback_host;

/// The longest provider name.
pub const MAX_NAME_LEN: usize = 20;
/// The most `--domains` a provider may be given.
pub const MAX_DOMAINS: usize = 50;
/// The longest display name, in characters.
pub const MAX_DISPLAY_NAME: usize = 60;
/// How long a provider sign-in may take between leaving for the provider and coming back, in
/// seconds (the `state`, `nonce` and PKCE verifier are kept that long, once).
pub const SIGNIN_LIFETIME_SECS: i64 = 600;

/// Why a value given for a provider was refused; the text is one line for the operator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct IdpInputError(pub String);

fn refuse<T>(message: impl Into<String>) -> Result<T, IdpInputError> {
    Err(IdpInputError(message.into()))
}

/// A provider's name: `[a-z0-9-]{1,20}`, the last segment of `/signin/idp/NAME`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProviderName(String);

impl ProviderName {
    /// Parses a name.
    ///
    /// Errors: empty, longer than [`MAX_NAME_LEN`], or a character outside `[a-z0-9-]`.
    pub fn parse(text: &str) -> Result<ProviderName, IdpInputError> {
        if text.is_empty()
            || text.len() > MAX_NAME_LEN
            || !text
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return refuse(format!(
                "invalid identity provider name \"{}\": 1 to {MAX_NAME_LEN} characters of a-z, 0-9 and -",
                text.escape_debug()
            ));
        }
        Ok(ProviderName(text.to_string()))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ProviderName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Checks an issuer URL (OpenID Connect Discovery 1.0 §2 / RFC 8414 §2): https, with a host,
/// without query, fragment or user information; plain http only for a loopback host (a
/// provider on this machine, as tests run). A trailing `/` is kept as given: the provider's
/// `iss` must equal it exactly.
///
/// Errors: what is wrong, in words.
pub fn parse_issuer(text: &str) -> Result<Url, IdpInputError> {
    let Ok(url) = Url::parse(text.trim()) else {
        return refuse(format!("--issuer \"{}\" is not a URL", text.escape_debug()));
    };
    let Some(host) = url.host_str() else {
        return refuse("--issuer has no host");
    };
    match url.scheme() {
        "https" => {}
        "http" if is_loopback_host(host) => {}
        "http" => {
            return refuse("--issuer must be https (plain http only on a loopback address)");
        }
        _ => return refuse("--issuer must be an https URL"),
    }
    if url.query().is_some() || url.fragment().is_some() {
        return refuse("--issuer must have no query or fragment");
    }
    if !url.username().is_empty() || url.password().is_some() {
        return refuse("--issuer must not contain user information");
    }
    Ok(url)
}

/// Checks a `--jwks-uri`: an https URL without user information or fragment, or plain http
/// on a loopback host (it is fetched through the same protected fetcher as client key sets,
/// [`super::client_assertion::validate_trusted_uri`]).
///
/// Errors: what is wrong, in words.
pub fn parse_jwks_uri(text: &str) -> Result<Url, IdpInputError> {
    super::client_assertion::validate_trusted_uri(text.trim())
        .map_err(|e| IdpInputError(format!("--jwks-uri: {e}")))
}

/// Parses `--domains a.com,b.org`: lowercased, each a DNS name of at least two labels
/// (letters, digits, `-`), at most [`MAX_DOMAINS`], duplicates dropped.
///
/// Errors: an empty list or a malformed domain.
pub fn parse_domains(text: &str) -> Result<Vec<String>, IdpInputError> {
    let mut out: Vec<String> = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let domain = item.trim_start_matches('@').to_ascii_lowercase();
        let labels_ok = domain.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
        if !labels_ok || !domain.contains('.') || domain.len() > 253 {
            return refuse(format!(
                "--domains: \"{}\" is not a domain such as example.com",
                item.escape_debug()
            ));
        }
        if !out.contains(&domain) {
            out.push(domain);
        }
    }
    if out.is_empty() {
        return refuse("--domains names no domain");
    }
    if out.len() > MAX_DOMAINS {
        return refuse(format!("--domains: at most {MAX_DOMAINS} domains"));
    }
    Ok(out)
}

/// Checks a display name: one line of 1 to [`MAX_DISPLAY_NAME`] characters, no control
/// characters.
///
/// Errors: what is wrong, in words.
pub fn parse_display_name(text: &str) -> Result<String, IdpInputError> {
    let text = text.trim();
    if text.is_empty()
        || text.chars().count() > MAX_DISPLAY_NAME
        || text.chars().any(char::is_control)
    {
        return refuse(format!(
            "--display-name must be 1 to {MAX_DISPLAY_NAME} characters on one line"
        ));
    }
    Ok(text.to_string())
}

/// Whether `email`'s domain is one of `domains` (exactly; a subdomain is another domain).
/// `None` (no `--domains`): every domain.
pub fn domain_allowed(domains: Option<&[String]>, email: &str) -> bool {
    let Some(domains) = domains else {
        return true;
    };
    let Some((_, domain)) = email.rsplit_once('@') else {
        return false;
    };
    let domain = domain.to_ascii_lowercase();
    domains.contains(&domain)
}

/// The associated data a provider's client secret is sealed with: it opens for this provider
/// only ([`crate::domain::server_key`]).
pub fn client_secret_context(name: &ProviderName) -> Vec<u8> {
    format!("gatehouse idp client_secret {name}").into_bytes()
}

/// The associated data a sign-in under way is sealed with: it opens for its own `state` only.
pub fn signin_context(state_hash: &str) -> Vec<u8> {
    format!("gatehouse idp signin {state_hash}").into_bytes()
}

/// The redirect URI registered at the provider for `name`: `ISSUER/signin/idp/NAME/callback`.
pub fn callback_url(issuer: &str, name: &str) -> String {
    format!("{issuer}/signin/idp/{name}/callback")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_lowercase_words() {
        assert!(ProviderName::parse("acme-sso").is_ok());
        assert!(ProviderName::parse("").is_err());
        assert!(ProviderName::parse("Acme").is_err());
        assert!(ProviderName::parse("a/b").is_err());
        assert!(ProviderName::parse(&"a".repeat(21)).is_err());
    }

    #[test]
    fn http_issuers_only_on_loopback() {
        assert!(parse_issuer("https://login.example.com").is_ok());
        assert!(parse_issuer("http://127.0.0.1:8080").is_ok());
        assert!(parse_issuer("http://localhost:9000/realms/x").is_ok());
        assert!(parse_issuer("http://[::1]:9000").is_ok());
        assert!(parse_issuer("http://login.example.com").is_err());
        assert!(parse_issuer("ftp://login.example.com").is_err());
        assert!(parse_issuer("https://login.example.com/?tenant=1").is_err());
        assert!(parse_issuer("https://u:p@login.example.com").is_err());
    }

    #[test]
    fn domains_are_checked_and_matched_exactly() {
        let d = parse_domains("Acme.com, @example.org,acme.com").unwrap();
        assert_eq!(d, vec!["acme.com".to_string(), "example.org".to_string()]);
        assert!(parse_domains(",").is_err());
        assert!(parse_domains("localhost").is_err());
        assert!(parse_domains("a..com").is_err());
        assert!(domain_allowed(Some(&d), "ann@ACME.com"));
        assert!(!domain_allowed(Some(&d), "ann@sub.acme.com"));
        assert!(!domain_allowed(Some(&d), "ann@acme.com.evil.net"));
        assert!(domain_allowed(None, "ann@anything.net"));
    }
}
