//! Service clients and the `client_credentials` grant (RFC 6749 §4.4; issue "Credentials
//! beyond the browser"): made with `gatehouse client add NAME --service --owner EMAIL`, their
//! tokens act for the owner (or one project), are bound to `MCP_SERVER_URL`, come without a
//! refresh token and show in introspection; no other client may use the grant.

use crate::helpers::{TestApp, spawn_app};
use crate::keys::gatehouse;
use crate::mcp::{account_id, error_text, modern, ok, send};
use crate::oauth_helpers::{
    REDIRECT, full_grant, register_public, revoke_on_apps_page, signed_in_browser,
};
use reqwest::StatusCode;
use serde_json::{Value, json};

const ALICE: &str = "alice@example.com";

/// `gatehouse client add ARGS…`, which must succeed: (client id, secret).
fn add_client(app: &TestApp, args: &[&str]) -> (String, String) {
    let mut all = vec!["client", "add"];
    all.extend_from_slice(args);
    let (success, out, err) = gatehouse(app, &all);
    assert!(success, "{err}");
    let field = |name: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .unwrap_or_else(|| panic!("no {name} in {out}"))
            .to_string()
    };
    (field("client_id"), field("client_secret"))
}

/// `POST /oauth/token` with `grant_type=client_credentials`, the client's secret by HTTP Basic,
/// and `extra` form fields: (status, JSON body).
async fn client_credentials(
    app: &TestApp,
    id: &str,
    secret: &str,
    extra: &[(&str, &str)],
) -> (StatusCode, Value) {
    let mut form = vec![("grant_type", "client_credentials")];
    form.extend_from_slice(extra);
    let r = app
        .client
        .post(app.url("/oauth/token"))
        .basic_auth(id, Some(secret))
        .form(&form)
        .send()
        .await
        .unwrap();
    let status = r.status();
    (status, r.json().await.unwrap())
}

async fn call(app: &TestApp, token: &str, name: &str, args: Value) -> (StatusCode, Value) {
    let (status, _, body) = send(modern(
        app,
        Some(token),
        "tools/call",
        json!({"name": name, "arguments": args}),
    ))
    .await;
    (status, body)
}

/// Alice with two projects; (account id, research, garden).
async fn alice(app: &TestApp) -> (String, String, String) {
    app.create_account(ALICE, "a-long-password").await;
    let id = account_id(app, ALICE).await;
    let now = gatehouse::store::now();
    let research = app
        .store
        .create_project("Research", &id, now)
        .await
        .unwrap();
    let garden = app.store.create_project("Garden", &id, now).await.unwrap();
    (id, research, garden)
}

