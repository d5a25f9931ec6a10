//! `PostgreSQL` failover (issue 39, item 4): when the database ends the server's connections (a
//! failover, a restart, an operator's `pg_terminate_backend`: SQLSTATE 57P01 on the next read,
//! a broken pipe on the next write), every route answers 503 with `Retry-After` or succeeds on a
//! fresh connection, never 500, and the server recovers without a restart.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app_with};
use crate::mcp::{alice, modern, send};
use crate::metrics::{sample, scrape};
use crate::oauth_helpers::{REDIRECT, full_grant, refresh};

fn on_postgres() -> bool {
    std::env::var("GATEHOUSE_TEST_BACKEND").as_deref() == Ok("postgres")
}

/// Ends every connection to the app's database but the one asking, as a failover or an
/// operator does; returns how many were ended.
async fn terminate_backends(app: &TestApp) -> i64 {
    use sqlx::Connection;
    let mut admin = sqlx::PgConnection::connect(&app.db.url).await.unwrap();
    let ended: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid()) t",
    )
    .fetch_one(&mut admin)
    .await
    .unwrap();
    let _ = admin.close().await;
    ended
}

/// What one route answered: its name, status, whether `Retry-After` came, and the body.
struct Answer {
    route: &'static str,
    status: StatusCode,
    retry_after: bool,
    body: String,
}

async fn answer(route: &'static str, r: reqwest::RequestBuilder) -> Answer {
    let r = r.send().await.unwrap();
    let status = r.status();
    let retry_after = r.headers().contains_key("retry-after");
    Answer {
        route,
        status,
        retry_after,
        body: r.text().await.unwrap_or_default(),
    }
}

/// The routes of the measurement, each asked once right after the backends ended:
/// dynamic registration, the token endpoint (refresh), an MCP call, the sign-in page, readiness.
async fn ask_every_route(
    app: &TestApp,
    client_id: &str,
    refresh_token: &mut String,
    token: &str,
) -> Vec<Answer> {
    let register = answer(
        "register",
        app.client.post(app.url("/oauth/register")).json(&json!({
            "redirect_uris": [REDIRECT],
            "token_endpoint_auth_method": "none",
            "client_name": "Failover Client",
        })),
    )
    .await;
    let token_answer = answer(
        "token",
        app.client.post(app.url("/oauth/token")).form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token.as_str()),
            ("client_id", client_id),
        ]),
    )
    .await;
    if token_answer.status == StatusCode::OK {
        let body: Value = serde_json::from_str(&token_answer.body).unwrap();
        *refresh_token = body["refresh_token"].as_str().unwrap().to_string();
    }
    let mcp = answer(
        "mcp",
        modern(
            app,
            Some(token),
            "tools/call",
            json!({"name": "list_projects", "arguments": {}}),
        ),
    )
    .await;
    let signin = answer("signin", app.client.get(app.url("/signin"))).await;
    let ready = answer("readyz", app.client.get(app.url("/readyz"))).await;
    vec![register, token_answer, mcp, signin, ready]
}

#[tokio::test]
async fn terminated_database_connections_answer_503_with_retry_after_and_recover() {
    if !on_postgres() {
        return;
    }
    let app = spawn_app_with(|v| {
        v.insert("GATEHOUSE_METRICS_BIND".into(), "127.0.0.1:0".into());
    })
    .await;
    let a = alice(&app).await;
    let database_503s =
        |body: &str| sample(body, "gatehouse_unavailable_total{cause=\"database\"}").unwrap_or(0.0);
    let counted_before = database_503s(&scrape(&app).await);
    let (client_id, tokens) = full_grant(&app).await;
    let mut refresh_token = tokens["refresh_token"].as_str().unwrap().to_string();
    let mut wrong = Vec::new();
    let mut unavailable = 0;
    for _round in 0..6 {
        let ended = terminate_backends(&app).await;
        assert!(ended > 0, "the server holds connections to end");
        for a in ask_every_route(&app, &client_id, &mut refresh_token, &a.token).await {
            match a.status {
                StatusCode::SERVICE_UNAVAILABLE if a.retry_after => unavailable += 1,
                s if s.is_success() => {}
                s => wrong.push(format!(
                    "{}: {s} retry-after={} {}",
                    a.route, a.retry_after, a.body
                )),
            }
        }
    }
    assert!(wrong.is_empty(), "after terminated connections: {wrong:#?}");
    eprintln!("503 with Retry-After: {unavailable} of {} answers", 6 * 5);
    // Each is counted as the database's (other tests may add theirs: at least).
    let counted = database_503s(&scrape(&app).await) - counted_before;
    assert!(
        counted >= f64::from(unavailable),
        "{unavailable} answered, {counted} counted"
    );
    // Recovery without a restart: within a few seconds every route succeeds again.
    let start = Instant::now();
    loop {
        let answers = ask_every_route(&app, &client_id, &mut refresh_token, &a.token).await;
        if answers.iter().all(|a| a.status.is_success()) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "not recovered: {:?}",
            answers
                .iter()
                .map(|a| (a.route, a.status))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (status, body) = refresh(&app, &client_id, &refresh_token, &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _, body) = send(modern(
        &app,
        Some(&a.token),
        "tools/call",
        json!({"name": "list_projects", "arguments": {}}),
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}
