//! Client ID metadata documents (draft-ietf-oauth-client-id-metadata-document-00, MCP
//! 2025-11-25 "Client ID Metadata Documents"): the rules for a URL-shaped `client_id`, for the
//! addresses it may be fetched from, for the fetched document, and for how long it is cached.

use std::net::IpAddr;
use std::time::Duration;

use serde_json::Value;
use url::Url;

use super::client_assertion::{PRIVATE_KEY_JWT, validate_jwks_uri, validate_public_jwks};
use super::redirect_uri::validate_registration;
use super::text::{check_line, forbidden_char};

/// Longest `client_name`, in characters.
pub const MAX_CLIENT_NAME_CHARS: usize = 200;
/// The members besides `client_name` that a person may be shown (RFC 7591 §2): held to the
/// rule of names ([`super::text::is_forbidden_in_line`]) when present.
pub const DISPLAY_MEMBERS: [&str; 6] = [
    "client_uri",
    "logo_uri",
    "tos_uri",
    "policy_uri",
    "software_id",
    "software_version",
];

/// Largest document accepted, in bytes (the draft recommends 5 KB).
pub const MAX_DOCUMENT_BYTES: usize = 5 * 1024;
/// Shortest cache lifetime applied to a cacheable document.
pub const MIN_CACHE: Duration = Duration::from_secs(60);
/// Longest cache lifetime applied.
pub const MAX_CACHE: Duration = Duration::from_secs(24 * 3600);
/// Lifetime when the response says nothing about caching.
pub const DEFAULT_CACHE: Duration = Duration::from_secs(300);

/// Why a client ID metadata document cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CimdError {
    /// The `client_id` URL breaks the draft's §2 rules.
    #[error("client_id URL is not acceptable: {0}")]
    BadUrl(&'static str),
    /// The host resolves to an address that must not be fetched (SSRF protection, §6). Shown
    /// with the words of [`CimdError::Unavailable`], so that anonymous visitors cannot tell which
    /// names resolve to internal addresses (the reason is logged).
    #[error("client metadata document could not be fetched right now")]
    ForbiddenAddress,
    /// The fetch failed for good (a 4xx status, a document too large). The detail is for logs
    /// only: it is not shown, so the error page cannot be used to probe other hosts' ports.
    #[error("client metadata document could not be fetched")]
    Fetch(String),
    /// The fetch failed for now (DNS, connection, time, a 5xx or 429 status): the client is
    /// told to try again, never that it is unknown, so it keeps its identity. The detail is for
    /// logs only, as for [`CimdError::Fetch`].
    #[error("client metadata document could not be fetched right now")]
    Unavailable(String),
    /// The document is not acceptable (§3.1).
    #[error("client metadata document is invalid: {0}")]
    BadDocument(String),
}

impl CimdError {
    /// Whether trying again later may succeed: [`CimdError::Unavailable`], and
    /// [`CimdError::ForbiddenAddress`], which must be answered like a failed lookup or
    /// connection so that nobody can tell which names resolve to internal addresses (issue 30,
    /// finding 11).
    pub fn is_temporary(&self) -> bool {
        matches!(
            self,
            CimdError::Unavailable(_) | CimdError::ForbiddenAddress
        )
    }
}

/// Whether `client_id` is URL-shaped (and so names a metadata document).
pub fn is_url_client_id(client_id: &str) -> bool {
    client_id.starts_with("https://") || client_id.starts_with("http://")
}

