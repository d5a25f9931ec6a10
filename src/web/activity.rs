//! `GET /projects/{id}/activity`: what happened in a project through MCP, for its owner
//! (issue 38 part 5; the seeds' call log a teacher can read): who, through which app or
//! credential, did what (the tool, resource template or prompt), when and how it ended — the
//! last [`ACTIVITY_SHOWN`] calls, never their arguments or results, which are not kept.
//!
//! A project the account is not a member of answers 404 like a missing one; a member who is
//! not the owner gets 403.

use askama::Template;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use tower_sessions::Session;

use super::session::{csrf_token, signed_in};
use super::{error_page, render, see_other, when};
use crate::error::AppError;
use crate::state::AppState;
use crate::store::audit_query::{AuditEntry, AuditFilter};

/// Calls shown, newest first.
pub const ACTIVITY_SHOWN: i64 = 200;

struct Row {
    at: String,
    who: String,
    through: String,
    kind: &'static str,
    what: String,
    outcome: String,
}

#[derive(Template)]
#[template(path = "project_activity.html")]
struct ActivityPage {
    project_id: String,
    name: String,
    limit: i64,
    rows: Vec<Row>,
    csrf_token: String,
    oauth_enabled: bool,
    /// The signed-in account is an operator: the nav links the upstream page.
    operator: bool,
}

/// The credential kind of an MCP audit row's detail (`credential=KIND:ID …`).
fn credential_kind(detail: Option<&str>) -> Option<&str> {
    detail?
        .split(' ')
        .find_map(|part| part.strip_prefix("credential="))
        .and_then(|c| c.split(':').next())
}

/// Through which app or credential the call came, in words.
pub fn through(e: &AuditEntry) -> String {
    let app = e
        .client_name
        .clone()
        .or_else(|| e.client_id.clone())
        .unwrap_or_else(|| "an app".to_string());
    match credential_kind(e.detail.as_deref()) {
        Some("account_key") => "API key (account)".to_string(),
        Some("project_key") => "API key (this project)".to_string(),
        Some("personal_url") => "personal MCP URL".to_string(),
        Some("service_token") => format!("service {app}"),
        _ => app,
    }
}

fn kind(event: &str) -> &'static str {
    match event {
        "resource_read" => "Read",
        "prompt_get" => "Prompt",
        _ => "Tool",
    }
}

/// `GET /projects/{id}/activity`.
pub async fn show(
    State(state): State<AppState>,
    session: Session,
    Path(project_id): Path<String>,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        let next: String = url::form_urlencoded::byte_serialize(
            format!("/projects/{project_id}/activity").as_bytes(),
        )
        .collect();
        return Ok(see_other(&format!("/signin?next={next}")));
    };
    let Some(project) = state.store.membership(&account.id, &project_id).await? else {
        return Ok(error_page(
            StatusCode::NOT_FOUND,
            "Project not found",
            "There is no project at this address, or you are not a member of it.",
        ));
    };
    if state.store.project_owner(&project_id).await?.as_deref() != Some(account.id.as_str()) {
        return Ok(error_page(
            StatusCode::FORBIDDEN,
            "Only the owner sees the project's activity",
            "Ask the project's owner.",
        ));
    }
    let filter = AuditFilter {
        project_id: Some(project.project_id.clone()),
        mcp_only: true,
        ..AuditFilter::default()
    };
    let rows = state
        .store
        .audit_entries(&filter, ACTIVITY_SHOWN)
        .await?
        .into_iter()
        .map(|e| Row {
            at: when(e.at),
            who: e
                .email
                .clone()
                .unwrap_or_else(|| "a removed account".to_string()),
            through: through(&e),
            kind: kind(&e.event),
            what: e.subject.clone().unwrap_or_default(),
            outcome: e.outcome.clone(),
        })
        .collect();
    render(
        StatusCode::OK,
        &ActivityPage {
            project_id: project.project_id,
            name: project.name,
            limit: ACTIVITY_SHOWN,
            rows,
            csrf_token: csrf_token(&session).await?,
            oauth_enabled: state.config.oauth_enabled,
            operator: account.admin,
        },
    )
}
