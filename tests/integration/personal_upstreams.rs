//! A person's own upstream servers (issue "Connections", item 5): added on the Connections
//! page for one account, the URL checked like a client metadata document (https, no loopback,
//! private or link-local destination unless the operator allows the host), definitions pinned
//! and approved by the person with a diff, tools named `p_LABEL_XXXXXX__TOOL` and seen and
//! called only by that account's own credentials, off with `GATEHOUSE_PERSONAL_UPSTREAMS=off`.
//! The upstream is a second Gatehouse reached with one of its API keys as the bearer token.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, hidden_input, spawn_app_with, spawn_instance};
use crate::mcp::{account_id, alice, bob, call, rpc};
use crate::oauth_helpers::EMAIL;
use crate::upstreams::{TEST_KEY, cli_ok, spawn_with_key};

/// The far server: Carol's account, a project "Far side" and a key of hers.
async fn far_gatehouse() -> (TestApp, String) {
    let far = spawn_with_key().await;
    far.create_account("carol@example.com", "carols-long-password")
        .await;
    let carol = account_id(&far, "carol@example.com").await;
    far.store
        .create_project("Far side", &carol, gatehouse::store::now())
        .await
        .unwrap();
    let out = cli_ok(&far, &["key", "create", "--account", "carol@example.com"]).await;
    let key = out
        .lines()
        .find_map(|l| l.strip_prefix("key: "))
        .unwrap()
        .to_string();
    (far, key)
}

/// The front server with the server key, `GATEHOUSE_UPSTREAM_ALLOW_HOSTS=allow` (when given)
/// and any other variables.
async fn front(allow: Option<String>, more: &[(&str, &str)]) -> TestApp {
    let more: Vec<(String, String)> = more
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect();
    spawn_app_with(move |vars| {
        vars.insert("GATEHOUSE_SECRET_KEY".into(), TEST_KEY.into());
        if let Some(allow) = allow {
            vars.insert("GATEHOUSE_UPSTREAM_ALLOW_HOSTS".into(), allow);
        }
        for (k, v) in more {
            vars.insert(k, v);
        }
    })
    .await
}

async fn connections_page(app: &TestApp, browser: &reqwest::Client) -> (StatusCode, String) {
    let r = browser.get(app.url("/connections")).send().await.unwrap();
    (r.status(), r.text().await.unwrap())
}

/// Posts `form` (plus the CSRF token of the Connections page) to `path`.
async fn post(
    app: &TestApp,
    browser: &reqwest::Client,
    path: &str,
    form: &[(&str, &str)],
) -> (StatusCode, String) {
    let (_, page) = connections_page(app, browser).await;
    let csrf = hidden_input(&page, "csrf_token").expect("a CSRF token");
    let mut fields: Vec<(&str, &str)> = vec![("csrf_token", csrf.as_str())];
    fields.extend_from_slice(form);
    let r = browser
        .post(app.url(path))
        .form(&fields)
        .send()
        .await
        .unwrap();
    (r.status(), r.text().await.unwrap())
}

async fn add(
    app: &TestApp,
    browser: &reqwest::Client,
    label: &str,
    url: &str,
    token: &str,
) -> (StatusCode, String) {
    post(
        app,
        browser,
        "/connections/servers",
        &[("label", label), ("url", url), ("token", token)],
    )
    .await
}

