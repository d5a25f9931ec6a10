//! The authorization server end to end: metadata, registration, authorize, token, refresh.

use crate::helpers::{new_client, spawn_app, spawn_app_with};
use crate::oauth_helpers::*;
use oauth2::basic::BasicClient;
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, CsrfToken, PkceCodeChallenge, RedirectUrl, Scope,
    TokenResponse, TokenUrl,
};
use reqwest::StatusCode;
use serde_json::{Value, json};

#[tokio::test]
async fn whole_flow_with_the_oauth2_crate_register_authorize_token_refresh_refresh() {
    let app = spawn_app().await;
    let mcp = format!("{}/mcp", app.address);
    let client_id = register_public(&app, &[REDIRECT]).await;
    let client = BasicClient::new(ClientId::new(client_id.clone()))
        .set_auth_uri(AuthUrl::new(app.url("/oauth/authorize")).unwrap())
        .set_token_uri(TokenUrl::new(app.url("/oauth/token")).unwrap())
        .set_redirect_uri(RedirectUrl::new(REDIRECT.to_string()).unwrap());
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let (auth_url, csrf) = client
        .authorize_url(CsrfToken::new_random)
        .add_scope(Scope::new("mcp:read".into()))
        .add_scope(Scope::new("mcp:write".into()))
        .set_pkce_challenge(challenge)
        .add_extra_param("resource", &mcp)
        .url();
    let browser = new_client();
    let location = walk(&app, &browser, auth_url.as_str(), "approve").await;
    assert!(location.starts_with(REDIRECT), "{location}");
    let q = query_of(&location);
    assert_eq!(&q["state"], csrf.secret(), "state echoed unchanged");
    assert_eq!(q["iss"], app.address, "RFC 9207 iss equals the issuer");
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let token = client
        .exchange_code(AuthorizationCode::new(q["code"].clone()))
        .set_pkce_verifier(verifier)
        .add_extra_param("resource", &mcp)
        .request_async(&http)
        .await
        .expect("code exchange");
    assert!(token.access_token().secret().starts_with("gate_at_"));
    assert!(
        token.access_token().secret().len() >= 8 + 43,
        "≥ 256 bits of randomness"
    );
    assert_eq!(token.expires_in().unwrap().as_secs(), 3600);
    let scopes: Vec<String> = token
        .scopes()
        .unwrap()
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(scopes, vec!["mcp:read", "mcp:write"]);
    assert!(access_token_live(&app, token.access_token().secret()).await);

    let first_refresh = token.refresh_token().unwrap().clone();
    assert!(first_refresh.secret().starts_with("gate_rt_"));
    let second = client
        .exchange_refresh_token(&first_refresh)
        .add_extra_param("resource", &mcp)
        .request_async(&http)
        .await
        .expect("first refresh");
    let second_refresh = second.refresh_token().unwrap().clone();
    assert_ne!(
        second_refresh.secret(),
        first_refresh.secret(),
        "refresh tokens rotate"
    );
    let third = client
        .exchange_refresh_token(&second_refresh)
        .request_async(&http)
        .await
        .expect("second refresh");
    assert_ne!(
        third.refresh_token().unwrap().secret(),
        second_refresh.secret()
    );
    assert!(access_token_live(&app, third.access_token().secret()).await);

    let audit = app.store.recent_audit(50).await.unwrap();
    for event in [
        "client_registered",
        "consent",
        "code_redeemed",
        "token_refreshed",
        "signin",
    ] {
        assert!(audit.iter().any(|e| e.event == event), "audit has {event}");
    }
    let all = format!("{audit:?}");
    assert!(!all.contains(token.access_token().secret()) && !all.contains(first_refresh.secret()));
}

