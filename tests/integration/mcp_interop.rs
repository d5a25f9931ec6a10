//! What real MCP clients and field cases need from the MCP route: content negotiation on
//! `Accept`, loopback browser origins, one `Host`, bounded results at the lowest limit, portable
//! schemas, and a shutdown that ends in time while a request is in flight.

use std::time::{Duration, Instant};

use crate::helpers::{TestApp, spawn_app, spawn_app_with};
use crate::mcp::{V26, alice, call, mcp_url, ok, rpc};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TOOLS_LIST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;

/// `tools/list` (2025-06-18, no `_meta`) with `accept` as the `Accept` header (`None`: none).
fn tools_list(app: &TestApp, token: &str, accept: Option<&str>) -> reqwest::RequestBuilder {
    let mut r = app
        .client
        .post(mcp_url(app))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-06-18")
        .body(TOOLS_LIST);
    if let Some(accept) = accept {
        r = r.header("accept", accept);
    }
    r
}

/// The JSON-RPC messages of a `text/event-stream` body (its `data:` lines).
fn sse_messages(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(|data| serde_json::from_str(data.trim()).expect("each data line is JSON"))
        .collect()
}

#[tokio::test]
async fn accept_is_read_leniently_and_406_is_a_json_rpc_error() {
    let app = spawn_app().await;
    let a = alice(&app).await;
    // JSON whenever the client takes it or says nothing about it.
    for accept in [
        Some("application/json"),
        None,
        Some("*/*"),
        Some("application/*"),
        Some("application/json, text/event-stream"),
        Some("text/event-stream;q=0.5, application/json"),
        Some("text/html, */*;q=0.1"),
    ] {
        let r = tools_list(&app, &a.token, accept).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{accept:?}");
        assert!(
            r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("application/json"),
            "{accept:?}: {:?}",
            r.headers()["content-type"]
        );
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["id"], 1, "{accept:?}");
        assert_eq!(body["result"]["tools"].as_array().unwrap().len(), 8);
    }
    // Only the event stream: one SSE event carrying the response.
    for accept in [
        "text/event-stream",
        "text/event-stream, application/json;q=0",
        "text/*",
    ] {
        let r = tools_list(&app, &a.token, Some(accept))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{accept}");
        assert!(
            r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream"),
            "{accept}: {:?}",
            r.headers()["content-type"]
        );
        let messages = sse_messages(&r.text().await.unwrap());
        assert_eq!(messages.len(), 1, "{accept}");
        assert_eq!(messages[0]["id"], 1);
        assert_eq!(messages[0]["result"]["tools"].as_array().unwrap().len(), 8);
    }
    // Neither: 406 with a JSON-RPC error body.
    for accept in ["text/html", "application/json;q=0", "image/png, text/plain"] {
        let r = tools_list(&app, &a.token, Some(accept))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::NOT_ACCEPTABLE, "{accept}");
        assert!(
            r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("application/json")
        );
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["jsonrpc"], "2.0");
        assert_eq!(body["error"]["code"], -32600, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("Not Acceptable")
        );
    }
    // A notification from a JSON-only client is accepted (202, no body).
    let r = app
        .client
        .post(mcp_url(&app))
        .bearer_auth(&a.token)
        .header("accept", "application/json")
        .header("mcp-protocol-version", "2025-06-18")
        .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    // The modern revision from a JSON-only client, a tool call included.
    let r = app
        .client
        .post(mcp_url(&app))
        .bearer_auth(&a.token)
        .header("accept", "application/json")
        .header("mcp-protocol-version", V26)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "list_projects")
        .json(
            &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "list_projects", "arguments": {},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": V26,
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": {"name": "json-only", "version": "1"}
                }
            }}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["result"]["isError"], false, "{body}");
}

/// `ping` with an `Origin`, with and without a token; the status and the CORS answer.
async fn ping_from(
    app: &TestApp,
    origin: &str,
    token: Option<&str>,
) -> (StatusCode, Option<String>) {
    let mut r = app
        .client
        .post(mcp_url(app))
        .header("origin", origin)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}));
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    let r = r.send().await.unwrap();
    let allow = r
        .headers()
        .get("access-control-allow-origin")
        .map(|v| v.to_str().unwrap().to_string());
    (r.status(), allow)
}

