//! The request log (issue 39, item 5), read from the real binary's standard error: one line
//! per request with method, route template, status, latency, client address and request id;
//! deliberate 503s at WARN with their cause; never a secret or a personal URL's path; JSON with
//! `GATEHOUSE_LOG_FORMAT=json`; no colour codes when standard error is not a terminal.

use std::collections::HashMap;
use std::process::Command;

use reqwest::StatusCode;
use serde_json::Value;

use crate::config_startup::{start_server, wait_ready};
use crate::helpers::{hidden_input, new_client};

/// Stops `child` with SIGTERM; its standard error.
fn stop(child: std::process::Child) -> String {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs `gatehouse ARGS` on the database `db` with `env` (and no `RUST_LOG` unless `env` sets
/// it), writing `stdin` to it; its standard output and error. The command must succeed.
fn command(db: &str, env: &[(&str, &str)], args: &[&str], stdin: Option<&str>) -> (String, String) {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .args(args)
        .env("DATABASE_URL", db)
        .env_remove("RUST_LOG")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).unwrap();
    }
    drop(input);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// One MCP request `method` with `params` to the server on `port`, as a 2026-07-28 client
/// holding `key` sends it (the standard headers, the per-request `_meta`).
/// An MCP server over plain JSON whose one tool, `say` (read-only), answers a JSON-RPC error
/// (-32602) whose message repeats the call's arguments, then a line break and a forged log
/// line. Its MCP URL.
async fn start_error_echoing_upstream() -> String {
    async fn answer(body: axum::body::Bytes) -> axum::response::Response {
        use axum::response::IntoResponse as _;
        let message: Value = serde_json::from_slice(&body).unwrap();
        let Some(id) = message.get("id").cloned() else {
            return StatusCode::ACCEPTED.into_response();
        };
        let answer = match message["method"].as_str().unwrap_or_default() {
            "initialize" => serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                "serverInfo": {"name": "parrot", "version": "1"}}}),
            "tools/list" => serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [
                {"name": "say", "inputSchema": {"type": "object"},
                 "annotations": {"readOnlyHint": true, "destructiveHint": false}}]}}),
            _ => serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602,
                "message": format!("cannot say {}\nINFO gatehouse: FORGED",
                    message["params"]["arguments"])}}),
        };
        axum::Json(answer).into_response()
    }
    crate::upstreams::serve_mcp(axum::Router::new().route("/mcp", axum::routing::post(answer)))
        .await
}

async fn mcp_request(port: u16, key: &str, method: &str, mut params: Value) -> reqwest::Response {
    params["_meta"] = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let mut request = new_client()
        .post(format!("http://127.0.0.1:{port}/mcp"))
        .bearer_auth(key)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = params["name"].as_str() {
        request = request.header("mcp-name", name);
    }
    request
        .json(&serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .unwrap()
}

const PERSONAL_SECRET: &str = "gate_url_ThisIsTheSecretPartOfThePath0123";
const CODE_SECRET: &str = "a-code-value-that-must-not-be-logged";

#[tokio::test]
async fn one_json_line_per_request_with_503s_at_warn_and_no_secret() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("g.db").display());
    let (child, port) = start_server(&[
        ("DATABASE_URL", &db),
        ("GATEHOUSE_LOG_FORMAT", "json"),
        ("RUST_LOG", "info"),
        ("GATEHOUSE_PASSWORD_WORKERS", "1"),
        ("GATEHOUSE_PASSWORD_QUEUE", "1"),
    ]);
    wait_ready(port);
    let base = format!("http://127.0.0.1:{port}");
    // Each answer's X-Request-Id and status, to find its line.
    let mut answers: Vec<(String, u16, &str)> = Vec::new();
    let client = new_client();
    let r = client.get(format!("{base}/healthz")).send().await.unwrap();
    let id = |r: &reqwest::Response| r.headers()["x-request-id"].to_str().unwrap().to_string();
    answers.push((id(&r), r.status().as_u16(), "/healthz"));
    let r = client
        .post(format!("{base}/mcp/{PERSONAL_SECRET}"))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert!(r.status().is_client_error());
    answers.push((id(&r), r.status().as_u16(), "/mcp/{secret}"));
    let r = client
        .post(format!("{base}/oauth/token"))
        .form(&[("grant_type", "authorization_code"), ("code", CODE_SECRET)])
        .send()
        .await
        .unwrap();
    answers.push((id(&r), r.status().as_u16(), "/oauth/token"));
    // A sign-in burst on one password worker: some are turned away with 503.
    let mut burst = Vec::new();
    for i in 0..16 {
        let url = format!("{base}/signin");
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
            (
                r.headers()["x-request-id"].to_str().unwrap().to_string(),
                r.status().as_u16(),
            )
        }));
    }
    let mut busy = 0;
    for t in burst {
        let (id, status) = t.await.unwrap();
        if status == StatusCode::SERVICE_UNAVAILABLE.as_u16() {
            busy += 1;
        }
        answers.push((id, status, "/signin"));
    }
    assert!(busy >= 1, "no sign-in was turned away");
    let stderr = stop(child);
    assert!(
        !stderr.contains(PERSONAL_SECRET),
        "a personal URL's secret in the log"
    );
    assert!(
        !stderr.contains("ThisIsTheSecretPart"),
        "part of a secret in the log"
    );
    assert!(!stderr.contains(CODE_SECRET), "a code in the log");
    assert!(!stderr.contains("wrong-password"), "a password in the log");
    let mut lines: HashMap<String, Vec<Value>> = HashMap::new();
    for l in stderr.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(l).unwrap_or_else(|_| panic!("JSON log line: {l}"));
        assert_ne!(
            v["level"], "ERROR",
            "a deliberate answer logged as an error: {l}"
        );
        if v["fields"]["message"] == "request" {
            let id = v["fields"]["request_id"].as_str().unwrap().to_string();
            lines.entry(id).or_default().push(v);
        }
    }
    for (id, status, route) in &answers {
        let found = lines
            .get(id)
            .unwrap_or_else(|| panic!("no line for {route} {id}"));
        assert_eq!(found.len(), 1, "one line per request: {found:?}");
        let f = &found[0]["fields"];
        assert_eq!(f["route"], *route, "{f}");
        assert_eq!(f["status"], *status, "{f}");
        assert!(f["method"] == "GET" || f["method"] == "POST", "{f}");
        assert!(f["latency_ms"].as_f64().is_some_and(|ms| ms >= 0.0), "{f}");
        assert_eq!(f["client"], "127.0.0.1", "{f}");
        if *status == 503 {
            assert_eq!(found[0]["level"], "WARN", "{f}");
            assert_eq!(f["cause"], "password_workers", "{f}");
        } else {
            assert_eq!(found[0]["level"], "INFO", "{f}");
        }
    }
}

