//! Tool lists per credential: an API key or a personal URL made with `--tools 'a,b'` lists and
//! calls only those tools, one made with `--deny-tools 'c'` every tool but those, built-in and
//! upstream tools alike; a tool outside the list answers like an unknown tool.

use std::time::Duration;

use serde_json::{Value, json};
use sqlx::Row;

use super::stdio::add_local_upstream;
use super::{cli, cli_ok, spawn_with_key};
use crate::helpers::TestApp;
use crate::mcp::{alice, call, rpc, send};
use crate::urls::{call_url, to_url};

fn names(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// `gatehouse key create …` for Alice; the key.
async fn key(app: &TestApp, extra: &[&str]) -> String {
    let mut args = vec!["key", "create", "--account", "alice@example.com", "--write"];
    args.extend_from_slice(extra);
    let out = cli_ok(app, &args).await;
    out.lines()
        .find_map(|l| l.strip_prefix("key: "))
        .unwrap_or_else(|| panic!("{out}"))
        .to_string()
}

/// Lists with `credential` until an upstream tool shows (the child starts on first use).
async fn list_until_upstream(app: &TestApp, credential: &str) -> Vec<String> {
    let mut last = Vec::new();
    for _ in 0..150 {
        last = names(&rpc(app, credential, "tools/list", json!({})).await);
        if last.iter().any(|n| n.starts_with("local__")) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("no upstream tool was ever listed: {last:?}");
}

#[tokio::test]
async fn keys_and_personal_urls_list_and_call_only_the_tools_they_were_given() {
    let app = spawn_with_key().await;
    let a = alice(&app).await;
    add_local_upstream(&app).await;
    let everything = list_until_upstream(&app, &a.token).await;
    assert!(everything.contains(&"create_note".to_string()));

    // An allow-list: exactly those, in catalog order.
    let only = key(&app, &["--tools", "local__echo, list_projects"]).await;
    assert_eq!(
        list_until_upstream(&app, &only).await,
        ["list_projects", "local__echo"]
    );
    let echoed = call(&app, &only, "local__echo", json!({"message": "hi"})).await;
    assert_eq!(echoed["content"][0]["text"], "Echo: hi", "{echoed}");
    let refused = rpc(
        &app,
        &only,
        "tools/call",
        json!({"name": "local__whoami", "arguments": {}}),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert_eq!(refused["error"]["message"], "Unknown tool: local__whoami");
    let refused = rpc(
        &app,
        &only,
        "tools/call",
        json!({"name": "get_note", "arguments": {}}),
    )
    .await;
    assert_eq!(
        refused["error"]["code"], -32602,
        "a built-in tool too: {refused}"
    );

    // A deny-list: everything else.
    let except = key(&app, &["--deny-tools", "local__echo,create_note"]).await;
    let listed = list_until_upstream(&app, &except).await;
    let expected: Vec<String> = everything
        .iter()
        .filter(|n| *n != "local__echo" && *n != "create_note")
        .cloned()
        .collect();
    assert_eq!(listed, expected);
    let refused = rpc(
        &app,
        &except,
        "tools/call",
        json!({"name": "local__echo", "arguments": {"message": "x"}}),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let whoami = call(&app, &except, "local__whoami", json!({})).await;
    assert_eq!(whoami["isError"], false, "{whoami}");

    // A personal URL with a tool list.
    let out = cli_ok(
        &app,
        &[
            "url",
            "create",
            "--account",
            "alice@example.com",
            "--tools",
            "local__echo",
        ],
    )
    .await;
    let url = out
        .lines()
        .find_map(|l| l.strip_prefix("url: "))
        .unwrap()
        .to_string();
    let secret = url.rsplit('/').next().unwrap().to_string();
    let (_, _, listing) = send(to_url(&app, &secret, "tools/list", json!({}))).await;
    assert_eq!(names(&listing), ["local__echo"]);
    let (_, _, refused) = call_url(&app, &secret, "list_projects", json!({})).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");

    // The audit says which list a credential was made with.
    let detail: String = sqlx::query(
        "SELECT detail FROM audit_events WHERE event = 'key_created' ORDER BY id LIMIT 1",
    )
    .fetch_one(app.db.pool().await)
    .await
    .unwrap()
    .try_get("detail")
    .unwrap();
    assert!(
        detail.ends_with("tools=only:local__echo,list_projects"),
        "{detail}"
    );

    // Bad lists are one line and exit status 1; nothing is created.
    for (args, message) in [
        (
            vec!["--tools", "a", "--deny-tools", "b"],
            "gatehouse: give --tools or --deny-tools, not both",
        ),
        (
            vec!["--tools", "get.env"],
            "gatehouse: --tools: \"get.env\" is not a tool name (1 to 64 of A-Z, a-z, 0-9, _ and -)",
        ),
        (vec!["--tools", " , "], "gatehouse: --tools names no tool"),
    ] {
        let mut all = vec!["key", "create", "--account", "alice@example.com"];
        all.extend(args);
        let run = cli(&app, &all).await;
        assert_eq!(run.code, 1, "{all:?}");
        assert_eq!(run.stderr.trim(), message);
    }
}
