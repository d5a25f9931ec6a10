//! Registered resources (issue "Other MCP servers use Gatehouse as their authorization
//! server"): `gatehouse resource add|list|remove` on the app's database, taken up by the running
//! server without a restart; RFC 8414 metadata lists every resource and scope.

use reqwest::StatusCode;
use serde_json::Value;

use crate::helpers::{TestApp, spawn_app};
use crate::keys::gatehouse;
use crate::mcp::modern;
use crate::oauth_helpers::*;

/// The URL of a resource server registered in these tests (loopback http is allowed).
pub(crate) const FILES: &str = "http://127.0.0.1:9/files/mcp";

/// `gatehouse resource ARGS…`, which must succeed; returns its output.
pub(crate) fn resource(app: &TestApp, args: &[&str]) -> String {
    let mut all = vec!["resource"];
    all.extend_from_slice(args);
    let (success, out, err) = gatehouse(app, &all);
    assert!(success, "{args:?}: {err}");
    out
}

/// Registers `files` at [`FILES`] with `files:read` and `files:write`; returns the output.
pub(crate) fn add_files(app: &TestApp, extra: &[&str]) -> String {
    let mut args = vec![
        "add",
        "files",
        "--url",
        FILES,
        "--scope",
        "files:read",
        "--scope-description",
        "Read your files",
        "--scope",
        "files:write",
        "--scope-description",
        "Change your files",
    ];
    args.extend_from_slice(extra);
    resource(app, &args)
}

/// A `name: value` line of a command's output.
pub(crate) fn field(out: &str, name: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
        .unwrap_or_else(|| panic!("no {name} in {out}"))
        .to_string()
}

