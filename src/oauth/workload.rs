//! Workload identity: the JWT-bearer grant (RFC 7523 §2.1, RFC 7521 §4.1) with a JWT a
//! workload's platform issued (a Kubernetes service-account token, a SPIFFE JWT-SVID), as
//! MCP's draft workload identity federation extension (SEP-1933, [`WIF_EXTENSION`]) asks. An
//! operator maps the workload to a service client with `gatehouse client add NAME --service
//! --owner EMAIL --workload-issuer URL --workload-subject SUB [--workload-jwks-uri URL]`; the
//! workload posts `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer` and
//! `assertion=<its JWT>`, with no client secret (a `client_id`, if sent, must be that client's).
//!
//! **Telling a workload assertion from an ID-JAG** ([`super::id_jag`], the same grant type):
//! an assertion whose header `typ` is `oauth-id-jag+jwt` is always an ID-JAG. Any other is
//! a workload's when the request carries no client authentication (no `Authorization: Basic`,
//! `client_secret` or `client_assertion`) and either no `client_id`, or a `client_id` of a
//! workload client, or an `iss` some workload client is configured with ([`route`]); else it
//! is an ID-JAG of the authenticated client (which then refuses its `typ`).
//!
//! Checks, each refused with `invalid_grant` and a description: an asymmetric algorithm
//! ([`SIGNING_ALGS`]); `iss` and `sub` those of a workload client (the issuer compared with or
//! without one trailing slash); the signature by a key of the client's `--workload-jwks-uri`,
//! or else of the `jwks_uri` of the issuer's OpenID Connect discovery document
//! (`ISSUER/.well-known/openid-configuration`, whose `issuer` must be the same), both fetched
//! through the protected fetcher and cached like clients' key sets, a `kid` not in the cached
//! set fetching it again (key rotation); `aud` naming this server's issuer, with or without a
//! trailing slash (SDKs derive it from the metadata URL); `exp` in the future and at most
//! [`MAX_LIFETIME_SECS`] ahead; `nbf` and `iat` not in the future (with [`CLOCK_SKEW_SECS`]);
//! single use across instances: its `jti` if it has one, else the whole assertion (its
//! SHA-256), until it expires. The service must be live (owner active, access not revoked).
//!
//! The answer is an access token for the service client (its owner, or its one project), no
//! refresh token, with the service's scope or the narrower `scope` asked for (`invalid_scope`
//! beyond it); audited as `token_issued` with `grant=workload`.

use std::collections::HashMap;

use axum::http::HeaderMap;
use serde::Deserialize;

use super::OAuthError;
use super::client_assertion::{KeySetError, algorithm_name, verify_with_trusted_key_set};
use super::id_jag::{ID_JAG_TYP, JWT_BEARER, MAX_ASSERTION_BYTES};
use super::token_response::{TokenResponse, served_resource_only};
use crate::domain::audit::{Event, Outcome};
use crate::domain::client_assertion::SIGNING_ALGS;
use crate::domain::scope::{Scope, ScopeSet};
use crate::domain::secret::{Secret, TokenKind};
use crate::state::AppState;
use crate::store::audit::AuditEvent;
use crate::store::workloads::WorkloadIdentity;

/// The identifier of MCP's draft workload identity federation extension (SEP-1933).
pub const WIF_EXTENSION: &str = "io.modelcontextprotocol/auth/wif";
/// Furthest ahead a workload assertion's `exp` may be, in seconds (a day: Kubernetes'
/// projected service-account tokens last an hour by default, SPIFFE JWT-SVIDs minutes).
pub const MAX_LIFETIME_SECS: i64 = 24 * 3600;
/// Allowed clock skew for `exp`, `nbf` and `iat`, in seconds.
pub const CLOCK_SKEW_SECS: i64 = 60;

/// The claims of a workload assertion read after its signature is verified.
#[derive(Debug, Deserialize)]
struct Claims {
    iss: Option<String>,
    sub: Option<String>,
    aud: Option<crate::domain::client_assertion::OneOrMany>,
    jti: Option<String>,
    exp: Option<i64>,
    nbf: Option<i64>,
    iat: Option<i64>,
}

