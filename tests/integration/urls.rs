//! Personal MCP URLs (issue "Credentials beyond the browser", bullet 3): `POST <MCP path>/<secret>`
//! for clients that cannot attach a header, made with `gatehouse url create|list|revoke`,
//! resolving to the same principal as a key (kind `personal_url`); read-only and 30 days by
//! default; revoked, expired and unknown URLs get 401 `invalid_token`; the Origin guard applies;
//! the secret never reaches a log line or the audit.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::config_startup::{start_server, wait_ready};
use crate::helpers::{TestApp, TestDb, behind_the_back, spawn_app, spawn_app_with};
use crate::keys::{ALICE, alice, gatehouse};
use crate::mcp::{error_text, modern, ok, send};

/// `gatehouse url create ARGS…`, which must succeed: (url id, secret).
fn create_url(app: &TestApp, args: &[&str]) -> (String, String) {
    let mut all = vec!["url", "create"];
    all.extend_from_slice(args);
    let (success, out, err) = gatehouse(app, &all);
    assert!(success, "{err}");
    let field = |name: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .unwrap_or_else(|| panic!("no {name} in {out}"))
            .to_string()
    };
    let url = field("url");
    let secret = url.rsplit('/').next().unwrap().to_string();
    assert!(secret.starts_with("gate_pu_"), "{url}");
    assert!(url.ends_with(&format!("/mcp/{secret}")), "{url}");
    (field("url_id"), secret)
}

/// A 2026-07-28 `method` request to the personal URL of `secret`, without any header credential.
pub(crate) fn to_url(
    app: &TestApp,
    secret: &str,
    method: &str,
    params: Value,
) -> reqwest::RequestBuilder {
    let request = modern(app, None, method, params).build().unwrap();
    let mut builder = app
        .client
        .post(app.url(&format!("/mcp/{secret}")))
        .body(request.body().unwrap().as_bytes().unwrap().to_vec());
    for (name, value) in request.headers() {
        builder = builder.header(name, value);
    }
    builder
}

/// A `tools/call` through a personal URL: (status, headers, JSON-RPC message).
pub(crate) async fn call_url(
    app: &TestApp,
    secret: &str,
    name: &str,
    args: Value,
) -> (StatusCode, reqwest::header::HeaderMap, Value) {
    send(to_url(
        app,
        secret,
        "tools/call",
        json!({"name": name, "arguments": args}),
    ))
    .await
}

fn project_count(result: &Value) -> usize {
    result["projects"].as_array().map_or(0, Vec::len)
}

pub(crate) fn assert_invalid_token(
    status: StatusCode,
    headers: &reqwest::header::HeaderMap,
    what: &str,
) {
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}");
    let challenge = headers["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.starts_with("Bearer error=\"invalid_token\""),
        "{what}: {challenge}"
    );
}

