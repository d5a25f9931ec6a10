//! Enterprise-managed authorization: the JWT-bearer grant (RFC 7523 §2.1, RFC 7521 §4.1) with
//! an Identity Assertion JWT Authorization Grant (ID-JAG, draft-ietf-oauth-identity-assertion-
//! authz-grant; MCP's enterprise-managed authorization extension). The organisation's identity
//! provider, trusted with `gatehouse idp add NAME --issuer URL --jwks-uri URL --assertions`,
//! signs an assertion that a person may use a client here; the client redeems it at the token
//! endpoint for an access token, with no consent page.
//!
//! Checks, each refused with `invalid_grant` and a description: header `typ`
//! [`ID_JAG_TYP`]; an asymmetric algorithm ([`SIGNING_ALGS`]); `iss` a provider trusted for
//! assertions whose key set (its `jwks_uri`, fetched through the protected fetcher and cached,
//! https or plain http on a loopback host, [`super::client_assertion::verify_with_trusted_key_set`]) verifies the signature; `aud` exactly this
//! server's issuer; `client_id` the authenticated client; `resource`, when present, this
//! server's MCP URL; `exp` in the future; `jti` spent once across instances (the table of
//! client assertions, keyed by the issuer). The subject is the account linked to that
//! provider's `sub`, or, for a provider given `--domains`, the account of the assertion's
//! `email` in an allowed domain (then linked). The scope is at most what the assertion carries.
//!
//! The answer is an access token (no refresh token: the client asks the provider for a new
//! assertion), recorded under a consent of its own so that the person sees the client on
//! Connected apps and can revoke it, and audited as `token_issued` with
//! `grant=jwt-bearer`.

use std::collections::HashMap;

/// The longest an ID-JAG may be valid for from now (Unix seconds): a day, the bound the
/// workload grant keeps too.
pub const MAX_ASSERTION_LIFETIME_SECS: i64 = 24 * 60 * 60;

use serde::Deserialize;

use super::OAuthError;
use super::client_assertion::{KeySetError, algorithm_name, verify_with_trusted_key_set};
use super::token_response::{TokenResponse, served_resource_only};
use crate::domain::account::{AccountStatus, Email};
use crate::domain::audit::{Event, Outcome};
use crate::domain::client_assertion::SIGNING_ALGS;
use crate::domain::idp::domain_allowed;
use crate::domain::scope::{Scope, ScopeSet};
use crate::domain::secret::{Secret, TokenKind};
use crate::state::AppState;
use crate::store::audit::AuditEvent;
use crate::store::idps::IdentityProvider;
use crate::store::oauth::ClientRecord;

/// The JWT-bearer grant type (RFC 7523 §2.1).
pub const JWT_BEARER: &str = crate::domain::client_assertion::JWT_BEARER_GRANT;
/// The `typ` header of an ID-JAG.
pub const ID_JAG_TYP: &str = "oauth-id-jag+jwt";
/// Longest `assertion` read, in bytes.
pub const MAX_ASSERTION_BYTES: usize = 8 * 1024;
/// The consents of ID-JAG grants are recorded under this redirect URI (none is used).
pub const CONSENT_REDIRECT: &str = crate::domain::client_assertion::JWT_BEARER_GRANT;
/// Allowed clock skew for `iat`, in seconds.
pub const CLOCK_SKEW_SECS: i64 = 60;

/// The claims of an ID-JAG read after its signature is verified.
#[derive(Debug, Deserialize)]
struct IdJagClaims {
    sub: Option<String>,
    aud: Option<crate::domain::client_assertion::OneOrMany>,
    client_id: Option<String>,
    jti: Option<String>,
    exp: Option<i64>,
    iat: Option<i64>,
    resource: Option<crate::domain::client_assertion::OneOrMany>,
    scope: Option<String>,
    email: Option<String>,
}

/// The one member read before the signature is checked, to find the provider.
#[derive(Deserialize)]
struct Unverified {
    iss: Option<String>,
}

fn refused(description: impl Into<String>) -> OAuthError {
    OAuthError::InvalidGrant(description.into())
}

