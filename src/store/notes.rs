//! Notes (a per-project knowledge base with full-text search) and background jobs.
//!
//! These are the domain services behind the MCP tools, written so the console pages can call
//! them too: every method takes ids that the caller has already checked against the account's
//! memberships ([`Store::membership`]); none of them checks access itself.

use sqlx::FromRow;
use sqlx::any::AnyRow;

use super::JsonStrings;

use super::{Store, StoreError, new_id};
use crate::domain::notes::{JobKind, JobStatus, full_text_query};
use crate::domain::principal::Principal;

/// One note.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Note {
    /// Note id (UUID text).
    pub id: String,
    /// The project it belongs to.
    pub project_id: String,
    /// Short title.
    pub title: String,
    /// Markdown or plain text.
    pub body: String,
    /// Labels, in the order given.
    #[sqlx(try_from = "JsonStrings")]
    pub tags: Vec<String>,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds.
    pub updated_at: i64,
}

/// What a new note holds.
#[derive(Debug, Clone, Copy)]
pub struct NewNote<'a> {
    /// The project it goes into.
    pub project_id: &'a str,
    /// Who writes it (kept for the record; not shown to other members).
    pub author_account_id: &'a str,
    /// Short title.
    pub title: &'a str,
    /// Text.
    pub body: &'a str,
    /// Labels.
    pub tags: &'a [String],
}

/// A change to a note: `None` keeps the current value.
#[derive(Debug, Clone, Copy, Default)]
pub struct NotePatch<'a> {
    /// New title.
    pub title: Option<&'a str>,
    /// New text.
    pub body: Option<&'a str>,
    /// New labels (replace the old list).
    pub tags: Option<&'a [String]>,
}

/// A full-text search hit, best first.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct NoteHit {
    /// Note id.
    pub id: String,
    /// Note title.
    pub title: String,
    /// The matching passage of the body, matched words marked by the engine.
    pub snippet: String,
}

/// A note as listed among resources (no body).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct NoteRef {
    /// Note id.
    pub id: String,
    /// The project it belongs to.
    pub project_id: String,
    /// Note title.
    pub title: String,
    /// Unix seconds.
    pub updated_at: i64,
}

/// A background job.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Job {
    /// Job id (UUID text).
    pub id: String,
    /// What it does.
    #[sqlx(try_from = "String")]
    pub kind: JobKind,
    /// Where it is.
    #[sqlx(try_from = "String")]
    pub status: JobStatus,
    /// The project it works on.
    pub project_id: String,
    /// Who started it.
    pub account_id: String,
    /// The OAuth client that started it, if any.
    pub client_id: Option<String>,
    /// The finished document (JSON text), once completed.
    pub result: Option<String>,
    /// Why it failed, once failed.
    pub error: Option<String>,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds.
    pub finished_at: Option<i64>,
}

const NOTE_COLUMNS: &str = "id, project_id, title, body, tags, created_at, updated_at";
const JOB_COLUMNS: &str =
    "id, kind, status, project_id, account_id, client_id, result, error, created_at, finished_at";

/// The note `note_id` of `project_id`, read through `executor` (the pool or a transaction).
async fn select_note<'e>(
    executor: impl sqlx::Executor<'e, Database = sqlx::Any>,
    project_id: &str,
    note_id: &str,
) -> Result<Option<Note>, StoreError> {
    Ok(sqlx::query_as(&format!(
        "SELECT {NOTE_COLUMNS} FROM notes WHERE project_id = $1 AND id = $2"
    ))
    .bind(project_id)
    .bind(note_id)
    .fetch_optional(executor)
    .await?)
}

fn tags_to_json(tags: &[String]) -> String {
    serde_json::to_string(tags).unwrap_or_else(|_| "[]".to_string())
}

