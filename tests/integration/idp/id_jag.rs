//! Enterprise-managed authorization (issue "The clients of 2026" item 2): the JWT-bearer grant
//! with an Identity Assertion JWT Authorization Grant signed by an identity provider trusted
//! with `gatehouse idp add … --jwks-uri URL --assertions`.

use std::sync::Arc;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{TEST_KEY, cli_ok};
use crate::helpers::{TestApp, spawn_app_full, spawn_twin_with_fetcher};
use crate::mcp::{modern, send};
use crate::oauth_helpers::{REDIRECT, register_public};
use crate::private_key_jwt::{KeyFetcher, TestKey, es256};

const ISSUER: &str = "https://idp.corp.example";
const JWKS: &str = "https://idp.corp.example/jwks";
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const EMAIL: &str = "alice@acme.example";

/// A server trusting `corp` for assertions (domain acme.example), with the provider's key
/// served by a fetcher; returns (app, fetcher, key, public client id).
async fn setup() -> (TestApp, Arc<KeyFetcher>, TestKey, String) {
    let key = es256("corp-1");
    let fetcher = Arc::new(KeyFetcher::default());
    fetcher.serve(JWKS, json!({"keys": [key.jwk.clone()]}));
    let app = spawn_app_full(
        |v| {
            v.insert("GATEHOUSE_SECRET_KEY".into(), TEST_KEY.into());
        },
        fetcher.clone(),
    )
    .await;
    app.create_account(EMAIL, "a-long-password").await;
    cli_ok(
        &app,
        &[
            "idp",
            "add",
            "corp",
            "--issuer",
            ISSUER,
            "--jwks-uri",
            JWKS,
            "--assertions",
            "--domains",
            "acme.example",
        ],
        "",
    )
    .await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    (app, fetcher, key, client_id)
}

/// The claims of a good ID-JAG for `client_id` at `app`.
fn claims(app: &TestApp, client_id: &str) -> Value {
    let now = gatehouse::store::now();
    json!({
        "iss": ISSUER,
        "sub": "corp-user-1",
        "aud": app.config.issuer,
        "client_id": client_id,
        "jti": gatehouse::domain::secret::random_urlsafe(16),
        "iat": now,
        "exp": now + 300,
        "resource": app.config.mcp_server_url,
        "scope": "mcp:read mcp:write",
        "email": EMAIL,
    })
}

fn sign(key: &TestKey, typ: &str, claims: &Value) -> String {
    let mut header = Header::new(key.alg);
    header.kid = Some(key.kid.clone());
    header.typ = Some(typ.to_string());
    jsonwebtoken::encode(&header, claims, &key.encoding).unwrap()
}

