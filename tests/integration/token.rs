//! The token endpoint: client authentication, code binding and replay, refresh rotation,
//! the grace window, reuse detection and revocation.

use crate::helpers::{TestApp, new_client, spawn_app, spawn_app_with};
use crate::oauth_helpers::*;
use gatehouse::domain::account::{AccountStatus, Email};
use reqwest::StatusCode;
use serde_json::{Value, json};

#[tokio::test]
async fn responses_are_no_store_and_errors_have_the_rfc_shape() {
    let app = spawn_app().await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let (code, verifier) = code_for(&app, &client_id).await;
    let (s, body, h) = exchange(&app, &client_id, &code, &verifier, &[]).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(h["cache-control"], "no-store");
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["expires_in"], 3600);
    assert_eq!(body["scope"], "mcp:read mcp:write");
    let (s, body, h) = exchange(&app, &client_id, "gate_ac_nope", &verifier, &[]).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(h["cache-control"], "no-store");
    assert_eq!(body["error"], "invalid_grant");
    assert!(body["error_description"].is_string());
    let r = app
        .client
        .post(app.url("/oauth/token"))
        .form(&[
            ("grant_type", "password"),
            ("client_id", client_id.as_str()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"],
        "unsupported_grant_type"
    );
    let r = app
        .client
        .post(app.url("/oauth/token"))
        .json(&json!({"grant_type": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(r.json::<Value>().await.unwrap()["error"], "invalid_request");
}

#[tokio::test]
async fn client_authentication_as_registered() {
    let app = spawn_app().await;
    let (s, b, _) = exchange(&app, "gc_unknown", "gate_ac_x", "v", &[]).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert_eq!(b["error"], "invalid_client");
    // A confidential client (client_secret_basic).
    let reg: Value = app
        .client
        .post(app.url("/oauth/register"))
        .json(&json!({"redirect_uris": [REDIRECT], "client_name": "Test Client"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = reg["client_id"].as_str().unwrap().to_string();
    let secret = reg["client_secret"].as_str().unwrap().to_string();
    let (code, verifier) = code_for(&app, &id).await;
    let form = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("code_verifier", verifier.as_str()),
        ("redirect_uri", REDIRECT),
    ];
    let wrong = app
        .client
        .post(app.url("/oauth/token"))
        .basic_auth(&id, Some("gate_cs_wrong"))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    assert!(
        wrong.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Basic")
    );
    assert_eq!(
        wrong.json::<Value>().await.unwrap()["error"],
        "invalid_client"
    );
    // A wrong secret in the body is refused the same way.
    let mut post_form = form.to_vec();
    post_form.push(("client_id", &id));
    post_form.push(("client_secret", "gate_cs_wrong"));
    let r = app
        .client
        .post(app.url("/oauth/token"))
        .form(&post_form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    // A public client cannot pass for a confidential one, nor the reverse.
    let public = register_public(&app, &[REDIRECT]).await;
    let r = app
        .client
        .post(app.url("/oauth/token"))
        .basic_auth(&public, Some(&secret))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    // No secret at all for a confidential client.
    let mut none_form = form.to_vec();
    none_form.push(("client_id", &id));
    let r = app
        .client
        .post(app.url("/oauth/token"))
        .form(&none_form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    // The right way works, and the failed attempts did not burn the code.
    let ok = app
        .client
        .post(app.url("/oauth/token"))
        .basic_auth(&id, Some(&secret))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
}

#[tokio::test]
async fn code_is_bound_to_client_redirect_verifier_and_resource() {
    let app = spawn_app().await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let other = register_public(&app, &[REDIRECT]).await;
    let (code, verifier) = code_for(&app, &client_id).await;
    let (s, b, _) = exchange(&app, &other, &code, &verifier, &[]).await;
    assert_eq!(
        (s, b["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant")),
        "other client"
    );
    let (_, b, _) = exchange(
        &app,
        &client_id,
        &code,
        &verifier,
        &[("redirect_uri", "http://127.0.0.1:7777/other")],
    )
    .await;
    assert_eq!(b["error"], "invalid_grant", "redirect mismatch");
    let (_, b, _) = exchange(&app, &client_id, &code, &pkce().0, &[]).await;
    assert_eq!(b["error"], "invalid_grant", "wrong verifier");
    let (_, b, _) = exchange(&app, &client_id, &code, &verifier, &[("code_verifier", "")]).await;
    assert_eq!(
        b["error"], "invalid_grant",
        "missing verifier (OAuth 2.1 §4.1.3, RFC 7636 §4.6)"
    );
    let (_, b, _) = exchange(
        &app,
        &client_id,
        &code,
        &verifier,
        &[("resource", "https://other.example/mcp")],
    )
    .await;
    assert_eq!(b["error"], "invalid_target");
    let mcp = format!("{}/mcp", app.address);
    let (s, b, _) = exchange(&app, &client_id, &code, &verifier, &[("resource", &mcp)]).await;
    assert_eq!(s, StatusCode::OK, "{b}");
}

#[tokio::test]
async fn code_replay_fails_and_revokes_what_the_code_issued() {
    let app = spawn_app().await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let (code, verifier) = code_for(&app, &client_id).await;
    let (s, first, _) = exchange(&app, &client_id, &code, &verifier, &[]).await;
    assert_eq!(s, StatusCode::OK);
    let access = first["access_token"].as_str().unwrap();
    assert!(access_token_live(&app, access).await);
    let (s, b, _) = exchange(&app, &client_id, &code, &verifier, &[]).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(b["error"], "invalid_grant");
    assert!(
        !access_token_live(&app, access).await,
        "replay revokes the issued access token"
    );
    let (s, b) = refresh(
        &app,
        &client_id,
        first["refresh_token"].as_str().unwrap(),
        &[],
    )
    .await;
    assert_eq!(
        (s, b["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant"))
    );
    let audit = app.store.recent_audit(30).await.unwrap();
    assert!(audit.iter().any(|e| e.event == "code_replay"));
    assert!(audit.iter().any(|e| e.event == "family_revoked"));
}

#[tokio::test]
async fn twenty_parallel_refreshes_get_one_identical_successor() {
    let app = spawn_app().await;
    let (client_id, grant) = full_grant(&app).await;
    let rt = grant["refresh_token"].as_str().unwrap().to_string();
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let (url, id, rt) = (app.url("/oauth/token"), client_id.clone(), rt.clone());
        tasks.push(tokio::spawn(async move {
            let r = new_client()
                .post(url)
                .form(&[
                    ("grant_type", "refresh_token"),
                    ("refresh_token", rt.as_str()),
                    ("client_id", id.as_str()),
                ])
                .send()
                .await
                .unwrap();
            (r.status(), r.json::<Value>().await.unwrap())
        }));
    }
    let mut successors = std::collections::HashSet::new();
    let mut accesses = std::collections::HashSet::new();
    for t in tasks {
        let (s, b) = t.await.unwrap();
        assert_eq!(s, StatusCode::OK, "{b}");
        successors.insert(b["refresh_token"].as_str().unwrap().to_string());
        accesses.insert(b["access_token"].as_str().unwrap().to_string());
    }
    assert_eq!(successors.len(), 1, "one successor for all");
    assert_eq!(accesses.len(), 1);
    let successor = successors.into_iter().next().unwrap();
    assert_ne!(successor, rt);
    // The successor works; once it is used, the old token is reuse and kills the family.
    let (s, next) = refresh(&app, &client_id, &successor, &[]).await;
    assert_eq!(s, StatusCode::OK);
    let (s, b) = refresh(&app, &client_id, &rt, &[]).await;
    assert_eq!(
        (s, b["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant"))
    );
    assert!(!access_token_live(&app, next["access_token"].as_str().unwrap()).await);
    let (s, _) = refresh(
        &app,
        &client_id,
        next["refresh_token"].as_str().unwrap(),
        &[],
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "the family is revoked");
    let audit = app.store.recent_audit(60).await.unwrap();
    assert!(audit.iter().any(|e| e.event == "refresh_reuse"));
}

#[tokio::test]
async fn rotated_token_after_the_window_revokes_the_family_and_its_access_tokens() {
    let app = spawn_app_with(|v| {
        v.insert("GATEHOUSE_REFRESH_GRACE_SECONDS".into(), "0".into());
    })
    .await;
    let (client_id, grant) = full_grant(&app).await;
    let rt = grant["refresh_token"].as_str().unwrap();
    let (s, next) = refresh(&app, &client_id, rt, &[]).await;
    assert_eq!(s, StatusCode::OK);
    let live = next["access_token"].as_str().unwrap();
    assert!(access_token_live(&app, live).await);
    let (s, b) = refresh(&app, &client_id, rt, &[]).await;
    assert_eq!(
        (s, b["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant"))
    );
    assert!(
        !access_token_live(&app, live).await,
        "family access tokens revoked at once"
    );
    assert!(!access_token_live(&app, grant["access_token"].as_str().unwrap()).await);
    let (s, _) = refresh(
        &app,
        &client_id,
        next["refresh_token"].as_str().unwrap(),
        &[],
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn failed_refresh_validation_leaves_the_token_usable() {
    let app = spawn_app().await;
    let (client_id, grant) = full_grant(&app).await;
    let other = register_public(&app, &[REDIRECT]).await;
    let rt = grant["refresh_token"].as_str().unwrap();
    let (s, b) = refresh(
        &app,
        &client_id,
        rt,
        &[("resource", "https://other.example/mcp")],
    )
    .await;
    assert_eq!(
        (s, b["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_target"))
    );
    let (_, b) = refresh(&app, &other, rt, &[]).await;
    assert_eq!(b["error"], "invalid_grant", "another client");
    let (_, b) = refresh(&app, &client_id, rt, &[("scope", "mcp:read admin")]).await;
    assert_eq!(b["error"], "invalid_scope");
    let (s, b) = refresh(&app, &client_id, rt, &[("scope", "offline_access")]).await;
    assert_eq!(s, StatusCode::OK, "still usable: {b}");
    assert_eq!(
        b["scope"], "mcp:read mcp:write",
        "offline_access alone keeps the granted scopes, never none"
    );
    let (s, b) = refresh(
        &app,
        &client_id,
        b["refresh_token"].as_str().unwrap(),
        &[("scope", "mcp:read")],
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["scope"], "mcp:read", "down-scoped refresh");
}

#[tokio::test]
async fn disabled_accounts_and_revoked_consents_cannot_refresh() {
    let app = spawn_app().await;
    let (client_id, grant) = full_grant(&app).await;
    app.store
        .set_account_status(&Email::parse(EMAIL).unwrap(), AccountStatus::Disabled)
        .await
        .unwrap();
    assert!(!access_token_live(&app, grant["access_token"].as_str().unwrap()).await);
    let (_, b) = refresh(
        &app,
        &client_id,
        grant["refresh_token"].as_str().unwrap(),
        &[],
    )
    .await;
    assert_eq!(b["error"], "invalid_grant");
    app.store
        .set_account_status(&Email::parse(EMAIL).unwrap(), AccountStatus::Active)
        .await
        .unwrap();
    // Revoke through the connected-apps page.
    let browser = signed_in_browser(&app).await;
    let page = browser
        .get(app.url("/apps"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("Test Client"));
    let csrf = crate::helpers::hidden_input(&page, "csrf_token").unwrap();
    let consent = crate::helpers::hidden_input(&page, "consent_id").unwrap();
    let r = browser
        .post(app.url("/apps/revoke"))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("consent_id", consent.as_str()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert!(!access_token_live(&app, grant["access_token"].as_str().unwrap()).await);
    let (_, b) = refresh(
        &app,
        &client_id,
        grant["refresh_token"].as_str().unwrap(),
        &[],
    )
    .await;
    assert_eq!(b["error"], "invalid_grant");
    let page = browser
        .get(app.url("/apps"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // The app is gone from the list (no revoke form names its grant); the notice says so.
    assert!(crate::helpers::hidden_input(&page, "consent_id").is_none());
    assert!(page.contains("Test Client can no longer use your account."));
}

#[tokio::test]
async fn revocation_endpoint_revokes_the_family() {
    let app = spawn_app().await;
    let (client_id, grant) = full_grant(&app).await;
    let r = app
        .client
        .post(app.url("/oauth/revoke"))
        .form(&[
            ("token", grant["refresh_token"].as_str().unwrap()),
            ("client_id", client_id.as_str()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(!access_token_live(&app, grant["access_token"].as_str().unwrap()).await);
    let r = app
        .client
        .post(app.url("/oauth/revoke"))
        .form(&[
            ("token", "gate_rt_unknown"),
            ("client_id", client_id.as_str()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::OK,
        "unknown tokens answer 200 (RFC 7009 §2.2)"
    );
}

#[tokio::test]
async fn introspection_for_a_service_client_created_on_the_command_line() {
    let app = spawn_app().await;
    let (client_id, grant) = full_grant(&app).await;
    let (svc_id, svc_secret) = introspection_client(&app);
    let access = grant["access_token"].as_str().unwrap();
    let r = app
        .client
        .post(app.url("/oauth/introspect"))
        .basic_auth(&svc_id, Some(&svc_secret))
        .form(&[("token", access)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["active"], true);
    assert_eq!(v["client_id"], client_id.as_str());
    assert_eq!(v["aud"], format!("{}/mcp", app.address));
    assert_eq!(v["iss"], app.address);
    assert_eq!(v["scope"], "mcp:read mcp:write");
    assert_eq!(v["token_type"], "Bearer");
    assert_eq!(
        v["exp"].as_i64().unwrap() - v["iat"].as_i64().unwrap(),
        3600
    );
    assert!(v["sub"].is_string());
    // A public client may not introspect.
    let r = app
        .client
        .post(app.url("/oauth/introspect"))
        .form(&[("token", access), ("client_id", client_id.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"],
        "unauthorized_client"
    );
    // A wrong secret is invalid_client.
    let r = app
        .client
        .post(app.url("/oauth/introspect"))
        .basic_auth(&svc_id, Some("gate_cs_wrong"))
        .form(&[("token", access)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    // After revocation the token is inactive.
    app.client
        .post(app.url("/oauth/revoke"))
        .form(&[("token", access), ("client_id", client_id.as_str())])
        .send()
        .await
        .unwrap();
    let v: Value = app
        .client
        .post(app.url("/oauth/introspect"))
        .basic_auth(&svc_id, Some(&svc_secret))
        .form(&[("token", access)])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v, json!({"active": false}));
}

#[tokio::test]
async fn a_client_registered_for_authorization_code_alone_can_refresh() {
    let app = spawn_app().await;
    let reg: Value = app
        .client
        .post(app.url("/oauth/register"))
        .json(&json!({
            "redirect_uris": [REDIRECT],
            "token_endpoint_auth_method": "none",
            "client_name": "Test Client",
            "grant_types": ["authorization_code"],
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        reg["grant_types"],
        json!(["authorization_code", "refresh_token"]),
        "refresh_token is implied by authorization_code and said so"
    );
    let client_id = reg["client_id"].as_str().unwrap();
    let (code, verifier) = code_for(&app, client_id).await;
    let (s, grant, _) = exchange(&app, client_id, &code, &verifier, &[]).await;
    assert_eq!(s, StatusCode::OK, "{grant}");
    let (s, refreshed) = refresh(
        &app,
        client_id,
        grant["refresh_token"].as_str().unwrap(),
        &[],
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{refreshed}");
    assert!(access_token_live(&app, refreshed["access_token"].as_str().unwrap()).await);

    // A client stored before this rule (its grant types say authorization_code alone) refreshes
    // too: the token endpoint applies the same implication.
    let stored = gatehouse::store::oauth::ClientRecord {
        client_id: "gc_registered_earlier".into(),
        client_secret_hash: None,
        token_endpoint_auth_method: "none".into(),
        client_name: Some("Test Client".into()),
        redirect_uris: vec![REDIRECT.into()],
        grant_types: vec!["authorization_code".into()],
        scope: None,
        metadata: json!({}),
        can_introspect: false,
        created_at: gatehouse::store::now(),
    };
    app.store.create_client(&stored).await.unwrap();
    let (code, verifier) = code_for(&app, &stored.client_id).await;
    let (s, grant, _) = exchange(&app, &stored.client_id, &code, &verifier, &[]).await;
    assert_eq!(s, StatusCode::OK, "{grant}");
    let (s, refreshed) = refresh(
        &app,
        &stored.client_id,
        grant["refresh_token"].as_str().unwrap(),
        &[],
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{refreshed}");
}

#[tokio::test]
async fn a_code_issued_with_a_challenge_needs_its_verifier() {
    let app = spawn_app().await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let (code, _) = code_for(&app, &client_id).await;
    let (s, b, _) = exchange(&app, &client_id, &code, "", &[]).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(
        b["error"], "invalid_grant",
        "OAuth 2.1 §4.1.3, RFC 7636 §4.6: {b}"
    );
    assert!(
        b["error_description"]
            .as_str()
            .unwrap()
            .contains("code_verifier"),
        "{b}"
    );
}

/// A confidential client as dynamic registration makes it (RFC 7591 default
/// `client_secret_basic`): `(client_id, client_secret)`.
async fn register_confidential(app: &TestApp) -> (String, String) {
    let reg: Value = app
        .client
        .post(app.url("/oauth/register"))
        .json(&json!({"redirect_uris": [REDIRECT], "client_name": "Test Client"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    (
        reg["client_id"].as_str().unwrap().to_string(),
        reg["client_secret"].as_str().unwrap().to_string(),
    )
}

/// A confidential client allowed to introspect, made as an operator would
/// (`gatehouse client add --introspect`): `(client_id, client_secret)`.
pub(crate) fn introspection_client(app: &TestApp) -> (String, String) {
    let (success, text, err) =
        crate::keys::gatehouse(app, &["client", "add", "Billing service", "--introspect"]);
    assert!(success, "{err}");
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .unwrap()
            .to_string()
    };
    (field("client_id"), field("client_secret"))
}

/// What introspection (RFC 7662) says of `token`, asked by a command-line introspection client.
pub(crate) async fn introspect(app: &TestApp, token: &str) -> Value {
    let (id, secret) = introspection_client(app);
    let r = app
        .client
        .post(app.url("/oauth/introspect"))
        .basic_auth(&id, Some(&secret))
        .form(&[("token", token)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    r.json().await.unwrap()
}

/// POSTs `form` to `endpoint`, authenticating `client_id` with `method` (RFC 6749 §2.3.1,
/// OAuth 2.1 §2.4): `none` puts `client_id` in the body, `client_secret_post` both
/// credentials, `client_secret_basic` an `Authorization` header whose scheme is spelled
/// `scheme` (RFC 9110 §11.1: case-insensitive).
async fn post_as(
    app: &TestApp,
    endpoint: &str,
    method: &str,
    scheme: &str,
    (client_id, secret): (&str, &str),
    form: &[(&str, &str)],
) -> reqwest::Response {
    use base64::Engine;
    let mut form = form.to_vec();
    let mut request = app.client.post(endpoint);
    match method {
        "none" => form.push(("client_id", client_id)),
        "client_secret_post" => {
            form.push(("client_id", client_id));
            form.push(("client_secret", secret));
        }
        "client_secret_basic" => {
            let encode =
                |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
            let credentials = base64::engine::general_purpose::STANDARD.encode(format!(
                "{}:{}",
                encode(client_id),
                encode(secret)
            ));
            request = request.header("authorization", format!("{scheme} {credentials}"));
        }
        other => panic!("advertised method {other} has no test"),
    }
    request.form(&form).send().await.unwrap()
}

#[tokio::test]
async fn every_advertised_client_authentication_method_is_accepted() {
    let app = spawn_app().await;
    let metadata: Value = app
        .client
        .get(app.url("/.well-known/oauth-authorization-server"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let confidential = register_confidential(&app).await;
    let introspector = introspection_client(&app);
    // `private_key_jwt` needs a signed assertion per request: its acceptance at each of the
    // three endpoints is shown by `private_key_jwt::a_service_client_with_a_jwks_uri_…`.
    let methods = |key: &str| -> Vec<String> {
        metadata[key]
            .as_array()
            .unwrap_or_else(|| panic!("{key} advertised"))
            .iter()
            .map(|m| m.as_str().unwrap().to_string())
            .filter(|m| m != "private_key_jwt")
            .collect()
    };
    // The Basic scheme name in any case (RFC 9110 §11.1).
    let schemes = ["Basic", "BASIC", "basic", "bAsIc"];

    // Token endpoint: each method redeems a code.
    let token_endpoint = metadata["token_endpoint"].as_str().unwrap();
    for method in methods("token_endpoint_auth_methods_supported") {
        for scheme in schemes {
            let client = if method == "none" {
                (register_public(&app, &[REDIRECT]).await, String::new())
            } else {
                confidential.clone()
            };
            let (code, verifier) = code_for(&app, &client.0).await;
            let r = post_as(
                &app,
                token_endpoint,
                &method,
                scheme,
                (&client.0, &client.1),
                &[
                    ("grant_type", "authorization_code"),
                    ("code", &code),
                    ("code_verifier", &verifier),
                    ("redirect_uri", REDIRECT),
                ],
            )
            .await;
            assert_eq!(
                r.status(),
                StatusCode::OK,
                "token endpoint, {method} ({scheme})"
            );
            if method != "client_secret_basic" {
                break;
            }
        }
    }

    // Revocation endpoint: each method revokes the client's own refresh token.
    let revocation_endpoint = metadata["revocation_endpoint"].as_str().unwrap();
    for method in methods("revocation_endpoint_auth_methods_supported") {
        for scheme in schemes {
            let client = if method == "none" {
                (register_public(&app, &[REDIRECT]).await, String::new())
            } else {
                confidential.clone()
            };
            let (code, verifier) = code_for(&app, &client.0).await;
            let grant: Value = post_as(
                &app,
                token_endpoint,
                if method == "none" {
                    "none"
                } else {
                    "client_secret_basic"
                },
                "Basic",
                (&client.0, &client.1),
                &[
                    ("grant_type", "authorization_code"),
                    ("code", &code),
                    ("code_verifier", &verifier),
                    ("redirect_uri", REDIRECT),
                ],
            )
            .await
            .json()
            .await
            .unwrap();
            let access = grant["access_token"].as_str().unwrap();
            assert!(access_token_live(&app, access).await);
            let r = post_as(
                &app,
                revocation_endpoint,
                &method,
                scheme,
                (&client.0, &client.1),
                &[("token", grant["refresh_token"].as_str().unwrap())],
            )
            .await;
            assert_eq!(
                r.status(),
                StatusCode::OK,
                "revocation endpoint, {method} ({scheme})"
            );
            assert!(
                !access_token_live(&app, access).await,
                "revoked with {method} ({scheme})"
            );
            if method != "client_secret_basic" {
                break;
            }
        }
    }

    // Introspection endpoint: each method introspects a live token.
    let introspection_endpoint = metadata["introspection_endpoint"].as_str().unwrap();
    let (_, grant) = full_grant(&app).await;
    let access = grant["access_token"].as_str().unwrap();
    for method in methods("introspection_endpoint_auth_methods_supported") {
        for scheme in schemes {
            let r = post_as(
                &app,
                introspection_endpoint,
                &method,
                scheme,
                (&introspector.0, &introspector.1),
                &[("token", access)],
            )
            .await;
            assert_eq!(
                r.status(),
                StatusCode::OK,
                "introspection endpoint, {method} ({scheme})"
            );
            let v: Value = r.json().await.unwrap();
            assert_eq!(v["active"], true, "{method} ({scheme})");
            if method != "client_secret_basic" {
                break;
            }
        }
    }
}

/// Access and refresh tokens carry their issue time after their prefix (12 hex digits of
/// Unix milliseconds, then the 43 random characters); tokens of the earlier shape, without the
/// time and stored under their plain SHA-256, still authenticate and rotate.
#[tokio::test]
async fn tokens_carry_their_issue_time_and_earlier_tokens_still_work() {
    use sha2::Digest as _;
    let app = spawn_app().await;
    let (client_id, body) = full_grant(&app).await;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    for (field, prefix) in [("access_token", "gate_at_"), ("refresh_token", "gate_rt_")] {
        let token = body[field].as_str().unwrap();
        assert_eq!(token.len(), prefix.len() + 12 + 43, "{token}");
        let issued = u64::from_str_radix(&token[prefix.len()..prefix.len() + 12], 16).unwrap();
        assert!(
            now_ms.abs_diff(issued) < 60_000,
            "{issued} against {now_ms}"
        );
    }
    let sha = |s: &str| format!("{:x}", sha2::Sha256::digest(s.as_bytes()));
    let key = |s: &str| {
        gatehouse::domain::secret::Secret::from_presented(s.to_string())
            .hash()
            .as_str()
            .to_string()
    };
    // The rows of this grant, keyed as tokens of the earlier shape would have been.
    let earlier_at = format!("gate_at_{}", gatehouse::domain::secret::random_urlsafe(32));
    let earlier_rt = format!("gate_rt_{}", gatehouse::domain::secret::random_urlsafe(32));
    assert_eq!(key(&earlier_at), sha(&earlier_at));
    let pool = app.db.pool().await;
    for (table, new, old) in [
        (
            "access_tokens",
            body["access_token"].as_str().unwrap(),
            &earlier_at,
        ),
        (
            "refresh_tokens",
            body["refresh_token"].as_str().unwrap(),
            &earlier_rt,
        ),
    ] {
        let changed = sqlx::query(&format!(
            "UPDATE {table} SET token_hash = $1 WHERE token_hash = $2"
        ))
        .bind(sha(old))
        .bind(key(new))
        .execute(pool)
        .await
        .unwrap()
        .rows_affected();
        assert_eq!(changed, 1, "{table}");
    }
    assert!(access_token_live(&app, &earlier_at).await);
    let (status, rotated) = refresh(&app, &client_id, &earlier_rt, &[]).await;
    assert_eq!(status, StatusCode::OK, "{rotated}");
    let next = rotated["refresh_token"].as_str().unwrap();
    assert_eq!(next.len(), "gate_rt_".len() + 12 + 43);
    assert!(access_token_live(&app, rotated["access_token"].as_str().unwrap()).await);
}
