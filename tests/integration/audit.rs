//! Tool-call audit rows go through a bounded queue and one batch writer: a full queue makes
//! callers wait (no row dropped), and a graceful stop commits every queued row before the server
//! returns. The database's write lock is held by the test meanwhile, so the rows are still
//! queued when the stop comes.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use gatehouse::app::Application;
use gatehouse::config::Config;
use gatehouse::domain::audit::{Event, Outcome};
use gatehouse::store::audit::{AUDIT_BATCH_MAX, AUDIT_QUEUE_CAPACITY, AuditEvent};
use gatehouse::store::{Backend, Store};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::Row;

use crate::helpers::{ServerStop, TestApp, TestDb, new_client};
use crate::oauth_helpers::{EMAIL, PASSWORD, full_grant};

/// Holds the database's write lock on `audit_events` until the returned transaction ends:
/// `SQLite`'s single writer lock (taken by a write), `PostgreSQL`'s table lock that excludes inserts.
async fn lock_audit_table(
    store: &Store,
    raw: &sqlx::AnyPool,
) -> sqlx::Transaction<'static, sqlx::Any> {
    let mut tx = raw.begin().await.unwrap();
    match store.backend() {
        Backend::Sqlite => {
            sqlx::query("DELETE FROM audit_events WHERE id < 0")
                .execute(&mut *tx)
                .await
                .unwrap();
        }
        Backend::Postgres => {
            sqlx::query("LOCK TABLE audit_events IN SHARE ROW EXCLUSIVE MODE")
                .execute(&mut *tx)
                .await
                .unwrap();
        }
    }
    tx
}

/// Queues the `i`th successful `tool_call` row about `subject` (detail `n=i`) for the writer.
async fn queue_tool_call(store: &Store, subject: &str, i: usize) {
    let detail = format!("n={i}");
    store
        .audit_batched(
            AuditEvent {
                subject: Some(subject),
                detail: Some(&detail),
                ..AuditEvent::new(Event::ToolCall, Outcome::Success)
            },
            gatehouse::store::now(),
        )
        .await;
}

/// Committed `tool_call` rows for `subject` (a plain query: it does not wait for the writer).
async fn committed_tool_calls(raw: &sqlx::AnyPool, subject: &str) -> i64 {
    sqlx::query("SELECT COUNT(*) AS n FROM audit_events WHERE event = 'tool_call' AND subject = $1")
        .bind(subject)
        .fetch_one(raw)
        .await
        .unwrap()
        .try_get("n")
        .unwrap()
}

#[tokio::test]
async fn a_graceful_stop_commits_every_queued_tool_call_row() {
    const CALLS: usize = 120;
    let db = TestDb::for_app().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let address = format!("http://127.0.0.1:{port}");
    let vars = HashMap::from([
        ("MCP_SERVER_URL".to_string(), format!("{address}/mcp")),
        ("DATABASE_URL".to_string(), db.url.clone()),
        ("GATEHOUSE_BIND".to_string(), format!("127.0.0.1:{port}")),
    ]);
    let config = Config::from_vars(&vars).unwrap();
    let server = Application::build_with_listener(config.clone(), listener)
        .await
        .unwrap();
    let store = server.state().store.clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(server.run_until(async {
        let _ = stopped.await;
    }));
    let app = TestApp {
        address,
        port,
        store: store.clone(),
        config,
        client: new_client(),
        stop: ServerStop::none(),
        db,
        metrics_port: None,
    };
    app.create_account(EMAIL, PASSWORD).await;
    let (_, grant) = full_grant(&app).await;
    let token = grant["access_token"].as_str().unwrap().to_string();
    let before = committed_tool_calls(app.db.pool().await, "list_projects").await;
    assert_eq!(before, 0);

    let lock = lock_audit_table(&store, app.db.pool().await).await;
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..CALLS {
        let client = app.client.clone();
        let url = app.url("/mcp");
        let token = token.clone();
        calls.spawn(async move {
            let r = client
                .post(url)
                .bearer_auth(token)
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "tools/call")
                .header("mcp-name", "list_projects")
                .json(
                    &json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
                    "name": "list_projects", "arguments": {},
                    "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                              "io.modelcontextprotocol/clientCapabilities": {}}}}),
                )
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::OK);
            let body: Value = r.json().await.unwrap();
            assert!(
                body["result"]["structuredContent"]["projects"].is_array(),
                "{body}"
            );
        });
    }
    // Every call is answered while no audit row can be committed: none waits for the writer,
    // whose first try waits out the 10 s busy timeout (the quota's first count of the account
    // flushes the queue, which must not wait for rows still gathering).
    tokio::time::timeout(Duration::from_secs(8), async {
        while let Some(done) = calls.join_next().await {
            done.unwrap();
        }
    })
    .await
    .expect("every call answered while the audit table is locked");
    assert_eq!(
        committed_tool_calls(app.db.pool().await, "list_projects").await,
        0
    );

    stop.send(()).unwrap();
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        lock.rollback().await.unwrap();
    });
    tokio::time::timeout(Duration::from_secs(30), running)
        .await
        .expect("the server stops")
        .unwrap()
        .unwrap();
    release.await.unwrap();
    assert_eq!(
        committed_tool_calls(app.db.pool().await, "list_projects").await,
        i64::try_from(CALLS).unwrap()
    );
}