#[tokio::test]
async fn text_lines_carry_no_colour_codes_when_not_written_to_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("g.db").display());
    let (child, port) = start_server(&[("DATABASE_URL", &db), ("RUST_LOG", "info")]);
    wait_ready(port);
    let r = new_client()
        .get(format!("http://127.0.0.1:{port}/healthz"))
        .send()
        .await
        .unwrap();
    let id = r.headers()["x-request-id"].to_str().unwrap().to_string();
    let stderr = stop(child);
    assert!(
        !stderr.contains('\u{1b}'),
        "colour codes in a log file: {stderr:?}"
    );
    let line = stderr
        .lines()
        .find(|l| l.contains(&id))
        .unwrap_or_else(|| panic!("no line for {id}: {stderr}"));
    for part in [
        " INFO ",
        "request",
        "method=\"GET\"",
        "route=\"/healthz\"",
        "status=200",
        "client=\"127.0.0.1\"",
    ] {
        assert!(line.contains(part), "{part} missing: {line}");
    }
}

/// Account and admin events changed from the command line are structured log lines of target
/// `gatehouse::audit` (event, outcome, account id), never with the password, the client
/// secret or the API key the commands handled.
#[tokio::test]
async fn admin_commands_log_their_events_as_structured_lines_without_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}?mode=rwc", dir.path().join("g.db").display());
    let password = "a-long-password-never-logged";
    let env = [
        ("MCP_SERVER_URL", "http://127.0.0.1:9/mcp"),
        ("GATEHOUSE_LOG_FORMAT", "json"),
        ("RUST_LOG", "info"),
    ];
    let run = |args: &[&str], stdin: Option<&str>| command(&db, &env, args, stdin);
    let (_, added) = run(
        &["account", "add", "carol@example.com", "--password-stdin"],
        Some(&format!("{password}\n")),
    );
    let (client, client_log) = run(&["client", "add", "Billing"], None);
    let secret = client
        .lines()
        .find_map(|l| l.strip_prefix("client_secret: "))
        .unwrap()
        .to_string();
    let (key, key_log) = run(&["key", "create", "--account", "carol@example.com"], None);
    let key = key
        .lines()
        .find_map(|l| l.strip_prefix("key: "))
        .unwrap()
        .to_string();
    let (_, disabled) = run(&["account", "disable", "carol@example.com"], None);
    let all = [added, client_log, key_log, disabled].join("\n");
    for (what, value) in [
        ("password", password),
        ("client secret", &secret),
        ("key", &key),
    ] {
        assert!(!all.contains(value), "the {what} in the log:\n{all}");
    }
    let events: Vec<Value> = all
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("JSON log line: {l}")))
        .filter(|v: &Value| v["target"] == "gatehouse::audit")
        .collect();
    let named = |event: &str| {
        events
            .iter()
            .find(|v| v["fields"]["event"] == event)
            .unwrap_or_else(|| panic!("no {event} line in {events:?}"))
            .clone()
    };
    for event in ["account_created", "key_created", "account_disabled"] {
        let line = named(event);
        assert_eq!(line["level"], "INFO", "{line}");
        assert_eq!(line["fields"]["outcome"], "success", "{line}");
        assert!(
            line["fields"]["account_id"]
                .as_str()
                .is_some_and(|id| !id.is_empty()),
            "{line}"
        );
        assert!(line["fields"].get("subject").is_none(), "{line}");
    }
}

