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
}

impl Reach {
    /// Whether `project_id` is within reach (membership is checked separately).
    pub fn covers(&self, project_id: &str) -> bool {
        match self {
            Reach::Account => true,
            Reach::Project(only) => only == project_id,
        }
    }

    /// The one project this reach is limited to, if any.
    pub fn only_project(&self) -> Option<&str> {
        match self {
            Reach::Account => None,
            Reach::Project(only) => Some(only),
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
    fn reach_covers_all_or_one() {
        assert!(Reach::Account.covers("p1"));
        assert_eq!(Reach::Account.only_project(), None);
        let one = Reach::Project("p1".into());
        assert!(one.covers("p1"));
        assert!(!one.covers("p2"));
        assert!(!one.covers(""));
        assert_eq!(one.only_project(), Some("p1"));
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
        };
        assert_eq!(p.audit_credential(), "credential=account_key:k1");
        assert_eq!(CredentialKind::OAuthToken.as_str(), "oauth_token");
        assert_eq!(CredentialKind::ProjectKey.to_string(), "project_key");
        assert_eq!(CredentialKind::ServiceToken.as_str(), "service_token");
    }
}
