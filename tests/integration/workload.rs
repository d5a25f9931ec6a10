//! Workload identity (issue "The clients of 2026" item 3; MCP's draft workload identity
//! federation extension): the JWT-bearer grant with a JWT a workload's platform issued (here
//! shaped like a Kubernetes service-account token), for a service client made with
//! `gatehouse client add … --service --workload-issuer URL --workload-subject SUB`. The
//! assertions are made by an independent maker, the `jsonwebtoken` crate's encoder; the
//! issuer's discovery document and key set are served by the tests' fetcher.

use std::sync::Arc;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app_full, spawn_twin_with_fetcher};
use crate::idp::{TEST_KEY, cli_ok, cli_refused};
use crate::mcp::{modern, send};
use crate::private_key_jwt::{KeyFetcher, TestKey, es256, rsa};

const ISSUER: &str = "https://k8s.example/cluster-1";
const DISCOVERY: &str = "https://k8s.example/cluster-1/.well-known/openid-configuration";
const JWKS: &str = "https://k8s.example/cluster-1/openid/v1/jwks";
const SUBJECT: &str = "system:serviceaccount:ci:runner";
const OWNER: &str = "ops@acme.example";
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// A server and a workload client for [`SUBJECT`] of [`ISSUER`] (keys found by discovery,
/// or at `jwks_uri`); returns (app, fetcher, the issuer's key, client id).
async fn setup(jwks_uri: Option<&str>) -> (TestApp, Arc<KeyFetcher>, TestKey, String) {
    let key = rsa("k8s-1", Algorithm::RS256);
    let fetcher = Arc::new(KeyFetcher::default());
    fetcher.serve(DISCOVERY, json!({"issuer": ISSUER, "jwks_uri": JWKS}));
    fetcher.serve(JWKS, json!({"keys": [key.jwk.clone()]}));
    let app = spawn_app_full(
        |v| {
            v.insert("GATEHOUSE_SECRET_KEY".into(), TEST_KEY.into());
        },
        fetcher.clone(),
    )
    .await;
    app.create_account(OWNER, "a-long-password").await;
    let mut args = vec![
        "client",
        "add",
        "ci-runner",
        "--service",
        "--owner",
        OWNER,
        "--write",
        "--workload-issuer",
        ISSUER,
        "--workload-subject",
        SUBJECT,
    ];
    if let Some(uri) = jwks_uri {
        args.extend(["--workload-jwks-uri", uri]);
    }
    let out = cli_ok(&app, &args, "").await;
    assert!(!out.contains("client_secret"), "no secret is made: {out}");
    let client_id = out
        .lines()
        .find_map(|l| l.strip_prefix("client_id: "))
        .unwrap()
        .to_string();
    (app, fetcher, key, client_id)
}

/// The claims of a good workload assertion at `app` (aud with a trailing slash, as SDKs
/// derive it from the metadata URL).
fn claims(app: &TestApp) -> Value {
    let now = gatehouse::store::now();
    json!({
        "iss": ISSUER,
        "sub": SUBJECT,
        "aud": [format!("{}/", app.config.issuer)],
        "jti": gatehouse::domain::secret::random_urlsafe(16),
        "iat": now,
        "nbf": now,
        "exp": now + 600,
        "kubernetes.io": {"namespace": "ci", "serviceaccount": {"name": "runner"}},
    })
}

fn sign(key: &TestKey, claims: &Value) -> String {
    let mut header = Header::new(key.alg);
    header.kid = Some(key.kid.clone());
    header.typ = Some("JWT".into());
    jsonwebtoken::encode(&header, claims, &key.encoding).unwrap()
}

