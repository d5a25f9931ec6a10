//! OAuth scopes (RFC 6749 §3.3) understood by Gatehouse, with the rule that
//! a broader scope implies a narrower one (`mcp:write` ⊇ `mcp:read`), as the
//! MCP authorization spec (2026-07-28) asks servers to honour.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// One scope token. Variants are declared in the fixed display order, which
/// `Ord` follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// `mcp:read`: read projects and notes through MCP.
    McpRead,
    /// `mcp:write`: create and change notes; implies `mcp:read`.
    McpWrite,
    /// `offline_access`: a refresh token is issued (`OpenID` Connect Core §11).
    OfflineAccess,
}

impl Scope {
    /// Every scope this server understands, in the fixed display order: the one list the
    /// metadata documents (RFC 8414 §2 `scopes_supported`) and error messages are derived from.
    pub const ALL: [Scope; 3] = [Scope::McpRead, Scope::McpWrite, Scope::OfflineAccess];

    /// The scopes of the MCP resource itself ([`Scope::ALL`] without `offline_access`, which is
    /// not a permission on the resource): RFC 9728 §2 `scopes_supported` and the scope of a
    /// `WWW-Authenticate` challenge.
    pub fn resource_scopes() -> impl Iterator<Item = Scope> {
        Scope::ALL
            .into_iter()
            .filter(|s| *s != Scope::OfflineAccess)
    }

    /// The scope token as sent on the wire: `"mcp:read"`, `"mcp:write"` or
    /// `"offline_access"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::McpRead => "mcp:read",
            Scope::McpWrite => "mcp:write",
            Scope::OfflineAccess => "offline_access",
        }
    }

    /// Plain words for the consent page, e.g. "Read your projects and notes".
    pub fn describe(self) -> &'static str {
        match self {
            Scope::McpRead => "Read your projects and notes",
            Scope::McpWrite => "Create and change notes in your projects",
            Scope::OfflineAccess => "Stay connected until you revoke access",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a scope string was refused; maps to the `invalid_scope` error
/// (RFC 6749 §4.1.2.1, §5.2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    /// A well-formed scope token this server does not know. The token only
    /// holds characters allowed in `error_description` (RFC 6749 §5.2).
    #[error("unknown scope \"{0}\" (supported: {all})", all = ScopeSet::from_iter(Scope::ALL))]
    Unknown(String),
    /// A token with a character outside `%x21 / %x23-5B / %x5D-7E`
    /// (RFC 6749 §3.3). The token is not echoed back.
    #[error("scope contains a character not allowed by RFC 6749 §3.3")]
    Malformed,
    /// A scope this server serves but the client did not register for (RFC 7591 §2 `scope`);
    /// carries the registered scopes.
    #[error("this application may only request \"{0}\"")]
    NotRegistered(ScopeSet),
}

/// True if `token` is a non-empty `scope-token` (RFC 6749 §3.3):
/// `1*( %x21 / %x23-5B / %x5D-7E )`.
pub fn is_scope_token(token: &str) -> bool {
    !token.is_empty()
        && token
            .bytes()
            .all(|b| matches!(b, 0x21 | 0x23..=0x5B | 0x5D..=0x7E))
}

impl FromStr for Scope {
    type Err = ScopeError;

    /// Parses one scope token (exact, case-sensitive, RFC 6749 §3.3).
    /// Errors: [`ScopeError::Malformed`] for forbidden characters (including
    /// the empty string), else [`ScopeError::Unknown`] naming the token.
    fn from_str(s: &str) -> Result<Scope, ScopeError> {
        match Scope::ALL.into_iter().find(|scope| scope.as_str() == s) {
            Some(scope) => Ok(scope),
            None if is_scope_token(s) => Err(ScopeError::Unknown(s.to_owned())),
            _ => Err(ScopeError::Malformed),
        }
    }
}

/// A set of scopes, iterated and displayed in the fixed order
/// `mcp:read mcp:write offline_access`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ScopeSet(BTreeSet<Scope>);

impl ScopeSet {
    /// Parses a `scope` parameter (RFC 6749 §3.3): tokens separated by
    /// whitespace, empty tokens ignored, duplicates merged; `""` gives the
    /// empty set (the caller decides the default). Errors: the first bad
    /// token as [`ScopeError::Malformed`] or [`ScopeError::Unknown`].
    pub fn parse(s: &str) -> Result<ScopeSet, ScopeError> {
        s.split_ascii_whitespace()
            .map(Scope::from_str)
            .collect::<Result<BTreeSet<_>, _>>()
            .map(ScopeSet)
    }

