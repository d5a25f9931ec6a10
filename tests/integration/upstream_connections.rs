//! Per-person upstreams (`upstream add --per-person-oauth`): the upstream is a second
//! Gatehouse — its own authorization server and MCP endpoint — on `localhost`, the front one
//! on `127.0.0.1` (so their session cookies stay apart). Discovery and registration at `upstream
//! add`, the refusals that store nothing, connecting through the link a call answers with,
//! calls with the person's own token, refresh at expiry (two concurrent calls, one rotation),
//! a token endpoint that is down, a grant the upstream ended, and disconnecting with RFC 7009
//! revocation.

use std::sync::Arc;

use axum::http::StatusCode as AxumStatus;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, hidden_input, new_client, spawn_app_with};
use crate::mcp::{alice, bob, call, error_text, modern, send};
use crate::oauth_helpers::{query_of, revoke_on_apps_page, walk};
use crate::upstreams::{cli, cli_ok, spawn_with_key};

/// A Gatehouse named `http://localhost:PORT` (its issuer and MCP URL), with a database of its
/// own.
async fn upstream_gatehouse() -> TestApp {
    let mut app = spawn_app_with(|vars| {
        let port = vars["GATEHOUSE_BIND"]
            .rsplit(':')
            .next()
            .unwrap()
            .to_string();
        vars.insert(
            "MCP_SERVER_URL".into(),
            format!("http://localhost:{port}/mcp"),
        );
    })
    .await;
    app.address = format!("http://localhost:{}", app.port);
    app
}

/// The front Gatehouse with an upstream `up` registered per person (definitions trusted).
async fn front_with_upstream() -> (TestApp, TestApp) {
    let upstream = upstream_gatehouse().await;
    let front = spawn_with_key().await;
    let out = cli_ok(
        &front,
        &[
            "upstream",
            "add",
            "up",
            "--url",
            &upstream.url("/mcp"),
            "--per-person-oauth",
            "--trust-definitions",
        ],
    )
    .await;
    assert!(out.contains("per person"), "{out}");
    (front, upstream)
}

async fn page(browser: &reqwest::Client, url: &str) -> (StatusCode, String) {
    let r = browser.get(url).send().await.unwrap();
    (r.status(), r.text().await.unwrap())
}

/// The link in a call's "connect first" text.
fn link_in(text: &str) -> String {
    let start = text.find("http").expect("a link in the text");
    text[start..]
        .split_whitespace()
        .next()
        .unwrap()
        .trim_end_matches(',')
        .to_string()
}

/// Runs the connection in `browser` from the front's start page `link` to the upstream's
/// consent and back; returns the callback URL the upstream sent the browser to (not yet
/// opened).
async fn authorize_at_upstream(
    front: &TestApp,
    upstream: &TestApp,
    browser: &reqwest::Client,
    link: &str,
) -> String {
    let (status, body) = page(browser, link).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("Connect your account at up"), "{body}");
    let csrf = hidden_input(&body, "csrf_token").unwrap();
    let mut form = vec![("csrf_token".to_string(), csrf)];
    if let Some(request) = hidden_input(&body, "request") {
        form.push(("request".into(), request));
    }
    let r = browser
        .post(front.url("/connections/up/start"))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let to = r.headers()["location"].to_str().unwrap().to_string();
    assert!(
        to.starts_with(&upstream.url("/oauth/authorize?")),
        "to the upstream's own authorization endpoint: {to}"
    );
    let q = query_of(&to);
    assert_eq!(q["code_challenge_method"], "S256");
    assert_eq!(q["resource"], upstream.url("/mcp"), "RFC 8707 resource");
    assert_eq!(q["redirect_uri"], front.url("/connections/callback"));
    assert!(q["state"].len() >= 32, "an unguessable state");
    let back = walk(upstream, browser, &to, "approve").await;
    assert!(
        back.starts_with(&front.url("/connections/callback?")),
        "{back}"
    );
    back
}

async fn grant_row(front: &TestApp, account: &str) -> Option<gatehouse::store::vault::Grant> {
    front.store.grant(account, "up").await.unwrap()
}

