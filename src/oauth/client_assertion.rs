//! `private_key_jwt` client authentication (RFC 7523 §2.2 and §3, RFC 7521 §4.2, `OpenID`
//! Connect Core §9) at the token, revocation and introspection endpoints: the client sends
//! `client_assertion_type` = [`CLIENT_ASSERTION_TYPE`] and `client_assertion`, a JWT it
//! signed with a key of its published set (`jwks_uri`, fetched through the same protected
//! fetcher as metadata documents and cached, or `jwks` given at registration).
//!
//! The signature is checked by the `jsonwebtoken` crate with an asymmetric algorithm only
//! ([`SIGNING_ALGS`]); the claims by [`check_claims`]; the `jti` is spent in the database
//! ([`Store::spend_client_assertion`](crate::store::Store::spend_client_assertion)), so an
//! assertion is accepted once across instances.

use std::collections::HashMap;

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;

use super::OAuthError;
use super::clients::{ClientLookupError, FetchFor};
use super::error::AUTHENTICATION_FAILED;
use crate::domain::client::ClientId;
use crate::domain::client_assertion::{
    AssertionClaims, CLIENT_ASSERTION_TYPE, PRIVATE_KEY_JWT, SIGNING_ALGS, check_claims,
};
use crate::domain::secret::Secret;
use crate::state::AppState;
use crate::store::auth_cache::Reads;
use crate::store::oauth::ClientRecord;

/// Longest `client_assertion` read, in bytes.
pub const MAX_ASSERTION_BYTES: usize = 8 * 1024;

/// The two members read before the signature is checked, to find the client.
#[derive(Deserialize)]
struct Unverified {
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    iss: Option<String>,
}

fn refused(description: impl Into<String>) -> OAuthError {
    OAuthError::InvalidClient {
        description: description.into(),
        basic: false,
    }
}

/// Authenticates the client of a `client_assertion` (with `client_assertion_type`, and the
/// optional `client_id`, which must then name the same client, RFC 7521 §4.2).
///
/// Returns the client and the request's cached reads it was looked up with ([`Reads`]).
///
/// Errors: `invalid_client` (401) for a wrong assertion type, an assertion that is no JWT, an
/// algorithm outside [`SIGNING_ALGS`], an unknown client or one that does not use
/// `private_key_jwt` (both [`AUTHENTICATION_FAILED`]), a signature no key of the client's set
/// verifies, refused claims ([`check_claims`]) or a `jti` already spent;
/// `temporarily_unavailable` (503) when the client's metadata document or key set cannot be
/// fetched right now; `invalid_request` for a `client_id` naming another client.
pub async fn authenticate(
    app: &AppState,
    params: &HashMap<String, String>,
    for_whom: &FetchFor,
) -> Result<(ClientRecord, Reads), OAuthError> {
    if params.get("client_assertion_type").map(String::as_str) != Some(CLIENT_ASSERTION_TYPE) {
        return Err(refused(format!(
            "client_assertion_type must be {CLIENT_ASSERTION_TYPE}"
        )));
    }
    let assertion = params
        .get("client_assertion")
        .ok_or_else(|| refused("client_assertion is missing"))?;
    if assertion.len() > MAX_ASSERTION_BYTES {
        return Err(refused("the client assertion is too large"));
    }
    let header = jsonwebtoken::decode_header(assertion)
        .map_err(|_| refused("the client assertion is not a signed JWT"))?;
    let alg_name = algorithm_name(header.alg);
    if !SIGNING_ALGS.contains(&alg_name) {
        return Err(refused(format!(
            "the client assertion's alg {alg_name} is not accepted (use RS256, PS256, ES256 or EdDSA)"
        )));
    }
    let claimed = unverified_subject(assertion, header.alg)?;
    let client_id = match params.get("client_id") {
        Some(id) if *id != claimed => {
            return Err(OAuthError::InvalidRequest(
                "client_id differs from the client assertion's subject".into(),
            ));
        }
        _ => claimed,
    };
    let Ok(parsed_id) = ClientId::parse(&client_id) else {
        return Err(refused(AUTHENTICATION_FAILED));
    };
    let mut reads = app.store.reads();
    let client = match app
        .clients
        .lookup_with(&mut reads, &parsed_id, for_whom)
        .await
    {
        Ok(Some(c)) => c,
        Ok(None) => return Err(refused(AUTHENTICATION_FAILED)),
        Err(ClientLookupError::Metadata(e)) if e.is_temporary() => {
            return Err(OAuthError::ClientMetadataUnavailable);
        }
        Err(ClientLookupError::Metadata(e)) => return Err(refused(e.to_string())),
        Err(e @ ClientLookupError::Throttled(_)) => return Err(refused(e.to_string())),
        Err(ClientLookupError::Store(e)) => return Err(e.into()),
    };
    if client.token_endpoint_auth_method != PRIVATE_KEY_JWT {
        return Err(refused(AUTHENTICATION_FAILED));
    }
    let claims = verify_signature(app, &client, assertion, &header).await?;
    let config = &app.config;
    let token_endpoint = config.url("/oauth/token");
    let now = crate::store::now();
    check_claims(
        &claims,
        &client.client_id,
        &[token_endpoint.as_str(), config.issuer.as_str()],
        now,
    )
    .map_err(|e| refused(e.to_string()))?;
    let jti = Secret::from_presented(claims.jti.clone()).hash();
    if !app
        .store
        .spend_client_assertion(&client.client_id, &jti, claims.exp, now)
        .await?
    {
        return Err(refused("the client assertion was already used"));
    }
    Ok((client, reads))
}