    /// Parses a `scope` parameter keeping only the scopes this server serves: well-formed
    /// tokens it does not know (`openid`, `profile`, `email`, …) are left out, as RFC 6749
    /// §3.3 lets an authorization server ignore part of the requested scope. Separators,
    /// duplicates and order as in [`ScopeSet::parse`]. Errors: [`ScopeError::Malformed`] for a
    /// token outside the `scope-token` grammar.
    pub fn parse_known(s: &str) -> Result<ScopeSet, ScopeError> {
        let mut set = BTreeSet::new();
        for token in s.split_ascii_whitespace() {
            match Scope::from_str(token) {
                Ok(scope) => {
                    set.insert(scope);
                }
                Err(ScopeError::Unknown(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(ScopeSet(set))
    }

    /// The scopes granted at the authorization endpoint (RFC 6749 §3.3) for the `scope`
    /// parameter `requested` of a client whose registered `scope` (RFC 7591 §2) is
    /// `registered`:
    ///
    /// - values the server does not serve are ignored ([`ScopeSet::parse_known`]), and so is
    ///   `offline_access` (refresh tokens are issued with every code);
    /// - when no MCP scope remains (or none was requested) the default applies: the client's
    ///   registered MCP scopes, or `mcp:read mcp:write` when it registered none;
    /// - every granted scope must be covered by the registered ones, a broader scope covering
    ///   a narrower one (`mcp:write` covers `mcp:read`).
    ///
    /// Errors: [`ScopeError::Malformed`] for a requested token outside the RFC 6749 §3.3
    /// grammar; [`ScopeError::NotRegistered`] for a scope the client did not register for.
    pub fn granted_for_request(
        requested: Option<&str>,
        registered: Option<&str>,
    ) -> Result<ScopeSet, ScopeError> {
        let registered = registered
            .and_then(|r| ScopeSet::parse_known(r).ok())
            .map(|r| r.without_offline_access())
            .filter(|r| !r.is_empty());
        let requested = ScopeSet::parse_known(requested.unwrap_or(""))?.without_offline_access();
        if requested.is_empty() {
            return Ok(registered.unwrap_or_else(ScopeSet::default_mcp));
        }
        match registered {
            Some(allowed) if !requested.iter().all(|s| allowed.satisfies(s)) => {
                Err(ScopeError::NotRegistered(allowed))
            }
            _ => Ok(requested),
        }
    }

    /// The scopes granted when a client asks for none: `mcp:read mcp:write`.
    pub fn default_mcp() -> ScopeSet {
        ScopeSet::from_iter([Scope::McpRead, Scope::McpWrite])
    }

    /// True if `scope` is literally in the set (no implication; see
    /// [`ScopeSet::satisfies`]).
    pub fn contains(&self, scope: Scope) -> bool {
        self.0.contains(&scope)
    }

    /// True if every scope of `self` is literally in `other`, e.g. a refresh
    /// request may only narrow the original grant (RFC 6749 §6).
    pub fn is_subset(&self, other: &ScopeSet) -> bool {
        self.0.is_subset(&other.0)
    }

    /// True if the set holds no scope.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The scopes in fixed order.
    pub fn iter(&self) -> impl Iterator<Item = Scope> + '_ {
        self.0.iter().copied()
    }

    /// All scopes in `self` or `other`.
    pub fn union(&self, other: &ScopeSet) -> ScopeSet {
        ScopeSet(self.0.union(&other.0).copied().collect())
    }

    /// The same set without `offline_access`, e.g. for the scope of an
    /// access token, which is never itself offline.
    pub fn without_offline_access(&self) -> ScopeSet {
        self.iter()
            .filter(|&scope| scope != Scope::OfflineAccess)
            .collect()
    }

    /// True if a token with these scopes may do what `needed` allows, a
    /// broader scope implying a narrower one: `mcp:write` satisfies
    /// `mcp:read` (MCP authorization, 2026-07-28 revision; RFC 6750 §3.1
    /// `insufficient_scope` otherwise).
    pub fn satisfies(&self, needed: Scope) -> bool {
        self.contains(needed) || (needed == Scope::McpRead && self.contains(Scope::McpWrite))
    }
}

impl FromIterator<Scope> for ScopeSet {
    /// Builds a set from scopes in any order, merging duplicates.
    fn from_iter<I: IntoIterator<Item = Scope>>(iter: I) -> ScopeSet {
        ScopeSet(iter.into_iter().collect())
    }
}

impl fmt::Display for ScopeSet {
    /// Space-delimited tokens in fixed order, e.g. `mcp:read mcp:write`
    /// (the `scope` response parameter, RFC 6749 §5.1); empty set → `""`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, scope) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            f.write_str(scope.as_str())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_descriptions() {
        assert_eq!(Scope::McpRead.as_str(), "mcp:read");
        assert_eq!(Scope::McpWrite.as_str(), "mcp:write");
        assert_eq!(Scope::OfflineAccess.as_str(), "offline_access");
        for scope in [Scope::McpRead, Scope::McpWrite, Scope::OfflineAccess] {
            assert_eq!(scope.as_str().parse::<Scope>(), Ok(scope));
            assert!(!scope.describe().is_empty());
        }
        assert_eq!(Scope::McpRead.describe(), "Read your projects and notes");
    }

    #[test]
    fn parse_normalises_order_duplicates_and_spaces() {
        let set = ScopeSet::parse("  offline_access mcp:write  mcp:read mcp:write ").unwrap();
        assert_eq!(set.to_string(), "mcp:read mcp:write offline_access");
        assert_eq!(
            set.iter().collect::<Vec<_>>(),
            [Scope::McpRead, Scope::McpWrite, Scope::OfflineAccess]
        );
        assert!(ScopeSet::parse("").unwrap().is_empty());
        assert_eq!(ScopeSet::parse("").unwrap().to_string(), "");
    }

    #[test]
    fn parse_is_case_sensitive_and_names_unknown_scopes() {
        // RFC 6749 §3.3: scope tokens are case-sensitive.
        assert_eq!(
            ScopeSet::parse("mcp:read MCP:WRITE"),
            Err(ScopeError::Unknown("MCP:WRITE".into()))
        );
        let err = ScopeSet::parse("mcp:read admin").unwrap_err();
        assert_eq!(err, ScopeError::Unknown("admin".into()));
        assert!(err.to_string().contains("\"admin\""));
    }

    #[test]
    fn parse_rejects_characters_outside_rfc6749_scope_token() {
        // %x22 (") and %x5C (\) are excluded, as are non-ASCII characters.
        assert_eq!(ScopeSet::parse("mcp:read a\"b"), Err(ScopeError::Malformed));
        assert_eq!(ScopeSet::parse("a\\b"), Err(ScopeError::Malformed));
        assert_eq!(ScopeSet::parse("lesé"), Err(ScopeError::Malformed));
        // %x21, %x23 and %x7E are allowed, so these are merely unknown.
        assert_eq!(
            ScopeSet::parse("!#~"),
            Err(ScopeError::Unknown("!#~".into()))
        );
    }

    #[test]
    fn default_and_set_operations() {
        let default = ScopeSet::default_mcp();
        assert_eq!(default.to_string(), "mcp:read mcp:write");
        let read = ScopeSet::parse("mcp:read").unwrap();
        let offline = ScopeSet::parse("offline_access").unwrap();
        assert!(read.is_subset(&default));
        assert!(!default.is_subset(&read));
        let all = default.union(&offline);
        assert_eq!(all.to_string(), "mcp:read mcp:write offline_access");
        assert_eq!(all.without_offline_access(), default);
        assert!(all.contains(Scope::OfflineAccess));
        assert!(!default.contains(Scope::OfflineAccess));
    }

    #[test]
    fn parse_known_ignores_values_the_server_does_not_serve() {
        let set = ScopeSet::parse_known("openid profile mcp:read email").unwrap();
        assert_eq!(set.to_string(), "mcp:read");
        assert!(
            ScopeSet::parse_known("openid profile email")
                .unwrap()
                .is_empty()
        );
        assert!(ScopeSet::parse_known("").unwrap().is_empty());
        assert_eq!(
            ScopeSet::parse_known("mcp:read a\"b"),
            Err(ScopeError::Malformed)
        );
    }

    #[test]
    fn granted_scope_defaults_to_the_registered_scope() {
        let grant = |requested, registered| {
            ScopeSet::granted_for_request(requested, registered).map(|s| s.to_string())
        };
        // Nothing requested: the registered scope, else the server default.
        assert_eq!(grant(None, Some("mcp:read")), Ok("mcp:read".into()));
        assert_eq!(grant(None, None), Ok("mcp:read mcp:write".into()));
        assert_eq!(
            grant(None, Some("offline_access")),
            Ok("mcp:read mcp:write".into())
        );
        // Only values the server does not serve (RFC 6749 §3.3): as if nothing was requested.
        assert_eq!(
            grant(Some("openid profile email"), Some("mcp:read")),
            Ok("mcp:read".into())
        );
        assert_eq!(
            grant(Some("openid profile email offline_access"), None),
            Ok("mcp:read mcp:write".into())
        );
        // Known values are granted as asked, unknown ones dropped.
        assert_eq!(grant(Some("openid mcp:read"), None), Ok("mcp:read".into()));
        assert_eq!(
            grant(Some("mcp:read"), Some("mcp:write")),
            Ok("mcp:read".into()),
            "mcp:write covers mcp:read"
        );
        // Beyond the registered scope, or malformed: refused.
        assert_eq!(
            grant(Some("mcp:write"), Some("mcp:read offline_access")),
            Err(ScopeError::NotRegistered(
                ScopeSet::parse("mcp:read").unwrap()
            ))
        );
        assert_eq!(
            grant(Some("mcp:write"), Some("mcp:read"))
                .unwrap_err()
                .to_string(),
            "this application may only request \"mcp:read\""
        );
        assert_eq!(grant(Some("lesé"), None), Err(ScopeError::Malformed));
    }

    #[test]
    fn write_implies_read_but_not_the_reverse() {
        let write = ScopeSet::parse("mcp:write").unwrap();
        assert!(write.satisfies(Scope::McpRead));
        assert!(write.satisfies(Scope::McpWrite));
        assert!(!write.contains(Scope::McpRead));
        let read = ScopeSet::parse("mcp:read").unwrap();
        assert!(read.satisfies(Scope::McpRead));
        assert!(!read.satisfies(Scope::McpWrite));
        assert!(
            !ScopeSet::parse("offline_access")
                .unwrap()
                .satisfies(Scope::McpRead)
        );
    }
}
