//! Credentials people make for headless clients, bounded (issue 30): at most
//! `MAX_LIVE_PER_ACCOUNT` live keys and as many live personal URLs per account, no allow-list
//! that allows everything, `url create` only under a `MCP_SERVER_URL` that was set, and
//! removing a member ends their project credentials for good.

use std::time::Duration;

use gatehouse::credentials::{self, Actor, MAX_LIVE_PER_ACCOUNT, NewCredential};
use gatehouse::domain::account::Role;
use gatehouse::domain::principal::IssuedCredential;
use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{TestApp, spawn_app};
use crate::keys::gatehouse;
use crate::mcp::{account_id, modern, send};
use crate::oauth_helpers::{EMAIL, PASSWORD, signed_in_browser};

/// Makes `n` live credentials of `kind` for `account` through the library.
async fn make(app: &TestApp, kind: IssuedCredential, account: &str, n: i64) -> Vec<String> {
    let mut secrets = Vec::new();
    for _ in 0..n {
        let issued = credentials::issue(
            &app.store,
            &NewCredential {
                kind,
                account_id: account,
                project_id: None,
                name: "bulk",
                write: false,
                allowed_ips: &[],
                expires_at: None,
                tools: &Default::default(),
            },
            Actor::Cli,
            gatehouse::store::now(),
        )
        .await
        .unwrap();
        secrets.push(issued.secret.expose().to_string());
    }
    secrets
}

