//! `private_key_jwt` client authentication (RFC 7523 §2.2, §3; `OpenID` Connect Core §9): the
//! assertions are made by an independent maker, the `jsonwebtoken` crate's encoder, with keys
//! made by `ring` (Ed25519, P-256) and `openssl` (the RSA test key below).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use base64::Engine;
use gatehouse::domain::cimd::CimdError;
use gatehouse::oauth::clients::{Fetched, MetadataFetcher};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::StatusCode;
use ring::signature::KeyPair;
use serde_json::{Value, json};
use url::Url;

use crate::helpers::{TestApp, new_client, spawn_app_full, spawn_twin_with_fetcher};
use crate::keys::gatehouse;
use crate::oauth_helpers::*;

/// A 2048-bit RSA key made with `openssl genrsa` for these tests only (PKCS #1 DER, base64).
const RSA_DER_B64: &str = "MIIEpQIBAAKCAQEAxiDSxc7kUcAxRuq+zutz4bzm/qg2TqX4AajWqels410fIImJraiVTclABcBLfB2TM7rmIAI786z+uuMCk1n4etI+T/m0j+MmE5PUNvQk6M7viHnTpfCq5cowbXC154qtZwLVkvnq9HChsT1zmSPwRaLAcNw8MJkNCch6htPGfkHowJBqymzMii/bFkLM+Bqx/5vUwTIKLoQ2bcJ79a4Y/A20suJCe2r05HbMM+Z4JpgavAPyjPvYViDSNcZcQw2+NP+KbZT1uhri+G+NbAriwSnvTPcdDG01zzZB39tGtex2TrQqLAoIXU+7APCHa/QLVlPagC1ExSOFP+5QNEcGhwIDAQABAoIBAEoY8HrmG2GvnT5GgMHmMNqVyVYoFtdnHs+QE2hMUlrd8sw6Y/E8gUosH/OGrTRn4yuPlI0YCM/jPQkr6USue02D36YNX0gIza64tL8wo7Ul31ONLGh9D40NBvuHEaDcrmk+GB31tbdhgDdHIjp9xFhmu835r9EFDGlCPwC5pxyEZRVkPlY0Xq2r5ci6VZnL3OmYxhoO2lH40N8hQyMS5MGsSvdUkZXhPqrsNlLJKXGRefRLDkIV+jMGxs+tQt+PJ6GsCnjGi7iOOKR/vtEm/dcZnF7hfzO+ql5fHIZ/tZgMtP58neJWnDwL89RMVZykUQJzAJ30i0zI2Si4BhiraEECgYEA7WB6ekgww90ZYBonQl4/jqiGVfVaA8Gs/cdcl93vDh6PckDZxa+k6uA5+RSAUiqJIHQLFGJEMb3GfYs2DgYTsKjN5CrzrVmHO1aZ7+spXTsZc/ZLBLznf/rIi6ex7P6TmLv0I63FdgTXAtd0bF7SKPGKCnU4LberTuGV6g9UA9ECgYEA1awRTgwDiiX9ZdvqbUqwzwPidy8PBeTxbcBiEMA4Ho7auvs9ZA7nT24t+u1v1rOatknXdbqJ5mGHXrrwtGECwFpAL98PcsrM1mq+tOk/HePny3HEaM431VH6v3TieL1RgGTW1S8nh4Sb5gMBNs2bvG36xDBA998n+gYDLrepMtcCgYEAyDnJFbwu5gdpkBZ/Zwv4sGyWY4tBEkobkTTIdZFOQ6qjdMwe5RDzGutn+yG/247le+pmLht1Sj+5Xcw/HDUkBq9cfEl+oYoS94pk7mp9yZZAMgBd5vEwlFMFNkeNXUqfVQW1OSMqnBIZCtyR55dTzhVvSsL1UBrM9QxzV6r2QwECgYEAyC5PfBZHTqsuzroM092w7hGOnuhoo7YM9izR8y2SphZiF+F/b3mC/eiUjUzbhYN4w6VEhZiAz2S55WcwUV29rSYgknjhSUN0SsFw757CMietpu1r/GCO8HzAdZR1BHchny9aEhn+Z7k2MXTJM2XHrO5AjINEqrTYCCaP3rnUe7sCgYEAz2A3NwxGENyvZdHzavGNz8wT4Vb3Fi11aOJVVpUWbs9tW1Ui7pGK51VM3jHJXRgLzRCbHR5SNZN+CMKh2VeT3V4ly5bAoXyDNRrVH7siGZsHfRLU1JEsjFzwf/NdnamoqyD8jIqIZShQoT059sXSJoey4rc+BUdbBC+E/opuV3g=";
/// Its modulus (base64url); the exponent is 65537 (`AQAB`).
const RSA_N: &str = "xiDSxc7kUcAxRuq-zutz4bzm_qg2TqX4AajWqels410fIImJraiVTclABcBLfB2TM7rmIAI786z-uuMCk1n4etI-T_m0j-MmE5PUNvQk6M7viHnTpfCq5cowbXC154qtZwLVkvnq9HChsT1zmSPwRaLAcNw8MJkNCch6htPGfkHowJBqymzMii_bFkLM-Bqx_5vUwTIKLoQ2bcJ79a4Y_A20suJCe2r05HbMM-Z4JpgavAPyjPvYViDSNcZcQw2-NP-KbZT1uhri-G-NbAriwSnvTPcdDG01zzZB39tGtex2TrQqLAoIXU-7APCHa_QLVlPagC1ExSOFP-5QNEcGhw";