/// `iss` and `sub`, read before the signature is checked only to find whose keys check it.
#[derive(Deserialize)]
struct Unverified {
    iss: Option<String>,
    sub: Option<String>,
}

/// The members read from an OpenID Connect discovery document (Discovery 1.0 §3).
#[derive(Deserialize)]
struct Discovery {
    issuer: Option<String>,
    jwks_uri: Option<String>,
}

fn refused(description: impl Into<String>) -> OAuthError {
    OAuthError::InvalidGrant(description.into())
}

/// `url` without one trailing slash.
fn bare(url: &str) -> &str {
    url.strip_suffix('/').unwrap_or(url)
}

/// Where a token request goes (module docs, "Telling a workload assertion from an ID-JAG").
#[derive(Debug)]
pub enum Route {
    /// A workload's assertion: the workload clients it may be for.
    Workload(Vec<WorkloadIdentity>),
    /// Anything else: the client authenticates as usual.
    Client,
}

/// Decides whether the token request (`headers`, `params`) is a workload's JWT-bearer grant.
/// At most one query, and only for a JWT-bearer request that carries no client
/// authentication and an assertion that is not an ID-JAG.
///
/// Errors: storage errors.
pub async fn route(
    state: &AppState,
    headers: &HeaderMap,
    params: &HashMap<String, String>,
) -> Result<Route, OAuthError> {
    if params.get("grant_type").map(String::as_str) != Some(JWT_BEARER)
        || super::client_auth::basic_credentials(headers)?.is_some()
        || ["client_secret", "client_assertion", "client_assertion_type"]
            .iter()
            .any(|k| params.contains_key(*k))
    {
        return Ok(Route::Client);
    }
    let Some(assertion) = params.get("assertion") else {
        return Ok(Route::Client);
    };
    let header = jsonwebtoken::decode_header(assertion).ok();
    if header.as_ref().is_some_and(|h| {
        h.typ
            .as_deref()
            .is_some_and(|t| t.eq_ignore_ascii_case(ID_JAG_TYP))
    }) {
        return Ok(Route::Client);
    }
    let client_id = params.get("client_id").map(String::as_str);
    let unverified = header
        .as_ref()
        .and_then(|h| unverified(assertion, h.alg).ok());
    let issuer = unverified
        .as_ref()
        .and_then(|u| u.iss.as_deref())
        .unwrap_or_default();
    if client_id.is_some() && issuer.is_empty() {
        return Ok(Route::Client);
    }
    let candidates = state.store.workload_candidates(issuer, client_id).await?;
    if client_id.is_none() || !candidates.is_empty() {
        Ok(Route::Workload(candidates))
    } else {
        Ok(Route::Client)
    }
}