fn tool_names(listing: &Value) -> Vec<String> {
    listing["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listing}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// Lists until `name` is listed (`present`) or not, within a few seconds (a change reaches
/// every instance within a second).
async fn wait_listed(app: &TestApp, token: &str, name: &str, present: bool) {
    for _ in 0..60 {
        let names = tool_names(&rpc(app, token, "tools/list", json!({})).await);
        if names.iter().any(|n| n == name) == present {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{name} listed should be {present}");
}

/// A call of `name` answered as an unknown tool (JSON-RPC invalid params).
async fn unknown(app: &TestApp, token: &str, name: &str) {
    let body = rpc(
        app,
        token,
        "tools/call",
        json!({"name": name, "arguments": {}}),
    )
    .await;
    assert_eq!(body["error"]["code"], -32602, "{body}");
}

#[tokio::test]
async fn refused_addresses_store_nothing() {
    let (far, key) = far_gatehouse().await;
    // No allow list: the far server on loopback is refused in every form.
    let app = front(None, &[]).await;
    let a = alice(&app).await;
    let loopback = format!("https://127.0.0.1:{}/mcp", far.port);
    for (url, why) in [
        (far.url("/mcp"), "https://"),
        (loopback, "public server"),
        ("https://10.0.0.7/mcp".to_string(), "public server"),
        ("https://192.168.1.1/mcp".to_string(), "public server"),
        ("https://169.254.169.254/mcp".to_string(), "public server"),
        ("https://[fe80::1]/mcp".to_string(), "public server"),
        (
            format!("https://localhost:{}/mcp", far.port),
            "public server",
        ),
        ("not a url".to_string(), "full URL"),
    ] {
        let (status, body) = add(&app, &a.browser, "far", &url, &key).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{url}: {body}");
        assert!(body.contains(why), "{url}: {body}");
    }
    let (status, body) = add(&app, &a.browser, "Not_OK", "https://example.com/mcp", "").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("a-z, 0-9 and -"), "{body}");
    // An allow list naming another port does not allow this one.
    let other = front(Some(format!("127.0.0.1:{}", far.port + 1)), &[]).await;
    let b = alice(&other).await;
    let (status, body) = add(&other, &b.browser, "far", &far.url("/mcp"), "").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        app.store
            .personal_upstreams(&a.id)
            .await
            .unwrap()
            .is_empty()
            && other
                .store
                .personal_upstreams(&b.id)
                .await
                .unwrap()
                .is_empty(),
        "nothing stored"
    );
}

#[tokio::test]
async fn a_server_that_does_not_answer_is_named_in_plain_words() {
    // An allowed address where nothing listens (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let app = front(Some(format!("127.0.0.1:{port}")), &[]).await;
    let a = alice(&app).await;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let (status, body) = add(&app, &a.browser, "gone", &url, "a-token").await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{body}");
    let (_, page) = connections_page(&app, &a.browser).await;
    // What the person can act on, not the MCP SDK's internal wording or type names.
    assert!(
        page.contains("could not connect to it: Connection refused"),
        "{page}"
    );
    for internal in ["Transport [", "rmcp::", "Send message error", "when send"] {
        assert!(!page.contains(internal), "{internal}: {page}");
    }
}

#[tokio::test]
async fn a_persons_own_server_is_approved_listed_and_called_by_them_alone() {
    let (far, key) = far_gatehouse().await;
    let app = front(Some(format!("127.0.0.1:{}", far.port)), &[]).await;
    let a = alice(&app).await;
    let (status, body) = add(&app, &a.browser, "far", &far.url("/mcp"), &key).await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{body}");
    let own = app.store.personal_upstreams(&a.id).await.unwrap();
    assert_eq!(own.len(), 1);
    let name = own[0].name.clone();
    assert!(
        name.starts_with("p_far_") && name.len() == "p_far_".len() + 6,
        "{name}"
    );
    assert_eq!(own[0].owner.as_deref(), Some(a.id.as_str()));
    // The token is sealed at rest.
    let sealed = own[0].headers_sealed.clone().expect("the token is kept");
    assert!(!sealed.contains(&key));
    let tool = format!("{name}__list_projects");

    // Listed at once on adding: the definitions wait on the page, the tools stay hidden.
    let (_, page) = connections_page(&app, &a.browser).await;
    assert!(page.contains("Waiting for your approval"), "{page}");
    assert!(page.contains("<code>list_projects</code>: new"), "{page}");
    assert!(!page.contains(&key), "the token is never shown");
    let names = tool_names(&rpc(&app, &a.token, "tools/list", json!({})).await);
    assert!(!names.contains(&tool), "pending: not listed {names:?}");
    unknown(&app, &a.token, &tool).await;

    // Approving what the page showed lists them (on every instance) and calls go through
    // as Carol at the far server, never as Alice.
    let definitions = hidden_input(&page, "definitions").expect("the pending definitions");
    assert!(definitions.contains("list_projects="), "{definitions}");
    let (status, body) = post(
        &app,
        &a.browser,
        &format!("/connections/servers/{name}/approve"),
        &[("definitions", &definitions)],
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{body}");
    wait_listed(&app, &a.token, &tool, true).await;
    let second = spawn_instance(&app, |v| {
        v.insert("GATEHOUSE_SECRET_KEY".into(), TEST_KEY.into());
        v.insert(
            "GATEHOUSE_UPSTREAM_ALLOW_HOSTS".into(),
            format!("127.0.0.1:{}", far.port),
        );
    })
    .await;
    let result = call(&app, &a.token, &tool, json!({})).await;
    assert_eq!(result["isError"], false, "{result}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("Far side") && !text.contains("Research"),
        "{text}"
    );
    let (_, page) = connections_page(&app, &a.browser).await;
    assert!(page.contains(&format!("<code>{tool}</code>")), "{page}");
    // The call is audited like any upstream call.
    let mut audited = false;
    for _ in 0..50 {
        app.store.flush_audit().await;
        audited = app
            .store
            .recent_audit(50)
            .await
            .unwrap()
            .iter()
            .any(|e| e.event == "tool_call" && e.subject.as_deref() == Some(tool.as_str()));
        if audited {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(audited, "the call is audited");

    // Bob sees and calls nothing of Alice's, and cannot change it.
    let (bob_browser, bob_token, _) = bob(&app, "mcp:read mcp:write").await;
    let names = tool_names(&rpc(&app, &bob_token, "tools/list", json!({})).await);
    assert!(!names.iter().any(|n| n.starts_with("p_")), "{names:?}");
    unknown(&app, &bob_token, &tool).await;
    let (status, _) = post(
        &app,
        &bob_browser,
        &format!("/connections/servers/{name}/disable"),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, bob_page) = connections_page(&app, &bob_browser).await;
    assert!(!bob_page.contains(&name), "{bob_page}");

    // Alice's project key does not see it; her account key does.
    let out = cli_ok(
        &app,
        &["key", "create", "--account", EMAIL, "--project", &a.project],
    )
    .await;
    let project_key = out.lines().find_map(|l| l.strip_prefix("key: ")).unwrap();
    let names = tool_names(&rpc(&app, project_key, "tools/list", json!({})).await);
    assert!(!names.contains(&tool), "{names:?}");
    unknown(&app, project_key, &tool).await;
    let out = cli_ok(&app, &["key", "create", "--account", EMAIL]).await;
    let account_key = out.lines().find_map(|l| l.strip_prefix("key: ")).unwrap();
    wait_listed(&app, account_key, &tool, true).await;

    // The second instance serves it too (to Alice's account key: API keys name no server).
    wait_listed(&second, account_key, &tool, true).await;

    // Off, then on again; every instance follows.
    let (status, _) = post(
        &app,
        &a.browser,
        &format!("/connections/servers/{name}/disable"),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    wait_listed(&second, account_key, &tool, false).await;
    wait_listed(&app, &a.token, &tool, false).await;
    unknown(&app, &a.token, &tool).await;
    post(
        &app,
        &a.browser,
        &format!("/connections/servers/{name}/enable"),
        &[],
    )
    .await;
    wait_listed(&second, account_key, &tool, true).await;

    // Removing asks first, then ends it everywhere.
    let r = a
        .browser
        .get(app.url(&format!("/connections/servers/{name}/remove")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let confirm = r.text().await.unwrap();
    assert!(confirm.contains("Remove far?"), "{confirm}");
    assert!(
        app.store.upstream(&name).await.unwrap().is_some(),
        "the confirmation changes nothing"
    );
    let (status, _) = post(
        &app,
        &a.browser,
        &format!("/connections/servers/{name}/remove"),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(app.store.upstream(&name).await.unwrap().is_none());
    wait_listed(&app, &a.token, &tool, false).await;
    wait_listed(&second, account_key, &tool, false).await;
    unknown(&app, &a.token, &tool).await;

    // Her connections activity tells all of it in words, newest first, even after removal;
    // Bob's tells none of it.
    let rows = activity_rows(&app, &a.browser).await;
    let changes: Vec<&str> = rows
        .iter()
        .map(|r| r[1].as_str())
        .filter(|what| !what.starts_with("Tool "))
        .collect();
    assert_eq!(
        changes,
        [
            "Removed your server far",
            "Turned your server far on",
            "Turned your server far off",
            "Approved tools of your server far",
            "Added your server far",
        ],
        "{rows:?}"
    );
    let called = rows
        .iter()
        .find(|r| r[1] == "Tool list_projects on far")
        .unwrap_or_else(|| panic!("the call is listed: {rows:?}"));
    assert_eq!(called[3], "Done", "{rows:?}");
    assert!(
        called[0].len() == "2026-01-02 03:04:05 UTC".len(),
        "to the second: {called:?}"
    );
    assert_eq!(rows[0][2], "this console");
    assert!(activity_rows(&app, &bob_browser).await.is_empty());
}

/// The rows of `/connections/activity` in `browser`: [when, what, through, outcome].
async fn activity_rows(app: &TestApp, browser: &reqwest::Client) -> Vec<Vec<String>> {
    let r = browser
        .get(app.url("/connections/activity"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let html = crate::helpers::html_unescape(&r.text().await.unwrap());
    html.split("<tr class=\"event\">")
        .skip(1)
        .map(|row| {
            row.split("</tr>")
                .next()
                .unwrap()
                .split("<td>")
                .skip(1)
                .map(|cell| cell.split("</td>").next().unwrap().to_string())
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn a_changed_definition_waits_with_its_diff_and_two_servers_keep_their_order() {
    let (far, key) = far_gatehouse().await;
    let app = front(Some(format!("127.0.0.1:{}", far.port)), &[]).await;
    let a = alice(&app).await;
    for label in ["one", "two"] {
        let (status, body) = add(&app, &a.browser, label, &far.url("/mcp"), &key).await;
        assert_eq!(status, StatusCode::SEE_OTHER, "{body}");
    }
    let own = app.store.personal_upstreams(&a.id).await.unwrap();
    let labels: Vec<_> = own.iter().map(|u| u.label.clone().unwrap()).collect();
    assert_eq!(labels, ["one", "two"]);
    let (one, two) = (own[0].name.clone(), own[1].name.clone());
    // The same label twice is refused.
    let (status, body) = add(&app, &a.browser, "one", &far.url("/mcp"), "").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    // "Move up" puts two first: tools/list follows the person's order.
    post(
        &app,
        &a.browser,
        &format!("/connections/servers/{two}/up"),
        &[],
    )
    .await;
    let labels: Vec<_> = app
        .store
        .personal_upstreams(&a.id)
        .await
        .unwrap()
        .iter()
        .map(|u| u.label.clone().unwrap())
        .collect();
    assert_eq!(labels, ["two", "one"]);

    // Approve one's definitions, then make one differ: a changed definition is withheld and
    // the page shows what changed.
    let (_, page) = connections_page(&app, &a.browser).await;
    let form_start = page
        .find(&format!("/connections/servers/{one}/approve"))
        .unwrap();
    let definitions = hidden_input(&page[form_start..], "definitions").unwrap();
    post(
        &app,
        &a.browser,
        &format!("/connections/servers/{one}/approve"),
        &[("definitions", &definitions)],
    )
    .await;
    let tool = format!("{one}__list_projects");
    wait_listed(&app, &a.token, &tool, true).await;
    let pool = app.db.pool().await;
    sqlx::query(
        "UPDATE upstream_tools SET approved_definition = REPLACE(approved_definition, 'project', 'PROJECT'), \
         approved_hash = 'old' WHERE upstream = $1 AND tool = 'list_projects'",
    )
    .bind(&one)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("UPDATE upstream_registry SET version = version + 1 WHERE id = 1")
        .execute(pool)
        .await
        .unwrap();
    wait_listed(&app, &a.token, &tool, false).await;
    let (_, page) = connections_page(&app, &a.browser).await;
    assert!(
        page.contains("<code>list_projects</code>: changed since you approved it"),
        "{page}"
    );
    assert!(page.contains("class=\"definition before\""), "{page}");
    // A stale approval (a hash the page never showed) approves nothing.
    post(
        &app,
        &a.browser,
        &format!("/connections/servers/{one}/approve"),
        &[("definitions", "list_projects=0000")],
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let names = tool_names(&rpc(&app, &a.token, "tools/list", json!({})).await);
    assert!(!names.contains(&tool), "{names:?}");
}

#[tokio::test]
async fn the_operator_can_turn_them_off() {
    let (far, key) = far_gatehouse().await;
    let allow = format!("127.0.0.1:{}", far.port);
    let app = front(Some(allow.clone()), &[]).await;
    let a = alice(&app).await;
    let (status, _) = add(&app, &a.browser, "far", &far.url("/mcp"), &key).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let name = app.store.personal_upstreams(&a.id).await.unwrap()[0]
        .name
        .clone();
    let (_, page) = connections_page(&app, &a.browser).await;
    let definitions = hidden_input(&page, "definitions").unwrap();
    post(
        &app,
        &a.browser,
        &format!("/connections/servers/{name}/approve"),
        &[("definitions", &definitions)],
    )
    .await;
    let tool = format!("{name}__list_projects");
    wait_listed(&app, &a.token, &tool, true).await;

    // An instance with GATEHOUSE_PERSONAL_UPSTREAMS=off serves none and offers no page part.
    let off = spawn_instance(&app, |v| {
        v.insert("GATEHOUSE_SECRET_KEY".into(), TEST_KEY.into());
        v.insert("GATEHOUSE_UPSTREAM_ALLOW_HOSTS".into(), allow);
        v.insert("GATEHOUSE_PERSONAL_UPSTREAMS".into(), "off".into());
    })
    .await;
    let b = crate::helpers::new_client();
    let token = crate::mcp::token_for(&off, &b, "mcp:read mcp:write").await;
    let names = tool_names(&rpc(&off, &token, "tools/list", json!({})).await);
    assert!(!names.contains(&tool), "{names:?}");
    unknown(&off, &token, &tool).await;
    let (_, page) = connections_page(&off, &b).await;
    assert!(!page.contains("Your own servers"), "{page}");
    let (status, _) = add(&off, &b, "more", &far.url("/mcp"), "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// A small MCP server over Streamable HTTP (JSON answers) with one read-only tool, `lookup`,
/// whose `region` argument declares `x-mcp-header: Region` (SEP-2243: a 2026-07-28 client
/// repeats it as `Mcp-Param-Region`). Returns its MCP URL.
async fn header_upstream() -> String {
    use axum::response::IntoResponse as _;
    async fn answer(axum::Json(message): axum::Json<Value>) -> axum::response::Response {
        let Some(id) = message.get("id").cloned() else {
            return StatusCode::ACCEPTED.into_response();
        };
        let params = &message["params"];
        let result = match message["method"].as_str() {
            Some("initialize") => json!({
                "protocolVersion": params["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "header-upstream", "version": "1.0.0"}
            }),
            Some("tools/list") => json!({"tools": [{
                "name": "lookup",
                "description": "Looks a region up.",
                "inputSchema": {
                    "type": "object",
                    "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
                    "required": ["region"]
                },
                "annotations": {"readOnlyHint": true, "destructiveHint": false}
            }]}),
            Some("tools/call") => json!({
                "content": [{"type": "text", "text": format!("region {}", params["arguments"]["region"])}],
                "isError": false
            }),
            Some("ping") => json!({}),
            _ => {
                return axum::Json(json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32601, "message": "Method not found"}}))
                .into_response();
            }
        };
        axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = axum::Router::new().route(
        "/mcp",
        axum::routing::post(answer)
            .get(|| async { StatusCode::METHOD_NOT_ALLOWED })
            .delete(|| async { StatusCode::METHOD_NOT_ALLOWED }),
    );
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{addr}/mcp")
}

/// A `tools/call` of `name` with `{"region": "eu"}` and the header `Mcp-Param-Region: header`
/// (2026-07-28); the status and the JSON-RPC message.
async fn call_with_region_header(
    app: &TestApp,
    token: &str,
    name: &str,
    header: &str,
) -> (StatusCode, Value) {
    let (status, _, body) = crate::mcp::send(
        crate::mcp::modern(
            app,
            Some(token),
            "tools/call",
            json!({"name": name, "arguments": {"region": "eu"}}),
        )
        .header("mcp-param-region", header),
    )
    .await;
    (status, body)
}

#[tokio::test]
async fn another_persons_tool_is_unknown_even_to_the_header_checks() {
    let url = header_upstream().await;
    let host = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string();
    let app = front(Some(host), &[]).await;
    let a = alice(&app).await;
    let (status, body) = add(&app, &a.browser, "hdr", &url, "").await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{body}");
    let name = app.store.personal_upstreams(&a.id).await.unwrap()[0]
        .name
        .clone();
    let (_, page) = connections_page(&app, &a.browser).await;
    let definitions = hidden_input(&page, "definitions").expect("the pending definitions");
    let (status, body) = post(
        &app,
        &a.browser,
        &format!("/connections/servers/{name}/approve"),
        &[("definitions", &definitions)],
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{body}");
    let tool = format!("{name}__lookup");
    wait_listed(&app, &a.token, &tool, true).await;

    // The owner calls it with the header the schema asks for.
    let (status, body) = call_with_region_header(&app, &a.token, &tool, "eu").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"]["isError"], false, "{body}");
    assert_eq!(body["result"]["content"][0]["text"], "region \"eu\"");
    // Her own call whose header contradicts the arguments is refused before it reaches the
    // server, like any tool's (SEP-2243: 400, -32020).
    let (status, body) = call_with_region_header(&app, &a.token, &tool, "us").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], -32020, "{body}");

    // For Bob, Alice's tool does not exist: a header that contradicts the arguments gets
    // the answer a tool name nobody has gets, not a header error that would confirm it.
    let (_, bob_token, _) = bob(&app, "mcp:read mcp:write").await;
    let made_up = format!("{}zzzzzz__lookup", &name[..name.len() - 6]);
    assert_ne!(made_up, tool);
    let theirs = call_with_region_header(&app, &bob_token, &tool, "us").await;
    let nobodys = call_with_region_header(&app, &bob_token, &made_up, "us").await;
    assert_eq!(theirs.0, nobodys.0, "{theirs:?} / {nobodys:?}");
    assert_eq!(
        theirs.1["error"]["code"], nobodys.1["error"]["code"],
        "{theirs:?} / {nobodys:?}"
    );
    assert_eq!(theirs.1["error"]["code"], -32602, "{theirs:?}");
    let message = theirs.1["error"]["message"].as_str().unwrap_or_default();
    assert!(!message.contains("Region"), "{message}");
}
