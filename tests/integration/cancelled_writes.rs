//! Regression drill (docs/reliability.md, "a `SQLite` connection left inside a write
//! transaction"): requests that write are cancelled mid-flight by clients that give up after a
//! few milliseconds, under write contention; afterwards every pooled connection must still
//! write. A write transaction whose future was dropped while beginning used to leave its
//! connection in the pool inside `BEGIN IMMEDIATE`, holding `SQLite`'s write lock: every later
//! write then failed (`database is locked`, `attempted to call begin_with at non-zero
//! transaction depth`).

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::spawn_app_with;

/// Rounds of cancelled registrations, and registrations per round (all at once).
const ROUNDS: u64 = 40;
const PER_ROUND: u64 = 24;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_writes_leave_every_pooled_connection_able_to_write() {
    let app = spawn_app_with(|vars| {
        vars.insert("GATEHOUSE_REGISTRATIONS_PER_HOUR".into(), "1000000".into());
        vars.insert(
            "GATEHOUSE_REGISTRATION_BYTES_PER_HOUR".into(),
            "1000000000".into(),
        );
    })
    .await;
    let url = app.url("/oauth/register");
    let body =
        json!({"redirect_uris": ["https://app.example/cb"], "token_endpoint_auth_method": "none"});
    // Each registration writes twice (the per-address counter in a write transaction, then
    // the client); every one goes to the same counter, so they contend for the write lock.
    let mut answered = 0u64;
    for round in 0..ROUNDS {
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..PER_ROUND {
            let url = url.clone();
            let body = body.clone();
            // Client timeouts of 0.2 to 12 ms: connections dropped before, during and after
            // the server's transactions.
            let timeout = Duration::from_micros(200 + (round * 7919 + i * 104_729) % 12_000);
            tasks.spawn(async move {
                let client = crate::helpers::client_builder()
                    .timeout(timeout)
                    .build()
                    .unwrap();
                client.post(url).json(&body).send().await.ok()
            });
        }
        while let Some(done) = tasks.join_next().await {
            if let Some(r) = done.unwrap() {
                assert_ne!(
                    r.status(),
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "round {round}"
                );
                answered += 1;
            }
        }
    }
    assert!(
        answered < ROUNDS * PER_ROUND,
        "some requests were cancelled ({answered} answered)"
    );
    // Sequential registrations take the pooled connections in turn (idle connections are
    // handed out oldest first), several times over: each must be registered, quickly.
    let max = gatehouse::store::pool_size(
        app.store.backend(),
        std::thread::available_parallelism()
            .map(|n| u32::try_from(n.get()).unwrap_or(u32::MAX))
            .unwrap_or(1),
    )
    .1;
    let client = crate::helpers::client_builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    for i in 0..2 * max {
        let started = std::time::Instant::now();
        let r = client.post(&url).json(&body).send().await.unwrap();
        let status = r.status();
        let text = r.text().await.unwrap();
        assert_eq!(status, StatusCode::CREATED, "registration {i}: {text}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "registration {i} waited {:?} (a connection holding the write lock?)",
            started.elapsed()
        );
    }
}