#[tokio::test]
async fn an_account_holds_a_bounded_number_of_keys_and_urls() {
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    let alice = account_id(&app, EMAIL).await;
    make(&app, IssuedCredential::ApiKey, &alice, MAX_LIVE_PER_ACCOUNT).await;
    let (ok, _, err) = gatehouse(&app, &["key", "create", "--account", EMAIL]);
    assert!(!ok && err.contains("revoke one first"), "{err}");
    // The console says the same, and nothing is made.
    let page = browser
        .get(app.url("/keys"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = crate::helpers::hidden_input(&page, "csrf_token").unwrap();
    let r = browser
        .post(app.url("/keys/create"))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("name", "one more"),
            ("project", ""),
            ("access", "read"),
            ("expires", "none"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(r.text().await.unwrap().contains("revoke one first"));
    let now = gatehouse::store::now();
    assert_eq!(
        app.store
            .live_credentials(false, &alice, now)
            .await
            .unwrap(),
        MAX_LIVE_PER_ACCOUNT
    );
    // Personal URLs count on their own.
    make(
        &app,
        IssuedCredential::PersonalUrl,
        &alice,
        MAX_LIVE_PER_ACCOUNT,
    )
    .await;
    let (ok, _, err) = gatehouse(&app, &["url", "create", "--account", EMAIL]);
    assert!(!ok && err.contains("revoke one first"), "{err}");
}

#[tokio::test]
async fn an_allow_list_that_allows_everything_is_refused() {
    let app = spawn_app().await;
    app.create_account(EMAIL, PASSWORD).await;
    let alice = account_id(&app, EMAIL).await;
    let project = app
        .store
        .create_project("Research", &alice, gatehouse::store::now())
        .await
        .unwrap();
    for everything in [&["0.0.0.0/0"][..], &["::/0"], &["0.0.0.0/1", "128.0.0.0/1"]] {
        let mut args = vec!["key", "create", "--account", EMAIL, "--project", &project];
        for net in everything {
            args.extend(["--allow-ip", net]);
        }
        let (ok, _, err) = gatehouse(&app, &args);
        assert!(
            !ok && err.contains("limits nothing"),
            "{everything:?}: {err}"
        );
    }
    let (ok, _, err) = gatehouse(
        &app,
        &[
            "key",
            "create",
            "--account",
            EMAIL,
            "--project",
            &project,
            "--allow-ip",
            "203.0.113.0/24",
        ],
    );
    assert!(ok, "{err}");
}

#[tokio::test]
async fn url_create_needs_the_servers_url() {
    let app = spawn_app().await;
    app.create_account(EMAIL, PASSWORD).await;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .args(["url", "create", "--account", EMAIL])
        .env("DATABASE_URL", &app.db.url)
        .env_remove("MCP_SERVER_URL")
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("MCP_SERVER_URL is not set"), "{err}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("gate_pu_"),
        "no URL printed"
    );
    let alice = account_id(&app, EMAIL).await;
    let now = gatehouse::store::now();
    assert_eq!(
        app.store.live_credentials(true, &alice, now).await.unwrap(),
        0
    );
    // With it set, the URL is the server's.
    let (ok, out, err) = gatehouse(&app, &["url", "create", "--account", EMAIL]);
    assert!(ok, "{err}");
    assert!(
        out.contains(&format!("url: {}/gate_pu_", app.config.mcp_server_url)),
        "{out}"
    );
}

/// `tools/call list_projects` with a bearer credential: the status.
async fn status_with(app: &TestApp, credential: &str) -> StatusCode {
    send(modern(
        app,
        Some(credential),
        "tools/call",
        json!({"name": "list_projects", "arguments": {}}),
    ))
    .await
    .0
}

fn field(out: &str, name: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
        .unwrap_or_else(|| panic!("no {name} in {out}"))
        .to_string()
}

/// Removing a member and adding them back revives none of their project credentials (issue
/// 30, finding 6): project keys, personal URLs and project service clients end for good.
#[tokio::test]
async fn removing_a_member_ends_their_project_credentials_for_good() {
    let app = spawn_app().await;
    app.create_account(EMAIL, PASSWORD).await;
    let alice = account_id(&app, EMAIL).await;
    let bob_email = "bob@example.com";
    let bob = app.create_account(bob_email, "bob-password-1").await;
    let now = gatehouse::store::now();
    let project = app
        .store
        .create_project("Research", &alice, now)
        .await
        .unwrap();
    app.store
        .add_member(&project, &bob, Role::Write, now)
        .await
        .unwrap();
    let cli = |args: &[&str]| {
        let (ok, out, err) = gatehouse(&app, args);
        assert!(ok, "{args:?}: {err}");
        out
    };
    let key = field(
        &cli(&[
            "key",
            "create",
            "--account",
            bob_email,
            "--project",
            &project,
        ]),
        "key",
    );
    let url = field(
        &cli(&[
            "url",
            "create",
            "--account",
            bob_email,
            "--project",
            &project,
        ]),
        "url",
    );
    let out = cli(&[
        "client",
        "add",
        "Bob's job",
        "--service",
        "--owner",
        bob_email,
        "--project",
        &project,
    ]);
    let (client_id, secret) = (field(&out, "client_id"), field(&out, "client_secret"));
    let token = |app: &TestApp| {
        let (client_id, secret) = (client_id.clone(), secret.clone());
        let request = app
            .client
            .post(app.url("/oauth/token"))
            .basic_auth(client_id, Some(secret))
            .form(&[("grant_type", "client_credentials")]);
        async move {
            let r = request.send().await.unwrap();
            let status = r.status();
            let body: serde_json::Value = r.json().await.unwrap();
            (status, body["access_token"].as_str().map(str::to_string))
        }
    };
    let (status, service_token) = token(&app).await;
    assert_eq!(status, StatusCode::OK);
    let service_token = service_token.unwrap();
    let url_status = |url: String| {
        let request = app
            .client
            .post(url)
            .header("accept", crate::mcp::ACCEPT)
            .header("mcp-protocol-version", crate::mcp::V26)
            .header("mcp-method", "tools/list")
            .json(
                &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {
                    "_meta": {
                        "io.modelcontextprotocol/protocolVersion": crate::mcp::V26,
                        "io.modelcontextprotocol/clientCapabilities": {},
                        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}
                    }
                }}),
            );
        async move { request.send().await.unwrap().status() }
    };
    assert_eq!(status_with(&app, &key).await, StatusCode::OK);
    assert_eq!(url_status(url.clone()).await, StatusCode::OK);
    assert_eq!(status_with(&app, &service_token).await, StatusCode::OK);

    assert!(
        app.store
            .remove_member(&project, &bob, gatehouse::store::now())
            .await
            .unwrap()
    );
    app.store
        .add_member(&project, &bob, Role::Write, gatehouse::store::now())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        status_with(&app, &key).await,
        StatusCode::UNAUTHORIZED,
        "key"
    );
    assert_eq!(
        url_status(url).await,
        StatusCode::UNAUTHORIZED,
        "personal URL"
    );
    assert_eq!(
        status_with(&app, &service_token).await,
        StatusCode::UNAUTHORIZED,
        "service token"
    );
    let (status, again) = token(&app).await;
    assert!(
        status != StatusCode::OK && again.is_none(),
        "the service client gets no new token: {status}"
    );
}
