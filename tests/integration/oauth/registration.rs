//! RFC 7591 dynamic client registration: defaults, echo, secrets and errors.

use super::*;

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

/// Regression (fuzzing, `authorize_query`; docs/reliability.md): RFC 3986 §2.1, §2.4 and
/// Appendix A make a bare `%` and a raw non-ASCII character (or a space, a double quote, a
/// backtick, `<>^{|}`) invalid in a URI. Such a redirect URI is refused in every form (private-use scheme, https, loopback
/// http) with `invalid_redirect_uri` (RFC 7591 §3.2.2); percent-encoded it is welcome, and the
/// client is then sent back to the very string it registered.
#[tokio::test]
async fn registration_refuses_redirect_uris_with_characters_rfc_3986_does_not_allow() {
    let app = spawn_app().await;
    for uri in [
        "cc:c%%W\u{FFFD}",
        "com.example.app:/cb%",
        "cursor://anysphere.cursor-retrieval/oauth/callback%4",
        "https://app.example/caf\u{e9}",
        "https://app.example/cb?x=%zz",
        "http://127.0.0.1:3000/c|b",
        "http://localhost/cb?q={x}",
    ] {
        let (s, b) = register(
            &app,
            json!({"redirect_uris": [uri], "token_endpoint_auth_method": "none"}),
        )
        .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{uri}: {b}");
        assert_eq!(b["error"], "invalid_redirect_uri", "{uri}: {b}");
        assert!(
            b["error_description"]
                .as_str()
                .unwrap()
                .contains("RFC 3986"),
            "{uri}: {b}"
        );
    }

    let registered = "HTTP://127.0.0.1:7777/caf%C3%A9/./cb?from=%7Bapp%7D";
    let client_id = register_public(&app, &[registered]).await;
    let (_, challenge) = pkce();
    let browser = signed_in_browser(&app).await;
    let loc = walk(
        &app,
        &browser,
        &authorize_url(
            &app,
            &client_id,
            &challenge,
            &[("redirect_uri", registered)],
        ),
        "approve",
    )
    .await;
    assert!(
        loc.starts_with(&format!("{registered}&code=")),
        "the registered string, then the parameters: {loc}"
    );
}