async fn metadata(app: &TestApp) -> Value {
    let r = app
        .client
        .get(app.url("/.well-known/oauth-authorization-server"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    r.json().await.unwrap()
}

#[tokio::test]
async fn a_registered_resource_shows_in_the_running_servers_metadata_until_removed() {
    let app = spawn_app().await;
    let before = metadata(&app).await;
    assert_eq!(
        before["protected_resources"],
        serde_json::json!([app.config.mcp_server_url])
    );

    let out = add_files(&app, &["--token-ttl", "600"]);
    assert_eq!(field(&out, "url"), FILES);
    assert_eq!(field(&out, "scopes"), "files:read files:write");
    assert_eq!(field(&out, "token_ttl"), "600");
    assert_eq!(field(&out, "authorization_server"), app.config.issuer);

    // No restart: the next request sees it.
    let m = metadata(&app).await;
    assert_eq!(
        m["scopes_supported"],
        serde_json::json!([
            "mcp:read",
            "mcp:write",
            "offline_access",
            "files:read",
            "files:write"
        ])
    );
    assert_eq!(
        m["protected_resources"],
        serde_json::json!([app.config.mcp_server_url, FILES])
    );

    let list = resource(&app, &["list"]);
    let lines: Vec<&str> = list.lines().collect();
    assert!(lines[1].starts_with("built-in\t"), "{list}");
    assert!(lines[1].contains(&app.config.mcp_server_url), "{list}");
    assert!(
        lines[2].starts_with(&format!(
            "files\t{FILES}\tfiles:read files:write\topaque\t600\t-\t"
        )),
        "{list}"
    );

    let out = resource(&app, &["remove", "files"]);
    assert!(out.contains("removed resource files"), "{out}");
    assert_eq!(metadata(&app).await, before);
    let (success, _, err) = gatehouse(&app, &["resource", "remove", "files"]);
    assert!(!success);
    assert!(err.contains("no resource named files"), "{err}");
}

#[tokio::test]
async fn resource_add_refuses_what_is_not_a_resource_server() {
    let app = spawn_app().await;
    let mcp = app.config.mcp_server_url.clone();
    for (args, message) in [
        (
            vec![
                "add",
                "files",
                "--url",
                "http://files.example/mcp",
                "--scope",
                "a",
            ],
            "must use https",
        ),
        (
            vec![
                "add",
                "files",
                "--url",
                "https://files.example/mcp#x",
                "--scope",
                "a",
            ],
            "without a fragment",
        ),
        (
            vec![
                "add",
                "Files",
                "--url",
                "https://files.example/mcp",
                "--scope",
                "a",
            ],
            "resource name",
        ),
        (
            vec!["add", "files", "--url", &mcp, "--scope", "a"],
            "built-in resource",
        ),
        (
            vec![
                "add",
                "files",
                "--url",
                "https://files.example/mcp",
                "--scope",
                "offline_access",
            ],
            "offline_access is not a resource scope",
        ),
        (
            vec![
                "add",
                "files",
                "--url",
                "https://files.example/mcp",
                "--scope",
                "a",
                "--scope",
                "b",
                "--scope-description",
                "Only one",
            ],
            "one --scope-description after each --scope",
        ),
        (
            vec![
                "add",
                "files",
                "--url",
                "https://files.example/mcp",
                "--scope",
                "a",
                "--token-ttl",
                "5",
            ],
            "--token-ttl must be from 60 to 86400",
        ),
    ] {
        let (success, _, err) = gatehouse(&app, &[&["resource"][..], &args].concat());
        assert!(!success, "{args:?}");
        assert!(err.contains(message), "{args:?}: {err}");
    }
    assert!(app.store.resources().await.unwrap().is_empty());

    // One name, one URL.
    add_files(&app, &[]);
    let (success, _, err) = gatehouse(
        &app,
        &["resource", "add", "other", "--url", FILES, "--scope", "a"],
    );
    assert!(!success);
    assert!(err.contains("already registered"), "{err}");
    assert_eq!(app.store.resources().await.unwrap().len(), 1);
}

/// The MCP endpoint of `app` (the built-in resource).
fn own_mcp(app: &TestApp) -> String {
    format!("{}/mcp", app.address)
}

/// Introspects `token` with the credentials `(client_id, secret)`.
async fn introspect_with(app: &TestApp, creds: &(String, String), token: &str) -> Value {
    let r = app
        .client
        .post(app.url("/oauth/introspect"))
        .basic_auth(&creds.0, Some(&creds.1))
        .form(&[("token", token)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    r.json().await.unwrap()
}

/// Tokens for the `files` resource: authorize (`scope`), consent, exchange; returns the token
/// response.
async fn files_tokens(
    app: &TestApp,
    browser: &reqwest::Client,
    client_id: &str,
    scope: &str,
) -> Value {
    let (code, verifier) = code_in(
        app,
        browser,
        client_id,
        &[("resource", FILES), ("scope", scope)],
    )
    .await;
    let (status, body, _) =
        exchange(app, client_id, &code, &verifier, &[("resource", FILES)]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

/// Whether the MCP endpoint accepts `token` (`initialize` answered 200, not 401).
async fn mcp_accepts(app: &TestApp, token: &str) -> bool {
    let status = modern(app, Some(token), "tools/list", serde_json::json!({}))
        .send()
        .await
        .unwrap()
        .status();
    assert!(
        status == StatusCode::OK || status == StatusCode::UNAUTHORIZED,
        "{status}"
    );
    status == StatusCode::OK
}

#[tokio::test]
async fn a_grant_for_a_registered_resource_is_bound_to_it_and_remembered_for_it_alone() {
    let app = spawn_app().await;
    add_files(&app, &["--token-ttl", "600"]);
    let client_id = register_public(&app, &[REDIRECT]).await;
    let browser = signed_in_browser(&app).await;

    // The consent page names the server by its host and the scopes asked for in words.
    let (_, challenge) = pkce();
    let page = browser
        .get(authorize_url(
            &app,
            &client_id,
            &challenge,
            &[("resource", FILES), ("scope", "files:read offline_access")],
        ))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("127.0.0.1:9 (files)"), "{page}");
    assert!(page.contains("Read your files"), "{page}");
    assert!(!page.contains("Change your files"), "{page}");
    assert!(!page.contains("Read your projects and notes"), "{page}");

    let tokens = files_tokens(&app, &browser, &client_id, "files:read offline_access").await;
    assert_eq!(tokens["scope"], "files:read");
    assert_eq!(tokens["expires_in"], 600, "the resource's token lifetime");
    let access = tokens["access_token"].as_str().unwrap();
    assert!(
        !mcp_accepts(&app, access).await,
        "Gatehouse's own MCP endpoint refuses a token of another resource"
    );

    // Refresh stays on the resource; it cannot be moved to another one or widened.
    let refresh_token = tokens["refresh_token"].as_str().unwrap();
    let (status, body) = refresh(
        &app,
        &client_id,
        refresh_token,
        &[("resource", &own_mcp(&app))],
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "invalid_target", "{body}");
    let (status, body) =
        refresh(&app, &client_id, refresh_token, &[("scope", "files:write")]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "invalid_scope", "{body}");
    let (status, body) = refresh(&app, &client_id, refresh_token, &[("resource", FILES)]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["scope"], "files:read");
    assert_eq!(body["expires_in"], 600);
    let next = body["access_token"].as_str().unwrap().to_string();
    let next = next.as_str();
    let next_refresh = body["refresh_token"].as_str().unwrap().to_string();
    assert!(access_token_live(&app, next).await);
    assert!(!mcp_accepts(&app, next).await);

    // Remembered consent for this client and resource: no page the second time.
    let (_, challenge) = pkce();
    let r = browser
        .get(authorize_url(
            &app,
            &client_id,
            &challenge,
            &[("resource", FILES), ("scope", "files:read")],
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let loc = r.headers()["location"].to_str().unwrap();
    assert!(query_of(loc).contains_key("code"), "{loc}");
    // ...but not for another of its scopes, nor for Gatehouse's own endpoint.
    for extra in [
        vec![("resource", FILES), ("scope", "files:write")],
        vec![("scope", "mcp:read")],
    ] {
        let (_, challenge) = pkce();
        let r = browser
            .get(authorize_url(&app, &client_id, &challenge, &extra))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "a consent page for {extra:?}");
    }
    // A grant for the built-in resource is bound to it in turn.
    let (code, verifier) = code_in(&app, &browser, &client_id, &[("scope", "mcp:read")]).await;
    let (status, body, _) =
        exchange(&app, &client_id, &code, &verifier, &[("resource", FILES)]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "invalid_target", "{body}");
    let (code, verifier) = code_in(&app, &browser, &client_id, &[("scope", "mcp:read")]).await;
    let (status, own, _) = exchange(&app, &client_id, &code, &verifier, &[]).await;
    assert_eq!(status, StatusCode::OK, "{own}");
    assert!(mcp_accepts(&app, own["access_token"].as_str().unwrap()).await);

    // Connected apps names the server each grant is for.
    let apps = browser
        .get(app.url("/apps"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(apps.contains("127.0.0.1:9 (files)"), "{apps}");
    assert!(apps.contains("Read your files"), "{apps}");
    assert!(apps.contains("(this Gatehouse)"), "{apps}");

    // Removing the resource ends its grants at once.
    resource(&app, &["remove", "files"]);
    assert!(!access_token_live(&app, next).await);
    let (status, body) = refresh(&app, &client_id, &next_refresh, &[]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        mcp_accepts(&app, own["access_token"].as_str().unwrap()).await,
        "other grants stay"
    );
}

#[tokio::test]
async fn a_request_for_no_single_registered_resource_or_its_scopes_is_refused() {
    let app = spawn_app().await;
    add_files(&app, &[]);
    let client_id = register_public(&app, &[REDIRECT]).await;
    let browser = signed_in_browser(&app).await;
    let (_, challenge) = pkce();
    let refused = |extra: Vec<(&'static str, String)>| {
        let extra: Vec<(&str, &str)> = extra.iter().map(|(k, v)| (*k, v.as_str())).collect();
        authorize_url(&app, &client_id, &challenge, &extra)
    };
    let mut two = refused(vec![("resource", FILES.to_string())]);
    two.push_str(&format!("&resource={}", urlencode(&own_mcp(&app))));
    for (url, error, words) in [
        (
            refused(vec![("resource", "https://unknown.example/mcp".into())]),
            "invalid_target",
            "is not served here",
        ),
        (
            refused(vec![("resource", "not a uri".into())]),
            "invalid_target",
            "absolute URI",
        ),
        (two, "invalid_target", "one resource"),
        (
            refused(vec![
                ("resource", FILES.into()),
                ("scope", "files:read mcp:read".into()),
            ]),
            "invalid_scope",
            "\"mcp:read\" is not a scope of this resource",
        ),
    ] {
        let r = browser.get(&url).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::SEE_OTHER, "{url}");
        let q = query_of(r.headers()["location"].to_str().unwrap());
        assert_eq!(q["error"], error, "{url}: {q:?}");
        assert!(q["error_description"].contains(words), "{q:?}");
        assert_eq!(q["state"], "xyz-state");
    }
}

fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

#[tokio::test]
async fn each_resource_server_introspects_its_own_tokens_only() {
    let app = spawn_app().await;
    let out = add_files(&app, &["--introspect"]);
    let files_creds = (field(&out, "client_id"), field(&out, "client_secret"));
    assert_eq!(
        field(&out, "introspection_endpoint"),
        app.url("/oauth/introspect")
    );
    let own_creds = crate::token::introspection_client(&app);

    let client_id = register_public(&app, &[REDIRECT]).await;
    let browser = signed_in_browser(&app).await;
    let files = files_tokens(&app, &browser, &client_id, "files:read files:write").await;
    let files_token = files["access_token"].as_str().unwrap();
    let (code, verifier) = code_in(&app, &browser, &client_id, &[]).await;
    let (_, own, _) = exchange(&app, &client_id, &code, &verifier, &[]).await;
    let own_token = own["access_token"].as_str().unwrap();

    let answer = introspect_with(&app, &files_creds, files_token).await;
    assert_eq!(answer["active"], true, "{answer}");
    assert_eq!(answer["aud"], FILES);
    assert_eq!(answer["scope"], "files:read files:write");
    assert_eq!(answer["client_id"], client_id);
    assert_eq!(answer["sub"], crate::mcp::account_id(&app, EMAIL).await);
    assert_eq!(answer["iss"], app.config.issuer);
    assert_eq!(answer["token_type"], "Bearer");
    let iat = answer["iat"].as_i64().unwrap();
    assert_eq!(
        answer["exp"].as_i64().unwrap() - iat,
        900,
        "the default lifetime"
    );

    // No token substitution between servers, either way.
    assert_eq!(
        introspect_with(&app, &files_creds, own_token).await,
        serde_json::json!({"active": false})
    );
    assert_eq!(
        introspect_with(&app, &own_creds, files_token).await,
        serde_json::json!({"active": false})
    );
    assert_eq!(
        introspect_with(&app, &own_creds, own_token).await["active"],
        true
    );

    // Its credentials stop with the resource.
    resource(&app, &["remove", "files"]);
    let r = app
        .client
        .post(app.url("/oauth/introspect"))
        .basic_auth(&files_creds.0, Some(&files_creds.1))
        .form(&[("token", files_token)])
        .send()
        .await
        .unwrap();
    assert_ne!(r.status(), StatusCode::OK);
}

#[tokio::test]
async fn tokens_are_audited_and_counted_per_resource() {
    let app = crate::helpers::spawn_app_with(|v| {
        v.insert("GATEHOUSE_METRICS_BIND".into(), "127.0.0.1:0".into());
    })
    .await;
    let out = add_files(&app, &["--introspect"]);
    let creds = (field(&out, "client_id"), field(&out, "client_secret"));
    let client_id = register_public(&app, &[REDIRECT]).await;
    let browser = signed_in_browser(&app).await;
    let tokens = files_tokens(&app, &browser, &client_id, "files:read").await;
    let (status, _) = refresh(
        &app,
        &client_id,
        tokens["refresh_token"].as_str().unwrap(),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    introspect_with(&app, &creds, tokens["access_token"].as_str().unwrap()).await;

    app.store.flush_audit().await;
    let audit = app.store.recent_audit(50).await.unwrap();
    for event in ["code_redeemed", "token_refreshed"] {
        let row = audit
            .iter()
            .find(|e| e.event == event)
            .unwrap_or_else(|| panic!("{event} in {audit:?}"));
        assert_eq!(
            row.detail.as_deref(),
            Some(format!("resource={FILES}").as_str()),
            "{event}"
        );
    }
    let body = crate::metrics::scrape(&app).await;
    for event in ["issued", "refreshed", "introspected"] {
        assert!(
            crate::metrics::has_sample(
                &body,
                "gatehouse_resource_tokens_total",
                &[
                    &format!("resource=\"{FILES}\""),
                    &format!("event=\"{event}\"")
                ]
            ),
            "{event}: {body}"
        );
    }
}

/// Checks a JWT's ES256 signature against the JWK Set `jwks` with `ring` (not the library that
/// signed it); returns its header and claims.
fn verify_es256(token: &str, jwks: &Value) -> (Value, Value) {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let parts: Vec<&str> = token.split('.').collect();
    assert_eq!(parts.len(), 3, "a JWS in compact form");
    let decode = |p: &str| URL_SAFE_NO_PAD.decode(p).unwrap();
    let header: Value = serde_json::from_slice(&decode(parts[0])).unwrap();
    let claims: Value = serde_json::from_slice(&decode(parts[1])).unwrap();
    let kid = header["kid"].as_str().expect("a kid");
    let jwk = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kid"] == kid)
        .unwrap_or_else(|| panic!("kid {kid} published in {jwks}"));
    assert_eq!(jwk["kty"], "EC");
    assert_eq!(jwk["crv"], "P-256");
    let mut point = vec![4u8];
    point.extend(decode(jwk["x"].as_str().unwrap()));
    point.extend(decode(jwk["y"].as_str().unwrap()));
    ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_FIXED, point)
        .verify(
            format!("{}.{}", parts[0], parts[1]).as_bytes(),
            &decode(parts[2]),
        )
        .expect("a valid ES256 signature");
    (header, claims)
}

async fn get_json(app: &TestApp, url: &str) -> Value {
    let r = app.client.get(url).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK, "{url}");
    r.json().await.unwrap()
}

#[tokio::test]
async fn jwt_access_tokens_verify_against_the_published_keys_across_a_rotation() {
    let app = crate::helpers::spawn_app_with(|v| {
        // PostgreSQL has no key file: every instance is given the key.
        v.insert(
            "GATEHOUSE_SECRET_KEY".into(),
            "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=".into(),
        );
    })
    .await;
    let out = add_files(
        &app,
        &[
            "--token-format",
            "jwt",
            "--token-ttl",
            "300",
            "--introspect",
        ],
    );
    assert!(out.contains("takes effect at its expiry"), "{out}");
    let creds = (field(&out, "client_id"), field(&out, "client_secret"));
    let jwks_uri =
        get_json(&app, &app.url("/.well-known/oauth-authorization-server")).await["jwks_uri"]
            .as_str()
            .unwrap()
            .to_string();
    assert_eq!(jwks_uri, app.url("/oauth/jwks"));

    let client_id = register_public(&app, &[REDIRECT]).await;
    let browser = signed_in_browser(&app).await;
    let tokens = files_tokens(&app, &browser, &client_id, "files:read").await;
    assert_eq!(tokens["expires_in"], 300);
    let first = tokens["access_token"].as_str().unwrap();
    let jwks = get_json(&app, &jwks_uri).await;
    let (header, claims) = verify_es256(first, &jwks);
    assert_eq!(header["typ"], "at+jwt");
    assert_eq!(header["alg"], "ES256");
    assert_eq!(claims["iss"], app.config.issuer);
    assert_eq!(claims["sub"], crate::mcp::account_id(&app, EMAIL).await);
    assert_eq!(claims["aud"], FILES);
    assert_eq!(claims["client_id"], client_id);
    assert_eq!(claims["scope"], "files:read");
    assert_eq!(
        claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
        300
    );
    assert!(claims["jti"].as_str().is_some_and(|j| j.len() >= 16));
    assert!(
        tokens["refresh_token"]
            .as_str()
            .unwrap()
            .starts_with("gate_rt_"),
        "refresh tokens stay opaque"
    );
    // Introspection knows it too, and Gatehouse's own endpoint refuses it.
    assert_eq!(introspect_with(&app, &creds, first).await["active"], true);
    assert!(!mcp_accepts(&app, first).await);

    // Rotation: the next token has a new key; the old key stays published.
    let (success, out, err) = gatehouse(&app, &["signing-key", "rotate"]);
    assert!(success, "{err}");
    let old_kid = header["kid"].as_str().unwrap().to_string();
    assert!(out.contains(&old_kid), "{out}");
    let (status, body) = refresh(
        &app,
        &client_id,
        tokens["refresh_token"].as_str().unwrap(),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let second = body["access_token"].as_str().unwrap();
    let jwks = get_json(&app, &jwks_uri).await;
    assert_eq!(jwks["keys"].as_array().unwrap().len(), 2, "{jwks}");
    let (header2, claims2) = verify_es256(second, &jwks);
    assert_ne!(header2["kid"], old_kid);
    assert_ne!(claims2["jti"], claims["jti"]);
    verify_es256(first, &jwks);
}

#[tokio::test]
async fn rotating_before_any_signing_key_exists_changes_nothing_and_audits_nothing() {
    let app = spawn_app().await;
    let (success, out, err) = gatehouse(&app, &["signing-key", "rotate"]);
    assert!(success, "{err}");
    assert!(out.starts_with("no signing key yet"), "{out}");
    let rows = app.store.recent_audit(50).await.unwrap();
    assert!(
        !rows.iter().any(|r| r.event == "signing_key_rotated"),
        "{:?}",
        rows.iter().map(|r| r.event.as_str()).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn every_running_instance_takes_a_registration_and_a_removal_up_at_once() {
    let one = spawn_app().await;
    let two = crate::helpers::spawn_instance(&one, |_| {}).await;
    let client_id = register_public(&one, &[REDIRECT]).await;
    let browser = signed_in_browser(&two).await;
    let (_, challenge) = pkce();
    let ask = || {
        authorize_url(
            &two,
            &client_id,
            &challenge,
            &[("resource", FILES), ("scope", "files:read")],
        )
    };
    let refused = |r: &reqwest::Response| {
        r.status() == StatusCode::SEE_OTHER
            && query_of(r.headers()["location"].to_str().unwrap())
                .get("error")
                .is_some_and(|e| e == "invalid_target")
    };
    assert!(refused(&browser.get(ask()).send().await.unwrap()));

    add_files(&one, &[]);
    let page = browser.get(ask()).send().await.unwrap();
    assert_eq!(
        page.status(),
        StatusCode::OK,
        "the other instance shows the consent page"
    );
    assert!(page.text().await.unwrap().contains("Read your files"));
    assert!(
        metadata(&two).await["scopes_supported"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s == "files:read")
    );

    resource(&one, &["remove", "files"]);
    assert!(refused(&browser.get(ask()).send().await.unwrap()));
}