async fn expire_access(front: &TestApp, account: &str, at: i64) {
    sqlx::query(
        "UPDATE upstream_grants SET expires_at = $1 WHERE account_id = $2 AND upstream = 'up'",
    )
    .bind(at)
    .bind(account)
    .execute(front.db.pool().await)
    .await
    .unwrap();
}

async fn audit_events(front: &TestApp, event: &str) -> Vec<(String, Option<String>)> {
    use sqlx::Row;
    sqlx::query("SELECT outcome, detail FROM audit_events WHERE event = $1 ORDER BY id")
        .bind(event)
        .fetch_all(front.db.pool().await)
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get("outcome"), r.get("detail")))
        .collect()
}

#[tokio::test]
async fn adding_a_per_person_upstream_discovers_its_server_and_registers_there() {
    let (front, upstream) = front_with_upstream().await;
    let oauth = front.store.upstream_oauth("up").await.unwrap().unwrap();
    assert_eq!(oauth.resource, upstream.url("/mcp"));
    assert_eq!(
        oauth.issuer, upstream.address,
        "issuer from RFC 9728 then RFC 8414"
    );
    assert_eq!(
        oauth.authorization_endpoint,
        upstream.url("/oauth/authorize")
    );
    assert_eq!(oauth.token_endpoint, upstream.url("/oauth/token"));
    assert_eq!(
        oauth.revocation_endpoint.as_deref(),
        Some(upstream.url("/oauth/revoke").as_str())
    );
    assert_eq!(oauth.registration, "dynamic", "RFC 7591 at the upstream");
    assert!(
        oauth.client_secret_sealed.is_some(),
        "a confidential client (client_secret_basic is offered), its secret sealed"
    );
    let registered = upstream.store.client(&oauth.client_id).await.unwrap();
    assert!(registered.is_some(), "the client exists at the upstream");
    let list = cli_ok(&front, &["upstream", "list"]).await;
    assert!(
        list.contains(&format!(
            "per-person-oauth issuer={} registration=dynamic",
            upstream.address
        )),
        "{list}"
    );
    // The client ID metadata document Gatehouse serves as a client of upstreams.
    let doc: Value = new_client()
        .get(front.url("/connections/client-metadata.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        doc["client_id"],
        front.url("/connections/client-metadata.json")
    );
    assert_eq!(doc["redirect_uris"][0], front.url("/connections/callback"));
}

/// A fake upstream: `POST /mcp` answers 401 naming its `/prm`, which serves what `prm` makes
/// of the upstream's base URL. Returns the MCP URL.
async fn fake_upstream(prm: impl Fn(&str) -> Value) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let challenge = format!("Bearer resource_metadata=\"{base}/prm\"");
    let doc = Arc::new(prm(&base));
    let router = axum::Router::new()
        .route(
            "/mcp",
            axum::routing::post(move || {
                let challenge = challenge.clone();
                async move { (AxumStatus::UNAUTHORIZED, [("www-authenticate", challenge)]) }
            }),
        )
        .route(
            "/prm",
            axum::routing::get(move || {
                let doc = Arc::clone(&doc);
                async move { axum::Json((*doc).clone()) }
            }),
        );
    tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    format!("{base}/mcp")
}

async fn refused(front: &TestApp, url: &str, expected: &str) {
    let run = cli(
        front,
        &["upstream", "add", "x", "--url", url, "--per-person-oauth"],
    )
    .await;
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run.stderr.contains(expected), "{expected}: {}", run.stderr);
    assert!(run.stderr.contains("not added"), "{}", run.stderr);
}

