//! A destructive upstream tool: hidden until the operator allows it by name
//! (`gatehouse upstream allow-destructive NAME TOOL`); then each call is confirmed by the
//! person through MCP elicitation (a 2026-07-28 multi round-trip request, form mode) when the
//! client declares it, and refused with an `isError` result otherwise. The upstream sees only
//! confirmed calls.

use std::time::Duration;

use serde_json::{Value, json};

use super::stdio::add_local_upstream;
use super::{cli, cli_ok, spawn_with_key};
use crate::helpers::TestApp;
use crate::mcp::{alice, call, rpc};

fn upstream_names(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .filter(|n| n.starts_with("local__"))
        .collect()
}

async fn list_until(app: &TestApp, token: &str, pred: impl Fn(&[String]) -> bool) -> Vec<String> {
    let mut last = Vec::new();
    for _ in 0..150 {
        last = upstream_names(&rpc(app, token, "tools/list", json!({})).await);
        if pred(&last) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the listing never matched: {last:?}");
}

/// A 2026-07-28 `tools/call` whose client declares form-mode elicitation; `extra` is merged
/// into the params (`inputResponses`, `requestState`). The JSON-RPC message.
async fn call_eliciting(app: &TestApp, token: &str, args: Value, extra: Value) -> Value {
    let mut params = json!({
        "name": "local__wipe",
        "arguments": args,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
            "io.modelcontextprotocol/clientInfo": {"name": "gatehouse-tests", "version": "1"}
        }
    });
    for (k, v) in extra.as_object().unwrap() {
        params[k] = v.clone();
    }
    let response = app
        .client
        .post(app.url("/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "local__wipe")
        .json(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

fn accept(confirm: bool) -> Value {
    json!({"confirm": {"action": "accept", "content": {"confirm": confirm}}})
}

#[tokio::test]
async fn a_destructive_upstream_tool_is_hidden_until_allowed_then_each_call_is_confirmed() {
    let app = spawn_with_key().await;
    let a = alice(&app).await;
    add_local_upstream(&app).await;
    let listed = list_until(&app, &a.token, |n| n.contains(&"local__echo".to_string())).await;
    assert!(!listed.contains(&"local__wipe".to_string()), "{listed:?}");
    assert!(
        call(&app, &a.token, "local__wipe", json!({}))
            .await
            .is_null()
    );

    // Only a tool seen on the upstream can be allowed.
    let run = cli(&app, &["upstream", "allow-destructive", "local", "nope"]).await;
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr.trim(),
        "gatehouse: upstream local has no tool named nope seen yet (its tools are recorded the first time Gatehouse lists them)"
    );
    // A tool that is not destructive needs no allowance, and is refused one.
    let run = cli(&app, &["upstream", "allow-destructive", "local", "echo"]).await;
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr.trim(),
        "gatehouse: upstream local: tool echo is not destructive (annotated readOnlyHint: true or destructiveHint: false); it is listed once approved and its calls are not confirmed, so there is nothing to allow"
    );
    let out = cli_ok(&app, &["upstream", "allow-destructive", "local", "wipe"]).await;
    assert!(
        out.starts_with("upstream local: destructive tool wipe allowed"),
        "{out}"
    );
    list_until(&app, &a.token, |n| n.contains(&"local__wipe".to_string())).await;

    // A client that does not declare elicitation: refused, nothing forwarded.
    let refused = call(&app, &a.token, "local__wipe", json!({"message": "all"})).await;
    assert_eq!(refused["isError"], true, "{refused}");
    let text = refused["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Run wipe on local? This tool can destroy data")
            && text.contains("elicitation"),
        "{text}"
    );

    // A client with elicitation is asked in form mode.
    let asked = call_eliciting(&app, &a.token, json!({"message": "all"}), json!({})).await;
    let result = &asked["result"];
    assert_eq!(result["resultType"], "input_required", "{asked}");
    let question = &result["inputRequests"]["confirm"];
    assert_eq!(question["method"], "elicitation/create");
    assert_eq!(question["params"]["mode"], "form");
    assert_eq!(question["params"]["message"], "Run wipe on local?");
    assert_eq!(
        question["params"]["requestedSchema"]["properties"]["confirm"]["type"],
        "boolean"
    );
    let state = result["requestState"].as_str().unwrap().to_string();

    // The same state for other arguments, or a forged one, is refused.
    let other = call_eliciting(
        &app,
        &a.token,
        json!({"message": "something else"}),
        json!({"inputResponses": accept(true), "requestState": state}),
    )
    .await;
    assert_eq!(other["result"]["isError"], true, "{other}");
    assert!(
        other["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("invalid, expired or already used")
    );
    let forged = call_eliciting(
        &app,
        &a.token,
        json!({"message": "all"}),
        json!({"inputResponses": accept(true), "requestState": "v1.forged"}),
    )
    .await;
    assert_eq!(forged["result"]["isError"], true, "{forged}");

    // Declined: not run.
    let declined = call_eliciting(
        &app,
        &a.token,
        json!({"message": "all"}),
        json!({"inputResponses": {"confirm": {"action": "decline"}}, "requestState": state}),
    )
    .await;
    assert_eq!(
        declined["result"]["content"][0]["text"],
        "The person did not confirm: wipe was not run on local.",
        "{declined}"
    );

    // A state is answered once: accepting after the person declined is refused.
    let after_decline = call_eliciting(
        &app,
        &a.token,
        json!({"message": "all"}),
        json!({"inputResponses": accept(true), "requestState": state}),
    )
    .await;
    assert_eq!(after_decline["result"]["isError"], true, "{after_decline}");
    assert!(
        after_decline["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("already used"),
        "{after_decline}"
    );

    // Asked again and confirmed: forwarded once; the upstream's first wipe.
    let asked = call_eliciting(&app, &a.token, json!({"message": "all"}), json!({})).await;
    let state = asked["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_string();
    let confirmed = json!({"inputResponses": accept(true), "requestState": state});
    let done = call_eliciting(&app, &a.token, json!({"message": "all"}), confirmed.clone()).await;
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "wiped all (1)");

    // The same confirmed request sent again does not run the tool again.
    let replayed = call_eliciting(&app, &a.token, json!({"message": "all"}), confirmed).await;
    assert_eq!(replayed["result"]["isError"], true, "{replayed}");
    assert!(
        replayed["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("already used"),
        "{replayed}"
    );
    // The replay never reached the upstream: a new confirmation runs its second wipe.
    let asked = call_eliciting(&app, &a.token, json!({"message": "all"}), json!({})).await;
    let state = asked["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_string();
    let again = call_eliciting(
        &app,
        &a.token,
        json!({"message": "all"}),
        json!({"inputResponses": accept(true), "requestState": state}),
    )
    .await;
    assert_eq!(
        again["result"]["content"][0]["text"], "wiped all (2)",
        "{again}"
    );

    // Audited: refusals and the confirmed call.
    let outcomes = super::tool_call_outcomes(&app, "local__wipe").await;
    assert_eq!(
        outcomes,
        [
            "confirmation_needed",
            "confirmation_invalid",
            "confirmation_invalid",
            "declined",
            "confirmation_invalid",
            "success",
            "confirmation_invalid",
            "success"
        ]
    );

    // Revoked: hidden again.
    let out = cli_ok(
        &app,
        &["upstream", "allow-destructive", "local", "wipe", "--revoke"],
    )
    .await;
    assert_eq!(
        out.trim(),
        "upstream local: destructive tool wipe no longer allowed"
    );
    list_until(&app, &a.token, |n| !n.contains(&"local__wipe".to_string())).await;
}