async fn redeem(
    app: &TestApp,
    client_id: &str,
    assertion: &str,
    extra: &[(&str, &str)],
) -> (StatusCode, Value) {
    let mut form = vec![
        ("grant_type", JWT_BEARER),
        ("assertion", assertion),
        ("client_id", client_id),
    ];
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
async fn an_id_jag_gets_an_access_token_once_across_instances() {
    let (app, fetcher, key, client_id) = setup().await;
    let assertion = sign(&key, "oauth-id-jag+jwt", &claims(&app, &client_id));
    let (status, body) = redeem(&app, &client_id, &assertion, &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["scope"], "mcp:read mcp:write");
    assert!(
        body.get("refresh_token").is_none(),
        "access token only: {body}"
    );
    let token = body["access_token"].as_str().unwrap();
    let (status, _, answer) = send(modern(&app, Some(token), "tools/list", json!({}))).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the token works on the MCP route: {answer}"
    );
    let seen = crate::token::introspect(&app, token).await;
    assert_eq!(seen["active"], true, "{seen}");
    assert_eq!(
        seen["grant_type"], "urn:ietf:params:oauth:grant-type:jwt-bearer",
        "{seen}"
    );

    // Shown on Connected apps, audited as its own grant kind.
    let account = app
        .store
        .account_by_email(&gatehouse::domain::account::Email::parse(EMAIL).unwrap())
        .await
        .unwrap()
        .unwrap();
    let apps = app.store.connected_apps(&account.id).await.unwrap();
    assert!(apps.iter().any(|a| a.client_id == client_id), "{apps:?}");
    let detail: String = sqlx::query_scalar(
        "SELECT detail FROM audit_events WHERE event = 'token_issued' AND outcome = 'success' AND client_id = $1",
    )
    .bind(&client_id)
    .fetch_one(app.db.pool().await)
    .await
    .unwrap();
    assert_eq!(detail, "grant=jwt-bearer idp=corp");

    // The same assertion again, on another instance of the deployment: refused.
    let twin = spawn_twin_with_fetcher(&app, fetcher.clone()).await;
    let (status, body) = redeem(&twin, &client_id, &assertion, &[]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "invalid_grant");
    assert_eq!(body["error_description"], "the assertion was already used");

    // A narrower scope may be asked for; a wider one is refused.
    let narrower = sign(&key, "oauth-id-jag+jwt", &claims(&app, &client_id));
    let (status, body) = redeem(&app, &client_id, &narrower, &[("scope", "mcp:read")]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["scope"], "mcp:read");
    let mut read_only = claims(&app, &client_id);
    read_only["scope"] = json!("mcp:read");
    let wider = sign(&key, "oauth-id-jag+jwt", &read_only);
    let (status, body) = redeem(&app, &client_id, &wider, &[("scope", "mcp:write")]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "invalid_scope");
}