/// Validates a URL-shaped `client_id` (§2): printable ASCII, `https`, a host, a path other
/// than `/`, no fragment, no userinfo, no query, no `.`/`..` segments.
pub fn validate_client_id_url(client_id: &str) -> Result<Url, CimdError> {
    // The id is shown on the consent page as it is: an RFC 3986 URI is printable ASCII, so
    // nothing invisible can hide in it.
    if !client_id.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(CimdError::BadUrl(
            "it must be printable ASCII (percent-encode anything else)",
        ));
    }
    let url = Url::parse(client_id).map_err(|_| CimdError::BadUrl("not a URL"))?;
    if url.scheme() != "https" {
        return Err(CimdError::BadUrl("the scheme must be https"));
    }
    if url.host_str().is_none() {
        return Err(CimdError::BadUrl("it has no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(CimdError::BadUrl("it must not contain user information"));
    }
    if url.fragment().is_some() || client_id.contains('#') {
        return Err(CimdError::BadUrl("it must not contain a fragment"));
    }
    if url.query().is_some() {
        return Err(CimdError::BadUrl("it must not contain a query"));
    }
    let raw_path = client_id
        .splitn(4, '/')
        .nth(3)
        .map(|p| format!("/{p}"))
        .unwrap_or_default();
    if raw_path.is_empty() || raw_path == "/" {
        return Err(CimdError::BadUrl("it must have a path"));
    }
    if raw_path.split('/').any(|s| s == "." || s == "..") {
        return Err(CimdError::BadUrl(
            "it must not contain . or .. path segments",
        ));
    }
    Ok(url)
}

/// Whether an address must never be fetched: loopback, private (RFC 1918, ULA), link-local,
/// shared (100.64.0.0/10), unspecified, multicast, broadcast, documentation and benchmarking
/// ranges, and IPv4-mapped forms of those.
pub fn is_forbidden_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_multicast()
                || v4.is_broadcast()
                || v4.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (o[1] & 0xc0) == 64)
                || (o[0] == 198 && (o[1] & 0xfe) == 18)
                || (o[0] == 192 && o[1] == 0 && o[2] == 0)
                || (o[0] == 192 && o[1] == 88 && o[2] == 99)
                || o[0] >= 240
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_forbidden_ip(IpAddr::V4(v4));
            }
            let s = v6.segments();
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                // ::/64 holds IPv4-compatible (::a.b.c.d) and IPv4-translated (::ffff:0:a.b.c.d)
                // forms; nothing public lives there.
                || s[..4].iter().all(|x| *x == 0)
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                || (s[0] & 0xffc0) == 0xfec0
                || s[0] == 0x2002
                || (s[0] == 0x2001 && s[1] == 0x0000)
                || (s[0] == 0x2001 && s[1] == 0x0db8)
                || (s[0] == 0x0064 && s[1] == 0xff9b)
                || (s[0] == 0x0100 && s[1..4].iter().all(|x| *x == 0))
        }
    }
}

/// What Gatehouse uses of a valid document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientMetadata {
    /// `client_name` (required by MCP).
    pub client_name: String,
    /// `redirect_uris`, each valid for registration.
    pub redirect_uris: Vec<String>,
    /// `none`, or `private_key_jwt` with its keys at `jwks_uri` or in `jwks` (RFC 7523 §2.2).
    pub token_endpoint_auth_method: String,
    /// The document itself.
    pub document: Value,
}

