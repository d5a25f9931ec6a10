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
    // The tool call listed the account's projects through the hot-read dispatcher, on the
    // path of its engine.
    // On SQLite in place, or through the pool while another test of this process has just
    // found a file unwritable (in-place reads pause process-wide, `UNWRITABLE_PAUSE`).
    let paused = app.store.in_place_stats().is_some_and(|s| s.paused > 0);
    let paths: &[&str] = match app.store.backend() {
        gatehouse::store::Backend::Postgres => &["batched"],
        gatehouse::store::Backend::Sqlite if paused => &["in_place", "pool"],
        gatehouse::store::Backend::Sqlite => &["in_place"],
    };
    assert!(
        paths.iter().any(|path| has_sample(
            &body,
            "gatehouse_hot_reads_total",
            &[
                "lookup=\"projects_of_account\"",
                &format!("path=\"{path}\"")
            ]
        )),
        "{body}"
    );
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

/// The value of the sample line `series` (name and labels exactly as written), if present.
pub(crate) fn sample(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Every series of the scrape has its `# HELP` and `# TYPE` lines (Prometheus text format
/// 0.0.4; a histogram's `_bucket`, `_sum` and `_count` samples belong to its base name); the
/// counters of fixed label sets are there before their first event; `gatehouse_build_info`
/// carries the crate's version; the process series are read from `/proc/self`.
#[tokio::test]
async fn every_series_has_help_and_type_and_counters_start_at_zero() {
    let app = spawn_app_with(|v| {
        v.insert("GATEHOUSE_METRICS_BIND".into(), "127.0.0.1:0".into());
    })
    .await;
    // One request, so the request series exist too.
    app.client.get(app.url("/healthz")).send().await.unwrap();
    let body = scrape(&app).await;
    let mut missing = Vec::new();
    for line in body
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let name = line.split(['{', ' ']).next().unwrap();
        let histogram = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix))
            .filter(|base| body.contains(&format!("# TYPE {base} histogram")));
        let base = histogram.unwrap_or(name);
        for kind in ["HELP", "TYPE"] {
            if !body.contains(&format!("# {kind} {base} ")) {
                missing.push(format!("{kind} {base}"));
            }
        }
    }
    missing.dedup();
    assert!(
        missing.is_empty(),
        "series without HELP/TYPE: {missing:?}\n{body}"
    );
    // Present from zero (other tests in this process may have counted some already).
    for series in [
        "gatehouse_tokens_total{event=\"issued\"}",
        "gatehouse_tokens_total{event=\"refreshed\"}",
        "gatehouse_tokens_total{event=\"reused\"}",
        "gatehouse_tokens_total{event=\"revoked\"}",
        "gatehouse_registrations_total{outcome=\"success\"}",
        "gatehouse_registrations_total{outcome=\"throttled\"}",
        "gatehouse_signins_total{outcome=\"success\"}",
        "gatehouse_signins_total{outcome=\"failure\"}",
        "gatehouse_signins_total{outcome=\"throttled\"}",
        "gatehouse_signins_total{outcome=\"busy\"}",
        "gatehouse_unavailable_total{cause=\"database\"}",
        "gatehouse_unavailable_total{cause=\"password_workers\"}",
        "gatehouse_unavailable_total{cause=\"other\"}",
        "gatehouse_connections_refused_total",
        "gatehouse_events_sent_total",
        "gatehouse_events_dropped_total{reason=\"queue_full\"}",
        "gatehouse_pruned_rows_total{what=\"audit_events\"}",
        "gatehouse_pruned_rows_total{what=\"access_tokens\"}",
        "gatehouse_pruned_rows_total{what=\"refresh_tokens\"}",
        "gatehouse_pruned_rows_total{what=\"token_families\"}",
        "gatehouse_pruned_rows_total{what=\"authorization_codes\"}",
        "gatehouse_pruned_rows_total{what=\"authorization_requests\"}",
        "gatehouse_pruned_rows_total{what=\"setup_tokens\"}",
        "gatehouse_pruned_rows_total{what=\"password_reset_tokens\"}",
        "gatehouse_pruned_rows_total{what=\"project_invitations\"}",
        "gatehouse_pruned_rows_total{what=\"signin_devices\"}",
        "gatehouse_pruned_rows_total{what=\"client_assertion_jtis\"}",
        "gatehouse_pruned_rows_total{what=\"spent_confirmations\"}",
        "gatehouse_pruned_rows_total{what=\"device_authorizations\"}",
        "gatehouse_pruned_rows_total{what=\"idp_signins\"}",
        "gatehouse_pruned_rows_total{what=\"rate_limits\"}",
        "gatehouse_pruned_rows_total{what=\"sessions\"}",
    ] {
        assert!(
            sample(&body, series).is_some_and(|v| v >= 0.0),
            "{series} missing\n{body}"
        );
    }
    // Every built-in tool by every outcome, before any call.
    for tool in [
        "list_projects",
        "get_project",
        "search_notes",
        "get_note",
        "create_note",
        "update_note",
        "export_project",
        "get_job",
    ] {
        for outcome in [
            "success",
            "continued",
            "invalid_arguments",
            "not_found",
            "forbidden",
            "error",
            "unavailable",
        ] {
            let series =
                format!("gatehouse_tool_calls_total{{tool=\"{tool}\",outcome=\"{outcome}\"}}");
            assert!(
                sample(&body, &series).is_some_and(|v| v >= 0.0),
                "{series} missing\n{body}"
            );
        }
    }
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        sample(
            &body,
            &format!("gatehouse_build_info{{version=\"{version}\"}}")
        ),
        Some(1.0),
        "{body}"
    );
    assert!(
        body.contains("# TYPE process_cpu_seconds_total counter"),
        "{body}"
    );
    assert!(sample(&body, "process_cpu_seconds_total").is_some_and(|v| v > 0.0));
    // The test process holds a few MiB at least, and its database and sockets open.
    assert!(sample(&body, "process_resident_memory_bytes").is_some_and(|v| v > 4.0 * 1048576.0));
    assert!(sample(&body, "process_open_fds").is_some_and(|v| v >= 5.0));
    assert!(sample(&body, "process_max_fds").is_some());
}

