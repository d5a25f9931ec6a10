//! Reliability drills: long, bounded runs against real server instances on loopback, each
//! printing its figures. They are `#[ignore]`d so that `cargo test` stays quick; run one with
//!
//! ```text
//! GATEHOUSE_TEST_POSTGRES=postgres://postgres@127.0.0.1:5432/test \
//!   cargo test --test drills -- --ignored --nocapture <name>
//! ```
//!
//! `DRILL_TRIALS` sets the number of trials of the race drills (default 1000),
//! `DRILL_HOSTILE_SECONDS` the length of each phase of the hostile-clients drill (default 10).
//! The `PostgreSQL` server named by `GATEHOUSE_TEST_POSTGRES` is never stopped: the outage drill
//! cuts a TCP proxy of its own in front of it.

// Test code states its expectations with `expect`: a failed one is the test failing.
#![allow(clippy::expect_used, clippy::needless_pass_by_value)]
// A test reads as one story from setup to the last assertion; the 100-line bound is for the
// library.
#![allow(clippy::too_many_lines)]

#[allow(dead_code)]
#[path = "../integration/delay_proxy.rs"]
mod delay_proxy;
#[allow(dead_code)]
#[path = "../integration/helpers.rs"]
mod helpers;
#[allow(dead_code)]
#[path = "../integration/oauth_helpers.rs"]
mod oauth_helpers;

mod backup;
mod binary;
mod disk;
mod hostile;
mod kill;
mod late_listener;
mod rolling;
mod slow_bodies;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use helpers::{TestApp, TestDb, new_client, spawn_app_with, spawn_instance};
use oauth_helpers::*;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};

/// A TCP connection to `to` from the loopback address `source` (127.0.0.0/8 is this machine on
/// Linux), so a drill can be several source addresses.
pub(crate) async fn connect_from(
    source: std::net::IpAddr,
    to: std::net::SocketAddr,
) -> std::io::Result<TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(std::net::SocketAddr::new(source, 0))?;
    socket.connect(to).await
}

fn trials() -> usize {
    std::env::var("DRILL_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

/// Two instances on one fresh `PostgreSQL` database, with a refresh grace window of `grace`
/// seconds.
async fn two_instances(grace: &str) -> (TestApp, TestApp, TestDb) {
    let db = TestDb::postgres()
        .await
        .expect("the drills need GATEHOUSE_TEST_POSTGRES");
    let url = db.url.clone();
    let grace_a = grace.to_string();
    let a = spawn_app_with(move |v| {
        v.insert("DATABASE_URL".into(), url);
        v.insert("GATEHOUSE_REFRESH_GRACE_SECONDS".into(), grace_a);
    })
    .await;
    // One deployment behind a load balancer: the same issuer and resource on both.
    let grace_b = grace.to_string();
    let (issuer, resource) = (a.config.issuer.clone(), a.config.mcp_server_url.clone());
    let shared = db.url.clone();
    let b = spawn_instance(&a, |v| {
        v.insert("DATABASE_URL".into(), shared);
        v.insert("GATEHOUSE_REFRESH_GRACE_SECONDS".into(), grace_b);
        v.insert("GATEHOUSE_ISSUER".into(), issuer);
        v.insert("MCP_SERVER_URL".into(), resource);
    })
    .await;
    // `a` was given a throwaway default database; the real one (dropped last) is `db`.
    (a, b, db)
}

async fn refresh_at(url: String, client_id: String, token: String) -> (StatusCode, Value) {
    let r = new_client()
        .post(url)
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", token.as_str()),
            ("client_id", client_id.as_str()),
        ])
        .send()
        .await
        .unwrap();
    (r.status(), r.json().await.unwrap_or(Value::Null))
}

