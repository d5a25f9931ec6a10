//! Backup under load and restore (issue 39, item 2): while clients rotate refresh tokens and
//! call tools on a server on `SQLite`, `gatehouse backup` (the real binary) copies the database;
//! the copy is restored with `gatehouse restore` into a fresh path and a second server (same
//! issuer and resource) is started on it. Every access token acknowledged before the backup
//! began must list tools there, every family must go on rotating from the newest refresh token
//! the copy holds (the one acknowledged last before the backup, or one rotated from it while
//! the copy was being taken), and every family revoked before the backup must stay refused.
//! `DRILL_BACKUP_SECONDS` sets the length of the load (default 6 s; the backup starts halfway).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, new_client, spawn_app_with, spawn_successor};
use crate::oauth_helpers::full_grant;

fn seconds() -> u64 {
    std::env::var("DRILL_BACKUP_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6)
        .max(2)
}

/// One family's history as the client saw it: every (refresh, access) pair, with when its
/// answer arrived.
struct Chain {
    client_id: String,
    pairs: Vec<(Instant, String, String)>,
}

#[derive(Default)]
struct Load {
    rotations: usize,
    calls: usize,
    /// Answers that were not 200, with what they were.
    failures: Vec<String>,
    /// Latencies of the requests answered while the backup ran.
    during: Vec<Duration>,
    /// Latencies of the others.
    outside: Vec<Duration>,
}

fn gatehouse(url: &str, args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .args(args)
        .env("DATABASE_URL", url)
        .env("MCP_SERVER_URL", "http://127.0.0.1:9/mcp")
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn mcp(
    app: &TestApp,
    client: &reqwest::Client,
    token: &str,
    method: &str,
    params: Value,
) -> reqwest::RequestBuilder {
    client
        .post(app.url("/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
}

async fn rotate(
    app: &TestApp,
    client: &reqwest::Client,
    client_id: &str,
    refresh: &str,
) -> (StatusCode, Value) {
    let r = client
        .post(app.url("/oauth/token"))
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh),
            ("client_id", client_id),
        ])
        .send()
        .await
        .unwrap();
    (r.status(), r.json().await.unwrap_or(Value::Null))
}

async fn send(r: reqwest::RequestBuilder) -> (StatusCode, (), Value) {
    let r = r.send().await.unwrap();
    let status = r.status();
    let text = r.text().await.unwrap_or_default();
    (
        status,
        (),
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// The window the backup ran in: `(started, finished)`, once known.
type Window = Arc<Mutex<(Option<Instant>, Option<Instant>)>>;

fn record(load: &Mutex<Load>, window: &Window, took: Duration, at: Instant) {
    let (started, finished) = *window.lock().unwrap();
    let during = started.is_some_and(|s| at >= s) && finished.is_none_or(|f| at <= f);
    let mut l = load.lock().unwrap();
    if during {
        l.during.push(took);
    } else {
        l.outside.push(took);
    }
}

pub(crate) async fn drill() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("gatehouse.db");
    let url = format!("sqlite://{}?mode=rwc", db.display());
    let serving = url.clone();
    let app = spawn_app_with(move |v| {
        v.insert("DATABASE_URL".into(), serving);
        // The drill's own address makes many requests: no registration or sign-in limit.
        v.insert("GATEHOUSE_REGISTRATIONS_PER_HOUR".into(), "10000".into());
    })
    .await;
    let app = Arc::new(app);

    // Eight live families under load, two revoked before it.
    let mut chains = Vec::new();
    for _ in 0..8 {
        let (client_id, grant) = full_grant(&app).await;
        chains.push(Chain {
            client_id,
            pairs: vec![(
                Instant::now(),
                grant["refresh_token"].as_str().unwrap().to_string(),
                grant["access_token"].as_str().unwrap().to_string(),
            )],
        });
    }
    let mut revoked = Vec::new();
    for _ in 0..2 {
        let (client_id, grant) = full_grant(&app).await;
        let r = app
            .client
            .post(app.url("/oauth/revoke"))
            .form(&[
                ("token", grant["refresh_token"].as_str().unwrap()),
                ("client_id", client_id.as_str()),
            ])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        revoked.push((client_id, grant));
    }

    let load = Arc::new(Mutex::new(Load::default()));
    let window: Window = Arc::new(Mutex::new((None, None)));
    let length = Duration::from_secs(seconds());
    let began = Instant::now();
    let mut workers = Vec::new();
    for mut chain in chains {
        let (app, load, window) = (app.clone(), load.clone(), window.clone());
        workers.push(tokio::spawn(async move {
            let client = new_client();
            while began.elapsed() < length {
                let (_, refresh, access) = chain.pairs.last().unwrap().clone();
                let sent = Instant::now();
                let (status, _, _) = send(mcp(
                    &app,
                    &client,
                    &access,
                    "tools/call",
                    json!({"name": "list_projects", "arguments": {}}),
                ))
                .await;
                record(&load, &window, sent.elapsed(), Instant::now());
                if status == StatusCode::OK {
                    load.lock().unwrap().calls += 1;
                } else {
                    load.lock()
                        .unwrap()
                        .failures
                        .push(format!("tools/call {status}"));
                }
                let sent = Instant::now();
                let (status, body) = rotate(&app, &client, &chain.client_id, &refresh).await;
                let now = Instant::now();
                record(&load, &window, sent.elapsed(), now);
                if status == StatusCode::OK {
                    load.lock().unwrap().rotations += 1;
                    chain.pairs.push((
                        now,
                        body["refresh_token"].as_str().unwrap().to_string(),
                        body["access_token"].as_str().unwrap().to_string(),
                    ));
                } else {
                    load.lock()
                        .unwrap()
                        .failures
                        .push(format!("refresh {status} {body}"));
                    break;
                }
            }
            chain
        }));
    }

    tokio::time::sleep(length / 2).await;
    let file = dir.path().join("backup.db");
    let started = Instant::now();
    window.lock().unwrap().0 = Some(started);
    let (source, target) = (url.clone(), file.to_str().unwrap().to_string());
    let (ok, out, err) =
        tokio::task::spawn_blocking(move || gatehouse(&source, &["backup", &target]))
            .await
            .unwrap();
    let finished = Instant::now();
    window.lock().unwrap().1 = Some(finished);
    assert!(ok, "backup: {err}");
    let took = finished - started;

    let mut chains = Vec::new();
    for w in workers {
        chains.push(w.await.unwrap());
    }
    let load = Arc::try_unwrap(load).ok().unwrap().into_inner().unwrap();

    let check = rusqlite::Connection::open(&file).unwrap();
    let integrity: String = check
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    drop(check);

    let fresh = tempfile::tempdir().unwrap();
    let restored = fresh.path().join("gatehouse.db");
    std::fs::copy(
        format!("{}.key", db.display()),
        format!("{}.key", restored.display()),
    )
    .unwrap();
    let restored_url = format!("sqlite://{}?mode=rwc", restored.display());
    let (ok, _, err) = gatehouse(&restored_url, &["restore", file.to_str().unwrap()]);
    assert!(ok, "restore: {err}");
    let successor = spawn_successor(&app, &restored_url, |_| {}).await;
    let client = new_client();

    // Every access token acknowledged before the backup began lists tools.
    let mut acknowledged = 0;
    let mut lost = Vec::new();
    for chain in &chains {
        for (at, _, access) in chain.pairs.iter().filter(|(at, _, _)| *at < started) {
            acknowledged += 1;
            let (status, _, body) =
                send(mcp(&successor, &client, access, "tools/list", json!({}))).await;
            if status != StatusCode::OK {
                lost.push(format!(
                    "access token acknowledged {:?} before the backup: {status} {body}",
                    started - *at
                ));
            }
        }
    }
    // Every family goes on from the newest refresh token the copy holds: the last one
    // acknowledged before the backup began, or one rotated from it during the copy.
    let mut continued = 0;
    let mut rotated_during = 0;
    for chain in &chains {
        let last_before = chain
            .pairs
            .iter()
            .rposition(|(at, _, _)| *at < started)
            .expect("a pair before the backup");
        let candidates: Vec<&(Instant, String, String)> = chain.pairs[last_before..]
            .iter()
            .filter(|(at, _, _)| *at <= finished + Duration::from_secs(1))
            .collect();
        let hashes: Vec<String> = candidates
            .iter()
            .map(|(_, r, _)| {
                gatehouse::domain::secret::TokenHash::of(r)
                    .as_str()
                    .to_string()
            })
            .collect();
        use sqlx::Row;
        let live: Vec<String> = sqlx::query(
            "SELECT token_hash FROM refresh_tokens WHERE rotated_at IS NULL AND family_id = \
             (SELECT family_id FROM refresh_tokens WHERE token_hash = $1)",
        )
        .bind(hashes[0].clone())
        .fetch_all(successor.db.pool().await)
        .await
        .unwrap()
        .into_iter()
        .map(|row| row.try_get::<String, _>(0).unwrap())
        .collect();
        let Some(index) = hashes.iter().position(|h| live.contains(h)) else {
            lost.push(format!(
                "family of {}: none of its {} refresh tokens acknowledged up to the backup is the live one ({live:?})",
                chain.client_id,
                hashes.len()
            ));
            continue;
        };
        rotated_during += usize::from(index > 0);
        let (status, body) =
            rotate(&successor, &client, &chain.client_id, &candidates[index].1).await;
        if status == StatusCode::OK {
            continued += 1;
        } else {
            lost.push(format!(
                "family of {}: refresh {status} {body}",
                chain.client_id
            ));
        }
    }
    // Nothing revoked before the backup works again.
    let mut resurrected = Vec::new();
    for (client_id, grant) in &revoked {
        let access = grant["access_token"].as_str().unwrap();
        let (status, _, _) = send(mcp(&successor, &client, access, "tools/list", json!({}))).await;
        if status != StatusCode::UNAUTHORIZED {
            resurrected.push(format!("revoked access token: {status}"));
        }
        let (status, _) = rotate(
            &successor,
            &client,
            client_id,
            grant["refresh_token"].as_str().unwrap(),
        )
        .await;
        if status == StatusCode::OK {
            resurrected.push("revoked refresh token rotated".to_string());
        }
    }

    let mut during = load.during.clone();
    let mut outside = load.outside.clone();
    during.sort();
    outside.sort();
    println!(
        "backup under load: {} s of load, {} rotations and {} tool calls, {} failures {:?}; \
         backup took {:.0} ms: {}; integrity_check {integrity}; requests during the backup {} \
         (p50 {:?}, max {:?}), outside it {} (p50 {:?}, max {:?}); restored: {acknowledged} \
         access tokens acknowledged before the backup checked, {} lost {:?}; {continued}/{} \
         families rotated on ({rotated_during} from a token rotated during the copy); {} revoked \
         families checked, resurrected {:?}",
        length.as_secs(),
        load.rotations,
        load.calls,
        load.failures.len(),
        load.failures.iter().take(3).collect::<Vec<_>>(),
        took.as_secs_f64() * 1000.0,
        out.trim(),
        during.len(),
        percentile(&during, 0.5),
        during.last().copied().unwrap_or_default(),
        outside.len(),
        percentile(&outside, 0.5),
        outside.last().copied().unwrap_or_default(),
        lost.len(),
        lost.iter().take(3).collect::<Vec<_>>(),
        chains.len(),
        revoked.len(),
        resurrected,
    );
    assert_eq!(integrity, "ok");
    assert!(load.failures.is_empty(), "{:?}", load.failures);
    assert!(lost.is_empty(), "{lost:?}");
    assert_eq!(continued, chains.len());
    assert!(resurrected.is_empty(), "{resurrected:?}");
    assert!(acknowledged > chains.len(), "load before the backup");
}