/// A 503 is counted by its cause: sign-ins turned away because every password worker is
/// busy are `cause="password_workers"`.
#[tokio::test]
async fn busy_password_workers_are_counted_as_503s_by_cause() {
    let app = spawn_app_with(|v| {
        v.insert("GATEHOUSE_METRICS_BIND".into(), "127.0.0.1:0".into());
        v.insert("GATEHOUSE_PASSWORD_WORKERS".into(), "1".into());
        v.insert("GATEHOUSE_PASSWORD_QUEUE".into(), "1".into());
    })
    .await;
    let counted = |body: &str| {
        sample(
            body,
            "gatehouse_unavailable_total{cause=\"password_workers\"}",
        )
        .unwrap_or(0.0)
    };
    let before = counted(&scrape(&app).await);
    let mut burst = Vec::new();
    for i in 0..16 {
        let url = app.url("/signin");
        burst.push(tokio::spawn(async move {
            let client = new_client();
            let page = client.get(&url).send().await.unwrap().text().await.unwrap();
            let csrf = crate::helpers::hidden_input(&page, "csrf_token").unwrap();
            client
                .post(&url)
                .form(&[
                    ("csrf_token", csrf.as_str()),
                    ("next", "/"),
                    ("email", format!("nobody{i}@example.com").as_str()),
                    ("password", "wrong-password"),
                ])
                .send()
                .await
                .unwrap()
                .status()
        }));
    }
    let mut busy = 0.0;
    for t in burst {
        if t.await.unwrap() == StatusCode::SERVICE_UNAVAILABLE {
            busy += 1.0;
        }
    }
    assert!(busy >= 1.0, "no attempt was turned away");
    let after = counted(&scrape(&app).await);
    assert!(
        after - before >= busy,
        "{busy} busy answers, counted {}",
        after - before
    );
}
