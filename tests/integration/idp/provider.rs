//! A small OpenID provider on a random loopback port for the sign-in tests: discovery, a key
//! set, an authorization endpoint that signs the configured person in at once (redirecting
//! back with a code), and a token endpoint that checks the client secret and the PKCE verifier
//! (RFC 7636 §4.6) and answers an ES256 ID token. Its ID tokens can be spoiled on purpose
//! ([`Spoil`]) to show that Gatehouse refuses them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

/// The client the tests register at the provider.
pub(crate) const CLIENT_ID: &str = "gatehouse-test";
/// Its secret.
pub(crate) const CLIENT_SECRET: &str = "s3cret-at-the-provider";

/// How the next ID token is spoiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spoil {
    /// A good token.
    None,
    /// Signed by a key the provider does not publish (same `kid`).
    ForgedSignature,
    /// `exp` an hour ago.
    Expired,
    /// Another `nonce`.
    WrongNonce,
    /// `aud` another client.
    WrongAudience,
    /// `iss` another issuer.
    WrongIssuer,
}

/// The person the authorization endpoint signs in.
#[derive(Debug, Clone)]
pub(crate) struct Person {
    pub sub: String,
    pub email: Option<String>,
    pub email_verified: bool,
}

struct Key {
    kid: String,
    encoding: EncodingKey,
    jwk: Value,
}

fn es256(kid: &str) -> Key {
    let rng = ring::rand::SystemRandom::new();
    let alg = &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING;
    let pkcs8 = ring::signature::EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
    let pair = ring::signature::EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap();
    let point = ring::signature::KeyPair::public_key(&pair)
        .as_ref()
        .to_vec();
    let b64u = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    Key {
        kid: kid.to_string(),
        encoding: EncodingKey::from_ec_der(pkcs8.as_ref()),
        jwk: json!({"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig", "alg": "ES256",
                    "x": b64u(&point[1..33]), "y": b64u(&point[33..65])}),
    }
}

struct Grant {
    nonce: Option<String>,
    challenge: String,
    person: Person,
}

struct Inner {
    issuer: String,
    key: Key,
    person: Person,
    spoil: Spoil,
    codes: HashMap<String, Grant>,
    token_requests: usize,
    jwks_requests: usize,
}

/// A running provider.
#[derive(Clone)]
pub(crate) struct Provider {
    /// `http://127.0.0.1:PORT`.
    pub issuer: String,
    inner: Arc<Mutex<Inner>>,
}

impl Provider {
    /// Starts a provider signing in `person`.
    pub(crate) async fn start(person: Person) -> Provider {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let issuer = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let inner = Arc::new(Mutex::new(Inner {
            issuer: issuer.clone(),
            key: es256("key-1"),
            person,
            spoil: Spoil::None,
            codes: HashMap::new(),
            token_requests: 0,
            jwks_requests: 0,
        }));
        let app = axum::Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/jwks", get(jwks))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .with_state(Arc::clone(&inner));
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Provider { issuer, inner }
    }

    /// Signs in `person` from now on.
    pub(crate) fn set_person(&self, person: Person) {
        self.inner.lock().unwrap().person = person;
    }

    /// Spoils the ID tokens from now on.
    pub(crate) fn spoil(&self, spoil: Spoil) {
        self.inner.lock().unwrap().spoil = spoil;
    }

    /// Replaces the signing key by a new one with another `kid` (key rotation).
    pub(crate) fn rotate_key(&self, kid: &str) {
        self.inner.lock().unwrap().key = es256(kid);
    }

    /// Requests the token endpoint has served.
    pub(crate) fn token_requests(&self) -> usize {
        self.inner.lock().unwrap().token_requests
    }

    /// Requests the key set has served.
    pub(crate) fn jwks_requests(&self) -> usize {
        self.inner.lock().unwrap().jwks_requests
    }
}

type Shared = State<Arc<Mutex<Inner>>>;

