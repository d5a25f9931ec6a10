//! Who calls the MCP route: every credential it accepts (an OAuth access token, an account
//! API key, a project API key, a service client's token, a personal MCP URL) resolves to one [`Principal`], and tools, resources, filters and
//! the tool-call audit use only that (product spec "Personal MCP URLs and service clients":
//! one principal for every credential).

use std::fmt;

use super::scope::{Scope, ScopeSet};

/// What kind of credential authenticated a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CredentialKind {
    /// An OAuth access token (RFC 6749 §1.4); its id is the refresh-token family (grant) it
    /// descends from.
    OAuthToken,
    /// An API key reaching every active project of its account; its id is the key id.
    AccountKey,
    /// An API key reaching exactly one project; its id is the key id.
    ProjectKey,
    /// An access token a service client got with `client_credentials` (RFC 6749 §4.4); its id
    /// is the client id.
    ServiceToken,
    /// A personal MCP URL (`<MCP path>/<secret>`); its id is the URL id.
    PersonalUrl,
}

impl CredentialKind {
    /// The name used in the audit log and in `gatehouse key list`: `oauth_token`,
    /// `account_key`, `project_key`, `service_token` or `personal_url`.
    pub fn as_str(self) -> &'static str {
        match self {
            CredentialKind::OAuthToken => "oauth_token",
            CredentialKind::AccountKey => "account_key",
            CredentialKind::ProjectKey => "project_key",
            CredentialKind::ServiceToken => "service_token",
            CredentialKind::PersonalUrl => "personal_url",
        }
    }
}

impl fmt::Display for CredentialKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The two credentials people issue for headless clients, listed, stored and revoked alike: an
/// API key (`gate_key_…`, sent as `X-Api-Key` or `Authorization: Bearer`; as a principal an
/// [`CredentialKind::AccountKey`] or [`CredentialKind::ProjectKey`]) and a personal MCP URL
/// (`gate_pu_…`, `<MCP_SERVER_URL>/<secret>`; [`CredentialKind::PersonalUrl`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IssuedCredential {
    /// An API key.
    ApiKey,
    /// A personal MCP URL.
    PersonalUrl,
}

impl IssuedCredential {
    /// How people call it: `API key`, `personal URL`.
    pub fn label(self) -> &'static str {
        match self {
            IssuedCredential::ApiKey => "API key",
            IssuedCredential::PersonalUrl => "personal URL",
        }
    }
}

/// Which projects a credential reaches. Membership is still checked on every use: a project
/// is usable only while the account is a member and the project is active, and the member's
/// role still limits what a write credential may change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// Every active project the account is a member of, including memberships added later
    /// (OAuth grants, account keys, service clients made for the account).
    Account,
    /// Exactly this project (project keys, service clients made for one project); any other
    /// project answers like a missing one.
    Project(String),
    /// Only these projects: an OAuth grant whose person chose named projects on the consent
    /// page or the app's page (issue 37, per-app project choice); any other project answers
    /// like a missing one.
    Projects(Vec<String>),
}

impl Reach {
    /// Whether `project_id` is within reach (membership is checked separately).
    pub fn covers(&self, project_id: &str) -> bool {
        match self {
            Reach::Account => true,
            Reach::Project(only) => only == project_id,
            Reach::Projects(named) => named.iter().any(|p| p == project_id),
        }
    }

    /// The projects this reach is limited to as a JSON array of ids (`["p1","p2"]`), `None`
    /// for [`Reach::Account`]: the form SQL filters compare with
    /// ([`crate::store::Store::reachable_projects`] and the pages of notes and jobs).
    pub fn limited_to(&self) -> Option<String> {
        match self {
            Reach::Account => None,
            Reach::Project(only) => Some(serde_json::json!([only]).to_string()),
            Reach::Projects(named) => Some(serde_json::json!(named).to_string()),
        }
    }

    /// The reach of a grant's stored project choice (`consents.project_ids`, a JSON array of
    /// project ids; `None`: every project). An unreadable value reaches no project (it fails
    /// closed).
    pub fn from_choice(stored: Option<&str>) -> Reach {
        match stored {
            None => Reach::Account,
            Some(text) => Reach::Projects(serde_json::from_str(text).unwrap_or_default()),
        }
    }
}