#[tokio::test]
async fn loopback_origins_are_served_on_a_loopback_server_and_foreign_ones_refused() {
    let app = spawn_app().await;
    let a = alice(&app).await;
    for origin in [
        "http://localhost:6274",
        "http://127.0.0.1:9",
        "http://[::1]:3000",
        "http://localhost",
        "http://127.0.0.2:5173",
    ] {
        let (status, allow) = ping_from(&app, origin, Some(&a.token)).await;
        assert_eq!(status, StatusCode::OK, "{origin}");
        assert_eq!(
            allow.as_deref(),
            Some(origin),
            "{origin}: readable by the page"
        );
        // The preflight agrees.
        let r = app
            .client
            .request(reqwest::Method::OPTIONS, mcp_url(&app))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization, content-type",
            )
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{origin}");
        assert_eq!(r.headers()["access-control-allow-origin"], origin);
    }
    for origin in [
        "https://evil.example",
        "http://localhost.evil.example",
        "http://127.0.0.1.nip.io:8080",
        "http://10.0.0.1:8080",
        "http://0.0.0.0:8080",
        "null",
    ] {
        let (status, allow) = ping_from(&app, origin, Some(&a.token)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{origin}");
        assert_eq!(allow, None, "{origin}");
        let (status, _) = ping_from(&app, origin, None).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{origin}");
    }

    // A public deployment: loopback pages are foreign to it.
    let public = spawn_app_with(|v| {
        v.insert("GATEHOUSE_BIND".into(), "0.0.0.0:8080".into());
        v.insert(
            "MCP_SERVER_URL".into(),
            "https://mcp.example.com/mcp".into(),
        );
    })
    .await;
    let (status, _) = ping_from(&public, "http://localhost:6274", None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = ping_from(&public, "https://mcp.example.com", None).await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "its own origin reaches authentication"
    );
}

#[tokio::test]
async fn an_origin_must_be_one_serialized_origin() {
    let app = spawn_app().await;
    let a = alice(&app).await;
    // RFC 6454 §7.1: `scheme "://" host [ ":" port ]`, nothing else.
    for origin in [
        "http://evil.com@localhost",
        "http://localhost:1/path",
        "http://localhost:1?x",
        "http://127.0.0.1:6274#x",
        "http://127.0.0.1:6274/",
        "http://localhost:",
        "http://localhost:x",
        "http:/localhost",
    ] {
        let (status, allow) = ping_from(&app, origin, Some(&a.token)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{origin}");
        assert_eq!(allow, None, "{origin}");
    }
    // One Origin only (RFC 6454 §7.3), whatever the order of two.
    for pair in [
        ["http://127.0.0.1:6274", "http://evil.com"],
        ["http://evil.com", "http://127.0.0.1:6274"],
        ["http://127.0.0.1:6274", "http://127.0.0.1:6274"],
    ] {
        let r = app
            .client
            .post(mcp_url(&app))
            .bearer_auth(&a.token)
            .header("origin", pair[0])
            .header("origin", pair[1])
            .header("accept", "application/json, text/event-stream")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "{pair:?}");
    }
    // The control.
    let (status, _) = ping_from(&app, "http://127.0.0.1:6274", Some(&a.token)).await;
    assert_eq!(status, StatusCode::OK);
}