/// Validates a fetched document (§3.1): a JSON object whose `client_id` equals the URL by simple
/// string comparison, with `client_name` (at most 200 characters, passing
/// [`super::text::check_line`]: nothing invisible, something visible) and `redirect_uris`, no
/// invisible or formatting characters in the [`DISPLAY_MEMBERS`], no shared secret, and
/// `token_endpoint_auth_method` absent, `none` (a public client), or `private_key_jwt` with
/// exactly one of an https `jwks_uri` and public `jwks` (the client signs assertions).
pub fn validate_document(client_id: &str, body: &[u8]) -> Result<ClientMetadata, CimdError> {
    let bad = |m: &str| CimdError::BadDocument(m.to_string());
    let doc: Value = serde_json::from_slice(body).map_err(|_| bad("not JSON"))?;
    let obj = doc.as_object().ok_or_else(|| bad("not a JSON object"))?;
    if obj.get("client_id").and_then(Value::as_str) != Some(client_id) {
        return Err(bad(
            "its client_id does not equal the URL it was fetched from",
        ));
    }
    if obj.contains_key("client_secret") || obj.contains_key("client_secret_expires_at") {
        return Err(bad("it must not contain a client secret"));
    }
    let token_endpoint_auth_method = match obj
        .get("token_endpoint_auth_method")
        .and_then(Value::as_str)
    {
        None | Some("none") => "none",
        Some(PRIVATE_KEY_JWT) => {
            match (obj.get("jwks_uri"), obj.get("jwks")) {
                (Some(Value::String(uri)), None) => {
                    validate_jwks_uri(uri).map_err(bad)?;
                }
                (None, Some(jwks)) => validate_public_jwks(jwks).map_err(bad)?,
                _ => {
                    return Err(bad(
                        "private_key_jwt needs its keys: a jwks_uri (or jwks), not both",
                    ));
                }
            }
            PRIVATE_KEY_JWT
        }
        Some(other) => {
            return Err(CimdError::BadDocument(format!(
                "token_endpoint_auth_method {other} is not supported for metadata-document clients (use none or private_key_jwt)"
            )));
        }
    };
    let client_name = match obj.get("client_name").and_then(Value::as_str) {
        Some(n) if n.chars().count() <= MAX_CLIENT_NAME_CHARS => {
            check_line(n).map_err(|e| CimdError::BadDocument(format!("client_name {e}")))?;
            n.to_string()
        }
        _ => {
            return Err(bad(
                "client_name is required (a string of 1 to 200 characters)",
            ));
        }
    };
    for member in DISPLAY_MEMBERS {
        if let Some(v) = obj.get(member).and_then(Value::as_str)
            && let Some(c) = forbidden_char(v, false)
        {
            return Err(CimdError::BadDocument(format!(
                "{member} must not contain control, invisible or formatting characters (found U+{:04X})",
                u32::from(c)
            )));
        }
    }
    let uris = obj
        .get("redirect_uris")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("redirect_uris is required"))?;
    let mut redirect_uris = Vec::new();
    for u in uris.iter().take(20) {
        let u = u
            .as_str()
            .ok_or_else(|| bad("redirect_uris must be strings"))?;
        validate_registration(u)
            .map_err(|e| CimdError::BadDocument(format!("redirect URI {u}: {e}")))?;
        redirect_uris.push(u.to_string());
    }
    if redirect_uris.is_empty() {
        return Err(bad("redirect_uris must not be empty"));
    }
    Ok(ClientMetadata {
        client_name,
        redirect_uris,
        token_endpoint_auth_method: token_endpoint_auth_method.to_string(),
        document: doc,
    })
}

