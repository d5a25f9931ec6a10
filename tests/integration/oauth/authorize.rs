//! The authorization endpoint: error pages, redirects, consent, prompt and redirect-URI matching.

use super::*;

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