/// The JWT-bearer grant with a workload assertion (module docs) for one of `candidates`
/// ([`route`]). `params` is the token request's body; `ip` the caller's address.
///
/// Errors: `invalid_request` without `assertion`; `invalid_grant` for an assertion that fails
/// a check; `invalid_scope` for a `scope` beyond the service's; `invalid_target` for another
/// `resource`; `temporarily_unavailable` (503) when the issuer's key set or discovery document
/// cannot be fetched right now.
pub async fn grant(
    state: &AppState,
    candidates: &[WorkloadIdentity],
    params: &HashMap<String, String>,
    ip: &str,
    now: i64,
    jkt: Option<String>,
) -> Result<TokenResponse, OAuthError> {
    let assertion = params
        .get("assertion")
        .filter(|a| !a.is_empty())
        .ok_or_else(|| OAuthError::InvalidRequest("assertion is required".into()))?;
    let (workload, scope, service) = match check(state, candidates, params, assertion, now).await {
        Ok(ok) => ok,
        Err(e) => {
            if let OAuthError::InvalidGrant(why) = &e {
                audit(
                    state,
                    None,
                    None,
                    ip,
                    Outcome::Denied,
                    &format!("grant=workload {why}"),
                    now,
                )
                .await;
            }
            return Err(e);
        }
    };
    let config = &state.config;
    let access = Secret::generate(TokenKind::AccessToken);
    let ttl = config.access_token_ttl_secs;
    state
        .store
        .insert_service_token(
            &service,
            &access.hash(),
            &scope,
            &config.mcp_server_url,
            now,
            now + ttl,
            jkt.as_deref(),
            crate::domain::grant::GrantType::JwtBearer,
        )
        .await?;
    crate::metrics::resource_token_event(
        crate::domain::audit::ResourceTokenEvent::Issued,
        &config.mcp_server_url,
    );
    audit(
        state,
        Some(&workload.client_id),
        Some(&service.account_id),
        ip,
        Outcome::Success,
        &format!("grant=workload iss={}", workload.issuer),
        now,
    )
    .await;
    Ok(TokenResponse {
        access_token: access.expose().to_string(),
        token_type: if jkt.is_some() {
            crate::domain::dpop::TOKEN_TYPE.into()
        } else {
            "Bearer".into()
        },
        expires_in: ttl,
        refresh_token: None,
        scope,
    })
}

/// Every check of the module docs: (workload, granted scope, live service). In order: the
/// workload the assertion names, its signature, its `aud` and times, the `resource`, the
/// service and the scope; the assertion is spent last, once every other check passed.
async fn check(
    state: &AppState,
    candidates: &[WorkloadIdentity],
    params: &HashMap<String, String>,
    assertion: &str,
    now: i64,
) -> Result<
    (
        WorkloadIdentity,
        String,
        crate::store::services::ServiceClient,
    ),
    OAuthError,
> {
    let (header, workload) = named_workload(candidates, params, assertion)?;
    let claims = verified_claims(state, &workload, assertion, &header).await?;
    let config = &state.config;
    let exp = check_audience_and_times(config, &claims, now)?;
    served_resource_only(config, params)?;
    let Some(service) = state.store.service_client(&workload.client_id).await? else {
        return Err(refused(
            "this workload client's owner is disabled or its access was revoked",
        ));
    };
    let scope = granted_scope(&service.scope, params.get("scope"))?;
    spend(state, &workload, claims.jti.as_deref(), assertion, exp, now).await?;
    Ok((workload, scope, service))
}

/// The workload client an `assertion` names, read before its signature is checked: a signed
/// JWT of bounded size with an accepted asymmetric `alg`, whose `iss` and `sub` are those of
/// one of `candidates`, which must be the `client_id` of `params` when one is sent.
///
/// Returns the JWT header and the workload. Errors: `invalid_grant` saying which check failed.
fn named_workload(
    candidates: &[WorkloadIdentity],
    params: &HashMap<String, String>,
    assertion: &str,
) -> Result<(jsonwebtoken::Header, WorkloadIdentity), OAuthError> {
    if assertion.len() > MAX_ASSERTION_BYTES {
        return Err(refused("the assertion is too large"));
    }
    let header = jsonwebtoken::decode_header(assertion)
        .map_err(|_| refused("the assertion is not a signed JWT"))?;
    let alg = algorithm_name(header.alg);
    if !SIGNING_ALGS.contains(&alg) {
        return Err(refused(format!(
            "the assertion's alg {alg} is not accepted (use RS256, PS256, ES256 or EdDSA)"
        )));
    }
    let unverified = unverified(assertion, header.alg)?;
    let (Some(iss), Some(sub)) = (unverified.iss.as_deref(), unverified.sub.as_deref()) else {
        return Err(refused("the assertion needs iss and sub"));
    };
    let client_id = params.get("client_id").map(String::as_str);
    let Some(workload) = candidates
        .iter()
        .find(|w| bare(&w.issuer) == bare(iss) && w.subject == sub)
        .cloned()
    else {
        return Err(refused(
            "the assertion's issuer and subject are not those of a workload client here",
        ));
    };
    if client_id.is_some_and(|c| c != workload.client_id) {
        return Err(refused(
            "the assertion's issuer and subject belong to another client than client_id",
        ));
    }
    Ok((header, workload))
}

