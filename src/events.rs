//! Events out (issue 38 part 6; the seeds send metadata-only MCP analytics events to an
//! external service): with `GATEHOUSE_EVENTS_URL` set, every audit record is also `POST`ed
//! there, in batches of newline-delimited JSON (`Content-Type: application/x-ndjson`, one
//! [`OutEvent`] per line), with `Authorization: Bearer GATEHOUSE_EVENTS_TOKEN` when set.
//!
//! - **Metadata only**: an event carries what the audit row does — when, what, outcome,
//!   account, client, subject (tool name, URI template, prompt), project, the credential's
//!   kind and the duration — never arguments, results, tokens, secrets, emails or addresses
//!   (the audit keeps none of the first four; the last two are left out here).
//! - **Never in the way**: the request that produced the event only puts it in a bounded
//!   queue ([`Settings::queue`] events); a full queue drops the event and counts it.
//! - **Batches**: one sender task takes up to [`Settings::batch`] events, gathered for at most
//!   [`Settings::gather`], and posts them.
//! - **Retries**: a network error, a timeout, `408`, `429` or `5xx` is tried again after
//!   [`Settings::first_backoff`], doubling each time, [`Settings::tries`] tries in all; then
//!   the batch is dropped and counted. Any other answer outside `2xx` drops it at once
//!   (counted: the receiver refuses it).
//! - **Counted**: `gatehouse_events_sent_total`, and `gatehouse_events_dropped_total` with
//!   `reason` = `queue_full`, `undeliverable` or `refused` (Prometheus, and
//!   [`EventsOut::dropped`]).
//! - **Stop**: a graceful stop sends what is queued with one try each, within
//!   [`Settings::drain`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

use crate::config::Config;
use crate::store::Store;
use crate::store::audit::{AuditEvent, AuditListener, project_in_detail};

/// Metric: events delivered.
pub const EVENTS_SENT: &str = "gatehouse_events_sent_total";
/// Metric: events dropped, by `reason`.
pub const EVENTS_DROPPED: &str = "gatehouse_events_dropped_total";

/// One event as sent: one line of a batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutEvent {
    /// `serverInfo.name` of the sending server (`GATEHOUSE_SERVER_NAME`).
    pub server: Arc<str>,
    /// When it happened, Unix seconds.
    pub at: i64,
    /// What happened (`tool_call`, `resource_read`, `prompt_get`, `signin`, `consent`, …).
    pub event: String,
    /// How it ended (`success`, `not_found`, `over_quota`, …).
    pub outcome: String,
    /// The account concerned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account_id: Option<String>,
    /// The OAuth client concerned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// What it was about: the tool's name, the resource's URI template, the prompt's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// The project concerned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    /// The kind of credential used (`oauth_token`, `account_key`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credential: Option<String>,
    /// How long the call took, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

impl OutEvent {
    /// The event of audit record `e` at `at`.
    pub fn of(server: &Arc<str>, e: &AuditEvent<'_>, at: i64) -> OutEvent {
        let part = |name: &str| {
            e.detail?
                .split(' ')
                .find_map(|p| p.strip_prefix(name))
                .map(str::to_string)
        };
        OutEvent {
            server: server.clone(),
            at,
            event: e.event.to_string(),
            outcome: e.outcome.to_string(),
            account_id: e.account_id.map(str::to_string),
            client_id: e.client_id.map(str::to_string),
            subject: e.subject.map(str::to_string),
            project_id: project_in_detail(e.detail).map(str::to_string),
            credential: part("credential=").and_then(|c| c.split(':').next().map(str::to_string)),
            duration_ms: part("duration_ms=").and_then(|d| d.parse().ok()),
        }
    }
}

/// How events are queued, batched and retried.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Where batches go.
    pub url: url::Url,
    /// Sent as a bearer token, if set.
    pub token: Option<String>,
    /// Events waiting at most; beyond it new ones are dropped.
    pub queue: usize,
    /// Events per batch at most.
    pub batch: usize,
    /// How long a batch gathers after its first event.
    pub gather: Duration,
    /// Tries per batch.
    pub tries: u32,
    /// Wait before the second try; doubled before each further one.
    pub first_backoff: Duration,
    /// Time one `POST` may take.
    pub timeout: Duration,
    /// Time a graceful stop gives the queued events.
    pub drain: Duration,
}