/// Sends `head` (request line and header lines, without the blank line) and `body` over a raw
/// connection to the app; the response's status code.
async fn raw_status(app: &TestApp, head: &str, body: &str) -> u16 {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", app.port))
        .await
        .unwrap();
    let request = format!(
        "{head}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut response))
        .await
        .expect("answered")
        .unwrap();
    let text = String::from_utf8_lossy(&response);
    text.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {text}"))
}

#[tokio::test]
async fn one_host_duplicates_are_400_and_an_absolute_target_names_the_host() {
    let app = spawn_app().await;
    let a = alice(&app).await;
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let auth = format!("Authorization: Bearer {}", a.token);
    let own = format!("127.0.0.1:{}", app.port);
    // The control: one loopback Host.
    assert_eq!(
        raw_status(
            &app,
            &format!("POST /mcp HTTP/1.1\r\nHost: {own}\r\n{auth}"),
            ping
        )
        .await,
        200
    );
    // Two Host lines, loopback first (RFC 9112 §3.2).
    assert_eq!(
        raw_status(
            &app,
            &format!("POST /mcp HTTP/1.1\r\nHost: {own}\r\nHost: evil.example\r\n{auth}"),
            ping
        )
        .await,
        400
    );
    assert_eq!(
        raw_status(
            &app,
            &format!("POST /mcp HTTP/1.1\r\nHost: {own}\r\nHost: {own}\r\n{auth}"),
            ping
        )
        .await,
        400
    );
    // No Host at all in HTTP/1.1, or one that is not a host (RFC 9112 §3.2).
    assert_eq!(
        raw_status(&app, &format!("POST /mcp HTTP/1.1\r\n{auth}"), ping).await,
        400
    );
    assert_eq!(
        raw_status(
            &app,
            &format!("POST /mcp HTTP/1.1\r\nHost: a b\r\n{auth}"),
            ping
        )
        .await,
        400
    );
    // Absolute form: the target's authority is the host, whatever Host says (RFC 9112 §3.2.2).
    assert_eq!(
        raw_status(
            &app,
            &format!("POST http://evil.example/mcp HTTP/1.1\r\nHost: {own}\r\n{auth}"),
            ping
        )
        .await,
        403
    );
    assert_eq!(
        raw_status(
            &app,
            &format!("POST http://{own}/mcp HTTP/1.1\r\nHost: evil.example\r\n{auth}"),
            ping
        )
        .await,
        200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_at_the_lowest_limit_fit_and_return() {
    let app = spawn_app_with(|v| {
        v.insert("GATEHOUSE_MAX_RESULT_BYTES".into(), "1024".into());
    })
    .await;
    let a = alice(&app).await;
    for body in ["b".repeat(600), "é".repeat(600), "\"\\\n\t".repeat(150)] {
        let r = tokio::time::timeout(
            Duration::from_secs(20),
            call(
                &app,
                &a.token,
                "create_note",
                json!({"project_id": a.project, "title": "A note", "body": body}),
            ),
        )
        .await
        .expect("create_note answers");
        let size = serde_json::to_string(&r).unwrap().len();
        assert!(size <= 1024, "{size}: {r}");
        let id = r["structuredContent"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("the note id survives the cut: {r}"))
            .to_string();
        let uri = format!("gatehouse://projects/{}/notes/{id}", a.project);
        let read = tokio::time::timeout(
            Duration::from_secs(20),
            rpc(&app, &a.token, "resources/read", json!({ "uri": uri })),
        )
        .await
        .expect("resources/read answers");
        let size = serde_json::to_string(&read["result"]).unwrap().len();
        assert!(size <= 1024, "{size}: {read}");
        let doc: Value =
            serde_json::from_str(read["result"]["contents"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(doc["id"], id.as_str());
        let got = tokio::time::timeout(
            Duration::from_secs(20),
            call(
                &app,
                &a.token,
                "get_note",
                json!({"project_id": a.project, "note_id": id}),
            ),
        )
        .await
        .expect("get_note answers");
        assert!(serde_json::to_string(&got).unwrap().len() <= 1024);
    }
}

/// Every place in a JSON Schema where `type` is not one plain type name other than `null`.
fn non_portable_types(schema: &Value, at: &str, found: &mut Vec<String>) {
    match schema {
        Value::Object(map) => {
            for (key, value) in map {
                let here = format!("{at}/{key}");
                match key.as_str() {
                    "type" => match value {
                        Value::String(t) if t != "null" => {}
                        other => found.push(format!("{here} = {other}")),
                    },
                    "const" | "enum" | "default" | "examples" | "required" => {}
                    _ => non_portable_types(value, &here, found),
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                non_portable_types(item, &format!("{at}/{i}"), found);
            }
        }
        _ => {}
    }
}

/// The paths of every `null` member value in `value`.
fn nulls(value: &Value, at: &str, found: &mut Vec<String>) {
    match value {
        Value::Null => found.push(at.to_string()),
        Value::Object(map) => map
            .iter()
            .for_each(|(k, v)| nulls(v, &format!("{at}/{k}"), found)),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .for_each(|(i, v)| nulls(v, &format!("{at}/{i}"), found)),
        _ => {}
    }
}

#[tokio::test]
async fn published_schemas_have_no_nullable_type_arrays_and_results_no_nulls() {
    let app = spawn_app().await;
    let a = alice(&app).await;
    let list = rpc(&app, &a.token, "tools/list", json!({})).await;
    let tools = list["result"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 8);
    let mut found = Vec::new();
    for tool in tools {
        let name = tool["name"].as_str().unwrap();
        for which in ["inputSchema", "outputSchema"] {
            assert!(tool[which].is_object(), "{name} {which}");
            non_portable_types(&tool[which], &format!("{name}.{which}"), &mut found);
        }
    }
    assert!(found.is_empty(), "non-portable types: {found:#?}");

    // What is sent matches: optional members are left out, never `null`.
    ok(&call(
        &app,
        &a.token,
        "create_note",
        json!({"project_id": a.project, "title": "one", "body": "first"}),
    )
    .await);
    let receipt = ok(&call(
        &app,
        &a.token,
        "export_project",
        json!({"project_id": a.project}),
    )
    .await);
    let id = receipt["id"].as_str().unwrap().to_string();
    let mut job = Value::Null;
    for _ in 0..50 {
        job = ok(&call(&app, &a.token, "get_job", json!({"job_id": id})).await);
        let mut found = Vec::new();
        nulls(&job, "get_job", &mut found);
        assert!(found.is_empty(), "{found:?} in {job}");
        if job["status"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(job["status"], "completed", "{job}");
    assert!(job.get("error").is_none(), "{job}");
}

/// The documented bound: the process exits within 30 s of SIGTERM.
const SHUTDOWN_BOUND: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_server_in_time_while_requests_are_in_flight() {
    // The accounts, the project and the token come from an in-process server on the same
    // database; the binary under test serves the same MCP_SERVER_URL, so the token is valid there.
    let app = spawn_app_with(|v| {
        v.insert("GATEHOUSE_MAX_RESULT_BYTES".into(), "1024".into());
    })
    .await;
    let a = alice(&app).await;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .arg("serve")
        .env("DATABASE_URL", &app.db.url)
        .env("MCP_SERVER_URL", &app.config.mcp_server_url)
        .env("GATEHOUSE_BIND", "127.0.0.1:0")
        .env("GATEHOUSE_MAX_RESULT_BYTES", "1024")
        .env("GATEHOUSE_LOG_FORMAT", "json")
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the gatehouse binary");
    // Read the port from the start line; keep draining the log so the child never blocks on it.
    let stderr = child.stderr.take().unwrap();
    let (port_tx, port_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if let Ok(v) = serde_json::from_str::<Value>(&line)
                && v["fields"]["message"] == "gatehouse listening"
            {
                let _ = port_tx.send(v["fields"]["port"].as_u64().unwrap() as u16);
            }
        }
    });
    let port = port_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the binary starts listening");
    let base = format!("http://127.0.0.1:{port}");

    // In flight 1: a tool call whose result must be cut hard (CPU work).
    let busy_client = crate::helpers::client_builder().build().unwrap();
    let busy = tokio::spawn(
        busy_client
            .post(format!("{base}/mcp"))
            .bearer_auth(&a.token)
            .header("accept", "application/json, text/event-stream")
            .json(
                &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                    "name": "create_note",
                    "arguments": {"project_id": a.project, "title": "big", "body": "b".repeat(600)}
                }}),
            )
            .send(),
    );
    // In flight 2: a client that sends its headers and only half of its body.
    let mut slow = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    slow.write_all(
        format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: 100\r\n\r\n{{\"jsonrpc\":",
            a.token
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;

    let signalled = Instant::now();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exited = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if signalled.elapsed() > SHUTDOWN_BOUND {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let took = signalled.elapsed();
    if exited.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(
        exited.is_some(),
        "still running {took:?} after SIGTERM (bound {SHUTDOWN_BOUND:?})"
    );
    drop(slow);
    busy.abort();
}

/// Asserts an MCP route error answer: `status`, `application/json`, a JSON-RPC error with
/// `id: null` (JSON-RPC 2.0 §5); the error object.
fn assert_json_rpc_error(
    case: &str,
    status: u16,
    content_type: Option<&str>,
    body: &str,
    expected: u16,
) -> Value {
    assert_eq!(status, expected, "{case}: {body}");
    assert!(
        content_type.is_some_and(|ct| ct.starts_with("application/json")),
        "{case}: content type {content_type:?}"
    );
    let body: Value =
        serde_json::from_str(body).unwrap_or_else(|_| panic!("{case}: a JSON body: {body}"));
    assert_eq!(body["jsonrpc"], "2.0", "{case}: {body}");
    assert!(body["id"].is_null(), "{case}: {body}");
    assert!(body["error"]["code"].is_i64(), "{case}: {body}");
    assert!(
        !body["error"]["message"].as_str().unwrap().is_empty(),
        "{case}: {body}"
    );
    body["error"].clone()
}

/// Sends `request` as it is over a raw connection; status, content type and body.
async fn raw_exchange(app: &TestApp, request: &str) -> (u16, Option<String>, String) {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", app.port))
        .await
        .unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut response))
        .await
        .expect("answered")
        .unwrap();
    let text = String::from_utf8_lossy(&response).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap();
    let content_type = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("content-type"))
        .map(|(_, v)| v.trim().to_string());
    (status, content_type, body.to_string())
}

#[tokio::test]
async fn every_mcp_route_error_is_a_json_rpc_error() {
    let app = spawn_app().await;
    let a = alice(&app).await;
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    // A new connection per request: the server closes the one that carried the oversized body,
    // and a pooled connection closed that way would fail the next request sent on it.
    let client = crate::helpers::client_builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let post = |content_type: &str, version: &str, body: Vec<u8>| {
        client
            .post(mcp_url(&app))
            .bearer_auth(&a.token)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", content_type)
            .header("mcp-protocol-version", version)
            .body(body)
    };
    async fn parts(
        r: reqwest::RequestBuilder,
    ) -> (u16, Option<String>, String, reqwest::header::HeaderMap) {
        let r = r.send().await.unwrap();
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let ct = headers
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string());
        (status, ct, r.text().await.unwrap(), headers)
    }
    // Not JSON: 415.
    let (s, ct, body, _) = parts(post("text/plain", "2025-06-18", ping.into())).await;
    assert_json_rpc_error("text/plain", s, ct.as_deref(), &body, 415);
    // A body over the limit: 413. The server answers without reading the whole body and
    // closes the connection, so the client may see the connection reset before it reads the
    // answer; such a transport error is tried again (at most five times), never counted.
    let mut answer = None;
    for _ in 0..5 {
        let sent = post(
            "application/json",
            "2025-06-18",
            vec![b' '; 2 * 1024 * 1024],
        )
        .send()
        .await;
        if let Ok(r) = sent {
            let status = r.status().as_u16();
            let ct = r
                .headers()
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_string());
            if let Ok(text) = r.text().await {
                answer = Some((status, ct, text));
                break;
            }
        }
    }
    let (s, ct, body) = answer.expect("an answer to the oversized body in five tries");
    assert_json_rpc_error("large body", s, ct.as_deref(), &body, 413);
    // An unknown protocol revision: 400.
    let (s, ct, body, _) = parts(post("application/json", "1999-01-01", ping.into())).await;
    assert_json_rpc_error("revision", s, ct.as_deref(), &body, 400);
    // Other methods: 405, still naming POST.
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let (s, ct, body, headers) = parts(
            app.client
                .request(method.clone(), mcp_url(&app))
                .bearer_auth(&a.token),
        )
        .await;
        assert_json_rpc_error(method.as_str(), s, ct.as_deref(), &body, 405);
        assert_eq!(headers["allow"], "POST", "{method}");
    }
    // No credential: the challenge stays, with its JSON body (RFC 6750 §3).
    let (s, ct, _, headers) = parts(
        app.client
            .post(mcp_url(&app))
            .header("content-type", "application/json")
            .body(ping),
    )
    .await;
    assert_eq!(s, 401);
    assert!(ct.unwrap().starts_with("application/json"));
    assert!(headers.contains_key("www-authenticate"));
    // HTTP/1.0 without Host.
    let request = format!(
        "POST /mcp HTTP/1.0\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{ping}",
        a.token,
        ping.len()
    );
    let (s, ct, body) = raw_exchange(&app, &request).await;
    assert_json_rpc_error("HTTP/1.0", s, ct.as_deref(), &body, 400);
    // An unknown method: -32601 naming it (JSON-RPC 2.0 §5.1).
    let (s, _, body, _) = parts(post(
        "application/json",
        "2025-06-18",
        br#"{"jsonrpc":"2.0","id":2,"method":"nope","params":{}}"#.to_vec(),
    ))
    .await;
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["code"], -32601, "{s}: {body}");
    assert_eq!(body["error"]["message"], "Method not found: nope", "{body}");
}

