//! The operators' upstream page (issue "Upstream MCP servers behind Gatehouse" §7): `GET
//! /upstreams` shows each upstream MCP server with its status, tool counts, last error and the
//! definitions waiting for approval, each as a field-by-field difference between the approved
//! definition and the new one. `approve`, `disable` and `enable` are each a `GET` confirmation
//! page naming the upstream and the consequence, then a `POST` with the console's CSRF token
//! that makes the same store call as `gatehouse upstream approve|disable|enable` (so it
//! reaches every instance within a second), audits who did what, and answers `303` to the page
//! with a notice.
//!
//! Only operators (accounts with the admin flag, `gatehouse account admin EMAIL`) see any of
//! it: every other signed-in account gets the 404 page, as for a path no route serves, and
//! nothing is changed.

use std::collections::HashSet;

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use tower_sessions::Session;

use super::session::{csrf_token, set_notice, signed_in, take_notice};
use super::{
    Confirmation, CsrfForm, PageQuery, confirm_page, error_page, not_found, render, see_other, when,
};
use crate::client_addr::ClientAddr;
use crate::domain::audit::{Event, Outcome};
use crate::domain::upstream::{UpstreamName, is_destructive};
use crate::error::AppError;
use crate::state::AppState;
use crate::store::accounts::Account;
use crate::store::audit::AuditEvent;
use crate::store::now;
use crate::store::upstreams::{PendingTool, Transport, UpstreamRecord};

/// One changed field of a pending definition.
struct FieldChange {
    /// `Description`, `Input schema`, …
    field: String,
    /// The approved value (text, or JSON laid out on lines); `None`: the field was absent.
    before: Option<String>,
    /// The new value; `None`: the field is gone.
    after: Option<String>,
}

/// A definition waiting for approval.
struct PendingRow {
    /// The name clients will see: `NAME__TOOL`.
    listed_as: String,
    /// Never approved before.
    new: bool,
    /// Destructive (or unannotated) and not allowed by name: hidden even once approved.
    hidden_destructive: bool,
    changes: Vec<FieldChange>,
}

/// One upstream on the page.
struct UpstreamRow {
    name: String,
    /// `Streamable HTTP` or `stdio`.
    transport: &'static str,
    /// Its URL or command (never a header or `--env` value).
    target: String,
    /// `Reachable`, `Unreachable` or `Disabled`.
    status: &'static str,
    enabled: bool,
    /// Tools whose approved definition is the one last seen.
    approved: i64,
    /// Tools seen on it.
    seen: i64,
    /// `(when, what)` of the last failure.
    last_error: Option<(String, String)>,
    trust_definitions: bool,
    pending: Vec<PendingRow>,
}

#[derive(Template)]
#[template(path = "upstreams.html")]
struct UpstreamsPage {
    upstreams: Vec<UpstreamRow>,
    notice: Option<String>,
    csrf_token: String,
    oauth_enabled: bool,
    operator: bool,
}

/// How the page names a definition's field.
fn field_label(key: &str) -> String {
    match key {
        "name" => "Name".into(),
        "title" => "Title".into(),
        "description" => "Description".into(),
        "inputSchema" => "Input schema".into(),
        "outputSchema" => "Output schema".into(),
        "annotations" => "Annotations".into(),
        "icons" => "Icons".into(),
        "_meta" => "Metadata".into(),
        other => other.escape_debug().to_string(),
    }
}

/// A field's value for people: a string as itself, anything else as indented JSON.
fn shown(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// The fields that differ between the approved definition and the new one (every field of a
/// new tool), in the order name, title, description, input schema, output schema,
/// annotations, then any other.
fn changes(approved: Option<&str>, seen: &str) -> Vec<FieldChange> {
    let object = |text: &str| -> serde_json::Map<String, serde_json::Value> {
        match serde_json::from_str(text) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        }
    };
    let before = approved.map(object).unwrap_or_default();
    let after = object(seen);
    const ORDER: [&str; 6] = [
        "name",
        "title",
        "description",
        "inputSchema",
        "outputSchema",
        "annotations",
    ];
    let mut keys: Vec<&String> = before.keys().chain(after.keys()).collect();
    keys.sort_by_key(|k| {
        (
            ORDER.iter().position(|o| o == k).unwrap_or(ORDER.len()),
            k.as_str(),
        )
    });
    keys.dedup();
    keys.into_iter()
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| FieldChange {
            field: field_label(k),
            before: before.get(k).map(shown),
            after: after.get(k).map(shown),
        })
        .collect()
}

