//! What the quota counts (issue 30, findings 7 and 8): `resources/read` and `prompts/get`
//! spend the account's budget like tool calls, and a call refused for its reach or role (a
//! project key asking for another project) does not, so one credential's refusals cannot
//! block the account's other credentials.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app_with};
use crate::keys::{ALICE, create_key};
use crate::mcp::{call, modern, ok, send};

async fn app_with_budget(budget: &str) -> (TestApp, String, String) {
    let budget = budget.to_string();
    let app = spawn_app_with(move |vars| {
        vars.insert("GATEHOUSE_QUOTA_CALLS_PER_HOUR".into(), budget);
    })
    .await;
    let alice = app.create_account(ALICE, "a-long-password").await;
    let now = gatehouse::store::now();
    let research = app
        .store
        .create_project("Research", &alice, now)
        .await
        .unwrap();
    let garden = app
        .store
        .create_project("Garden", &alice, now)
        .await
        .unwrap();
    (app, research, garden)
}

/// `resources/read` of `uri` with `key`: the JSON-RPC answer.
async fn read(app: &TestApp, key: &str, uri: &str) -> Value {
    let (status, _, body) = send(modern(
        app,
        Some(key),
        "resources/read",
        json!({"uri": uri}),
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

#[tokio::test]
async fn resource_reads_and_prompts_spend_the_budget() {
    let (app, research, _) = app_with_budget("3").await;
    let (_, key) = create_key(&app, &["--account", ALICE]);
    let uri = format!("gatehouse://projects/{research}");
    for n in 0..3 {
        let body = read(&app, &key, &uri).await;
        assert!(body["result"]["contents"].is_array(), "read {n}: {body}");
    }
    // Over budget: the read is refused with the budget's message, nothing read.
    let body = read(&app, &key, &uri).await;
    assert_eq!(body["error"]["code"], -32029, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("budget of 3 tool calls per rolling hour is spent"),
        "{message}"
    );
    assert!(body.get("result").is_none(), "{body}");
    // And a tool call after three reads is over budget too.
    let result = call(&app, &key, "list_projects", json!({})).await;
    assert_eq!(result["isError"], true, "{result}");
    // prompts/get is refused the same way.
    let (_, _, body) = send(
        modern(
            &app,
            Some(&key),
            "prompts/get",
            json!({"name": "summarize_project", "arguments": {"project_id": research}}),
        )
        .header("mcp-name", "summarize_project"),
    )
    .await;
    assert_eq!(body["error"]["code"], -32029, "{body}");
}

#[tokio::test]
async fn calls_refused_for_reach_do_not_spend_the_budget() {
    let (app, research, garden) = app_with_budget("3").await;
    // A read-only key for Research asks about Garden, out of its reach, again and again.
    let (_, project_key) = create_key(&app, &["--account", ALICE, "--project", &research]);
    for _ in 0..12 {
        let result = call(
            &app,
            &project_key,
            "get_project",
            json!({"project_id": garden}),
        )
        .await;
        assert_eq!(result["isError"], true, "{result}");
        let body = read(
            &app,
            &project_key,
            &format!("gatehouse://projects/{garden}"),
        )
        .await;
        assert!(body.get("error").is_some(), "{body}");
    }
    // The owner's own key still has the whole budget.
    let (_, own_key) = create_key(&app, &["--account", ALICE]);
    for _ in 0..3 {
        ok(&call(&app, &own_key, "list_projects", json!({})).await);
    }
    let result = call(&app, &own_key, "list_projects", json!({})).await;
    assert_eq!(
        result["isError"], true,
        "the fourth is over budget: {result}"
    );
}