#[tokio::test]
async fn metadata_advertises_exactly_what_is_accepted() {
    let app = spawn_app().await;
    let r = app
        .client
        .get(app.url("/.well-known/oauth-authorization-server"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let m: Value = r.json().await.unwrap();
    assert_eq!(m["issuer"], app.address);
    assert_eq!(m["authorization_endpoint"], app.url("/oauth/authorize"));
    assert_eq!(m["token_endpoint"], app.url("/oauth/token"));
    assert_eq!(m["registration_endpoint"], app.url("/oauth/register"));
    assert_eq!(m["response_types_supported"], json!(["code"]));
    assert_eq!(m["code_challenge_methods_supported"], json!(["S256"]));
    assert_eq!(
        m["grant_types_supported"],
        json!(["authorization_code", "refresh_token", "client_credentials"])
    );
    assert_eq!(
        m["token_endpoint_auth_methods_supported"],
        json!(["none", "client_secret_basic", "client_secret_post"])
    );
    assert_eq!(
        m["scopes_supported"],
        json!(["mcp:read", "mcp:write", "offline_access"])
    );
    assert_eq!(
        m["authorization_response_iss_parameter_supported"],
        json!(true)
    );
    let same: Value = app
        .client
        .get(app.url("/.well-known/mcp-configuration"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(same, m);
    let r = app
        .client
        .get(app.url("/.well-known/openai-apps-challenge"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn openai_challenge_is_served_as_plain_text_when_set() {
    let app = spawn_app_with(|v| {
        v.insert("OPENAI_APPS_CHALLENGE".into(), "challenge-token-123".into());
    })
    .await;
    let r = app
        .client
        .get(app.url("/.well-known/openai-apps-challenge"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    assert_eq!(r.text().await.unwrap(), "challenge-token-123");
}

#[tokio::test]
async fn with_oauth_off_no_oauth_route_or_document_exists() {
    let app = spawn_app_with(|v| {
        v.insert("GATEHOUSE_OAUTH".into(), "off".into());
    })
    .await;
    for path in [
        "/.well-known/oauth-authorization-server",
        "/.well-known/mcp-configuration",
        "/oauth/authorize",
    ] {
        let r = app.client.get(app.url(path)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{path}");
    }
    for path in [
        "/oauth/register",
        "/oauth/token",
        "/oauth/revoke",
        "/oauth/introspect",
    ] {
        let r = app
            .client
            .post(app.url(path))
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{path}");
    }
}

#[tokio::test]
async fn cors_preflight_on_machine_endpoints_and_none_on_pages() {
    let app = spawn_app().await;
    for path in [
        "/oauth/token",
        "/oauth/register",
        "/.well-known/oauth-authorization-server",
    ] {
        let r = app
            .client
            .request(reqwest::Method::OPTIONS, app.url(path))
            .header("origin", "https://client.example")
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type")
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{path}: {}", r.status());
        assert_eq!(r.headers()["access-control-allow-origin"], "*", "{path}");
        assert!(
            r.headers()
                .get("access-control-allow-credentials")
                .is_none()
        );
    }
    let r = app
        .client
        .get(app.url("/.well-known/oauth-authorization-server"))
        .header("origin", "https://client.example")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()["access-control-expose-headers"],
        "www-authenticate"
    );
    let r = app
        .client
        .get(app.url("/oauth/authorize?client_id=x"))
        .header("origin", "https://client.example")
        .send()
        .await
        .unwrap();
    assert!(r.headers().get("access-control-allow-origin").is_none());
}

async fn register(app: &crate::helpers::TestApp, body: Value) -> (StatusCode, Value) {
    let r = app
        .client
        .post(app.url("/oauth/register"))
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status(), r.json().await.unwrap())
}

#[tokio::test]
async fn registration_defaults_echo_and_confidential_secret() {
    let app = spawn_app().await;
    let (s, b) = register(&app, json!({"redirect_uris": ["https://app.example/cb"], "software_id": "x", "unknown_member": {"a": 1}, "resource": "ignored", "client_name": ""})).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    assert_eq!(
        b["token_endpoint_auth_method"], "client_secret_basic",
        "RFC 7591 §2 default"
    );
    assert_eq!(
        b["grant_types"],
        json!(["authorization_code", "refresh_token"])
    );
    assert_eq!(b["response_types"], json!(["code"]));
    assert_eq!(b["software_id"], "x");
    assert!(b.get("unknown_member").is_none());
    assert!(b.get("client_name").is_none(), "no empty-string fields");
    assert!(b["client_secret"].as_str().unwrap().starts_with("gate_cs_"));
    assert!(b["client_id_issued_at"].as_i64().unwrap() > 0);
    for v in b.as_object().unwrap().values() {
        assert_ne!(v, &json!(""), "no empty strings: {b}");
    }
    let stored = app
        .store
        .client(b["client_id"].as_str().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_ne!(
        stored.client_secret_hash.unwrap().as_str(),
        b["client_secret"].as_str().unwrap(),
        "stored hashed"
    );

    let (s, b) = register(&app, json!({"redirect_uris": ["cursor://anysphere.cursor-retrieval/oauth/callback", "http://localhost:33418/cb", "com.example.app:/oauth2redirect"], "token_endpoint_auth_method": "none", "application_type": "native"})).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    assert!(b.get("client_secret").is_none());
    assert_eq!(b["application_type"], "native");

    // Scope values the server does not serve are left out, not refused (RFC 7591 §3.2.1: the
    // response says what was registered); with none left, no scope is registered.
    let (s, b) = register(&app, json!({"redirect_uris": ["https://app.example/cb"], "scope": "openid mcp:read profile email"})).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    assert_eq!(b["scope"], "mcp:read");
    let (s, b) = register(
        &app,
        json!({"redirect_uris": ["https://app.example/cb"], "scope": "openid profile"}),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    assert!(b.get("scope").is_none(), "{b}");
}

#[tokio::test]
async fn registration_errors_name_the_problem() {
    let app = spawn_app().await;
    let cases = [
        (
            json!({"token_endpoint_auth_method": "none"}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["http://app.example/cb"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["https://app.example/cb#frag"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["javascript:alert(1)"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["data:text/html,hi"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["file:///etc/passwd"]}),
            "invalid_redirect_uri",
        ),
        // Port 0 is no port a native app can listen on (RFC 8252 §7.3, RFC 6335 §6).
        (
            json!({"redirect_uris": ["http://127.0.0.1:0/cb"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["http://[::1]:00/cb"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": "https://app.example/cb"}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": ["https://app.example/cb"], "token_endpoint_auth_method": "private_key_jwt"}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": ["https://app.example/cb"], "grant_types": ["implicit"]}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": ["https://app.example/cb"], "response_types": ["token"]}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": ["https://app.example/cb"], "scope": "mcp:read a\\b"}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": ["https://app.example/cb"], "client_name": "x".repeat(500)}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": ["https://app.example/cb"], "client_name": 5}),
            "invalid_client_metadata",
        ),
        (json!(["not", "an", "object"]), "invalid_client_metadata"),
        (
            json!({"redirect_uris": ["https://app.example/cb"], "client_name": "Claude\u{202e} (verified) \u{202c}"}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": ["ms-msdt:/id%20PCWDiagnostic"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["https://app.example/cb"], "application_type": "desktop"}),
            "invalid_client_metadata",
        ),
    ];
    for (body, error) in cases {
        let (s, b) = register(&app, body.clone()).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(b["error"], error, "{body} → {b}");
        assert!(!b["error_description"].as_str().unwrap().is_empty());
    }
    let r = app
        .client
        .post(app.url("/oauth/register"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"],
        "invalid_client_metadata"
    );
    let huge = json!({"redirect_uris": ["https://app.example/cb"], "pad": "x".repeat(100_000)});
    let r = app
        .client
        .post(app.url("/oauth/register"))
        .json(&huge)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"],
        "invalid_client_metadata"
    );
}

#[tokio::test]
async fn unknown_client_or_unregistered_redirect_shows_a_page_and_never_redirects() {
    let app = spawn_app().await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let (_, challenge) = pkce();
    let cases = [
        authorize_url(&app, "gc_unknown", &challenge, &[]),
        authorize_url(
            &app,
            &client_id,
            &challenge,
            &[("redirect_uri", "https://evil.example/callback")],
        ),
        authorize_url(
            &app,
            &client_id,
            &challenge,
            &[("redirect_uri", "http://localhost:7777/callback")],
        ),
        authorize_url(
            &app,
            &client_id,
            &challenge,
            &[("redirect_uri", "http://127.0.0.1:7777/callback/other")],
        ),
        authorize_url(
            &app,
            &client_id,
            &challenge,
            &[("redirect_uri", "http://127.0.0.1:7777/callback?x=1")],
        ),
        authorize_url(&app, "", &challenge, &[("client_id", "")]),
    ];
    for url in cases {
        let r = app.client.get(&url).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{url}");
        assert!(
            r.headers().get("location").is_none(),
            "never redirects: {url}"
        );
        assert!(
            r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/html")
        );
    }
}

#[tokio::test]
async fn loopback_port_may_vary_and_redirect_may_be_omitted_with_one_registered() {
    let app = spawn_app().await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let (verifier, challenge) = pkce();
    let browser = signed_in_browser(&app).await;
    let loc = walk(
        &app,
        &browser,
        &authorize_url(
            &app,
            &client_id,
            &challenge,
            &[("redirect_uri", "http://127.0.0.1:51234/callback")],
        ),
        "approve",
    )
    .await;
    assert!(loc.starts_with("http://127.0.0.1:51234/callback?"), "{loc}");
    let code = query_of(&loc)["code"].clone();
    let (s, b, _) = exchange(
        &app,
        &client_id,
        &code,
        &verifier,
        &[("redirect_uri", "http://127.0.0.1:51234/callback")],
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    // Without redirect_uri: the one registered is used.
    let (_, challenge) = pkce();
    let loc = walk(
        &app,
        &browser,
        &authorize_url(&app, &client_id, &challenge, &[("redirect_uri", "")]),
        "approve",
    )
    .await;
    assert!(loc.starts_with(REDIRECT), "{loc}");
}

#[tokio::test]
async fn request_errors_redirect_back_with_error_state_and_iss() {
    let app = spawn_app().await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let (_, challenge) = pkce();
    let mcp_slash = format!("{}/mcp/", app.address);
    let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
        (
            vec![("response_type", "token")],
            "unsupported_response_type",
        ),
        (vec![("response_type", "")], "invalid_request"),
        (vec![("code_challenge", "")], "invalid_request"),
        (vec![("code_challenge_method", "plain")], "invalid_request"),
        (vec![("code_challenge_method", "")], "invalid_request"),
        (vec![("code_challenge", "too-short")], "invalid_request"),
        (
            vec![("resource", "https://other.example/mcp")],
            "invalid_target",
        ),
        (vec![("resource", mcp_slash.as_str())], "invalid_target"),
        // A scope token with a character RFC 6749 §3.3 does not allow.
        (vec![("scope", "mcp:read a\"b")], "invalid_scope"),
    ];
    for (extra, error) in cases {
        let url = authorize_url(&app, &client_id, &challenge, &extra);
        let r = app.client.get(&url).send().await.unwrap();
        assert!(
            r.status() == StatusCode::SEE_OTHER || r.status() == StatusCode::FOUND,
            "{extra:?}"
        );
        let loc = r.headers()["location"].to_str().unwrap().to_string();
        assert!(loc.starts_with(REDIRECT), "{loc}");
        let q = query_of(&loc);
        assert_eq!(q["error"], error, "{extra:?}");
        assert_eq!(q["state"], "xyz-state");
        assert_eq!(q["iss"], app.address);
        assert!(!q["error_description"].is_empty());
    }
}

#[tokio::test]
async fn deny_returns_access_denied() {
    let app = spawn_app().await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let (_, challenge) = pkce();
    let browser = signed_in_browser(&app).await;
    let loc = walk(
        &app,
        &browser,
        &authorize_url(&app, &client_id, &challenge, &[]),
        "deny",
    )
    .await;
    let q = query_of(&loc);
    assert_eq!(q["error"], "access_denied");
    assert_eq!(q["state"], "xyz-state");
    assert_eq!(q["iss"], app.address);
    assert!(!q.contains_key("code"));
    let audit = app.store.recent_audit(10).await.unwrap();
    assert!(
        audit
            .iter()
            .any(|e| e.event == "consent" && e.outcome == "denied")
    );
}

#[tokio::test]
async fn consent_is_remembered_and_prompt_controls_the_page() {
    let app = spawn_app().await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let (_, challenge) = pkce();
    // Not signed in + prompt=none → login_required.
    let r = new_client()
        .get(authorize_url(
            &app,
            &client_id,
            &challenge,
            &[("prompt", "none")],
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(
        query_of(r.headers()["location"].to_str().unwrap())["error"],
        "login_required"
    );
    let browser = signed_in_browser(&app).await;
    // Signed in, no consent yet + prompt=none → consent_required.
    let r = browser
        .get(authorize_url(
            &app,
            &client_id,
            &challenge,
            &[("prompt", "none")],
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(
        query_of(r.headers()["location"].to_str().unwrap())["error"],
        "consent_required"
    );
    // Approve once (read only).
    let loc = walk(
        &app,
        &browser,
        &authorize_url(&app, &client_id, &challenge, &[("scope", "mcp:read")]),
        "approve",
    )
    .await;
    assert!(query_of(&loc).contains_key("code"));
    // Same scopes again: no page, straight back with a code.
    let r = browser
        .get(authorize_url(
            &app,
            &client_id,
            &challenge,
            &[("scope", "mcp:read offline_access")],
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert!(query_of(r.headers()["location"].to_str().unwrap()).contains_key("code"));
    // prompt=none now succeeds silently.
    let r = browser
        .get(authorize_url(
            &app,
            &client_id,
            &challenge,
            &[("scope", "mcp:read"), ("prompt", "none")],
        ))
        .send()
        .await
        .unwrap();
    assert!(query_of(r.headers()["location"].to_str().unwrap()).contains_key("code"));
    // Wider scopes: the page again.
    let r = browser
        .get(authorize_url(&app, &client_id, &challenge, &[]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // prompt=consent forces the page even for granted scopes.
    let r = browser
        .get(authorize_url(
            &app,
            &client_id,
            &challenge,
            &[("scope", "mcp:read"), ("prompt", "consent")],
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test]
async fn consent_page_names_client_host_and_scopes_and_needs_csrf() {
    let app = spawn_app().await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let (_, challenge) = pkce();
    let browser = signed_in_browser(&app).await;
    let r = browser
        .get(authorize_url(&app, &client_id, &challenge, &[]))
        .send()
        .await
        .unwrap();
    let page = r.text().await.unwrap();
    assert!(page.contains("Test Client"));
    assert!(page.contains("not verified"));
    assert!(page.contains("127.0.0.1:7777"));
    assert!(page.contains("Read your projects and notes"), "{page}");
    let request = crate::helpers::hidden_input(&page, "request").unwrap();
    let r = decide(&app, &browser, "forged", request.as_str(), "approve").await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert!(r.headers().get("location").is_none());
}

#[tokio::test]
async fn a_consent_request_is_answered_once_and_a_bad_choice_does_not_use_it_up() {
    let app = spawn_app().await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let (_, challenge) = pkce();
    let browser = signed_in_browser(&app).await;
    let page = |r: reqwest::Response| async move { r.text().await.unwrap() };
    let first = page(
        browser
            .get(authorize_url(&app, &client_id, &challenge, &[]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let csrf = crate::helpers::hidden_input(&first, "csrf_token").unwrap();
    let first_request = crate::helpers::hidden_input(&first, "request").unwrap();
    let r = decide(
        &app,
        &browser,
        csrf.as_str(),
        first_request.as_str(),
        "bogus",
    )
    .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let r = decide(
        &app,
        &browser,
        csrf.as_str(),
        first_request.as_str(),
        "approve",
    )
    .await;
    assert_eq!(
        r.status(),
        StatusCode::SEE_OTHER,
        "still answerable after a bad choice"
    );
    // One request submitted eight times at once is answered once: one code, seven refusals.
    let id = consent_request(&app, &browser, &client_id, &challenge).await;
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (browser, url, csrf, id) = (
            browser.clone(),
            app.url("/oauth/authorize/decision"),
            csrf.clone(),
            id.clone(),
        );
        tasks.push(tokio::spawn(async move {
            browser
                .post(url)
                .form(&[
                    ("csrf_token", csrf.as_str()),
                    ("request", id.as_str()),
                    ("decision", "approve"),
                ])
                .send()
                .await
                .unwrap()
                .status()
        }));
    }
    let mut answered = 0;
    for t in tasks {
        match t.await.unwrap() {
            StatusCode::SEE_OTHER => answered += 1,
            other => assert_eq!(other, StatusCode::BAD_REQUEST),
        }
    }
    assert_eq!(answered, 1, "one approval, one code");
    // Another account cannot answer someone else's request.
    let alice_request = consent_request(&app, &browser, &client_id, &challenge).await;
    app.create_account("bob@example.com", PASSWORD).await;
    let bob = new_client();
    app.sign_in(&bob, "bob@example.com", PASSWORD).await;
    let home = bob
        .get(app.url("/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let bob_csrf = crate::helpers::hidden_input(&home, "csrf_token").unwrap();
    let r = decide(
        &app,
        &bob,
        bob_csrf.as_str(),
        alice_request.as_str(),
        "approve",
    )
    .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    // A long state is refused without being echoed.
    let r = browser
        .get(authorize_url(
            &app,
            &client_id,
            &challenge,
            &[("state", &"s".repeat(3000))],
        ))
        .send()
        .await
        .unwrap();
    let q = query_of(r.headers()["location"].to_str().unwrap());
    assert_eq!(q["error"], "invalid_request");
    assert!(!q.contains_key("state"));
}

#[tokio::test]
async fn malformed_forms_get_an_html_error_page() {
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    for (path, body) in [
        (
            "/oauth/authorize/decision",
            "csrf_token=x&request=y&decision=approve&decision=deny",
        ),
        ("/signin", "csrf_token=x&email=a&email=b"),
        ("/apps/revoke", "consent_id=1&consent_id=2"),
    ] {
        let r = browser
            .post(app.url(path))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{path}");
        assert!(
            r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/html"),
            "{path}"
        );
    }
    let r = browser
        .post(app.url("/signin"))
        .body("{}")
        .header("content-type", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn prompt_login_asks_for_the_password_again_once() {
    let app = spawn_app().await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let (_, challenge) = pkce();
    let browser = signed_in_browser(&app).await;
    walk(
        &app,
        &browser,
        &authorize_url(&app, &client_id, &challenge, &[]),
        "approve",
    )
    .await;
    let r = browser
        .get(authorize_url(
            &app,
            &client_id,
            &challenge,
            &[("prompt", "login")],
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let signin = r.headers()["location"].to_str().unwrap().to_string();
    assert!(
        signin.starts_with("/signin?") && signin.contains("reauth=1"),
        "{signin}"
    );
    let page = browser.get(app.url(&signin)).send().await.unwrap();
    assert_eq!(
        page.status(),
        StatusCode::OK,
        "the form, although signed in"
    );
    let page = page.text().await.unwrap();
    let csrf = crate::helpers::hidden_input(&page, "csrf_token").unwrap();
    let next = crate::helpers::hidden_input(&page, "next").unwrap();
    assert!(!next.contains("login"), "asked once: {next}");
    let r = browser
        .post(app.url("/signin"))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("next", next.as_str()),
            ("email", EMAIL),
            ("password", PASSWORD),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    // Back at the request: consent is remembered, so straight to the client with a code.
    let r = browser
        .get(app.url(r.headers()["location"].to_str().unwrap()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert!(query_of(r.headers()["location"].to_str().unwrap()).contains_key("code"));
}

#[tokio::test]
async fn redirect_uris_match_after_rfc3986_normalization_through_authorize() {
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    // (registered, requested): RFC 3986 §6.2.3 empty path and default port, §6.2.2 case,
    // and the RFC 8252 §7.3 loopback port.
    let cases = [
        ("http://127.0.0.1:33418", "http://127.0.0.1:33418/"),
        ("http://127.0.0.1/", "http://127.0.0.1:54321"),
        ("https://app.example/cb", "https://App.Example:443/cb"),
        ("https://app.example", "https://app.example/"),
    ];
    for (registered, requested) in cases {
        let client_id = register_public(&app, &[registered]).await;
        let (verifier, challenge) = pkce();
        let loc = walk(
            &app,
            &browser,
            &authorize_url(&app, &client_id, &challenge, &[("redirect_uri", requested)]),
            "approve",
        )
        .await;
        let back = url::Url::parse(&loc).unwrap();
        let asked = url::Url::parse(requested).unwrap();
        assert_eq!(
            (back.scheme(), back.host_str(), back.port(), back.path()),
            (asked.scheme(), asked.host_str(), asked.port(), asked.path()),
            "{registered} / {requested} → {loc}"
        );
        let q = query_of(&loc);
        assert_eq!(q["iss"], app.address);
        let (s, b, _) = exchange(
            &app,
            &client_id,
            &q["code"],
            &verifier,
            &[("redirect_uri", requested)],
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{registered} / {requested}: {b}");
    }
    // Never looser: another host, path, port of a non-loopback host, or a prefix is refused
    // with a page, never a redirect.
    let refused = [
        ("http://127.0.0.1:33418", "http://localhost:33418/"),
        ("https://app.example/cb", "https://app.example/cb/x"),
        ("https://app.example/cb", "https://app.example:8443/cb"),
        (
            "https://app.example/cb",
            "https://app.example.evil.example/cb",
        ),
        ("https://app.example", "https://app.example/x"),
    ];
    for (registered, requested) in refused {
        let client_id = register_public(&app, &[registered]).await;
        let (_, challenge) = pkce();
        let r = browser
            .get(authorize_url(
                &app,
                &client_id,
                &challenge,
                &[("redirect_uri", requested)],
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(
            r.status(),
            StatusCode::BAD_REQUEST,
            "{registered} / {requested}"
        );
        assert!(r.headers().get("location").is_none());
    }
}

/// Opens the consent page for `url` in a signed-in `browser`; returns the page, after checking
/// it is one.
async fn consent_page(browser: &reqwest::Client, url: &str) -> String {
    let r = browser.get(url).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK, "a consent page for {url}");
    r.text().await.unwrap()
}

#[tokio::test]
async fn authorize_scope_defaults_to_the_registered_scope_and_ignores_unknown_values() {
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    let (s, reg) = register(
        &app,
        json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none",
               "client_name": "Test Client", "scope": "mcp:read"}),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{reg}");
    let read_only = reg["client_id"].as_str().unwrap().to_string();
    let any_scope = register_public(&app, &[REDIRECT]).await;
    const READ: &str = "Read your projects and notes";
    const WRITE: &str = "Create and change notes in your projects";
    // (client, requested scope or "" for none, expected grant)
    let cases = [
        (&read_only, "", "mcp:read"),
        (&read_only, "openid profile email", "mcp:read"),
        (&read_only, "openid mcp:read offline_access", "mcp:read"),
        (&any_scope, "", "mcp:read mcp:write"),
        (&any_scope, "openid profile email", "mcp:read mcp:write"),
        (&any_scope, "openid profile mcp:read", "mcp:read"),
        (&any_scope, "email mcp:write", "mcp:write"),
    ];
    for (client_id, requested, granted) in cases {
        let (verifier, challenge) = pkce();
        let url = authorize_url(
            &app,
            client_id,
            &challenge,
            &[("scope", requested), ("prompt", "consent")],
        );
        let page = consent_page(&browser, &url).await;
        assert_eq!(
            page.contains(READ),
            granted.contains("mcp:read"),
            "{requested:?} → {granted}"
        );
        assert_eq!(
            page.contains(WRITE),
            granted.contains("mcp:write"),
            "{requested:?} → {granted}"
        );
        let csrf = crate::helpers::hidden_input(&page, "csrf_token").unwrap();
        let request = crate::helpers::hidden_input(&page, "request").unwrap();
        let r = decide(&app, &browser, &csrf, &request, "approve").await;
        let q = query_of(r.headers()["location"].to_str().unwrap());
        let (s, token, _) = exchange(&app, client_id, &q["code"], &verifier, &[]).await;
        assert_eq!(s, StatusCode::OK, "{token}");
        assert_eq!(token["scope"], granted, "{requested:?}");
    }
    // A known scope the client did not register for is still refused.
    let (_, challenge) = pkce();
    let r = browser
        .get(authorize_url(
            &app,
            &read_only,
            &challenge,
            &[("scope", "mcp:write")],
        ))
        .send()
        .await
        .unwrap();
    let q = query_of(r.headers()["location"].to_str().unwrap());
    assert_eq!(q["error"], "invalid_scope");
}
