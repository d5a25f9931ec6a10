//! The checks, one function each, in the order MCP clients walk a server. Each returns the
//! [`Step`] to report and what later checks need. The integration tests run these same
//! functions against Gatehouse itself.

use serde_json::Value;

use super::clients::ClientProfile;
use super::http::Fetched;
use super::{Status, Step};

mod client;
mod resource;
mod server;
mod urls;

pub use client::{AuthorizeAs, authorize, cors_preflight, openai_apps_challenge, register};
pub use resource::{
    given_url, protected_resource_metadata, resource_metadata_urls, unauthenticated_post,
};
pub use server::{server_metadata, server_metadata_members, server_metadata_urls};
pub use urls::url_rules;

/// The origin the MCP Inspector's browser pages run on; browser-based clients send their own.
pub const INSPECTOR_ORIGIN: &str = "http://localhost:6274";

/// The protocol revision the doctor announces in `initialize` and metadata requests.
pub const PROTOCOL_REVISION: &str = "2025-11-25";

/// The stateless revision (no `initialize`; per-request `_meta`).
pub const STATELESS_REVISION: &str = "2026-07-28";

/// Which form the unauthenticated `POST` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostForm {
    /// `initialize`, as clients of revisions 2025-03-26 to 2025-11-25 start.
    Initialize,
    /// `server/discover` with `_meta` and the `MCP-Protocol-Version`/`Mcp-Method` headers,
    /// as 2026-07-28 clients send (MCP 2026-07-28 basic §`_meta`, transports §Request Metadata).
    Stateless,
}

/// What the discovery steps learned, for the steps after them.
#[derive(Debug, Clone)]
pub struct ResourceMetadata {
    /// The URL the document was read from.
    pub url: String,
    /// `resource`.
    pub resource: String,
    /// `authorization_servers`.
    pub authorization_servers: Vec<String>,
}

/// The authorization-server metadata document found, and where.
#[derive(Debug, Clone)]
pub struct ServerMetadata {
    /// The URL that answered.
    pub url: String,
    /// The document.
    pub document: Value,
}

impl ServerMetadata {
    /// A string member of the document.
    pub fn str(&self, name: &str) -> Option<&str> {
        self.document.get(name).and_then(Value::as_str)
    }

    fn list_contains(&self, name: &str, value: &str) -> Option<bool> {
        self.document
            .get(name)
            .and_then(Value::as_array)
            .map(|a| a.iter().any(|v| v.as_str() == Some(value)))
    }
}

/// A client the doctor registered.
#[derive(Debug, Clone)]
pub struct Registration {
    /// Which well-known client it imitates.
    pub profile: &'static ClientProfile,
    /// The `client_id` issued.
    pub client_id: String,
    /// The `client_secret` issued, if any.
    pub client_secret: Option<String>,
}

/// The body as a JSON object, or a description of what it is instead.
pub fn json_object(fetched: &Fetched) -> Result<Value, String> {
    match serde_json::from_str::<Value>(&fetched.body) {
        Ok(v) if v.is_object() => Ok(v),
        Ok(_) => Err(format!("{} JSON that is not an object", fetched.status)),
        Err(_) => Err(format!(
            "{} not JSON ({}): {}",
            fetched.status,
            if fetched.media_type().is_empty() {
                "no Content-Type".to_string()
            } else {
                fetched.media_type()
            },
            fetched.excerpt()
        )),
    }
}

impl Step {
    /// A passed step.
    pub fn pass(check: &str, request: String, got: String, expected: impl Into<String>) -> Step {
        Step {
            check: check.to_string(),
            status: Status::Pass,
            request,
            got,
            expected: expected.into(),
            fix: None,
        }
    }

    /// A failed step with its fix in one sentence.
    pub fn fail(
        check: &str,
        request: String,
        got: String,
        expected: impl Into<String>,
        fix: impl Into<String>,
    ) -> Step {
        Step {
            check: check.to_string(),
            status: Status::Fail,
            request,
            got,
            expected: expected.into(),
            fix: Some(fix.into()),
        }
    }

    /// This step (made with [`Step::fail`]) as passed, without its fix, when `passed`.
    pub fn passed_if(mut self, passed: bool) -> Step {
        if passed {
            self.status = Status::Pass;
            self.fix = None;
        }
        self
    }

    /// A step that could not run because an earlier one failed.
    pub fn skip(check: &str, why: &str) -> Step {
        Step {
            check: check.to_string(),
            status: Status::Skip,
            request: String::new(),
            got: why.to_string(),
            expected: String::new(),
            fix: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use url::Url;

    #[test]
    fn well_known_urls_follow_the_clients_order() {
        let (suffixed, root) =
            resource_metadata_urls(&Url::parse("https://h.example/tenant/mcp").unwrap());
        assert_eq!(
            suffixed,
            "https://h.example/.well-known/oauth-protected-resource/tenant/mcp"
        );
        assert_eq!(
            root,
            "https://h.example/.well-known/oauth-protected-resource"
        );
        assert_eq!(
            server_metadata_urls(&Url::parse("https://a.example/tenant1").unwrap()),
            vec![
                "https://a.example/.well-known/oauth-authorization-server/tenant1",
                "https://a.example/.well-known/openid-configuration/tenant1",
                "https://a.example/tenant1/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            server_metadata_urls(&Url::parse("https://a.example/").unwrap()),
            vec![
                "https://a.example/.well-known/oauth-authorization-server",
                "https://a.example/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn url_rules_name_http_urls_and_foreign_hosts() {
        let given = Url::parse("https://mcp.example/mcp").unwrap();
        let steps = url_rules(
            &given,
            &[("resource".into(), "https://mcp.example/mcp".into())],
            Some("https://auth.example"),
            &[
                ("token_endpoint".into(), "http://auth.example/token".into()),
                ("jwks_uri".into(), "https://elsewhere.example/jwks".into()),
            ],
        );
        assert_eq!(steps[0].status, Status::Fail);
        assert!(
            steps[0]
                .got
                .contains("token_endpoint http://auth.example/token")
        );
        assert_eq!(steps[1].status, Status::Fail);
        assert!(steps[1].got.contains("jwks_uri"));
        assert!(
            steps[1].got.contains("token_endpoint"),
            "http ≠ https origin"
        );
    }
}
