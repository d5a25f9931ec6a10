//! Redirect URI registration rules and matching (OAuth 2.1 draft-13 §2.3,
//! §7.5.1, §8.4.2; RFC 8252 §7.1–7.3; RFC 7591 §2).
//!
//! Matching compares the two URIs after the normalization of RFC 3986 §6.2.2 (case of the
//! scheme and host, percent-encoding, dot segments) and §6.2.3 (an empty `http(s)` path is `/`,
//! the scheme's default port is no port), with the single RFC 8252 §7.3 exception that a native
//! app's `http` loopback redirect may use any port. Nothing looser: no prefix, wildcard or
//! cross-host match.

use crate::domain::loopback::is_loopback_host;

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
    /// Contains whitespace, a backslash, or a control, invisible or formatting character
    /// ([`super::text::is_forbidden_in_line`]), which URL parsers silently drop or
    /// rewrite, so the registered string would not be the URI actually used.
    #[error(
        "redirect URI must not contain whitespace, backslashes, or control, invisible or formatting characters"
    )]
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
    /// A character RFC 3986 (§2, Appendix A) does not allow in a URI — a non-ASCII
    /// character, a space, a control, a double quote, a backslash, a backtick or one of `<>^{|}`
    /// — or a `%` not followed by two hex
    /// digits (§2.1, §2.4). URL parsers percent-encode such characters, so the client would
    /// be sent to another string than the one it registered.
    #[error(
        "redirect URI must be an RFC 3986 URI: only ASCII letters, digits and -._~:/?#[]@!$&'()*+,;= and % followed by two hex digits (percent-encode anything else)"
    )]
    NotUriCharacter,
    /// Port 0, which no listener has: it is the "any port" of a bind call (RFC 6335 §6), not a
    /// port a native app's loopback redirect can be received on (RFC 8252 §7.3).
    #[error("redirect URI port must not be 0")]
    PortZero,
}

/// Whether `uri` is made only of the characters RFC 3986 allows in a URI (§2.2 reserved,
/// §2.3 unreserved), each `%` starting a percent-encoded octet of two hex digits (§2.1): no
/// non-ASCII character, space, control, double quote, backslash, backtick or `<>^{|}`. Such a
/// string stays the same byte for
/// byte when a URL parser reads and writes it back, apart from the normalizations of
/// RFC 3986 §6.
pub fn uses_only_uri_characters(uri: &str) -> bool {
    let bytes = uri.as_bytes();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'%' => {
                let hex = |j: usize| bytes.get(j).is_some_and(u8::is_ascii_hexdigit);
                if !(hex(i + 1) && hex(i + 2)) {
                    return false;
                }
                i += 3;
            }
            b if b.is_ascii_alphanumeric() || b"-._~:/?#[]@!$&'()*+,;=".contains(&b) => i += 1,
            _ => return false,
        }
    }
    true
}

/// Checks a redirect URI a client registers (RFC 7591 §2). Accepted:
/// `https` URIs with a host; `http` URIs whose host is loopback
/// ([`is_loopback_host`], RFC 8252 §7.3); private-use schemes of native apps
/// such as `cursor://…` or `com.example.app:/cb` (RFC 8252 §7.1). Refused,
/// with the matching [`RedirectUriError`]: more than 2000 bytes, whitespace,
/// control characters or backslashes, any other character RFC 3986 does not allow
/// ([`uses_only_uri_characters`]: non-ASCII, a double quote, a backtick, `<>^{|}`, a `%` not
/// followed by two hex digits), relative URIs, fragments, userinfo, port 0,
/// the schemes `javascript data file vbscript about blob ftp ws wss chrome view-source mailto
/// tel sms filesystem`, and
/// `http` on any other host.
pub fn validate_registration(uri: &str) -> Result<(), RedirectUriError> {
    if uri.len() > MAX_LEN {
        return Err(RedirectUriError::TooLong);
    }
    if uri
        .chars()
        .any(|c| c.is_whitespace() || c == '\\' || super::text::is_forbidden_in_line(c))
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
    if url.port() == Some(0) {
        return Err(RedirectUriError::PortZero);
    }
    match url.scheme() {
        "https" => {}
        "http" if is_http_loopback(uri) => {}
        "http" => return Err(RedirectUriError::HttpNotLoopback),
        scheme if is_dangerous_scheme(scheme) => {
            return Err(RedirectUriError::ForbiddenScheme(scheme.to_owned()));
        }
        _ => {}
    }
    if !uses_only_uri_characters(uri) {
        return Err(RedirectUriError::NotUriCharacter);
    }
    Ok(())
}