#[tokio::test]
async fn a_service_client_gets_a_token_for_its_owner_without_a_refresh_token() {
    let app = spawn_app().await;
    let (alice_id, research, garden) = alice(&app).await;
    let (id, secret) = add_client(&app, &["Billing", "--service", "--owner", ALICE]);
    let mcp = format!("{}/mcp", app.address);

    let (status, body) = client_credentials(&app, &id, &secret, &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["expires_in"], 3600);
    assert_eq!(body["scope"], "mcp:read");
    assert!(body.get("refresh_token").is_none(), "{body}");
    let token = body["access_token"].as_str().unwrap().to_string();
    assert!(token.starts_with("gate_at_"));

    // It acts for the owner: every active project, read-only.
    let (status, listed) = call(&app, &token, "list_projects", json!({})).await;
    assert_eq!(status, StatusCode::OK);
    let mut ids: Vec<String> = ok(&listed["result"])["projects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    let mut expected = vec![research.clone(), garden];
    expected.sort();
    assert_eq!(ids, expected);
    let (status, _) = call(
        &app,
        &token,
        "create_note",
        json!({"project_id": research, "title": "t", "body": "b"}),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let audit = app.store.recent_audit(50).await.unwrap();
    let used = audit
        .iter()
        .find(|e| e.event == "tool_call" && e.subject.as_deref() == Some("list_projects"))
        .unwrap();
    assert_eq!(used.client_id.as_deref(), Some(id.as_str()));
    assert!(
        used.detail
            .as_deref()
            .unwrap()
            .contains(&format!("credential=service_token:{id}"))
    );
    assert!(audit.iter().any(|e| e.event == "client_created"
        && e.client_id.as_deref() == Some(id.as_str())
        && e.account_id.as_deref() == Some(alice_id.as_str())));

    // resource is optional; sent, it must name MCP_SERVER_URL.
    let (status, body) = client_credentials(&app, &id, &secret, &[("resource", &mcp)]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = client_credentials(
        &app,
        &id,
        &secret,
        &[("resource", "https://elsewhere.example/mcp")],
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "invalid_target");
    // No more scope than the service has; no offline_access.
    for scope in ["mcp:write", "mcp:read offline_access", "admin"] {
        let (status, body) = client_credentials(&app, &id, &secret, &[("scope", scope)]).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{scope}");
        assert_eq!(body["error"], "invalid_scope", "{scope}");
    }
    // A wrong secret is invalid_client.
    let (status, body) = client_credentials(&app, &id, "gate_cs_wrong", &[]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["error"], "invalid_client");

    // Introspection shows client_id, sub and aud.
    let (introspector, isecret) = add_client(&app, &["Auditor", "--introspect"]);
    let v: Value = app
        .client
        .post(app.url("/oauth/introspect"))
        .basic_auth(&introspector, Some(&isecret))
        .form(&[("token", token.as_str())])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["active"], true, "{v}");
    assert_eq!(v["client_id"], id.as_str());
    assert_eq!(v["sub"], alice_id.as_str());
    assert_eq!(v["aud"], mcp.as_str());
    assert_eq!(v["scope"], "mcp:read");

    // The owner sees the service on Connected apps; revoking it there stops its token at once
    // and it gets no new one.
    let browser = signed_in_browser(&app).await;
    let page = browser
        .get(app.url("/apps"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("Billing") && page.contains(&id), "{page}");
    revoke_on_apps_page(&app, &browser).await;
    let (status, _) = call(&app, &token, "list_projects", json!({})).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, body) = client_credentials(&app, &id, &secret, &[]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "invalid_grant");
}

#[tokio::test]
async fn a_project_service_writes_in_its_project_only() {
    let app = spawn_app().await;
    let (_, research, garden) = alice(&app).await;
    let (id, secret) = add_client(
        &app,
        &[
            "Deployer",
            "--service",
            "--owner",
            ALICE,
            "--project",
            &research,
            "--write",
        ],
    );
    let (status, body) = client_credentials(&app, &id, &secret, &[("scope", "mcp:read")]).await;
    assert_eq!(
        (status, body["scope"].as_str()),
        (StatusCode::OK, Some("mcp:read"))
    );
    let (_, body) = client_credentials(&app, &id, &secret, &[]).await;
    assert_eq!(body["scope"], "mcp:read mcp:write");
    let token = body["access_token"].as_str().unwrap().to_string();
    let (_, listed) = call(&app, &token, "list_projects", json!({})).await;
    let projects = ok(&listed["result"])["projects"].clone();
    assert_eq!(projects.as_array().unwrap().len(), 1);
    assert_eq!(projects[0]["id"], research.as_str());
    let (_, created) = call(
        &app,
        &token,
        "create_note",
        json!({"project_id": research, "title": "Release", "body": "v2"}),
    )
    .await;
    ok(&created["result"]);
    let missing = "3f2b7a44-0000-4000-8000-000000000000";
    let (_, other) = call(&app, &token, "get_project", json!({"project_id": garden})).await;
    let (_, nowhere) = call(&app, &token, "get_project", json!({"project_id": missing})).await;
    assert_eq!(
        error_text(&other["result"]).replace(&garden, "ID"),
        error_text(&nowhere["result"]).replace(missing, "ID")
    );

    // The owner disabled: no new token, and the live one stops.
    let (success, _, err) = gatehouse(&app, &["account", "disable", ALICE]);
    assert!(success, "{err}");
    let (status, body) = client_credentials(&app, &id, &secret, &[]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "invalid_grant");
    let (status, _) = call(&app, &token, "list_projects", json!({})).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn only_service_clients_may_use_client_credentials() {
    let app = spawn_app().await;
    alice(&app).await;
    // A public client registered dynamically.
    let public = register_public(&app, &[REDIRECT]).await;
    let r = app
        .client
        .post(app.url("/oauth/token"))
        .form(&[("grant_type", "client_credentials"), ("client_id", &public)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"],
        "unauthorized_client"
    );
    // A confidential client registered dynamically.
    let r = app
        .client
        .post(app.url("/oauth/register"))
        .json(&json!({
            "redirect_uris": [REDIRECT],
            "token_endpoint_auth_method": "client_secret_basic",
            "client_name": "Confidential",
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let registered: Value = r.json().await.unwrap();
    let (status, body) = client_credentials(
        &app,
        registered["client_id"].as_str().unwrap(),
        registered["client_secret"].as_str().unwrap(),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "unauthorized_client");
    // A command-line client made for introspection only.
    let (id, secret) = add_client(&app, &["Auditor", "--introspect"]);
    let (status, body) = client_credentials(&app, &id, &secret, &[]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "unauthorized_client");
    // And a service client cannot redeem codes or refresh tokens.
    let (service, service_secret) = add_client(&app, &["Svc", "--service", "--owner", ALICE]);
    let r = app
        .client
        .post(app.url("/oauth/token"))
        .basic_auth(&service, Some(&service_secret))
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", "gate_rt_x"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"],
        "unauthorized_client"
    );

    // The command line checks its input.
    app.create_account("carol@example.com", "carols-long-password")
        .await;
    let (success, _, err) = gatehouse(&app, &["account", "disable", "carol@example.com"]);
    assert!(success, "{err}");
    for (args, expected) in [
        (
            vec!["X", "--service", "--owner", "carol@example.com"],
            "disabled",
        ),
        (vec!["X", "--owner", ALICE], "--service"),
        (vec!["X", "--service"], "--owner"),
        (
            vec!["X", "--service", "--owner", "nobody@example.com"],
            "no account",
        ),
        (
            vec!["X", "--service", "--owner", ALICE, "--project", "nope"],
            "not a member",
        ),
    ] {
        let mut all = vec!["client", "add"];
        all.extend(args.iter().copied());
        let (success, out, err) = gatehouse(&app, &all);
        assert!(!success && err.contains(expected), "{args:?}: {out} {err}");
    }

    // Advertised in the metadata; a browser grant's response still carries its refresh token.
    let m: Value = app
        .client
        .get(app.url("/.well-known/oauth-authorization-server"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        m["grant_types_supported"],
        json!([
            "authorization_code",
            "refresh_token",
            "client_credentials",
            "urn:ietf:params:oauth:grant-type:device_code",
            "urn:ietf:params:oauth:grant-type:jwt-bearer"
        ])
    );
    let (_, grant) = full_grant(&app).await;
    assert!(grant["refresh_token"].is_string());
}

/// Introspection says what a token reaches (issue 30, finding 5): a token of a service client
/// limited to one project carries `project_id` and `grant_type: client_credentials`; a
/// person's token has no `project_id` and `grant_type: authorization_code`. Before, the two
/// looked the same (same `sub`, `scope`, `aud`).
#[tokio::test]
async fn introspection_names_a_project_limited_tokens_project_and_grant() {
    let app = spawn_app().await;
    let (_, research, _) = alice(&app).await;
    let (id, secret) = add_client(
        &app,
        &[
            "Reader",
            "--service",
            "--owner",
            ALICE,
            "--project",
            &research,
        ],
    );
    let (status, body) = client_credentials(&app, &id, &secret, &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let service_token = body["access_token"].as_str().unwrap().to_string();
    let (introspector, isecret) = add_client(&app, &["Auditor", "--introspect"]);
    let introspect = |token: String| {
        let (app, introspector, isecret) = (&app, introspector.clone(), isecret.clone());
        async move {
            app.client
                .post(app.url("/oauth/introspect"))
                .basic_auth(&introspector, Some(&isecret))
                .form(&[("token", token.as_str())])
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };
    let v = introspect(service_token).await;
    assert_eq!(v["active"], true, "{v}");
    assert_eq!(v["project_id"], research.as_str(), "{v}");
    assert_eq!(v["grant_type"], "client_credentials", "{v}");
    let (_, grant) = full_grant(&app).await;
    let v = introspect(grant["access_token"].as_str().unwrap().to_string()).await;
    assert_eq!(v["active"], true, "{v}");
    assert!(v.get("project_id").is_none(), "{v}");
    assert_eq!(v["grant_type"], "authorization_code", "{v}");
}

/// The `oauth2` crate's client credentials grant (RFC 6749 §4.4), an independent client, with
/// the service's secret by HTTP Basic: a token without a refresh token that lists the tools.
#[tokio::test]
async fn the_oauth2_crates_client_credentials_grant_gets_a_token() {
    use oauth2::basic::BasicClient;
    use oauth2::{ClientId, ClientSecret, Scope, TokenResponse, TokenUrl};
    let app = spawn_app().await;
    app.create_account(ALICE, "a-long-password").await;
    let (id, secret) = add_client(&app, &["Nightly job", "--service", "--owner", ALICE]);
    let client = BasicClient::new(ClientId::new(id))
        .set_client_secret(ClientSecret::new(secret))
        .set_token_uri(TokenUrl::new(app.url("/oauth/token")).unwrap());
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let token = client
        .exchange_client_credentials()
        .add_scope(Scope::new("mcp:read".into()))
        .request_async(&http)
        .await
        .unwrap();
    assert!(token.refresh_token().is_none());
    assert_eq!(token.scopes().unwrap()[0].as_str(), "mcp:read");
    let listed = crate::mcp::call(
        &app,
        token.access_token().secret(),
        "list_projects",
        json!({}),
    )
    .await;
    ok(&listed);
}
