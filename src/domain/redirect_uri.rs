//! Redirect URI registration rules and matching (OAuth 2.1 draft-13 §2.3,
//! §7.5.1, §8.4.2; RFC 8252 §7.1–7.3; RFC 7591 §2).
//!
//! Matching is exact string comparison, with the single RFC 8252 §7.3
//! exception that a native app's `http` loopback redirect may use any port.

use std::net::{Ipv4Addr, Ipv6Addr};

use url::Url;

/// Longest redirect URI accepted at registration, in bytes.
const MAX_LEN: usize = 2000;

/// Schemes that can run code, read local data or are not redirect targets.
const FORBIDDEN_SCHEMES: [&str; 15] = [
    "javascript",
    "data",
    "file",
    "vbscript",
    "about",
    "blob",
    "ftp",
    "ws",
    "wss",
    "chrome",
    "view-source",
    "mailto",
    "tel",
    "sms",
    "filesystem",
];

/// More schemes that hand the URI to an OS handler, a file share or another protocol rather
/// than to the app that registered: never a redirect target.
const HANDLER_SCHEMES: [&str; 24] = [
    "intent",
    "android-app",
    "content",
    "smb",
    "nfs",
    "afp",
    "jar",
    "mhtml",
    "edge",
    "microsoft-edge",
    "res",
    "shell",
    "sftp",
    "ftps",
    "ssh",
    "telnet",
    "ldap",
    "ldaps",
    "gopher",
    "news",
    "nntp",
    "irc",
    "webcal",
    "jnlp",
];

/// Whether a redirect URI's scheme is refused: the listed ones, any `ms-…` (Windows protocol
/// handlers), any `itms…` (Apple store and install handlers) and any scheme naming a script.
/// Other private-use schemes of native apps (RFC 8252 §7.1: `cursor`, `vscode`,
/// `com.example.app`) are accepted.
fn is_dangerous_scheme(scheme: &str) -> bool {
    FORBIDDEN_SCHEMES.contains(&scheme)
        || HANDLER_SCHEMES.contains(&scheme)
        || scheme.starts_with("ms-")
        || scheme.starts_with("search-ms")
        || scheme.starts_with("itms")
        || scheme.contains("script")
}

/// Why a redirect URI cannot be registered; maps to the
/// `invalid_redirect_uri` error of RFC 7591 §3.2.2.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RedirectUriError {
    /// Longer than 2000 bytes.
    #[error("redirect URI must be at most 2000 bytes")]
    TooLong,
    /// Contains whitespace, a control character or a backslash, which URL
    /// parsers silently drop or rewrite, so the registered string would not
    /// be the URI actually used.
    #[error("redirect URI must not contain whitespace, control characters or backslashes")]
    InvalidCharacter,
    /// Not an absolute URI (RFC 3986 §4.3); carries the parser's reason.
    #[error("redirect URI must be an absolute URI ({0})")]
    NotAbsolute(url::ParseError),
    /// Has a fragment (OAuth 2.1 draft-13 §2.3, RFC 6749 §3.1.2).
    #[error("redirect URI must not contain a fragment (#...)")]
    Fragment,
    /// Has userinfo (`user@host`), which can disguise the real host.
    #[error("redirect URI must not contain user information (user@host)")]
    UserInfo,
    /// Uses a scheme that is never a valid redirect target.
    #[error("redirect URI scheme \"{0}\" is not allowed")]
    ForbiddenScheme(String),
    /// `http` on a host other than loopback (OAuth 2.1 draft-13 §2.3.1,
    /// RFC 8252 §8.3).
    #[error("http redirect URIs are only allowed on loopback hosts (127.0.0.1, [::1], localhost)")]
    HttpNotLoopback,
}

/// Checks a redirect URI a client registers (RFC 7591 §2). Accepted:
/// `https` URIs with a host; `http` URIs whose host is loopback
/// ([`is_loopback_host`], RFC 8252 §7.3); private-use schemes of native apps
/// such as `cursor://…` or `com.example.app:/cb` (RFC 8252 §7.1). Refused,
/// with the matching [`RedirectUriError`]: more than 2000 bytes, whitespace,
/// control characters or backslashes, relative URIs, fragments, userinfo,
/// the schemes `javascript data file vbscript about blob ftp ws wss chrome view-source mailto
/// tel sms filesystem`, and
/// `http` on any other host.
pub fn validate_registration(uri: &str) -> Result<(), RedirectUriError> {
    if uri.len() > MAX_LEN {
        return Err(RedirectUriError::TooLong);
    }
    if uri
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || c == '\\')
    {
        return Err(RedirectUriError::InvalidCharacter);
    }
    let url = Url::parse(uri).map_err(RedirectUriError::NotAbsolute)?;
    if uri.contains('#') {
        return Err(RedirectUriError::Fragment);
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(RedirectUriError::UserInfo);
    }
    match url.scheme() {
        "https" => Ok(()),
        "http" if loopback_parts(uri).is_some() => Ok(()),
        "http" => Err(RedirectUriError::HttpNotLoopback),
        scheme if is_dangerous_scheme(scheme) => {
            Err(RedirectUriError::ForbiddenScheme(scheme.to_owned()))
        }
        _ => Ok(()),
    }
}

