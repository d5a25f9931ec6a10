//! Rules of API keys (product spec "API keys"): names, lifetimes, address allow-lists and how
//! often a key's last use is written.
//!
//! A key is a [`super::secret::Secret`] of kind [`super::secret::TokenKind::ApiKey`]
//! (`gate_key_` + 256 random bits), stored only as its SHA-256. An account key reaches every
//! active project of its account; a project key reaches one project and, when it has an
//! allow-list, only from the listed addresses.

use std::net::IpAddr;

use ipnet::IpNet;

use super::text::is_forbidden_in_line;

/// The header that carries an API key (product spec "API keys").
pub const API_KEY_HEADER: &str = "x-api-key";

/// Longest key name, in characters.
pub const MAX_NAME_CHARS: usize = 100;

/// The name a key gets when none is given.
pub const DEFAULT_NAME: &str = "API key";

/// Name of a personal MCP URL made without one (command line `--name`, console form).
pub const DEFAULT_URL_NAME: &str = "Personal MCP URL";

/// A key's `last_used_at` is written at most once per this many seconds.
pub const LAST_USED_INTERVAL_SECS: i64 = 60;

/// Longest lifetime `--expires` accepts: ten years, in seconds.
pub const MAX_LIFETIME_SECS: i64 = 3650 * 86_400;

/// Most entries an allow-list may hold.
pub const MAX_ALLOWED_IPS: usize = 50;

/// Why a key's settings were refused; the message names the setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyRuleError {
    /// The name is empty, too long or holds a control or direction-changing character.
    #[error("key name must be 1 to 100 characters without control characters")]
    Name,
    /// The lifetime is not `N` followed by `d` (days) or `h` (hours), between one hour and ten
    /// years.
    #[error(
        "invalid expiry \"{0}\": use a number of days or hours such as 90d or 12h (1h to 3650d)"
    )]
    Lifetime(String),
    /// An allow-list entry is not an IP address or CIDR block.
    #[error("invalid address \"{0}\": use an IP address or a CIDR block such as 203.0.113.0/24")]
    Address(String),
    /// More than [`MAX_ALLOWED_IPS`] entries.
    #[error("at most 50 allowed addresses")]
    TooManyAddresses,
    /// The entries together allow every IPv4 or every IPv6 address (`0.0.0.0/0`, `::/0`, or
    /// blocks that add up to one of them): no limit, which an allow-list must not pretend to be.
    #[error(
        "the allowed addresses cover every {0} address, which limits nothing: name the networks the key is used from, or leave the allow-list out"
    )]
    AllowsEverything(&'static str),
}

/// A key name: trimmed, 1 to [`MAX_NAME_CHARS`] characters, none of them forbidden in a line of
/// text shown to people ([`is_forbidden_in_line`]).
///
/// Errors: [`KeyRuleError::Name`].
pub fn parse_name(name: &str) -> Result<String, KeyRuleError> {
    let name = name.trim();
    if name.is_empty()
        || name.chars().count() > MAX_NAME_CHARS
        || name.chars().any(is_forbidden_in_line)
    {
        return Err(KeyRuleError::Name);
    }
    Ok(name.to_string())
}

/// A lifetime such as `90d` or `12h`, in seconds: a positive integer followed by `d` (days) or
/// `h` (hours), from one hour to [`MAX_LIFETIME_SECS`].
///
/// Errors: [`KeyRuleError::Lifetime`] naming the value.
pub fn parse_lifetime(value: &str) -> Result<i64, KeyRuleError> {
    let bad = || KeyRuleError::Lifetime(value.chars().take(40).collect());
    let Some(unit) = value.chars().last() else {
        return Err(bad());
    };
    let digits = &value[..value.len() - unit.len_utf8()];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 9 {
        return Err(bad());
    }
    let n: i64 = digits.parse().map_err(|_| bad())?;
    let secs = match unit {
        'd' => n * 86_400,
        'h' => n * 3_600,
        _ => return Err(bad()),
    };
    if !(3_600..=MAX_LIFETIME_SECS).contains(&secs) {
        return Err(bad());
    }
    Ok(secs)
}

