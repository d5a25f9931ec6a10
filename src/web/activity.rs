//! `GET /projects/{id}/activity`: what happened in a project through MCP, for its owner
//! (issue 38 part 5; the seeds' call log a teacher can read): who, through which app or
//! credential, did what (the tool, resource template or prompt), when and how it ended — the
//! last [`ACTIVITY_SHOWN`] calls, never their arguments or results, which are not kept.
//!
//! A project the account is not a member of answers 404 like a missing one; a member who is
//! not the owner gets 403.
//!
//! `GET /connections/activity`: the same for a person's connections (issue 35 item 6): their
//! accounts at upstream services linked, renewed or unlinked, their own servers added,
//! approved, turned on or off and removed, and every call forwarded to an upstream — only
//! their own rows, newest first, to the second.

use askama::Template;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use tower_sessions::Session;

use super::session::{csrf_token, signed_in};
use super::{error_page, render, see_other, when};
use crate::domain::audit::{Event, Outcome};
use crate::domain::upstream::{PERSONAL_PREFIX, PERSONAL_SUFFIX_LEN};
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
    match Event::parse(event) {
        Some(Event::ResourceRead) => "Read",
        Some(Event::PromptGet) => "Prompt",
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

/// One row of the connections activity page.
struct ConnectionRow {
    at: String,
    what: String,
    through: String,
    outcome: &'static str,
}

#[derive(Template)]
#[template(path = "connections_activity.html")]
struct ConnectionsActivityPage {
    limit: i64,
    rows: Vec<ConnectionRow>,
    csrf_token: String,
    oauth_enabled: bool,
    /// The signed-in account is an operator: the nav links the upstream page.
    operator: bool,
}

/// How a person knows an upstream: the label they gave their own server (`p_LABEL_SUFFIX`),
/// else the operator's name.
fn upstream_label(name: &str) -> &str {
    name.strip_prefix(PERSONAL_PREFIX)
        .and_then(|rest| {
            rest.len()
                .checked_sub(PERSONAL_SUFFIX_LEN + 1)
                .map(|end| &rest[..end])
        })
        .filter(|label| !label.is_empty())
        .unwrap_or(name)
}

/// The upstream a forwarded call's detail names (`… upstream=NAME …`).
fn upstream_in_detail(detail: Option<&str>) -> Option<&str> {
    detail?
        .split(' ')
        .find_map(|part| part.strip_prefix("upstream="))
}

/// What a connections-page audit row says happened, in words.
fn connection_event(e: &AuditEntry) -> String {
    let subject = e.subject.as_deref().unwrap_or_default();
    let label = upstream_label(subject);
    match Event::parse(&e.event) {
        Some(Event::ConnectionConnected) => format!("Connected your account at {subject}"),
        Some(Event::ConnectionRefreshFailed) => {
            format!("Your access at {subject} could not be renewed and was dropped: connect again")
        }
        Some(Event::ConnectionDisconnected) => format!("Disconnected your account at {subject}"),
        Some(Event::PersonalUpstreamAdded) => format!("Added your server {label}"),
        Some(Event::PersonalUpstreamApproved) => format!("Approved tools of your server {label}"),
        Some(Event::PersonalUpstreamEnabled) => format!("Turned your server {label} on"),
        Some(Event::PersonalUpstreamDisabled) => format!("Turned your server {label} off"),
        Some(Event::PersonalUpstreamRemoved) => format!("Removed your server {label}"),
        _ => {
            let upstream = upstream_in_detail(e.detail.as_deref()).unwrap_or("an upstream");
            // The upstream's own name of the tool (Gatehouse lists it as `UPSTREAM__TOOL`).
            let tool = subject
                .strip_prefix(upstream)
                .and_then(|rest| rest.strip_prefix("__"))
                .unwrap_or(subject);
            format!("Tool {tool} on {}", upstream_label(upstream))
        }
    }
}

/// `GET /connections/activity`.
pub async fn connections(
    State(state): State<AppState>,
    session: Session,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other("/signin?next=%2Fconnections%2Factivity"));
    };
    let filter = AuditFilter {
        account_id: Some(account.id.clone()),
        connections_only: true,
        ..AuditFilter::default()
    };
    let rows = state
        .store
        .audit_entries(&filter, ACTIVITY_SHOWN)
        .await?
        .into_iter()
        .map(|e| ConnectionRow {
            at: to_the_second(e.at),
            what: connection_event(&e),
            through: if e.event == "tool_call" {
                through(&e)
            } else if e.event == "connection_refresh_failed" {
                "Gatehouse".to_string()
            } else if e.event == "connection_connected"
                && let Some(app) = &e.client_name
            {
                format!("this console, asked by {app}")
            } else {
                "this console".to_string()
            },
            outcome: outcome_words(&e.outcome),
        })
        .collect();
    render(
        StatusCode::OK,
        &ConnectionsActivityPage {
            limit: ACTIVITY_SHOWN,
            rows,
            csrf_token: csrf_token(&session).await?,
            oauth_enabled: state.config.oauth_enabled,
            operator: account.admin,
        },
    )
}

