//! `GET /projects/{id}/notes/{note_id}`: one note, read-only, for the project's members — its
//! text, tags, when it was last changed and, from the audit log, who changed it last and through
//! which app or credential (issue 37 part 5: the `console_url` tools hand out leads here, so a
//! person can read what an agent wrote).
//!
//! A project the account is not a member of, and a note of another project, answer 404 like a
//! missing one.

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

/// The project's latest tool calls searched for the note's last change (newest first).
pub const LAST_CHANGE_SCAN: i64 = 500;

/// The tools that change a note.
const NOTE_WRITERS: [&str; 2] = ["create_note", "update_note"];

#[derive(Template)]
#[template(path = "note.html")]
struct NotePage {
    project_id: String,
    project_name: String,
    title: String,
    body: String,
    tags: Vec<String>,
    updated: String,
    /// Who made the note's last change: "alice@example.com through Claude".
    last_change: Option<String>,
    csrf_token: String,
    oauth_enabled: bool,
    /// The signed-in account is an operator: the nav links the upstream page.
    operator: bool,
}

/// The `note=ID` word of a tool call's audit detail.
pub fn note_of(detail: Option<&str>) -> Option<&str> {
    detail?
        .split(' ')
        .find_map(|part| part.strip_prefix("note="))
}

/// Who made the audited call and through what, in words.
fn who_through(e: &AuditEntry) -> String {
    let who = e.email.as_deref().unwrap_or("a removed account");
    match super::activity::through(e).as_str() {
        "" => who.to_string(),
        through => format!("{who} through {through}"),
    }
}

/// `GET /projects/{id}/notes/{note_id}`.
pub async fn show(
    State(state): State<AppState>,
    session: Session,
    Path((project_id, note_id)): Path<(String, String)>,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        let next: String = url::form_urlencoded::byte_serialize(
            format!("/projects/{project_id}/notes/{note_id}").as_bytes(),
        )
        .collect();
        return Ok(see_other(&format!("/signin?next={next}")));
    };
    let not_found = || {
        error_page(
            StatusCode::NOT_FOUND,
            "Note not found",
            "There is no note at this address, or you are not a member of its project.",
        )
    };
    let Some(project) = state.store.membership(&account.id, &project_id).await? else {
        return Ok(not_found());
    };
    let Some(note) = state.store.note(&project.project_id, &note_id).await? else {
        return Ok(not_found());
    };
    let filter = AuditFilter {
        project_id: Some(project.project_id.clone()),
        event: Some("tool_call".into()),
        ..AuditFilter::default()
    };
    let last_change = state
        .store
        .audit_entries(&filter, LAST_CHANGE_SCAN)
        .await?
        .into_iter()
        .find(|e| {
            e.outcome == "success"
                && e.subject
                    .as_deref()
                    .is_some_and(|s| NOTE_WRITERS.contains(&s))
                && note_of(e.detail.as_deref()) == Some(note.id.as_str())
        })
        .map(|e| who_through(&e));
    render(
        StatusCode::OK,
        &NotePage {
            project_id: project.project_id,
            project_name: project.name,
            title: note.title,
            body: note.body,
            tags: note.tags,
            updated: when(note.updated_at),
            last_change,
            csrf_token: csrf_token(&session).await?,
            oauth_enabled: state.config.oauth_enabled,
            operator: account.admin,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::note_of;

    #[test]
    fn the_note_word_is_read_from_the_detail() {
        assert_eq!(
            note_of(Some(
                "credential=oauth:f1 project=p1 duration_ms=3 note=n-1"
            )),
            Some("n-1")
        );
        assert_eq!(note_of(Some("credential=oauth:f1 project=p1")), None);
        assert_eq!(note_of(None), None);
    }
}