/// Account and admin events made in the console (issue 39 item 5) are structured log lines of
/// target `gatehouse::audit` with the account and the browser's address, never the password
/// typed, nor the API key the page showed once.
#[tokio::test]
async fn console_actions_log_their_events_as_structured_lines_without_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("g.db").display());
    let password = "console-password-never-logged";
    let (child, port) = start_server(&[
        ("DATABASE_URL", &db),
        ("GATEHOUSE_LOG_FORMAT", "json"),
        ("RUST_LOG", "info"),
        ("GATEHOUSE_BOOTSTRAP_EMAIL", "dora@example.com"),
        ("GATEHOUSE_BOOTSTRAP_PASSWORD", password),
    ]);
    wait_ready(port);
    let base = format!("http://127.0.0.1:{port}");
    let browser = new_client();
    let text = |r: reqwest::Response| async move {
        assert_eq!(r.status(), StatusCode::OK, "{}", r.url());
        r.text().await.unwrap()
    };
    let signin = text(browser.get(format!("{base}/signin")).send().await.unwrap()).await;
    let csrf = hidden_input(&signin, "csrf_token").unwrap();
    let r = browser
        .post(format!("{base}/signin"))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("next", "/"),
            ("email", "dora@example.com"),
            ("password", password),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);

    // A project made on Projects.
    let home = text(browser.get(format!("{base}/")).send().await.unwrap()).await;
    let csrf = hidden_input(&home, "csrf_token").unwrap();
    let r = browser
        .post(format!("{base}/projects"))
        .form(&[("csrf_token", csrf.as_str()), ("name", "Logged project")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);

    // An API key made on Keys (shown once), then revoked after its confirmation page.
    let r = browser
        .post(format!("{base}/keys/create"))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("name", "Laptop"),
            ("project", ""),
            ("access", "read"),
            ("expires", "none"),
        ])
        .send()
        .await
        .unwrap();
    let created = text(r).await;
    let key = created
        .split("value=\"")
        .find_map(|v| v.strip_prefix("gate_key_"))
        .and_then(|v| v.split('"').next())
        .map(|rest| format!("gate_key_{rest}"))
        .unwrap_or_else(|| panic!("the key is shown once: {created}"));
    let keys = text(browser.get(format!("{base}/keys")).send().await.unwrap()).await;
    let id = hidden_input(&keys, "id").expect("the key's revoke form");
    let confirm = text(
        browser
            .get(format!("{base}/keys/revoke?id={id}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let csrf = hidden_input(&confirm, "csrf_token").unwrap();
    let r = browser
        .post(format!("{base}/keys/revoke"))
        .form(&[("csrf_token", csrf.as_str()), ("id", id.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);

    let stderr = stop(child);
    assert!(!stderr.contains(password), "the password in the log");
    assert!(!stderr.contains(&key), "the key in the log");
    assert!(!stderr.contains(&key[9..]), "part of the key in the log");
    let events: Vec<Value> = stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("JSON log line: {l}")))
        .filter(|v: &Value| v["target"] == "gatehouse::audit")
        .collect();
    let named = |event: &str| {
        events
            .iter()
            .find(|v| v["fields"]["event"] == event)
            .unwrap_or_else(|| panic!("no {event} line in {events:?}"))
            .clone()
    };
    let signed_in = named("signin");
    let account = signed_in["fields"]["account_id"]
        .as_str()
        .expect("the account of the sign-in")
        .to_string();
    for event in ["signin", "project_created", "key_created", "key_revoked"] {
        let line = named(event);
        assert_eq!(line["level"], "INFO", "{line}");
        assert_eq!(line["fields"]["outcome"], "success", "{line}");
        assert_eq!(line["fields"]["account_id"], account.as_str(), "{line}");
        assert_eq!(line["fields"]["source_ip"], "127.0.0.1", "{line}");
    }
}

/// An upstream that cannot be reached is logged by Gatehouse with its name, once per listing,
/// at the default level; rmcp's own end-of-transport error (`worker quit with fatal`, which
/// names no upstream) is not logged beside it, nor rmcp's warning for a JSON-RPC error
/// answered to a client, which carries what the client sent.
#[tokio::test]
async fn upstream_failures_and_client_mistakes_are_logged_by_gatehouse_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}?mode=rwc", dir.path().join("g.db").display());
    let key_file = dir.path().join("server.key");
    let key_file = key_file.to_str().unwrap();
    let env = [
        ("MCP_SERVER_URL", "http://127.0.0.1:9/mcp"),
        ("GATEHOUSE_SECRET_KEY_FILE", key_file),
    ];
    let run = |args: &[&str], stdin: Option<&str>| command(&db, &env, args, stdin).0;
    run(
        &["account", "add", "dana@example.com", "--password-stdin"],
        Some("a-long-password-for-dana\n"),
    );
    let key = run(&["key", "create", "--account", "dana@example.com"], None);
    let key = key
        .lines()
        .find_map(|l| l.strip_prefix("key: "))
        .unwrap()
        .to_string();
    // Nothing listens on port 9 (discard) here: every connection is refused.
    run(
        &["upstream", "add", "gone", "--url", "http://127.0.0.1:9/mcp"],
        None,
    );
    // An upstream whose one tool answers a JSON-RPC error repeating the arguments, over two
    // lines.
    let echo_url = start_error_echoing_upstream().await;
    run(
        &[
            "upstream",
            "add",
            "parrot",
            "--url",
            &echo_url,
            "--trust-definitions",
        ],
        None,
    );
    let (child, port) = start_server(&[
        ("DATABASE_URL", &db),
        ("GATEHOUSE_SECRET_KEY_FILE", key_file),
    ]);
    wait_ready(port);
    let r = mcp_request(port, &key, "tools/list", serde_json::json!({})).await;
    assert_eq!(r.status(), StatusCode::OK);
    let listed: Value = r.json().await.unwrap();
    assert!(
        listed["result"]["tools"].as_array().is_some(),
        "the list is answered without the upstream: {listed}"
    );
    // Nineteen more listings, within a second or so, are answered from the failure remembered
    // for 5 s: the failure is logged once per attempt to list it, not once per client listing.
    for _ in 0..19 {
        let r = mcp_request(port, &key, "tools/list", serde_json::json!({})).await;
        assert_eq!(r.status(), StatusCode::OK);
    }
    // A client's mistake (an unknown tool, with an argument): answered with its JSON-RPC
    // error, logged as one request line, and nothing of what it sent reaches the log.
    let r = mcp_request(
        port,
        &key,
        "tools/call",
        serde_json::json!({"name": "no_such_tool", "arguments": {"note": "private-words-of-dana"}}),
    )
    .await;
    let refused: Value = r.json().await.unwrap();
    assert!(refused["error"]["code"].is_i64(), "{refused}");
    // The upstream's error repeats the arguments: the caller gets it, the log does not.
    let mut answered = Value::Null;
    for _ in 0..50 {
        let r = mcp_request(
            port,
            &key,
            "tools/call",
            serde_json::json!({"name": "parrot__say", "arguments": {"note": "private-words-of-dana-2"}}),
        )
        .await;
        answered = r.json().await.unwrap();
        if answered["result"]["isError"] == true {
            break;
        }
        // Not listed yet: the upstream is picked up within a second or two.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let said = answered["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(said.contains("private-words-of-dana-2"), "{answered}");
    let stderr = stop(child);
    assert!(!stderr.contains("private-words-of-dana-2"), "{stderr}");
    assert!(!stderr.contains("FORGED"), "{stderr}");
    assert!(
        stderr.lines().any(
            |l| l.contains("upstream call failed: it answered a JSON-RPC error")
                && l.contains("parrot")
                && l.contains("-32602")
        ),
        "Gatehouse's line, with the upstream's name and the error's code: {stderr}"
    );
    assert!(
        !stderr.contains("response error") && !stderr.contains("ErrorData"),
        "rmcp's line for the client's mistake: {stderr}"
    );
    assert!(!stderr.contains("private-words-of-dana"), "{stderr}");
    let left_out = stderr
        .lines()
        .filter(|l| l.contains("upstream left out of tools/list") && l.contains("gone"))
        .count();
    // One attempt at most every 5 s over a run of a few seconds (more on a loaded machine),
    // against one line per listing (20) before.
    assert!(
        (1..=6).contains(&left_out),
        "Gatehouse's own line, with the upstream's name, once per attempt ({left_out}): {stderr}"
    );
    assert!(
        !stderr.contains("worker quit"),
        "rmcp's line without the upstream's name: {stderr}"
    );
}
