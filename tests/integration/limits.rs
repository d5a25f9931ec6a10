//! What anonymous callers can make the server do: registrations per address and in size,
//! unused clients expiring, no session rows for anonymous pages, and a bounded password queue
//! that leaves token work alone.

use std::time::{Duration, Instant};

use crate::helpers::{
    TestApp, hidden_input, new_client, new_client_from, spawn_app, spawn_app_with,
};
use crate::oauth_helpers::{
    EMAIL, PASSWORD, REDIRECT, authorize_url, consent_request, decide, full_grant, pkce, query_of,
    refresh, register_public, signed_in_browser,
};
use gatehouse::store::Backend;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// Registers a public client from `client` with `padding` bytes of an unknown member.
async fn register(app: &TestApp, client: &reqwest::Client, padding: usize) -> reqwest::Response {
    client
        .post(app.url("/oauth/register"))
        .json(&json!({
            "redirect_uris": [REDIRECT],
            "token_endpoint_auth_method": "none",
            "client_name": "Test Client",
            "x_padding": "x".repeat(padding),
        }))
        .send()
        .await
        .unwrap()
}

/// Checks a refused registration: 429, `Retry-After` within the hour, an RFC 6749 §5.2-shaped
/// JSON error that is not cached.
async fn assert_refused(r: reqwest::Response) {
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=3600).contains(&wait), "{wait}");
    assert_eq!(r.headers()["cache-control"], "no-store");
    let body: Value = r.json().await.unwrap();
    assert!(body["error"].is_string(), "{body}");
    assert!(body["error_description"].is_string(), "{body}");
}

// RFC 7591 §3 lets a server limit registrations; anonymous callers must not grow the database
// without bound.
#[tokio::test]
async fn registrations_are_limited_per_address_per_hour() {
    let app = spawn_app_with(|v| {
        v.insert("GATEHOUSE_REGISTRATIONS_PER_HOUR".into(), "3".into());
    })
    .await;
    let client = new_client();
    for _ in 0..3 {
        assert_eq!(
            register(&app, &client, 0).await.status(),
            StatusCode::CREATED
        );
    }
    assert_refused(register(&app, &client, 0).await).await;
    assert_eq!(app.store.recent_audit(100).await.unwrap().len(), 3);
    // Another address has its own budget.
    let other = new_client_from("127.0.0.2");
    assert_eq!(
        register(&app, &other, 0).await.status(),
        StatusCode::CREATED
    );
}

#[tokio::test]
async fn registrations_are_limited_in_total_size_per_address() {
    let app = spawn_app_with(|v| {
        v.insert(
            "GATEHOUSE_REGISTRATION_BYTES_PER_HOUR".into(),
            "20000".into(),
        );
    })
    .await;
    let client = new_client();
    for _ in 0..2 {
        assert_eq!(
            register(&app, &client, 9000).await.status(),
            StatusCode::CREATED
        );
    }
    assert_refused(register(&app, &client, 9000).await).await;
    // A small one still fits in what is left of the hour's budget.
    assert_eq!(
        register(&app, &client, 0).await.status(),
        StatusCode::CREATED
    );
    let other = new_client_from("127.0.0.2");
    assert_eq!(
        register(&app, &other, 9000).await.status(),
        StatusCode::CREATED
    );
}