/// The claims of `assertion` once its signature verifies with a key of the `workload`'s key
/// set (its `--workload-jwks-uri`, else the one its issuer's discovery document names), and
/// its `iss` and `sub` checked again to be the workload's.
///
/// Errors: `temporarily_unavailable` when the key set cannot be fetched right now;
/// `invalid_grant` for a signature that does not verify, a key set that cannot be read, or
/// another issuer or subject.
async fn verified_claims(
    state: &AppState,
    workload: &WorkloadIdentity,
    assertion: &str,
    header: &jsonwebtoken::Header,
) -> Result<Claims, OAuthError> {
    let jwks_uri = match &workload.jwks_uri {
        Some(uri) => uri.clone(),
        None => discovered_jwks_uri(state, &workload.issuer).await?,
    };
    let claims: Claims = verify_with_trusted_key_set(state, &jwks_uri, assertion, header)
        .await
        .map_err(|e| match e {
            KeySetError::Unavailable => OAuthError::TemporarilyUnavailable,
            KeySetError::NoMatch => {
                refused("the assertion's signature does not verify with the workload issuer's keys")
            }
            _ => refused("the workload issuer's key set could not be read"),
        })?;
    // The verified claims are the ones read before; checked again all the same.
    if claims.iss.as_deref().map(bare) != Some(bare(&workload.issuer))
        || claims.sub.as_deref() != Some(workload.subject.as_str())
    {
        return Err(refused(
            "the assertion's issuer and subject are not those of a workload client here",
        ));
    }
    Ok(claims)
}

/// The verified `claims`' `aud` (this server's issuer, with or without a trailing slash) and
/// times at `now`: `exp` present, not past and at most [`MAX_LIFETIME_SECS`] ahead; `nbf` and
/// `iat` not in the future (each with [`CLOCK_SKEW_SECS`]).
///
/// Returns `exp`. Errors: `invalid_grant` saying which check failed.
fn check_audience_and_times(
    config: &crate::config::Config,
    claims: &Claims,
    now: i64,
) -> Result<i64, OAuthError> {
    let ours = bare(&config.issuer);
    let aud = claims
        .aud
        .as_ref()
        .map(crate::domain::client_assertion::OneOrMany::values)
        .unwrap_or_default();
    if !aud.iter().any(|a| bare(a) == ours) {
        return Err(refused(format!(
            "the assertion's aud must be {ours}, this authorization server's issuer"
        )));
    }
    let Some(exp) = claims.exp else {
        return Err(refused("the assertion has no exp"));
    };
    if exp.saturating_add(CLOCK_SKEW_SECS) <= now {
        return Err(refused("the assertion has expired"));
    }
    if exp > now.saturating_add(MAX_LIFETIME_SECS + CLOCK_SKEW_SECS) {
        return Err(refused(
            "the assertion's exp is more than a day ahead; ask the platform for a shorter-lived token",
        ));
    }
    if claims.nbf.is_some_and(|nbf| nbf > now + CLOCK_SKEW_SECS) {
        return Err(refused("the assertion is not valid yet (nbf)"));
    }
    if claims
        .iat
        .is_some_and(|iat| iat > now.saturating_add(CLOCK_SKEW_SECS))
    {
        return Err(refused("the assertion was issued in the future"));
    }
    Ok(exp)
}