/// Waits (up to 5 s) for an audit row of `event`.
async fn audit_row(app: &TestApp, event: &str) -> gatehouse::store::audit::AuditRecord {
    for _ in 0..100 {
        if let Some(row) = app
            .store
            .recent_audit(200)
            .await
            .unwrap()
            .into_iter()
            .find(|r| r.event == event)
        {
            return row;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no {event} audit row");
}

#[tokio::test]
async fn a_personal_url_is_read_only_for_thirty_days_by_default_and_audited() {
    let app = spawn_app().await;
    let (alice_id, _, _) = alice(&app).await;
    let (id, secret) = create_url(&app, &["--account", ALICE, "--name", "Phone"]);
    let (status, _, body) = call_url(&app, &secret, "list_projects", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let result = ok(&body["result"]);
    assert_eq!(project_count(&result), 2, "{result}");
    // Read-only: a write tool is refused with a step-up challenge.
    let (status, _, body) = call_url(&app, &secret, "create_note", json!({})).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"], "insufficient_scope");

    // Created, first used and listed without the secret; 30 days by default.
    let created = audit_row(&app, "url_created").await;
    assert_eq!(created.subject.as_deref(), Some(id.as_str()));
    assert_eq!(created.account_id.as_deref(), Some(alice_id.as_str()));
    let first = audit_row(&app, "url_first_use").await;
    assert_eq!(first.subject.as_deref(), Some(id.as_str()));
    let call = audit_row(&app, "tool_call").await;
    assert!(
        call.detail
            .as_deref()
            .unwrap()
            .contains(&format!("credential=personal_url:{id}")),
        "{call:?}"
    );
    let (_, list, _) = gatehouse(&app, &["url", "list", "--account", ALICE]);
    let line = list.lines().find(|l| l.starts_with(&id)).expect("listed");
    assert!(
        line.contains("read-only") && line.contains("Phone"),
        "{line}"
    );
    assert!(!line.contains("\tnever\tactive"), "last use shown: {line}");
    assert!(!list.contains(&secret));
    let record = app.store.personal_url(&id).await.unwrap().unwrap();
    let lifetime = record.expires_at.unwrap() - record.created_at;
    assert!((lifetime - 30 * 86_400).abs() <= 1, "{lifetime}");
    for row in app.store.recent_audit(200).await.unwrap() {
        assert!(!format!("{row:?}").contains(&secret), "{row:?}");
    }

    // A read-write URL passes the scope check.
    let (_, writer) = create_url(&app, &["--account", ALICE, "--write", "--expires", "2d"]);
    let (status, _, body) = call_url(&app, &writer, "create_note", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn revoked_expired_unknown_and_out_of_project_urls_are_refused() {
    let app = spawn_app().await;
    let (_, research, garden) = alice(&app).await;
    let (revoked_id, revoked) = create_url(&app, &["--account", ALICE]);
    let (expired_id, expired) = create_url(&app, &["--account", ALICE]);
    for secret in [&revoked, &expired] {
        let (status, _, body) = call_url(&app, secret, "list_projects", json!({})).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (success, out, err) = gatehouse(&app, &["url", "revoke", &revoked_id]);
    assert!(success && out.contains(&revoked_id), "{err}");
    behind_the_back(
        &app,
        sqlx::query("UPDATE personal_urls SET expires_at = $1 WHERE id = $2")
            .bind(gatehouse::store::now() - 1)
            .bind(&expired_id)
            .execute(app.db.pool().await),
    )
    .await
    .unwrap();
    let unknown = format!("gate_pu_{}", "A".repeat(43));
    for (what, secret) in [
        ("revoked", revoked.as_str()),
        ("expired", expired.as_str()),
        ("unknown", unknown.as_str()),
        ("an API key in the path", "gate_key_whatever"),
    ] {
        let (status, headers, _) = call_url(&app, secret, "list_projects", json!({})).await;
        assert_invalid_token(status, &headers, what);
    }
    let revocation = audit_row(&app, "url_revoked").await;
    assert_eq!(revocation.subject.as_deref(), Some(revoked_id.as_str()));
    let (success, _, err) = gatehouse(&app, &["url", "revoke", &revoked_id]);
    assert!(!success && err.contains("already revoked"), "{err}");

    // A project URL reaches its project only.
    let (_, project) = create_url(&app, &["--account", ALICE, "--project", &research]);
    let (status, _, body) = call_url(&app, &project, "list_projects", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let result = ok(&body["result"]);
    assert_eq!(project_count(&result), 1, "{result}");
    assert_eq!(result["projects"][0]["id"], research);
    // The account's other project answers exactly like one that does not exist.
    let missing = "3f2b7a44-0000-4000-8000-000000000000";
    let mut texts = Vec::new();
    for id in [garden.as_str(), missing] {
        let (status, _, body) =
            call_url(&app, &project, "get_project", json!({"project_id": id})).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        texts.push(error_text(&body["result"]).replace(id, "ID"));
    }
    assert_eq!(texts[0], texts[1]);
}

#[tokio::test]
async fn the_origin_guard_applies_and_oauth_off_still_serves_urls() {
    let app = spawn_app_with(|v| {
        v.insert("GATEHOUSE_OAUTH".into(), "off".into());
    })
    .await;
    alice(&app).await;
    let (_, secret) = create_url(&app, &["--account", ALICE]);
    let (status, _, body) = call_url(&app, &secret, "list_projects", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _, _) = send(
        to_url(&app, &secret, "tools/list", json!({})).header("origin", "https://evil.example"),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // One credential per request: a header besides the URL's secret is refused.
    let (status, _, _) =
        send(to_url(&app, &secret, "tools/list", json!({})).header("x-api-key", "gate_key_x"))
            .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, headers, _) = call_url(&app, "gate_pu_unknown", "list_projects", json!({})).await;
    assert_invalid_token(status, &headers, "unknown");
    assert!(
        !headers["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("resource_metadata")
    );
}

#[tokio::test]
async fn the_secret_never_reaches_the_servers_log() {
    let db = TestDb::for_app().await;
    let (mut child, port) = start_server(&[
        ("DATABASE_URL", db.url.as_str()),
        ("RUST_LOG", "trace"),
        ("GATEHOUSE_BOOTSTRAP_EMAIL", ALICE),
        ("GATEHOUSE_BOOTSTRAP_PASSWORD", "a-long-password"),
    ]);
    // The log is read from the start while the server runs, so a full pipe never blocks it
    // (at trace level the migrations alone log more than a pipe holds).
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::Read;
        let mut log = String::new();
        let _ = { stderr }.read_to_string(&mut log);
        log
    });
    wait_ready(port);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .args(["url", "create", "--account", ALICE])
        .env("DATABASE_URL", &db.url)
        .env("MCP_SERVER_URL", format!("http://127.0.0.1:{port}/mcp"))
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    let printed = String::from_utf8(out.stdout).unwrap();
    let url = printed
        .lines()
        .find_map(|l| l.strip_prefix("url: "))
        .unwrap_or_else(|| panic!("{printed}"))
        .to_string();
    let secret = url.rsplit('/').next().unwrap().to_string();
    let client = crate::helpers::client_builder().build().unwrap();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "list_projects", "arguments": {}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}}});
    for target in [url.clone(), format!("{url}/extra"), format!("{url}?x=1")] {
        client
            .post(&target)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "list_projects")
            .json(&body)
            .send()
            .await
            .unwrap();
    }
    let r = client
        .post(&url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "list_projects")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let log = tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let mut log = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut log)
            .unwrap();
        child.wait().unwrap();
        log + &reader.join().unwrap()
    })
    .await
    .unwrap();
    let hex = &secret["gate_pu_".len()..];
    assert!(
        log.contains("route=\"/mcp/{secret}\""),
        "the route template is logged: {log}"
    );
    assert!(!log.contains(hex), "the secret leaked into the log");
}

#[tokio::test]
async fn errors_on_a_personal_url_are_json_rpc_errors_like_on_the_mcp_route() {
    let app = spawn_app().await;
    alice(&app).await;
    let (_, secret) = create_url(&app, &["--account", ALICE]);
    let url = app.url(&format!("/mcp/{secret}"));
    let get = app.client.get(&url).send().await.unwrap();
    assert_eq!(get.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(get.headers()["allow"], "POST");
    assert_eq!(get.headers()["content-type"], "application/json");
    let body: Value = get.json().await.unwrap();
    assert_eq!(body["jsonrpc"], "2.0");
    assert!(body["error"]["code"].is_i64(), "{body}");
    let plain = app
        .client
        .post(&url)
        .header("content-type", "text/plain")
        .header("accept", "application/json")
        .body("hello")
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let body: Value = plain.json().await.unwrap();
    assert_eq!(body["jsonrpc"], "2.0", "{body}");
}
