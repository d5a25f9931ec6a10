//! The audit log: who did what, with which client, when, and how it ended — never arguments,
//! results, tokens or passwords.
//!
//! Security events (sign-in, consent, code replay, refresh reuse, family revocation, …) are
//! written by [`Store::audit`] before the response is sent. Tool-call rows, the one kind written
//! on every MCP request, go through [`Store::audit_tool_call`]: while the server runs, a bounded
//! queue ([`AUDIT_QUEUE_CAPACITY`] rows) feeds one writer task ([`Store::start_audit_writer`])
//! that commits up to [`AUDIT_BATCH_MAX`] rows per transaction. A full queue makes the caller
//! wait (back-pressure, never a dropped row); a graceful stop drains the queue
//! ([`AuditWriter::drain`]); a row offered after the writer stopped is written directly. A
//! `kill -9` can lose only the rows still queued or in the transaction being committed (see
//! docs/architecture.md).

use std::sync::OnceLock;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::{Store, StoreError};

/// Most tool-call rows waiting for the writer; a caller finding the queue full waits for room.
pub const AUDIT_QUEUE_CAPACITY: usize = 1024;
/// Most rows the writer commits in one transaction.
pub const AUDIT_BATCH_MAX: usize = 256;
/// How often the writer tries a batch before it gives up on it (logging how many rows it lost),
/// waiting 50 ms, then twice as long before each further try.
const AUDIT_BATCH_TRIES: u32 = 5;

/// One audit record to write.
#[derive(Debug, Clone, Default)]
pub struct AuditEvent<'a> {
    /// What happened, e.g. `signin`, `consent`, `client_registered`, `code_redeemed`,
    /// `code_replay`, `refresh_reuse`, `family_revoked`, `tool_call`.
    pub event: &'a str,
    /// `success`, `failure`, `denied`, …
    pub outcome: &'a str,
    /// The account concerned, when known.
    pub account_id: Option<&'a str>,
    /// The OAuth client concerned, when known.
    pub client_id: Option<&'a str>,
    /// What it was about: a tool name, a project id, a family id.
    pub subject: Option<&'a str>,
    /// The caller's IP address.
    pub source_ip: Option<&'a str>,
    /// Short non-secret detail (a reason, a duration in ms).
    pub detail: Option<&'a str>,
}

/// An audit record read back.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AuditRecord {
    /// Unix seconds.
    pub at: i64,
    /// See [`AuditEvent::event`].
    pub event: String,
    /// See [`AuditEvent::outcome`].
    pub outcome: String,
    /// See [`AuditEvent::account_id`].
    pub account_id: Option<String>,
    /// See [`AuditEvent::client_id`].
    pub client_id: Option<String>,
    /// See [`AuditEvent::subject`].
    pub subject: Option<String>,
    /// See [`AuditEvent::source_ip`].
    pub source_ip: Option<String>,
    /// See [`AuditEvent::detail`].
    pub detail: Option<String>,
}

/// An [`AuditEvent`] that owns its text, so that it can wait in the writer's queue.
#[derive(Debug, Clone)]
struct QueuedEvent {
    at: i64,
    event: String,
    outcome: String,
    account_id: Option<String>,
    client_id: Option<String>,
    subject: Option<String>,
    source_ip: Option<String>,
    detail: Option<String>,
}

impl QueuedEvent {
    fn new(e: &AuditEvent<'_>, at: i64) -> QueuedEvent {
        QueuedEvent {
            at,
            event: e.event.to_string(),
            outcome: e.outcome.to_string(),
            account_id: e.account_id.map(str::to_string),
            client_id: e.client_id.map(str::to_string),
            subject: e.subject.map(str::to_string),
            source_ip: e.source_ip.map(str::to_string),
            detail: e.detail.map(str::to_string),
        }
    }

    fn as_event(&self) -> AuditEvent<'_> {
        AuditEvent {
            event: &self.event,
            outcome: &self.outcome,
            account_id: self.account_id.as_deref(),
            client_id: self.client_id.as_deref(),
            subject: self.subject.as_deref(),
            source_ip: self.source_ip.as_deref(),
            detail: self.detail.as_deref(),
        }
    }
}