#[tokio::test]
async fn slow_searches_leave_the_pool_to_others_and_nothing_answers_500() {
    let app = spawn_app().await;
    let a = alice(&app).await;
    // Notes of ~10 KB, each word a match of the query: every hit is costly to rank and cut.
    let body = "ü ".repeat(2500);
    for i in 0..27 {
        ok(&call(
            &app,
            &a.token,
            "create_note",
            json!({"project_id": a.project, "title": format!("note {i}"), "body": body}),
        )
        .await);
    }
    let client_id = crate::oauth_helpers::register_public(&app, &["http://127.0.0.1:9/cb"]).await;
    let searches = (0..8).map(|_| {
        call(
            &app,
            &a.token,
            "search_notes",
            json!({"project_id": a.project, "query": "ü", "limit": 50}),
        )
    });
    let others = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let token = app
            .client
            .post(app.url("/oauth/token"))
            .form(&[
                ("grant_type", "authorization_code"),
                ("client_id", client_id.as_str()),
                ("code", "gate_ac_nope"),
                ("code_verifier", &"v".repeat(43)),
                ("redirect_uri", "http://127.0.0.1:9/cb"),
            ])
            .send()
            .await
            .unwrap();
        let ready = app.client.get(app.url("/readyz")).send().await.unwrap();
        (token.status(), token.text().await.unwrap(), ready.status())
    };
    let started = Instant::now();
    let (hits, (token, token_body, ready)) =
        tokio::join!(futures::future::join_all(searches), others);
    // A client's mistake is answered as one, however busy the searches keep the database.
    assert_eq!(token, StatusCode::BAD_REQUEST, "{token_body}");
    assert_eq!(ready, StatusCode::OK);
    for result in hits {
        assert_eq!(ok(&result)["results"].as_array().unwrap().len(), 27);
    }
    assert!(started.elapsed() < Duration::from_secs(60));
}