/// The JOSE name of `alg` (RFC 7518 §3.1, RFC 8037 §3.1).
pub fn algorithm_name(alg: Algorithm) -> &'static str {
    match alg {
        Algorithm::HS256 => "HS256",
        Algorithm::HS384 => "HS384",
        Algorithm::HS512 => "HS512",
        Algorithm::ES256 => "ES256",
        Algorithm::ES384 => "ES384",
        Algorithm::RS256 => "RS256",
        Algorithm::RS384 => "RS384",
        Algorithm::RS512 => "RS512",
        Algorithm::PS256 => "PS256",
        Algorithm::PS384 => "PS384",
        Algorithm::PS512 => "PS512",
        Algorithm::EdDSA => "EdDSA",
    }
}

/// The client an assertion says it is from (`sub`, else `iss`), read before its signature is
/// checked only to find whose keys check it.
fn unverified_subject(assertion: &str, alg: Algorithm) -> Result<String, OAuthError> {
    let mut validation = Validation::new(alg);
    validation.insecure_disable_signature_validation();
    validation.validate_exp = false;
    validation.validate_aud = false;
    validation.required_spec_claims.clear();
    let data =
        jsonwebtoken::decode::<Unverified>(assertion, &DecodingKey::from_secret(&[]), &validation)
            .map_err(|_| refused("the client assertion's claims are not readable"))?;
    data.claims
        .sub
        .or(data.claims.iss)
        .ok_or_else(|| refused("the client assertion has no sub"))
}

/// The claims of `assertion` once a key of `client`'s set verifies its signature with the
/// header's algorithm ([`verify_with_key_set`]).
async fn verify_signature(
    app: &AppState,
    client: &ClientRecord,
    assertion: &str,
    header: &jsonwebtoken::Header,
) -> Result<AssertionClaims, OAuthError> {
    let jwks_uri = client.metadata.get("jwks_uri").and_then(|v| v.as_str());
    let inline = client.metadata.get("jwks");
    verify_with_key_set(app, jwks_uri, inline, assertion, header)
        .await
        .map_err(|e| match e {
            KeySetError::Unavailable => OAuthError::ClientMetadataUnavailable,
            KeySetError::Unfetchable => refused("the client's jwks_uri could not be fetched"),
            KeySetError::NotASet if jwks_uri.is_some() => {
                refused("the client's jwks_uri holds no JWK Set")
            }
            KeySetError::NotASet => refused("the client's jwks is no JWK Set"),
            KeySetError::NoKeys => refused("the client has no public keys"),
            KeySetError::NoMatch => refused(
                "the client assertion's signature does not verify with the client's keys, or its claims are incomplete",
            ),
        })
}