#[tokio::test]
async fn every_check_of_an_id_jag_refuses_with_invalid_grant() {
    let (app, _fetcher, key, client_id) = setup().await;
    let other = register_public(&app, &[REDIRECT]).await;
    let stranger = es256("corp-1");
    let now = gatehouse::store::now();
    let good = claims(&app, &client_id);
    let with = |k: &str, v: Value| {
        let mut c = good.clone();
        c[k] = v;
        c
    };
    let hs256 = {
        let mut h = Header::new(Algorithm::HS256);
        h.typ = Some("oauth-id-jag+jwt".into());
        jsonwebtoken::encode(&h, &good, &EncodingKey::from_secret(b"shared")).unwrap()
    };
    let cases: Vec<(String, &str)> = vec![
        (
            sign(&key, "JWT", &good),
            "the assertion's typ must be oauth-id-jag+jwt",
        ),
        (hs256, "the assertion's alg HS256 is not accepted"),
        (
            sign(
                &key,
                "oauth-id-jag+jwt",
                &with("iss", json!("https://other.example")),
            ),
            "the assertion's issuer is not an identity provider trusted for assertions",
        ),
        (
            sign(&stranger, "oauth-id-jag+jwt", &good),
            "the assertion's signature does not verify with the identity provider's keys",
        ),
        (
            sign(
                &key,
                "oauth-id-jag+jwt",
                &with("aud", json!("https://elsewhere.example")),
            ),
            "the assertion's aud must be",
        ),
        (
            sign(&key, "oauth-id-jag+jwt", &with("client_id", json!(other))),
            "the assertion's client_id is not the authenticated client",
        ),
        (
            sign(
                &key,
                "oauth-id-jag+jwt",
                &with("resource", json!("https://elsewhere.example/mcp")),
            ),
            "the assertion's resource must be",
        ),
        (
            sign(&key, "oauth-id-jag+jwt", &with("exp", json!(now - 10))),
            "the assertion has expired",
        ),
        (
            sign(
                &key,
                "oauth-id-jag+jwt",
                &with("exp", json!(now + 3 * 86_400)),
            ),
            "the assertion's exp is more than a day ahead",
        ),
        (
            sign(&key, "oauth-id-jag+jwt", &with("exp", json!(i64::MAX))),
            "the assertion's exp is more than a day ahead",
        ),
        (
            sign(&key, "oauth-id-jag+jwt", &with("jti", Value::Null)),
            "the assertion has no jti",
        ),
        (
            sign(
                &key,
                "oauth-id-jag+jwt",
                &with("scope", json!("openid profile")),
            ),
            "the assertion carries no scope this server serves",
        ),
        (
            sign(
                &key,
                "oauth-id-jag+jwt",
                &with("email", json!("alice@elsewhere.example")),
            ),
            "no account is linked to this subject at corp",
        ),
        (
            sign(&key, "oauth-id-jag+jwt", &with("email", Value::Null)),
            "no account is linked to this subject at corp",
        ),
    ];
    for (assertion, expected) in &cases {
        let (status, body) = redeem(&app, &client_id, assertion, &[]).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{expected}: {body}");
        assert_eq!(body["error"], "invalid_grant", "{expected}: {body}");
        let description = body["error_description"].as_str().unwrap_or_default();
        assert!(
            description.starts_with(expected),
            "{expected}: {description}"
        );
    }
    let tokens: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM access_tokens")
        .fetch_one(app.db.pool().await)
        .await
        .unwrap();
    assert_eq!(tokens, 0, "nothing issued");
    let links: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM identity_links")
        .fetch_one(app.db.pool().await)
        .await
        .unwrap();
    assert_eq!(links, 0, "nothing linked");

    // A disabled account stays disabled.
    cli_ok(&app, &["account", "disable", EMAIL], "").await;
    let (status, body) = redeem(
        &app,
        &client_id,
        &sign(&key, "oauth-id-jag+jwt", &claims(&app, &client_id)),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error_description"], "the account is disabled");
}

/// An enterprise client registers for the grant it uses: dynamic registration accepts the
/// JWT-bearer grant (advertised in `grant_types_supported`), alone (a confidential client that
/// never redirects, so without redirect URIs) or with the code grant, and such a client
/// redeems its ID-JAGs.
#[tokio::test]
async fn a_client_registered_for_the_jwt_bearer_grant_redeems_id_jags() {
    let (app, _, key, _) = setup().await;
    let register = |body: Value| {
        let app = &app;
        async move {
            let r = app
                .client
                .post(app.url("/oauth/register"))
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = r.status();
            (status, r.json::<Value>().await.unwrap())
        }
    };
    let (status, alone) = register(json!({
        "client_name": "Enterprise agent",
        "grant_types": [JWT_BEARER],
        "token_endpoint_auth_method": "client_secret_basic",
    }))
    .await;
    assert_eq!(status, StatusCode::CREATED, "{alone}");
    assert_eq!(alone["grant_types"], json!([JWT_BEARER]), "{alone}");
    let (status, both) = register(json!({
        "client_name": "Enterprise chat",
        "redirect_uris": [REDIRECT],
        "grant_types": ["authorization_code", JWT_BEARER],
        "token_endpoint_auth_method": "none",
    }))
    .await;
    assert_eq!(status, StatusCode::CREATED, "{both}");
    assert_eq!(
        both["grant_types"],
        json!(["authorization_code", JWT_BEARER, "refresh_token"]),
        "{both}"
    );

    let id = alone["client_id"].as_str().unwrap();
    let secret = alone["client_secret"].as_str().unwrap();
    let assertion = sign(&key, "oauth-id-jag+jwt", &claims(&app, id));
    let r = app
        .client
        .post(app.url("/oauth/token"))
        .basic_auth(id, Some(secret))
        .form(&[
            ("grant_type", JWT_BEARER),
            ("assertion", assertion.as_str()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["token_type"], "Bearer", "{body}");

    let public = both["client_id"].as_str().unwrap();
    let assertion = sign(&key, "oauth-id-jag+jwt", &claims(&app, public));
    let (status, body) = redeem(&app, public, &assertion, &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}