// The same refresh token sent to both instances at once, then retried at both inside the
// grace window: exactly one successor, every answer carries it; after the window a replay
// revokes the family on both instances.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn refresh_race_across_two_instances() {
    let (a, b, _db) = two_instances("3").await;
    let (client_id, grant) = full_grant(&a).await;
    let mut token = grant["refresh_token"].as_str().unwrap().to_string();
    let (mut double_rotations, mut false_theft, mut other_failures) = (0, 0, 0);
    let started = Instant::now();
    let n = trials();
    for _ in 0..n {
        let first = tokio::join!(
            refresh_at(a.url("/oauth/token"), client_id.clone(), token.clone()),
            refresh_at(b.url("/oauth/token"), client_id.clone(), token.clone()),
        );
        let retries = tokio::join!(
            refresh_at(a.url("/oauth/token"), client_id.clone(), token.clone()),
            refresh_at(b.url("/oauth/token"), client_id.clone(), token.clone()),
        );
        let answers = [first.0, first.1, retries.0, retries.1];
        let mut successors = std::collections::HashSet::new();
        for (status, body) in &answers {
            if *status == StatusCode::OK {
                successors.insert(body["refresh_token"].as_str().unwrap().to_string());
            } else if body["error"] == "invalid_grant" {
                false_theft += 1;
            } else {
                if other_failures == 0 {
                    println!("first other failure: {status} {body}");
                }
                other_failures += 1;
            }
        }
        if successors.len() > 1 {
            double_rotations += 1;
        }
        match successors.into_iter().next() {
            Some(next) => token = next,
            None => break,
        }
    }
    let elapsed = started.elapsed();
    // Rotate once more so that `token` is used up, wait out the window, replay it.
    let (s, last) = refresh_at(a.url("/oauth/token"), client_id.clone(), token.clone()).await;
    assert_eq!(s, StatusCode::OK, "{last}");
    tokio::time::sleep(Duration::from_secs(4)).await;
    let (replay, body) = refresh_at(b.url("/oauth/token"), client_id.clone(), token.clone()).await;
    let newest = last["refresh_token"].as_str().unwrap().to_string();
    let (on_a, _) = refresh_at(a.url("/oauth/token"), client_id.clone(), newest.clone()).await;
    let (on_b, _) = refresh_at(b.url("/oauth/token"), client_id.clone(), newest).await;
    let access_live = access_token_live(&a, last["access_token"].as_str().unwrap()).await;
    println!(
        "refresh race: {n} trials in {:.1} s; double rotations {double_rotations}; false theft \
         verdicts {false_theft}; other failures {other_failures}; replay after the window: \
         {replay} ({}); family afterwards on A {on_a}, on B {on_b}; newest access token live: \
         {access_live}",
        elapsed.as_secs_f64(),
        body["error"]
    );
    assert_eq!((double_rotations, false_theft, other_failures), (0, 0, 0));
    assert_eq!(replay, StatusCode::BAD_REQUEST);
    assert_eq!(
        (on_a, on_b),
        (StatusCode::BAD_REQUEST, StatusCode::BAD_REQUEST)
    );
    assert!(!access_live);
}

// One authorization code redeemed at both instances at once: exactly one winner per trial.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn code_redemption_race_across_two_instances() {
    let (a, b, _db) = two_instances("30").await;
    let client_id = register_public(&a, &[REDIRECT]).await;
    let browser = signed_in_browser(&a).await;
    let n = trials();
    let (mut no_winner, mut two_winners, mut server_errors) = (0, 0, 0);
    let started = Instant::now();
    for _ in 0..n {
        let (code, verifier) = code_in(&a, &browser, &client_id, &[]).await;
        let (x, y) = tokio::join!(
            exchange(&a, &client_id, &code, &verifier, &[]),
            exchange(&b, &client_id, &code, &verifier, &[]),
        );
        let winners = [&x, &y]
            .iter()
            .filter(|(s, _, _)| *s == StatusCode::OK)
            .count();
        server_errors += [&x, &y]
            .iter()
            .filter(|(s, _, _)| s.is_server_error())
            .count();
        match winners {
            0 => no_winner += 1,
            1 => {}
            _ => two_winners += 1,
        }
    }
    println!(
        "code race: {n} trials in {:.1} s; trials with two winners {two_winners}; with no \
         winner {no_winner}; 5xx answers {server_errors}",
        started.elapsed().as_secs_f64()
    );
    assert_eq!((two_winners, no_winner, server_errors), (0, 0, 0));
}

