//! DPoP (RFC 9449): a proof at the token endpoint binds the access token (and a public client's
//! refresh token) to the proof's key; the MCP route then accepts the token only as
//! `Authorization: DPoP` with a proof by that key, for that request, once. Proofs are made by
//! an independent maker, the `jsonwebtoken` crate's encoder, with P-256 keys made by `ring`.
//! Each test runs on `SQLite`, or on `PostgreSQL` with `GATEHOUSE_TEST_BACKEND=postgres`.

use std::sync::Arc;

use base64::Engine;
use gatehouse::oauth::clients::HttpsFetcher;
use jsonwebtoken::Algorithm;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use sha2::Digest;

use crate::helpers::{TestApp, spawn_app, spawn_twin_with_fetcher};
use crate::mcp::{modern, send};
use crate::oauth_helpers::*;
use crate::private_key_jwt::{TestKey, es256};

/// What a proof claims; each test changes one member.
struct Claims<'a> {
    htm: &'a str,
    htu: String,
    /// The access token whose hash is `ath`; `None`: no `ath`.
    token: Option<&'a str>,
    /// Seconds added to now for `iat`.
    iat_offset: i64,
    typ: &'a str,
}

fn claims<'a>(htm: &'a str, htu: String, token: Option<&'a str>) -> Claims<'a> {
    Claims {
        htm,
        htu,
        token,
        iat_offset: 0,
        typ: "dpop+jwt",
    }
}

/// base64url(SHA-256(token)), as RFC 9449 §4.2 defines `ath`.
fn ath(token: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(token.as_bytes()))
}

/// A proof signed by `key` with its JWK (as given, private members too) in the header.
fn proof(key: &TestKey, c: &Claims<'_>) -> String {
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let alg = match key.alg {
        Algorithm::ES256 => "ES256",
        Algorithm::EdDSA => "EdDSA",
        Algorithm::RS256 => "RS256",
        other => panic!("no test proofs with {other:?}"),
    };
    let header = json!({"typ": c.typ, "alg": alg, "jwk": key.jwk});
    let mut body = json!({
        "jti": gatehouse::domain::secret::random_urlsafe(16),
        "htm": c.htm,
        "htu": c.htu,
        "iat": gatehouse::store::now().saturating_add(c.iat_offset),
    });
    if let Some(token) = c.token {
        body["ath"] = json!(ath(token));
    }
    let message = format!("{}.{}", b64(&header), b64(&body));
    let signature = jsonwebtoken::crypto::sign(message.as_bytes(), &key.encoding, key.alg).unwrap();
    format!("{message}.{signature}")
}

/// The RFC 7638 thumbprint of a P-256 test key, computed here from its members.
fn thumbprint(key: &TestKey) -> String {
    let j = &key.jwk;
    let canonical = format!(
        "{{\"crv\":\"{}\",\"kty\":\"EC\",\"x\":\"{}\",\"y\":\"{}\"}}",
        j["crv"].as_str().unwrap(),
        j["x"].as_str().unwrap(),
        j["y"].as_str().unwrap()
    );
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(canonical))
}

/// `POST /oauth/token` with `form` and, if given, a `DPoP` header.
async fn token_request(
    app: &TestApp,
    form: &[(&str, &str)],
    dpop: Option<&str>,
) -> (StatusCode, Value) {
    let mut r = app.client.post(app.url("/oauth/token")).form(form);
    if let Some(p) = dpop {
        r = r.header("DPoP", p);
    }
    let r = r.send().await.unwrap();
    (r.status(), r.json().await.unwrap())
}

fn token_url(app: &TestApp) -> String {
    app.url("/oauth/token")
}

fn mcp_url(app: &TestApp) -> String {
    app.url("/mcp")
}

/// A fresh public client, its code and verifier.
async fn code(app: &TestApp) -> (String, String, String) {
    let client_id = register_public(app, &[REDIRECT]).await;
    let (code, verifier) = code_for(app, &client_id).await;
    (client_id, code, verifier)
}

