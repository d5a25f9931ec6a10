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

/// Adds `stdio_upstream.mjs` as the stdio upstream `local`, its definitions trusted.
pub(crate) async fn add_local_upstream(app: &TestApp) {
    add_local_upstream_with(app, &[]).await;
}

/// As [`add_local_upstream`], with `more` options of `upstream add`; what the command printed.
pub(crate) async fn add_local_upstream_with(app: &TestApp, more: &[&str]) -> String {
    let command = node_upstream_command();
    let mut args = vec![
        "upstream",
        "add",
        "local",
        "--command",
        &command,
        "--trust-definitions",
    ];
    args.extend_from_slice(more);
    cli_ok(app, &args).await
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
    use std::os::unix::fs::PermissionsExt as _;
    let app = spawn_with_key().await;
    let a = alice(&app).await;
    let before = rpc(&app, &a.token, "tools/list", json!({})).await;
    let builtin = before["result"]["tools"].as_array().unwrap().len();
    // A program that does not exist is refused at add time, in one line.
    let run = cli(
        &app,
        &[
            "upstream",
            "add",
            "broken",
            "--command",
            "/nonexistent/mcp-server --stdio",
        ],
    )
    .await;
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr.trim(),
        "gatehouse: invalid --command: /nonexistent/mcp-server does not exist"
    );
    let run = cli(
        &app,
        &[
            "upstream",
            "add",
            "broken",
            "--command",
            "mcp-nowhere-to-be-found",
        ],
    )
    .await;
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("no program named mcp-nowhere-to-be-found in PATH"),
        "{}",
        run.stderr
    );
    assert!(
        cli_ok(&app, &["upstream", "list"])
            .await
            .starts_with("no upstreams")
    );

    // One that existed when it was added but is gone when the server starts it.
    let bin = tempfile::tempdir().unwrap();
    let program = bin.path().join("mcp-server");
    std::fs::write(&program, "#!/bin/sh\nexit 3\n").unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let program = program.to_str().unwrap().to_string();
    cli_ok(
        &app,
        &[
            "upstream",
            "add",
            "broken",
            "--command",
            &format!("{program} --stdio"),
            "--trust-definitions",
        ],
    )
    .await;
    std::fs::remove_file(&program).unwrap();
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
        shown.starts_with(&format!("broken  stdio  {program} --stdio  unreachable")),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("upstream broken: could not start {program}")),
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

/// Waits up to 10 s for `done`.
async fn eventually(done: impl Fn() -> bool) -> bool {
    for _ in 0..100 {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test]
async fn a_removed_stdio_upstreams_empty_working_folder_goes_with_its_child() {
    let app = spawn_with_key().await;
    let a = alice(&app).await;
    // A child that closes its standard error at once: its folder stays while it runs.
    let command = format!("sh -c \"exec {} 2>/dev/null\"", node_upstream_command());
    cli_ok(
        &app,
        &[
            "upstream",
            "add",
            "tidy",
            "--command",
            &command,
            "--env",
            "WITH_SLOW=1",
            "--timeout",
            "20s",
            "--trust-definitions",
        ],
    )
    .await;
    list_until(&app, &a.token, |n| n.contains(&"tidy__whoami".to_string())).await;
    let result = call(&app, &a.token, "tidy__whoami", json!({})).await;
    let me: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    let cwd = std::path::PathBuf::from(me["cwd"].as_str().unwrap());
    let pid = me["pid"].as_u64().unwrap();
    assert!(cwd.is_dir(), "{}", cwd.display());
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(cwd.is_dir(), "kept while its child runs: {}", cwd.display());
    let again = call(&app, &a.token, "tidy__whoami", json!({})).await;
    assert_eq!(again["isError"], false, "{again}");

    // Removed while a call runs: the call is answered first, then the child stops.
    let (slow, ()) = tokio::join!(call(&app, &a.token, "tidy__slow", json!({})), async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        cli_ok(&app, &["upstream", "remove", "tidy"]).await;
    });
    assert_eq!(slow["isError"], false, "{slow}");
    assert_eq!(slow["content"][0]["text"], "late");
    assert!(
        eventually(|| !alive(pid)).await,
        "the child of a removed upstream is stopped"
    );
    assert!(
        eventually(|| !cwd.exists()).await,
        "its empty working folder is removed: {}",
        cwd.display()
    );
}