const JWKS_URI: &str = "https://svc.example.com/jwks.json";

/// A signing key and its public JWK.
pub(crate) struct TestKey {
    pub(crate) alg: Algorithm,
    pub(crate) kid: String,
    pub(crate) encoding: EncodingKey,
    pub(crate) jwk: Value,
}

fn b64u(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn ed25519(kid: &str) -> TestKey {
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = ring::signature::Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
    let pair = ring::signature::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
    TestKey {
        alg: Algorithm::EdDSA,
        kid: kid.into(),
        encoding: EncodingKey::from_ed_der(pkcs8.as_ref()),
        jwk: json!({"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": b64u(pair.public_key().as_ref())}),
    }
}

pub(crate) fn es256(kid: &str) -> TestKey {
    let rng = ring::rand::SystemRandom::new();
    let alg = &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING;
    let pkcs8 = ring::signature::EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
    let pair = ring::signature::EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap();
    let point = pair.public_key().as_ref();
    TestKey {
        alg: Algorithm::ES256,
        kid: kid.into(),
        encoding: EncodingKey::from_ec_der(pkcs8.as_ref()),
        jwk: json!({"kty": "EC", "crv": "P-256", "kid": kid, "x": b64u(&point[1..33]), "y": b64u(&point[33..65])}),
    }
}

pub(crate) fn rsa(kid: &str, alg: Algorithm) -> TestKey {
    let der = base64::engine::general_purpose::STANDARD
        .decode(RSA_DER_B64)
        .unwrap();
    TestKey {
        alg,
        kid: kid.into(),
        encoding: EncodingKey::from_rsa_der(&der),
        jwk: json!({"kty": "RSA", "kid": kid, "n": RSA_N, "e": "AQAB"}),
    }
}

/// An assertion by `key` with these claims (`exp` `exp_in` seconds from now).
fn sign(key: &TestKey, iss: &str, sub: &str, aud: &str, exp_in: i64) -> String {
    let now = gatehouse::store::now();
    let mut header = Header::new(key.alg);
    header.kid = Some(key.kid.clone());
    let claims = json!({
        "iss": iss, "sub": sub, "aud": aud, "iat": now, "exp": now + exp_in,
        "jti": gatehouse::domain::secret::random_urlsafe(16),
    });
    jsonwebtoken::encode(&header, &claims, &key.encoding).unwrap()
}

/// A valid assertion of `client_id` for this server's token endpoint.
fn assertion(app: &TestApp, key: &TestKey, client_id: &str) -> String {
    sign(key, client_id, client_id, &app.url("/oauth/token"), 120)
}

/// Serves metadata documents and key sets from memory, counting key-set fetches; a URL in
/// `down` fails for now.
#[derive(Default)]
pub(crate) struct KeyFetcher {
    docs: Mutex<HashMap<String, Value>>,
    down: Mutex<Vec<String>>,
    jwks_fetches: AtomicUsize,
}

impl KeyFetcher {
    pub(crate) fn serve(&self, url: &str, doc: Value) {
        self.docs.lock().unwrap().insert(url.into(), doc);
    }

    fn answer(&self, url: &Url) -> Result<Fetched, CimdError> {
        if self.down.lock().unwrap().iter().any(|d| d == url.as_str()) {
            return Err(CimdError::Unavailable("HTTP status 502".into()));
        }
        match self.docs.lock().unwrap().get(url.as_str()) {
            Some(doc) => Ok(Fetched {
                body: doc.to_string().into_bytes(),
                cache_control: Some("max-age=600".into()),
            }),
            None => Err(CimdError::Fetch("HTTP status 404".into())),
        }
    }
}

#[async_trait]
impl MetadataFetcher for KeyFetcher {
    async fn fetch(&self, url: &Url) -> Result<Fetched, CimdError> {
        self.answer(url)
    }

    async fn fetch_jwks(&self, url: &Url) -> Result<Fetched, CimdError> {
        self.jwks_fetches.fetch_add(1, Ordering::SeqCst);
        self.answer(url)
    }
}

/// `POST path` with `form`: (status, JSON body or null).
async fn post(app: &TestApp, path: &str, form: &[(&str, &str)]) -> (StatusCode, Value) {
    let r = app
        .client
        .post(app.url(path))
        .form(form)
        .send()
        .await
        .unwrap();
    let status = r.status();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// `client_credentials` with `assertion`: (status, JSON body).
async fn service_token(app: &TestApp, assertion: &str) -> (StatusCode, Value) {
    post(
        app,
        "/oauth/token",
        &[
            ("grant_type", "client_credentials"),
            (
                "client_assertion_type",
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            ),
            ("client_assertion", assertion),
        ],
    )
    .await
}

#[tokio::test]
async fn metadata_advertises_private_key_jwt_and_asymmetric_algorithms_only() {
    let app = spawn_app_full(|_| {}, Arc::new(KeyFetcher::default())).await;
    let m: Value = app
        .client
        .get(app.url("/.well-known/oauth-authorization-server"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let algs = json!(["RS256", "PS256", "ES256", "EdDSA"]);
    for endpoint in ["token", "revocation", "introspection"] {
        let methods = m[format!("{endpoint}_endpoint_auth_methods_supported")]
            .as_array()
            .unwrap();
        assert!(methods.contains(&json!("private_key_jwt")), "{endpoint}");
        assert_eq!(
            m[format!("{endpoint}_endpoint_auth_signing_alg_values_supported")],
            algs,
            "{endpoint}"
        );
    }
}

#[tokio::test]
async fn a_service_client_with_a_jwks_uri_authenticates_with_signed_assertions() {
    let fetcher = Arc::new(KeyFetcher::default());
    let (ed, ec, rs, ps) = (
        ed25519("ed"),
        es256("ec"),
        rsa("rs", Algorithm::RS256),
        rsa("ps", Algorithm::PS256),
    );
    fetcher.serve(JWKS_URI, json!({"keys": [ed.jwk, ec.jwk, rs.jwk, ps.jwk]}));
    let app = spawn_app_full(|_| {}, fetcher.clone()).await;
    app.create_account(EMAIL, PASSWORD).await;
    let (ok, out, err) = gatehouse(
        &app,
        &[
            "client",
            "add",
            "Svc",
            "--service",
            "--owner",
            EMAIL,
            "--introspect",
            "--jwks-uri",
            JWKS_URI,
        ],
    );
    assert!(ok, "{err}");
    assert!(!out.contains("client_secret"), "no secret is made: {out}");
    let id = out
        .lines()
        .find_map(|l| l.strip_prefix("client_id: "))
        .unwrap()
        .to_string();

    // Each accepted algorithm, aud naming the token endpoint or the issuer.
    for (key, aud) in [
        (&ed, app.url("/oauth/token")),
        (&ec, app.address.clone()),
        (&rs, app.url("/oauth/token")),
        (&ps, app.address.clone()),
    ] {
        let (s, b) = service_token(&app, &sign(key, &id, &id, &aud, 120)).await;
        assert_eq!(s, StatusCode::OK, "{:?}: {b}", key.alg);
        assert_eq!(b["token_type"], "Bearer");
        assert!(b.get("refresh_token").is_none());
    }
    assert_eq!(
        fetcher.jwks_fetches.load(Ordering::SeqCst),
        1,
        "the key set is cached"
    );

    // Single use: the same assertion again is refused.
    let once = assertion(&app, &ed, &id);
    let (s, b) = service_token(&app, &once).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let token = b["access_token"].as_str().unwrap().to_string();
    let (s, b) = service_token(&app, &once).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert_eq!(b["error"], "invalid_client");
    assert!(
        b["error_description"]
            .as_str()
            .unwrap()
            .contains("already used"),
        "{b}"
    );

    // Refusals, each invalid_client.
    let token_endpoint = app.url("/oauth/token");
    let stranger = ed25519("ed");
    let hs = TestKey {
        alg: Algorithm::HS256,
        kid: "ed".into(),
        encoding: EncodingKey::from_secret(b"a shared secret the server never holds"),
        jwk: Value::Null,
    };
    for (why, bad) in [
        (
            "aud names another server",
            sign(&ed, &id, &id, "https://elsewhere.example/token", 120),
        ),
        (
            "exp 10 minutes ahead",
            sign(&ed, &id, &id, &token_endpoint, 600),
        ),
        ("expired", sign(&ed, &id, &id, &token_endpoint, -120)),
        (
            "iss is not the client",
            sign(&ed, "gc_other", &id, &token_endpoint, 120),
        ),
        (
            "signed by a key outside the set",
            sign(&stranger, &id, &id, &token_endpoint, 120),
        ),
        (
            "a symmetric algorithm",
            sign(&hs, &id, &id, &token_endpoint, 120),
        ),
        ("not a JWT", "not.a.jwt".to_string()),
    ] {
        let (s, b) = service_token(&app, &bad).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{why}: {b}");
        assert_eq!(b["error"], "invalid_client", "{why}");
    }
    // An unknown kid fetches the key set again, once per interval.
    let before = fetcher.jwks_fetches.load(Ordering::SeqCst);
    for _ in 0..3 {
        let (s, _) = service_token(&app, &assertion(&app, &ed25519("new"), &id)).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED);
    }
    assert_eq!(fetcher.jwks_fetches.load(Ordering::SeqCst), before + 1);
    // A secret is no way in for this client.
    let r = app
        .client
        .post(app.url("/oauth/token"))
        .basic_auth(&id, Some("gate_cs_guess"))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    // Introspection and revocation accept the assertion too.
    let (s, b) = post(
        &app,
        "/oauth/introspect",
        &[
            ("token", &token),
            (
                "client_assertion_type",
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            ),
            ("client_assertion", &assertion(&app, &ec, &id)),
        ],
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["active"], true);
    assert_eq!(b["client_id"], id);
    let (s, _) = post(
        &app,
        "/oauth/revoke",
        &[
            ("token", &token),
            (
                "client_assertion_type",
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            ),
            ("client_assertion", &assertion(&app, &ec, &id)),
        ],
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert!(!access_token_live(&app, &token).await);
}

#[tokio::test]
async fn an_assertion_is_spent_across_instances() {
    let fetcher = Arc::new(KeyFetcher::default());
    let ed = ed25519("ed");
    fetcher.serve(JWKS_URI, json!({"keys": [ed.jwk]}));
    let a = spawn_app_full(|_| {}, fetcher.clone()).await;
    a.create_account(EMAIL, PASSWORD).await;
    let (ok, out, err) = gatehouse(
        &a,
        &[
            "client",
            "add",
            "Svc",
            "--service",
            "--owner",
            EMAIL,
            "--jwks-uri",
            JWKS_URI,
        ],
    );
    assert!(ok, "{err}");
    let id = out
        .lines()
        .find_map(|l| l.strip_prefix("client_id: "))
        .unwrap()
        .to_string();
    // B serves the same issuer from the same database.
    let b = spawn_twin_with_fetcher(&a, fetcher.clone()).await;
    let once = assertion(&a, &ed, &id);
    let (s, body) = service_token(&a, &once).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let (s, body) = service_token(&b, &once).await;
    assert_eq!(
        s,
        StatusCode::UNAUTHORIZED,
        "a replay at the other instance: {body}"
    );
    assert!(
        body["error_description"]
            .as_str()
            .unwrap()
            .contains("already used")
    );
    // A fresh assertion works there: the refusal was the replay.
    let (s, body) = service_token(&b, &assertion(&a, &ed, &id)).await;
    assert_eq!(s, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn a_registered_client_with_inline_keys_redeems_its_code_with_assertions() {
    let fetcher = Arc::new(KeyFetcher::default());
    let app = spawn_app_full(|_| {}, fetcher).await;
    let ec = es256("k1");
    let r = app
        .client
        .post(app.url("/oauth/register"))
        .json(&json!({
            "redirect_uris": [REDIRECT], "client_name": "Test Client",
            "token_endpoint_auth_method": "private_key_jwt", "jwks": {"keys": [ec.jwk]},
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let reg: Value = r.json().await.unwrap();
    assert!(reg.get("client_secret").is_none(), "{reg}");
    assert_eq!(reg["token_endpoint_auth_method"], "private_key_jwt");
    assert_eq!(reg["jwks"]["keys"][0]["kid"], "k1");
    let id = reg["client_id"].as_str().unwrap().to_string();
    let (code, verifier) = code_for(&app, &id).await;
    // Without an assertion the client is refused.
    let (s, _, _) = exchange(&app, &id, &code, &verifier, &[]).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (code, verifier) = code_for(&app, &id).await;
    let jwt = assertion(&app, &ec, &id);
    let (s, b, _) = exchange(
        &app,
        &id,
        &code,
        &verifier,
        &[
            (
                "client_assertion_type",
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            ),
            ("client_assertion", &jwt),
        ],
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let jwt = assertion(&app, &ec, &id);
    let (s, b) = post(
        &app,
        "/oauth/token",
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", b["refresh_token"].as_str().unwrap()),
            (
                "client_assertion_type",
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            ),
            ("client_assertion", &jwt),
        ],
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");

    // Registration refusals: RFC 7591 §3.2.2 invalid_client_metadata.
    let ed = ed25519("e");
    let mut private = ed.jwk.clone();
    private["d"] = json!("c2VjcmV0");
    for (why, body) in [
        (
            "no keys",
            json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "private_key_jwt"}),
        ),
        (
            "a private key",
            json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "private_key_jwt", "jwks": {"keys": [private]}}),
        ),
        (
            "both",
            json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "private_key_jwt", "jwks": {"keys": [ed.jwk]}, "jwks_uri": JWKS_URI}),
        ),
        (
            "http jwks_uri",
            json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "private_key_jwt", "jwks_uri": "http://svc.example.com/jwks.json"}),
        ),
    ] {
        let r = app
            .client
            .post(app.url("/oauth/register"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{why}");
        assert_eq!(
            r.json::<Value>().await.unwrap()["error"],
            "invalid_client_metadata",
            "{why}"
        );
    }
}

#[tokio::test]
async fn a_metadata_document_client_with_private_key_jwt_connects() {
    // The shape ChatGPT's and Codex's documents have.
    const CLIENT: &str = "https://chat.example.com/oauth/client.json";
    const DOWN: &str = "https://down.example.com/oauth/client.json";
    let fetcher = Arc::new(KeyFetcher::default());
    let ed = ed25519("chat-1");
    fetcher.serve(CLIENT, json!({
        "client_id": CLIENT, "client_name": "Chat App", "redirect_uris": [REDIRECT],
        "token_endpoint_auth_method": "private_key_jwt", "jwks_uri": "https://chat.example.com/jwks.json",
    }));
    fetcher.serve(
        "https://chat.example.com/jwks.json",
        json!({"keys": [ed.jwk]}),
    );
    fetcher.serve(DOWN, json!({
        "client_id": DOWN, "client_name": "Down App", "redirect_uris": [REDIRECT],
        "token_endpoint_auth_method": "private_key_jwt", "jwks_uri": "https://down.example.com/jwks.json",
    }));
    fetcher
        .down
        .lock()
        .unwrap()
        .push("https://down.example.com/jwks.json".into());
    let app = spawn_app_full(|_| {}, fetcher.clone()).await;
    let (verifier, challenge) = pkce();
    let browser = new_client();
    let loc = walk(
        &app,
        &browser,
        &authorize_url(&app, CLIENT, &challenge, &[]),
        "approve",
    )
    .await;
    let code = query_of(&loc)["code"].clone();
    let jwt = sign(&ed, CLIENT, CLIENT, &app.address, 120);
    let (s, b, _) = exchange(
        &app,
        CLIENT,
        &code,
        &verifier,
        &[
            (
                "client_assertion_type",
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            ),
            ("client_assertion", &jwt),
        ],
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["token_type"], "Bearer");
    // A key set that cannot be fetched right now: 503, never invalid_client.
    let (s, b) = post(
        &app,
        "/oauth/token",
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", "gate_rt_x"),
            (
                "client_assertion_type",
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            ),
            (
                "client_assertion",
                &sign(&ed, DOWN, DOWN, &app.address, 120),
            ),
        ],
    )
    .await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{b}");
    assert_eq!(b["error"], "temporarily_unavailable");
}

#[tokio::test]
async fn a_service_client_with_a_key_set_file_authenticates_with_signed_assertions() {
    let fetcher = Arc::new(KeyFetcher::default());
    let app = spawn_app_full(|_| {}, fetcher.clone()).await;
    app.create_account(EMAIL, PASSWORD).await;
    let dir = tempfile::tempdir().unwrap();
    let (rs, ec) = (rsa("file-rs", Algorithm::RS256), es256("file-ec"));
    let file = dir.path().join("jwks.json");
    std::fs::write(&file, json!({"keys": [rs.jwk, ec.jwk]}).to_string()).unwrap();
    let file_arg = file.to_str().unwrap();
    let (ok, out, err) = gatehouse(
        &app,
        &[
            "client",
            "add",
            "Svc",
            "--service",
            "--owner",
            EMAIL,
            "--jwks-file",
            file_arg,
        ],
    );
    assert!(ok, "{err}");
    assert!(!out.contains("client_secret"), "no secret is made: {out}");
    assert!(out.contains("private_key_jwt"), "{out}");
    let id = out
        .lines()
        .find_map(|l| l.strip_prefix("client_id: "))
        .unwrap()
        .to_string();
    for key in [&rs, &ec] {
        let (s, b) = service_token(&app, &sign(key, &id, &id, &app.address, 120)).await;
        assert_eq!(s, StatusCode::OK, "{:?}: {b}", key.alg);
    }
    // A key outside the set, and no fetch of anything: the keys are the file's.
    let (s, b) = service_token(&app, &sign(&es256("other"), &id, &id, &app.address, 120)).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{b}");
    assert_eq!(b["error"], "invalid_client");
    assert_eq!(fetcher.jwks_fetches.load(Ordering::SeqCst), 0);

    // A file with a private key member, not JSON, or missing: one line, nothing made.
    let private = dir.path().join("private.json");
    let mut leaked = rs.jwk.clone();
    leaked["d"] = json!("c2VjcmV0");
    std::fs::write(&private, json!({"keys": [leaked]}).to_string()).unwrap();
    let garbage = dir.path().join("garbage.json");
    std::fs::write(&garbage, "not json").unwrap();
    for (path, why) in [
        (private, "private"),
        (garbage, "not JSON"),
        (dir.path().join("missing.json"), "missing.json"),
    ] {
        let (ok, _, err) = gatehouse(
            &app,
            &[
                "client",
                "add",
                "Bad",
                "--service",
                "--owner",
                EMAIL,
                "--jwks-file",
                path.to_str().unwrap(),
            ],
        );
        assert!(!ok, "{why}");
        assert!(err.contains("--jwks-file"), "{why}: {err}");
        assert!(err.contains(why), "{why}: {err}");
    }
}
