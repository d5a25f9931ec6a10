//! Connected apps: `GET /apps` lists the clients the signed-in person granted, `GET
//! /apps/{consent_id}` shows what one of them did (from the audit log); `POST /apps/revoke`
//! revokes one, killing its live tokens at once.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Path, State};

use crate::client_addr::ClientAddr;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use tower_sessions::Session;

use super::session::{csrf_token, set_notice, signed_in, take_notice};
use super::{Confirmation, CsrfForm, PageQuery, confirm_page, error_page, render, see_other, when};
use crate::domain::cimd::is_url_client_id;
use crate::domain::device::DEVICE_CODE_GRANT;
use crate::domain::redirect_uri::host_for_display;
use crate::domain::scope::ScopeSet;
use crate::domain::text::check_line;
use crate::error::AppError;
use crate::state::AppState;
use crate::store::audit::AuditEvent;
use crate::store::now;
use crate::store::oauth::{BUILT_IN, ConnectedApp};

struct AppRow {
    consent_id: String,
    client_id: String,
    name: String,
    /// The host of a client ID metadata document URL; `None`: the name is unverified.
    publisher: Option<String>,
    host: String,
    /// The MCP server (resource) the app may use: its host, and its name when registered.
    server: String,
    abilities: Vec<String>,
    granted: String,
    last_used: Option<String>,
}

#[derive(Template)]
#[template(path = "apps.html")]
struct AppsPage {
    apps: Vec<AppRow>,
    notice: Option<String>,
    mcp_url: String,
    csrf_token: String,
    oauth_enabled: bool,
}

/// The name to show: the registered one when it follows the visible-text rule (a name stored
/// before the rule is never shown, RFC 7591 §5).
fn display_name(app: &ConnectedApp) -> String {
    app.client_name
        .clone()
        .filter(|n| check_line(n).is_ok())
        .unwrap_or_else(|| "An unnamed application".into())
}

/// `GET /apps`: each granted client with its name (the host of its metadata document, or
/// marked unverified), redirect host, what it may do in words, when it was granted and last
/// called a tool.
pub async fn list(State(state): State<AppState>, session: Session) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other("/signin?next=%2Fapps"));
    };
    let last_used: HashMap<String, i64> = state
        .store
        .last_tool_use_by_client(&account.id)
        .await?
        .into_iter()
        .collect();
    let resources = state.store.resources().await?;
    let apps = state
        .store
        .connected_apps(&account.id)
        .await?
        .into_iter()
        .map(|a| {
            let registered = resources.iter().find(|r| r.url == a.resource);
            let (server, abilities) = match registered {
                None if a.resource == BUILT_IN => (
                    format!(
                        "{} (this Gatehouse)",
                        host_for_display(&state.config.mcp_server_url)
                    ),
                    ScopeSet::parse(&a.scope)
                        .map(|s| s.iter().map(|s| s.describe().to_string()).collect())
                        .unwrap_or_default(),
                ),
                None => (host_for_display(&a.resource), Vec::new()),
                Some(r) => (
                    format!("{} ({})", host_for_display(&r.url), r.name),
                    a.scope
                        .split_ascii_whitespace()
                        .filter_map(|s| r.describe(s).map(ToString::to_string))
                        .collect(),
                ),
            };
            AppRow {
                name: display_name(&a),
                publisher: is_url_client_id(&a.client_id).then(|| host_for_display(&a.client_id)),
                host: if a.redirect_uri == DEVICE_CODE_GRANT {
                    "a device (signed in with a code)".to_string()
                } else {
                    host_for_display(&a.redirect_uri)
                },
                server,
                abilities,
                granted: when(a.updated_at),
                last_used: last_used.get(&a.client_id).copied().map(when),
                consent_id: a.consent_id,
                client_id: a.client_id,
            }
        })
        .collect();
    render(
        StatusCode::OK,
        &AppsPage {
            apps,
            notice: take_notice(&session).await?,
            mcp_url: state.config.mcp_server_url.clone(),
            csrf_token: csrf_token(&session).await?,
            oauth_enabled: state.config.oauth_enabled,
        },
    )
}

/// Tool calls, resource reads and prompt gets shown on an app's activity page.
pub const ACTIVITY_SHOWN: i64 = 50;

struct EventRow {
    at: String,
    /// `Tool call`, `Resource read` or `Prompt`.
    kind: &'static str,
    /// The tool name, the resource's URI template or the prompt name.
    what: String,
    project: String,
    outcome: String,
}

/// How the activity page names an audit event of the MCP route.
fn event_kind(event: &str) -> &'static str {
    match event {
        "resource_read" => "Resource read",
        "prompt_get" => "Prompt",
        _ => "Tool call",
    }
}

#[derive(Template)]
#[template(path = "app_activity.html")]
struct ActivityPage {
    name: String,
    limit: i64,
    events: Vec<EventRow>,
    csrf_token: String,
    oauth_enabled: bool,
}