#[tokio::test]
async fn gatehouse_stdio_leaves_no_working_folder_behind_when_it_exits() {
    let app = spawn_with_key().await;
    alice(&app).await;
    add_local_upstream(&app).await;
    let (_, key) = crate::keys::create_key(
        &app,
        &["--account", crate::keys::ALICE, "--name", "Desktop"],
    );
    // The client goes away (stdin closes), or the process is told to stop (SIGTERM, as a
    // desktop client ends its servers): either way it exits cleanly, taking its child's
    // folder along.
    for by_signal in [false, true] {
        stdio_session_leaves_no_folder(&app, &key, by_signal).await;
    }
}

/// Runs `gatehouse stdio` with `key` and a temporary folder of its own, calls
/// `local__whoami`, ends it (SIGTERM when `by_signal`, else by closing its stdin) and checks
/// that it exited with status 0 and left nothing in its temporary folder.
async fn stdio_session_leaves_no_folder(app: &TestApp, key: &str, by_signal: bool) {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
    let temp = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .arg("stdio")
        .env("DATABASE_URL", &app.db.url)
        .env("MCP_SERVER_URL", &app.config.mcp_server_url)
        .env("GATEHOUSE_SECRET_KEY", super::TEST_KEY)
        .env("GATEHOUSE_API_KEY", key)
        .env("TMPDIR", temp.path())
        .env("RUST_LOG", "error")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let messages = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "folder-test", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "local__whoami", "arguments": {}}}),
    ];
    let mut cwd = None;
    for message in messages {
        let mut line = message.to_string();
        line.push('\n');
        stdin.write_all(line.as_bytes()).await.unwrap();
        if message.get("id").is_none() {
            continue;
        }
        let answer = tokio::time::timeout(Duration::from_secs(30), stdout.next_line())
            .await
            .expect("an answer within 30 s")
            .unwrap()
            .expect("stdout open");
        let answer: Value = serde_json::from_str(&answer).unwrap();
        if message["id"] == 2 {
            assert_eq!(answer["result"]["isError"], false, "{answer}");
            let me: Value =
                serde_json::from_str(answer["result"]["content"][0]["text"].as_str().unwrap())
                    .unwrap();
            cwd = Some(std::path::PathBuf::from(me["cwd"].as_str().unwrap()));
        }
    }
    let cwd = cwd.unwrap();
    assert_eq!(cwd.parent(), Some(temp.path()), "{}", cwd.display());
    assert!(cwd.is_dir());

    let told = std::time::Instant::now();
    if by_signal {
        let pid = child.id().unwrap().to_string();
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        assert!(sent.success());
    } else {
        drop(stdin);
    }
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("gatehouse stdio exits")
        .unwrap();
    assert!(status.success(), "by_signal={by_signal}: {status}");
    // Its standard input is still open after a signal: the stop must not wait for the reader
    // blocked on it (the runtime's bound for leftover work is 2 s).
    let took = told.elapsed();
    assert!(
        took < Duration::from_millis(1900),
        "by_signal={by_signal}: exiting took {took:?}"
    );
    let left: Vec<_> = std::fs::read_dir(temp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        left.is_empty(),
        "by_signal={by_signal}: left behind: {left:?}"
    );
}

