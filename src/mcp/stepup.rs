//! Scope step-up on `POST <mcp path>`: an operation outside the credential's scopes is refused
//! at the HTTP layer, where the challenge can be sent (the JSON-RPC layer cannot set a status
//! or a header): `403` with `WWW-Authenticate: Bearer error="insufficient_scope"` naming every
//! scope the MCP operations need, in one challenge (MCP 2026-07-28 §Runtime Insufficient Scope
//! Errors; RFC 6750 §3.1). The refusal is audited like a tool call.
//!
//! What needs which scope: a `tools/call` needs its tool's scope (an unknown tool needs none
//! here: the tool layer answers it); listing, templating and reading resources, listing and
//! getting prompts and completing their arguments need `mcp:read` (the same data the read
//! tools return; a prompt that needs more is refused by `prompts/get` itself); other methods
//! need none.
//!
//! Runs after [`super::auth`] (the [`Principal`]) and [`super::body::read`] (the parsed body),
//! before [`super::body::check_request`].

use axum::extract::Request;
use axum::response::Response;
use serde_json::Value;

use super::McpState;
use super::auth::{Principal, insufficient_scope};
use super::body::Parsed;
use crate::client_addr::ClientAddr;
use crate::domain::audit::{Event, Outcome};
use crate::domain::scope::Scope;
use crate::store::audit::AuditEvent;

/// The tool a JSON-RPC message calls, if it is a `tools/call` request naming one.
pub fn called_tool(message: &Value) -> Option<&str> {
    if message.get("method")?.as_str()? != "tools/call" {
        return None;
    }
    message.get("params")?.get("name")?.as_str()
}

/// What an operation is (for the audit) and the scope it needs (module documentation);
/// `None` when it needs none.
pub fn needed_scope(mcp: &McpState, message: &Value) -> Option<(String, Scope)> {
    if let Some(name) = called_tool(message) {
        let def = mcp.catalog.get(name)?;
        return Some((def.spec.name.to_string(), def.spec.scope));
    }
    match message.get("method")?.as_str()? {
        m @ ("resources/list"
        | "resources/read"
        | "resources/templates/list"
        | "prompts/list"
        | "prompts/get"
        | "completion/complete") => Some((m.to_string(), Scope::McpRead)),
        _ => None,
    }
}

/// The scope a `tools/call` of a listed upstream tool needs ([`super::upstream`]): `mcp:read`
/// for a tool annotated `readOnlyHint: true`, else `mcp:write`.
async fn upstream_scope(mcp: &McpState, message: &Value) -> Option<(String, Scope)> {
    let name = called_tool(message)?;
    if mcp.catalog.get(name).is_some() {
        return None;
    }
    let scope = mcp.upstreams.scope_of(name).await?;
    Some((name.to_string(), scope))
}

/// `Err` with the refusal (`403 insufficient_scope`, audited) of an operation the request's
/// [`Principal`] does not cover; everything else is given back to go on. A request without a principal or
/// a parsed body (never the case behind [`super::auth`] and [`super::body::read`]) passes.
pub async fn step_up(mcp: &McpState, request: Request) -> Result<Request, Response> {
    let refused = match (
        request.extensions().get::<Principal>(),
        request.extensions().get::<Parsed>(),
    ) {
        (Some(principal), Some(parsed)) => {
            let needed = match parsed.message() {
                Some(message) => match needed_scope(mcp, message) {
                    Some(needed) => Some(needed),
                    None => upstream_scope(mcp, message).await,
                },
                None => None,
            };
            needed
                .filter(|(_, scope)| !principal.scopes.satisfies(*scope))
                .map(|(operation, _)| (principal.clone(), operation))
        }
        _ => None,
    };
    let Some((principal, operation)) = refused else {
        return Ok(request);
    };
    let source_ip = ClientAddr::of(request.extensions()).map(|c| c.to_string());
    let detail = format!("{} duration_ms=0", principal.audit_credential());
    mcp.app
        .store
        .audit(
            AuditEvent {
                event: Event::ToolCall,
                outcome: Outcome::InsufficientScope,
                account_id: Some(&principal.account_id),
                client_id: principal.client_id.as_deref(),
                subject: Some(&operation),
                source_ip: source_ip.as_deref(),
                detail: Some(&detail),
            },
            crate::store::now(),
        )
        .await;
    Err(insufficient_scope(&mcp.app.config))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_called_tool_is_read_from_the_parsed_message() {
        assert_eq!(
            called_tool(
                &json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_note"}})
            ),
            Some("create_note")
        );
        assert_eq!(called_tool(&json!({"method":"tools/list"})), None);
        assert_eq!(
            called_tool(&json!({"method":"tools/call","params":{"name":7}})),
            None
        );
        assert_eq!(called_tool(&json!("not a message")), None);
    }
}