/// True if `host` (as written in a URI authority, without port) names the
/// local machine: `localhost` (ASCII case-insensitive), an IPv4 literal in
/// 127.0.0.0/8 in dotted-decimal form, or `[::1]` (RFC 8252 §7.3, §8.3).
pub fn is_loopback_host(host: &str) -> bool {
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return inner
            .parse::<Ipv6Addr>()
            .is_ok_and(|ip| ip == Ipv6Addr::LOCALHOST);
    }
    host.parse::<Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
}

/// Splits a raw `http://` URI with a loopback host into
/// `(host, everything after the authority)`, ignoring the port. Works on the
/// raw string so that no URL normalisation can make two URIs look equal.
fn loopback_parts(uri: &str) -> Option<(&str, &str)> {
    let rest = uri.strip_prefix("http://")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path_and_query) = rest.split_at(end);
    let host = match authority.rsplit_once(':') {
        Some((host, port))
            if port.bytes().all(|b| b.is_ascii_digit())
                && (host.starts_with('[') == host.ends_with(']')) =>
        {
            host
        }
        _ => authority,
    };
    is_loopback_host(host).then_some((host, path_and_query))
}

/// True if a `redirect_uri` from an authorization request matches a
/// registered one (OAuth 2.1 draft-13 §2.3.1, §8.4.2): exact string
/// equality, except that for `http` URIs on a loopback host the port may
/// differ or be absent (RFC 8252 §7.3), provided host (`127.0.0.1` never
/// equals `localhost`), path and query are byte-identical and the requested
/// URI parses.
pub fn matches(registered: &str, requested: &str) -> bool {
    if registered == requested {
        return true;
    }
    match (loopback_parts(registered), loopback_parts(requested)) {
        (Some(reg), Some(req)) => reg == req && Url::parse(requested).is_ok(),
        _ => false,
    }
}

