//! `gatehouse stdio --url` and `gatehouse login` (issue 38 part 4): the built binary bridges a
//! stdio client to the running server over HTTP, with an API key or with the tokens the OAuth
//! login saved — and never opens a database.

use std::os::unix::fs::PermissionsExt as _;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::helpers::{TestApp, spawn_app};
use crate::keys::{ALICE, create_key, gatehouse};
use crate::mcp::account_id;
use gatehouse::doctor::interactive::BrowserOpener;
use gatehouse::remote::credentials::CredentialsFile;

/// `gatehouse stdio --url` to the app, with a database URL that cannot be opened (the bridge
/// must not try), and `env`.
fn launch(app: &TestApp, env: &[(&str, &str)]) -> Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gatehouse"));
    command
        .args(["stdio", "--url", &app.config.mcp_server_url])
        .env("DATABASE_URL", "sqlite:///nonexistent-dir/never.db")
        .env("RUST_LOG", "info")
        .env_remove("GATEHOUSE_API_KEY")
        .env_remove("GATEHOUSE_CREDENTIALS_FILE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in env {
        command.env(k, v);
    }
    command.spawn().unwrap()
}

struct Session {
    stdin: ChildStdin,
    stdout: tokio::io::Lines<BufReader<ChildStdout>>,
    next_id: i64,
}

impl Session {
    fn of(child: &mut Child) -> Session {
        Session {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()).lines(),
            next_id: 0,
        }
    }

    async fn send_line(&mut self, line: &str) {
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        self.stdin.flush().await.unwrap();
    }

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

    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_line(&message.to_string()).await;
        let answer = self.read().await;
        assert_eq!(answer["id"], id, "{answer}");
        answer
    }
}

fn initialize() -> Value {
    json!({"protocolVersion": "2025-06-18", "capabilities": {},
           "clientInfo": {"name": "bridge-test", "version": "1"}})
}

#[tokio::test]
async fn the_bridge_forwards_a_stdio_client_with_an_api_key_and_no_database() {
    let app = spawn_app().await;
    let alice = app.create_account(ALICE, "a-long-password").await;
    let project = app
        .store
        .create_project("Research", &alice, gatehouse::store::now())
        .await
        .unwrap();
    let (key_id, key) = create_key(&app, &["--account", ALICE, "--write"]);
    let mut child = launch(&app, &[("GATEHOUSE_API_KEY", &key)]);
    let mut s = Session::of(&mut child);

    let init = s.request("initialize", initialize()).await;
    assert_eq!(init["result"]["serverInfo"]["name"], "gatehouse", "{init}");
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    // A notification is forwarded and answers nothing: the next line is the next answer.
    s.send_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;
    let list = s.request("tools/list", json!({})).await;
    assert_eq!(
        list["result"]["tools"].as_array().unwrap().len(),
        8,
        "{list}"
    );
    let call = s
        .request(
            "tools/call",
            json!({"name": "list_projects", "arguments": {}}),
        )
        .await;
    assert_eq!(
        call["result"]["structuredContent"]["projects"][0]["id"],
        project.as_str(),
        "{call}"
    );
    // A 2026-07-28 message passes with its headers (Mcp-Method, Mcp-Name) made by the bridge.
    let modern = s
        .request(
            "tools/call",
            json!({"name": "get_project", "arguments": {"project_id": project},
                   "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                             "io.modelcontextprotocol/clientCapabilities": {},
                             "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}}),
        )
        .await;
    assert_eq!(modern["result"]["resultType"], "complete", "{modern}");
    assert_eq!(modern["result"]["structuredContent"]["name"], "Research");
    // Not JSON: a parse error, and the bridge goes on.
    s.send_line("this is not json").await;
    let bad = s.read().await;
    assert_eq!(bad["error"]["code"], -32700, "{bad}");

    // The calls reached the server as the key's holder (audited there).
    let (revoked, _, err) = gatehouse(&app, &["key", "revoke", &key_id]);
    assert!(revoked, "{err}");
    let refused = s
        .request(
            "tools/call",
            json!({"name": "list_projects", "arguments": {}}),
        )
        .await;
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("GATEHOUSE_API_KEY"),
        "{refused}"
    );
    drop(s);
    let out = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains(&key), "the key is never logged");
}