#[tokio::test]
async fn a_carried_out_write_answers_success_with_its_id_and_lists_drop_items() {
    let app = spawn_app_with(|v| {
        v.insert("GATEHOUSE_MAX_RESULT_BYTES".into(), "1024".into());
    })
    .await;
    let a = alice(&app).await;
    let tags: Vec<String> = (0..20)
        .map(|i| format!("{i:02}{}", "t".repeat(38)))
        .collect();
    let r = call(
        &app,
        &a.token,
        "create_note",
        json!({"project_id": a.project, "title": "T".repeat(100), "body": "b", "tags": tags}),
    )
    .await;
    assert!(serde_json::to_string(&r).unwrap().len() <= 1024, "{r}");
    assert_eq!(r["isError"], false, "a write that was carried out: {r}");
    let id = r["structuredContent"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("the note id: {r}"));
    let stored = app.store.note(&a.project, id).await.unwrap().unwrap();
    assert_eq!(stored.tags.len(), 20);
    assert!(
        r["content"][0]["text"].as_str().unwrap().contains("cut"),
        "{r}"
    );
    // A list drops items from the end until it fits.
    for i in 0..5 {
        let r = call(
            &app,
            &a.token,
            "create_note",
            json!({"project_id": a.project, "title": format!("{i} {}", "T".repeat(90)), "body": "findme"}),
        )
        .await;
        assert_eq!(r["isError"], false, "{r}");
    }
    let r = call(
        &app,
        &a.token,
        "search_notes",
        json!({"project_id": a.project, "query": "findme", "limit": 50}),
    )
    .await;
    assert!(serde_json::to_string(&r).unwrap().len() <= 1024, "{r}");
    assert_eq!(r["isError"], false, "{r}");
    let results = r["structuredContent"]["results"].as_array().unwrap();
    assert!(!results.is_empty() && results.len() < 5, "{r}");
}