#[tokio::test]
async fn a_command_prints_its_answer_and_nothing_else_unless_asked_to_log() {
    let app = spawn_with_key().await;
    let command = node_upstream_command();
    let run = |args: Vec<String>, log: Option<&'static str>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"));
        cmd.args(&args)
            .env("DATABASE_URL", &app.db.url)
            .env("MCP_SERVER_URL", &app.config.mcp_server_url)
            .env("GATEHOUSE_SECRET_KEY", super::TEST_KEY)
            .env_remove("RUST_LOG");
        if let Some(level) = log {
            cmd.env("RUST_LOG", level);
        }
        tokio::task::spawn_blocking(move || cmd.output().unwrap())
    };
    let words = |args: &[&str]| -> Vec<String> { args.iter().map(|s| (*s).to_string()).collect() };
    let add = words(&["upstream", "add", "quiet", "--command", &command]);
    // Adding a stdio upstream starts its child for the listing and stops it: nothing of that,
    // nor the audit line, reaches standard error by default.
    let out = run(add, None).await.unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "",
        "stderr stays empty"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("added upstream quiet"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // An upstream that cannot be reached: the answer says so, rmcp's own error lines stay out.
    let dead = words(&["upstream", "add", "dead", "--url", "http://127.0.0.1:9/mcp"]);
    let out = run(dead, None).await.unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "",
        "stderr stays empty"
    );
    let answer = String::from_utf8_lossy(&out.stdout);
    assert!(answer.starts_with("added upstream dead"), "{answer}");
    // Asked for, the audit line is there.
    let disable = words(&["upstream", "disable", "quiet"]);
    let out = run(disable, Some("info")).await.unwrap();
    assert!(out.status.success());
    let logged = String::from_utf8_lossy(&out.stderr);
    assert!(logged.contains("upstream_disabled"), "{logged}");
}

#[tokio::test]
async fn what_a_stdio_child_started_in_the_background_is_stopped_with_it() {
    let app = spawn_with_key().await;
    let a = alice(&app).await;
    let marks = tempfile::tempdir().unwrap();
    let pid_file = marks.path().join("background.pid");
    // The child starts a process of its own in the background, then becomes the MCP server.
    let command = format!(
        "sh -c \"sleep 300 </dev/null >/dev/null 2>&1 & echo \\$! > '{}'; exec {}\"",
        pid_file.display(),
        node_upstream_command()
    );
    cli_ok(
        &app,
        &[
            "upstream",
            "add",
            "busy",
            "--command",
            &command,
            "--trust-definitions",
        ],
    )
    .await;
    list_until(&app, &a.token, |n| n.contains(&"busy__whoami".to_string())).await;
    let result = call(&app, &a.token, "busy__whoami", json!({})).await;
    assert_eq!(result["isError"], false, "{result}");
    let me: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    let child = me["pid"].as_u64().unwrap();
    let background: u64 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(background), "the background process runs");

    cli_ok(&app, &["upstream", "disable", "busy"]).await;
    assert!(eventually(|| !alive(child)).await, "the child is stopped");
    assert!(
        eventually(|| !alive(background)).await,
        "what it left running in its process group is stopped too"
    );
}