/// The project id in a `tool_call`, `resource_read` or `prompt_get` audit record's detail
/// (`credential=… project=ID duration_ms=N`).
fn project_of(detail: Option<&str>) -> Option<&str> {
    detail?
        .split(' ')
        .find_map(|part| part.strip_prefix("project="))
}

/// `GET /apps/{consent_id}`: what the app did with the account's access — the last
/// [`ACTIVITY_SHOWN`] tool calls, resource reads and prompt gets with their project and
/// outcome, never their arguments or results. Another account's (or a revoked) grant answers
/// 404.
pub async fn activity(
    State(state): State<AppState>,
    session: Session,
    Path(consent_id): Path<String>,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other("/signin?next=%2Fapps"));
    };
    let Some(app) = state
        .store
        .connected_apps(&account.id)
        .await?
        .into_iter()
        .find(|a| a.consent_id == consent_id)
    else {
        return Ok(app_not_found());
    };
    // Project names only for projects the account is still a member of.
    let projects: HashMap<String, String> = state
        .store
        .projects_of_account(&account.id)
        .await?
        .into_iter()
        .map(|p| (p.project_id, p.name))
        .collect();
    let events = state
        .store
        .client_activity(&account.id, &app.client_id, ACTIVITY_SHOWN)
        .await?
        .into_iter()
        .map(|e| EventRow {
            at: when(e.at),
            project: match project_of(e.detail.as_deref()) {
                Some(id) => projects
                    .get(id)
                    .cloned()
                    .unwrap_or_else(|| "a project you are no longer a member of".into()),
                None => "—".into(),
            },
            kind: event_kind(&e.event),
            what: e.subject.unwrap_or_default(),
            outcome: e.outcome,
        })
        .collect();
    render(
        StatusCode::OK,
        &ActivityPage {
            name: display_name(&app),
            limit: ACTIVITY_SHOWN,
            events,
            csrf_token: csrf_token(&session).await?,
            oauth_enabled: state.config.oauth_enabled,
        },
    )
}

/// Body of `POST /apps/revoke` and query of `GET /apps/revoke`.
#[derive(Deserialize)]
pub struct RevokeForm {
    #[serde(default)]
    consent_id: String,
}

/// `GET /apps/revoke?consent_id=…`: the confirmation page naming the app and what revoking
/// it does; another account's (or an already revoked) grant answers 404.
pub async fn confirm_revoke(
    State(state): State<AppState>,
    session: Session,
    PageQuery(form): PageQuery<RevokeForm>,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other("/signin?next=%2Fapps"));
    };
    let Some(app) = state
        .store
        .connected_apps(&account.id)
        .await?
        .into_iter()
        .find(|a| a.consent_id == form.consent_id)
    else {
        return Ok(app_not_found());
    };
    let name = display_name(&app);
    let confirmation = Confirmation {
        title: format!("Revoke {name}?"),
        consequence: format!(
            "{name} (returning to {}) will no longer be able to use your account: its access and refresh tokens stop working at once, and its next call is refused. To use your account again it has to ask you again.",
            host_for_display(&app.redirect_uri)
        ),
        action: "/apps/revoke".into(),
        fields: vec![("consent_id", app.consent_id)],
        button: format!("Revoke {name}"),
        cancel: "/apps".into(),
    };
    confirm_page(&state, &session, &confirmation).await
}

fn app_not_found() -> Response {
    error_page(
        StatusCode::NOT_FOUND,
        "App not found",
        "No connected app of yours is at this address. It may have been revoked already.",
    )
}

/// `POST /apps/revoke`: revokes the grant, then `303` to `/apps` with a notice naming the app.
pub async fn revoke(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    CsrfForm(form): CsrfForm<RevokeForm>,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other("/signin?next=%2Fapps"));
    };
    let now = now();
    let name = state
        .store
        .connected_apps(&account.id)
        .await?
        .into_iter()
        .find(|a| a.consent_id == form.consent_id)
        .map(|a| display_name(&a));
    let revoked = state
        .store
        .revoke_consent(&account.id, &form.consent_id, now)
        .await?;
    let notice = match (&revoked, name) {
        (Some(_), Some(name)) => format!("{name} can no longer use your account."),
        (Some(_), None) => "The app can no longer use your account.".to_string(),
        (None, _) => "That app had no access to revoke: it was revoked already.".to_string(),
    };
    set_notice(&session, &notice).await?;
    if let Some(client_id) = revoked {
        crate::metrics::token_event("revoked");
        state
            .store
            .audit(
                AuditEvent {
                    event: "consent_revoked",
                    outcome: "success",
                    account_id: Some(&account.id),
                    client_id: Some(&client_id),
                    source_ip: Some(&client.to_string()),
                    ..Default::default()
                },
                now,
            )
            .await;
    }
    Ok(see_other("/apps"))
}