/// An audit outcome (as the row holds it) in words a person can act on; `Other` for one this
/// release does not know or that the activity pages do not show.
pub fn outcome_words(outcome: &str) -> &'static str {
    let Some(outcome) = Outcome::parse(outcome) else {
        return "Other";
    };
    match outcome {
        Outcome::Success | Outcome::Granted => "Done",
        Outcome::Continued => "Done (the next part of an earlier answer)",
        Outcome::Denied => "You denied it",
        Outcome::NotFound => {
            "Not found: the note, project or resource does not exist or is out of its reach"
        }
        Outcome::Forbidden => "Refused: your role in the project does not allow it",
        Outcome::InsufficientScope => "Refused: it needs access you did not allow",
        Outcome::InvalidArguments => "Refused: the app sent arguments the tool does not accept",
        Outcome::OverQuota => "Refused: your hourly budget of calls was used up",
        Outcome::Unavailable => "Failed: the database was busy; the app may try again",
        Outcome::Error => "Failed: an error on this server",
        Outcome::ToolError => "Done, but the tool reported an error in its answer",
        Outcome::UpstreamError => {
            "Failed: the upstream server could not be reached or answered with an error"
        }
        Outcome::Timeout => "Failed: the upstream server did not answer in time",
        Outcome::CoolingDown => {
            "Not sent: the upstream server failed its last calls and is rested for a few seconds"
        }
        Outcome::Declined => "Not run: you did not confirm it",
        Outcome::ConfirmationNeeded => {
            "Not run: it needs your confirmation, which this app cannot ask for"
        }
        Outcome::ConnectionRequired => {
            "Not run yet: you had to connect your account at the service first"
        }
        Outcome::Failure
        | Outcome::Refused
        | Outcome::InvalidGrant
        | Outcome::Throttled
        | Outcome::Busy
        | Outcome::UnknownPrompt
        | Outcome::ConfirmationInvalid => "Other",
    }
}

/// A time for the activity page, to the second: `2026-01-02 03:04:05 UTC`.
pub fn to_the_second(unix_seconds: i64) -> String {
    let format =
        time::macros::format_description!("[year]-[month]-[day] [hour]:[minute]:[second] UTC");
    time::OffsetDateTime::from_unix_timestamp(unix_seconds)
        .ok()
        .and_then(|t| t.format(&format).ok())
        .unwrap_or_else(|| "unknown time".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(event: &str, subject: &str, detail: Option<&str>) -> AuditEntry {
        AuditEntry {
            id: 1,
            at: 0,
            event: event.into(),
            outcome: "success".into(),
            account_id: None,
            email: None,
            client_id: None,
            client_name: None,
            subject: Some(subject.into()),
            project_id: None,
            source_ip: None,
            detail: detail.map(str::to_string),
        }
    }

    #[test]
    fn a_persons_own_server_is_named_by_its_label() {
        assert_eq!(upstream_label("p_my-tools_0a1b2c"), "my-tools");
        assert_eq!(upstream_label("github"), "github");
        assert_eq!(upstream_label("p_x"), "p_x");
        assert_eq!(
            connection_event(&entry("personal_upstream_added", "p_notes_00ff11", None)),
            "Added your server notes"
        );
        assert_eq!(
            connection_event(&entry(
                "tool_call",
                "p_notes_00ff11__search",
                Some("credential=account_key:k upstream=p_notes_00ff11 duration_ms=3"),
            )),
            "Tool search on notes"
        );
        assert_eq!(
            connection_event(&entry("connection_connected", "calendar", None)),
            "Connected your account at calendar"
        );
    }
}

#[cfg(test)]
mod outcome_words_tests {
    use super::outcome_words;

    /// Every outcome the MCP paths audit (built-in tools, forwarded calls, a person's
    /// connections, confirmations) reads as words on the activity pages, never "Other".
    #[test]
    fn every_audited_call_outcome_has_words() {
        for outcome in [
            "success",
            "continued",
            "not_found",
            "forbidden",
            "insufficient_scope",
            "invalid_arguments",
            "over_quota",
            "unavailable",
            "error",
            "tool_error",
            "upstream_error",
            "timeout",
            "declined",
            "confirmation_needed",
            "connection_required",
        ] {
            assert_ne!(outcome_words(outcome), "Other", "{outcome}");
        }
        assert_eq!(outcome_words("something new"), "Other");
    }
}