/// The JWT-bearer grant with an ID-JAG (module docs) for `client`, already authenticated by
/// the token endpoint. `params` is the token request's body; `ip` the caller's address; `jkt`
/// the thumbprint of the request's DPoP key, to which the token is then bound (RFC 9449 §5).
///
/// Errors: `invalid_request` without `assertion`; `invalid_grant` for an assertion that fails a
/// check; `invalid_scope` for a `scope` beyond the assertion's; `temporarily_unavailable` when
/// the provider's key set cannot be fetched right now.
pub async fn grant(
    state: &AppState,
    client: &ClientRecord,
    params: &HashMap<String, String>,
    ip: &str,
    now: i64,
    jkt: Option<&str>,
) -> Result<TokenResponse, OAuthError> {
    let assertion = params
        .get("assertion")
        .filter(|a| !a.is_empty())
        .ok_or_else(|| OAuthError::InvalidRequest("assertion is required".into()))?;
    let outcome = check(state, client, params, assertion, now).await;
    let (provider, account_id, scope) = match outcome {
        Ok(ok) => ok,
        Err(e) => {
            if let OAuthError::InvalidGrant(why) = &e {
                audit(
                    state,
                    client,
                    None,
                    ip,
                    Outcome::Denied,
                    &format!("grant=jwt-bearer {why}"),
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
        .issue_assertion_token(
            &account_id,
            &client.client_id,
            &scope,
            &config.mcp_server_url,
            &config.issuer,
            &access.hash(),
            now,
            now + ttl,
            jkt,
        )
        .await?;
    crate::metrics::token_event(crate::domain::audit::TokenEvent::Issued);
    audit(
        state,
        client,
        Some(&account_id),
        ip,
        Outcome::Success,
        &format!("grant=jwt-bearer idp={}", provider.name),
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

/// Every check of the module docs: (provider, account id, granted scope). In order: the
/// JWT header and issuer, the signature by a trusted identity provider, the audience, client
/// and resource, the times, `jti` and `sub`, the scope and the account; the `jti` is spent
/// last, once every other check passed.
async fn check(
    state: &AppState,
    client: &ClientRecord,
    params: &HashMap<String, String>,
    assertion: &str,
    now: i64,
) -> Result<(IdentityProvider, String, String), OAuthError> {
    let (header, issuer) = header_and_issuer(assertion)?;
    let (provider, claims) = trusted_claims(state, &issuer, assertion, &header).await?;
    check_audience_client_resource(&state.config, client, params, &claims)?;
    let exp = check_times(&claims, now)?;
    let Some(jti) = claims.jti.as_deref().filter(|j| !j.is_empty()) else {
        return Err(refused("the assertion has no jti"));
    };
    let Some(subject) = claims.sub.as_deref().filter(|s| !s.is_empty()) else {
        return Err(refused("the assertion has no sub"));
    };
    let scope = granted_scope(claims.scope.as_deref(), params.get("scope"))?;
    let account_id = account_of(state, &provider, subject, claims.email.as_deref(), now).await?;
    // Spent once every other check passed: one conditional statement, so a replay is refused
    // on every instance sharing the database.
    let jti_hash = Secret::from_presented(jti.to_string()).hash();
    if !state
        .store
        .spend_client_assertion(&format!("id-jag {issuer}"), &jti_hash, exp, now)
        .await?
    {
        return Err(refused("the assertion was already used"));
    }
    Ok((provider, account_id, scope))
}

/// The JWT header of `assertion` and its issuer, read before the signature is checked: a
/// signed JWT of bounded size, `typ` [`ID_JAG_TYP`], an accepted asymmetric `alg`.
///
/// Errors: `invalid_grant` saying which check failed.
fn header_and_issuer(assertion: &str) -> Result<(jsonwebtoken::Header, String), OAuthError> {
    if assertion.len() > MAX_ASSERTION_BYTES {
        return Err(refused("the assertion is too large"));
    }
    let header = jsonwebtoken::decode_header(assertion)
        .map_err(|_| refused("the assertion is not a signed JWT"))?;
    if !header
        .typ
        .as_deref()
        .is_some_and(|t| t.eq_ignore_ascii_case(ID_JAG_TYP))
    {
        return Err(refused(format!("the assertion's typ must be {ID_JAG_TYP}")));
    }
    let alg = algorithm_name(header.alg);
    if !SIGNING_ALGS.contains(&alg) {
        return Err(refused(format!(
            "the assertion's alg {alg} is not accepted (use RS256, PS256, ES256 or EdDSA)"
        )));
    }
    let issuer = unverified_issuer(assertion, header.alg)?;
    Ok((header, issuer))
}

/// The identity provider trusted for assertions from `issuer`, and the claims of `assertion`
/// once its signature verifies with a key of that provider's key set.
///
/// Errors: `invalid_grant` for an issuer not trusted, a key set that cannot be read or a
/// signature that does not verify; [`OAuthError::ClientMetadataUnavailable`] when the key set
/// cannot be fetched right now; storage errors.
async fn trusted_claims(
    state: &AppState,
    issuer: &str,
    assertion: &str,
    header: &jsonwebtoken::Header,
) -> Result<(IdentityProvider, IdJagClaims), OAuthError> {
    let providers = state.store.assertion_providers(issuer).await?;
    let Some(provider) = providers.into_iter().next() else {
        return Err(refused(
            "the assertion's issuer is not an identity provider trusted for assertions",
        ));
    };
    let Some(jwks_uri) = provider.jwks_uri.as_deref() else {
        return Err(refused("the identity provider's key set could not be read"));
    };
    let claims: IdJagClaims = verify_with_trusted_key_set(state, jwks_uri, assertion, header)
        .await
        .map_err(|e| match e {
            KeySetError::Unavailable => OAuthError::ClientMetadataUnavailable,
            KeySetError::NoMatch => refused(
                "the assertion's signature does not verify with the identity provider's keys",
            ),
            _ => refused("the identity provider's key set could not be read"),
        })?;
    Ok((provider, claims))
}

/// The verified `claims` are for this server and `client`: `aud` exactly this server's issuer,
/// `client_id` the authenticated client, every `resource` carried the one served here; and the
/// request's own `resource` (in `params`), when sent, that one too.
///
/// Errors: `invalid_grant` for the claims; `invalid_target` for the request's `resource`.
fn check_audience_client_resource(
    config: &crate::config::Config,
    client: &ClientRecord,
    params: &HashMap<String, String>,
    claims: &IdJagClaims,
) -> Result<(), OAuthError> {
    let aud = claims
        .aud
        .as_ref()
        .map(crate::domain::client_assertion::OneOrMany::values)
        .unwrap_or_default();
    if aud.len() != 1 || aud[0] != config.issuer {
        return Err(refused(format!(
            "the assertion's aud must be {}, this authorization server's issuer",
            config.issuer
        )));
    }
    if claims.client_id.as_deref() != Some(client.client_id.as_str()) {
        return Err(refused(
            "the assertion's client_id is not the authenticated client",
        ));
    }
    if let Some(resource) = &claims.resource
        && !resource.values().iter().all(|r| config.resource.matches(r))
    {
        return Err(refused(format!(
            "the assertion's resource must be {}",
            config.mcp_server_url
        )));
    }
    served_resource_only(config, params)
}

/// The verified `claims`' times at `now`: `exp` present, not past and at most
/// [`MAX_ASSERTION_LIFETIME_SECS`] ahead; `iat` not in the future (with [`CLOCK_SKEW_SECS`]).
///
/// Returns `exp`. Errors: `invalid_grant` saying which check failed.
fn check_times(claims: &IdJagClaims, now: i64) -> Result<i64, OAuthError> {
    let Some(exp) = claims.exp else {
        return Err(refused("the assertion has no exp"));
    };
    if exp <= now {
        return Err(refused("the assertion has expired"));
    }
    // Its `jti` is kept until `exp`: an assertion valid for years would be redeemable (and
    // its record kept) for years. Identity providers issue ID-JAGs for minutes.
    if exp > now.saturating_add(MAX_ASSERTION_LIFETIME_SECS) {
        return Err(refused(
            "the assertion's exp is more than a day ahead; ask the identity provider for a shorter-lived assertion",
        ));
    }
    if claims
        .iat
        .is_some_and(|iat| iat > now.saturating_add(CLOCK_SKEW_SECS))
    {
        return Err(refused("the assertion was issued in the future"));
    }
    Ok(exp)
}

/// The scope granted: the `scope` asked for (each within the assertion's), else the
/// assertion's; never `offline_access` (no refresh token is issued).
fn granted_scope(carried: Option<&str>, asked: Option<&String>) -> Result<String, OAuthError> {
    let carried = ScopeSet::parse_known(carried.unwrap_or_default())
        .map_err(|_| refused("the assertion's scope is malformed"))?
        .without_offline_access();
    if carried.is_empty() {
        return Err(refused("the assertion carries no scope this server serves"));
    }
    let granted = match asked.map(|s| s.trim()).filter(|s| !s.is_empty()) {
        None => carried,
        Some(asked) => {
            let asked =
                ScopeSet::parse(asked).map_err(|e| OAuthError::InvalidScope(e.to_string()))?;
            if asked.contains(Scope::OfflineAccess) {
                return Err(OAuthError::InvalidScope(
                    "offline_access is not available: this grant issues no refresh token".into(),
                ));
            }
            if !asked.iter().all(|s| carried.satisfies(s)) {
                return Err(OAuthError::InvalidScope(format!(
                    "the assertion allows at most \"{carried}\""
                )));
            }
            asked
        }
    };
    Ok(granted.to_string())
}

/// The active account `subject` (or `email`, per the provider's domains) names at `provider`.
async fn account_of(
    state: &AppState,
    provider: &IdentityProvider,
    subject: &str,
    email: Option<&str>,
    now: i64,
) -> Result<String, OAuthError> {
    let store = &state.store;
    let account = match store.linked_account(&provider.name, subject, now).await? {
        Some(id) => store.account_by_id(&id).await?,
        None => {
            // By email only for a provider that names the domains it speaks for.
            let email = email.and_then(|e| Email::parse(e).ok()).filter(|e| {
                provider.domains.is_some()
                    && domain_allowed(provider.domains.as_deref(), e.as_str())
            });
            let Some(email) = email else {
                return Err(refused(format!(
                    "no account is linked to this subject at {}",
                    provider.name
                )));
            };
            let Some(account) = store.account_by_email(&email).await? else {
                return Err(refused(format!(
                    "no account is linked to this subject at {}",
                    provider.name
                )));
            };
            if account.status == AccountStatus::Active {
                match store
                    .link_identity(&provider.name, subject, &account.id, now)
                    .await
                {
                    Ok(()) | Err(crate::store::StoreError::Conflict(_)) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Some(account)
        }
    };
    match account {
        Some(a) if a.status == AccountStatus::Active => Ok(a.id),
        Some(_) => Err(refused("the account is disabled")),
        None => Err(refused(format!(
            "no account is linked to this subject at {}",
            provider.name
        ))),
    }
}

/// The assertion's `iss`, read before its signature is checked only to find whose keys check
/// it.
fn unverified_issuer(assertion: &str, alg: jsonwebtoken::Algorithm) -> Result<String, OAuthError> {
    let mut validation = jsonwebtoken::Validation::new(alg);
    validation.insecure_disable_signature_validation();
    validation.validate_exp = false;
    validation.validate_aud = false;
    validation.required_spec_claims.clear();
    let data = jsonwebtoken::decode::<Unverified>(
        assertion,
        &jsonwebtoken::DecodingKey::from_secret(&[]),
        &validation,
    )
    .map_err(|_| refused("the assertion's claims are not readable"))?;
    data.claims
        .iss
        .filter(|i| !i.is_empty())
        .ok_or_else(|| refused("the assertion has no iss"))
}

async fn audit(
    state: &AppState,
    client: &ClientRecord,
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
                client_id: Some(&client.client_id),
                subject: None,
                source_ip: Some(ip),
                detail: Some(detail),
            },
            now,
        )
        .await;
}