impl Store {
    /// Stores a new note and returns it.
    pub async fn create_note(&self, new: &NewNote<'_>, now: i64) -> Result<Note, StoreError> {
        let id = new_id();
        sqlx::query(
            "INSERT INTO notes (id, project_id, author_account_id, title, body, tags, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $7)",
        )
        .bind(&id)
        .bind(new.project_id)
        .bind(new.author_account_id)
        .bind(new.title)
        .bind(new.body)
        .bind(tags_to_json(new.tags))
        .bind(now)
        .execute(&self.writer())
        .await?;
        Ok(Note {
            id,
            project_id: new.project_id.to_string(),
            title: new.title.to_string(),
            body: new.body.to_string(),
            tags: new.tags.to_vec(),
            created_at: now,
            updated_at: now,
        })
    }

    /// The note `note_id` of `project_id`; `None` if there is none (a note id of another project
    /// is not found either).
    pub async fn note(&self, project_id: &str, note_id: &str) -> Result<Option<Note>, StoreError> {
        select_note(&self.pool(), project_id, note_id).await
    }

    /// Applies `patch` to a note and returns the result; `None` if there is no such note.
    pub async fn update_note(
        &self,
        project_id: &str,
        note_id: &str,
        patch: &NotePatch<'_>,
        now: i64,
    ) -> Result<Option<Note>, StoreError> {
        let mut tx = self.begin_write().await?;
        let Some(mut note) = select_note(&mut *tx, project_id, note_id).await? else {
            return Ok(None);
        };
        if let Some(title) = patch.title {
            note.title = title.to_string();
        }
        if let Some(body) = patch.body {
            note.body = body.to_string();
        }
        if let Some(tags) = patch.tags {
            note.tags = tags.to_vec();
        }
        note.updated_at = now;
        sqlx::query(
            "UPDATE notes SET title = $1, body = $2, tags = $3, updated_at = $4 \
             WHERE project_id = $5 AND id = $6",
        )
        .bind(&note.title)
        .bind(&note.body)
        .bind(tags_to_json(&note.tags))
        .bind(now)
        .bind(project_id)
        .bind(note_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(note))
    }

    /// Full-text search in one project's notes (title, body and tags), most relevant first, at
    /// most `limit` hits. Every word of `query` must match; punctuation and search operators in
    /// it are ignored (see [`full_text_query`]), so no query is an error. Ranking and snippets
    /// come from the engine (FTS5 bm25 / `PostgreSQL` `ts_rank`).
    pub async fn search_notes(
        &self,
        project_id: &str,
        query: &str,
        limit: i64,
    ) -> Result<Vec<NoteHit>, StoreError> {
        self.search_notes_from(project_id, query, 0, limit).await
    }

    /// Like [`Store::search_notes`], skipping the first `offset` hits. The order is total
    /// (rank, then note id), so consecutive pages neither repeat nor skip a hit while the
    /// notes do not change.
    pub async fn search_notes_from(
        &self,
        project_id: &str,
        query: &str,
        offset: i64,
        limit: i64,
    ) -> Result<Vec<NoteHit>, StoreError> {
        let Some(fts) = full_text_query(query) else {
            return Ok(Vec::new());
        };
        // Bounded concurrency: ranking and snippets can be slow over large notes.
        let _permit = self
            .searches()
            .acquire_owned()
            .await
            .map_err(|_| StoreError::Unavailable(super::Unavailable::Closed))?;
        Ok(sqlx::query_as(self.dialect().search_notes_sql())
            .bind(project_id)
            .bind(fts)
            .bind(limit)
            .bind(offset)
            .fetch_all(&self.pool())
            .await?)
    }

