//! The device authorization grant (RFC 8628): `POST /oauth/device_authorization`, the person's
//! `/device` page and consent, and the client's polls at the token endpoint.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, hidden_input, spawn_app, spawn_instance};
use crate::mcp::{call, ok};
use crate::oauth_helpers::{REDIRECT, access_token_live, register_public, signed_in_browser};

const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";

/// Registers a client of the device grant alone (no redirect URI): public (`none`) or with a
/// secret (`client_secret_basic`). Returns (`client_id`, `client_secret`).
async fn register_device_client(app: &TestApp, method: &str) -> (String, Option<String>) {
    let r = app
        .client
        .post(app.url("/oauth/register"))
        .json(&json!({
            "grant_types": [DEVICE_GRANT],
            "token_endpoint_auth_method": method,
            "client_name": "Test Client CLI",
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let body: Value = r.json().await.unwrap();
    // RFC 7591 §2: the device grant implies the refresh token; nothing is redirected to.
    assert_eq!(body["grant_types"], json!([DEVICE_GRANT, "refresh_token"]));
    assert_eq!(body["redirect_uris"], json!([]));
    assert_eq!(body["response_types"], json!([]));
    (
        body["client_id"].as_str().unwrap().to_string(),
        body["client_secret"].as_str().map(str::to_string),
    )
}

/// `POST /oauth/device_authorization` on `app` with `params`; (status, body).
async fn start(
    app: &TestApp,
    client_id: &str,
    secret: Option<&str>,
    params: &[(&str, &str)],
) -> (StatusCode, Value) {
    let mut form: Vec<(&str, &str)> = params.to_vec();
    let mut r = app.client.post(app.url("/oauth/device_authorization"));
    match secret {
        Some(s) => r = r.basic_auth(client_id, Some(s)),
        None => form.push(("client_id", client_id)),
    }
    let r = r.form(&form).send().await.unwrap();
    let status = r.status();
    if status == StatusCode::OK {
        assert_eq!(r.headers()["cache-control"], "no-store");
    }
    (status, r.json().await.unwrap())
}

/// A poll at the token endpoint of `app`; (status, body).
async fn poll(
    app: &TestApp,
    client_id: &str,
    secret: Option<&str>,
    device_code: &str,
) -> (StatusCode, Value) {
    let mut form = vec![("grant_type", DEVICE_GRANT), ("device_code", device_code)];
    let mut r = app.client.post(app.url("/oauth/token"));
    match secret {
        Some(s) => r = r.basic_auth(client_id, Some(s)),
        None => form.push(("client_id", client_id)),
    }
    let r = r.form(&form).send().await.unwrap();
    (r.status(), r.json().await.unwrap())
}

/// Types `user_code` at `/device` on `app` in a signed-in `browser`; returns the response.
async fn enter_code(
    app: &TestApp,
    browser: &reqwest::Client,
    user_code: &str,
) -> reqwest::Response {
    let page = browser
        .get(app.url("/device"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = hidden_input(&page, "csrf_token").expect("the code form");
    browser
        .post(app.url("/device"))
        .form(&[("csrf_token", csrf.as_str()), ("user_code", user_code)])
        .send()
        .await
        .unwrap()
}

/// Types `user_code` and answers the consent page with `decision`; returns the final page.
async fn answer(
    app: &TestApp,
    browser: &reqwest::Client,
    user_code: &str,
    decision: &str,
) -> (StatusCode, String) {
    let r = enter_code(app, browser, user_code).await;
    assert_eq!(r.status(), StatusCode::OK, "the consent page");
    let page = r.text().await.unwrap();
    assert!(page.contains("Test Client CLI"), "names the client: {page}");
    let csrf = hidden_input(&page, "csrf_token").unwrap();
    let request = hidden_input(&page, "request").unwrap();
    let r = browser
        .post(app.url("/oauth/authorize/decision"))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("request", request.as_str()),
            ("decision", decision),
        ])
        .send()
        .await
        .unwrap();
    (r.status(), r.text().await.unwrap())
}

fn err(body: &Value) -> &str {
    body["error"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn a_public_device_client_gets_tokens_after_the_person_approves_on_the_consent_page() {
    let app = spawn_app().await;
    let (client_id, _) = register_device_client(&app, "none").await;
    let (status, started) = start(&app, &client_id, None, &[("scope", "mcp:read")]).await;
    assert_eq!(status, StatusCode::OK, "{started}");
    // RFC 8628 §3.2.
    let user_code = started["user_code"].as_str().unwrap().to_string();
    let device_code = started["device_code"].as_str().unwrap().to_string();
    assert_eq!(started["verification_uri"], app.url("/device"));
    assert_eq!(
        started["verification_uri_complete"],
        format!("{}?user_code={user_code}", app.url("/device"))
    );
    assert_eq!(started["expires_in"], 600);
    assert_eq!(started["interval"], 5);
    assert_eq!(user_code.len(), 9);
    assert!(
        user_code
            .chars()
            .all(|c| c == '-' || "BCDFGHJKLMNPQRSTVWXZ".contains(c)),
        "{user_code}"
    );

    let (status, body) = poll(&app, &client_id, None, &device_code).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(err(&body), "authorization_pending");

    // The person follows verification_uri_complete: sign-in first, then the code is filled in.
    let browser = signed_in_browser(&app).await;
    let anonymous = crate::helpers::new_client();
    let r = anonymous
        .get(started["verification_uri_complete"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let to = r.headers()["location"].to_str().unwrap();
    assert!(
        to.starts_with("/signin?next=%2Fdevice%3Fuser_code%3D"),
        "{to}"
    );
    let page = browser
        .get(started["verification_uri_complete"].as_str().unwrap())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains(&format!("value=\"{user_code}\"")), "{page}");

    // Typed in lower case without the dash; the consent page repeats the code.
    let typed = user_code.replace('-', "").to_lowercase();
    let r = enter_code(&app, &browser, &typed).await;
    assert_eq!(r.status(), StatusCode::OK);
    let page = r.text().await.unwrap();
    assert!(page.contains(&user_code), "the code to compare: {page}");
    assert!(page.contains("Read your projects and notes"), "{page}");
    let (status, done) = answer(&app, &browser, &user_code, "approve").await;
    assert_eq!(status, StatusCode::OK);
    assert!(done.contains("Device connected"), "{done}");

    // Approved: the next poll gets the tokens, however soon it comes.
    let (status, tokens) = poll(&app, &client_id, None, &device_code).await;
    assert_eq!(status, StatusCode::OK, "{tokens}");
    assert_eq!(tokens["token_type"], "Bearer");
    assert_eq!(tokens["scope"], "mcp:read");
    assert!(tokens["refresh_token"].is_string());
    let access = tokens["access_token"].as_str().unwrap();
    // Bound to the MCP resource like the code flow's tokens.
    let listed = call(&app, access, "list_projects", json!({})).await;
    ok(&listed);
    // Introspection names the device grant (RFC 8628 §3.4's grant type), not a code's.
    let seen = crate::token::introspect(&app, access).await;
    assert_eq!(seen["active"], true, "{seen}");
    assert_eq!(
        seen["grant_type"], "urn:ietf:params:oauth:grant-type:device_code",
        "{seen}"
    );

    // The refresh token rotates as in the code flow.
    let r = app
        .client
        .post(app.url("/oauth/token"))
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", tokens["refresh_token"].as_str().unwrap()),
            ("client_id", client_id.as_str()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // A refreshed token still descends from the device grant.
    let refreshed: Value = r.json().await.unwrap();
    let seen = crate::token::introspect(&app, refreshed["access_token"].as_str().unwrap()).await;
    assert_eq!(
        seen["grant_type"], "urn:ietf:params:oauth:grant-type:device_code",
        "{seen}"
    );

    // Audited as a redemption of the device grant.
    let detail: String = sqlx::query_scalar(
        "SELECT detail FROM audit_events WHERE event = 'code_redeemed' AND client_id = $1",
    )
    .bind(&client_id)
    .fetch_one(app.db.pool().await)
    .await
    .unwrap();
    assert_eq!(
        detail,
        format!("grant=device_code resource={}", app.config.mcp_server_url)
    );

    // The device code is single use; a replay revokes what it issued (as a code replay does).
    let (status, body) = poll(&app, &client_id, None, &device_code).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(err(&body), "invalid_grant");
    assert!(!access_token_live(&app, access).await);

    // Neither code is stored in the clear.
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT device_code_hash, user_code_hash FROM device_authorizations")
            .fetch_all(app.db.pool().await)
            .await
            .unwrap();
    assert_eq!(rows.len(), 1);
    let (device_hash, user_hash) = &rows[0];
    assert_eq!(
        device_hash,
        gatehouse::domain::secret::TokenHash::of(&device_code).as_str()
    );
    assert_eq!(
        user_hash,
        gatehouse::domain::secret::TokenHash::of(&user_code.replace('-', "")).as_str()
    );

    // The approval is a connected app, and the metadata advertises the endpoint and grant.
    let apps = browser
        .get(app.url("/apps"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(apps.contains("Test Client CLI"), "{apps}");
    assert!(apps.contains("a device (signed in with a code)"), "{apps}");
}

#[tokio::test]
async fn polls_are_answered_slow_down_access_denied_and_expired_token() {
    let app = spawn_app().await;
    let (client_id, _) = register_device_client(&app, "none").await;
    let browser = signed_in_browser(&app).await;

    // Two polls within the interval: slow_down, and the interval grows by 5 seconds.
    let (_, started) = start(&app, &client_id, None, &[]).await;
    let device_code = started["device_code"].as_str().unwrap();
    let (_, first) = poll(&app, &client_id, None, device_code).await;
    assert_eq!(err(&first), "authorization_pending");
    let (status, second) = poll(&app, &client_id, None, device_code).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(err(&second), "slow_down", "{second}");
    assert!(
        second["error_description"]
            .as_str()
            .unwrap()
            .contains("10 seconds"),
        "{second}"
    );
    let interval: i64 = sqlx::query_scalar("SELECT poll_interval FROM device_authorizations")
        .fetch_one(app.db.pool().await)
        .await
        .unwrap();
    assert_eq!(interval, 10);

    // Denied on the consent page: access_denied.
    let (status, done) = answer(
        &app,
        &browser,
        started["user_code"].as_str().unwrap(),
        "deny",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(done.contains("Access denied"), "{done}");
    let (status, body) = poll(&app, &client_id, None, device_code).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(err(&body), "access_denied");
    // An answered code cannot be typed again.
    let r = enter_code(&app, &browser, started["user_code"].as_str().unwrap()).await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().await.unwrap().contains("not valid"));

    // Past its lifetime: expired_token, and its user code leads nowhere.
    let (_, late) = start(&app, &client_id, None, &[]).await;
    let hash = gatehouse::domain::secret::TokenHash::of(late["device_code"].as_str().unwrap());
    sqlx::query("UPDATE device_authorizations SET expires_at = $1 WHERE device_code_hash = $2")
        .bind(gatehouse::store::now() - 1)
        .bind(hash.as_str())
        .execute(app.db.pool().await)
        .await
        .unwrap();
    let (status, body) = poll(
        &app,
        &client_id,
        None,
        late["device_code"].as_str().unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(err(&body), "expired_token");
    let r = enter_code(&app, &browser, late["user_code"].as_str().unwrap()).await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn refusals_of_the_device_endpoints() {
    let app = spawn_app().await;
    let (client_id, _) = register_device_client(&app, "none").await;

    // A client registered for the code flow alone may not start a device authorization.
    let code_client = register_public(&app, &[REDIRECT]).await;
    let (status, body) = start(&app, &code_client, None, &[]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(err(&body), "unauthorized_client");
    // Nor poll with the device grant.
    let (status, body) = poll(&app, &code_client, None, "gate_dc_x").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(err(&body), "unauthorized_client");

    // Scope and resource follow the authorization endpoint's rules.
    let (status, body) = start(&app, &client_id, None, &[("scope", "mcp:read bad\"scope")]).await;
    assert_eq!(
        (status, err(&body)),
        (StatusCode::BAD_REQUEST, "invalid_scope"),
        "{body}"
    );
    let (status, body) = start(
        &app,
        &client_id,
        None,
        &[("resource", "https://elsewhere.example/mcp")],
    )
    .await;
    assert_eq!(
        (status, err(&body)),
        (StatusCode::BAD_REQUEST, "invalid_target"),
        "{body}"
    );
    // An unknown client: invalid_client.
    let (status, body) = start(&app, "gc_unknown", None, &[]).await;
    assert_eq!(
        (status, err(&body)),
        (StatusCode::UNAUTHORIZED, "invalid_client")
    );

    // An unknown device code, a missing one, and another client's: invalid_grant / request.
    let (status, body) = poll(&app, &client_id, None, "gate_dc_unknown").await;
    assert_eq!(
        (status, err(&body)),
        (StatusCode::BAD_REQUEST, "invalid_grant")
    );
    let r = app
        .client
        .post(app.url("/oauth/token"))
        .form(&[
            ("grant_type", DEVICE_GRANT),
            ("client_id", client_id.as_str()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(err(&r.json::<Value>().await.unwrap()), "invalid_request");
    let (other, _) = register_device_client(&app, "none").await;
    let (_, started) = start(&app, &client_id, None, &[]).await;
    let (status, body) = poll(&app, &other, None, started["device_code"].as_str().unwrap()).await;
    assert_eq!(
        (status, err(&body)),
        (StatusCode::BAD_REQUEST, "invalid_grant")
    );

    // A registration of neither grant is refused.
    let r = app
        .client
        .post(app.url("/oauth/register"))
        .json(&json!({"grant_types": ["refresh_token"], "token_endpoint_auth_method": "none"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn user_code_guessing_is_limited_per_account() {
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    // A malformed code costs no attempt.
    let r = enter_code(&app, &browser, "AEIO-1234").await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    for i in 0..10 {
        let r = enter_code(&app, &browser, "BCDF-GHJK").await;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "attempt {i}");
    }
    let r = enter_code(&app, &browser, "BCDF-GHJK").await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(r.headers().contains_key("retry-after"));
}

#[tokio::test]
async fn a_confidential_device_client_authenticates_at_both_endpoints() {
    let app = spawn_app().await;
    let (client_id, secret) = register_device_client(&app, "client_secret_basic").await;
    let secret = secret.expect("a client secret");
    // Without its secret it is not authenticated.
    let (status, body) = start(&app, &client_id, None, &[]).await;
    assert_eq!(
        (status, err(&body)),
        (StatusCode::UNAUTHORIZED, "invalid_client")
    );
    let (status, started) = start(&app, &client_id, Some(&secret), &[]).await;
    assert_eq!(status, StatusCode::OK, "{started}");
    let browser = signed_in_browser(&app).await;
    let (status, _) = answer(
        &app,
        &browser,
        started["user_code"].as_str().unwrap(),
        "approve",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let device_code = started["device_code"].as_str().unwrap();
    let (status, body) = poll(&app, &client_id, Some("wrong"), device_code).await;
    assert_eq!(
        (status, err(&body)),
        (StatusCode::UNAUTHORIZED, "invalid_client")
    );
    let (status, tokens) = poll(&app, &client_id, Some(&secret), device_code).await;
    assert_eq!(status, StatusCode::OK, "{tokens}");
    assert_eq!(tokens["scope"], "mcp:read mcp:write");
}

#[tokio::test]
async fn a_device_code_started_on_one_instance_is_approved_and_redeemed_on_another() {
    let one = spawn_app().await;
    let mcp = one.config.mcp_server_url.clone();
    let issuer = one.config.issuer.clone();
    let two = spawn_instance(&one, |v| {
        v.insert("MCP_SERVER_URL".into(), mcp);
        v.insert("GATEHOUSE_ISSUER".into(), issuer);
    })
    .await;
    let (client_id, _) = register_device_client(&one, "none").await;
    let (_, started) = start(&one, &client_id, None, &[]).await;
    let device_code = started["device_code"].as_str().unwrap();
    // The person answers on the other instance.
    let browser = signed_in_browser(&two).await;
    let (status, _) = answer(
        &two,
        &browser,
        started["user_code"].as_str().unwrap(),
        "approve",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, tokens) = poll(&one, &client_id, None, device_code).await;
    assert_eq!(status, StatusCode::OK, "{tokens}");
    // Used once across both.
    let (status, body) = poll(&two, &client_id, None, device_code).await;
    assert_eq!(
        (status, err(&body)),
        (StatusCode::BAD_REQUEST, "invalid_grant")
    );
}

#[tokio::test]
async fn an_unused_device_client_expires_and_one_with_a_pending_code_stays() {
    let app = spawn_app().await;
    let (unused, _) = register_device_client(&app, "none").await;
    let (waiting, _) = register_device_client(&app, "none").await;
    let (status, _) = start(&app, &waiting, None, &[]).await;
    assert_eq!(status, StatusCode::OK);
    let now = gatehouse::store::now();
    assert_eq!(
        app.store.expire_unused_clients(now + 1, now).await.unwrap(),
        1
    );
    assert!(app.store.client(&unused).await.unwrap().is_none());
    assert!(app.store.client(&waiting).await.unwrap().is_some());
}

#[tokio::test]
async fn an_approval_revoked_on_connected_apps_before_the_poll_issues_nothing() {
    let app = spawn_app().await;
    let (client_id, _) = register_device_client(&app, "none").await;
    let (_, started) = start(&app, &client_id, None, &[]).await;
    let browser = signed_in_browser(&app).await;
    let (status, _) = answer(
        &app,
        &browser,
        started["user_code"].as_str().unwrap(),
        "approve",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    crate::oauth_helpers::revoke_on_apps_page(&app, &browser).await;
    let (status, body) = poll(
        &app,
        &client_id,
        None,
        started["device_code"].as_str().unwrap(),
    )
    .await;
    assert_eq!(
        (status, err(&body)),
        (StatusCode::BAD_REQUEST, "invalid_grant"),
        "{body}"
    );
    // The redemption is audited with its grant when it succeeds; this one was refused.
    let events: Vec<(String, String)> =
        sqlx::query_as("SELECT event, outcome FROM audit_events WHERE client_id = $1 ORDER BY id")
            .bind(&client_id)
            .fetch_all(app.db.pool().await)
            .await
            .unwrap();
    assert!(
        events
            .iter()
            .any(|(e, o)| e == "code_refused" && o == "denied"),
        "{events:?}"
    );
    assert!(
        !events.iter().any(|(e, _)| e == "code_redeemed"),
        "{events:?}"
    );
}

/// The `oauth2` crate's device flow (RFC 8628), an independent client: it asks for a device
/// code, polls (first `authorization_pending`, then, after the person approved, the tokens),
/// waiting the interval the server gave, and gets a token that works on the MCP route.
#[tokio::test]
async fn the_oauth2_crates_device_flow_gets_tokens() {
    use oauth2::basic::BasicClient;
    use oauth2::{
        AuthType, ClientId, DeviceAuthorizationUrl, Scope, StandardDeviceAuthorizationResponse,
        TokenResponse, TokenUrl,
    };
    let app = spawn_app().await;
    let (client_id, _) = register_device_client(&app, "none").await;
    let client = BasicClient::new(ClientId::new(client_id))
        .set_auth_type(AuthType::RequestBody)
        .set_token_uri(TokenUrl::new(app.url("/oauth/token")).unwrap())
        .set_device_authorization_url(
            DeviceAuthorizationUrl::new(app.url("/oauth/device_authorization")).unwrap(),
        );
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let details: StandardDeviceAuthorizationResponse = client
        .exchange_device_code()
        .add_scope(Scope::new("mcp:read".into()))
        .request_async(&http)
        .await
        .unwrap();
    assert_eq!(details.interval(), std::time::Duration::from_secs(5));
    let polls = async {
        client
            .exchange_device_access_token(&details)
            .request_async(&http, tokio::time::sleep, None)
            .await
    };
    let approval = async {
        // After the first poll (answered authorization_pending), within the interval.
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let browser = signed_in_browser(&app).await;
        answer(&app, &browser, details.user_code().secret(), "approve").await
    };
    let (tokens, (status, _)) = tokio::join!(polls, approval);
    assert_eq!(status, StatusCode::OK);
    let tokens = tokens.unwrap();
    assert_eq!(
        tokens.scopes().unwrap()[0].as_str(),
        "mcp:read",
        "the scope granted"
    );
    assert!(tokens.refresh_token().is_some());
    ok(&call(
        &app,
        tokens.access_token().secret(),
        "list_projects",
        json!({}),
    )
    .await);
}
