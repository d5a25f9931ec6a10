//! The audit log: who did what, with which client, when, and how it ended — never arguments,
//! results, tokens or passwords.
//!
//! Security events (sign-in, consent, code replay, refresh reuse, family revocation, …) are
//! written by [`Store::audit`] before the response is sent. Tool-call rows, the one kind written
//! on every MCP request, go through [`Store::audit_batched`]: while the server runs, a bounded
//! queue ([`AUDIT_QUEUE_CAPACITY`] rows) feeds one writer task ([`Store::start_audit_writer`])
//! that commits up to [`AUDIT_BATCH_MAX`] rows per transaction, each batch gathered for
//! [`AUDIT_GATHER`] after its first row. A full queue makes the caller
//! wait (back-pressure, never a dropped row); a graceful stop drains the queue
//! ([`AuditWriter::drain`]); a row offered after the writer stopped is written directly. A
//! `kill -9` can lose only the rows still queued, gathering or in the transaction being
//! committed (see docs/design-notes.md).

use std::sync::OnceLock;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::{Store, StoreError};
pub use crate::domain::audit::{Event, Outcome};

/// Most tool-call rows waiting for the writer; a caller finding the queue full waits for room.
pub const AUDIT_QUEUE_CAPACITY: usize = 1024;
/// Most rows the writer commits in one transaction.
pub const AUDIT_BATCH_MAX: usize = 256;
/// How often the writer tries a batch in a row (a try that finds the database busy, `database
/// is locked`, or failing ends in a rollback), waiting 50 ms, then twice as long before each
/// further try. A batch that fails every try is not dropped: its rows are kept
/// ([`AUDIT_KEPT_MAX`]) and tried again after [`AUDIT_RETRY_PAUSE`] or with the next batch.
const AUDIT_BATCH_TRIES: u32 = 5;
/// How long the writer lets a batch gather after its first row, unless it is full sooner,
/// holds a flush request ([`Store::flush_audit`], whose caller waits) or rows refused by the
/// database are waiting for another try:
/// under load, rows keep coming, and one transaction of many rows costs far less than many of
/// few (fewer commits, fewer pages written, fewer hand-offs to the thread that writes). It
/// bounds what a `kill -9` can lose beyond the queue (docs/design-notes.md, crash window).
pub const AUDIT_GATHER: Duration = Duration::from_millis(2);
/// How long the writer waits before it tries kept rows again when no new row comes.
const AUDIT_RETRY_PAUSE: Duration = Duration::from_secs(1);
/// Most rows the writer keeps for a later try while the database refuses them; beyond that
/// the oldest are given up on (logged with their count), so that memory stays bounded.
pub const AUDIT_KEPT_MAX: usize = AUDIT_QUEUE_CAPACITY;

/// One audit record to write.
#[derive(Debug, Clone)]
pub struct AuditEvent<'a> {
    /// What happened (the `event` column).
    pub event: Event,
    /// How it ended (the `outcome` column).
    pub outcome: Outcome,
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

impl AuditEvent<'_> {
    /// A record of `event` ending in `outcome`, with no account, client, subject, address or
    /// detail: the base that a record's literal fills in (`..AuditEvent::new(..)`).
    pub const fn new(event: Event, outcome: Outcome) -> AuditEvent<'static> {
        AuditEvent {
            event,
            outcome,
            account_id: None,
            client_id: None,
            subject: None,
            source_ip: None,
            detail: None,
        }
    }
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
    event: Event,
    outcome: Outcome,
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
            event: e.event,
            outcome: e.outcome,
            account_id: e.account_id.map(str::to_string),
            client_id: e.client_id.map(str::to_string),
            subject: e.subject.map(str::to_string),
            source_ip: e.source_ip.map(str::to_string),
            detail: e.detail.map(str::to_string),
        }
    }

    fn as_event(&self) -> AuditEvent<'_> {
        AuditEvent {
            event: self.event,
            outcome: self.outcome,
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
    /// Told of every record written or queued ([`Store::set_audit_listener`]).
    listener: OnceLock<std::sync::Arc<dyn AuditListener>>,
}

/// Told of every audit record once it is written or queued for the writer (the events sent
/// out, `crate::events`). `offer` runs on the request's path: it must only hand the record
/// on (a bounded queue), never wait or fail.
pub trait AuditListener: Send + Sync + 'static {
    /// One record, at `at` (Unix seconds).
    fn offer(&self, e: &AuditEvent<'_>, at: i64);
}

