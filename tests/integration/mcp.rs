//! The MCP resource server over real HTTP with tokens from the real OAuth flow: protected-resource
//! metadata, challenges, the route's methods/CORS/Origin/Host rules, protocol revisions, the
//! tool catalog (scope filter, step-up, results, errors), membership isolation, resources,
//! background jobs, result bounds and the audit log.

use crate::helpers::{TestApp, hidden_input, new_client, spawn_app, spawn_app_with};
use crate::oauth_helpers::*;
use gatehouse::domain::account::{AccountStatus, Email, Role};
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

pub(crate) const V26: &str = "2026-07-28";
const BOB: &str = "bob@example.com";
const BOB_PASSWORD: &str = "bobs-long-password";
pub(crate) const ACCEPT: &str = "application/json, text/event-stream";
const ALL_TOOLS: [&str; 8] = [
    "list_projects",
    "get_project",
    "search_notes",
    "get_note",
    "create_note",
    "update_note",
    "export_project",
    "get_job",
];

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// An access token for the account `browser` signs in as (alice when not signed in yet).
pub(crate) async fn token_for(app: &TestApp, browser: &reqwest::Client, scope: &str) -> String {
    let client_id = register_public(app, &[REDIRECT]).await;
    let (verifier, challenge) = pkce();
    let url = authorize_url(app, &client_id, &challenge, &[("scope", scope)]);
    let loc = walk(app, browser, &url, "approve").await;
    let code = query_of(&loc)["code"].clone();
    let (status, body, _) = exchange(app, &client_id, &code, &verifier, &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["access_token"].as_str().unwrap().to_string()
}

pub(crate) async fn account_id(app: &TestApp, email: &str) -> String {
    app.store
        .account_by_email(&Email::parse(email).unwrap())
        .await
        .unwrap()
        .unwrap()
        .id
}

/// Alice (signed-in browser, write token) with one project "Research".
pub(crate) struct Alice {
    pub(crate) browser: reqwest::Client,
    pub(crate) token: String,
    pub(crate) id: String,
    pub(crate) project: String,
}

pub(crate) async fn alice(app: &TestApp) -> Alice {
    let browser = new_client();
    let token = token_for(app, &browser, "mcp:read mcp:write").await;
    let id = account_id(app, EMAIL).await;
    let project = app
        .store
        .create_project("Research", &id, gatehouse::store::now())
        .await
        .unwrap();
    Alice {
        browser,
        token,
        id,
        project,
    }
}

/// Bob signed in, with a token of `scope`; returns (browser, token, account id).
pub(crate) async fn bob(app: &TestApp, scope: &str) -> (reqwest::Client, String, String) {
    app.create_account(BOB, BOB_PASSWORD).await;
    let browser = new_client();
    assert_eq!(
        app.sign_in(&browser, BOB, BOB_PASSWORD).await.status(),
        StatusCode::SEE_OTHER
    );
    let token = token_for(app, &browser, scope).await;
    let id = account_id(app, BOB).await;
    (browser, token, id)
}

pub(crate) fn mcp_url(app: &TestApp) -> String {
    app.url("/mcp")
}

/// A 2026-07-28 request: `_meta` in the body and the standard headers.
pub(crate) fn modern(
    app: &TestApp,
    token: Option<&str>,
    method: &str,
    mut params: Value,
) -> reqwest::RequestBuilder {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": V26,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "gatehouse-tests", "version": "1"}
    });
    let name = match method {
        "tools/call" => params["name"].as_str().map(str::to_string),
        "resources/read" => params["uri"].as_str().map(str::to_string),
        _ => None,
    };
    let mut r = app
        .client
        .post(mcp_url(app))
        .header("accept", ACCEPT)
        .header("mcp-protocol-version", V26)
        .header("mcp-method", method)
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}));
    if let Some(name) = name {
        r = r.header("mcp-name", name);
    }
    if let Some(token) = token {
        r = r.bearer_auth(token);
    }
    r
}

pub(crate) async fn send(r: reqwest::RequestBuilder) -> (StatusCode, HeaderMap, Value) {
    let r = r.send().await.unwrap();
    let status = r.status();
    let headers = r.headers().clone();
    let text = r.text().await.unwrap();
    (
        status,
        headers,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// A 2026-07-28 request that must succeed at the HTTP level; the JSON-RPC message.
pub(crate) async fn rpc(app: &TestApp, token: &str, method: &str, params: Value) -> Value {
    let (status, _, body) = send(modern(app, Some(token), method, params)).await;
    assert_eq!(status, StatusCode::OK, "{method}: {body}");
    body
}

/// `tools/call` (2026-07-28); the `result`.
pub(crate) async fn call(app: &TestApp, token: &str, name: &str, args: Value) -> Value {
    let body = rpc(
        app,
        token,
        "tools/call",
        json!({"name": name, "arguments": args}),
    )
    .await;
    body["result"].clone()
}

/// The structured content of a successful tool result, checking the text copy.
pub(crate) fn ok(result: &Value) -> Value {
    assert_eq!(result["isError"], false, "{result}");
    let sc = result["structuredContent"].clone();
    let text = result["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap(),
        sc,
        "text copy = structured"
    );
    sc
}

pub(crate) fn error_text(result: &Value) -> String {
    assert_eq!(result["isError"], true, "{result}");
    result["content"][0]["text"].as_str().unwrap().to_string()
}

/// A request of an older revision (no `_meta`; `MCP-Protocol-Version` after initialize).
pub(crate) fn legacy(
    app: &TestApp,
    token: &str,
    version: Option<&str>,
    method: &str,
    params: Value,
) -> reqwest::RequestBuilder {
    let mut r = app
        .client
        .post(mcp_url(app))
        .bearer_auth(token)
        .header("accept", ACCEPT)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
    if let Some(v) = version {
        r = r.header("mcp-protocol-version", v);
    }
    r
}

fn tool_names(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

fn prm_url(app: &TestApp) -> String {
    app.config.protected_resource_metadata_url()
}

mod bodies;
mod discovery;
mod protocol;
mod resources;
mod route;
mod tools;
