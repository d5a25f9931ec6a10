//! What tools answer and resources hold about one project, note or job: the JSON shapes
//! (with their JSON Schema for `outputSchema`) shared by `tools/*` and [`super::resources`],
//! so a resource never reaches into a tool's module for them.

use schemars::JsonSchema;
use serde::Serialize;

use crate::config::Config;
use crate::domain::notes::ResourceUri;
use crate::store::notes::{Job, Note};
use crate::store::projects::ProjectMembership;

/// One project in detail (also the content of the project resource).
#[derive(Debug, Serialize, JsonSchema)]
pub struct ProjectView {
    /// Project id.
    pub id: String,
    /// Project name.
    pub name: String,
    /// The caller's role: `read` or `write`.
    pub role: String,
    /// When it was created (Unix seconds).
    pub created_at: i64,
    /// How many notes it holds.
    pub note_count: i64,
    /// Where a person opens the project in the Gatehouse console.
    pub console_url: String,
    /// MCP resource URI of the project.
    pub uri: String,
}

impl ProjectView {
    /// The view of `m` with its note count.
    pub fn new(config: &Config, m: &ProjectMembership, note_count: i64) -> Self {
        ProjectView {
            id: m.project_id.clone(),
            name: m.name.clone(),
            role: m.role.as_str().to_string(),
            created_at: m.created_at,
            note_count,
            console_url: format!("{}/projects/{}", config.frontend_url, m.project_id),
            uri: ResourceUri::project(&m.project_id),
        }
    }
}

/// One note (also the content of the note resource).
#[derive(Debug, Serialize, JsonSchema)]
pub struct NoteView {
    /// Note id.
    pub id: String,
    /// The project it belongs to.
    pub project_id: String,
    /// Title.
    pub title: String,
    /// Text.
    pub body: String,
    /// Labels.
    pub tags: Vec<String>,
    /// When it was created (Unix seconds).
    pub created_at: i64,
    /// When it last changed (Unix seconds).
    pub updated_at: i64,
    /// MCP resource URI of the note.
    pub uri: String,
}

impl From<Note> for NoteView {
    fn from(n: Note) -> Self {
        NoteView {
            uri: ResourceUri::note(&n.project_id, &n.id),
            id: n.id,
            project_id: n.project_id,
            title: n.title,
            body: n.body,
            tags: n.tags,
            created_at: n.created_at,
            updated_at: n.updated_at,
        }
    }
}

/// A job's state (also the content of the job resource, with its document once finished).
#[derive(Debug, Serialize, JsonSchema)]
pub struct JobView {
    /// What the job does, e.g. `export`.
    pub kind: String,
    /// Job id.
    pub id: String,
    /// `pending`, `running`, `completed` or `failed`.
    pub status: String,
    /// The project it works on.
    pub project_id: String,
    /// When it was started (Unix seconds).
    pub created_at: i64,
    /// When it finished (Unix seconds), once it has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<i64>,
    /// How many notes the export holds, once completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note_count: Option<i64>,
    /// Why it failed, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// MCP resource URI of the job; reading it returns the finished document.
    pub resource: String,
}

impl From<&Job> for JobView {
    fn from(job: &Job) -> Self {
        let note_count = job
            .result
            .as_deref()
            .and_then(|doc| serde_json::from_str::<serde_json::Value>(doc).ok())
            .and_then(|doc| doc["notes"].as_array().map(|n| n.len() as i64));
        JobView {
            kind: job.kind.to_string(),
            id: job.id.clone(),
            status: job.status.to_string(),
            project_id: job.project_id.clone(),
            created_at: job.created_at,
            finished_at: job.finished_at,
            note_count,
            error: job.error.clone(),
            resource: ResourceUri::job(job.kind, &job.id),
        }
    }
}