#[tokio::test]
async fn clients_that_never_authorized_expire_and_clients_with_a_grant_stay() {
    let app = spawn_app().await;
    let unused = register_public(&app, &[REDIRECT]).await;
    let (granted, tokens) = full_grant(&app).await;
    // A client made on the command line has no redirect URI and never authorizes: it stays.
    let service = "gc_service_client";
    app.store
        .create_client(&gatehouse::store::oauth::ClientRecord {
            client_id: service.into(),
            client_secret_hash: Some(gatehouse::domain::secret::TokenHash::of("service-secret")),
            token_endpoint_auth_method: "client_secret_basic".into(),
            client_name: Some("Service".into()),
            redirect_uris: Vec::new(),
            grant_types: Vec::new(),
            scope: None,
            metadata: json!({"client_name": "Service"}),
            can_introspect: true,
            created_at: 1,
        })
        .await
        .unwrap();
    let now = gatehouse::store::now();
    // Nothing younger than the cut-off goes.
    assert_eq!(
        app.store
            .expire_unused_clients(now - 60, now)
            .await
            .unwrap(),
        0
    );
    assert!(app.store.client(&unused).await.unwrap().is_some());
    // Past the cut-off, only the client that never completed an authorization goes.
    assert_eq!(
        app.store.expire_unused_clients(now + 1, now).await.unwrap(),
        1
    );
    assert!(app.store.client(&unused).await.unwrap().is_none());
    assert!(app.store.client(&granted).await.unwrap().is_some());
    assert!(app.store.client(service).await.unwrap().is_some());
    let (status, body) = refresh(
        &app,
        &granted,
        tokens["refresh_token"].as_str().unwrap(),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "the live grant still works: {body}");
    // The expired client is unknown now: an error page, never a redirect or a 500.
    let (_, challenge) = pkce();
    let r = app
        .client
        .get(authorize_url(&app, &unused, &challenge, &[]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
}

// A client whose consent page is open right now is not expired under the person's feet.
#[tokio::test]
async fn a_client_with_an_open_consent_page_does_not_expire() {
    let app = spawn_app().await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let browser = signed_in_browser(&app).await;
    let (_, challenge) = pkce();
    let request = consent_request(&app, &browser, &client_id, &challenge).await;
    let now = gatehouse::store::now();
    assert_eq!(
        app.store.expire_unused_clients(now + 1, now).await.unwrap(),
        0
    );
    let home = browser
        .get(app.url("/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = hidden_input(&home, "csrf_token").unwrap();
    let r = decide(&app, &browser, &csrf, &request, "approve").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let location = r.headers()["location"].to_str().unwrap().to_string();
    assert!(query_of(&location).contains_key("code"), "{location}");
}

/// Rows in the session table.
async fn session_rows(app: &TestApp) -> i64 {
    let sql = match app.store.backend() {
        Backend::Sqlite => "SELECT COUNT(*) FROM tower_sessions",
        Backend::Postgres => "SELECT COUNT(*) FROM tower_sessions.session",
    };
    sqlx::query_scalar(sql)
        .fetch_one(app.db.pool().await)
        .await
        .unwrap()
}

// An anonymous page view writes nothing: no session row until a session holds something.
#[tokio::test]
async fn anonymous_pages_write_no_session_row() {
    let app = spawn_app().await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let token = gatehouse::domain::secret::Secret::generate(
        gatehouse::domain::secret::TokenKind::SetupToken,
    );
    let now = gatehouse::store::now();
    app.store
        .create_setup_token(&token.hash(), now, now + 60)
        .await
        .unwrap();
    let (_, challenge) = pkce();
    let browser = new_client();
    for path in [
        "/signin".to_string(),
        "/".to_string(),
        "/apps".to_string(),
        format!("/setup?token={}", token.expose()),
        authorize_url(&app, &client_id, &challenge, &[]).replace(&app.address, ""),
    ] {
        let r = browser.get(app.url(&path)).send().await.unwrap();
        assert!(
            r.status().is_success() || r.status().is_redirection(),
            "{path}"
        );
        assert!(
            r.headers()
                .get_all("set-cookie")
                .iter()
                .all(|c| !c.to_str().unwrap().starts_with("gatehouse_session=")),
            "{path}: no session cookie"
        );
    }
    // The account is made after the setup page was seen (a setup link is void once one exists).
    app.create_account(EMAIL, PASSWORD).await;
    let r = app.sign_in(&browser, EMAIL, "wrong-password").await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        session_rows(&app).await,
        0,
        "anonymous requests wrote sessions"
    );
    // The form's token belongs to the browser that fetched it.
    let page = browser
        .get(app.url("/signin"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = hidden_input(&page, "csrf_token").unwrap();
    let other = new_client();
    other.get(app.url("/signin")).send().await.unwrap();
    let r = other
        .post(app.url("/signin"))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("next", "/"),
            ("email", EMAIL),
            ("password", PASSWORD),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    // The setup form too.
    let r = other
        .post(app.url("/setup"))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("token", token.expose()),
            ("email", "eve@example.com"),
            ("password", PASSWORD),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(app.store.count_accounts().await.unwrap(), 1);
    // Signing in creates the one session.
    let r = app.sign_in(&browser, EMAIL, PASSWORD).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(session_rows(&app).await, 1);
    let home = browser.get(app.url("/")).send().await.unwrap();
    assert_eq!(home.status(), StatusCode::OK);
}

// Password checks run on a fixed pool behind a bounded queue: a burst beyond it is answered
// 503 with Retry-After, and token work does not wait for password work.
#[tokio::test]
async fn a_full_password_queue_answers_503_while_token_requests_stay_prompt() {
    let app = spawn_app_with(|v| {
        v.insert("GATEHOUSE_PASSWORD_WORKERS".into(), "1".into());
        v.insert("GATEHOUSE_PASSWORD_QUEUE".into(), "1".into());
    })
    .await;
    let (client_id, tokens) = full_grant(&app).await;
    let mut burst = Vec::new();
    for i in 0..24 {
        let url = app.url("/signin");
        burst.push(tokio::spawn(async move {
            let client = new_client();
            let page = client.get(&url).send().await.unwrap().text().await.unwrap();
            let csrf = hidden_input(&page, "csrf_token").unwrap();
            let r = client
                .post(&url)
                .form(&[
                    ("csrf_token", csrf.as_str()),
                    ("next", "/"),
                    ("email", format!("nobody{i}@example.com").as_str()),
                    ("password", "wrong-password"),
                ])
                .send()
                .await
                .unwrap();
            let retry = r.headers().get("retry-after").is_some();
            (r.status(), retry)
        }));
    }
    // Token requests during the burst answer promptly.
    let mut refresh_token = tokens["refresh_token"].as_str().unwrap().to_string();
    for _ in 0..3 {
        let started = Instant::now();
        let (status, body) = refresh(&app, &client_id, &refresh_token, &[]).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "refresh took {:?}",
            started.elapsed()
        );
        refresh_token = body["refresh_token"].as_str().unwrap().to_string();
    }
    let (mut busy, mut checked) = (0, 0);
    for t in burst {
        match t.await.unwrap() {
            (StatusCode::SERVICE_UNAVAILABLE, true) => busy += 1,
            (StatusCode::UNAUTHORIZED, _) => checked += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(busy >= 1, "no attempt was turned away ({checked} checked)");
    assert!(checked >= 1, "none was checked ({busy} turned away)");
}

/// One field of `/proc/PID/status` in KiB (Linux), e.g. `RssAnon` or `VmHWM`.
fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// The server's own memory during a flood, in KiB: anonymous resident memory (heap, stacks,
/// argon2 blocks; the executable's mapped code is left out, since a debug build's is several
/// times a release build's) when idle and at its highest, sampled every 2 ms.
struct FloodMemory {
    idle_anon: u64,
    peak_anon: u64,
}

/// Runs `gatehouse serve` with `workers` password workers, floods its sign-in page with three
/// waves of 48 concurrent wrong sign-ins from as many addresses, and returns its memory.
async fn flood_memory(workers: &str) -> FloodMemory {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("g.db").display());
    let (mut child, port) = crate::config_startup::start_server(&[
        ("DATABASE_URL", &db),
        ("GATEHOUSE_PASSWORD_WORKERS", workers),
        ("RUST_LOG", "error"),
    ]);
    crate::config_startup::wait_ready(port);
    let pid = child.id();
    // Idle: after one page is served, so lazily made pools and caches are counted as idle.
    let base = format!("http://127.0.0.1:{port}");
    new_client()
        .get(format!("{base}/signin"))
        .send()
        .await
        .unwrap();
    let idle_anon = status_kib(pid, "RssAnon").expect("RssAnon in /proc/PID/status");
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut peak = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(status_kib(pid, "RssAnon").unwrap_or(0));
                std::thread::sleep(Duration::from_millis(2));
            }
            peak
        })
    };
    for wave in 1..=3 {
        let mut tasks = Vec::new();
        for i in 2..50 {
            let base = base.clone();
            tasks.push(tokio::spawn(async move {
                let client = new_client_from(&format!("127.0.{wave}.{i}"));
                let page = client
                    .get(format!("{base}/signin"))
                    .send()
                    .await
                    .unwrap()
                    .text()
                    .await
                    .unwrap();
                let csrf = hidden_input(&page, "csrf_token").unwrap();
                client
                    .post(format!("{base}/signin"))
                    .form(&[
                        ("csrf_token", csrf.as_str()),
                        ("next", "/"),
                        ("email", format!("nobody-{wave}-{i}@example.com").as_str()),
                        ("password", "wrong-password"),
                    ])
                    .send()
                    .await
                    .unwrap()
                    .status()
            }));
        }
        for t in tasks {
            let status = t.await.unwrap();
            assert!(
                status == StatusCode::UNAUTHORIZED || status == StatusCode::SERVICE_UNAVAILABLE,
                "{status}"
            );
        }
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let peak_anon = sampler.join().unwrap();
    eprintln!(
        "whole process at its highest (VmHWM): {:?} KiB",
        status_kib(pid, "VmHWM")
    );
    let _ = child.kill();
    let _ = child.wait();
    FloodMemory {
        idle_anon,
        peak_anon,
    }
}

// Resident memory stays bounded during a sign-in flood: a fixed number of workers, each with
// one argon2 block of 19 MiB (RFC 9106 §4's second choice, m = 19456 KiB), whatever the number
// of concurrent attempts. The flood may add the workers' blocks and what 48 connections hold,
// never memory per attempt (144 attempts of 19 MiB each would be 2.7 GiB).
#[tokio::test]
async fn a_sign_in_flood_leaves_resident_memory_bounded() {
    let m = flood_memory("2").await;
    eprintln!(
        "anonymous memory with 2 password workers: idle {} KiB, peak {} KiB",
        m.idle_anon, m.peak_anon
    );
    let argon2_block = 19 * 1024;
    let growth = m.peak_anon.saturating_sub(m.idle_anon);
    // The sampling saw the flood: a password worker's block was resident at some point.
    assert!(
        growth >= argon2_block,
        "the flood added only {growth} KiB: the sampling missed the hashing"
    );
    assert!(
        growth <= 2 * argon2_block + 16 * 1024,
        "the flood added {growth} KiB: more than two argon2 blocks and 16 MiB"
    );
    assert!(
        m.peak_anon < 100 * 1024,
        "the server's own memory reached {} KiB",
        m.peak_anon
    );
}
