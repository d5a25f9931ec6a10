//! JWT access tokens (RFC 9068) for resources registered with `--token-format jwt`, and the
//! JWKS (RFC 7517 §5) that publishes the keys they are signed with.
//!
//! Tokens are signed with ES256 (ECDSA P-256, SHA-256; RFC 7518 §3.4) by `jsonwebtoken`, header
//! `typ: at+jwt` (RFC 9068 §2.1) and the key's `kid`; claims `iss`, `sub`, `aud`, `client_id`,
//! `scope`, `exp`, `iat`, `jti` (§2.2). Key pairs come from `ring`; the private key (PKCS#8) is
//! stored sealed with the server key ([`crate::domain::server_key`]). There is one current
//! key: the first token signed (or the first JWKS served) without one creates it, and
//! `gatehouse signing-key rotate` retires it, so the next use creates a new one. A retired key
//! stays in the JWKS for [`MAX_TOKEN_TTL_SECS`] (the longest lifetime a resource may give its
//! tokens), then is dropped.
//!
//! A JWT access token is checked offline, so revoking it takes effect at its expiry; its
//! refresh token stays opaque and is revoked at once. The token is also stored hashed like an
//! opaque one, so introspection and grant revocation see it too.

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde::Serialize;
use serde_json::{Value, json};

use super::OAuthError;
use crate::domain::registry::MAX_TOKEN_TTL_SECS;
use crate::domain::secret::random_urlsafe;
use crate::state::AppState;
use crate::store::now;
use crate::store::signing_keys::SigningKeyRecord;

/// The `typ` header of a JWT access token (RFC 9068 §2.1).
pub const ACCESS_TOKEN_TYPE: &str = "at+jwt";

/// A private signing key, opened for use.
pub struct SigningKey {
    kid: String,
    pkcs8: Vec<u8>,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

/// The claims of a JWT access token (RFC 9068 §2.2).
#[derive(Debug, Serialize)]
pub struct AccessClaims<'a> {
    /// The issuer identifier.
    pub iss: &'a str,
    /// The account the token acts for.
    pub sub: &'a str,
    /// The resource URL (RFC 8707).
    pub aud: &'a str,
    /// The client it was issued to.
    pub client_id: &'a str,
    /// Space-delimited scopes.
    pub scope: &'a str,
    /// Expiry, Unix seconds.
    pub exp: i64,
    /// Issue time, Unix seconds.
    pub iat: i64,
    /// A unique id.
    pub jti: String,
    /// The DPoP key the token is bound to (RFC 9449 §6.1), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cnf: Option<Confirmation>,
}

/// The `cnf` claim of a DPoP-bound JWT access token (RFC 9449 §6.1, RFC 7800 §3.1).
#[derive(Debug, Serialize)]
pub struct Confirmation {
    /// The RFC 7638 thumbprint of the key.
    pub jkt: String,
}

/// Signs `claims` with `key`. Errors: `server_error` if the key cannot be used.
pub fn sign(key: &SigningKey, claims: &AccessClaims<'_>) -> Result<String, OAuthError> {
    let mut header = Header::new(Algorithm::ES256);
    header.typ = Some(ACCESS_TOKEN_TYPE.into());
    header.kid = Some(key.kid.clone());
    jsonwebtoken::encode(&header, claims, &EncodingKey::from_ec_der(&key.pkcs8)).map_err(|e| {
        tracing::error!(error = %e, "cannot sign a JWT access token");
        OAuthError::ServerError
    })
}

/// A new key pair: the record to store (private key sealed by `seal`) and the key to use.
fn generate(
    seal: impl Fn(&[u8], &[u8]) -> String,
    created_at: i64,
) -> Result<(SigningKeyRecord, SigningKey), OAuthError> {
    let failed = |what: &str| {
        tracing::error!("cannot {what} a signing key");
        OAuthError::ServerError
    };
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
        .map_err(|_| failed("generate"))?;
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
        .map_err(|_| failed("read"))?;
    // An uncompressed point: 0x04, then x and y, 32 bytes each (SEC 1 §2.3.3).
    let point = pair.public_key().as_ref();
    if point.len() != 65 || point[0] != 4 {
        return Err(failed("read"));
    }
    let kid = random_urlsafe(12);
    let jwk = json!({
        "kty": "EC",
        "crv": "P-256",
        "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
        "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
        "kid": kid,
        "use": "sig",
        "alg": "ES256",
    });
    let record = SigningKeyRecord {
        sealed_key: seal(kid.as_bytes(), pkcs8.as_ref()),
        kid: kid.clone(),
        public_jwk: jwk.to_string(),
        created_at,
        retired_at: None,
    };
    Ok((
        record,
        SigningKey {
            kid,
            pkcs8: pkcs8.as_ref().to_vec(),
        },
    ))
}

/// The current signing key, created (and stored) when there is none. Errors: `server_error`
/// without a server key or when the stored key cannot be opened.
pub async fn current_key(state: &AppState, now: i64) -> Result<SigningKey, OAuthError> {
    let keyring = state.keyring().map_err(|e| {
        tracing::error!("cannot sign JWT access tokens: {e}");
        OAuthError::ServerError
    })?;
    for _ in 0..2 {
        if let Some(record) = state.store.current_signing_key().await? {
            let pkcs8 = keyring
                .open(record.kid.as_bytes(), &record.sealed_key)
                .map_err(|e| {
                    tracing::error!(error = %e, kid = %record.kid, "cannot open the signing key");
                    OAuthError::ServerError
                })?;
            return Ok(SigningKey {
                kid: record.kid,
                pkcs8,
            });
        }
        let (record, key) = generate(|aad, plain| keyring.seal(aad, plain), now)?;
        if state.store.insert_signing_key(&record).await? {
            return Ok(key);
        }
        // Another instance stored one first: use it.
    }
    Err(OAuthError::ServerError)
}

/// `GET /oauth/jwks`: the JWK Set (RFC 7517 §5) of the current key and of retired keys whose
/// tokens may still be live; cacheable for five minutes.
pub async fn jwks(State(state): State<AppState>) -> Result<Response, OAuthError> {
    let now = now();
    // Publishing needs a current key to exist, so verifiers see it before its first token.
    if state.server_keys.is_some() {
        current_key(&state, now).await?;
    }
    let keys: Vec<Value> = state
        .store
        .published_signing_keys(now - MAX_TOKEN_TTL_SECS)
        .await?
        .into_iter()
        .filter_map(|k| serde_json::from_str(&k.public_jwk).ok())
        .collect();
    Ok((
        [(header::CACHE_CONTROL, "public, max-age=300")],
        Json(json!({ "keys": keys })),
    )
        .into_response())
}