/// The running tool-call writer of a [`Store`]; [`AuditWriter::drain`] stops it.
#[derive(Debug)]
pub struct AuditWriter {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl AuditWriter {
    /// Stops taking rows and returns once every row queued (or kept after a refused batch)
    /// before the call is committed, or refused by the database through a last round of
    /// [`AUDIT_BATCH_TRIES`] tries (logged as lost). Rows offered afterwards are written
    /// directly by their callers.
    pub async fn drain(self) {
        let _ = self.stop.send(());
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "the audit writer failed");
        }
    }
}

/// The writer task: commits what the queue holds, up to [`AUDIT_BATCH_MAX`] rows per
/// transaction (with the rows kept from batches the database refused), until `stop` fires (or
/// its sender is dropped); kept rows are tried again every [`AUDIT_RETRY_PAUSE`] meanwhile.
/// Then it closes the queue, commits what is left and tries the kept rows a last time. The
/// queue is bounded and closed before the last loop, so that loop ends.
async fn write_batches(
    store: Store,
    mut rx: mpsc::Receiver<Queued>,
    mut stop: oneshot::Receiver<()>,
) {
    let mut batch = Vec::with_capacity(AUDIT_BATCH_MAX);
    let mut kept = Vec::new();
    loop {
        tokio::select! {
            n = rx.recv_many(&mut batch, AUDIT_BATCH_MAX) => {
                if n == 0 {
                    break;
                }
                // No gathering when a caller waits (a flush request), nor while rows are kept
                // because the database refused them: then each batch is tried at once, as
                // before gathering existed (the retries' back-off spaces the transactions
                // already; with gathering there, the read-only drill's first writes after the
                // file system became writable again were answered 503).
                let awaited = batch.iter().any(|q| matches!(q, Queued::Flush(_)));
                if !awaited && kept.is_empty() && batch.len() < AUDIT_BATCH_MAX {
                    tokio::time::sleep(AUDIT_GATHER).await;
                    while batch.len() < AUDIT_BATCH_MAX {
                        match rx.try_recv() {
                            Ok(queued) => batch.push(queued),
                            Err(_) => break,
                        }
                    }
                }
                store.commit_batch(&mut batch, &mut kept).await;
            }
            () = tokio::time::sleep(AUDIT_RETRY_PAUSE), if !kept.is_empty() => {
                store.commit_batch(&mut batch, &mut kept).await;
            }
            _ = &mut stop => break,
        }
    }
    rx.close();
    while rx.recv_many(&mut batch, AUDIT_BATCH_MAX).await > 0 {
        store.commit_batch(&mut batch, &mut kept).await;
    }
    if !kept.is_empty() {
        store.commit_batch(&mut batch, &mut kept).await;
    }
    if !kept.is_empty() {
        tracing::error!(
            rows = kept.len(),
            "tool-call audit records lost: the database refused them until the writer stopped"
        );
    }
}

const INSERT_AUDIT: &str = "INSERT INTO audit_events (at, event, outcome, account_id, client_id, subject, source_ip, detail, project_id) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";

/// The project an audit record concerns: the `project=ID` part of its detail, the convention
/// every writer follows (`credential=… project=ID duration_ms=N`); stored in the row's
/// `project_id` column, which the readable audit filters on.
pub fn project_in_detail(detail: Option<&str>) -> Option<&str> {
    detail?
        .split(' ')
        .find_map(|part| part.strip_prefix("project="))
        .filter(|p| !p.is_empty())
}

impl Store {
    /// Starts the tool-call writer (one per store; `None` when it already runs). From then on
    /// [`Store::audit_batched`] queues its rows. Must be called inside a Tokio runtime.
    pub fn start_audit_writer(&self) -> Option<AuditWriter> {
        let (tx, rx) = mpsc::channel(AUDIT_QUEUE_CAPACITY);
        self.audit_queue.tx.set(tx).ok()?;
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(write_batches(self.clone(), rx, stopped));
        Some(AuditWriter { stop, task })
    }

    /// Records a routine event — a tool call, resource read or prompt get, or a refresh-token
    /// rotation (`token_refreshed`, whose rotation itself is committed before the response):
    /// queued for the writer while it runs (waiting for room when the queue is full), written
    /// directly otherwise. Failures are logged, never returned: auditing never fails a request.
    pub async fn audit_batched(&self, e: AuditEvent<'_>, now: i64) {
        let Some(tx) = self.audit_queue.tx.get() else {
            return self.audit(e, now).await;
        };
        match tx.send(Queued::Row(QueuedEvent::new(&e, now))).await {
            Ok(()) => self.announce(&e, now),
            Err(mpsc::error::SendError(Queued::Row(row))) => {
                // The writer has stopped (the server is shutting down): write it here.
                self.audit(row.as_event(), row.at).await;
            }
            Err(_) => {}
        }
    }