/// Why [`verify_with_key_set`] found no verified claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySetError {
    /// The key set cannot be fetched right now (DNS, timeout, 5xx): try again later.
    Unavailable,
    /// The key set cannot be fetched (a refused URL or answer).
    Unfetchable,
    /// What was fetched or given is no JWK Set.
    NotASet,
    /// Neither a `jwks_uri` nor inline keys.
    NoKeys,
    /// No key of the set verifies the signature, or the claims do not deserialize.
    NoMatch,
}

/// The claims (`T`) of the JWT `assertion` once a key of a set verifies its signature with the
/// header's algorithm (the caller checks that algorithm is allowed): the set at `jwks_uri`
/// (fetched through the protected fetcher of metadata documents and cached,
/// [`super::clients::ClientResolver::key_set`]) or the `inline` set. A `kid` the cached set
/// lacks fetches the `jwks_uri` again (at most once per
/// [`super::clients::JWKS_REFETCH_INTERVAL`]). Used for `private_key_jwt` client assertions
/// and for identity assertions (ID-JAG, [`super::id_jag`]). Time claims are the caller's to
/// check.
///
/// Errors: [`KeySetError`].
pub async fn verify_with_key_set<T: serde::de::DeserializeOwned>(
    app: &AppState,
    jwks_uri: Option<&str>,
    inline: Option<&serde_json::Value>,
    assertion: &str,
    header: &jsonwebtoken::Header,
) -> Result<T, KeySetError> {
    verify_with(app, jwks_uri, inline, assertion, header, false).await
}

/// [`verify_with_key_set`] with the key set at a URL an operator named (an identity
/// provider's or a workload issuer's): fetched by
/// [`crate::clients::ClientResolver::trusted_document`], so plain http on a loopback host
/// is fetched too.
pub async fn verify_with_trusted_key_set<T: serde::de::DeserializeOwned>(
    app: &AppState,
    jwks_uri: &str,
    assertion: &str,
    header: &jsonwebtoken::Header,
) -> Result<T, KeySetError> {
    verify_with(app, Some(jwks_uri), None, assertion, header, true).await
}

async fn verify_with<T: serde::de::DeserializeOwned>(
    app: &AppState,
    jwks_uri: Option<&str>,
    inline: Option<&serde_json::Value>,
    assertion: &str,
    header: &jsonwebtoken::Header,
    trusted: bool,
) -> Result<T, KeySetError> {
    let mut refreshed = false;
    loop {
        let set: JwkSet = match (jwks_uri, inline) {
            (Some(uri), _) => {
                let fetched = if trusted {
                    app.clients.trusted_document(uri, refreshed).await
                } else {
                    app.clients.key_set(uri, refreshed).await
                };
                let body = match fetched {
                    Ok(body) => body,
                    Err(e) if e.is_temporary() => return Err(KeySetError::Unavailable),
                    Err(_) => return Err(KeySetError::Unfetchable),
                };
                serde_json::from_slice(&body).map_err(|_| KeySetError::NotASet)?
            }
            (None, Some(jwks)) => {
                serde_json::from_value(jwks.clone()).map_err(|_| KeySetError::NotASet)?
            }
            (None, None) => return Err(KeySetError::NoKeys),
        };
        let candidates: Vec<_> = set
            .keys
            .iter()
            .filter(|k| match &header.kid {
                Some(kid) => k.common.key_id.as_deref() == Some(kid.as_str()),
                None => true,
            })
            .collect();
        if candidates.is_empty() && header.kid.is_some() && jwks_uri.is_some() && !refreshed {
            refreshed = true;
            continue;
        }
        let mut validation = Validation::new(header.alg);
        validation.validate_exp = false;
        validation.validate_aud = false;
        validation.required_spec_claims.clear();
        for jwk in candidates {
            let Ok(key) = DecodingKey::from_jwk(jwk) else {
                continue;
            };
            if let Ok(data) = jsonwebtoken::decode::<T>(assertion, &key, &validation) {
                return Ok(data.claims);
            }
        }
        return Err(KeySetError::NoMatch);
    }
}
