//! Stdio upstreams: a local MCP server (`stdio_upstream.mjs`, run with Node) started by
//! Gatehouse as a child process with only `PATH` and its `--env` variables, in its own working
//! folder; restarted after it exits; stopped when the upstream is disabled.

use std::time::Duration;

use serde_json::{Value, json};

use super::{cli, cli_ok, spawn_with_key};
use crate::helpers::TestApp;
use crate::mcp::{alice, call, rpc};

/// `node …/stdio_upstream.mjs`, as `--command` takes it.
pub(crate) fn node_upstream_command() -> String {
    format!(
        "node '{}/tests/integration/upstreams/stdio_upstream.mjs'",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn upstream_names(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .filter(|n| n.contains("__"))
        .collect()
}

/// Lists until `pred` holds (generous: a child process starts under load).
async fn list_until(app: &TestApp, token: &str, pred: impl Fn(&[String]) -> bool) -> Value {
    let mut last = Value::Null;
    for _ in 0..150 {
        last = rpc(app, token, "tools/list", json!({})).await;
        if pred(&upstream_names(&last)) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the listing never matched: {last}");
}

/// What the child said about itself (the `whoami` tool).
async fn whoami(app: &TestApp, token: &str) -> Option<Value> {
    let result = call(app, token, "local__whoami", json!({})).await;
    if result["isError"] != false {
        return None;
    }
    serde_json::from_str(result["content"][0]["text"].as_str()?).ok()
}

fn alive(pid: u64) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| !s.contains(") Z "))
            .unwrap_or(false)
}

#[tokio::test]
async fn a_stdio_upstream_runs_as_a_child_with_only_its_own_environment_and_is_restarted_and_stopped()
 {
    let app = spawn_with_key().await;
    let a = alice(&app).await;
    let command = node_upstream_command();
    cli_ok(
        &app,
        &[
            "upstream",
            "add",
            "local",
            "--command",
            &command,
            "--env",
            "GREETING=hello there",
            "--trust-definitions",
        ],
    )
    .await;
    list_until(&app, &a.token, |n| {
        n == ["local__echo", "local__exit", "local__whoami"]
    })
    .await;

    let result = call(&app, &a.token, "local__echo", json!({"message": "hi"})).await;
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["content"][0]["text"], "Echo: hi");

    // Only PATH and what --env names: none of Gatehouse's variables (the test process has
    // CARGO_*, DATABASE_URL-like settings, RUST_* …).
    let me = whoami(&app, &a.token).await.expect("whoami answers");
    assert_eq!(me["env"], json!(["GREETING", "PATH"]), "{me}");
    let cwd = std::path::PathBuf::from(me["cwd"].as_str().unwrap());
    assert!(
        cwd.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("gatehouse-upstream-local-"),
        "{}",
        cwd.display()
    );
    assert_ne!(cwd, std::env::current_dir().unwrap());
    let first_pid = me["pid"].as_u64().unwrap();
    assert!(alive(first_pid));

    // The child exits: the next calls start it again (the first restart is immediate).
    let bye = call(&app, &a.token, "local__exit", json!({})).await;
    assert_eq!(bye["content"][0]["text"], "bye", "{bye}");
    let mut second_pid = None;
    for _ in 0..100 {
        if let Some(me) = whoami(&app, &a.token).await
            && me["pid"].as_u64() != Some(first_pid)
        {
            second_pid = me["pid"].as_u64();
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let second_pid = second_pid.expect("the child was started again");
    assert!(!alive(first_pid), "the exited child is reaped");
    assert!(alive(second_pid));

    // Disabled: its tools leave the listing and the child is stopped.
    cli_ok(&app, &["upstream", "disable", "local"]).await;
    list_until(&app, &a.token, <[String]>::is_empty).await;
    let mut stopped = false;
    for _ in 0..100 {
        if !alive(second_pid) {
            stopped = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(stopped, "the child of a disabled upstream is stopped");
}

#[tokio::test]
async fn a_stdio_upstream_that_cannot_start_is_shown_unreachable_and_never_fails_the_list() {
    let app = spawn_with_key().await;
    let a = alice(&app).await;
    let before = rpc(&app, &a.token, "tools/list", json!({})).await;
    let builtin = before["result"]["tools"].as_array().unwrap().len();
    cli_ok(
        &app,
        &[
            "upstream",
            "add",
            "broken",
            "--command",
            "/nonexistent/mcp-server --stdio",
            "--trust-definitions",
        ],
    )
    .await;
    let mut shown = String::new();
    for _ in 0..100 {
        let listing = rpc(&app, &a.token, "tools/list", json!({})).await;
        assert_eq!(
            listing["result"]["tools"].as_array().unwrap().len(),
            builtin,
            "the built-in tools are still listed: {listing}"
        );
        shown = cli_ok(&app, &["upstream", "list"]).await;
        if shown.contains("could not start") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        shown.starts_with("broken  stdio  /nonexistent/mcp-server --stdio  unreachable"),
        "{shown}"
    );
    assert!(
        shown.contains("upstream broken: could not start /nonexistent/mcp-server"),
        "{shown}"
    );
    let result = call(&app, &a.token, "broken__anything", json!({})).await;
    assert!(
        result.is_null(),
        "an unreachable upstream has no tools: {result}"
    );
    // A bad command is refused at add time in one line.
    let run = cli(
        &app,
        &["upstream", "add", "bad", "--command", "node 'unbalanced"],
    )
    .await;
    assert_eq!(run.code, 1);
    assert_eq!(run.stderr.trim().lines().count(), 1, "{}", run.stderr);
}