async fn discovery(State(inner): Shared) -> Response {
    let issuer = inner.lock().unwrap().issuer.clone();
    axum::Json(json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "jwks_uri": format!("{issuer}/jwks"),
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["ES256"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
        "code_challenge_methods_supported": ["S256"],
        "scopes_supported": ["openid", "email"],
    }))
    .into_response()
}

async fn jwks(State(inner): Shared) -> Response {
    let mut inner = inner.lock().unwrap();
    inner.jwks_requests += 1;
    axum::Json(json!({"keys": [inner.key.jwk.clone()]})).into_response()
}

async fn authorize(State(inner): Shared, Query(q): Query<HashMap<String, String>>) -> Response {
    let mut inner = inner.lock().unwrap();
    let ok = q.get("client_id").map(String::as_str) == Some(CLIENT_ID)
        && q.get("response_type").map(String::as_str) == Some("code")
        && q.get("code_challenge_method").map(String::as_str) == Some("S256")
        && q.get("scope")
            .is_some_and(|s| s.split(' ').any(|w| w == "openid"));
    let (Some(redirect), Some(state), Some(challenge), true) = (
        q.get("redirect_uri"),
        q.get("state"),
        q.get("code_challenge"),
        ok,
    ) else {
        return (StatusCode::BAD_REQUEST, "bad authorization request").into_response();
    };
    let code = gatehouse::domain::secret::random_urlsafe(16);
    let person = inner.person.clone();
    inner.codes.insert(
        code.clone(),
        Grant {
            nonce: q.get("nonce").cloned(),
            challenge: challenge.clone(),
            person,
        },
    );
    let sep = if redirect.contains('?') { '&' } else { '?' };
    Redirect::to(&format!("{redirect}{sep}code={code}&state={state}")).into_response()
}

async fn token(
    State(inner): Shared,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let mut inner = inner.lock().unwrap();
    inner.token_requests += 1;
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{CLIENT_ID}:{CLIENT_SECRET}"))
    );
    if headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        != Some(&expected)
    {
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({"error": "invalid_client"})),
        )
            .into_response();
    }
    let invalid_grant = || {
        (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": "invalid_grant"})),
        )
            .into_response()
    };
    let Some(grant) = form.get("code").and_then(|c| inner.codes.remove(c)) else {
        return invalid_grant();
    };
    let Some(verifier) = form.get("code_verifier") else {
        return invalid_grant();
    };
    if gatehouse::domain::pkce::s256_challenge(verifier) != grant.challenge {
        return invalid_grant();
    }
    let now = gatehouse::store::now();
    let mut claims = json!({
        "iss": inner.issuer,
        "sub": grant.person.sub,
        "aud": CLIENT_ID,
        "iat": now,
        "exp": now + 300,
        "nonce": grant.nonce,
    });
    if let Some(email) = &grant.person.email {
        claims["email"] = json!(email);
        claims["email_verified"] = json!(grant.person.email_verified);
    }
    let forged;
    let mut key = &inner.key;
    match inner.spoil {
        Spoil::None => {}
        Spoil::ForgedSignature => {
            forged = es256(&inner.key.kid);
            key = &forged;
        }
        Spoil::Expired => {
            claims["iat"] = json!(now - 7200);
            claims["exp"] = json!(now - 3600);
        }
        Spoil::WrongNonce => claims["nonce"] = json!("another-nonce"),
        Spoil::WrongAudience => claims["aud"] = json!("another-client"),
        Spoil::WrongIssuer => claims["iss"] = json!("https://evil.example.com"),
    }
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(key.kid.clone());
    let id_token = jsonwebtoken::encode(&header, &claims, &key.encoding).unwrap();
    axum::Json(json!({
        "access_token": gatehouse::domain::secret::random_urlsafe(16),
        "token_type": "Bearer",
        "expires_in": 300,
        "id_token": id_token,
    }))
    .into_response()
}