    /// A project's most recently changed notes, newest first (at most `limit`; no bodies).
    pub async fn recent_notes(
        &self,
        project_id: &str,
        limit: i64,
    ) -> Result<Vec<NoteRef>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT id, project_id, title, updated_at FROM notes WHERE project_id = $1 \
             ORDER BY updated_at DESC, id LIMIT $2",
        )
        .bind(project_id)
        .bind(limit)
        .fetch_all(&self.pool())
        .await?)
    }

    /// How many notes a project holds.
    pub async fn count_notes(&self, project_id: &str) -> Result<i64, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT COUNT(*) AS n FROM notes WHERE project_id = $1")
                .bind(project_id)
                .fetch_one(&self.pool())
                .await?,
        )
    }

    /// Every note of a project, oldest first (for exports).
    pub async fn notes_of_project(&self, project_id: &str) -> Result<Vec<Note>, StoreError> {
        Ok(sqlx::query_as(&format!(
            "SELECT {NOTE_COLUMNS} FROM notes WHERE project_id = $1 ORDER BY created_at, id"
        ))
        .bind(project_id)
        .fetch_all(&self.pool())
        .await?)
    }

    /// One page of the notes in the active projects `principal` reaches (see
    /// [`Store::reachable_projects`]), in a stable order (project creation, then note
    /// creation).
    pub async fn reachable_notes(
        &self,
        principal: &Principal,
        offset: i64,
        limit: i64,
    ) -> Result<Vec<NoteRef>, StoreError> {
        self.reachable_page(
            "notes",
            "id, project_id, title, updated_at",
            "p.created_at, p.id, t.created_at, t.id",
            principal,
            offset,
            limit,
        )
        .await
    }

    /// One page of the rows of `table` (alias `t`, with a `project_id`) in the active projects
    /// `principal` reaches (see [`Store::reachable_projects`]): `columns` (plain names) read,
    /// in `order`.
    async fn reachable_page<R>(
        &self,
        table: &str,
        columns: &str,
        order: &str,
        principal: &Principal,
        offset: i64,
        limit: i64,
    ) -> Result<Vec<R>, StoreError>
    where
        R: for<'r> FromRow<'r, AnyRow> + Send + Unpin,
    {
        let columns = columns
            .split(", ")
            .map(|c| format!("t.{c} AS {c}"))
            .collect::<Vec<_>>()
            .join(", ");
        Ok(sqlx::query_as(&format!(
            "SELECT {columns} FROM {table} t \
             JOIN memberships m ON m.project_id = t.project_id \
             JOIN projects p ON p.id = t.project_id \
             WHERE m.account_id = $1 AND p.status = 'active' \
             AND ($4 IS NULL OR replace($4, '\"' || p.id || '\"', '') <> $4) \
             ORDER BY {order} LIMIT $2 OFFSET $3"
        ))
        .bind(&principal.account_id)
        .bind(limit)
        .bind(offset)
        .bind(principal.reach.limited_to())
        .fetch_all(&self.pool())
        .await?)
    }

    /// Records a new pending job and returns it.
    pub async fn create_job(
        &self,
        kind: JobKind,
        project_id: &str,
        account_id: &str,
        client_id: Option<&str>,
        now: i64,
    ) -> Result<Job, StoreError> {
        let id = new_id();
        sqlx::query(
            "INSERT INTO jobs (id, kind, status, project_id, account_id, client_id, created_at, updated_at) \
             VALUES ($1, $2, 'pending', $3, $4, $5, $6, $6)",
        )
        .bind(&id)
        .bind(kind.as_str())
        .bind(project_id)
        .bind(account_id)
        .bind(client_id)
        .bind(now)
        .execute(&self.writer())
        .await?;
        Ok(Job {
            id,
            kind,
            status: JobStatus::Pending,
            project_id: project_id.to_string(),
            account_id: account_id.to_string(),
            client_id: client_id.map(str::to_string),
            result: None,
            error: None,
            created_at: now,
            finished_at: None,
        })
    }

    /// The job `job_id`, if it exists. Callers check that the account may see its project.
    pub async fn job(&self, job_id: &str) -> Result<Option<Job>, StoreError> {
        Ok(
            sqlx::query_as(&format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = $1"))
                .bind(job_id)
                .fetch_optional(&self.pool())
                .await?,
        )
    }

    /// One page of the jobs of the active projects `principal` reaches (see
    /// [`Store::reachable_projects`]), newest first.
    pub async fn reachable_jobs(
        &self,
        principal: &Principal,
        offset: i64,
        limit: i64,
    ) -> Result<Vec<Job>, StoreError> {
        self.reachable_page(
            "jobs",
            JOB_COLUMNS,
            "t.created_at DESC, t.id",
            principal,
            offset,
            limit,
        )
        .await
    }

    /// Moves a pending job to running; `false` if it was not pending (another worker has it).
    pub async fn start_job(&self, job_id: &str, now: i64) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE jobs SET status = 'running', updated_at = $1 WHERE id = $2 AND status = 'pending'",
        )
        .bind(now)
        .bind(job_id)
        .execute(&self.writer())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Finishes a running job with its document or the reason it failed.
    pub async fn finish_job(
        &self,
        job_id: &str,
        outcome: Result<&str, &str>,
        now: i64,
    ) -> Result<(), StoreError> {
        let (status, result, error) = match outcome {
            Ok(doc) => (JobStatus::Completed, Some(doc), None),
            Err(why) => (JobStatus::Failed, None, Some(why)),
        };
        sqlx::query(
            "UPDATE jobs SET status = $1, result = $2, error = $3, updated_at = $4, finished_at = $4 \
             WHERE id = $5 AND status = 'running'",
        )
        .bind(status.as_str())
        .bind(result)
        .bind(error)
        .bind(now)
        .bind(job_id)
        .execute(&self.writer())
        .await?;
        Ok(())
    }

    /// Takes back jobs that no worker finished: pending or running ones untouched since
    /// `stale_before` (Unix seconds) — their instance stopped — are put back to pending and run
    /// here. The conditional update lets only one instance take each job. Returns how many ran.
    pub async fn recover_stale_jobs(
        &self,
        stale_before: i64,
        now: i64,
    ) -> Result<usize, StoreError> {
        let ids: Vec<String> = sqlx::query_scalar(
            "UPDATE jobs SET status = 'pending', updated_at = $2 \
             WHERE status IN ('pending', 'running') AND updated_at < $1 RETURNING id",
        )
        .bind(stale_before)
        .bind(now)
        .fetch_all(&self.writer())
        .await?;
        for id in &ids {
            tracing::warn!(job_id = %id, "resuming a background job left unfinished");
            self.run_export_job(id).await?;
        }
        Ok(ids.len())
    }

    /// Runs an export job to its end: the project's notes as one JSON document
    /// `{project_id, exported_at, notes: [...]}` stored on the job. Meant to be spawned after
    /// [`Store::create_job`]; a job another worker already started is left alone.
    pub async fn run_export_job(&self, job_id: &str) -> Result<(), StoreError> {
        let started = super::now();
        if !self.start_job(job_id, started).await? {
            return Ok(());
        }
        let Some(job) = self.job(job_id).await? else {
            return Ok(());
        };
        let outcome = match self.notes_of_project(&job.project_id).await {
            Ok(notes) => {
                let doc = serde_json::json!({
                    "project_id": job.project_id,
                    "exported_at": started,
                    "notes": notes.iter().map(|n| serde_json::json!({
                        "id": n.id,
                        "title": n.title,
                        "body": n.body,
                        "tags": n.tags,
                        "created_at": n.created_at,
                        "updated_at": n.updated_at,
                    })).collect::<Vec<_>>(),
                });
                Ok(doc.to_string())
            }
            Err(e) => {
                tracing::error!(job_id, error = %e, "export job failed");
                Err("the notes could not be read; start a new export".to_string())
            }
        };
        self.finish_job(
            job_id,
            outcome.as_deref().map_err(String::as_str),
            super::now(),
        )
        .await
    }
}
