//! `gatehouse stdio` (issue "The rest of the MCP surface", part 5): MCP over stdin/stdout for
//! local clients, as the holder of the API key in `GATEHOUSE_API_KEY` — checked at start (a
//! refused key: a message on stderr, nothing on stdout, a non-zero exit) and before every
//! request (a revoked key is refused from the next call on). Only JSON-RPC messages reach
//! stdout; the calls are audited like those over HTTP.

use std::process::Stdio;
use std::time::Duration;

use crate::helpers::{TestApp, spawn_app};
use crate::keys::{ALICE, create_key, gatehouse};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// `gatehouse stdio` on the app's database with `key` (if any), logging at info level.
fn launch(app: &TestApp, key: Option<&str>) -> Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gatehouse"));
    command
        .arg("stdio")
        .env("DATABASE_URL", &app.db.url)
        .env("RUST_LOG", "info")
        .env_remove("GATEHOUSE_API_KEY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(key) = key {
        command.env("GATEHOUSE_API_KEY", key);
    }
    command.spawn().unwrap()
}

struct Session {
    stdin: ChildStdin,
    stdout: tokio::io::Lines<BufReader<ChildStdout>>,
    next_id: i64,
}

impl Session {
    async fn send(&mut self, message: Value) {
        let mut line = serde_json::to_string(&message).unwrap();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// The next line of stdout, which must be one JSON-RPC 2.0 message.
    async fn read(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(20), self.stdout.next_line())
            .await
            .expect("an answer within 20 s")
            .unwrap()
            .expect("stdout still open");
        let message: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carried something else than JSON ({e}): {line}"));
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
        message
    }

    /// A request and its answer (which must carry the request's id).
    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let answer = self.read().await;
        assert_eq!(answer["id"], id, "{answer}");
        answer
    }
}

#[tokio::test]
async fn a_local_client_lists_and_calls_tools_until_its_key_is_revoked() {
    let app = spawn_app().await;
    let alice = app.create_account(ALICE, "a-long-password").await;
    let project = app
        .store
        .create_project("Research", &alice, gatehouse::store::now())
        .await
        .unwrap();
    let (key_id, key) = create_key(&app, &["--account", ALICE, "--write", "--name", "Desktop"]);

    let mut child = launch(&app, Some(&key));
    let mut session = Session {
        stdin: child.stdin.take().unwrap(),
        stdout: BufReader::new(child.stdout.take().unwrap()).lines(),
        next_id: 0,
    };
    let init = session
        .request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "stdio-test", "version": "1"}
            }),
        )
        .await;
    assert_eq!(init["result"]["serverInfo"]["name"], "gatehouse", "{init}");
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    session
        .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;

    // The same catalog as over HTTP, gated the same way (Alice writes in her project).
    let list = session.request("tools/list", json!({})).await;
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 8, "{names:?}");
    assert!(names.contains(&"create_note"), "{names:?}");

    let projects = session
        .request(
            "tools/call",
            json!({"name": "list_projects", "arguments": {}}),
        )
        .await;
    let sc = &projects["result"]["structuredContent"];
    assert_eq!(projects["result"]["isError"], false, "{projects}");
    assert_eq!(sc["projects"][0]["id"], project.as_str());
    assert_eq!(sc["projects"][0]["role"], "write");

    let created = session
        .request(
            "tools/call",
            json!({"name": "create_note", "arguments": {
                "project_id": project, "title": "From the desktop", "body": "Hello"
            }}),
        )
        .await;
    assert_eq!(created["result"]["isError"], false, "{created}");
    let note_id = created["result"]["structuredContent"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        app.store.note(&project, &note_id).await.unwrap().is_some(),
        "the note was stored"
    );
    // Resources come through the same handler.
    let read = session
        .request(
            "resources/read",
            json!({"uri": format!("gatehouse://projects/{project}")}),
        )
        .await;
    assert!(
        read["result"]["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Research"),
        "{read}"
    );

    // Revoked while the process runs: the next call is refused.
    let (success, _, err) = gatehouse(&app, &["key", "revoke", &key_id]);
    assert!(success, "{err}");
    let refused = session
        .request(
            "tools/call",
            json!({"name": "list_projects", "arguments": {}}),
        )
        .await;
    assert!(refused.get("result").is_none(), "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("GATEHOUSE_API_KEY was refused"),
        "{message}"
    );
    assert!(message.contains("revoked"), "{message}");
    let again = session.request("tools/list", json!({})).await;
    assert!(again["error"]["message"].is_string(), "{again}");

    // Closing stdin ends the process cleanly, with nothing else on stdout.
    drop(session.stdin);
    let rest = session.stdout.next_line().await.unwrap();
    assert_eq!(rest, None, "nothing on stdout after the last answer");
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status:?}");
    let mut stderr = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr)
        .await
        .unwrap();
    assert!(
        stderr.contains("serving MCP over stdio"),
        "logs go to stderr: {stderr}"
    );
    assert!(!stderr.contains(&key), "the key is never logged");

    // Audited like HTTP calls: who, which key, what, outcome.
    let rows: Vec<(String, String, Option<String>)> = sqlx::query_as(
        "SELECT subject, outcome, detail FROM audit_events WHERE event = 'tool_call' \
         AND account_id = $1 ORDER BY id",
    )
    .bind(&alice)
    .fetch_all(app.db.pool().await)
    .await
    .unwrap();
    let subjects: Vec<(&str, &str)> = rows
        .iter()
        .map(|(s, o, _)| (s.as_str(), o.as_str()))
        .collect();
    assert_eq!(
        subjects,
        [("list_projects", "success"), ("create_note", "success")]
    );
    let detail = rows[1].2.as_deref().unwrap();
    assert!(
        detail.starts_with(&format!(
            "credential=account_key:{key_id} project={project}"
        )),
        "{detail}"
    );
}