/// One allow-list entry: an IP address (a single host) or a CIDR block, in its canonical text
/// form (`10.1.2.3/8` becomes `10.0.0.0/8`; a bare address gets `/32` or `/128`).
///
/// Errors: [`KeyRuleError::Address`] naming the value.
pub fn parse_allowed(value: &str) -> Result<IpNet, KeyRuleError> {
    let value = value.trim();
    let net = match value.parse::<IpNet>() {
        Ok(net) => net,
        Err(_) => value
            .parse::<IpAddr>()
            .map(IpNet::from)
            .map_err(|_| KeyRuleError::Address(value.chars().take(60).collect()))?,
    };
    Ok(net.trunc())
}

/// An allow-list from its entries (see [`parse_allowed`]); duplicates are kept once.
///
/// Errors: the first bad entry, [`KeyRuleError::TooManyAddresses`], or
/// [`KeyRuleError::AllowsEverything`] for a list that covers all of IPv4 or of IPv6.
pub fn parse_allow_list(values: &[String]) -> Result<Vec<IpNet>, KeyRuleError> {
    if values.len() > MAX_ALLOWED_IPS {
        return Err(KeyRuleError::TooManyAddresses);
    }
    let mut list = Vec::new();
    for value in values {
        let net = parse_allowed(value)?;
        if !list.contains(&net) {
            list.push(net);
        }
    }
    if let Some(everything) = IpNet::aggregate(&list)
        .into_iter()
        .find(|net| net.prefix_len() == 0)
    {
        return Err(KeyRuleError::AllowsEverything(match everything {
            IpNet::V4(_) => "IPv4",
            IpNet::V6(_) => "IPv6",
        }));
    }
    Ok(list)
}

/// Whether `addr` is in one of `allowed`. An IPv4 address seen as IPv4-mapped IPv6
/// (`::ffff:a.b.c.d`, as a dual-stack listener reports it) is compared as IPv4.
pub fn address_allowed(allowed: &[IpNet], addr: IpAddr) -> bool {
    let addr = addr.to_canonical();
    allowed.iter().any(|net| net.contains(&addr))
}

/// Whether a key last used at `last_used_at` (Unix seconds, `None` if never) should have its
/// use written at `now`: never used, or not written for [`LAST_USED_INTERVAL_SECS`].
pub fn last_use_due(last_used_at: Option<i64>, now: i64) -> bool {
    last_used_at.is_none_or(|t| t <= now - LAST_USED_INTERVAL_SECS)
}

/// How a key or personal URL is shown in listings (console and command line): `revoked`,
/// `expired` (its expiry at or before `now`) or `active`.
pub fn status_label(revoked_at: Option<i64>, expires_at: Option<i64>, now: i64) -> &'static str {
    if revoked_at.is_some() {
        "revoked"
    } else if expires_at.is_some_and(|at| at <= now) {
        "expired"
    } else {
        "active"
    }
}

/// How a key's or personal URL's scope is shown in listings: `read-write` when it holds
/// `mcp:write`, else `read-only`.
pub fn access_label(scope: &str) -> &'static str {
    if scope.split(' ').any(|s| s == "mcp:write") {
        "read-write"
    } else {
        "read-only"
    }
}

/// A personal MCP URL: the MCP endpoint's URL (`MCP_SERVER_URL`, no trailing slash) with the
/// secret as one more path segment, `<MCP_SERVER_URL>/<secret>`. The one shape the console, the
/// command line and the MCP route ([`personal_url_route`]) share.
pub fn personal_url(mcp_server_url: &str, secret: &str) -> String {
    format!("{mcp_server_url}/{secret}")
}

