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

// ---------------------------------------------------------------------------------------------
// Discovery and challenges
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn protected_resource_metadata_at_both_urls_with_cors() {
    let app = spawn_app().await;
    let expected = json!({
        "resource": format!("{}/mcp", app.address),
        "authorization_servers": [app.address],
        "scopes_supported": ["mcp:read", "mcp:write"],
        "bearer_methods_supported": ["header"],
        "resource_name": "Gatehouse MCP server",
    });
    assert_eq!(
        prm_url(&app),
        app.url("/.well-known/oauth-protected-resource/mcp")
    );
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let r = app
            .client
            .get(app.url(path))
            .header("origin", "https://elsewhere.example")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        assert_eq!(r.headers()["access-control-allow-origin"], "*");
        assert!(
            r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("application/json")
        );
        assert_eq!(r.json::<Value>().await.unwrap(), expected, "{path}");
        let pre = app
            .client
            .request(reqwest::Method::OPTIONS, app.url(path))
            .header("origin", "https://elsewhere.example")
            .header("access-control-request-method", "GET")
            .header("access-control-request-headers", "mcp-protocol-version")
            .send()
            .await
            .unwrap();
        assert!(pre.status().is_success());
        assert_eq!(pre.headers()["access-control-allow-origin"], "*");
    }
    // With OAuth off there is no metadata and the challenge names no metadata.
    let off = spawn_app_with(|v| {
        v.insert("GATEHOUSE_OAUTH".into(), "off".into());
    })
    .await;
    let r = off
        .client
        .get(off.url("/.well-known/oauth-protected-resource/mcp"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let (s, h, _) = send(modern(&off, None, "tools/list", json!({}))).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert_eq!(h["www-authenticate"], "Bearer realm=\"gatehouse\"");
}

#[tokio::test]
async fn missing_and_bad_credentials_get_the_bearer_challenge() {
    let app = spawn_app().await;
    let a = alice(&app).await;
    let prm = prm_url(&app);
    let bare = format!("Bearer resource_metadata=\"{prm}\", scope=\"mcp:read mcp:write\"");
    let invalid = format!(
        "Bearer error=\"invalid_token\", resource_metadata=\"{prm}\", scope=\"mcp:read mcp:write\""
    );

    // No credentials.
    let (s, h, _) = send(modern(&app, None, "tools/list", json!({}))).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert_eq!(h["www-authenticate"], bare.as_str());
    // A token in the query string is not a credential.
    let r = app
        .client
        .post(format!("{}?access_token={}", mcp_url(&app), a.token))
        .header("accept", ACCEPT)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(r.headers()["www-authenticate"], bare.as_str());

    // Unknown, malformed, other schemes.
    for auth in [
        "Bearer gate_at_doesnotexist".to_string(),
        "Bearer nonsense".to_string(),
        "Basic YWxpY2U6cGFzcw==".to_string(),
        "Bearer".to_string(),
    ] {
        let r = app
            .client
            .post(mcp_url(&app))
            .header("authorization", auth.as_str())
            .header("accept", ACCEPT)
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{auth}");
        assert_eq!(r.headers()["www-authenticate"], invalid.as_str(), "{auth}");
    }

    // The good token works…
    let (s, _, _) = send(modern(&app, Some(&a.token), "tools/list", json!({}))).await;
    assert_eq!(s, StatusCode::OK);
    let hash = gatehouse::domain::secret::Secret::from_presented(a.token.clone()).hash();
    // …not when bound to another resource…
    sqlx::query(
        "UPDATE access_tokens SET audience = 'http://127.0.0.1:1/mcp' WHERE token_hash = $1",
    )
    .bind(hash.as_str())
    .execute(app.store.pool())
    .await
    .unwrap();
    let (s, h, _) = send(modern(&app, Some(&a.token), "tools/list", json!({}))).await;
    assert_eq!(
        (s, h["www-authenticate"].to_str().unwrap()),
        (StatusCode::UNAUTHORIZED, invalid.as_str())
    );
    // …nor once expired…
    sqlx::query("UPDATE access_tokens SET audience = $1, expires_at = 1 WHERE token_hash = $2")
        .bind(&app.config.mcp_server_url)
        .bind(hash.as_str())
        .execute(app.store.pool())
        .await
        .unwrap();
    let (s, h, _) = send(modern(&app, Some(&a.token), "tools/list", json!({}))).await;
    assert_eq!(
        (s, h["www-authenticate"].to_str().unwrap()),
        (StatusCode::UNAUTHORIZED, invalid.as_str())
    );
    // …nor for a disabled account.
    let fresh = token_for(&app, &a.browser, "mcp:read").await;
    let (s, _, _) = send(modern(&app, Some(&fresh), "tools/list", json!({}))).await;
    assert_eq!(s, StatusCode::OK);
    app.store
        .set_account_status(&Email::parse(EMAIL).unwrap(), AccountStatus::Disabled)
        .await
        .unwrap();
    let (s, h, _) = send(modern(&app, Some(&fresh), "tools/list", json!({}))).await;
    assert_eq!(
        (s, h["www-authenticate"].to_str().unwrap()),
        (StatusCode::UNAUTHORIZED, invalid.as_str())
    );
}

#[tokio::test]
async fn revoking_the_grant_cuts_off_a_live_token_at_once() {
    let app = spawn_app().await;
    let a = alice(&app).await;
    let sc = ok(&call(&app, &a.token, "list_projects", json!({})).await);
    assert_eq!(sc["projects"][0]["id"], a.project.as_str());
    // The person revokes the app on the connected-apps page.
    let page = a
        .browser
        .get(app.url("/apps"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = hidden_input(&page, "csrf_token").unwrap();
    let consent = hidden_input(&page, "consent_id").unwrap();
    let r = a
        .browser
        .post(app.url("/apps/revoke"))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("consent_id", consent.as_str()),
        ])
        .send()
        .await
        .unwrap();
    assert!(r.status().is_redirection() || r.status().is_success());
    let (s, h, _) = send(modern(
        &app,
        Some(&a.token),
        "tools/call",
        json!({"name": "list_projects", "arguments": {}}),
    ))
    .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert!(
        h["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Bearer error=\"invalid_token\"")
    );
}

// ---------------------------------------------------------------------------------------------
// The route: methods, slash, CORS, Origin, Host
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn post_only_no_redirects_trailing_slash_and_cors() {
    let app = spawn_app().await;
    let a = alice(&app).await;
    for path in ["/mcp", "/mcp/"] {
        for method in [
            reqwest::Method::GET,
            reqwest::Method::DELETE,
            reqwest::Method::PUT,
        ] {
            let r = app
                .client
                .request(method.clone(), app.url(path))
                .send()
                .await
                .unwrap();
            assert_eq!(
                r.status(),
                StatusCode::METHOD_NOT_ALLOWED,
                "{method} {path}"
            );
            assert_eq!(r.headers()["allow"], "POST");
        }
        // The trailing slash is served the same, never redirected.
        let r = app
            .client
            .post(app.url(path))
            .bearer_auth(&a.token)
            .header("accept", ACCEPT)
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        assert_eq!(r.json::<Value>().await.unwrap()["result"], json!({}));
    }
    // Preflight: answered without authentication, MCP headers allowed.
    let r = app
        .client
        .request(reqwest::Method::OPTIONS, mcp_url(&app))
        .header("origin", app.address.as_str())
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization, content-type, mcp-protocol-version, mcp-method, mcp-name",
        )
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        app.address.as_str()
    );
    let allowed = r.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    for h in [
        "authorization",
        "content-type",
        "mcp-protocol-version",
        "mcp-method",
        "mcp-name",
    ] {
        assert!(allowed.contains(h), "{h} in {allowed}");
    }
    // A 401 to an allowed browser origin exposes the challenge.
    let r = app
        .client
        .post(mcp_url(&app))
        .header("origin", app.address.as_str())
        .header("accept", ACCEPT)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(
        r.headers()["access-control-expose-headers"]
            .to_str()
            .unwrap()
            .to_ascii_lowercase()
            .contains("www-authenticate")
    );
}