impl Settings {
    /// The defaults for `url`: 10,000 queued, 500 per batch gathered 1 s, 6 tries from 0.5 s
    /// (0.5 + 1 + 2 + 4 + 8 s of waiting), 10 s per `POST`, 5 s to drain.
    pub fn new(url: url::Url, token: Option<String>) -> Settings {
        Settings {
            url,
            token,
            queue: 10_000,
            batch: 500,
            gather: Duration::from_secs(1),
            tries: 6,
            first_backoff: Duration::from_millis(500),
            timeout: Duration::from_secs(10),
            drain: Duration::from_secs(5),
        }
    }
}

/// The queue's sending end; the store's [`AuditListener`].
pub struct EventsOut {
    server: Arc<str>,
    tx: mpsc::Sender<OutEvent>,
    dropped: Arc<AtomicU64>,
}

impl EventsOut {
    /// Events dropped so far, for any reason.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

fn count_dropped(dropped: &AtomicU64, reason: &'static str, n: usize) {
    dropped.fetch_add(n as u64, Ordering::Relaxed);
    metrics::counter!(EVENTS_DROPPED, "reason" => reason).increment(n as u64);
}

impl AuditListener for EventsOut {
    fn offer(&self, e: &AuditEvent<'_>, at: i64) {
        if self.tx.try_send(OutEvent::of(&self.server, e, at)).is_err() {
            count_dropped(&self.dropped, "queue_full", 1);
        }
    }
}

/// The running sender task; [`EventsTask::drain`] stops it.
#[derive(Debug)]
pub struct EventsTask {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl EventsTask {
    /// Sends what is queued (one try per batch, within the drain time) and stops.
    pub async fn drain(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

/// Starts sending `store`'s audit records per `config` (`GATEHOUSE_EVENTS_URL`); `None` when
/// it is not set (or a listener is already set).
pub fn start(config: &Config, store: &Store) -> Option<EventsTask> {
    let url = config.surface.events_url.clone()?;
    let settings = Settings::new(url, config.surface.events_token.clone());
    let (out, task) = start_with(settings, config.surface.server_name.as_str().into());
    store.set_audit_listener(out).then_some(task)
}

/// [`start`] with explicit settings: the listener to hand to the store, and the task.
pub fn start_with(settings: Settings, server: Arc<str>) -> (Arc<EventsOut>, EventsTask) {
    let (tx, rx) = mpsc::channel(settings.queue.max(1));
    let dropped = Arc::new(AtomicU64::new(0));
    let out = Arc::new(EventsOut {
        server,
        tx,
        dropped: dropped.clone(),
    });
    let (stop, stopped) = oneshot::channel();
    let task = tokio::spawn(send_batches(settings, rx, stopped, dropped));
    (out, EventsTask { stop, task })
}

/// What a `POST` of one batch came to.
enum Delivery {
    Sent,
    TryAgain(String),
    Refused(String),
}

async fn post(client: &reqwest::Client, settings: &Settings, body: &[u8]) -> Delivery {
    let mut request = client
        .post(settings.url.clone())
        .header("content-type", "application/x-ndjson")
        .body(body.to_vec());
    if let Some(token) = &settings.token {
        request = request.bearer_auth(token);
    }
    match request.send().await {
        Ok(r) if r.status().is_success() => Delivery::Sent,
        Ok(r) => {
            let status = r.status();
            if status.is_server_error() || status.as_u16() == 408 || status.as_u16() == 429 {
                Delivery::TryAgain(format!("HTTP {status}"))
            } else {
                Delivery::Refused(format!("HTTP {status}"))
            }
        }
        Err(e) => Delivery::TryAgain(e.to_string()),
    }
}

/// Posts `batch` with up to `tries` tries, backing off between them; counts the outcome.
async fn deliver(
    client: &reqwest::Client,
    settings: &Settings,
    batch: &[OutEvent],
    tries: u32,
    dropped: &AtomicU64,
) {
    let mut body = Vec::new();
    for event in batch {
        if serde_json::to_writer(&mut body, event).is_ok() {
            body.push(b'\n');
        }
    }
    let mut wait = settings.first_backoff;
    for attempt in 1..=tries.max(1) {
        match post(client, settings, &body).await {
            Delivery::Sent => {
                metrics::counter!(EVENTS_SENT).increment(batch.len() as u64);
                return;
            }
            Delivery::Refused(why) => {
                tracing::warn!(events = batch.len(), reason = %why, "the events receiver refused a batch; dropped");
                count_dropped(dropped, "refused", batch.len());
                return;
            }
            Delivery::TryAgain(why) if attempt < tries => {
                tracing::debug!(attempt, reason = %why, "events batch not delivered; trying again");
                tokio::time::sleep(wait).await;
                wait = wait.saturating_mul(2);
            }
            Delivery::TryAgain(why) => {
                tracing::warn!(events = batch.len(), reason = %why, "events batch undeliverable; dropped");
                count_dropped(dropped, "undeliverable", batch.len());
            }
        }
    }
}

/// The sender task: gathers batches and delivers them until `stop`; then sends what is left
/// with one try per batch within the drain time.
async fn send_batches(
    settings: Settings,
    mut rx: mpsc::Receiver<OutEvent>,
    mut stop: oneshot::Receiver<()>,
    dropped: Arc<AtomicU64>,
) {
    let client = match reqwest::Client::builder()
        .timeout(settings.timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "cannot build the events client; no events are sent");
            return;
        }
    };
    let mut batch = Vec::with_capacity(settings.batch);
    loop {
        tokio::select! {
            n = rx.recv_many(&mut batch, settings.batch) => {
                if n == 0 {
                    return;
                }
                let gathered = tokio::time::sleep(settings.gather);
                tokio::pin!(gathered);
                while batch.len() < settings.batch {
                    tokio::select! {
                        more = rx.recv() => match more {
                            Some(e) => batch.push(e),
                            None => break,
                        },
                        () = &mut gathered => break,
                    }
                }
                deliver(&client, &settings, &batch, settings.tries, &dropped).await;
                batch.clear();
            }
            _ = &mut stop => break,
        }
    }
    rx.close();
    let drained = async {
        while rx.recv_many(&mut batch, settings.batch).await > 0 {
            deliver(&client, &settings, &batch, 1, &dropped).await;
            batch.clear();
        }
    };
    if tokio::time::timeout(settings.drain, drained).await.is_err() {
        tracing::warn!("events still queued at the stop were not all sent");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::audit::{Event, Outcome};

    #[test]
    fn an_event_carries_metadata_only() {
        let server: Arc<str> = "gatehouse".into();
        let e = AuditEvent {
            event: Event::ToolCall,
            outcome: Outcome::Success,
            account_id: Some("acc"),
            client_id: Some("gc_1"),
            subject: Some("search_notes"),
            source_ip: Some("203.0.113.9"),
            detail: Some("credential=oauth_token:fam1 project=p1 duration_ms=12"),
        };
        let json = serde_json::to_value(OutEvent::of(&server, &e, 1_700_000_000)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"server": "gatehouse", "at": 1_700_000_000, "event": "tool_call",
                "outcome": "success", "account_id": "acc", "client_id": "gc_1",
                "subject": "search_notes", "project_id": "p1", "credential": "oauth_token",
                "duration_ms": 12})
        );
    }