/// Spends the `workload`'s `assertion` until its `exp`: its `jti` when it has a non-empty one,
/// else the whole assertion, recorded under the workload's issuer.
///
/// Errors: `invalid_grant` when it was already used; storage errors.
async fn spend(
    state: &AppState,
    workload: &WorkloadIdentity,
    jti: Option<&str>,
    assertion: &str,
    exp: i64,
    now: i64,
) -> Result<(), OAuthError> {
    // Spent once every other check passed: one conditional statement, so a replay is refused
    // on every instance sharing the database. Without a jti, the whole assertion is the one
    // use.
    let spent = match jti.filter(|j| !j.is_empty()) {
        Some(jti) => Secret::from_presented(format!("jti {jti}")).hash(),
        None => Secret::from_presented(format!("jwt {assertion}")).hash(),
    };
    if !state
        .store
        .spend_client_assertion(&format!("wif {}", bare(&workload.issuer)), &spent, exp, now)
        .await?
    {
        return Err(refused("the assertion was already used"));
    }
    Ok(())
}

/// The scope granted: the `scope` asked for (each within the service's), else the service's.
fn granted_scope(allowed: &str, asked: Option<&String>) -> Result<String, OAuthError> {
    let allowed =
        ScopeSet::parse(allowed).map_err(|_| refused("the service's stored scope is invalid"))?;
    let granted = match asked.map(|s| s.trim()).filter(|s| !s.is_empty()) {
        None => allowed,
        Some(asked) => {
            let asked =
                ScopeSet::parse(asked).map_err(|e| OAuthError::InvalidScope(e.to_string()))?;
            if asked.contains(Scope::OfflineAccess) {
                return Err(OAuthError::InvalidScope(
                    "offline_access is not available: this grant issues no refresh token".into(),
                ));
            }
            if !asked.iter().all(|s| allowed.satisfies(s)) {
                return Err(OAuthError::InvalidScope(format!(
                    "this workload client may get at most \"{allowed}\""
                )));
            }
            asked
        }
    };
    Ok(granted.to_string())
}

/// The `jwks_uri` of `issuer`'s OpenID Connect discovery document (Discovery 1.0 §4: at
/// `ISSUER/.well-known/openid-configuration`; its `issuer` must be `issuer`, §4.3), fetched
/// and cached like a key set.
async fn discovered_jwks_uri(state: &AppState, issuer: &str) -> Result<String, OAuthError> {
    let url = format!("{}/.well-known/openid-configuration", bare(issuer));
    let body = state
        .clients
        .trusted_document(&url, false)
        .await
        .map_err(|e| {
            if e.is_temporary() {
                OAuthError::TemporarilyUnavailable
            } else {
                refused("the workload issuer's discovery document could not be fetched")
            }
        })?;
    let doc: Discovery = serde_json::from_slice(&body)
        .map_err(|_| refused("the workload issuer's discovery document is not JSON"))?;
    if doc.issuer.as_deref().map(bare) != Some(bare(issuer)) {
        return Err(refused(
            "the workload issuer's discovery document names another issuer",
        ));
    }
    doc.jwks_uri
        .filter(|u| !u.is_empty())
        .ok_or_else(|| refused("the workload issuer's discovery document has no jwks_uri"))
}

/// The assertion's `iss` and `sub`, read before its signature is checked.
fn unverified(assertion: &str, alg: jsonwebtoken::Algorithm) -> Result<Unverified, OAuthError> {
    let mut validation = jsonwebtoken::Validation::new(alg);
    validation.insecure_disable_signature_validation();
    validation.validate_exp = false;
    validation.validate_aud = false;
    validation.required_spec_claims.clear();
    jsonwebtoken::decode::<Unverified>(
        assertion,
        &jsonwebtoken::DecodingKey::from_secret(&[]),
        &validation,
    )
    .map(|d| d.claims)
    .map_err(|_| refused("the assertion's claims are not readable"))
}

async fn audit(
    state: &AppState,
    client: Option<&str>,
    account: Option<&str>,
    ip: &str,
    outcome: Outcome,
    detail: &str,
    now: i64,
) {
    state
        .store
        .audit(
            AuditEvent {
                event: Event::TokenIssued,
                outcome,
                account_id: account,
                client_id: client,
                subject: None,
                source_ip: Some(ip),
                detail: Some(detail),
            },
            now,
        )
        .await;
}