#[tokio::test]
async fn foreign_origin_and_host_are_refused() {
    let app = spawn_app().await;
    let a = alice(&app).await;
    let ping = |origin: Option<&str>, host: Option<&str>, token: Option<&str>| {
        let mut r = app
            .client
            .post(mcp_url(&app))
            .header("accept", ACCEPT)
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}));
        if let Some(o) = origin {
            r = r.header("origin", o);
        }
        if let Some(h) = host {
            r = r.header("host", h);
        }
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        r
    };
    let status = |r: reqwest::RequestBuilder| async move { r.send().await.unwrap().status() };
    assert_eq!(
        status(ping(Some("https://evil.example"), None, Some(&a.token))).await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        status(ping(Some("https://evil.example"), None, None)).await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        status(ping(Some("null"), None, Some(&a.token))).await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        status(ping(Some(&app.address), None, Some(&a.token))).await,
        StatusCode::OK
    );
    assert_eq!(
        status(ping(None, None, Some(&a.token))).await,
        StatusCode::OK
    );
    // Bound to loopback: a non-loopback Host is refused, loopback names are fine.
    assert_eq!(
        status(ping(None, Some("evil.example"), Some(&a.token))).await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        status(ping(
            None,
            Some(&format!("evil.example:{}", app.port)),
            None
        ))
        .await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        status(ping(
            None,
            Some(&format!("localhost:{}", app.port)),
            Some(&a.token)
        ))
        .await,
        StatusCode::OK
    );
    // GATEHOUSE_ALLOWED_ORIGINS adds origins.
    let more = spawn_app_with(|v| {
        v.insert(
            "GATEHOUSE_ALLOWED_ORIGINS".into(),
            "https://app.example".into(),
        );
    })
    .await;
    let r = more
        .client
        .post(more.url("/mcp"))
        .header("origin", "https://app.example")
        .header("accept", ACCEPT)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::UNAUTHORIZED,
        "allowed origin reaches authentication"
    );
}