async fn redeem(app: &TestApp, assertion: &str, extra: &[(&str, &str)]) -> (StatusCode, Value) {
    let mut form = vec![("grant_type", JWT_BEARER), ("assertion", assertion)];
    form.extend_from_slice(extra);
    let r = app
        .client
        .post(app.url("/oauth/token"))
        .form(&form)
        .send()
        .await
        .unwrap();
    let status = r.status();
    (status, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_workload_assertion_gets_a_service_token_once_across_instances() {
    let (app, fetcher, key, client_id) = setup(None).await;
    let assertion = sign(&key, &claims(&app));
    let (status, body) = redeem(&app, &assertion, &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["scope"], "mcp:read mcp:write");
    assert!(
        body.get("refresh_token").is_none(),
        "no refresh token: {body}"
    );
    let token = body["access_token"].as_str().unwrap();
    let (status, _, answer) = send(modern(&app, Some(token), "tools/list", json!({}))).await;
    assert_eq!(status, StatusCode::OK, "the token works: {answer}");
    assert!(answer["result"]["tools"].is_array(), "{answer}");
    // Introspection names the JWT-bearer grant (RFC 7523), though the token sits in the
    // service client's family with its client_credentials tokens.
    let seen = crate::token::introspect(&app, token).await;
    assert_eq!(seen["active"], true, "{seen}");
    assert_eq!(
        seen["grant_type"], "urn:ietf:params:oauth:grant-type:jwt-bearer",
        "{seen}"
    );

    // Audited as its own grant kind, for the service client.
    let detail: String = sqlx::query_scalar(
        "SELECT detail FROM audit_events WHERE event = 'token_issued' AND outcome = 'success' AND client_id = $1",
    )
    .bind(&client_id)
    .fetch_one(app.db.pool().await)
    .await
    .unwrap();
    assert_eq!(detail, format!("grant=workload iss={ISSUER}"));

    // The same assertion again, on another instance sharing the database: refused.
    let twin = spawn_twin_with_fetcher(&app, fetcher.clone()).await;
    let (status, body) = redeem(&twin, &assertion, &[]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"], "invalid_grant");
    assert_eq!(body["error_description"], "the assertion was already used");

    // aud without the trailing slash, as a string; the client's own client_id; a narrower
    // scope.
    let mut c = claims(&app);
    c["aud"] = json!(app.config.issuer.trim_end_matches('/'));
    let (status, body) = redeem(
        &twin,
        &sign(&key, &c),
        &[("client_id", client_id.as_str()), ("scope", "mcp:read")],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["scope"], "mcp:read");

    // Without a jti, the whole assertion is spent once.
    let mut c = claims(&app);
    c.as_object_mut().unwrap().remove("jti");
    let no_jti = sign(&key, &c);
    let (status, body) = redeem(&app, &no_jti, &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = redeem(&twin, &no_jti, &[]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error_description"], "the assertion was already used");

    // No more than the service's scope; no offline_access.
    for asked in ["mcp:admin", "offline_access"] {
        let (status, body) = redeem(&app, &sign(&key, &claims(&app)), &[("scope", asked)]).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{asked}: {body}");
        assert_eq!(body["error"], "invalid_scope", "{asked}: {body}");
    }

    // Revoking the client ends it.
    cli_ok(&app, &["client", "revoke", &client_id], "").await;
    let (status, body) = redeem(&app, &sign(&key, &claims(&app)), &[]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "invalid_grant");
}

#[tokio::test]
async fn every_check_of_a_workload_assertion_refuses_with_invalid_grant() {
    let (app, _fetcher, key, _client_id) = setup(None).await;
    let other_key = es256("k8s-1");
    let now = gatehouse::store::now();
    let good = claims(&app);
    let with = |k: &str, v: Value| {
        let mut c = good.clone();
        c[k] = v;
        c
    };
    let without = |k: &str| {
        let mut c = good.clone();
        c.as_object_mut().unwrap().remove(k);
        c
    };
    let hs256 = {
        let mut h = Header::new(Algorithm::HS256);
        h.typ = Some("JWT".into());
        jsonwebtoken::encode(&h, &good, &EncodingKey::from_secret(b"shared")).unwrap()
    };
    let cases: Vec<(String, &str)> = vec![
        (hs256, "the assertion's alg HS256 is not accepted"),
        (
            sign(&key, &with("iss", json!("https://k8s.example/cluster-2"))),
            "the assertion's issuer and subject are not those of a workload client here",
        ),
        (
            sign(&key, &with("sub", json!("system:serviceaccount:ci:other"))),
            "the assertion's issuer and subject are not those of a workload client here",
        ),
        (
            sign(&key, &with("aud", json!("https://elsewhere.example"))),
            "the assertion's aud must be",
        ),
        (
            sign(&key, &with("aud", json!(app.url("/oauth/token")))),
            "the assertion's aud must be",
        ),
        (
            sign(&key, &with("exp", json!(now - 120))),
            "the assertion has expired",
        ),
        (sign(&key, &without("exp")), "the assertion has no exp"),
        (
            sign(&key, &with("exp", json!(now + 3 * 86_400))),
            "the assertion's exp is more than a day ahead",
        ),
        (
            sign(&key, &with("exp", json!(i64::MAX))),
            "the assertion's exp is more than a day ahead",
        ),
        (
            sign(&key, &with("nbf", json!(now + 3600))),
            "the assertion is not valid yet (nbf)",
        ),
        (
            sign(&other_key, &good),
            "the assertion's signature does not verify with the workload issuer's keys",
        ),
        ("not.a.jwt".to_string(), "the assertion is not a signed JWT"),
    ];
    for (assertion, expected) in cases {
        let (status, body) = redeem(&app, &assertion, &[]).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{expected}: {body}");
        assert_eq!(body["error"], "invalid_grant", "{expected}: {body}");
        let description = body["error_description"].as_str().unwrap();
        assert!(
            description.starts_with(expected),
            "{expected} ≠ {description}"
        );
    }
    // Another (public) client's client_id with the workload's assertion: refused, not
    // redeemed for the workload client.
    let public =
        crate::oauth_helpers::register_public(&app, &[crate::oauth_helpers::REDIRECT]).await;
    let (status, body) = redeem(&app, &sign(&key, &good), &[("client_id", public.as_str())]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"], "invalid_grant");
    assert_eq!(
        body["error_description"],
        "the assertion's issuer and subject belong to another client than client_id"
    );
    // A malformed DPoP proof beside a good assertion: refused as a proof (RFC 9449 §5), and
    // the assertion is not spent by it.
    let r = app
        .client
        .post(app.url("/oauth/token"))
        .header("DPoP", "x.y.z")
        .form(&[
            ("grant_type", JWT_BEARER),
            ("assertion", &sign(&key, &good)),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"], "invalid_dpop_proof", "{body}");
    // Refusals were audited; the good assertion still works (nothing above spent it).
    let (status, body) = redeem(&app, &sign(&key, &good), &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let denied: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM audit_events WHERE event = 'token_issued' AND outcome = 'denied' \
         AND detail LIKE 'grant=workload %'",
    )
    .fetch_one(app.db.pool().await)
    .await
    .unwrap();
    assert_eq!(denied, 13, "each refused assertion, not the refused proof");
}

#[tokio::test]
async fn an_unknown_kid_fetches_the_issuers_key_set_again() {
    const OWN_JWKS: &str = "https://spire.example/keys";
    let (app, fetcher, key, _client_id) = setup(Some(OWN_JWKS)).await;
    // The configured key set, not the discovered one.
    let first = es256("spire-1");
    fetcher.serve(OWN_JWKS, json!({"keys": [first.jwk.clone()]}));
    let _ = key;
    let (status, body) = redeem(&app, &sign(&first, &claims(&app)), &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // The issuer rotates: the new kid is not in the cached set, which is fetched again.
    let second = es256("spire-2");
    fetcher.serve(
        OWN_JWKS,
        json!({"keys": [first.jwk.clone(), second.jwk.clone()]}),
    );
    let (status, body) = redeem(&app, &sign(&second, &claims(&app)), &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // The same subject cannot be given to a second client; a key-set URL must be https.
    let err = cli_refused(
        &app,
        &[
            "client",
            "add",
            "again",
            "--service",
            "--owner",
            OWNER,
            "--workload-issuer",
            ISSUER,
            "--workload-subject",
            SUBJECT,
        ],
        "",
    )
    .await;
    assert!(
        err.contains("already exists") || err.contains("workload client"),
        "{err}"
    );
    let err = cli_refused(
        &app,
        &[
            "client",
            "add",
            "plain",
            "--service",
            "--owner",
            OWNER,
            "--workload-issuer",
            "http://k8s.example",
            "--workload-subject",
            "x",
        ],
        "",
    )
    .await;
    assert!(err.contains("--workload-issuer"), "{err}");
}
