//! The route itself: methods, trailing slash, CORS, Origin and Host rules.

use super::*;

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