// ---------------------------------------------------------------------------------------------
// Protocol revisions
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn protocol_revisions_discover_initialize_and_version_errors() {
    let app = spawn_app().await;
    let a = alice(&app).await;

    // 2026-07-28: server/discover, resultType and cache hints.
    let d = rpc(&app, &a.token, "server/discover", json!({})).await;
    let r = &d["result"];
    assert_eq!(r["resultType"], "complete");
    let versions: Vec<&str> = r["supportedVersions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for v in ["2025-03-26", "2025-06-18", "2025-11-25", V26] {
        assert!(versions.contains(&v), "{v} in {versions:?}");
    }
    assert!(r["capabilities"]["tools"].is_object() && r["capabilities"]["resources"].is_object());
    assert!(r["ttlMs"].is_u64() && r["cacheScope"].is_string());
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "gatehouse"
    );
    let l = rpc(&app, &a.token, "tools/list", json!({})).await;
    assert_eq!(l["result"]["resultType"], "complete");
    assert_eq!(l["result"]["cacheScope"], "private");

    // Header checks.
    let (s, _, body) = send(
        modern(
            &app,
            Some(&a.token),
            "tools/call",
            json!({"name": "list_projects", "arguments": {}}),
        )
        .header("mcp-name", "get_job"),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], -32020);

    // Unsupported version: -32022 with supported and requested.
    let (s, _, body) = send(
        app.client
            .post(mcp_url(&app))
            .bearer_auth(&a.token)
            .header("accept", ACCEPT)
            .header("mcp-protocol-version", "2099-01-01")
            .header("mcp-method", "tools/list")
            .json(
                &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2099-01-01",
                "io.modelcontextprotocol/clientCapabilities": {}}}}),
            ),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], -32022);
    assert_eq!(body["error"]["data"]["requested"], "2099-01-01");
    assert!(
        body["error"]["data"]["supported"]
            .as_array()
            .unwrap()
            .contains(&json!(V26))
    );

    // Older revisions: initialize answers the same version; lists have no resultType.
    for v in ["2025-03-26", "2025-06-18", "2025-11-25"] {
        let (s, _, body) = send(legacy(&app, &a.token, None, "initialize", json!({
            "protocolVersion": v, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}
        })))
        .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        assert_eq!(body["result"]["protocolVersion"], v);
        assert_eq!(body["result"]["serverInfo"]["name"], "gatehouse");
        let (s, _, body) = send(legacy(&app, &a.token, Some(v), "tools/list", json!({}))).await;
        assert_eq!(s, StatusCode::OK);
        assert!(body["result"].get("resultType").is_none(), "{v}: {body}");
        assert_eq!(tool_names(&body), ALL_TOOLS, "{v}");
    }
    let (s, _, _) = send(
        legacy(
            &app,
            &a.token,
            Some("2025-11-25"),
            "notifications/initialized",
            json!({}),
        )
        .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED);
}

// ---------------------------------------------------------------------------------------------
// Tool catalog: scope filter, step-up, results, errors
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn tools_list_follows_scopes_and_roles_and_step_up_is_403() {
    let app = spawn_app().await;
    let a = alice(&app).await;
    let read = token_for(&app, &a.browser, "mcp:read").await;

    let all = rpc(&app, &a.token, "tools/list", json!({})).await;
    assert_eq!(
        tool_names(&all),
        ALL_TOOLS,
        "write token: every tool, stable order"
    );
    let tools = all["result"]["tools"].as_array().unwrap();
    for t in tools {
        assert_eq!(t["annotations"]["destructiveHint"], false);
        assert!(t["title"].is_string() && t["description"].is_string());
        assert_eq!(t["inputSchema"]["type"], "object");
        assert_eq!(t["inputSchema"]["additionalProperties"], false);
        assert!(t["outputSchema"].is_object());
    }
    let create = tools.iter().find(|t| t["name"] == "create_note").unwrap();
    assert_eq!(create["annotations"]["readOnlyHint"], false);
    assert_eq!(
        create["inputSchema"]["properties"]["title"]["maxLength"],
        200
    );
    assert_eq!(create["inputSchema"]["properties"]["tags"]["maxItems"], 20);

    let ro = rpc(&app, &read, "tools/list", json!({})).await;
    let names = tool_names(&ro);
    assert_eq!(
        names,
        [
            "list_projects",
            "get_project",
            "search_notes",
            "get_note",
            "export_project",
            "get_job"
        ]
    );

    // Calling a tool outside the token's scopes: step-up challenge.
    let (s, h, _) = send(modern(
        &app,
        Some(&read),
        "tools/call",
        json!({
            "name": "create_note",
            "arguments": {"project_id": a.project, "title": "t", "body": "b"}
        }),
    ))
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert_eq!(
        h["www-authenticate"],
        format!(
            "Bearer error=\"insufficient_scope\", scope=\"mcp:read mcp:write\", resource_metadata=\"{}\"",
            prm_url(&app)
        )
        .as_str()
    );
    let audit = app.store.recent_audit(5).await.unwrap();
    assert!(
        audit
            .iter()
            .any(|e| e.event == "tool_call" && e.outcome == "insufficient_scope")
    );

    // An account that has the write role nowhere does not see the write tools.
    let (_, bob_token, bob_id) = bob(&app, "mcp:read mcp:write").await;
    app.store
        .add_member(&a.project, &bob_id, Role::Read, gatehouse::store::now())
        .await
        .unwrap();
    let names = tool_names(&rpc(&app, &bob_token, "tools/list", json!({})).await);
    assert!(!names.contains(&"create_note".to_string()) && names.contains(&"get_note".to_string()));
    // …and calling one anyway is refused by the role check, as an isError result.
    let r = call(
        &app,
        &bob_token,
        "create_note",
        json!({"project_id": a.project, "title": "t", "body": "b"}),
    )
    .await;
    assert!(error_text(&r).contains("read-only"));
}

