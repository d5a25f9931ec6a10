//! Discovery and challenges: protected-resource metadata, 401/403 challenges, revocation reaching a live token.

use super::*;
use crate::helpers::behind_the_back;

#[tokio::test]
async fn protected_resource_metadata_at_both_urls_with_cors() {
    let app = spawn_app().await;
    let expected = json!({
        "resource": format!("{}/mcp", app.address),
        "authorization_servers": [app.address],
        "scopes_supported": ["mcp:read", "mcp:write"],
        "bearer_methods_supported": ["header"],
        "resource_name": "Gatehouse MCP server",
        "dpop_signing_alg_values_supported": ["RS256", "PS256", "ES256", "EdDSA"],
        "dpop_bound_access_tokens_required": false,
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
    behind_the_back(
        &app,
        sqlx::query(
            "UPDATE access_tokens SET audience = 'http://127.0.0.1:1/mcp' WHERE token_hash = $1",
        )
        .bind(hash.as_str())
        .execute(app.db.pool().await),
    )
    .await
    .unwrap();
    let (s, h, _) = send(modern(&app, Some(&a.token), "tools/list", json!({}))).await;
    assert_eq!(
        (s, h["www-authenticate"].to_str().unwrap()),
        (StatusCode::UNAUTHORIZED, invalid.as_str())
    );
    // …nor once expired…
    behind_the_back(
        &app,
        sqlx::query("UPDATE access_tokens SET audience = $1, expires_at = 1 WHERE token_hash = $2")
            .bind(&app.config.mcp_server_url)
            .bind(hash.as_str())
            .execute(app.db.pool().await),
    )
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