/// A TCP proxy in front of `target` that can be cut: while cut, its open connections are
/// closed and new ones are closed as soon as accepted.
struct Proxy {
    port: u16,
    cut: Arc<AtomicBool>,
    generation: Arc<tokio::sync::watch::Sender<u64>>,
}

impl Proxy {
    async fn start(target: &'static str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let generation = Arc::new(tokio::sync::watch::channel(0u64).0);
        let (c, g) = (cut.clone(), generation.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    continue;
                };
                if c.load(Ordering::SeqCst) {
                    drop(inbound);
                    continue;
                }
                let mut cut_signal = g.subscribe();
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cut_signal.changed() => {}
                    }
                });
            }
        });
        Proxy {
            port,
            cut,
            generation,
        }
    }

    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        self.generation.send_modify(|g| *g += 1);
    }

    fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

/// Status, `Retry-After` and latency of one request.
async fn timed(r: reqwest::RequestBuilder) -> (StatusCode, Option<String>, Duration) {
    let started = Instant::now();
    match r.timeout(Duration::from_secs(10)).send().await {
        Ok(r) => (
            r.status(),
            r.headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap_or("").to_string()),
            started.elapsed(),
        ),
        Err(_) => (StatusCode::GATEWAY_TIMEOUT, None, started.elapsed()),
    }
}

// PostgreSQL out of reach for 10 s (the proxy in front of it cut): /readyz, MCP and the token
// endpoint answer 503 with Retry-After quickly, and the server recovers by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn database_outage_behind_a_proxy() {
    let db = TestDb::postgres()
        .await
        .expect("the drills need GATEHOUSE_TEST_POSTGRES");
    let server = std::env::var("GATEHOUSE_TEST_POSTGRES").unwrap();
    let authority = server
        .split('@')
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or("127.0.0.1:5432")
        .to_string();
    let target: &'static str = Box::leak(authority.clone().into_boxed_str());
    let proxy = Proxy::start(target).await;
    let proxied = db
        .url
        .replacen(&authority, &format!("127.0.0.1:{}", proxy.port), 1);
    let app = spawn_app_with(move |v| {
        v.insert("DATABASE_URL".into(), proxied);
    })
    .await;
    let (client_id, grant) = full_grant(&app).await;
    let access = grant["access_token"].as_str().unwrap().to_string();
    let mcp = |app: &TestApp| {
        app.client
            .post(app.url("/mcp"))
            .bearer_auth(&access)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
    };
    let token = |app: &TestApp| {
        app.client.post(app.url("/oauth/token")).form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", "gate_rt_not-a-real-one"),
            ("client_id", client_id.as_str()),
        ])
    };
    let ready = timed(app.client.get(app.url("/readyz"))).await;
    assert_eq!(ready.0, StatusCode::OK);

    proxy.cut();
    let cut_at = Instant::now();
    let mut worst = [Duration::ZERO; 3];
    let mut statuses = std::collections::BTreeMap::<String, usize>::new();
    let mut missing_retry_after = 0;
    while cut_at.elapsed() < Duration::from_secs(10) {
        let answers = [
            timed(app.client.get(app.url("/readyz"))).await,
            timed(mcp(&app)).await,
            timed(token(&app)).await,
        ];
        for (i, (status, retry, took)) in answers.iter().enumerate() {
            worst[i] = worst[i].max(*took);
            *statuses
                .entry(format!(
                    "{} {}",
                    ["readyz", "mcp", "token"][i],
                    status.as_u16()
                ))
                .or_default() += 1;
            if i > 0 && *status == StatusCode::SERVICE_UNAVAILABLE && retry.is_none() {
                missing_retry_after += 1;
            }
        }
    }
    proxy.restore();
    let restored_at = Instant::now();
    let mut recovered = None;
    while restored_at.elapsed() < Duration::from_secs(10) {
        let (r, m) = tokio::join!(timed(app.client.get(app.url("/readyz"))), timed(mcp(&app)));
        if r.0 == StatusCode::OK && m.0 == StatusCode::OK {
            recovered = Some(restored_at.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "outage: answers during 10 s cut {statuses:?}; slowest readyz {:?}, mcp {:?}, token \
         {:?}; 503 without Retry-After {missing_retry_after}; recovered after {recovered:?}",
        worst[0], worst[1], worst[2]
    );
    assert!(worst[0] <= Duration::from_secs(1), "{:?}", worst[0]);
    assert!(worst[1] <= Duration::from_secs(2) && worst[2] <= Duration::from_secs(2));
    assert!(statuses.keys().all(|k| k.ends_with("503")), "{statuses:?}");
    assert_eq!(missing_retry_after, 0);
    assert!(
        recovered.is_some_and(|d| d <= Duration::from_secs(2)),
        "{recovered:?}"
    );
}

// Backup under load and restore (SQLite): `gatehouse backup` while refresh rotations and tool
// calls run; the copy restored into a fresh path serves every access token acknowledged before
// the backup, every family rotates on, nothing revoked before it works again.
// `DRILL_BACKUP_SECONDS` sets the length of the load (default 6).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn backup_under_load_restores_every_acknowledged_token() {
    backup::drill().await;
}