/// What the writer's queue carries: rows, and requests to be told once every row queued before
/// them is committed.
enum Queued {
    Row(QueuedEvent),
    Flush(oneshot::Sender<()>),
}

/// The sending end of the tool-call writer's queue, shared by every clone of a [`Store`]; empty
/// until [`Store::start_audit_writer`] runs.
#[derive(Default)]
pub(crate) struct AuditQueue {
    tx: OnceLock<mpsc::Sender<Queued>>,
}

/// The running tool-call writer of a [`Store`]; [`AuditWriter::drain`] stops it.
#[derive(Debug)]
pub struct AuditWriter {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl AuditWriter {
    /// Stops taking rows and returns once every row queued before the call is committed (or its
    /// batch given up on after [`AUDIT_BATCH_TRIES`] tries, logged). Rows offered afterwards are
    /// written directly by their callers.
    pub async fn drain(self) {
        let _ = self.stop.send(());
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "the audit writer failed");
        }
    }
}

/// The writer task: commits what the queue holds, up to [`AUDIT_BATCH_MAX`] rows per
/// transaction, until `stop` fires (or its sender is dropped); then closes the queue and commits
/// what is left. The queue is bounded and closed before the last loop, so that loop ends.
async fn write_batches(
    store: Store,
    mut rx: mpsc::Receiver<Queued>,
    mut stop: oneshot::Receiver<()>,
) {
    let mut batch = Vec::with_capacity(AUDIT_BATCH_MAX);
    loop {
        tokio::select! {
            n = rx.recv_many(&mut batch, AUDIT_BATCH_MAX) => {
                if n == 0 {
                    return;
                }
                store.commit_batch(&mut batch).await;
            }
            _ = &mut stop => break,
        }
    }
    rx.close();
    while rx.recv_many(&mut batch, AUDIT_BATCH_MAX).await > 0 {
        store.commit_batch(&mut batch).await;
    }
}

const INSERT_AUDIT: &str = "INSERT INTO audit_events (at, event, outcome, account_id, client_id, subject, source_ip, detail) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";

impl Store {
    /// Starts the tool-call writer (one per store; `None` when it already runs). From then on
    /// [`Store::audit_tool_call`] queues its rows. Must be called inside a Tokio runtime.
    pub fn start_audit_writer(&self) -> Option<AuditWriter> {
        let (tx, rx) = mpsc::channel(AUDIT_QUEUE_CAPACITY);
        self.audit_queue.tx.set(tx).ok()?;
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(write_batches(self.clone(), rx, stopped));
        Some(AuditWriter { stop, task })
    }

    /// Records a tool call (or a resource read or prompt get): queued for the writer while it runs (waiting
    /// for room when the queue is full), written directly otherwise. Failures are logged, never
    /// returned: auditing never fails a request.
    pub async fn audit_tool_call(&self, e: AuditEvent<'_>, now: i64) {
        let Some(tx) = self.audit_queue.tx.get() else {
            return self.audit(e, now).await;
        };
        if let Err(mpsc::error::SendError(Queued::Row(row))) =
            tx.send(Queued::Row(QueuedEvent::new(&e, now))).await
        {
            // The writer has stopped (the server is shutting down): write it here.
            self.audit(row.as_event(), row.at).await;
        }
    }

    /// Returns once every tool-call row queued before the call is committed (at once when no
    /// writer runs).
    pub async fn flush_audit(&self) {
        if let Some(tx) = self.audit_queue.tx.get() {
            let (done, committed) = oneshot::channel();
            if tx.send(Queued::Flush(done)).await.is_ok() {
                let _ = committed.await;
            }
        }
    }

