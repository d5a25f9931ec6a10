//! Upstream MCP servers behind Gatehouse (issue "Upstream MCP servers behind Gatehouse"):
//! the registry and its command line ([`registry`]), forwarding to an HTTP upstream
//! ([`forwarding`]), running a stdio upstream as a child process ([`stdio`]), an upstream's
//! prompts and resources ([`extras`]), destructive tools confirmed by the person
//! ([`destructive`]), tool lists per credential ([`tool_lists`]), a second Gatehouse behind
//! the first under one of its API keys ([`chained`]).

mod chained;
mod destructive;
mod extras;
mod forwarding;
mod operators;
mod registry;
mod stdio;
mod tool_lists;

use crate::helpers::{TestApp, spawn_app_with};

/// The server key every test of this module gives the server and the command line (the same
/// value on every instance, as `PostgreSQL` deployments must).
pub(crate) const TEST_KEY: &str =
    "0202020202020202020202020202020202020202020202020202020202020202";

/// A finished `gatehouse` command.
pub(crate) struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// The outcomes of `app`'s `tool_call` audit rows for tool `subject`, oldest first (queued
/// rows committed first).
pub(crate) async fn tool_call_outcomes(app: &TestApp, subject: &str) -> Vec<String> {
    use sqlx::Row as _;
    app.store.flush_audit().await;
    sqlx::query(
        "SELECT outcome FROM audit_events WHERE event = 'tool_call' AND subject = $1 ORDER BY id",
    )
    .bind(subject)
    .fetch_all(app.db.pool().await)
    .await
    .unwrap()
    .iter()
    .map(|r| r.try_get("outcome").unwrap())
    .collect()
}

/// Starts the server with [`TEST_KEY`].
pub(crate) async fn spawn_with_key() -> TestApp {
    spawn_app_with(|vars| {
        vars.insert("GATEHOUSE_SECRET_KEY".into(), TEST_KEY.into());
    })
    .await
}

/// Runs `gatehouse ARGS…` on `app`'s database with [`TEST_KEY`], off the test's runtime.
pub(crate) async fn cli(app: &TestApp, args: &[&str]) -> Run {
    let args: Vec<String> = args.iter().map(|a| (*a).to_string()).collect();
    let db = app.db.url.clone();
    let mcp = app.config.mcp_server_url.clone();
    tokio::task::spawn_blocking(move || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"))
            .args(&args)
            .env("DATABASE_URL", db)
            .env("MCP_SERVER_URL", mcp)
            .env("GATEHOUSE_SECRET_KEY", TEST_KEY)
            .env("RUST_LOG", "error")
            .output()
            .unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    })
    .await
    .unwrap()
}

/// Serves `router` on a random port of 127.0.0.1 for the rest of the test; the URL of its
/// `/mcp` route.
pub(crate) async fn serve_mcp(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    format!("http://127.0.0.1:{port}/mcp")
}

/// Runs `gatehouse ARGS…`, which must succeed; its standard output.
pub(crate) async fn cli_ok(app: &TestApp, args: &[&str]) -> String {
    let run = cli(app, args).await;
    assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
    run.stdout
}