#[tokio::test]
async fn notes_tools_results_links_and_argument_errors() {
    let app = spawn_app().await;
    let a = alice(&app).await;

    let sc = ok(&call(&app, &a.token, "list_projects", json!({})).await);
    assert_eq!(
        sc["projects"],
        json!([{
            "id": a.project, "name": "Research", "role": "write",
            "uri": format!("gatehouse://projects/{}", a.project)
        }])
    );

    let r = call(
        &app,
        &a.token,
        "create_note",
        json!({
            "project_id": a.project,
            "title": "Launch plan",
            "body": "We launch the zeppelin on Tuesday after the checklist.",
            "tags": ["launch", "ops"]
        }),
    )
    .await;
    let note = ok(&r);
    let note_id = note["id"].as_str().unwrap().to_string();
    let uri = format!("gatehouse://projects/{}/notes/{note_id}", a.project);
    assert_eq!(note["uri"], uri.as_str());
    assert_eq!(note["tags"], json!(["launch", "ops"]));
    let link = &r["content"][1];
    assert_eq!(link["type"], "resource_link");
    assert_eq!(link["uri"], uri.as_str());

    let sc = ok(&call(
        &app,
        &a.token,
        "search_notes",
        json!({"project_id": a.project, "query": "Zeppelin!", "limit": 5}),
    )
    .await);
    assert_eq!(sc["results"][0]["id"], note_id.as_str());
    assert!(
        sc["results"][0]["snippet"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("[zeppelin]"),
        "the match is marked the same way on both engines: {}",
        sc["results"][0]["snippet"]
    );
    let sc = ok(&call(
        &app,
        &a.token,
        "search_notes",
        json!({"project_id": a.project, "query": "submarine"}),
    )
    .await);
    assert_eq!(sc["results"], json!([]));

    let sc = ok(&call(
        &app,
        &a.token,
        "update_note",
        json!({"project_id": a.project, "note_id": note_id, "title": "Launch plan v2"}),
    )
    .await);
    assert_eq!(sc["title"], "Launch plan v2");
    assert_eq!(sc["body"], note["body"]);
    let sc = ok(&call(
        &app,
        &a.token,
        "get_note",
        json!({"project_id": a.project, "note_id": note_id}),
    )
    .await);
    assert_eq!(sc["title"], "Launch plan v2");
    let sc = ok(&call(
        &app,
        &a.token,
        "search_notes",
        json!({"project_id": a.project, "query": "v2"}),
    )
    .await);
    assert_eq!(
        sc["results"][0]["id"],
        note_id.as_str(),
        "the index follows updates"
    );

    let sc = ok(&call(
        &app,
        &a.token,
        "get_project",
        json!({"project_id": a.project}),
    )
    .await);
    assert_eq!(sc["note_count"], 1);
    assert_eq!(
        sc["console_url"],
        format!("{}/projects/{}", app.address, a.project).as_str()
    );

    // Bad arguments: isError naming the field.
    let cases = [
        (
            "create_note",
            json!({"project_id": a.project, "title": "x".repeat(201), "body": ""}),
            "`title`",
        ),
        (
            "create_note",
            json!({"project_id": a.project, "title": "t"}),
            "`body`",
        ),
        (
            "create_note",
            json!({"project_id": a.project, "title": "t", "body": "", "tags": [7]}),
            "`tags[0]`",
        ),
        (
            "search_notes",
            json!({"project_id": a.project, "query": "x", "limit": 500}),
            "`limit`",
        ),
        (
            "get_note",
            json!({"project_id": a.project, "note_id": "../etc"}),
            "`note_id`",
        ),
        ("list_projects", json!({"verbose": true}), "`verbose`"),
        (
            "update_note",
            json!({"project_id": a.project, "note_id": note_id}),
            "`title`",
        ),
    ];
    for (tool, args, field) in cases {
        let msg = error_text(&call(&app, &a.token, tool, args.clone()).await);
        assert!(msg.contains(field), "{tool} {args}: {msg}");
    }
    let msg = error_text(
        &call(
            &app,
            &a.token,
            "get_note",
            json!({"project_id": a.project, "note_id": "00000000-0000-0000-0000-000000000000"}),
        )
        .await,
    );
    assert!(msg.contains("No note"));

    // Unknown tool: JSON-RPC -32602.
    let body = rpc(
        &app,
        &a.token,
        "tools/call",
        json!({"name": "launch_rocket", "arguments": {}}),
    )
    .await;
    assert_eq!(body["error"]["code"], -32602);

    // Audit: tool, outcome, project, duration — never arguments or results.
    let audit = app.store.recent_audit(50).await.unwrap();
    let created = audit
        .iter()
        .find(|e| {
            e.event == "tool_call"
                && e.subject.as_deref() == Some("create_note")
                && e.outcome == "success"
        })
        .expect("create_note audited");
    assert_eq!(created.account_id.as_deref(), Some(a.id.as_str()));
    assert!(created.client_id.is_some());
    let detail = created.detail.as_deref().unwrap();
    assert!(detail.contains(&format!("project={}", a.project)) && detail.contains("duration_ms="));
    assert!(
        audit.iter().any(
            |e| e.subject.as_deref() == Some("create_note") && e.outcome == "invalid_arguments"
        )
    );
    for e in &audit {
        let all = format!("{e:?}");
        assert!(
            !all.contains("zeppelin") && !all.contains("Launch plan"),
            "{all}"
        );
    }
}

#[tokio::test]
async fn other_accounts_projects_look_like_missing_ones() {
    let app = spawn_app().await;
    let a = alice(&app).await;
    let (_, bob_token, bob_id) = bob(&app, "mcp:read mcp:write").await;
    let bobs = app
        .store
        .create_project("Bob's secrets", &bob_id, gatehouse::store::now())
        .await
        .unwrap();
    ok(&call(
        &app,
        &bob_token,
        "create_note",
        json!({"project_id": bobs, "title": "diary", "body": "secret words"}),
    )
    .await);
    let missing = "3f2b7a44-0000-4000-8000-000000000000";

    for (tool, extra) in [
        ("get_project", json!({})),
        ("search_notes", json!({"query": "secret"})),
        ("export_project", json!({})),
        ("create_note", json!({"title": "x", "body": "y"})),
    ] {
        let mut theirs = extra.clone();
        theirs["project_id"] = json!(bobs);
        let mut nowhere = extra.clone();
        nowhere["project_id"] = json!(missing);
        let t = error_text(&call(&app, &a.token, tool, theirs).await);
        let n = error_text(&call(&app, &a.token, tool, nowhere).await);
        assert_eq!(t.replace(&bobs, "ID"), n.replace(missing, "ID"), "{tool}");
    }
    // Resources too: not found, with the revision's code.
    let uri = format!("gatehouse://projects/{bobs}");
    let body = rpc(&app, &a.token, "resources/read", json!({"uri": uri})).await;
    assert_eq!(body["error"]["code"], -32602);
    assert_eq!(body["error"]["data"]["uri"], uri.as_str());
    let (_, _, body) = send(legacy(
        &app,
        &a.token,
        Some("2025-11-25"),
        "resources/read",
        json!({"uri": uri}),
    ))
    .await;
    assert_eq!(body["error"]["code"], -32002);
    let names: Vec<String> =
        ok(&call(&app, &a.token, "list_projects", json!({})).await)["projects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap().to_string())
            .collect();
    assert_eq!(names, ["Research"]);

    // A membership added after the consent is reachable with the same token.
    app.store
        .add_member(&bobs, &a.id, Role::Write, gatehouse::store::now())
        .await
        .unwrap();
    let sc = ok(&call(
        &app,
        &a.token,
        "search_notes",
        json!({"project_id": bobs, "query": "secret"}),
    )
    .await);
    assert_eq!(sc["results"].as_array().unwrap().len(), 1);
    let body = rpc(&app, &a.token, "resources/read", json!({"uri": uri})).await;
    assert_eq!(body["result"]["contents"][0]["uri"], uri.as_str());
}

// ---------------------------------------------------------------------------------------------
// Resources, jobs, bounds
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn resources_are_listed_in_pages_templated_and_readable() {
    let app = spawn_app_with(|v| {
        v.insert("FRONTEND_URL".into(), "https://console.example".into());
    })
    .await;
    let a = alice(&app).await;
    let now = gatehouse::store::now();
    for i in 0..55 {
        app.store
            .create_note(
                &gatehouse::store::notes::NewNote {
                    project_id: &a.project,
                    author_account_id: &a.id,
                    title: &format!("note {i}"),
                    body: "body",
                    tags: &[],
                },
                now + i,
            )
            .await
            .unwrap();
    }
    let mut uris = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let body = rpc(&app, &a.token, "resources/list", params).await;
        let r = &body["result"];
        assert_eq!(r["cacheScope"], "private");
        for item in r["resources"].as_array().unwrap() {
            uris.push(item["uri"].as_str().unwrap().to_string());
        }
        pages += 1;
        match r["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    assert_eq!(pages, 2);
    assert_eq!(uris.len(), 56);
    assert_eq!(uris[0], format!("gatehouse://projects/{}", a.project));
    let unique: std::collections::HashSet<_> = uris.iter().collect();
    assert_eq!(unique.len(), 56, "no duplicates across pages");
    let body = rpc(&app, &a.token, "resources/list", json!({"cursor": "bogus"})).await;
    assert_eq!(body["error"]["code"], -32602);

    let body = rpc(&app, &a.token, "resources/templates/list", json!({})).await;
    let templates: Vec<&str> = body["result"]["resourceTemplates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["uriTemplate"].as_str().unwrap())
        .collect();
    assert_eq!(
        templates,
        [
            "gatehouse://projects/{project_id}",
            "gatehouse://projects/{project_id}/notes/{note_id}",
            "gatehouse://jobs/{kind}/{job_id}"
        ]
    );

    let body = rpc(&app, &a.token, "resources/read", json!({"uri": uris[0]})).await;
    let content = &body["result"]["contents"][0];
    assert_eq!(content["mimeType"], "application/json");
    let project: Value = serde_json::from_str(content["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        project["console_url"],
        format!("https://console.example/projects/{}", a.project).as_str()
    );
    assert_eq!(project["note_count"], 55);
    let body = rpc(&app, &a.token, "resources/read", json!({"uri": uris[1]})).await;
    let note: Value =
        serde_json::from_str(body["result"]["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(note["title"], "note 0");
    for bad in ["gatehouse://projects/nope/extra", "file:///etc/passwd"] {
        let body = rpc(&app, &a.token, "resources/read", json!({"uri": bad})).await;
        assert_eq!(body["error"]["code"], -32602, "{bad}");
    }
}

#[tokio::test]
async fn export_runs_in_the_background_and_is_read_as_a_job_resource() {
    let app = spawn_app().await;
    let a = alice(&app).await;
    ok(&call(
        &app,
        &a.token,
        "create_note",
        json!({"project_id": a.project, "title": "one", "body": "first"}),
    )
    .await);
    let r = call(
        &app,
        &a.token,
        "export_project",
        json!({"project_id": a.project}),
    )
    .await;
    let receipt = ok(&r);
    let id = receipt["id"].as_str().unwrap().to_string();
    assert_eq!(receipt["kind"], "export");
    assert!(["pending", "running", "completed"].contains(&receipt["status"].as_str().unwrap()));
    let resource = format!("gatehouse://jobs/export/{id}");
    assert_eq!(receipt["resource"], resource.as_str());
    assert_eq!(r["content"][1]["uri"], resource.as_str());

    let mut job = Value::Null;
    for _ in 0..50 {
        job = ok(&call(&app, &a.token, "get_job", json!({"job_id": id})).await);
        if job["status"] == "completed" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(job["note_count"], 1);
    let body = rpc(&app, &a.token, "resources/read", json!({"uri": resource})).await;
    let doc: Value =
        serde_json::from_str(body["result"]["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(doc["document"]["notes"][0]["title"], "one");

    // Another account cannot see the job.
    let (_, bob_token, _) = bob(&app, "mcp:read").await;
    let msg = error_text(&call(&app, &bob_token, "get_job", json!({"job_id": id})).await);
    assert!(msg.contains("No job"));
}

#[tokio::test]
async fn large_results_are_cut_with_a_note() {
    let app = spawn_app_with(|v| {
        v.insert("GATEHOUSE_MAX_RESULT_BYTES".into(), "2048".into());
    })
    .await;
    let a = alice(&app).await;
    let body = "lorem ipsum ".repeat(1000);
    let r = call(
        &app,
        &a.token,
        "create_note",
        json!({"project_id": a.project, "title": "big", "body": body}),
    )
    .await;
    assert!(serde_json::to_string(&r).unwrap().len() <= 2048, "bounded");
    let sc = &r["structuredContent"];
    assert_eq!(sc["truncated"], true);
    assert_eq!(sc["title"], "big");
    assert!(sc["body"].as_str().unwrap().ends_with('…'));
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("[Result cut to fit 2048 bytes")
    );
    // The note itself was stored whole.
    let id = sc["id"].as_str().unwrap();
    let stored = app.store.note(&a.project, id).await.unwrap().unwrap();
    assert_eq!(stored.body, body);
}

// ---------------------------------------------------------------------------------------------
// Broken request bodies, note text rules, bounded resources
// ---------------------------------------------------------------------------------------------

/// A POST of `body` as it is, with the usual headers of `version` and `content_type`.
pub(crate) fn raw(
    app: &TestApp,
    token: Option<&str>,
    version: &str,
    content_type: Option<&str>,
    body: &str,
) -> reqwest::RequestBuilder {
    let mut r = app
        .client
        .post(mcp_url(app))
        .header("accept", ACCEPT)
        .header("mcp-protocol-version", version)
        .body(body.to_string());
    if let Some(ct) = content_type {
        r = r.header("content-type", ct);
    }
    if let Some(token) = token {
        r = r.bearer_auth(token);
    }
    r
}

#[tokio::test]
async fn broken_request_bodies_get_json_rpc_errors() {
    let app = spawn_app().await;
    let a = alice(&app).await;
    let json_ct = Some("application/json");

    // Authentication comes first.
    let (s, h, _) = send(raw(&app, None, V26, json_ct, "{not json")).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert!(h.contains_key("www-authenticate"));

    // Not JSON (or no JSON-RPC message at all): HTTP 400, -32700 Parse error, id null
    // (JSON-RPC 2.0 §5.1).
    let parse_error =
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}});
    for body in [
        "{not json",
        "",
        "null",
        "{\"jsonrpc\":\"2.0\",",
        "\u{feff}x",
    ] {
        for version in ["2025-06-18", V26] {
            let (s, h, got) = send(raw(&app, Some(&a.token), version, json_ct, body)).await;
            assert_eq!(s, StatusCode::BAD_REQUEST, "{body:?} {version}: {got}");
            assert_eq!(got, parse_error, "{body:?} {version}");
            assert!(
                h["content-type"]
                    .to_str()
                    .unwrap()
                    .starts_with("application/json")
            );
        }
    }

    // JSON but not a JSON-RPC message object: HTTP 400, -32600 Invalid Request.
    for body in [
        "[1]",
        "[]",
        "{}",
        "7",
        "\"tools/list\"",
        r#"{"jsonrpc":"2.0","id":1}"#,
        r#"{"id":1,"method":"tools/list"}"#,
        r#"{"jsonrpc":"1.0","id":1,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
        r#"{"jsonrpc":"2.0","id":null,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}"#,
        r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]"#,
    ] {
        for version in ["2025-06-18", V26] {
            let (s, _, got) = send(raw(&app, Some(&a.token), version, json_ct, body)).await;
            assert_eq!(s, StatusCode::BAD_REQUEST, "{body} {version}: {got}");
            assert_eq!(got["jsonrpc"], "2.0", "{body}");
            assert_eq!(got["error"]["code"], -32600, "{body} {version}: {got}");
            assert_eq!(got["error"]["message"], "Invalid Request", "{body}");
        }
    }
    let (_, _, got) = send(raw(&app, Some(&a.token), V26, json_ct, "{}")).await;
    assert_eq!(got["id"], Value::Null);

    // A request whose params do not fit its method: -32602 Invalid params, with its id.
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": V26,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "gatehouse-tests", "version": "1"}
    });
    let cases = [
        ("tools/call", json!([1])),
        ("tools/call", json!({"_meta": meta, "arguments": {}})),
        ("tools/call", json!({"_meta": meta, "name": 7})),
        ("resources/read", json!({"_meta": meta})),
        ("resources/read", json!({"_meta": meta, "uri": ["x"]})),
        ("tools/list", json!("all")),
    ];
    for (method, params) in cases {
        let body = json!({"jsonrpc": "2.0", "id": 41, "method": method, "params": params});
        let (s, _, got) = send(
            raw(&app, Some(&a.token), V26, json_ct, &body.to_string()).header("mcp-method", method),
        )
        .await;
        assert_eq!(got["error"]["code"], -32602, "{body}: {s} {got}");
        assert_eq!(got["error"]["message"], "Invalid params", "{body}");
        assert_eq!(got["id"], 41, "{body}");
        assert_eq!(s, StatusCode::OK, "in-band, like other errors of a request");
    }
    // The same in an older revision, without a params member at all.
    let body = json!({"jsonrpc": "2.0", "id": "r1", "method": "tools/call"});
    let (_, _, got) = send(raw(
        &app,
        Some(&a.token),
        "2025-06-18",
        json_ct,
        &body.to_string(),
    ))
    .await;
    assert_eq!(got["error"]["code"], -32602, "{got}");
    assert_eq!(got["id"], "r1");
    // An unknown method is still -32601.
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "rockets/launch", "params": {}});
    let (_, _, got) = send(raw(
        &app,
        Some(&a.token),
        "2025-06-18",
        json_ct,
        &body.to_string(),
    ))
    .await;
    assert_eq!(got["error"]["code"], -32601, "{got}");
    assert_eq!(
        got["error"]["message"], "Method not found: rockets/launch",
        "{got}"
    );
    // Methods removed in 2026-07-28 answer 404 with -32601, whatever their params (SEP-2575).
    for method in ["initialize", "ping"] {
        let body = json!({"jsonrpc": "2.0", "id": 3, "method": method, "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": V26,
            "io.modelcontextprotocol/clientCapabilities": {}
        }}});
        let (s, _, got) = send(
            raw(&app, Some(&a.token), V26, json_ct, &body.to_string()).header("mcp-method", method),
        )
        .await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{method}: {got}");
        assert_eq!(got["error"]["code"], -32601, "{method}: {got}");
        assert!(
            got["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("Method not found"),
            "{method}: {got}"
        );
    }

    // No or another Content-Type: rmcp's 415, as a JSON-RPC error naming the header.
    for ct in [None, Some("text/plain")] {
        let (s, _, got) = send(raw(&app, Some(&a.token), V26, ct, "{not json")).await;
        assert_eq!(s, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{ct:?}");
        assert_eq!(got["error"]["code"], -32600, "{got}");
        assert!(
            got["error"]["message"]
                .as_str()
                .unwrap()
                .contains("Content-Type must be application/json"),
            "{got}"
        );
    }

    // A well-formed request still goes through.
    let l = rpc(&app, &a.token, "tools/list", json!({})).await;
    assert_eq!(tool_names(&l), ALL_TOOLS);
}

#[tokio::test]
async fn control_and_bidi_characters_are_refused_in_notes() {
    let app = spawn_app().await;
    let a = alice(&app).await;
    let good = ok(&call(
        &app,
        &a.token,
        "create_note",
        json!({"project_id": a.project, "title": "Plan", "body": "one\ntwo\r\n\tthree", "tags": ["ops"]}),
    )
    .await);
    assert_eq!(
        good["body"], "one\ntwo\r\n\tthree",
        "newlines and tabs are fine in a body"
    );
    let note_id = good["id"].as_str().unwrap().to_string();

    let bad_title = [
        "invoice\u{202e}gpj.exe",
        "a\u{0000}b",
        "tab\there",
        "line\nbreak",
        "del\u{007f}",
        "c1\u{0085}",
        "c1\u{009b}",
        "lre\u{202a}",
        "pdf\u{202c}",
        "lri\u{2066}",
        "pdi\u{2069}",
        "lrm\u{200e}",
        "rlm\u{200f}",
        "alm\u{061c}",
    ];
    for title in bad_title {
        let msg = error_text(
            &call(
                &app,
                &a.token,
                "create_note",
                json!({"project_id": a.project, "title": title, "body": "b"}),
            )
            .await,
        );
        assert!(msg.contains("`title`"), "{title:?}: {msg}");
        let msg = error_text(
            &call(
                &app,
                &a.token,
                "update_note",
                json!({"project_id": a.project, "note_id": note_id, "title": title}),
            )
            .await,
        );
        assert!(msg.contains("`title`"), "{title:?}: {msg}");
    }
    for tag in ["a\u{0000}b", "x\u{202e}", "new\nline", "t\u{2067}"] {
        let msg = error_text(
            &call(
                &app,
                &a.token,
                "create_note",
                json!({"project_id": a.project, "title": "t", "body": "b", "tags": ["ok", tag]}),
            )
            .await,
        );
        assert!(msg.contains("`tags[1]`"), "{tag:?}: {msg}");
        let msg = error_text(
            &call(
                &app,
                &a.token,
                "update_note",
                json!({"project_id": a.project, "note_id": note_id, "tags": [tag]}),
            )
            .await,
        );
        assert!(msg.contains("`tags[0]`"), "{tag:?}: {msg}");
    }
    for body in [
        "bell\u{0007}",
        "nul\u{0000}",
        "esc\u{001b}[31m",
        "rlo\u{202e}",
        "c1\u{0090}",
    ] {
        let msg = error_text(
            &call(
                &app,
                &a.token,
                "create_note",
                json!({"project_id": a.project, "title": "t", "body": body}),
            )
            .await,
        );
        assert!(msg.contains("`body`"), "{body:?}: {msg}");
        let msg = error_text(
            &call(
                &app,
                &a.token,
                "update_note",
                json!({"project_id": a.project, "note_id": note_id, "body": body}),
            )
            .await,
        );
        assert!(msg.contains("`body`"), "{body:?}: {msg}");
    }
    // Nothing was stored or changed.
    assert_eq!(app.store.count_notes(&a.project).await.unwrap(), 1);
    let stored = app.store.note(&a.project, &note_id).await.unwrap().unwrap();
    assert_eq!(stored.title, "Plan");
    assert_eq!(stored.body, "one\ntwo\r\n\tthree");
    assert_eq!(stored.tags, ["ops"]);
    // Other non-ASCII text is fine.
    let sc = ok(&call(
        &app,
        &a.token,
        "update_note",
        json!({"project_id": a.project, "note_id": note_id, "title": "Café: שלום عربي 😀", "tags": ["日本"]}),
    )
    .await);
    assert_eq!(sc["title"], "Café: שלום عربي 😀");
}

#[tokio::test]
async fn resource_reads_are_bounded_like_tool_results() {
    let app = spawn_app_with(|v| {
        v.insert("GATEHOUSE_MAX_RESULT_BYTES".into(), "2048".into());
    })
    .await;
    let a = alice(&app).await;
    let now = gatehouse::store::now();
    let big = "é".repeat(20_000);
    let note = app
        .store
        .create_note(
            &gatehouse::store::notes::NewNote {
                project_id: &a.project,
                author_account_id: &a.id,
                title: "big",
                body: &big,
                tags: &["t".to_string()],
            },
            now,
        )
        .await
        .unwrap();
    for i in 0..30 {
        app.store
            .create_note(
                &gatehouse::store::notes::NewNote {
                    project_id: &a.project,
                    author_account_id: &a.id,
                    title: &format!("note {i}"),
                    body: &"lorem ipsum ".repeat(50),
                    tags: &[],
                },
                now + 1 + i,
            )
            .await
            .unwrap();
    }

    // One note larger than the bound.
    let uri = format!("gatehouse://projects/{}/notes/{}", a.project, note.id);
    let body = rpc(&app, &a.token, "resources/read", json!({"uri": uri})).await;
    let result = &body["result"];
    let size = serde_json::to_string(result).unwrap().len();
    assert!(size <= 2048, "bounded: {size}");
    let content = &result["contents"][0];
    assert_eq!(content["uri"], uri.as_str());
    assert_eq!(content["mimeType"], "application/json");
    let doc: Value = serde_json::from_str(content["text"].as_str().unwrap())
        .expect("the cut text is still JSON");
    assert_eq!(doc["truncated"], true);
    assert_eq!(doc["id"], note.id.as_str());
    assert_eq!(doc["uri"], uri.as_str());
    assert_eq!(doc["title"], "big");
    let cut = doc["body"].as_str().unwrap();
    assert!(cut.ends_with('…') && cut.len() < big.len());
    let notice = doc["truncation_notice"].as_str().unwrap();
    assert!(notice.contains("2048"), "{notice}");

    // A finished export larger than the bound.
    let receipt = ok(&call(
        &app,
        &a.token,
        "export_project",
        json!({"project_id": a.project}),
    )
    .await);
    let id = receipt["id"].as_str().unwrap().to_string();
    let mut job = Value::Null;
    for _ in 0..50 {
        job = ok(&call(&app, &a.token, "get_job", json!({"job_id": id})).await);
        if job["status"] == "completed" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(job["status"], "completed", "{job}");
    let resource = format!("gatehouse://jobs/export/{id}");
    let body = rpc(&app, &a.token, "resources/read", json!({"uri": resource})).await;
    let result = &body["result"];
    let size = serde_json::to_string(result).unwrap().len();
    assert!(size <= 2048, "bounded: {size}");
    let doc: Value = serde_json::from_str(result["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(doc["truncated"], true);
    assert_eq!(doc["id"], id.as_str());
    assert_eq!(doc["status"], "completed");
    assert_eq!(doc["note_count"], 31);
    let kept = doc["document"]["notes"].as_array().unwrap().len();
    assert!(kept < 31, "{kept}");
    let notice = doc["truncation_notice"].as_str().unwrap();
    assert!(notice.contains("get_note"), "{notice}");

    // A small resource is sent whole, without the marks.
    let uri = format!("gatehouse://projects/{}", a.project);
    let body = rpc(&app, &a.token, "resources/read", json!({"uri": uri})).await;
    let doc: Value =
        serde_json::from_str(body["result"]["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert!(doc.get("truncated").is_none() && doc.get("truncation_notice").is_none());
    assert_eq!(doc["note_count"], 31);
}

#[tokio::test]
async fn resources_need_the_read_scope_and_cursors_are_bounded() {
    let app = spawn_app().await;
    let a = alice(&app).await;
    // A token without scopes (the token endpoint never issues one; written in the store here).
    let bare = token_for(&app, &a.browser, "mcp:read").await;
    let hash = gatehouse::domain::secret::Secret::from_presented(bare.clone()).hash();
    sqlx::query("UPDATE access_tokens SET scope = '' WHERE token_hash = $1")
        .bind(hash.as_str().to_string())
        .execute(app.store.pool())
        .await
        .unwrap();
    let project_uri = format!("gatehouse://projects/{}", a.project);
    for (method, params) in [
        ("resources/list", json!({})),
        ("resources/templates/list", json!({})),
        ("resources/read", json!({"uri": project_uri})),
    ] {
        let (status, headers, _) = send(modern(&app, Some(&bare), method, params)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method}");
        let challenge = headers["www-authenticate"].to_str().unwrap();
        assert!(
            challenge.contains("error=\"insufficient_scope\""),
            "{method}: {challenge}"
        );
    }
    let got = rpc(&app, &a.token, "resources/list", json!({})).await;
    assert!(got["result"]["resources"].is_array(), "{got}");
    // A cursor whose offset would overflow is an invalid cursor, not a crash.
    for offset in ["18446744073709551600", "9223372036854775808", "-1"] {
        use base64::Engine;
        let cursor = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("n:{offset}"));
        let (status, _, got) = send(modern(
            &app,
            Some(&a.token),
            "resources/list",
            json!({"cursor": cursor}),
        ))
        .await;
        assert_eq!(got["error"]["code"], -32602, "{offset}: {status} {got}");
    }
}
