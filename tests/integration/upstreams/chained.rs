//! A second Gatehouse as an upstream that needs a header: the far server is reached only with
//! one of its own API keys, configured on the near server as `--header 'X-Api-Key: …'`
//! (sealed at rest). Its tools join the near server's catalog as `far__TOOL` and a call acts as
//! the far server's key owner, never as the near caller; without the header the far server
//! refuses and the upstream shows unreachable.

use std::time::Duration;

use serde_json::{Value, json};

use super::{cli, cli_ok, spawn_with_key};
use crate::helpers::TestApp;
use crate::mcp::{account_id, alice, call, rpc};

fn upstream_names(list: &Value, prefix: &str) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

/// Lists on `app` until `prefix` tools show (approval reaches the server within a second).
async fn listed(app: &TestApp, token: &str, prefix: &str) -> Vec<String> {
    for _ in 0..100 {
        let names = upstream_names(&rpc(app, token, "tools/list", json!({})).await, prefix);
        if !names.is_empty() {
            return names;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("no {prefix} tool was ever listed");
}

/// Lists once (recording the definitions) then approves, until something was approved.
async fn approve(app: &TestApp, token: &str, name: &str) -> String {
    for _ in 0..100 {
        rpc(app, token, "tools/list", json!({})).await;
        let out = cli_ok(app, &["upstream", "approve", name]).await;
        if out.contains("approved") {
            return out;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("nothing of {name} was ever pending");
}

#[tokio::test]
async fn a_second_gatehouse_behind_the_first_is_reached_with_its_own_api_key_only() {
    // The far server: Carol's account and project, and a read-only key of hers.
    let far = spawn_with_key().await;
    far.create_account("carol@example.com", "carols-long-password")
        .await;
    let carol = account_id(&far, "carol@example.com").await;
    far.store
        .create_project("Far side", &carol, gatehouse::store::now())
        .await
        .unwrap();
    let out = cli_ok(&far, &["key", "create", "--account", "carol@example.com"]).await;
    let far_key = out
        .lines()
        .find_map(|l| l.strip_prefix("key: "))
        .unwrap()
        .to_string();

    // The near server, with the far one behind it under its key.
    let near = spawn_with_key().await;
    let a = alice(&near).await;
    let far_url = format!("{}/mcp", far.address);
    cli_ok(
        &near,
        &[
            "upstream",
            "add",
            "far",
            "--url",
            &far_url,
            "--header",
            &format!("X-Api-Key: {far_key}"),
        ],
    )
    .await;
    let approved = approve(&near, &a.token, "far").await;
    assert!(approved.starts_with("upstream far: "), "{approved}");
    let tools = listed(&near, &a.token, "far__").await;
    assert!(
        tools.contains(&"far__list_projects".to_string()),
        "{tools:?}"
    );

    // A call acts as Carol on the far server: her project, not Alice's "Research".
    let result = call(&near, &a.token, "far__list_projects", json!({})).await;
    assert_eq!(result["isError"], false, "{result}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("Far side"), "{text}");
    assert!(!text.contains("Research"), "{text}");

    // The key is sealed at rest and never shown.
    let list = cli_ok(&near, &["upstream", "list"]).await;
    assert!(list.contains("headers=x-api-key"), "{list}");
    assert!(!list.contains(&far_key), "{list}");

    // Without the header the far server refuses: the upstream shows unreachable, and the
    // near server's own tools are still listed.
    cli_ok(
        &near,
        &[
            "upstream",
            "add",
            "bare",
            "--url",
            &far_url,
            "--trust-definitions",
        ],
    )
    .await;
    let mut shown = String::new();
    for _ in 0..100 {
        let listing = rpc(&near, &a.token, "tools/list", json!({})).await;
        assert!(upstream_names(&listing, "bare__").is_empty(), "{listing}");
        assert!(!upstream_names(&listing, "list_projects").is_empty());
        shown = cli_ok(&near, &["upstream", "list"]).await;
        if shown
            .lines()
            .any(|l| l.starts_with("bare ") && l.contains("unreachable"))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        shown
            .lines()
            .any(|l| l.starts_with("bare ") && l.contains("unreachable")),
        "{shown}"
    );
    let run = cli(&near, &["upstream", "remove", "bare"]).await;
    assert_eq!(run.code, 0);
}
