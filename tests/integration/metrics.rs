//! `GET /metrics` on the separate `GATEHOUSE_METRICS_BIND` listener (Prometheus text format).

use crate::helpers::{TestApp, new_client, spawn_app, spawn_app_with};
use crate::oauth_helpers::{
    EMAIL, PASSWORD, REDIRECT, full_grant, refresh, register_public, revoke_on_apps_page,
};
use reqwest::StatusCode;
use serde_json::json;

pub(crate) async fn scrape(app: &TestApp) -> String {
    let port = app.metrics_port.expect("a metrics listener");
    let r = new_client()
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain"),
    );
    r.text().await.unwrap()
}

/// Whether a sample line of `name` carries every one of `labels` and a value above zero.
pub(crate) fn has_sample(body: &str, name: &str, labels: &[&str]) -> bool {
    body.lines().any(|l| {
        l.starts_with(&format!("{name}{{"))
            && labels.iter().all(|lab| l.contains(lab))
            && l.rsplit(' ')
                .next()
                .and_then(|v| v.parse::<f64>().ok())
                .is_some_and(|v| v > 0.0)
    })
}

#[tokio::test]
async fn metrics_are_off_by_default_and_never_on_the_main_port() {
    let app = spawn_app().await;
    assert_eq!(app.metrics_port, None);
    let r = app.client.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn metrics_count_requests_by_route_template_tokens_sign_ins_and_tools() {
    let app = spawn_app_with(|v| {
        v.insert("GATEHOUSE_METRICS_BIND".into(), "127.0.0.1:0".into());
        v.insert("GATEHOUSE_REFRESH_GRACE_SECONDS".into(), "0".into());
    })
    .await;
    let r = app.client.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND, "not on the main port");
    // Requests, with an id in the path.
    let project = "0f0e0d0c-0b0a-4009-8807-060504030201";
    new_client()
        .get(app.url(&format!("/projects/{project}")))
        .send()
        .await
        .unwrap();
    // A failed sign-in and a successful one.
    app.create_account(EMAIL, PASSWORD).await;
    assert_eq!(
        app.sign_in(&new_client(), EMAIL, "wrong-password")
            .await
            .status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        app.sign_in(&new_client(), EMAIL, PASSWORD).await.status(),
        StatusCode::SEE_OTHER
    );
    // A registration, tokens issued and refreshed, then a reuse.
    register_public(&app, &[REDIRECT]).await;
    let (client_id, tokens) = full_grant(&app).await;
    let old = tokens["refresh_token"].as_str().unwrap().to_string();
    let (s, _) = refresh(&app, &client_id, &old, &[]).await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = refresh(&app, &client_id, &old, &[]).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "reuse of a rotated token");
    // A tool call.
    let browser = crate::oauth_helpers::signed_in_browser(&app).await;
    let token = crate::mcp::token_for(&app, &browser, "mcp:read").await;
    crate::mcp::call(&app, &token, "list_projects", json!({})).await;
    revoke_on_apps_page(&app, &browser).await;

    let body = scrape(&app).await;
    assert!(
        has_sample(
            &body,
            "gatehouse_http_requests_total",
            &[
                "route=\"/projects/{id}\"",
                "status=\"3xx\"",
                "method=\"GET\""
            ]
        ),
        "{body}"
    );
    assert!(has_sample(
        &body,
        "gatehouse_http_requests_total",
        &["route=\"/signin\"", "status=\"4xx\""]
    ));
    assert!(
        has_sample(
            &body,
            "gatehouse_http_request_duration_seconds_bucket",
            &["route=\"/oauth/token\"", "le=\"+Inf\""]
        ),
        "{body}"
    );
    assert!(has_sample(
        &body,
        "gatehouse_signins_total",
        &["outcome=\"failure\""]
    ));
    assert!(has_sample(
        &body,
        "gatehouse_signins_total",
        &["outcome=\"success\""]
    ));
    assert!(has_sample(
        &body,
        "gatehouse_registrations_total",
        &["outcome=\"success\""]
    ));
    assert!(has_sample(
        &body,
        "gatehouse_tokens_total",
        &["event=\"issued\""]
    ));
    assert!(has_sample(
        &body,
        "gatehouse_tokens_total",
        &["event=\"refreshed\""]
    ));
    assert!(has_sample(
        &body,
        "gatehouse_tokens_total",
        &["event=\"reused\""]
    ));
    assert!(has_sample(
        &body,
        "gatehouse_tokens_total",
        &["event=\"revoked\""]
    ));
    assert!(
        has_sample(
            &body,
            "gatehouse_tool_calls_total",
            &["tool=\"list_projects\"", "outcome=\"success\""]
        ),
        "{body}"
    );
    assert!(body.contains("gatehouse_password_queue_depth"), "{body}");
    assert!(
        body.contains("gatehouse_db_pool_connections{state=\"idle\"}"),
        "{body}"
    );
    // No raw path, email or token in any label.
    assert!(!body.contains(project), "raw path in a label");
    assert!(
        !body.contains(EMAIL) && !body.contains("gate_"),
        "a secret or an email in a label"
    );
}