#[tokio::test]
async fn a_full_queue_makes_callers_wait_and_drops_nothing() {
    let db = TestDb::for_app().await;
    let store = Store::connect(&db.url).await.unwrap();
    store.migrate().await.unwrap();
    let writer = store.start_audit_writer().expect("a first writer starts");
    assert!(store.start_audit_writer().is_none(), "one writer per store");

    let lock = lock_audit_table(&store, db.pool().await).await;
    let total = AUDIT_QUEUE_CAPACITY + AUDIT_BATCH_MAX + 200;
    let accepted = Arc::new(AtomicUsize::new(0));
    let mut callers = tokio::task::JoinSet::new();
    for i in 0..total {
        let store = store.clone();
        let accepted = accepted.clone();
        callers.spawn(async move {
            queue_tool_call(&store, "backpressure", i).await;
            accepted.fetch_add(1, Ordering::SeqCst);
        });
    }
    // While the writer cannot commit, at most one batch is taken out of the queue and the queue
    // holds its capacity: the other callers are still waiting.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let waiting_room = AUDIT_QUEUE_CAPACITY + AUDIT_BATCH_MAX;
    assert!(
        accepted.load(Ordering::SeqCst) <= waiting_room,
        "{} callers went on with room for {waiting_room}",
        accepted.load(Ordering::SeqCst)
    );
    assert_eq!(
        committed_tool_calls(db.pool().await, "backpressure").await,
        0
    );

    lock.rollback().await.unwrap();
    while let Some(done) = callers.join_next().await {
        done.unwrap();
    }
    writer.drain().await;
    assert_eq!(
        committed_tool_calls(db.pool().await, "backpressure").await,
        i64::try_from(total).unwrap()
    );
    // After the drain a row is written directly.
    store
        .audit_batched(
            AuditEvent {
                subject: Some("backpressure"),
                ..AuditEvent::new(Event::ToolCall, Outcome::Success)
            },
            gatehouse::store::now(),
        )
        .await;
    assert_eq!(
        committed_tool_calls(db.pool().await, "backpressure").await,
        i64::try_from(total + 1).unwrap()
    );
}

/// Rows of a batch the database refused on every try (here the table is away, as a database
/// that stays locked would refuse them) are kept, not dropped, and written once the database
/// takes them again; afterwards every pooled connection still writes (no transaction left
/// open by the failed tries).
#[tokio::test]
async fn rows_the_database_refused_are_kept_and_written_later() {
    let db = TestDb::for_app().await;
    let store = Store::connect(&db.url).await.unwrap();
    store.migrate().await.unwrap();
    let writer = store.start_audit_writer().expect("a writer starts");
    let raw = db.pool().await;
    sqlx::query("ALTER TABLE audit_events RENAME TO audit_events_away")
        .execute(raw)
        .await
        .unwrap();
    for i in 0..3 {
        let detail = format!("n={i}");
        store
            .audit_batched(
                AuditEvent {
                    subject: Some("kept"),
                    detail: Some(&detail),
                    ..AuditEvent::new(Event::ToolCall, Outcome::Success)
                },
                gatehouse::store::now(),
            )
            .await;
    }
    // Long enough for every try of the batch to fail (50 + 100 + 200 + 400 ms of waits).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    sqlx::query("ALTER TABLE audit_events_away RENAME TO audit_events")
        .execute(raw)
        .await
        .unwrap();
    store.flush_audit().await;
    assert_eq!(committed_tool_calls(raw, "kept").await, 3);
    // Every connection of the store's pool writes.
    let max = gatehouse::store::pool_size(
        store.backend(),
        std::thread::available_parallelism()
            .map(|n| u32::try_from(n.get()).unwrap_or(u32::MAX))
            .unwrap_or(1),
    )
    .1;
    for i in 0..2 * max {
        tokio::time::timeout(
            Duration::from_secs(5),
            store.audit(
                AuditEvent {
                    subject: Some("after"),
                    ..AuditEvent::new(Event::ToolCall, Outcome::Success)
                },
                gatehouse::store::now(),
            ),
        )
        .await
        .unwrap_or_else(|_| panic!("write {i} waited past 5 s"));
    }
    assert_eq!(committed_tool_calls(raw, "after").await, i64::from(2 * max));
    writer.drain().await;
}

// Under a steady stream of calls the writer lets each batch gather for `AUDIT_GATHER` after its
// first row instead of committing each row as it wakes: 60 rows arriving one every 0.5 ms
// (30 ms in all) take about 30 / 2 transactions, not one each. Counted on SQLite, where every
// batch the writer commits is one transaction of the in-place write connection (committed
// there, failed there, or sent to the pool while paused: one of the three counters).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_of_rows_is_committed_in_gathered_batches() {
    let db = TestDb::sqlite();
    let store = Store::connect(&db.url).await.unwrap();
    store.migrate().await.unwrap();
    let tried = |store: &Store| {
        let s = store.in_place_stats().expect("a SQLite file");
        s.writes + s.write_fallbacks + s.paused
    };
    let before = tried(&store);
    let writer = store.start_audit_writer().expect("a writer starts");
    const ROWS: usize = 60;
    for i in 0..ROWS {
        queue_tool_call(&store, "gathered", i).await;
        // The test's own thread sleeps: the writer runs on the other worker meanwhile.
        std::thread::sleep(Duration::from_micros(500));
    }
    store.flush_audit().await;
    let batches = tried(&store) - before;
    writer.drain().await;
    assert_eq!(
        committed_tool_calls(db.pool().await, "gathered").await,
        i64::try_from(ROWS).unwrap()
    );
    assert!(
        (1..=20).contains(&batches),
        "{ROWS} rows over about 30 ms took {batches} transactions"
    );
}