/// The part of a redirect URI to show on the consent page: for `http(s)`
/// the host, plus `:port` when not the scheme's default (e.g.
/// `app.example:8443`); for other schemes the scheme and a colon (e.g.
/// `cursor:`). A URI that does not parse is returned unchanged.
pub fn host_for_display(uri: &str) -> String {
    let Ok(url) = Url::parse(uri) else {
        return uri.to_owned();
    };
    match (url.scheme(), url.host_str()) {
        ("http" | "https", Some(host)) => match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        },
        (scheme, _) => format!("{scheme}:"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registration_accepts_https_loopback_and_private_use_schemes() {
        for uri in [
            "https://good.example/cb",
            "https://good.example:8443/oauth/callback?x=1",
            "http://127.0.0.1/callback",
            "http://127.0.0.1:33418/callback",
            "http://127.1.2.3/cb",
            "http://[::1]:8080/cb",
            "http://localhost/cb",
            "cursor://anysphere.cursor-retrieval/oauth/callback",
            "vscode://x/y",
            "com.example.app:/oauth2redirect",
        ] {
            assert_eq!(validate_registration(uri), Ok(()), "{uri}");
        }
    }

    #[test]
    fn registration_refuses_dangerous_or_ambiguous_uris() {
        use RedirectUriError::*;
        let cases = [
            ("javascript:alert(1)", ForbiddenScheme("javascript".into())),
            ("JavaScript:alert(1)", ForbiddenScheme("javascript".into())),
            ("data:text/html,hi", ForbiddenScheme("data".into())),
            ("file:///etc/passwd", ForbiddenScheme("file".into())),
            ("vbscript:msgbox", ForbiddenScheme("vbscript".into())),
            (
                "view-source:https://a.example/",
                ForbiddenScheme("view-source".into()),
            ),
            ("chrome://settings", ForbiddenScheme("chrome".into())),
            ("mailto:a@example.com", ForbiddenScheme("mailto".into())),
            ("tel:+15551234", ForbiddenScheme("tel".into())),
            (
                "ms-msdt:/id%20PCWDiagnostic",
                ForbiddenScheme("ms-msdt".into()),
            ),
            (
                "ms-word:ofe|u|https://a.example/x",
                ForbiddenScheme("ms-word".into()),
            ),
            ("intent://scan/x", ForbiddenScheme("intent".into())),
            ("smb://host/share", ForbiddenScheme("smb".into())),
            (
                "itms-services://?action=download",
                ForbiddenScheme("itms-services".into()),
            ),
            (
                "x-javascript:alert(1)",
                ForbiddenScheme("x-javascript".into()),
            ),
            (
                "jar:https://a.example/x.jar!/",
                ForbiddenScheme("jar".into()),
            ),
            ("about:blank", ForbiddenScheme("about".into())),
            ("blob:https://a.example/x", ForbiddenScheme("blob".into())),
            ("ftp://a.example/cb", ForbiddenScheme("ftp".into())),
            ("wss://a.example/cb", ForbiddenScheme("wss".into())),
            ("http://example.com/cb", HttpNotLoopback),
            ("http://128.0.0.1/cb", HttpNotLoopback),
            ("http://localhost.evil.example/cb", HttpNotLoopback),
            ("https://a@b.example/cb", UserInfo),
            ("https://good.example/cb#frag", Fragment),
            ("https://good.example/cb#", Fragment),
            (
                "/relative/cb",
                NotAbsolute(url::ParseError::RelativeUrlWithoutBase),
            ),
        ];
        for (uri, expected) in cases {
            assert_eq!(validate_registration(uri), Err(expected), "{uri}");
        }
        assert_eq!(
            validate_registration(" https://good.example/cb"),
            Err(InvalidCharacter)
        );
        assert_eq!(
            validate_registration("https://good.example\\@evil.example/"),
            Err(InvalidCharacter)
        );
        let long = format!("https://good.example/{}", "a".repeat(2000));
        assert_eq!(validate_registration(&long), Err(TooLong));
        assert_eq!(
            HttpNotLoopback.to_string(),
            "http redirect URIs are only allowed on loopback hosts (127.0.0.1, [::1], localhost)"
        );
    }

    #[test]
    fn loopback_hosts() {
        for host in [
            "127.0.0.1",
            "127.255.0.9",
            "[::1]",
            "localhost",
            "LOCALHOST",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "128.0.0.1",
            "10.0.0.1",
            "[::2]",
            "::1x",
            "localhost.",
            "127.1",
            "example.com",
            "",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn loopback_port_may_vary() {
        assert!(matches(
            "http://127.0.0.1/callback",
            "http://127.0.0.1:51234/callback"
        ));
        assert!(matches(
            "http://127.0.0.1:8000/callback",
            "http://127.0.0.1:9000/callback"
        ));
        assert!(matches("http://[::1]/cb?x=1", "http://[::1]:5000/cb?x=1"));
        assert!(matches("http://localhost:3000/cb", "http://localhost/cb"));
    }

    #[test]
    fn loopback_everything_but_the_port_must_match() {
        assert!(!matches(
            "http://127.0.0.1/callback",
            "http://localhost:5000/callback"
        ));
        assert!(!matches(
            "http://localhost/callback",
            "http://127.0.0.1/callback"
        ));
        assert!(!matches(
            "http://127.0.0.1/callback",
            "http://127.0.0.1:5000/other"
        ));
        assert!(!matches(
            "http://127.0.0.1/callback",
            "http://127.0.0.1:5000/callback/"
        ));
        assert!(!matches(
            "http://127.0.0.1/cb?a=1",
            "http://127.0.0.1:5000/cb?a=2"
        ));
        assert!(!matches(
            "http://127.0.0.1/cb",
            "http://127.0.0.1:5000/cb#x"
        ));
        assert!(!matches("http://127.0.0.1/cb", "https://127.0.0.1:5000/cb"));
        assert!(!matches(
            "http://127.0.0.1/cb",
            "http://user@127.0.0.1:5000/cb"
        ));
        assert!(!matches(
            "http://127.0.0.1/cb",
            "http://127.0.0.1:99999999/cb"
        ));
    }

    #[test]
    fn non_loopback_needs_exact_string_equality() {
        let registered = "https://good.example/cb";
        assert!(matches(registered, "https://good.example/cb"));
        assert!(!matches(registered, "https://evil.example/cb"));
        assert!(!matches(registered, "https://good.example/cb/"));
        assert!(!matches(registered, "https://good.example:443/cb"));
        assert!(!matches(registered, "https://GOOD.example/cb"));
        assert!(!matches(registered, "https://good.example/cb?x=1"));
        assert!(!matches(
            "https://good.example:8443/cb",
            "https://good.example:9443/cb"
        ));
        let app = "cursor://anysphere.cursor-retrieval/oauth/callback";
        assert!(matches(app, app));
        assert!(!matches(
            app,
            "cursor://anysphere.cursor-retrieval/oauth/callback2"
        ));
    }

    #[test]
    fn display_host() {
        assert_eq!(host_for_display("https://good.example/cb"), "good.example");
        assert_eq!(
            host_for_display("https://good.example:443/cb"),
            "good.example"
        );
        assert_eq!(
            host_for_display("https://good.example:8443/cb"),
            "good.example:8443"
        );
        assert_eq!(
            host_for_display("http://127.0.0.1:33418/cb"),
            "127.0.0.1:33418"
        );
        assert_eq!(host_for_display("http://[::1]/cb"), "[::1]");
        assert_eq!(
            host_for_display("cursor://anysphere.cursor-retrieval/oauth/callback"),
            "cursor:"
        );
        assert_eq!(
            host_for_display("com.example.app:/oauth2redirect"),
            "com.example.app:"
        );
    }
}