    /// Commits the rows of `batch` in one transaction, tells the flush requests in it, and
    /// empties it.
    async fn commit_batch(&self, batch: &mut Vec<Queued>) {
        let rows: Vec<&QueuedEvent> = batch
            .iter()
            .filter_map(|q| match q {
                Queued::Row(row) => Some(row),
                Queued::Flush(_) => None,
            })
            .collect();
        if !rows.is_empty() {
            let mut wait = Duration::from_millis(50);
            for attempt in 1..=AUDIT_BATCH_TRIES {
                match self.insert_audit_rows(&rows).await {
                    Ok(()) => break,
                    Err(e) if attempt == AUDIT_BATCH_TRIES => {
                        tracing::error!(rows = rows.len(), error = %e, "could not write tool-call audit records");
                    }
                    Err(e) => {
                        tracing::warn!(rows = rows.len(), attempt, error = %e, "tool-call audit batch failed; trying again");
                        tokio::time::sleep(wait).await;
                        wait *= 2;
                    }
                }
            }
        }
        for queued in batch.drain(..) {
            if let Queued::Flush(done) = queued {
                let _ = done.send(());
            }
        }
    }

    async fn insert_audit_rows(&self, rows: &[&QueuedEvent]) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        for row in rows {
            sqlx::query(INSERT_AUDIT)
                .bind(row.at)
                .bind(&row.event)
                .bind(&row.outcome)
                .bind(row.account_id.as_deref())
                .bind(row.client_id.as_deref())
                .bind(row.subject.as_deref())
                .bind(row.source_ip.as_deref())
                .bind(row.detail.as_deref())
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Appends one record. A failure to audit is logged by the caller, never shown to a client.
    pub async fn record_audit(&self, e: &AuditEvent<'_>, now: i64) -> Result<(), StoreError> {
        sqlx::query(INSERT_AUDIT)
            .bind(now)
            .bind(e.event)
            .bind(e.outcome)
            .bind(e.account_id)
            .bind(e.client_id)
            .bind(e.subject)
            .bind(e.source_ip)
            .bind(e.detail)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// Writes a record, logging (not returning) a failure: auditing never fails a request.
    pub async fn audit(&self, e: AuditEvent<'_>, now: i64) {
        if let Err(err) = self.record_audit(&e, now).await {
            tracing::error!(event = e.event, error = %err, "could not write audit record");
        }
    }

    /// The most recent records, newest first (at most `limit`). Tool-call rows still queued are
    /// committed first, so the answer holds every call answered before this one was made.
    pub async fn recent_audit(&self, limit: i64) -> Result<Vec<AuditRecord>, StoreError> {
        self.flush_audit().await;
        Ok(sqlx::query_as(
            "SELECT at, event, outcome, account_id, client_id, subject, source_ip, detail \
             FROM audit_events ORDER BY id DESC LIMIT $1",
        )
        .bind(limit)
        .fetch_all(self.pool())
        .await?)
    }

    /// When each client last called a tool, read a resource or got a prompt for the account:
    /// `(client_id, unix seconds)`.
    pub async fn last_tool_use_by_client(
        &self,
        account_id: &str,
    ) -> Result<Vec<(String, i64)>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT client_id, MAX(at) AS last_at FROM audit_events \
             WHERE account_id = $1 AND event IN ('tool_call', 'resource_read', 'prompt_get') \
             AND client_id IS NOT NULL GROUP BY client_id",
        )
        .bind(account_id)
        .fetch_all(self.pool())
        .await?)
    }

    /// The tool calls, resource reads and prompt gets one client made for the account, newest
    /// first (at most `limit`); `event` tells them apart.
    pub async fn client_activity(
        &self,
        account_id: &str,
        client_id: &str,
        limit: i64,
    ) -> Result<Vec<AuditRecord>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT at, event, outcome, account_id, client_id, subject, source_ip, detail \
             FROM audit_events WHERE account_id = $1 AND client_id = $2 \
             AND event IN ('tool_call', 'resource_read', 'prompt_get') \
             ORDER BY id DESC LIMIT $3",
        )
        .bind(account_id)
        .bind(client_id)
        .bind(limit)
        .fetch_all(self.pool())
        .await?)
    }
}