/// Identifies a set of pending definitions: SHA-256 (hex) over each `tool:hash` line.
fn digest(pending: &[PendingTool]) -> String {
    let mut hasher = Sha256::new();
    for p in pending {
        hasher.update(p.tool.as_bytes());
        hasher.update(b":");
        hasher.update(p.hash.as_bytes());
        hasher.update(b"\n");
    }
    hex::encode(hasher.finalize())
}

/// Whether the tool of `p` is destructive by its annotations
/// ([`crate::domain::upstream::is_destructive`]) and not allowed by name in `allowed`: then it
/// stays hidden once approved (`gatehouse upstream allow-destructive`).
fn hidden_destructive(
    upstream: &str,
    p: &PendingTool,
    allowed: &HashSet<(String, String)>,
) -> bool {
    let value: serde_json::Value = serde_json::from_str(&p.definition).unwrap_or_default();
    let hint = |name: &str| {
        value
            .get("annotations")
            .and_then(|a| a.get(name))
            .and_then(serde_json::Value::as_bool)
    };
    is_destructive(hint("readOnlyHint"), hint("destructiveHint"))
        && !allowed.contains(&(upstream.to_string(), p.tool.clone()))
}

fn status(u: &UpstreamRecord) -> &'static str {
    if !u.enabled {
        "Disabled"
    } else if u.last_error.is_some() {
        "Unreachable"
    } else {
        "Reachable"
    }
}

/// The signed-in operator, or the response for anyone else: the sign-in page for a browser
/// that is not signed in, the 404 page for an account that is not an operator.
async fn operator(
    state: &AppState,
    session: &Session,
) -> Result<Result<Account, Response>, AppError> {
    Ok(match signed_in(state, session).await? {
        None => Err(see_other("/signin?next=%2Fupstreams")),
        Some(a) if a.admin => Ok(a),
        Some(_) => Err(not_found().await),
    })
}

/// `GET /upstreams`: every upstream with its status, tool counts, last error and pending
/// definitions (with what changed), and the buttons that lead to the confirmation pages.
pub async fn show(State(state): State<AppState>, session: Session) -> Result<Response, AppError> {
    let account = match operator(&state, &session).await? {
        Ok(a) => a,
        Err(response) => return Ok(response),
    };
    let allowed = state.store.destructive_allowed_upstream_tools().await?;
    let mut upstreams = Vec::new();
    for u in state.store.upstreams().await? {
        let pending = if u.trust_definitions {
            Vec::new()
        } else {
            state.store.pending_upstream_tools(&u.name).await?
        };
        upstreams.push(UpstreamRow {
            transport: match u.transport {
                Transport::Http => "Streamable HTTP",
                Transport::Stdio => "stdio",
            },
            target: u.target(),
            status: status(&u),
            enabled: u.enabled,
            approved: if u.trust_definitions {
                u.tools_seen
            } else {
                u.tools_approved
            },
            seen: u.tools_seen,
            last_error: u.last_error.as_ref().map(|(e, at)| (when(*at), e.clone())),
            trust_definitions: u.trust_definitions,
            pending: pending
                .iter()
                .map(|p| PendingRow {
                    listed_as: format!("{}__{}", u.name, p.tool),
                    new: p.approved_definition.is_none(),
                    hidden_destructive: hidden_destructive(&u.name, p, &allowed),
                    changes: changes(p.approved_definition.as_deref(), &p.definition),
                })
                .collect(),
            name: u.name,
        });
    }
    render(
        StatusCode::OK,
        &UpstreamsPage {
            upstreams,
            notice: take_notice(&session).await?,
            csrf_token: csrf_token(&session).await?,
            oauth_enabled: state.config.oauth_enabled,
            operator: account.admin,
        },
    )
}

/// Query of the confirmation pages and body of their forms.
#[derive(Deserialize)]
pub struct UpstreamForm {
    #[serde(default)]
    name: String,
    /// Approve: the digest of the pending definitions the operator read.
    #[serde(default)]
    pending: String,
}

fn upstream_not_found() -> Response {
    error_page(
        StatusCode::NOT_FOUND,
        "Upstream not found",
        "No upstream MCP server has this name. It may have been removed.",
    )
}

/// The upstream named in the form, or the 404 page.
async fn named(state: &AppState, name: &str) -> Result<Option<UpstreamRecord>, AppError> {
    let Ok(name) = UpstreamName::parse(name) else {
        return Ok(None);
    };
    Ok(state.store.upstream(name.as_str()).await?)
}

/// What an operator action does.
#[derive(Clone, Copy)]
enum Action {
    Approve,
    Disable,
    Enable,
}

impl Action {
    fn path(self) -> &'static str {
        match self {
            Action::Approve => "/upstreams/approve",
            Action::Disable => "/upstreams/disable",
            Action::Enable => "/upstreams/enable",
        }
    }
}

