//! MCP resources (`server/resources`): the projects the caller's credential reaches, their notes
//! and their jobs as `gatehouse://` URIs — listed in pages, described by templates, readable as
//! JSON.
//!
//! Not found (unknown, malformed, another account's, or out of the credential's reach) is
//! `ErrorData::resource_not_found` with `data.uri`; rmcp sends it as `-32002` to peers before
//! 2026-07-28 and as `-32602` to 2026-07-28 peers, as each revision requires.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rmcp::ErrorData;
use rmcp::model::{ListResourcesResult, ReadResourceResult, Resource, ResourceTemplate};
use serde::Serialize;

use super::auth::Principal;
use super::output;
use super::views::{JobView, NoteView, ProjectView};
use crate::domain::notes::{JOB_TEMPLATE, JobKind, NOTE_TEMPLATE, PROJECT_TEMPLATE, ResourceUri};
use crate::state::AppState;
use crate::store::StoreError;

/// Resources per `resources/list` page.
pub const PAGE: usize = 50;
const JSON: &str = "application/json";

#[allow(clippy::needless_pass_by_value, reason = "given to map_err")]
fn internal(e: StoreError) -> ErrorData {
    super::errors::storage_failure(&e, "resource")
}

fn not_found(uri: &str) -> ErrorData {
    ErrorData::resource_not_found(
        "Resource not found",
        Some(
            serde_json::json!({ "uri": super::errors::echoed(uri, super::errors::ECHOED_URI_MAX) }),
        ),
    )
}

/// Which part of the listing a page starts in: projects, then notes, then jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    Projects,
    Notes,
    Jobs,
}

impl Section {
    /// The section listed after this one (`None` after the last).
    fn next(self) -> Option<Section> {
        match self {
            Section::Projects => Some(Section::Notes),
            Section::Notes => Some(Section::Jobs),
            Section::Jobs => None,
        }
    }
}

/// Where a `resources/list` page starts. Encoded opaquely in `nextCursor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cursor {
    section: Section,
    offset: usize,
}

impl Cursor {
    const START: Cursor = Cursor {
        section: Section::Projects,
        offset: 0,
    };

    fn encode(self) -> String {
        let s = match self.section {
            Section::Projects => "p",
            Section::Notes => "n",
            Section::Jobs => "j",
        };
        URL_SAFE_NO_PAD.encode(format!("{s}:{}", self.offset))
    }

    fn decode(cursor: &str) -> Option<Cursor> {
        let raw = String::from_utf8(URL_SAFE_NO_PAD.decode(cursor).ok()?).ok()?;
        let (s, offset) = raw.split_once(':')?;
        let section = match s {
            "p" => Section::Projects,
            "n" => Section::Notes,
            "j" => Section::Jobs,
            _ => return None,
        };
        // Offsets come from the client: bounded, so no arithmetic on them can overflow.
        let offset: usize = offset.parse().ok()?;
        if offset > MAX_CURSOR_OFFSET {
            return None;
        }
        Some(Cursor { section, offset })
    }
}

/// Largest offset a cursor may carry (far beyond any real listing).
const MAX_CURSOR_OFFSET: usize = 10_000_000;

fn resource(uri: String, name: String, title: String, description: &str) -> Resource {
    Resource::new(uri, name)
        .with_title(title)
        .with_description(description)
        .with_mime_type(JSON)
}

/// One page of the caller's resources (MCP pagination: opaque cursor, stable order).
pub async fn list(
    app: &AppState,
    principal: &Principal,
    cursor: Option<&str>,
) -> Result<ListResourcesResult, ErrorData> {
    let mut cur = match cursor {
        None => Cursor::START,
        Some(c) => {
            Cursor::decode(c).ok_or_else(|| ErrorData::invalid_params("Invalid cursor", None))?
        }
    };
    let store = &app.store;
    let mut items = Vec::new();
    let next = loop {
        let need = PAGE - items.len();
        if need == 0 {
            break Some(cur);
        }
        // One page of the current section, and whether the section has more after it.
        let (page, more): (Vec<Resource>, bool) = match cur.section {
            Section::Projects => {
                let projects = store
                    .reachable_projects(principal)
                    .await
                    .map_err(internal)?;
                let page: Vec<_> = projects
                    .iter()
                    .skip(cur.offset)
                    .take(need)
                    .map(|p| {
                        resource(
                            ResourceUri::project(&p.project_id),
                            p.name.clone(),
                            format!("Project {}", p.name),
                            "A project: name, the caller's role, note count and console link.",
                        )
                    })
                    .collect();
                let more = cur.offset + page.len() < projects.len();
                (page, more)
            }
            Section::Notes => {
                let notes = store
                    .reachable_notes(principal, cur.offset as i64, need as i64)
                    .await
                    .map_err(internal)?;
                let more = notes.len() == need;
                let page = notes.into_iter().map(|n| {
                    resource(
                        ResourceUri::note(&n.project_id, &n.id),
                        n.title.clone(),
                        n.title,
                        "A note: title, text and tags.",
                    )
                });
                (page.collect(), more)
            }
            Section::Jobs => {
                let jobs = store
                    .reachable_jobs(principal, cur.offset as i64, need as i64)
                    .await
                    .map_err(internal)?;
                let more = jobs.len() == need;
                let page = jobs.into_iter().map(|j| {
                    resource(
                        ResourceUri::job(j.kind, &j.id),
                        format!("{} {}", j.kind, j.id),
                        format!("{} job ({})", j.kind, j.status),
                        "A background job: its status and, once completed, its document.",
                    )
                });
                (page.collect(), more)
            }
        };
        let got = page.len();
        items.extend(page);
        if more {
            cur.offset += got;
        } else if let Some(section) = cur.section.next() {
            cur = Cursor { section, offset: 0 };
        } else {
            break None;
        }
    };
    let mut result = ListResourcesResult::with_all_items(items);
    result.next_cursor = next.map(Cursor::encode);
    Ok(result)
}