/// How long a document may be cached given its `Cache-Control` header (§3.4, RFC 9111):
/// `None` (do not cache) for `no-store`, `no-cache` or `max-age=0`; otherwise `max-age` clamped
/// to [`MIN_CACHE`, `MAX_CACHE`], or [`DEFAULT_CACHE`] without a directive.
pub fn cache_lifetime(cache_control: Option<&str>) -> Option<Duration> {
    let Some(cc) = cache_control else {
        return Some(DEFAULT_CACHE);
    };
    let mut max_age = None;
    for directive in cc.split(',').map(|d| d.trim().to_ascii_lowercase()) {
        if directive == "no-store" || directive == "no-cache" {
            return None;
        }
        if let Some(v) = directive.strip_prefix("max-age=") {
            max_age = v.trim_matches('"').parse::<u64>().ok();
        }
    }
    Some(match max_age {
        Some(0) => return None,
        Some(s) => Duration::from_secs(s).clamp(MIN_CACHE, MAX_CACHE),
        None => DEFAULT_CACHE,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn client_id_urls_follow_the_draft() {
        assert!(validate_client_id_url("https://app.example.com/oauth/client.json").is_ok());
        assert!(validate_client_id_url("https://app.example.com:8443/c").is_ok());
        for bad in [
            "http://app.example.com/c",
            "https://app.example.com",
            "https://app.example.com/",
            "https://user@app.example.com/c",
            "https://app.example.com/c#x",
            "https://app.example.com/c?x=1",
            "https://app.example.com/a/../c",
            "https://app.example.com/./c",
            "https://app.example.com/c\u{200B}",
            "https://app.example.com/c lient",
        ] {
            assert!(validate_client_id_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn private_loopback_and_link_local_addresses_are_forbidden() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "::ffff:0:7f00:1",
            "2002:7f00:1::",
            "2001:0:4136:e378::1",
            "fec0::1",
        ] {
            assert!(is_forbidden_ip(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111"] {
            assert!(!is_forbidden_ip(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn documents_must_name_themselves_and_stay_public() {
        let id = "https://app.example.com/client.json";
        let good = json!({"client_id": id, "client_name": "App", "redirect_uris": ["http://127.0.0.1:3000/cb"]});
        let m = validate_document(id, good.to_string().as_bytes()).unwrap();
        assert_eq!(m.client_name, "App");
        assert_eq!(m.redirect_uris, vec!["http://127.0.0.1:3000/cb"]);
        let other_id = json!({"client_id": "https://app.example.com/client.json/", "client_name": "App", "redirect_uris": ["https://a.example/cb"]});
        assert!(
            validate_document(id, other_id.to_string().as_bytes()).is_err(),
            "simple string comparison"
        );
        let secret = json!({"client_id": id, "client_name": "App", "redirect_uris": ["https://a.example/cb"], "client_secret": "s"});
        assert!(validate_document(id, secret.to_string().as_bytes()).is_err());
        let basic = json!({"client_id": id, "client_name": "App", "redirect_uris": ["https://a.example/cb"], "token_endpoint_auth_method": "client_secret_basic"});
        assert!(validate_document(id, basic.to_string().as_bytes()).is_err());
        let no_name = json!({"client_id": id, "redirect_uris": ["https://a.example/cb"]});
        assert!(validate_document(id, no_name.to_string().as_bytes()).is_err());
        for name in [
            "\u{3164}",
            "Cla\u{200B}ude",
            " \u{115F} ",
            "App\u{180E}",
            "",
            "  ",
        ] {
            let doc = json!({"client_id": id, "client_name": name, "redirect_uris": ["https://a.example/cb"]});
            let err = validate_document(id, doc.to_string().as_bytes()).unwrap_err();
            assert!(err.to_string().contains("client_name"), "{name:?}: {err}");
        }
        let doc = json!({"client_id": id, "client_name": "App", "software_id": "x\u{2060}", "redirect_uris": ["https://a.example/cb"]});
        assert!(validate_document(id, doc.to_string().as_bytes()).is_err());
        let bad_uri = json!({"client_id": id, "client_name": "App", "redirect_uris": ["javascript:alert(1)"]});
        assert!(validate_document(id, bad_uri.to_string().as_bytes()).is_err());
        assert!(validate_document(id, b"[1,2]").is_err());
        // RFC 3986 §2.1, §2.4: a bare `%` or a raw non-ASCII character is no URI.
        for uri in [
            "cc:c%%W\u{FFFD}",
            "https://a.example/caf\u{e9}",
            "http://127.0.0.1/cb%",
        ] {
            let doc = json!({"client_id": id, "client_name": "App", "redirect_uris": [uri]});
            let err = validate_document(id, doc.to_string().as_bytes()).unwrap_err();
            assert!(err.to_string().contains("RFC 3986"), "{uri}: {err}");
        }
    }

    #[test]
    fn cache_lifetime_follows_cache_control_within_bounds() {
        assert_eq!(cache_lifetime(None), Some(DEFAULT_CACHE));
        assert_eq!(
            cache_lifetime(Some("public, max-age=600")),
            Some(Duration::from_secs(600))
        );
        assert_eq!(cache_lifetime(Some("max-age=5")), Some(MIN_CACHE));
        assert_eq!(cache_lifetime(Some("max-age=999999")), Some(MAX_CACHE));
        assert_eq!(cache_lifetime(Some("no-store")), None);
        assert_eq!(cache_lifetime(Some("max-age=0")), None);
    }
}