fn plural(n: usize, one: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {one}s")
    }
}

async fn confirm(
    state: AppState,
    session: Session,
    form: UpstreamForm,
    action: Action,
) -> Result<Response, AppError> {
    if let Err(response) = operator(&state, &session).await? {
        return Ok(response);
    }
    let Some(u) = named(&state, &form.name).await? else {
        return Ok(upstream_not_found());
    };
    let name = u.name.clone();
    let listed = if u.trust_definitions {
        u.tools_seen
    } else {
        u.tools_approved
    };
    let confirmation = match action {
        Action::Approve => {
            let pending = state.store.pending_upstream_tools(&name).await?;
            if pending.is_empty() {
                set_notice(
                    &session,
                    &format!("Upstream {name} has no definition waiting for approval."),
                )
                .await?;
                return Ok(see_other("/upstreams"));
            }
            let allowed = state.store.destructive_allowed_upstream_tools().await?;
            let (hidden, listed): (Vec<&PendingTool>, Vec<&PendingTool>) = pending
                .iter()
                .partition(|p| hidden_destructive(&name, p, &allowed));
            let names = |tools: &[&PendingTool]| {
                tools
                    .iter()
                    .map(|p| format!("{name}__{}", p.tool))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let mut consequence =
                String::from("The definitions shown on the upstream page become the approved ones");
            if !listed.is_empty() {
                consequence.push_str(&format!(
                    ": {} will be listed to every MCP client allowed to use {name}, on every instance within a second, and calls to them are forwarded",
                    names(&listed)
                ));
            }
            consequence.push('.');
            if !hidden.is_empty() {
                consequence.push_str(&format!(
                    " {} {} hidden: destructive tools are listed only once allowed by name (gatehouse upstream allow-destructive {name} TOOL).",
                    names(&hidden),
                    if hidden.len() == 1 { "stays" } else { "stay" }
                ));
            }
            consequence.push_str(
                " A tool's description and schemas reach the models that call it: approve only what you have read.",
            );
            Confirmation {
                title: format!(
                    "Approve {} of {name}?",
                    plural(pending.len(), "tool definition")
                ),
                consequence,
                action: action.path().into(),
                fields: vec![("name", name.clone()), ("pending", digest(&pending))],
                button: format!("Approve {name}'s definitions"),
                cancel: "/upstreams".into(),
            }
        }
        Action::Disable => Confirmation {
            title: format!("Disable {name}?"),
            consequence: format!(
                "Gatehouse stops serving {name} on every instance within a second: its {} leave every client's tool list and calls to them are refused until you enable it again. Its registration and approvals are kept.",
                plural(usize::try_from(listed).unwrap_or(0), "tool")
            ),
            action: action.path().into(),
            fields: vec![("name", name.clone())],
            button: format!("Disable {name}"),
            cancel: "/upstreams".into(),
        },
        Action::Enable => Confirmation {
            title: format!("Enable {name}?"),
            consequence: format!(
                "Gatehouse serves {name} again on every instance within a second: its {} return to the tool lists of the clients allowed to use it, and calls to them are forwarded.",
                plural(usize::try_from(listed).unwrap_or(0), "approved tool")
            ),
            action: action.path().into(),
            fields: vec![("name", name.clone())],
            button: format!("Enable {name}"),
            cancel: "/upstreams".into(),
        },
    };
    confirm_page(&state, &session, &confirmation).await
}

/// `GET /upstreams/approve?name=…`: the confirmation page naming the definitions to approve.
pub async fn confirm_approve(
    State(state): State<AppState>,
    session: Session,
    PageQuery(form): PageQuery<UpstreamForm>,
) -> Result<Response, AppError> {
    confirm(state, session, form, Action::Approve).await
}

/// `GET /upstreams/disable?name=…`: the confirmation page.
pub async fn confirm_disable(
    State(state): State<AppState>,
    session: Session,
    PageQuery(form): PageQuery<UpstreamForm>,
) -> Result<Response, AppError> {
    confirm(state, session, form, Action::Disable).await
}

/// `GET /upstreams/enable?name=…`: the confirmation page.
pub async fn confirm_enable(
    State(state): State<AppState>,
    session: Session,
    PageQuery(form): PageQuery<UpstreamForm>,
) -> Result<Response, AppError> {
    confirm(state, session, form, Action::Enable).await
}

/// Records an operator's action: the operator's account, the upstream, `actor=console` and
/// what changed, the browser's address.
async fn audit(
    state: &AppState,
    account: &Account,
    client: &ClientAddr,
    event: Event,
    name: &str,
    detail: &str,
    now: i64,
) {
    state
        .store
        .audit(
            AuditEvent {
                event,
                outcome: Outcome::Success,
                account_id: Some(&account.id),
                client_id: None,
                subject: Some(name),
                source_ip: Some(&client.to_string()),
                detail: Some(&if detail.is_empty() {
                    "actor=console".to_string()
                } else {
                    format!("actor=console {detail}")
                }),
            },
            now,
        )
        .await;
}

async fn act(
    state: AppState,
    client: ClientAddr,
    session: Session,
    form: UpstreamForm,
    action: Action,
) -> Result<Response, AppError> {
    let account = match operator(&state, &session).await? {
        Ok(a) => a,
        Err(response) => return Ok(response),
    };
    let Some(u) = named(&state, &form.name).await? else {
        return Ok(upstream_not_found());
    };
    let name = u.name;
    let now = now();
    let notice = match action {
        Action::Approve => {
            let pending = state.store.pending_upstream_tools(&name).await?;
            if digest(&pending) != form.pending {
                set_notice(
                    &session,
                    &format!(
                        "Nothing approved: {name}'s definitions changed since you read them. Read them again below."
                    ),
                )
                .await?;
                return Ok(see_other("/upstreams"));
            }
            let approved = match state.store.approve_upstream_tools(&name, now).await {
                Ok(n) => n,
                Err(crate::store::StoreError::NotFound(_)) => return Ok(upstream_not_found()),
                Err(e) => return Err(e.into()),
            };
            audit(
                &state,
                &account,
                &client,
                Event::UpstreamApproved,
                &name,
                &format!("tools={approved}"),
                now,
            )
            .await;
            match approved {
                0 => format!("Upstream {name} had no definition waiting for approval."),
                n => format!(
                    "Approved {} of {name}: clients see them within a second.",
                    plural(usize::try_from(n).unwrap_or(0), "tool definition")
                ),
            }
        }
        Action::Disable | Action::Enable => {
            let enabled = matches!(action, Action::Enable);
            let changed = match state.store.set_upstream_enabled(&name, enabled, now).await {
                Ok(changed) => changed,
                Err(crate::store::StoreError::NotFound(_)) => return Ok(upstream_not_found()),
                Err(e) => return Err(e.into()),
            };
            let word = if enabled { "enabled" } else { "disabled" };
            if changed {
                audit(
                    &state,
                    &account,
                    &client,
                    if enabled {
                        Event::UpstreamEnabled
                    } else {
                        Event::UpstreamDisabled
                    },
                    &name,
                    "",
                    now,
                )
                .await;
                if enabled {
                    format!(
                        "Upstream {name} enabled: its approved tools are listed again within a second."
                    )
                } else {
                    format!(
                        "Upstream {name} disabled: its tools leave every tool list within a second."
                    )
                }
            } else {
                format!("Upstream {name} was already {word}.")
            }
        }
    };
    set_notice(&session, &notice).await?;
    Ok(see_other("/upstreams"))
}

/// `POST /upstreams/approve`: approves the upstream's pending definitions if they are still
/// the ones the operator read (`pending`, their digest), then `303` to the page.
pub async fn approve(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    CsrfForm(form): CsrfForm<UpstreamForm>,
) -> Result<Response, AppError> {
    act(state, client, session, form, Action::Approve).await
}

/// `POST /upstreams/disable`: stops serving the upstream, then `303` to the page.
pub async fn disable(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    CsrfForm(form): CsrfForm<UpstreamForm>,
) -> Result<Response, AppError> {
    act(state, client, session, form, Action::Disable).await
}

/// `POST /upstreams/enable`: serves the upstream again, then `303` to the page.
pub async fn enable(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    CsrfForm(form): CsrfForm<UpstreamForm>,
) -> Result<Response, AppError> {
    act(state, client, session, form, Action::Enable).await
}

#[cfg(test)]
mod tests {
    use super::changes;

    #[test]
    fn changes_name_each_differing_field_in_order() {
        let approved = r#"{"name":"echo","description":"Echoes","inputSchema":{"type":"object"}}"#;
        let seen = r#"{"name":"echo","description":"Echoes; also sends your files away","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}"#;
        let c = changes(Some(approved), seen);
        let fields: Vec<&str> = c.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["Description", "Annotations"]);
        assert_eq!(c[0].before.as_deref(), Some("Echoes"));
        assert_eq!(
            c[0].after.as_deref(),
            Some("Echoes; also sends your files away")
        );
        assert_eq!(c[1].before, None);
        assert!(
            c[1].after
                .as_deref()
                .unwrap()
                .contains("\"readOnlyHint\": true")
        );
        let new = changes(None, approved);
        let fields: Vec<&str> = new.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["Name", "Description", "Input schema"]);
    }
}