/// Which tools a credential may see and call (`gatehouse key create|url create --tools 'a,b'`
/// or `--deny-tools 'c'`; issue "Upstream MCP servers behind Gatehouse" §4, agent-scoped tool
/// lists). Names are catalog names: a built-in tool (`list_projects`) or an upstream's
/// (`NAME__TOOL`). `tools/list` leaves out the others and a call of one answers like an
/// unknown tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ToolFilter {
    /// Every tool (the default).
    #[default]
    All,
    /// Only these tools.
    Only(Vec<String>),
    /// Every tool but these.
    Except(Vec<String>),
}

/// The most tool names one `--tools` or `--deny-tools` may list.
pub const MAX_FILTER_TOOLS: usize = 100;

impl ToolFilter {
    /// Whether the tool named `name` is within the filter.
    pub fn allows(&self, name: &str) -> bool {
        match self {
            ToolFilter::All => true,
            ToolFilter::Only(names) => names.iter().any(|n| n == name),
            ToolFilter::Except(names) => !names.iter().any(|n| n == name),
        }
    }

    /// Parses `--tools` (`only`) or `--deny-tools` (`except`), comma-separated; at most one of
    /// them. Each name is 1 to 64 of `A-Z a-z 0-9 _ -` (the catalog's names).
    ///
    /// Errors: both given, an empty list, more than [`MAX_FILTER_TOOLS`] names, or a name
    /// outside that shape, in one line.
    pub fn parse(only: Option<&str>, except: Option<&str>) -> Result<ToolFilter, String> {
        let names = |list: &str, flag: &str| -> Result<Vec<String>, String> {
            let names: Vec<String> = list
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .collect();
            if names.is_empty() {
                return Err(format!("{flag} names no tool"));
            }
            if names.len() > MAX_FILTER_TOOLS {
                return Err(format!("{flag} names more than {MAX_FILTER_TOOLS} tools"));
            }
            if let Some(bad) = names.iter().find(|n| {
                n.len() > 64
                    || !n
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            }) {
                return Err(format!(
                    "{flag}: \"{}\" is not a tool name (1 to 64 of A-Z, a-z, 0-9, _ and -)",
                    bad.escape_debug()
                ));
            }
            Ok(names)
        };
        match (only, except) {
            (Some(_), Some(_)) => Err("give --tools or --deny-tools, not both".to_string()),
            (Some(list), None) => Ok(ToolFilter::Only(names(list, "--tools")?)),
            (None, Some(list)) => Ok(ToolFilter::Except(names(list, "--deny-tools")?)),
            (None, None) => Ok(ToolFilter::All),
        }
    }

    /// The stored form: `None` for [`ToolFilter::All`], else JSON `{"only": […]}` or
    /// `{"except": […]}`.
    pub fn to_stored(&self) -> Option<String> {
        match self {
            ToolFilter::All => None,
            ToolFilter::Only(names) => Some(serde_json::json!({ "only": names }).to_string()),
            ToolFilter::Except(names) => Some(serde_json::json!({ "except": names }).to_string()),
        }
    }

    /// Reads the stored form ([`ToolFilter::to_stored`]); an unreadable value allows no tool
    /// (it fails closed).
    pub fn from_stored(stored: Option<&str>) -> ToolFilter {
        let Some(text) = stored else {
            return ToolFilter::All;
        };
        let value: serde_json::Value = serde_json::from_str(text).unwrap_or_default();
        let list = |key: &str| -> Option<Vec<String>> {
            serde_json::from_value(value.get(key)?.clone()).ok()
        };
        if let Some(names) = list("only") {
            ToolFilter::Only(names)
        } else if let Some(names) = list("except") {
            ToolFilter::Except(names)
        } else {
            ToolFilter::Only(Vec::new())
        }
    }

    /// How the console shows it: `All tools`, `Only: a, b` or `All but: c`.
    pub fn in_words(&self) -> String {
        match self {
            ToolFilter::All => "All tools".to_string(),
            ToolFilter::Only(names) => format!("Only: {}", names.join(", ")),
            ToolFilter::Except(names) => format!("All but: {}", names.join(", ")),
        }
    }

    /// How `key list` and `url list` show it: `all`, `only:a,b` or `except:c`.
    pub fn describe(&self) -> String {
        match self {
            ToolFilter::All => "all".to_string(),
            ToolFilter::Only(names) => format!("only:{}", names.join(",")),
            ToolFilter::Except(names) => format!("except:{}", names.join(",")),
        }
    }
}

