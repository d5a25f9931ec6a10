//! An upstream's prompts and resources: listed after Gatehouse's own as `NAME__PROMPT` and
//! under `gatehouse://upstreams/NAME/…`, got and read through Gatehouse with the same scope,
//! quota and audit as built-in reads, only by the accounts that may use the upstream.

use std::time::Duration;

use serde_json::{Value, json};
use sqlx::Row;

use super::stdio::add_local_upstream;
use super::{cli_ok, spawn_with_key};
use crate::helpers::TestApp;
use crate::mcp::{alice, bob, modern, rpc, send};

const MEMO: &str = "gatehouse://upstreams/local/memo://notes/first";

fn prompt_names(list: &Value) -> Vec<String> {
    list["result"]["prompts"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect()
}

/// Lists prompts until an upstream's appear (the child starts on first use).
async fn prompts_until(app: &TestApp, token: &str, want: bool) -> Value {
    let mut last = Value::Null;
    for _ in 0..150 {
        last = rpc(app, token, "prompts/list", json!({})).await;
        if prompt_names(&last).iter().any(|n| n == "local__greet") == want {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the prompt listing never matched: {last}");
}

#[tokio::test]
async fn upstream_prompts_and_resources_are_listed_namespaced_and_forwarded_with_audit() {
    let app = spawn_with_key().await;
    let a = alice(&app).await;
    let builtin = prompt_names(&rpc(&app, &a.token, "prompts/list", json!({})).await);
    add_local_upstream(&app).await;

    let listing = prompts_until(&app, &a.token, true).await;
    let names = prompt_names(&listing);
    assert_eq!(
        &names[..builtin.len()],
        &builtin[..],
        "built-in prompts first"
    );
    assert_eq!(&names[builtin.len()..], ["local__greet"]);

    let (status, _, got) = send(
        modern(
            &app,
            Some(&a.token),
            "prompts/get",
            json!({"name": "local__greet", "arguments": {"who": "Ada"}}),
        )
        .header("mcp-name", "local__greet"),
    )
    .await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(
        got["result"]["messages"][0]["content"]["text"], "Say hello to Ada.",
        "{got}"
    );
    // A 2026-07-28 server sends `resultType` in every result, whatever the upstream sent.
    assert_eq!(got["result"]["resultType"], "complete", "{got}");

    let resources = rpc(&app, &a.token, "resources/list", json!({})).await;
    let uris: Vec<&str> = resources["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert_eq!(uris.last(), Some(&MEMO), "{resources}");

    let read = rpc(&app, &a.token, "resources/read", json!({"uri": MEMO})).await;
    assert_eq!(
        read["result"]["contents"][0]["text"], "remember the milk",
        "{read}"
    );
    assert_eq!(read["result"]["contents"][0]["uri"], MEMO);
    assert_eq!(read["result"]["resultType"], "complete", "{read}");

    // The upstream's "not found" names the upstream; 2026-07-28 gives a missing resource the
    // code -32602 (rmcp maps the older -32002 for such clients).
    let missing = rpc(
        &app,
        &a.token,
        "resources/read",
        json!({"uri": "gatehouse://upstreams/local/memo://notes/none"}),
    )
    .await;
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
    assert!(
        missing["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("upstream local: "),
        "{missing}"
    );

    // A read-only token reads them too (they need mcp:read).
    let (_, reader, _) = bob(&app, "mcp:read").await;
    let read = rpc(&app, &reader, "resources/read", json!({"uri": MEMO})).await;
    assert_eq!(
        read["result"]["contents"][0]["text"], "remember the milk",
        "{read}"
    );

    // Audited like built-in reads, naming the upstream, never the arguments.
    app.store.flush_audit().await;
    let rows = sqlx::query(
        "SELECT event, subject, outcome, detail FROM audit_events \
         WHERE event IN ('prompt_get', 'resource_read') ORDER BY id",
    )
    .fetch_all(app.db.pool().await)
    .await
    .unwrap();
    let rows: Vec<(String, String, String, String)> = rows
        .iter()
        .map(|r| {
            (
                r.try_get("event").unwrap(),
                r.try_get("subject").unwrap(),
                r.try_get("outcome").unwrap(),
                r.try_get("detail").unwrap(),
            )
        })
        .collect();
    let short: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|(e, s, o, _)| (e.as_str(), s.as_str(), o.as_str()))
        .collect();
    assert_eq!(
        short,
        [
            ("prompt_get", "local__greet", "success"),
            ("resource_read", "gatehouse://upstreams/local", "success"),
            ("resource_read", "gatehouse://upstreams/local", "not_found"),
            ("resource_read", "gatehouse://upstreams/local", "success"),
        ]
    );
    assert!(
        rows.iter().all(|r| r.3.contains("upstream=local")),
        "{rows:?}"
    );
    assert!(rows.iter().all(|r| !r.3.contains("Ada")));

    // Resources an upstream names in a prompt or a tool result (a link, an embedded resource)
    // carry the URI a client reads through Gatehouse, and that URI reads.
    assert_eq!(
        got["result"]["messages"][1]["content"]["type"],
        "resource_link"
    );
    assert_eq!(
        got["result"]["messages"][1]["content"]["uri"], MEMO,
        "{got}"
    );
    let linked = crate::mcp::call(&app, &a.token, "local__echo", json!({"message": "link"})).await;
    assert_ne!(linked["isError"], true, "{linked}");
    assert_eq!(linked["content"][1]["type"], "resource_link", "{linked}");
    assert_eq!(linked["content"][1]["uri"], MEMO, "{linked}");
    assert_eq!(linked["content"][2]["resource"]["uri"], MEMO, "{linked}");
    assert_eq!(
        linked["content"][2]["resource"]["text"],
        "remember the milk"
    );
    let uri = linked["content"][1]["uri"].as_str().unwrap();
    let read = rpc(&app, &a.token, "resources/read", json!({"uri": uri})).await;
    assert_eq!(
        read["result"]["contents"][0]["text"], "remember the milk",
        "{read}"
    );

    // Restricted to another account (Bob): gone for Alice, unknown when she asks for it.
    cli_ok(&app, &["upstream", "remove", "local"]).await;
    super::stdio::add_local_upstream_with(&app, &["--accounts", "bob@example.com"]).await;
    prompts_until(&app, &a.token, false).await;
    let read = rpc(&app, &a.token, "resources/read", json!({"uri": MEMO})).await;
    assert!(read["error"].is_object(), "{read}");
    assert!(read["result"].is_null(), "{read}");
}

/// `completion/complete` of an upstream prompt's or resource template's argument is answered by
/// the upstream, asked with its own prompt name or URI (before, Gatehouse answered "Unknown
/// prompt"); a name the upstream does not list stays unknown.
#[tokio::test]
async fn upstream_prompt_and_template_arguments_complete_through_the_upstream() {
    let app = spawn_with_key().await;
    let a = alice(&app).await;
    add_local_upstream(&app).await;
    prompts_until(&app, &a.token, true).await;

    let template = "gatehouse://upstreams/local/memo://notes/{name}";
    let templates = rpc(&app, &a.token, "resources/templates/list", json!({})).await;
    assert!(
        templates["result"]["resourceTemplates"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["uriTemplate"] == template),
        "{templates}"
    );

    let complete = |reference: Value, name: &str, value: &str| {
        let params = json!({"ref": reference, "argument": {"name": name, "value": value}});
        let app = &app;
        let token = a.token.clone();
        async move { rpc(app, &token, "completion/complete", params).await }
    };
    let who = complete(
        json!({"type": "ref/prompt", "name": "local__greet"}),
        "who",
        "a",
    )
    .await;
    assert_eq!(
        who["result"]["completion"]["values"],
        json!(["Ada", "Alan"]),
        "{who}"
    );
    let name = complete(
        json!({"type": "ref/resource", "uri": template}),
        "name",
        "f",
    )
    .await;
    assert_eq!(
        name["result"]["completion"]["values"],
        json!(["first"]),
        "{name}"
    );
    // The upstream's own error, naming it.
    let wrong = complete(
        json!({"type": "ref/prompt", "name": "local__greet"}),
        "nobody",
        "",
    )
    .await;
    assert_eq!(wrong["error"]["code"], -32602, "{wrong}");
    assert!(
        wrong["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("upstream local: "),
        "{wrong}"
    );
    // A prompt the upstream does not list is Gatehouse's unknown prompt.
    let unknown = complete(
        json!({"type": "ref/prompt", "name": "local__nope"}),
        "who",
        "",
    )
    .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Unknown prompt"),
        "{unknown}"
    );
}