/// True if a raw `http://` URI (scheme in any case) names a loopback host, whatever its
/// port. Works on the raw string, so that a host only a lenient URL parser reads as loopback
/// (`127.1`, `0x7f.0.0.1`) is not taken for one at registration.
fn is_http_loopback(uri: &str) -> bool {
    let Some(rest) = uri
        .get(..7)
        .filter(|scheme| scheme.eq_ignore_ascii_case("http://"))
        .map(|_| &uri[7..])
    else {
        return false;
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let host = match authority.rsplit_once(':') {
        Some((host, port))
            if port.bytes().all(|b| b.is_ascii_digit())
                && (host.starts_with('[') == host.ends_with(']')) =>
        {
            host
        }
        _ => authority,
    };
    is_loopback_host(host)
}

/// A URI in the normal form of RFC 3986 §6.2.2–6.2.3, split into the parts that are compared.
#[derive(Debug, PartialEq, Eq)]
struct Normalized {
    /// Lowercase scheme.
    scheme: String,
    /// Userinfo, if any (percent-encoding normalized).
    userinfo: Option<String>,
    /// Lowercase host (IPv6 literals in RFC 5952 form), if there is an authority.
    host: Option<String>,
    /// The port, absent when it was empty or the scheme's default (`http` 80, `https` 443).
    port: Option<u16>,
    /// The path without dot segments; `/` for an empty `http(s)` path with an authority.
    path: String,
    /// The query, if any.
    query: Option<String>,
    /// The fragment, if any.
    fragment: Option<String>,
}

/// The default port of `http` (80) and `https` (443), the only schemes whose default port
/// RFC 3986 §6.2.3 normalization applies to here.
fn default_port(scheme: &fluent_uri::component::Scheme) -> Option<u16> {
    match scheme.as_str().to_ascii_lowercase().as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

/// `uri` in normal form, or `None` if it is not an RFC 3986 URI (or its port is not a
/// 16-bit number).
fn normalize(uri: &str) -> Option<Normalized> {
    let parsed = fluent_uri::Uri::parse(uri).ok()?;
    let normal = fluent_uri::normalize::Normalizer::new()
        .default_port_with(default_port)
        .normalize(&parsed)
        .ok()?;
    let scheme = normal.scheme().as_str().to_owned();
    let (userinfo, host, port) = match normal.authority() {
        Some(authority) => (
            authority.userinfo().map(|u| u.as_str().to_owned()),
            Some(authority.host().to_owned()),
            authority.port_to_u16().ok()?,
        ),
        None => (None, None, None),
    };
    let mut path = normal.path().as_str().to_owned();
    if path.is_empty() && host.is_some() && matches!(scheme.as_str(), "http" | "https") {
        path.push('/');
    }
    Some(Normalized {
        scheme,
        userinfo,
        host,
        port,
        path,
        query: normal.query().map(|q| q.as_str().to_owned()),
        fragment: normal.fragment().map(|f| f.as_str().to_owned()),
    })
}

/// True if a `redirect_uri` from an authorization request matches a registered one
/// (OAuth 2.1 draft-13 §2.3.1, §8.4.2): the strings are equal, or they are equal after
/// RFC 3986 §6.2.2–6.2.3 normalization — scheme and host compare case-insensitively,
/// percent-encoding and dot segments are normalized, an empty `http(s)` path equals `/`, and
/// the default port (`http` 80, `https` 443) equals no port. For `http` URIs whose host is
/// loopback ([`is_loopback_host`]) the port may differ or be absent (RFC 8252 §7.3), but not be
/// 0 (RFC 6335 §6). Host
/// (`127.0.0.1` never equals `localhost`), userinfo, path, query and fragment must still be
/// equal: no prefix, wildcard or cross-host match. A requested URI that is not an RFC 3986 URI
/// matches only by string equality.
pub fn matches(registered: &str, requested: &str) -> bool {
    if registered == requested {
        return true;
    }
    let (Some(reg), Some(req)) = (normalize(registered), normalize(requested)) else {
        return false;
    };
    let loopback = reg.scheme == "http" && reg.host.as_deref().is_some_and(is_loopback_host);
    if loopback {
        // The port may vary, but not to 0: that is no port a listener has (RFC 6335 §6).
        req.port != Some(0) && Normalized { port: None, ..reg } == Normalized { port: None, ..req }
    } else {
        reg == req
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
            "HTTP://127.0.0.1:1/cb",
            "cursor://anysphere.cursor-retrieval/oauth/callback",
            "vscode://x/y",
            "com.example.app:/oauth2redirect",
        ] {
            assert_eq!(validate_registration(uri), Ok(()), "{uri}");
        }
    }

    /// Regression (fuzzing, `authorize_query`): RFC 3986 §2.1, §2.4 and Appendix A make a
    /// bare `%` and a raw non-ASCII character invalid in a URI; registered, they were sent back
    /// percent-re-encoded, another string than the one registered. Refused for every form.
    #[test]
    fn registration_refuses_characters_rfc_3986_does_not_allow() {
        for uri in [
            "cc:c%%W\u{FFFD}",
            "cc:c%",
            "com.example.app:/cb%",
            "com.example.app:/cb%4",
            "com.example.app:/cb%zz",
            "com.example.app:/caf\u{e9}",
            "cursor://anysphere.cursor-retrieval/oauth/callback%g0",
            "https://good.example/cb%",
            "https://good.example/cb?x=%2",
            "https://good.example/caf\u{e9}",
            "https://b\u{fc}cher.example/cb",
            "https://good.example/cb?x=\u{fc}",
            "http://127.0.0.1:3000/cb%",
            "http://localhost/\u{65e5}\u{672c}",
            "http://[::1]/cb?x=%%",
        ] {
            assert_eq!(
                validate_registration(uri),
                Err(RedirectUriError::NotUriCharacter),
                "{uri}"
            );
        }
        for c in ['"', '<', '>', '^', '`', '{', '|', '}'] {
            for uri in [
                format!("https://good.example/c{c}b"),
                format!("http://127.0.0.1/cb?x={c}"),
                format!("com.example.app:/c{c}b"),
            ] {
                assert_eq!(
                    validate_registration(&uri),
                    Err(RedirectUriError::NotUriCharacter),
                    "{uri}"
                );
            }
        }
        // Percent-encoded, the same characters are welcome.
        for uri in [
            "https://good.example/caf%C3%A9",
            "https://good.example/cb?x=%7B%7D&y=%25",
            "http://127.0.0.1:3000/cb?q=%e2%82%ac",
            "com.example.app:/c%7Cb",
            "cursor://anysphere.cursor-retrieval/oauth/callback?a=1&b=(2)*3;c=$!'",
            "http://[::1]:8080/cb",
        ] {
            assert_eq!(validate_registration(uri), Ok(()), "{uri}");
        }
    }

    #[test]
    fn uri_characters_are_those_of_rfc_3986() {
        let allowed: String = ('\0'..='\u{7f}')
            .filter(|c| c.is_ascii_alphanumeric() || "-._~:/?#[]@!$&'()*+,;=".contains(*c))
            .collect();
        assert!(uses_only_uri_characters(&allowed));
        assert!(uses_only_uri_characters("%00%ff%AB"));
        assert!(uses_only_uri_characters(""));
        for bad in [
            "%", "%a", "a%", "%%41", "%g1", "a b", "\u{7f}", "\t", "\u{e9}", "\\",
        ] {
            assert!(!uses_only_uri_characters(bad), "{bad:?}");
        }
    }

    #[test]
    fn loopback_port_zero_is_refused() {
        for uri in [
            "http://127.0.0.1:0/cb",
            "http://localhost:0",
            "http://[::1]:000/cb",
        ] {
            assert_eq!(
                validate_registration(uri),
                Err(RedirectUriError::PortZero),
                "{uri}"
            );
        }
        assert_eq!(validate_registration("http://127.0.0.1:10/cb"), Ok(()));
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
        for invisible in ['\u{200B}', '\u{00AD}', '\u{3164}', '\u{2060}'] {
            assert_eq!(
                validate_registration(&format!("https://go{invisible}od.example/cb")),
                Err(InvalidCharacter),
                "U+{:04X}",
                invisible as u32
            );
        }
        let long = format!("https://good.example/{}", "a".repeat(2000));
        assert_eq!(validate_registration(&long), Err(TooLong));
        assert_eq!(
            HttpNotLoopback.to_string(),
            "http redirect URIs are only allowed on loopback hosts (127.0.0.1, [::1], localhost)"
        );
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
        // …but never to port 0, which nothing listens on (RFC 6335 §6).
        assert!(!matches(
            "http://127.0.0.1/callback",
            "http://127.0.0.1:0/callback"
        ));
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
    fn equal_after_rfc3986_normalization() {
        // RFC 3986 §6.2.3: an empty http(s) path is "/", the default port is no port.
        for (registered, requested) in [
            ("http://127.0.0.1:33418", "http://127.0.0.1:33418/"),
            ("http://127.0.0.1/", "http://127.0.0.1:54321"),
            ("http://[::1]", "http://[::1]:8080/"),
            ("https://good.example", "https://good.example/"),
            ("https://good.example/", "https://good.example"),
            ("https://good.example/cb", "https://good.example:443/cb"),
            ("https://good.example:443/cb", "https://good.example/cb"),
            ("https://good.example/cb", "https://good.example:/cb"),
            // §6.2.2.1: scheme and host are case-insensitive.
            ("https://good.example/cb", "https://GOOD.Example/cb"),
            ("https://good.example/cb", "HTTPS://good.example/cb"),
            ("http://localhost:3000/cb", "HTTP://LOCALHOST:4000/cb"),
            ("http://[::1]/cb", "http://[0:0:0:0:0:0:0:1]:5000/cb"),
            (
                "cursor://anysphere.cursor-retrieval/cb",
                "Cursor://Anysphere.Cursor-Retrieval/cb",
            ),
            // §6.2.2.2: percent-encoded unreserved characters and the case of hex digits.
            ("https://good.example/~cb", "https://good.example/%7Ecb"),
            ("https://good.example/a%2fb", "https://good.example/a%2Fb"),
            // §6.2.2.3: dot segments.
            ("https://good.example/cb", "https://good.example/x/../cb"),
        ] {
            assert!(matches(registered, requested), "{registered} ~ {requested}");
        }
    }

    #[test]
    fn nothing_looser_than_normalization() {
        let registered = "https://good.example/cb";
        for requested in [
            "https://evil.example/cb",
            "https://good.example.evil.example/cb",
            "https://good.example/cb/",
            "https://good.example/cb/more",
            "https://good.example/c",
            "https://good.example/CB",
            "https://good.example/cb?x=1",
            "https://good.example/cb#x",
            "https://good.example:8443/cb",
            "https://user@good.example/cb",
            "http://good.example/cb",
            "https://good.example%2Fcb",
            "https://good.example\\cb",
            "https://good.example/cb ",
            "https://good.example/*",
            "",
        ] {
            assert!(!matches(registered, requested), "{requested}");
        }
        assert!(!matches(
            "https://good.example:8443/cb",
            "https://good.example:9443/cb"
        ));
        assert!(!matches("https://good.example", "https://good.example/x"));
        assert!(!matches("https://good.example/", "https://good.example/?"));
        // The port exception is only for http loopback hosts.
        assert!(!matches(
            "https://127.0.0.1:8443/cb",
            "https://127.0.0.1:9443/cb"
        ));
        assert!(!matches("http://127.0.0.1/cb", "http://127.1:5000/cb"));
        assert!(!matches("http://127.0.0.1/cb", "http://[::1]:5000/cb"));
        // Private-use schemes: the path stays case-sensitive and exact.
        let app = "cursor://anysphere.cursor-retrieval/oauth/callback";
        assert!(matches(app, app));
        assert!(!matches(
            app,
            "cursor://anysphere.cursor-retrieval/oauth/callback2"
        ));
        assert!(!matches(
            app,
            "cursor://anysphere.cursor-retrieval/OAuth/callback"
        ));
        assert!(!matches("com.example.app:/cb", "com.example.app:/cb/"));
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