/// The caller of one MCP request, established by authentication and valid for that request
/// only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The account the credential acts for.
    pub account_id: String,
    /// The projects it reaches.
    pub reach: Reach,
    /// What it may do (`mcp:write` implies `mcp:read`).
    pub scopes: ScopeSet,
    /// The kind of credential.
    pub credential: CredentialKind,
    /// The credential's id: the token family of an OAuth token, the key id of an API key.
    /// Never a secret.
    pub credential_id: String,
    /// The OAuth client an access token was issued to (`None` for API keys).
    pub client_id: Option<String>,
    /// The account's own tool-call budget, read with the credential (`accounts.calls_per_hour`):
    /// `Some(n)` calls per rolling hour (0 = unlimited), `None` for the server's default.
    pub calls_per_hour: Option<u64>,
    /// The tools it may see and call (`--tools` / `--deny-tools` of an API key or personal
    /// URL; every tool for other credentials).
    pub tools: ToolFilter,
}

impl Principal {
    /// Whether the credential reaches `project_id` (see [`Reach::covers`]).
    pub fn reaches(&self, project_id: &str) -> bool {
        self.reach.covers(project_id)
    }

    /// The `credential=KIND:ID` part of an audit record's detail.
    pub fn audit_credential(&self) -> String {
        format!("credential={}:{}", self.credential, self.credential_id)
    }
}

/// The scopes of an API key: `mcp:read`, plus `mcp:write` for a read-write key.
pub fn key_scopes(write: bool) -> ScopeSet {
    if write {
        ScopeSet::from_iter([Scope::McpRead, Scope::McpWrite])
    } else {
        ScopeSet::from_iter([Scope::McpRead])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_filters_parse_store_and_allow() {
        assert_eq!(ToolFilter::parse(None, None).unwrap(), ToolFilter::All);
        let only = ToolFilter::parse(Some("list_projects, memory__read_graph"), None).unwrap();
        assert!(only.allows("list_projects") && only.allows("memory__read_graph"));
        assert!(!only.allows("create_note"));
        let except = ToolFilter::parse(None, Some("create_note")).unwrap();
        assert!(!except.allows("create_note") && except.allows("list_projects"));
        for filter in [ToolFilter::All, only.clone(), except.clone()] {
            assert_eq!(
                ToolFilter::from_stored(filter.to_stored().as_deref()),
                filter
            );
        }
        assert_eq!(only.describe(), "only:list_projects,memory__read_graph");
        assert_eq!(
            ToolFilter::from_stored(Some("garbage")),
            ToolFilter::Only(Vec::new()),
            "an unreadable filter allows nothing"
        );
        assert!(ToolFilter::parse(Some("a"), Some("b")).is_err());
        assert!(ToolFilter::parse(Some(" , "), None).is_err());
        assert!(ToolFilter::parse(Some("get.env"), None).is_err());
    }

    #[test]
    fn reach_covers_all_or_one() {
        assert!(Reach::Account.covers("p1"));
        let one = Reach::Project("p1".into());
        assert!(one.covers("p1"));
        assert!(!one.covers("p2"));
        assert!(!one.covers(""));
        assert_eq!(one.limited_to().as_deref(), Some(r#"["p1"]"#));
        assert_eq!(Reach::Account.limited_to(), None);
    }

    #[test]
    fn a_chosen_set_reaches_only_its_projects() {
        let chosen = Reach::from_choice(Some(r#"["p1","p3"]"#));
        assert_eq!(chosen, Reach::Projects(vec!["p1".into(), "p3".into()]));
        assert!(chosen.covers("p1") && chosen.covers("p3"));
        assert!(!chosen.covers("p2"));
        assert_eq!(chosen.limited_to().as_deref(), Some(r#"["p1","p3"]"#));
        assert_eq!(Reach::from_choice(None), Reach::Account);
        // Unreadable: no project at all.
        assert!(!Reach::from_choice(Some("nope")).covers("p1"));
    }

    #[test]
    fn key_scopes_and_audit_names() {
        assert_eq!(key_scopes(false).to_string(), "mcp:read");
        assert_eq!(key_scopes(true).to_string(), "mcp:read mcp:write");
        let p = Principal {
            account_id: "a".into(),
            reach: Reach::Account,
            scopes: key_scopes(false),
            credential: CredentialKind::AccountKey,
            credential_id: "k1".into(),
            client_id: None,
            calls_per_hour: None,
            tools: ToolFilter::All,
        };
        assert_eq!(p.audit_credential(), "credential=account_key:k1");
        assert_eq!(CredentialKind::OAuthToken.as_str(), "oauth_token");
        assert_eq!(CredentialKind::ProjectKey.to_string(), "project_key");
        assert_eq!(CredentialKind::ServiceToken.as_str(), "service_token");
    }
}