/// Redeems `code` with a proof by `key`: the token response.
async fn dpop_exchange(
    app: &TestApp,
    key: &TestKey,
    client_id: &str,
    code: &str,
    verifier: &str,
) -> Value {
    let p = proof(key, &claims("POST", token_url(app), None));
    let (status, body) = token_request(
        app,
        &[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("code_verifier", verifier),
            ("client_id", client_id),
            ("redirect_uri", REDIRECT),
        ],
        Some(&p),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

/// `tools/list` with `Authorization: <scheme> <token>` and, if given, a `DPoP` proof.
async fn tools_list(
    app: &TestApp,
    scheme: &str,
    token: &str,
    dpop: Option<&str>,
) -> (StatusCode, HeaderMap, Value) {
    let mut r = modern(app, None, "tools/list", json!({}))
        .header("authorization", format!("{scheme} {token}"));
    if let Some(p) = dpop {
        r = r.header("DPoP", p);
    }
    send(r).await
}

/// The `WWW-Authenticate` values of a response.
fn challenges(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all("www-authenticate")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect()
}

/// A 401 with the DPoP challenge naming `error` and the algorithms, and the Bearer challenge
/// with the protected-resource metadata beside it.
fn refused_with(status: StatusCode, headers: &HeaderMap, error: &str, why: &str) {
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{why}");
    let all = challenges(headers);
    assert_eq!(
        all[0],
        format!("DPoP error=\"{error}\", algs=\"RS256 PS256 ES256 EdDSA\""),
        "{why}"
    );
    assert!(
        all.iter()
            .any(|c| c.starts_with("Bearer resource_metadata=\"")),
        "{why}: {all:?}"
    );
}

#[tokio::test]
async fn a_proof_at_the_token_endpoint_binds_the_token_to_the_key() {
    let app = spawn_app().await;
    let key = es256("k1");
    let (client_id, code, verifier) = code(&app).await;
    let body = dpop_exchange(&app, &key, &client_id, &code, &verifier).await;
    assert_eq!(body["token_type"], "DPoP");
    let token = body["access_token"].as_str().unwrap();

    // At the MCP route: DPoP with a proof for this request is accepted.
    let p = proof(&key, &claims("POST", mcp_url(&app), Some(token)));
    let (status, _, list) = tools_list(&app, "DPoP", token, Some(&p)).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert!(list["result"]["tools"].is_array(), "{list}");

    // The bound token as a bearer token is refused (RFC 9449 §7.2).
    let (status, headers, _) = tools_list(&app, "Bearer", token, None).await;
    refused_with(
        status,
        &headers,
        "invalid_token",
        "bound token sent as Bearer",
    );

    // Introspection names the key (RFC 9449 §6.2).
    let (id, secret) = crate::token::introspection_client(&app);
    let info: Value = app
        .client
        .post(app.url("/oauth/introspect"))
        .basic_auth(id, Some(secret))
        .form(&[("token", token)])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(info["active"], true, "{info}");
    assert_eq!(info["token_type"], "DPoP");
    assert_eq!(info["cnf"], json!({"jkt": thumbprint(&key)}));
}

#[tokio::test]
async fn bearer_stays_the_default_without_a_proof() {
    let app = spawn_app().await;
    let (_, body) = full_grant(&app).await;
    assert_eq!(body["token_type"], "Bearer");
    let token = body["access_token"].as_str().unwrap();
    let (status, _, list) = tools_list(&app, "Bearer", token, None).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    // An unbound token sent as DPoP is refused: the proof would prove nothing.
    let key = es256("k1");
    let p = proof(&key, &claims("POST", mcp_url(&app), Some(token)));
    let (status, headers, _) = tools_list(&app, "DPoP", token, Some(&p)).await;
    refused_with(
        status,
        &headers,
        "invalid_token",
        "unbound token sent as DPoP",
    );
}

#[tokio::test]
async fn each_wrong_proof_is_refused_at_the_mcp_route() {
    let app = spawn_app().await;
    let key = es256("k1");
    let (client_id, code, verifier) = code(&app).await;
    let body = dpop_exchange(&app, &key, &client_id, &code, &verifier).await;
    let token = body["access_token"].as_str().unwrap();
    let mcp = mcp_url(&app);

    let cases: Vec<(&str, String, &str)> = vec![
        (
            "wrong htm",
            proof(&key, &claims("GET", mcp.clone(), Some(token))),
            "invalid_dpop_proof",
        ),
        (
            "wrong htu",
            proof(&key, &claims("POST", app.url("/other"), Some(token))),
            "invalid_dpop_proof",
        ),
        (
            "stale iat",
            proof(
                &key,
                &Claims {
                    iat_offset: -300,
                    ..claims("POST", mcp.clone(), Some(token))
                },
            ),
            "invalid_dpop_proof",
        ),
        (
            "iat in the future",
            proof(
                &key,
                &Claims {
                    iat_offset: 300,
                    ..claims("POST", mcp.clone(), Some(token))
                },
            ),
            "invalid_dpop_proof",
        ),
        (
            // now − 2^63: its distance from now is 2^63, one more than an i64 holds.
            "iat at the smallest integer",
            proof(
                &key,
                &Claims {
                    iat_offset: i64::MIN,
                    ..claims("POST", mcp.clone(), Some(token))
                },
            ),
            "invalid_dpop_proof",
        ),
        (
            "missing ath",
            proof(&key, &claims("POST", mcp.clone(), None)),
            "invalid_dpop_proof",
        ),
        (
            "ath of another token",
            proof(&key, &claims("POST", mcp.clone(), Some("gate_at_other"))),
            "invalid_dpop_proof",
        ),
        (
            "typ not dpop+jwt",
            proof(
                &key,
                &Claims {
                    typ: "JWT",
                    ..claims("POST", mcp.clone(), Some(token))
                },
            ),
            "invalid_dpop_proof",
        ),
        (
            "another key",
            proof(&es256("k2"), &claims("POST", mcp.clone(), Some(token))),
            "invalid_token",
        ),
        ("not a JWT", "not-a-jwt".into(), "invalid_dpop_proof"),
    ];
    for (why, p, error) in cases {
        let (status, headers, _) = tools_list(&app, "DPoP", token, Some(&p)).await;
        refused_with(status, &headers, error, why);
    }
    // No proof at all.
    let (status, headers, _) = tools_list(&app, "DPoP", token, None).await;
    refused_with(status, &headers, "invalid_dpop_proof", "no proof");

    // A proof is accepted once.
    let p = proof(&key, &claims("POST", mcp.clone(), Some(token)));
    let (status, _, body) = tools_list(&app, "DPoP", token, Some(&p)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, headers, _) = tools_list(&app, "DPoP", token, Some(&p)).await;
    refused_with(status, &headers, "invalid_dpop_proof", "replayed jti");
    // And a fresh one still works.
    let p = proof(&key, &claims("POST", mcp, Some(token)));
    let (status, _, body) = tools_list(&app, "DPoP", token, Some(&p)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn each_wrong_proof_is_refused_at_the_token_endpoint() {
    let app = spawn_app().await;
    let key = es256("k1");
    let (client_id, code, verifier) = code(&app).await;
    let form = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("code_verifier", verifier.as_str()),
        ("client_id", client_id.as_str()),
        ("redirect_uri", REDIRECT),
    ];
    let url = token_url(&app);
    let cases: Vec<(&str, String)> = vec![
        ("wrong htm", proof(&key, &claims("GET", url.clone(), None))),
        (
            "wrong htu",
            proof(&key, &claims("POST", mcp_url(&app), None)),
        ),
        (
            "stale iat",
            proof(
                &key,
                &Claims {
                    iat_offset: -120,
                    ..claims("POST", url.clone(), None)
                },
            ),
        ),
        (
            "iat at the smallest integer",
            proof(
                &key,
                &Claims {
                    iat_offset: i64::MIN,
                    ..claims("POST", url.clone(), None)
                },
            ),
        ),
        (
            "iat at the largest integer",
            proof(
                &key,
                &Claims {
                    iat_offset: i64::MAX,
                    ..claims("POST", url.clone(), None)
                },
            ),
        ),
        (
            "typ not dpop+jwt",
            proof(
                &key,
                &Claims {
                    typ: "JWT",
                    ..claims("POST", url.clone(), None)
                },
            ),
        ),
        ("not a JWT", "a.b.c".into()),
    ];
    for (why, p) in cases {
        let (status, body) = token_request(&app, &form, Some(&p)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{why}: {body}");
        assert_eq!(body["error"], "invalid_dpop_proof", "{why}: {body}");
    }
    // A private key in the header is refused.
    let mut leaky = es256("k3");
    leaky.jwk["d"] = json!("c2VjcmV0");
    let p = proof(&leaky, &claims("POST", url.clone(), None));
    let (status, body) = token_request(&app, &form, Some(&p)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_dpop_proof")),
        "{body}"
    );

    // The code survived the refusals; a valid proof redeems it once, and its replay is refused.
    let p = proof(&key, &claims("POST", url, None));
    let (status, body) = token_request(&app, &form, Some(&p)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["token_type"], "DPoP");
    let (status, body) = token_request(&app, &form, Some(&p)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_dpop_proof")),
        "{body}"
    );
}

#[tokio::test]
async fn a_public_clients_refresh_token_is_bound_to_the_key() {
    let app = spawn_app().await;
    let key = es256("k1");
    let (client_id, code, verifier) = code(&app).await;
    let body = dpop_exchange(&app, &key, &client_id, &code, &verifier).await;
    let refresh_token = body["refresh_token"].as_str().unwrap().to_string();
    let form = [
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh_token.as_str()),
        ("client_id", client_id.as_str()),
    ];
    let url = token_url(&app);
    // Without a proof, or with another key: invalid_grant (RFC 9449 §5), the token left usable.
    let (status, body) = token_request(&app, &form, None).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant")),
        "{body}"
    );
    let other = proof(&es256("k2"), &claims("POST", url.clone(), None));
    let (status, body) = token_request(&app, &form, Some(&other)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant")),
        "{body}"
    );
    // With the key: a new bound pair.
    let p = proof(&key, &claims("POST", url, None));
    let (status, body) = token_request(&app, &form, Some(&p)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["token_type"], "DPoP");
    let token = body["access_token"].as_str().unwrap();
    let p = proof(&key, &claims("POST", mcp_url(&app), Some(token)));
    let (status, _, list) = tools_list(&app, "DPoP", token, Some(&p)).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let (status, headers, _) = tools_list(&app, "Bearer", token, None).await;
    refused_with(
        status,
        &headers,
        "invalid_token",
        "refreshed bound token as Bearer",
    );
}

#[tokio::test]
async fn a_proof_replayed_on_another_instance_is_refused() {
    let app = spawn_app().await;
    let twin = spawn_twin_with_fetcher(&app, Arc::new(HttpsFetcher::default())).await;
    let key = es256("k1");
    let (client_id, code, verifier) = code(&app).await;

    // The token endpoint spends a proof in the database at once.
    let p = proof(&key, &claims("POST", token_url(&app), None));
    let form = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("code_verifier", verifier.as_str()),
        ("client_id", client_id.as_str()),
        ("redirect_uri", REDIRECT),
    ];
    let (status, body) = token_request(&app, &form, Some(&p)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let token = body["access_token"].as_str().unwrap().to_string();
    let (status, again) = token_request(&twin, &form, Some(&p)).await;
    assert_eq!(
        (status, again["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_dpop_proof")),
        "{again}"
    );

    // The MCP route records its proofs in batches: once written, the other instance refuses.
    let p = proof(&key, &claims("POST", mcp_url(&app), Some(&token)));
    let (status, _, list) = tools_list(&app, "DPoP", &token, Some(&p)).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let recorded = gatehouse::domain::dpop::verify_proof(
        &p,
        &gatehouse::domain::dpop::Expected {
            method: "POST",
            url: &mcp_url(&app),
            access_token: Some(&token),
            now: gatehouse::store::now(),
        },
    )
    .unwrap()
    .replay_key();
    let mut written = false;
    for _ in 0..100 {
        let rows: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM dpop_proofs WHERE proof_hash = $1")
                .bind(&recorded)
                .fetch_one(app.db.pool().await)
                .await
                .unwrap();
        if rows == 1 {
            written = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(written, "the proof was recorded within a second");
    let (status, headers, _) = tools_list(&twin, "DPoP", &token, Some(&p)).await;
    refused_with(
        status,
        &headers,
        "invalid_dpop_proof",
        "replayed on the twin",
    );
    // The twin accepts the token with a fresh proof.
    let fresh = proof(&key, &claims("POST", mcp_url(&app), Some(&token)));
    let (status, _, list) = tools_list(&twin, "DPoP", &token, Some(&fresh)).await;
    assert_eq!(status, StatusCode::OK, "{list}");
}

#[tokio::test]
async fn a_code_requested_with_dpop_jkt_is_redeemed_only_with_that_key() {
    let app = spawn_app().await;
    let key = es256("k1");
    let client_id = register_public(&app, &[REDIRECT]).await;
    let browser = signed_in_browser(&app).await;
    let jkt = thumbprint(&key);
    let (code, verifier) = code_in(&app, &browser, &client_id, &[("dpop_jkt", &jkt)]).await;
    let form = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("code_verifier", verifier.as_str()),
        ("client_id", client_id.as_str()),
        ("redirect_uri", REDIRECT),
    ];
    let url = token_url(&app);
    let (status, body) = token_request(&app, &form, None).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant")),
        "no proof: {body}"
    );
    let other = proof(&es256("k2"), &claims("POST", url.clone(), None));
    let (status, body) = token_request(&app, &form, Some(&other)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant")),
        "another key: {body}"
    );
    let p = proof(&key, &claims("POST", url, None));
    let (status, body) = token_request(&app, &form, Some(&p)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["token_type"], "DPoP");
}

#[tokio::test]
async fn a_service_clients_token_is_bound_with_client_credentials() {
    let app = spawn_app().await;
    app.create_account("alice@example.com", "a-long-password")
        .await;
    let (ok, out, err) = crate::keys::gatehouse(
        &app,
        &[
            "client",
            "add",
            "Billing",
            "--service",
            "--owner",
            "alice@example.com",
        ],
    );
    assert!(ok, "{err}");
    let field = |name: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .unwrap()
            .to_string()
    };
    let (id, secret) = (field("client_id"), field("client_secret"));
    let key = es256("svc");
    let r = app
        .client
        .post(app.url("/oauth/token"))
        .basic_auth(&id, Some(&secret))
        .header("DPoP", proof(&key, &claims("POST", token_url(&app), None)))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["token_type"], "DPoP", "{body}");
    let token = body["access_token"].as_str().unwrap();
    let p = proof(&key, &claims("POST", mcp_url(&app), Some(token)));
    let (status, _, list) = tools_list(&app, "DPoP", token, Some(&p)).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let (status, headers, _) = tools_list(&app, "Bearer", token, None).await;
    refused_with(status, &headers, "invalid_token", "service token as Bearer");
}

