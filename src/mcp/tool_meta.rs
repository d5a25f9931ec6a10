//! The `_meta` object every published tool carries (MCP `server/tools` §Tool, `_meta`;
//! MCP `basic` §General fields: prefixed keys), so that clients see what a tool needs and costs
//! before calling it:
//!
//! | key | value |
//! |---|---|
//! | `gatehouse/scopes` | the OAuth scopes a credential needs to call it, e.g. `["mcp:read"]` |
//! | `gatehouse/costClass` | `"cheap"`, `"standard"` or `"expensive"` |
//! | `gatehouse/background` | `true` when it answers a job receipt and finishes later |
//! | `gatehouse/version` | the definition's version: a number for built-in tools (raised whenever their schemas change; a snapshot test enforces it), `sha256:` and the first 16 hex digits of the pinned definition's hash for tools of an upstream server |
//!
//! One shape for every tool: built-in tools build it from their [`super::catalog::ToolSpec`],
//! upstream tools with [`ToolMeta::for_upstream`] from their annotations and pinned hash.

use rmcp::model::{MetaObject, ToolAnnotations};
use serde_json::{Value, json};

use crate::domain::scope::Scope;

/// `_meta` key: the scopes a credential needs.
pub const SCOPES_KEY: &str = "gatehouse/scopes";
/// `_meta` key: the cost class.
pub const COST_CLASS_KEY: &str = "gatehouse/costClass";
/// `_meta` key: whether the tool runs in the background.
pub const BACKGROUND_KEY: &str = "gatehouse/background";
/// `_meta` key: the definition's version.
pub const VERSION_KEY: &str = "gatehouse/version";

/// How much a call costs the server, for clients that budget their calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CostClass {
    /// One indexed lookup (a project, a note, a job).
    Cheap,
    /// A search or a write.
    Standard,
    /// Work proportional to a whole project, or outside Gatehouse.
    Expensive,
}

impl CostClass {
    /// The published word.
    pub fn as_str(self) -> &'static str {
        match self {
            CostClass::Cheap => "cheap",
            CostClass::Standard => "standard",
            CostClass::Expensive => "expensive",
        }
    }
}

/// What `_meta` says of one tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolMeta {
    /// The scopes a credential needs (`mcp:write` implies `mcp:read`).
    pub scopes: Vec<Scope>,
    /// Its cost class.
    pub cost: CostClass,
    /// It answers a job receipt at once and finishes in the background.
    pub background: bool,
    /// Its version (see the module documentation).
    pub version: String,
}

impl ToolMeta {
    /// The `_meta` of a tool of an upstream MCP server, from what the upstream declared and
    /// the hash of the definition the operator approved (hex SHA-256): `mcp:read` when its
    /// `readOnlyHint` is `true`, else `mcp:write` (a missing annotation is not trusted);
    /// `expensive` when `openWorldHint` is not `false` (MCP's default for it is `true`), else
    /// `standard`; never in the background (an upstream answers the call itself); version
    /// `sha256:` and the hash's first 16 hex digits.
    pub fn for_upstream(annotations: Option<&ToolAnnotations>, pinned_hash: &str) -> ToolMeta {
        let read_only = annotations.and_then(|a| a.read_only_hint) == Some(true);
        let closed_world = annotations.and_then(|a| a.open_world_hint) == Some(false);
        let short: String = pinned_hash.chars().take(16).collect();
        ToolMeta {
            scopes: vec![if read_only {
                Scope::McpRead
            } else {
                Scope::McpWrite
            }],
            cost: if closed_world {
                CostClass::Standard
            } else {
                CostClass::Expensive
            },
            background: false,
            version: format!("sha256:{short}"),
        }
    }

    /// The `_meta` object published in `tools/list`.
    pub fn to_meta(&self) -> MetaObject {
        let scopes: Vec<Value> = self
            .scopes
            .iter()
            .map(|s| Value::from(s.as_str()))
            .collect();
        let object = json!({
            SCOPES_KEY: scopes,
            COST_CLASS_KEY: self.cost.as_str(),
            BACKGROUND_KEY: self.background,
            VERSION_KEY: self.version,
        });
        match object {
            Value::Object(map) => MetaObject(map),
            _ => unreachable!("json! of an object literal is an object"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_meta_object_has_the_four_prefixed_keys() {
        let meta = ToolMeta {
            scopes: vec![Scope::McpWrite],
            cost: CostClass::Expensive,
            background: true,
            version: "3".into(),
        }
        .to_meta();
        assert_eq!(
            Value::Object(meta.0),
            json!({
                "gatehouse/scopes": ["mcp:write"],
                "gatehouse/costClass": "expensive",
                "gatehouse/background": true,
                "gatehouse/version": "3"
            })
        );
    }

    #[test]
    fn upstream_tools_are_judged_by_their_annotations_and_hash() {
        let hash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
        let unannotated = ToolMeta::for_upstream(None, hash);
        assert_eq!(unannotated.scopes, [Scope::McpWrite]);
        assert_eq!(unannotated.cost, CostClass::Expensive);
        assert!(!unannotated.background);
        assert_eq!(unannotated.version, "sha256:9f86d081884c7d65");
        let reader = ToolAnnotations::new().read_only(true).open_world(false);
        let meta = ToolMeta::for_upstream(Some(&reader), hash);
        assert_eq!(meta.scopes, [Scope::McpRead]);
        assert_eq!(meta.cost, CostClass::Standard);
        // readOnlyHint false or absent: a write.
        let writer = ToolAnnotations::new().read_only(false);
        assert_eq!(
            ToolMeta::for_upstream(Some(&writer), hash).scopes,
            [Scope::McpWrite]
        );
    }
}