/// An upstream that announces a change of its tools or prompts
/// (`notifications/tools/list_changed`, `…/prompts/list_changed`) is listed again at once, not
/// after the 30 s the listing is otherwise kept (issue: "refreshed on the upstream's
/// `list_changed` notification where it sends one").
#[tokio::test]
async fn a_list_changed_notification_refreshes_the_listing_at_once() {
    let app = spawn_with_key().await;
    let a = alice(&app).await;
    add_local_upstream_with(&app, &["--env", "WITH_GROW=1"]).await;
    list_until(&app, &a.token, |n| n.contains(&"local__grow".to_string())).await;
    let prompts = |list: &Value| -> Vec<String> {
        list["result"]["prompts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap().to_string())
            .collect()
    };
    let before = rpc(&app, &a.token, "prompts/list", json!({})).await;
    assert!(
        prompts(&before).contains(&"local__greet".to_string()),
        "{before}"
    );
    assert!(
        !prompts(&before).contains(&"local__bye".to_string()),
        "{before}"
    );

    let result = call(&app, &a.token, "local__grow", json!({})).await;
    assert_eq!(result["content"][0]["text"], "grown", "{result}");
    let started = std::time::Instant::now();
    list_until(&app, &a.token, |n| n.contains(&"local__grown".to_string())).await;
    let mut listed = Value::Null;
    while started.elapsed() < Duration::from_secs(10) {
        listed = rpc(&app, &a.token, "prompts/list", json!({})).await;
        if prompts(&listed).contains(&"local__bye".to_string()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        prompts(&listed).contains(&"local__bye".to_string()),
        "{listed}"
    );
    // Well within the 30 s a listing is kept: the notification, not the age, made it stale.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "seen after {:?}",
        started.elapsed()
    );
}

/// A stdio child started again may list other tools than the one before it: the listing is
/// made again at once after the restart, not after the 30 s a listing is otherwise kept.
#[tokio::test]
async fn a_restarted_child_is_listed_again_at_once() {
    let app = spawn_with_key().await;
    let a = alice(&app).await;
    // Trusted, it is listed at once, and the command says what it lists.
    let added = add_local_upstream_with(&app, &[]).await;
    assert!(
        added.contains(
            "trusted without approval; it lists 4 tools, 1 of them destructive, which clients see once allowed: gatehouse upstream allow-destructive local TOOL"
        ),
        "{added}"
    );
    list_until(&app, &a.token, |n| n.contains(&"local__echo".to_string())).await;
    let me = whoami(&app, &a.token).await.expect("whoami answers");
    let first_pid = me["pid"].as_u64().unwrap();
    let marker = std::path::Path::new(me["cwd"].as_str().unwrap()).join("grown");

    // It exits, and the process started after it lists `grown` too.
    let bye = call(&app, &a.token, "local__exit", json!({"grow": true})).await;
    assert_eq!(bye["content"][0]["text"], "bye", "{bye}");
    let mut restarted = false;
    for _ in 0..100 {
        if let Some(me) = whoami(&app, &a.token).await
            && me["pid"].as_u64() != Some(first_pid)
        {
            restarted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(restarted, "the child was started again");
    let started = std::time::Instant::now();
    list_until(&app, &a.token, |n| n.contains(&"local__grown".to_string())).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "listed after {:?}",
        started.elapsed()
    );
    // The folder is removed with the child only when empty.
    std::fs::remove_file(marker).unwrap();
}

/// The restart wait counts from the start of the child that exited, not from the use that
/// finds it gone: a use that comes after the wait starts the child at once (before, the
/// first call after a quiet spell was refused "started again in 1 s").
#[tokio::test]
async fn a_child_found_gone_after_its_wait_is_started_at_once() {
    let app = spawn_with_key().await;
    let a = alice(&app).await;
    add_local_upstream(&app).await;
    list_until(&app, &a.token, |n| n.contains(&"local__echo".to_string())).await;
    let first = whoami(&app, &a.token).await.expect("whoami answers")["pid"].clone();
    // The first exit: started again at once.
    let bye = call(&app, &a.token, "local__exit", json!({})).await;
    assert_eq!(bye["content"][0]["text"], "bye", "{bye}");
    let mut second = None;
    for _ in 0..100 {
        if let Some(me) = whoami(&app, &a.token).await
            && me["pid"] != first
        {
            second = Some(me["pid"].clone());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let second = second.expect("the child was started again");
    // The second exit waits 1 s from that child's start; the next use comes later.
    let bye = call(&app, &a.token, "local__exit", json!({})).await;
    assert_eq!(bye["content"][0]["text"], "bye", "{bye}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let result = call(&app, &a.token, "local__whoami", json!({})).await;
    assert_eq!(result["isError"], false, "{result}");
    let me: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_ne!(me["pid"], second, "{me}");
}