#[tokio::test]
async fn metadata_advertises_dpop() {
    let app = spawn_app().await;
    let algs = json!(["RS256", "PS256", "ES256", "EdDSA"]);
    let get = |path: &str| {
        let url = app.url(path);
        let client = app.client.clone();
        async move {
            client
                .get(url)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };
    let server = get("/.well-known/oauth-authorization-server").await;
    assert_eq!(server["dpop_signing_alg_values_supported"], algs);
    let resource = get("/.well-known/oauth-protected-resource/mcp").await;
    assert_eq!(resource["dpop_signing_alg_values_supported"], algs);
    assert_eq!(resource["dpop_bound_access_tokens_required"], false);
}

/// The speed rule: a DPoP request costs one database round trip for its credential, as a
/// bearer one does. On `SQLite` the server's in-place statistics count the reads: with the
/// validation cache off (so the bearer token is looked up too), a DPoP `tools/list` reads
/// exactly as often as a bearer one (the credential's one statement, which for DPoP also
/// reads the proof's replay record, and the listing's probe of projects), and nothing is asked
/// of the pool (the proof's record is written later, in a batch).
#[tokio::test]
async fn a_dpop_request_reads_the_database_as_often_as_a_bearer_one() {
    let app = crate::helpers::spawn_app_with(|v| {
        v.insert("GATEHOUSE_AUTH_CACHE".into(), "off".into());
    })
    .await;
    let Some(_) = app.store.in_place_stats() else {
        assert!(
            std::env::var("GATEHOUSE_TEST_BACKEND").as_deref() == Ok("postgres"),
            "a SQLite file reads in place"
        );
        return;
    };
    let key = es256("k1");
    let (client_id, code, verifier) = code(&app).await;
    let body = dpop_exchange(&app, &key, &client_id, &code, &verifier).await;
    let bound = body["access_token"].as_str().unwrap().to_string();
    let (_, body) = full_grant(&app).await;
    let bearer = body["access_token"].as_str().unwrap().to_string();
    let reads = |scheme: &'static str, token: String, key: Option<&'static TestKey>| {
        let app = &app;
        async move {
            let p = key.map(|k| proof(k, &claims("POST", mcp_url(app), Some(&token))));
            let before = app.store.in_place_stats().unwrap();
            let (status, _, list) = tools_list(app, scheme, &token, p.as_deref()).await;
            let after = app.store.in_place_stats().unwrap();
            assert_eq!(status, StatusCode::OK, "{list}");
            crate::cache::reads_between(before, after)
        }
    };
    let key: &'static TestKey = Box::leak(Box::new(key));
    // The first requests warm the statement caches.
    reads("DPoP", bound.clone(), Some(key)).await;
    reads("Bearer", bearer.clone(), None).await;
    let dpop = reads("DPoP", bound, Some(key)).await;
    let plain = reads("Bearer", bearer, None).await;
    assert_eq!(dpop, plain, "DPoP (reads, pool fallbacks) against Bearer");
    assert_eq!(dpop.1, 0, "nothing asked of the pool");
    eprintln!("in-place reads of one tools/list: DPoP {dpop:?}, Bearer {plain:?}");
}