#[tokio::test]
async fn login_keeps_the_tokens_private_and_the_bridge_refreshes_them() {
    let app = spawn_app().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gatehouse").join("credentials.json");
    let file = CredentialsFile::at(path.clone());
    let url = gatehouse::remote::parse_mcp_url(&app.config.mcp_server_url).unwrap();

    // Before any sign-in the bridge says what to run.
    let out = launch(
        &app,
        &[("GATEHOUSE_CREDENTIALS_FILE", path.to_str().unwrap())],
    )
    .wait_with_output()
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("gatehouse login"), "{stderr}");
    assert!(out.stdout.is_empty());

    // The person signs in and approves in the browser; the redirect reaches the login.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let opener = BrowserOpener(Arc::new(move |u: &str| {
        tx.send(u.to_string()).map_err(|e| e.to_string())
    }));
    let person = async {
        let authorize = rx.recv().await.expect("the login opens the browser");
        assert!(
            authorize.contains("code_challenge_method=S256"),
            "{authorize}"
        );
        assert!(authorize.contains("resource="), "{authorize}");
        assert!(authorize.contains("offline_access"), "{authorize}");
        let browser = crate::helpers::new_client();
        let location = crate::oauth_helpers::walk(&app, &browser, &authorize, "approve").await;
        assert!(location.starts_with("http://127.0.0.1:"), "{location}");
        browser.get(&location).send().await.unwrap();
    };
    let (saved, ()) = tokio::join!(
        gatehouse::remote::login::login(&url, None, &opener, Duration::from_secs(30), &file),
        person
    );
    let saved = saved.unwrap();
    assert!(saved.access_token.starts_with("gate_at_"));
    assert!(saved.refresh_token.is_some());
    assert_eq!(saved.issuer, app.config.issuer);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(
        mode & 0o777,
        0o600,
        "the token file is readable by its owner only"
    );

    let alice = account_id(&app, ALICE).await;
    let project = app
        .store
        .create_project("Research", &alice, gatehouse::store::now())
        .await
        .unwrap();

    // The access token is about to expire: the bridge refreshes it before forwarding.
    let mut stale = saved.clone();
    stale.expires_at = Some(gatehouse::store::now() + 10);
    file.save(url.as_str(), &stale).unwrap();
    let mut child = launch(
        &app,
        &[("GATEHOUSE_CREDENTIALS_FILE", path.to_str().unwrap())],
    );
    let mut s = Session::of(&mut child);
    s.request("initialize", initialize()).await;
    let call = s
        .request(
            "tools/call",
            json!({"name": "list_projects", "arguments": {}}),
        )
        .await;
    assert_eq!(
        call["result"]["structuredContent"]["projects"][0]["id"],
        project.as_str(),
        "{call}"
    );
    let refreshed = file.load(url.as_str()).unwrap().unwrap();
    assert_ne!(refreshed.access_token, saved.access_token);
    assert_ne!(
        refreshed.refresh_token, saved.refresh_token,
        "the refresh token rotated"
    );
    assert!(refreshed.expires_at.unwrap() > gatehouse::store::now() + 600);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    // A token the server no longer accepts (the account disabled) is refreshed once; when the
    // refresh is refused too, the client is told to sign in again.
    let (disabled, _, err) = gatehouse(&app, &["account", "disable", ALICE]);
    assert!(disabled, "{err}");
    let refused = s
        .request(
            "tools/call",
            json!({"name": "list_projects", "arguments": {}}),
        )
        .await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("gatehouse login"), "{refused}");
    drop(s);
    let out = child.wait_with_output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains(&refreshed.access_token),
        "tokens are never logged"
    );
}