    #[tokio::test]
    async fn a_full_queue_drops_and_counts_instead_of_waiting() {
        let mut settings = Settings::new("http://127.0.0.1:9/".parse().unwrap(), None);
        settings.queue = 2;
        let (out, _task) = start_with(settings, "g".into());
        let e = AuditEvent {
            ..AuditEvent::new(Event::ToolCall, Outcome::Success)
        };
        for i in 0..10 {
            out.offer(&e, i);
        }
        // The sender has not run yet (one thread, no await): the queue took two, and the
        // other eight were dropped at once, without waiting.
        assert_eq!(out.dropped(), 8);
    }

    #[tokio::test]
    async fn a_batch_the_receiver_keeps_failing_is_tried_again_then_dropped_and_counted() {
        let tries = Arc::new(AtomicU64::new(0));
        let seen = tries.clone();
        let app = axum::Router::new().route(
            "/",
            axum::routing::post(move || {
                let seen = seen.clone();
                async move {
                    seen.fetch_add(1, Ordering::Relaxed);
                    http::StatusCode::BAD_GATEWAY
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        let mut settings = Settings::new(url.parse().unwrap(), None);
        settings.tries = 3;
        settings.first_backoff = Duration::from_millis(10);
        settings.gather = Duration::from_millis(10);
        let (out, task) = start_with(settings, "g".into());
        let e = AuditEvent {
            ..AuditEvent::new(Event::Signin, Outcome::Success)
        };
        for i in 0..4 {
            out.offer(&e, i);
        }
        for _ in 0..200 {
            if out.dropped() == 4 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(out.dropped(), 4, "the whole batch, once");
        assert_eq!(tries.load(Ordering::Relaxed), 3, "one batch, three tries");
        task.drain().await;
    }
}