#[tokio::test]
async fn a_missing_or_refused_key_stops_the_process_at_start() {
    let app = spawn_app().await;
    app.create_account(ALICE, "a-long-password").await;
    let (key_id, key) = create_key(&app, &["--account", ALICE]);
    let (success, _, err) = gatehouse(&app, &["key", "revoke", &key_id]);
    assert!(success, "{err}");

    for (key, expected) in [
        (None, "GATEHOUSE_API_KEY: not set"),
        (Some("not-a-key"), "GATEHOUSE_API_KEY: not an API key"),
        (
            Some(key.as_str()),
            "GATEHOUSE_API_KEY: the API key is unknown, revoked or expired",
        ),
    ] {
        let child = launch(&app, key);
        let out = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        assert!(!out.status.success(), "{expected}");
        assert!(out.stdout.is_empty(), "nothing on stdout: {:?}", out.stdout);
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(stderr.contains(expected), "{stderr}");
    }
}

/// A desktop client may end its server before it has said anything: SIGTERM (or SIGINT) while
/// `gatehouse stdio` waits for `initialize`, with its standard input still open, ends it at
/// once with status 0, as it does later in a session.
#[tokio::test]
async fn a_signal_before_the_client_initializes_stops_the_process_at_once() {
    let app = spawn_app().await;
    app.create_account(ALICE, "a-long-password").await;
    let (_, key) = create_key(&app, &["--account", ALICE]);
    for signal in ["-TERM", "-INT"] {
        let mut child = launch(&app, Some(&key));
        let stdin = child.stdin.take().unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
        // Serving starts once the key is accepted; wait for its line.
        loop {
            let line = tokio::time::timeout(Duration::from_secs(20), stderr.next_line())
                .await
                .expect("a log line within 20 s")
                .unwrap()
                .expect("stderr open while it serves");
            if line.contains("serving MCP over stdio") {
                break;
            }
        }
        let told = std::time::Instant::now();
        let pid = child.id().unwrap().to_string();
        assert!(
            std::process::Command::new("kill")
                .args([signal, &pid])
                .status()
                .unwrap()
                .success()
        );
        let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
            .await
            .unwrap_or_else(|_| panic!("{signal}: still running 20 s after the signal"))
            .unwrap();
        let took = told.elapsed();
        assert!(status.success(), "{signal}: {status}");
        assert!(
            took < Duration::from_millis(1900),
            "{signal}: exiting took {took:?}"
        );
        drop(stdin);
    }
}