/// The route pattern (axum's, the secret captured as `secret`) of the personal MCP URLs under
/// the MCP path `path` ([`personal_url`]).
pub fn personal_url_route(path: &str) -> String {
    format!("{path}/{{secret}}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The secret is one more path segment of the MCP URL, and the route captures exactly it.
    #[test]
    fn a_personal_url_is_the_mcp_url_and_the_secret_as_one_segment() {
        assert_eq!(
            personal_url("https://mcp.example.com/mcp", "gate_pu_abc"),
            "https://mcp.example.com/mcp/gate_pu_abc"
        );
        assert_eq!(personal_url_route("/mcp"), "/mcp/{secret}");
    }

    #[test]
    fn listing_labels() {
        assert_eq!(status_label(None, None, 100), "active");
        assert_eq!(status_label(None, Some(101), 100), "active");
        assert_eq!(status_label(None, Some(100), 100), "expired");
        assert_eq!(status_label(Some(50), Some(101), 100), "revoked");
        assert_eq!(access_label("mcp:read"), "read-only");
        assert_eq!(access_label("mcp:read mcp:write"), "read-write");
        assert_eq!(access_label("mcp:write"), "read-write");
        assert_eq!(access_label("mcp:readmcp:write"), "read-only");
    }

    #[test]
    fn names() {
        assert_eq!(parse_name("  CI deploy ").unwrap(), "CI deploy");
        assert_eq!(parse_name(&"é".repeat(100)).unwrap().chars().count(), 100);
        for bad in ["", "   ", "a\nb", "a\u{202E}b", &"x".repeat(101)] {
            assert_eq!(parse_name(bad), Err(KeyRuleError::Name), "{bad:?}");
        }
    }

    #[test]
    fn lifetimes() {
        assert_eq!(parse_lifetime("90d"), Ok(90 * 86_400));
        assert_eq!(parse_lifetime("1h"), Ok(3_600));
        assert_eq!(parse_lifetime("3650d"), Ok(MAX_LIFETIME_SECS));
        for bad in [
            "",
            "d",
            "0d",
            "0h",
            "3651d",
            "90",
            "90m",
            "-1d",
            "1.5d",
            "9999999999d",
            "90 d",
            "90D",
            "٣d",
            "9é",
            "é",
        ] {
            assert!(
                matches!(parse_lifetime(bad), Err(KeyRuleError::Lifetime(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn allow_lists_that_allow_everything_are_refused() {
        let list =
            |v: &[&str]| parse_allow_list(&v.iter().map(ToString::to_string).collect::<Vec<_>>());
        for everything in [
            &["0.0.0.0/0"][..],
            &["::/0"],
            &["10.0.0.0/8", "0.0.0.0/0"],
            &["0.0.0.0/1", "128.0.0.0/1"],
            &["::/1", "8000::/1"],
        ] {
            assert!(
                matches!(list(everything), Err(KeyRuleError::AllowsEverything(_))),
                "{everything:?}"
            );
        }
        assert!(list(&["0.0.0.0/1"]).is_ok(), "half is a limit");
        assert!(list(&["203.0.113.0/24", "2001:db8::/32"]).is_ok());
    }

    #[test]
    fn allow_lists() {
        let list = parse_allow_list(&[
            "10.1.2.3/8".into(),
            "203.0.113.7".into(),
            "2001:db8::/32".into(),
            "10.0.0.0/8".into(),
        ])
        .unwrap();
        let shown: Vec<String> = list.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["10.0.0.0/8", "203.0.113.7/32", "2001:db8::/32"]);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(address_allowed(&list, ip("10.200.0.1")));
        assert!(address_allowed(&list, ip("203.0.113.7")));
        assert!(address_allowed(&list, ip("::ffff:203.0.113.7")));
        assert!(address_allowed(&list, ip("2001:db8:1::5")));
        assert!(!address_allowed(&list, ip("203.0.113.8")));
        assert!(!address_allowed(&list, ip("127.0.0.1")));
        assert!(!address_allowed(&[], ip("127.0.0.1")));
        for bad in ["", "10.0.0.0/33", "example.com", "10.0.0", "1.2.3.4/-1"] {
            assert!(
                matches!(parse_allowed(bad), Err(KeyRuleError::Address(_))),
                "{bad:?}"
            );
        }
        let many: Vec<String> = (0..51).map(|i| format!("10.0.0.{i}")).collect();
        assert_eq!(parse_allow_list(&many), Err(KeyRuleError::TooManyAddresses));
    }

    #[test]
    fn last_use_is_written_once_a_minute() {
        assert!(last_use_due(None, 1_000));
        assert!(last_use_due(Some(940), 1_000));
        assert!(!last_use_due(Some(941), 1_000));
        assert!(!last_use_due(Some(1_000), 1_000));
    }
}