// Rolling upgrade on PostgreSQL: the previous release (`GATEHOUSE_PREVIOUS_BIN`) and this one
// serve one database; tokens, refresh and calls checked on each, and the previous release
// restarted on the migrated database. Says why and ends when `GATEHOUSE_PREVIOUS_BIN` or
// `GATEHOUSE_TEST_POSTGRES` is unset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn rolling_upgrade_previous_and_new_release_share_postgres() {
    rolling::drill().await;
}

// kill -9 under load on a SQLite file: nothing acknowledged is lost, nothing revoked comes back,
// and the file passes `PRAGMA integrity_check` after every kill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn kill9_under_load_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("gatehouse.db").display()
    );
    kill::drill("SQLite", &url).await;
}

// kill -9 under load on PostgreSQL: the same ledger, and no half-written family.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn kill9_under_load_postgres() {
    let db = TestDb::postgres()
        .await
        .expect("the drills need GATEHOUSE_TEST_POSTGRES");
    kill::drill("PostgreSQL", &db.url).await;
}

// SQLite on a full disk and on a read-only file system (a tmpfs mounted for the drill; skipped,
// saying why, where mounting is not permitted): 503 with Retry-After in each protocol's shape,
// a log line naming the cause, reads still served, no corruption, recovery without restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn sqlite_full_disk_and_read_only() {
    disk::drill().await;
}

// Hostile clients (1,000 idle connections, 50 slowloris, oversized headers, huge and deeply
// nested JSON, a registration flood) against the real binary on SQLite: authenticated MCP calls
// keep being served; throughput and p50/p99 printed with and without the attack.
// `DRILL_HOSTILE_SECONDS` sets the length of each phase (default 10).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn hostile_clients_leave_mcp_serving() {
    hostile::drill().await;
}

// The outside probe's slow-body attack: one address trickling request bodies on 4,100
// connections holds at most its cap of them, each for at most the body deadline, and
// GET /healthz from another address keeps answering. `DRILL_HOSTILE_SECONDS` sets the length
// (default 10, plus 6 s to see the deadline).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn slow_bodies_from_one_address_leave_others_served() {
    slow_bodies::drill().await;
}

// Revocation on instance A while instance B's listener hears everything 0 s, 1.5 s and 5 s
// late: from the moment the revocation returns, B refuses the key (0 stale answers).
// `DRILL_TRIALS` / 25 revocations per delay, between 2 and 40 (default 40).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn revocation_reaches_an_instance_whose_listener_is_late() {
    late_listener::drill((trials() / 25).clamp(2, 40)).await;
}
