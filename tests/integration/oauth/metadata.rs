//! The whole flow with the `oauth2` crate, the RFC 8414 metadata, CORS and `GATEHOUSE_OAUTH=off`.

use super::*;

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
    let http = crate::helpers::client_builder()
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
    assert_eq!(
        m["device_authorization_endpoint"],
        app.url("/oauth/device_authorization")
    );
    assert_eq!(m["response_types_supported"], json!(["code"]));
    assert_eq!(m["code_challenge_methods_supported"], json!(["S256"]));
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
    assert_eq!(
        m["token_endpoint_auth_methods_supported"],
        json!([
            "none",
            "client_secret_basic",
            "client_secret_post",
            "private_key_jwt"
        ])
    );
    assert_eq!(
        m["token_endpoint_auth_signing_alg_values_supported"],
        json!(["RS256", "PS256", "ES256", "EdDSA"])
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