/// The resource templates (RFC 6570).
pub fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(PROJECT_TEMPLATE, "project")
            .with_title("Project")
            .with_description(
                "A project the caller is a member of: name, role, note count and console_url.",
            )
            .with_mime_type(JSON),
        ResourceTemplate::new(NOTE_TEMPLATE, "note")
            .with_title("Note")
            .with_description("A note of a project: title, text and tags.")
            .with_mime_type(JSON),
        ResourceTemplate::new(JOB_TEMPLATE, "job")
            .with_title("Background job")
            .with_description(
                "A background job (kind: export): status and, once completed, its document. A document too large for one read is cut between notes and names its next_page: the same URI with ?from=N, which reads the notes from the N-th (0-based) on.",
            )
            .with_mime_type(JSON),
    ]
}

/// The contents of `uri`: the JSON document `document()` makes, bounded by
/// `GATEHOUSE_MAX_RESULT_BYTES` like tool results; `rest` tells how to get what a cut leaves
/// out. Making, cutting and serializing the document run off the async workers
/// ([`output::off_runtime`]).
async fn json_contents(
    app: &AppState,
    uri: &str,
    document: impl FnOnce() -> Result<serde_json::Value, serde_json::Error> + Send + 'static,
    rest: String,
) -> Result<ReadResourceResult, ErrorData> {
    let max_bytes = app.config.max_result_bytes;
    let uri = uri.to_owned();
    output::off_runtime(move || {
        document().map(|value| output::resource_document(&uri, value, max_bytes, &rest))
    })
    .await
    .ok_or_else(|| ErrorData::internal_error("the document could not be prepared", None))?
    .map_err(|e| ErrorData::internal_error(format!("serialize: {e}"), None))
}

/// `resources/read` of one URI, for this caller. The document is bounded by
/// `GATEHOUSE_MAX_RESULT_BYTES` ([`output::resource_document`]).
pub async fn read(
    app: &AppState,
    principal: &Principal,
    uri: &str,
) -> Result<ReadResourceResult, ErrorData> {
    let (base, from) = split_page(uri)?;
    let parsed = ResourceUri::parse(base).ok_or_else(|| not_found(uri))?;
    if from.is_some() && !matches!(parsed, ResourceUri::Job { .. }) {
        return Err(not_found(uri));
    }
    match parsed {
        ResourceUri::Project { project_id } => read_project(app, principal, uri, &project_id).await,
        ResourceUri::Note {
            project_id,
            note_id,
        } => read_note(app, principal, uri, &project_id, &note_id).await,
        ResourceUri::Job { kind, job_id } => {
            read_job(app, principal, uri, base, kind, &job_id, from).await
        }
    }
}

/// `uri` without its query, and the page its query asks for: a job's document may be read
/// from its `from`-th note on (`?from=N`, the `next_page` of a cut document); no other
/// resource takes a query.
///
/// Errors: resource not found for any other query, or an `N` beyond [`MAX_CURSOR_OFFSET`].
fn split_page(uri: &str) -> Result<(&str, Option<usize>), ErrorData> {
    Ok(match uri.split_once('?') {
        None => (uri, None),
        Some((base, query)) => {
            let from = query
                .strip_prefix("from=")
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|n| *n <= MAX_CURSOR_OFFSET)
                .ok_or_else(|| not_found(uri))?;
            (base, Some(from))
        }
    })
}

/// The project resource `uri` of `project_id`, when the caller reaches that project: its
/// [`ProjectView`] with the notes counted.
///
/// Errors: resource not found when it does not; storage failures.
async fn read_project(
    app: &AppState,
    principal: &Principal,
    uri: &str,
    project_id: &str,
) -> Result<ReadResourceResult, ErrorData> {
    let store = &app.store;
    let m = store
        .reachable_membership(principal, project_id)
        .await
        .map_err(internal)?
        .ok_or_else(|| not_found(uri))?;
    let count = store.count_notes(project_id).await.map_err(internal)?;
    let view = ProjectView::new(&app.config, &m, count);
    let rest = format!("Open the project in the console: {}", view.console_url);
    json_contents(app, uri, move || serde_json::to_value(view), rest).await
}