#[tokio::test]
async fn discovery_failures_are_one_clear_line_and_store_nothing() {
    let front = spawn_with_key().await;
    // Not an OAuth-protected MCP endpoint: the front's own health check answers without 401.
    refused(&front, &front.url("/healthz"), "instead of 401").await;
    // Metadata naming another resource (RFC 9728 §3.3).
    let url = fake_upstream(|_| {
        json!({"resource": "https://elsewhere.example/mcp", "authorization_servers": ["https://as.example"]})
    })
    .await;
    refused(&front, &url, "RFC 9728").await;
    // An authorization server at a link-local address (cloud metadata endpoints live there).
    let url = fake_upstream(|base| {
        json!({"resource": format!("{base}/mcp"), "authorization_servers": ["https://169.254.169.254"]})
    })
    .await;
    refused(&front, &url, "link-local").await;
    // An authorization server whose metadata cannot be found.
    let url = fake_upstream(
        |base| json!({"resource": format!("{base}/mcp"), "authorization_servers": [base]}),
    )
    .await;
    refused(&front, &url, "no authorization-server metadata").await;
    // --per-person-oauth with a shared credential makes no sense.
    let run = cli(
        &front,
        &[
            "upstream",
            "add",
            "c",
            "--url",
            &url,
            "--per-person-oauth",
            "--header",
            "Authorization: Bearer x",
        ],
    )
    .await;
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("without --header"), "{}", run.stderr);
    let list = cli_ok(&front, &["upstream", "list"]).await;
    assert!(list.starts_with("no upstreams"), "nothing stored: {list}");
    assert!(front.store.upstream_oauths().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_person_connects_through_the_link_and_calls_with_their_own_token() {
    let (front, upstream) = front_with_upstream().await;
    let alice = alice(&front).await;

    // Not connected: the call answers with a link to the front's own page (once the registry
    // reload brings the upstream in; until then the tool is unknown).
    let mut answer = Value::Null;
    for _ in 0..240 {
        answer = crate::mcp::rpc(
            &front,
            &alice.token,
            "tools/call",
            json!({"name": "up__list_projects", "arguments": {}}),
        )
        .await;
        if answer.get("result").is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    let text = error_text(&answer["result"]);
    let link = link_in(&text);
    assert!(
        link.starts_with(&front.url("/connections/up/start?request=")),
        "a link to Gatehouse, never to the upstream: {link}"
    );
    // A 2026-07-28 client that declares URL elicitation gets an input request instead.
    let mut r = modern(
        &front,
        Some(&alice.token),
        "tools/call",
        json!({"name": "up__list_projects", "arguments": {}}),
    );
    r = r.json(
        &json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {
        "name": "up__list_projects", "arguments": {},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"url": {}}},
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}
        }}}),
    );
    let (status, _, body) = send(r).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"]["resultType"], "input_required", "{body}");
    let request = &body["result"]["inputRequests"]["connect-up"];
    assert_eq!(request["method"], "elicitation/create", "{body}");
    assert_eq!(request["params"]["mode"], "url");
    assert!(
        request["params"]["url"]
            .as_str()
            .unwrap()
            .starts_with(&front.url("/connections/up/start?request=")),
        "{body}"
    );

    // Someone else opening Alice's link gets nothing.
    let (bob_browser, _, bob_id) = bob(&front, "mcp:read").await;
    let (status, body) = page(&bob_browser, &link).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(body.contains("made for someone else"), "{body}");

    let back = authorize_at_upstream(&front, &upstream, &alice.browser, &link).await;
    // Bob's browser cannot use Alice's callback.
    let (status, _) = page(&bob_browser, &back).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(grant_row(&front, &bob_id).await.is_none());
    // Bob's try took the state: a state is single use, so Alice starts again.
    let (status, body) = page(&alice.browser, &back).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        grant_row(&front, &alice.id).await.is_none(),
        "nothing stored"
    );

    let back = authorize_at_upstream(&front, &upstream, &alice.browser, &link).await;
    let (status, body) = page(&alice.browser, &back).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("up is connected"), "{body}");
    // The same answer again is refused (single use) and changes nothing.
    let (status, _) = page(&alice.browser, &back).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let grant = grant_row(&front, &alice.id)
        .await
        .expect("a grant in the vault");
    assert!(grant.refresh_sealed.is_some(), "a refresh token was issued");
    assert!(grant.expires_at.is_some());

    // The call now goes through with Alice's own token at the upstream.
    let result = call(&front, &alice.token, "up__list_projects", json!({})).await;
    assert_eq!(result["isError"], false, "{result}");
    let listed = crate::mcp::rpc(&front, &alice.token, "tools/list", json!({})).await;
    assert!(
        listed.to_string().contains("up__list_projects"),
        "listed once connected"
    );

    // Refresh at expiry: two concurrent calls, one rotation (the upstream rotates refresh
    // tokens and ends the whole grant when a used one comes back, so a double rotation would
    // fail a call and end the connection).
    let before = grant_row(&front, &alice.id).await.unwrap();
    expire_access(&front, &alice.id, gatehouse::store::now() + 5).await;
    let (a, b) = tokio::join!(
        call(&front, &alice.token, "up__list_projects", json!({})),
        call(&front, &alice.token, "up__list_projects", json!({}))
    );
    assert_eq!(a["isError"], false, "{a}");
    assert_eq!(b["isError"], false, "{b}");
    let after = grant_row(&front, &alice.id)
        .await
        .expect("the grant is kept");
    assert_ne!(after.refresh_sealed, before.refresh_sealed, "rotated once");
    assert_eq!(after.refresh_lease_until, 0, "the lease is released");
    let result = call(&front, &alice.token, "up__list_projects", json!({})).await;
    assert_eq!(result["isError"], false, "{result}");

    // The token endpoint down during a refresh: "try again", the grant kept as it was.
    let token_endpoint = front
        .store
        .upstream_oauth("up")
        .await
        .unwrap()
        .unwrap()
        .token_endpoint;
    sqlx::query("UPDATE upstream_oauth SET token_endpoint = 'http://localhost:9/oauth/token'")
        .execute(front.db.pool().await)
        .await
        .unwrap();
    expire_access(&front, &alice.id, gatehouse::store::now() - 1).await;
    let kept = grant_row(&front, &alice.id).await.unwrap();
    let text = error_text(&call(&front, &alice.token, "up__list_projects", json!({})).await);
    assert!(text.contains("Try again"), "{text}");
    let still = grant_row(&front, &alice.id).await.expect("kept");
    assert_eq!(still.refresh_sealed, kept.refresh_sealed);
    assert_eq!(still.refresh_lease_until, 0);
    sqlx::query("UPDATE upstream_oauth SET token_endpoint = $1")
        .bind(&token_endpoint)
        .execute(front.db.pool().await)
        .await
        .unwrap();
    let result = call(&front, &alice.token, "up__list_projects", json!({})).await;
    assert_eq!(
        result["isError"], false,
        "refreshed on the next try: {result}"
    );

    // Alice revokes Gatehouse at the upstream's /apps: the next refresh gets invalid_grant,
    // the grant is forgotten, and the call answers with a new link.
    revoke_on_apps_page(&upstream, &alice.browser).await;
    expire_access(&front, &alice.id, gatehouse::store::now() - 1).await;
    let text = error_text(&call(&front, &alice.token, "up__list_projects", json!({})).await);
    assert!(text.contains("/connections/up/start?request="), "{text}");
    assert!(
        grant_row(&front, &alice.id).await.is_none(),
        "dropped on invalid_grant"
    );
    assert!(
        audit_events(&front, "connection_refresh_failed")
            .await
            .iter()
            .any(|(outcome, _)| outcome == "invalid_grant")
    );

    // Connect again from the Connections page, then disconnect there: revoked at the upstream.
    let (status, body) = page(&alice.browser, &front.url("/connections")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("Not connected"), "{body}");
    let back = authorize_at_upstream(
        &front,
        &upstream,
        &alice.browser,
        &front.url("/connections/up/start"),
    )
    .await;
    assert_eq!(page(&alice.browser, &back).await.0, StatusCode::OK);
    let (_, body) = page(&alice.browser, &front.url("/connections")).await;
    assert!(body.contains("Disconnect up"), "{body}");
    assert!(body.contains("mcp:read"), "the scopes granted: {body}");
    let csrf = hidden_input(&body, "csrf_token").unwrap();
    let r = alice
        .browser
        .post(front.url("/connections/up/disconnect"))
        .form(&[("csrf_token", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert!(grant_row(&front, &alice.id).await.is_none());
    let disconnects = audit_events(&front, "connection_disconnected").await;
    assert_eq!(
        disconnects.last().unwrap().1.as_deref(),
        Some("upstream_revocation=revoked"),
        "{disconnects:?}"
    );
    assert!(
        audit_events(&front, "connection_connected").await.len() >= 2,
        "each connection audited"
    );
    let text = error_text(&call(&front, &alice.token, "up__list_projects", json!({})).await);
    assert!(text.contains("/connections/up/start?request="), "{text}");
}