    /// Sets the listener told of every record from now on ([`AuditListener`]); `false` when
    /// one is already set.
    pub fn set_audit_listener(&self, listener: std::sync::Arc<dyn AuditListener>) -> bool {
        self.audit_queue.listener.set(listener).is_ok()
    }

    fn announce(&self, e: &AuditEvent<'_>, at: i64) {
        if let Some(listener) = self.audit_queue.listener.get() {
            listener.offer(e, at);
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

    /// Commits the rows kept from earlier batches and those of `batch` in one transaction,
    /// trying [`AUDIT_BATCH_TRIES`] times; tells the flush requests of `batch`, and empties it.
    /// Rows the database refused every time stay in `kept` (at most [`AUDIT_KEPT_MAX`], the
    /// oldest given up on beyond that, logged) for the writer's next try.
    async fn commit_batch(&self, batch: &mut Vec<Queued>, kept: &mut Vec<QueuedEvent>) {
        let mut flushes = Vec::new();
        for queued in batch.drain(..) {
            match queued {
                Queued::Row(row) => kept.push(row),
                Queued::Flush(done) => flushes.push(done),
            }
        }
        if !kept.is_empty() {
            let mut wait = Duration::from_millis(50);
            for attempt in 1..=AUDIT_BATCH_TRIES {
                match self.insert_audit_rows(kept).await {
                    Ok(()) => {
                        kept.clear();
                        break;
                    }
                    Err(e) if attempt == AUDIT_BATCH_TRIES => {
                        tracing::error!(rows = kept.len(), error = %e, "could not write tool-call audit records; keeping them for a later try");
                    }
                    Err(e) => {
                        tracing::warn!(rows = kept.len(), attempt, error = %e, "tool-call audit batch failed; trying again");
                        tokio::time::sleep(wait).await;
                        wait *= 2;
                    }
                }
            }
            if kept.len() > AUDIT_KEPT_MAX {
                let lost = kept.len() - AUDIT_KEPT_MAX;
                kept.drain(..lost);
                tracing::error!(
                    rows = lost,
                    "tool-call audit records lost: more refused rows than the writer keeps"
                );
            }
        }
        for done in flushes {
            let _ = done.send(());
        }
    }

    /// Inserts `rows` in one write transaction; on an error the transaction is dropped, which
    /// rolls it back ([`Store::begin_write`]).
    async fn insert_audit_rows(&self, rows: &mut Vec<QueuedEvent>) -> Result<(), StoreError> {
        if self.backend == super::Backend::Sqlite {
            // In place first ([`super::in_place`]): the whole batch in one hand-off to a
            // blocking thread, holding the write turn; through the pool when not committed.
            let turn = self.write_turn().await?;
            let taken = std::mem::take(rows);
            let count = taken.len();
            let in_place = self
                .write_in_place(&turn, taken, |conn, rows| {
                    for row in rows {
                        let project = project_in_detail(row.detail.as_deref());
                        super::in_place::execute(
                            conn,
                            INSERT_AUDIT,
                            &[
                                &row.at,
                                &row.event.as_str(),
                                &row.outcome.as_str(),
                                &row.account_id,
                                &row.client_id,
                                &row.subject,
                                &row.source_ip,
                                &row.detail,
                                &project,
                            ],
                        )?;
                    }
                    Ok(())
                })
                .await;
            drop(turn);
            match in_place {
                Some((_, Some(()))) => return Ok(()),
                Some((taken, None)) => *rows = taken,
                None => {
                    // The rows went to a blocking task that never ran: the runtime is shutting
                    // down without a graceful stop (which drains the writer first).
                    tracing::error!(
                        rows = count,
                        "tool-call audit records lost: the runtime stopped before they were written"
                    );
                    return Ok(());
                }
            }
        }
        let mut tx = self.begin_write().await?;
        for row in rows {
            sqlx::query(INSERT_AUDIT)
                .bind(row.at)
                .bind(row.event.as_str())
                .bind(row.outcome.as_str())
                .bind(row.account_id.as_deref())
                .bind(row.client_id.as_deref())
                .bind(row.subject.as_deref())
                .bind(row.source_ip.as_deref())
                .bind(row.detail.as_deref())
                .bind(project_in_detail(row.detail.as_deref()))
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
            .bind(e.event.as_str())
            .bind(e.outcome.as_str())
            .bind(e.account_id)
            .bind(e.client_id)
            .bind(e.subject)
            .bind(e.source_ip)
            .bind(e.detail)
            .bind(project_in_detail(e.detail))
            .execute(&self.writer())
            .await?;
        self.announce(e, now);
        Ok(())
    }

    /// Writes a record, logging (not returning) a failure: auditing never fails a request.
    ///
    /// Every event but the routine ones ([`ROUTINE_EVENTS`]) is also logged at INFO as a
    /// structured line of target `gatehouse::audit`: the account and admin events (accounts,
    /// clients, keys, upstreams changed from the command line or the console, sign-ins, grants
    /// and revocations), with the event, outcome, account id, client id, address and detail;
    /// never the subject (a sign-in's subject is what was typed as the email, which may be a
    /// password typed into the wrong field) nor any secret.
    pub async fn audit(&self, e: AuditEvent<'_>, now: i64) {
        if !ROUTINE_EVENTS.contains(&e.event) {
            tracing::info!(
                target: "gatehouse::audit",
                event = e.event.as_str(),
                outcome = e.outcome.as_str(),
                account_id = e.account_id,
                client_id = e.client_id,
                source_ip = e.source_ip,
                detail = e.detail,
                "audit event"
            );
        }
        if let Err(err) = self.record_audit(&e, now).await {
            tracing::error!(event = e.event.as_str(), error = %err, "could not write audit record");
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
        .fetch_all(&self.pool())
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
        .fetch_all(&self.pool())
        .await?)
    }

    /// What one client did with the account, newest first (at most `limit`): its tool calls,
    /// resource reads and prompt gets, and the account's authorization events about it
    /// (`consent` granted or denied, `consent_revoked`, `family_revoked`); `event` tells them
    /// apart.
    pub async fn client_activity(
        &self,
        account_id: &str,
        client_id: &str,
        limit: i64,
    ) -> Result<Vec<AuditRecord>, StoreError> {
        // The calls still queued for the batched writer are shown too.
        self.flush_audit().await;
        Ok(sqlx::query_as(
            "SELECT at, event, outcome, account_id, client_id, subject, source_ip, detail \
             FROM audit_events WHERE account_id = $1 AND client_id = $2 \
             AND event IN ('tool_call', 'resource_read', 'prompt_get', 'consent', 'consent_changed', 'consent_revoked', 'family_revoked') \
             ORDER BY id DESC LIMIT $3",
        )
        .bind(account_id)
        .bind(client_id)
        .bind(limit)
        .fetch_all(&self.pool())
        .await?)
    }
}

/// The events too frequent for a log line of their own (each request already has its line):
/// tool calls, resource reads, prompt gets and refresh-token rotations.
pub const ROUTINE_EVENTS: [Event; 4] = [
    Event::ToolCall,
    Event::ResourceRead,
    Event::PromptGet,
    Event::TokenRefreshed,
];

#[cfg(test)]
mod texts_in_sql {
    use super::Event;

    /// The events a query text names: the quoted words of each `IN` list on the `event`
    /// column and the quoted word each equality test on it compares with.
    fn events_named(sql: &str) -> Vec<&str> {
        let mut words = Vec::new();
        for (at, _) in sql.match_indices("event IN (") {
            let rest = &sql[at + "event IN (".len()..];
            let list = &rest[..rest.find(')').unwrap_or(rest.len())];
            words.extend(list.split('\'').skip(1).step_by(2));
        }
        for (at, _) in sql.match_indices("event = '") {
            let rest = &sql[at + "event = '".len()..];
            words.extend(rest.split('\'').next());
        }
        words
    }

    #[test]
    fn every_event_named_in_the_stores_sql_is_an_event_this_release_writes() {
        // A misspelt or renamed event in a query's text would silently match no row.
        let sources = [
            include_str!("audit.rs"),
            include_str!("audit_query.rs"),
            include_str!("quotas.rs"),
        ];
        let mut seen = 0;
        for source in sources {
            // The library's text, not its tests (this one's included).
            let code = source.split("#[cfg(test)]").next().unwrap_or(source);
            for word in events_named(code) {
                assert!(Event::parse(word).is_some(), "{word:?} is not an Event");
                seen += 1;
            }
        }
        assert!(seen >= 20, "only {seen} events found in the SQL texts");
    }
}