/// The note resource `uri` of `note_id` in `project_id`, when the caller reaches that
/// project and the note exists: its [`NoteView`].
///
/// Errors: resource not found otherwise; storage failures.
async fn read_note(
    app: &AppState,
    principal: &Principal,
    uri: &str,
    project_id: &str,
    note_id: &str,
) -> Result<ReadResourceResult, ErrorData> {
    let store = &app.store;
    store
        .reachable_membership(principal, project_id)
        .await
        .map_err(internal)?
        .ok_or_else(|| not_found(uri))?;
    let note = store
        .note(project_id, note_id)
        .await
        .map_err(internal)?
        .ok_or_else(|| not_found(uri))?;
    let rest = format!(
        "Too long for one result: get_note returns the text in parts (body_from = next_body_from); whole in the console: {}/projects/{project_id}",
        app.config.frontend_url
    );
    let view = NoteView::from(note);
    json_contents(app, uri, move || serde_json::to_value(view), rest).await
}

/// The job resource `uri` (`base` without its query) of `job_id`, when it is a job of `kind`
/// in a project the caller reaches: its [`JobView`] and, once completed, its document, from
/// the `from`-th note on; cut into pages between notes, each naming the next
/// (`base?from=N`).
///
/// Errors: resource not found otherwise; storage failures; an internal error when the
/// document could not be prepared or serialized.
async fn read_job(
    app: &AppState,
    principal: &Principal,
    uri: &str,
    base: &str,
    kind: JobKind,
    job_id: &str,
    from: Option<usize>,
) -> Result<ReadResourceResult, ErrorData> {
    let store = &app.store;
    let job = store
        .job(job_id)
        .await
        .map_err(internal)?
        .filter(|j| j.kind == kind)
        .ok_or_else(|| not_found(uri))?;
    store
        .reachable_membership(principal, &job.project_id)
        .await
        .map_err(internal)?
        .ok_or_else(|| not_found(uri))?;
    #[derive(Serialize)]
    struct JobDocument {
        #[serde(flatten)]
        job: JobView,
        document: Option<serde_json::Value>,
    }
    // Said only when one note alone does not fit a page: short, the page has no room.
    let rest = "Read the note whole with get_note.".to_string();
    let view = JobView::from(&job);
    let result = job.result;
    let from = from.unwrap_or(0);
    let base = base.to_owned();
    let max_bytes = app.config.max_result_bytes;
    let uri = uri.to_owned();
    let document = move || {
        let mut document: Option<serde_json::Value> =
            result.as_deref().and_then(|d| serde_json::from_str(d).ok());
        // `?from=N`: the notes from the N-th on (0-based), and where they start.
        if from > 0
            && let Some(doc) = document.as_mut().and_then(|d| d.as_object_mut())
        {
            if let Some(notes) = doc.get_mut("notes").and_then(|n| n.as_array_mut()) {
                notes.drain(..from.min(notes.len()));
            }
            doc.insert("notes_from".to_string(), serde_json::Value::from(from));
        }
        serde_json::to_value(JobDocument {
            job: view,
            document,
        })
        .map(|value| {
            output::resource_document_pages(
                &uri,
                value,
                max_bytes,
                &rest,
                &["document", "notes"],
                |kept| format!("{base}?from={}", from + kept),
            )
        })
    };
    output::off_runtime(document)
        .await
        .ok_or_else(|| ErrorData::internal_error("the document could not be prepared", None))?
        .map_err(|e| ErrorData::internal_error(format!("serialize: {e}"), None))
}

#[cfg(test)]
mod tests {
    // A resource read the database could not serve right now carries the retry hint the MCP
    // error layer turns into 503 with `Retry-After`; any other storage failure stays -32603
    // without it.
    #[test]
    fn an_unavailable_database_is_answered_with_the_retry_hint() {
        let busy = internal(StoreError::Database(sqlx::Error::PoolTimedOut));
        assert_eq!(busy.data.unwrap()["retryAfter"], 5);
        let broken = internal(StoreError::Database(sqlx::Error::RowNotFound));
        assert!(broken.data.is_none());
    }

    use super::*;

    #[test]
    fn cursors_round_trip_and_reject_junk() {
        for c in [
            Cursor::START,
            Cursor {
                section: Section::Notes,
                offset: 50,
            },
            Cursor {
                section: Section::Jobs,
                offset: 7,
            },
        ] {
            assert_eq!(Cursor::decode(&c.encode()), Some(c));
        }
        for junk in ["", "!!", "eDox", &URL_SAFE_NO_PAD.encode("n:-1")] {
            assert_eq!(Cursor::decode(junk), None, "{junk}");
        }
    }
}
