//! Authentication of every MCP request, and its challenges.
//!
//! - Credentials come only from headers, never the query string (MCP authorization §Token
//!   Requirements): `Authorization: Bearer` (RFC 6750 §2.1) carries an OAuth access token or an
//!   API key; `X-Api-Key` carries an API key (product spec "API keys"). Both headers at once is
//!   `400 invalid_request` (RFC 6750 §3.1: one method per request).
//! - A personal MCP URL (`POST <mcp path>/<secret>`, [`authenticate_personal`]) carries its
//!   secret in the path, for clients that cannot send a header; it resolves like an API key
//!   ([`crate::store::Store::authenticate_personal_url`], one query) to a principal of kind
//!   `personal_url`. Its secret is never logged: spans record the route template.
//! - Every credential resolves to one [`Principal`] in one database round trip, chosen by the
//!   secret's prefix: an access token's SHA-256 (from the browser flow, or a service client's
//!   `client_credentials` token) joined with its family, consent and account, and a service
//!   token limited to one project with that project and membership
//!   ([`crate::store::Store::authenticate_access_token`]), which keeps only a token that is
//!   unrevoked (token, family and consent), unexpired and of an active account, and bound to
//!   `MCP_SERVER_URL` (RFC 8707 audience); an API key's SHA-256 joined with its account and,
//!   for a project key, its project and membership
//!   ([`crate::store::Store::authenticate_api_key`]). Access tokens are refused while
//!   `GATEHOUSE_OAUTH=off`; API keys are accepted either way.
//! - A project key with an address allow-list used from another address: `403`.
//! - A key's `last_used_at` is written off the response path, at most once a minute per key
//!   ([`KeyUseTracker`] in this process, a conditional `UPDATE` across instances); its first use
//!   is audited once.
//! - DPoP (RFC 9449 §7): an access token bound to a key (issued with a DPoP proof at the token
//!   endpoint) is accepted only as `Authorization: DPoP <token>` with a `DPoP` proof header
//!   signed by that key: `htm` the request's method, `htu` `MCP_SERVER_URL`, `iat` within
//!   [`dpop::PROOF_WINDOW_SECS`], `ath` the token's hash, its `jti` not seen before on this
//!   instance (memory) nor recorded by another ([`crate::store::dpop`]: read in the same
//!   statement as the token, so still one round trip). A refusal is `401` with
//!   `WWW-Authenticate: DPoP error="invalid_token"` (or `"invalid_dpop_proof"`), `algs="…"`,
//!   and the `Bearer resource_metadata=…` challenge beside it. A bound token sent as `Bearer`
//!   is refused; tokens issued without a proof stay bearer tokens.
//! - No credentials: `401` with `WWW-Authenticate: Bearer resource_metadata="…", scope="…"`
//!   (RFC 9728 §5.1, RFC 6750 §3; `Bearer realm="gatehouse"` while OAuth is off); a bad
//!   credential: the same plus `error="invalid_token"`.
//! - The [`Principal`] is put into the request extensions. The next steps read the body once
//!   ([`super::body::read`]), refuse an operation outside the credential's scopes
//!   ([`super::stepup`], `403 insufficient_scope`) and a body that is not a well-formed
//!   JSON-RPC message ([`super::body::check_request`]).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::McpState;
use crate::client_addr::ClientAddr;
use crate::config::Config;
use crate::domain::api_key::{address_allowed, last_use_due, parse_allowed};
use crate::domain::audit::{Event, Outcome};
use crate::domain::dpop::{self, ProofError};
use crate::domain::principal::{CredentialKind, Reach};
use crate::domain::resource::ResourceIndicator;
use crate::domain::scope::{Scope, ScopeSet};
use crate::domain::secret::{Secret, TokenKind, constant_time_eq};
use crate::store::audit::AuditEvent;
use crate::store::keys::{KeyGrant, KeyUse};
use crate::store::oauth::AccessGrant;

/// The scopes every challenge names: all the MCP operations need ([`Scope::resource_scopes`],
/// space-delimited as RFC 6750 §3 writes them), e.g. `mcp:read mcp:write`.
pub fn challenge_scope() -> String {
    Scope::resource_scopes()
        .map(Scope::as_str)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Largest request body the MCP route reads (JSON-RPC requests are small).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

pub use crate::domain::api_key::API_KEY_HEADER;

pub use crate::domain::principal::Principal;

/// Why a presented credential was refused (logged, never sent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// The `Authorization` header is not `Bearer <token>`.
    Malformed,
    /// Not a live access token: unknown, expired, revoked (token, family or consent) or of a
    /// disabled account.
    NotLive,
    /// Bound to another resource (RFC 8707).
    WrongAudience,
    /// Carries a scope this server does not know.
    BadScope,
    /// Something other than an API key in `X-Api-Key`.
    NotAKey,
    /// Both `Authorization` and `X-Api-Key` were sent.
    TwoCredentials,
    /// A DPoP-bound token sent as `Bearer` (RFC 9449 §7.2).
    BoundToKey,
    /// A DPoP proof by another key than the token is bound to.
    WrongKey,
    /// A token not bound to any key sent as `DPoP`.
    NotBound,
}

/// A credential as sent: the secret, and whether it came in `X-Api-Key`.
#[derive(Debug)]
pub struct Presented {
    /// The secret, unchecked.
    pub secret: Secret,
    /// It came in `X-Api-Key` (so it must be an API key).
    pub api_key_header: bool,
    /// It came as `Authorization: DPoP` (so it must be a DPoP-bound access token).
    pub dpop: bool,
}

/// Whether `token` is an RFC 6750 §2.1 `b64token` (`1*( ALPHA / DIGIT / "-" / "." / "_" /
/// "~" / "+" / "/" ) *"="`, checked loosely: those characters in any order).
fn is_token68(token: &str) -> bool {
    !token.is_empty()
        && token
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._~+/=".contains(c))
}

/// The credential of a request: `Authorization: Bearer` or `X-Api-Key`, each at most once.
/// `Ok(None)` when neither is present.
///
/// Errors: [`Rejection::TwoCredentials`] when both are present; [`Rejection::Malformed`] for a
/// header that is not a usable credential (repeated, not `Bearer`, not a token).
pub fn presented_credential(headers: &HeaderMap) -> Result<Option<Presented>, Rejection> {
    let mut keys = headers.get_all(API_KEY_HEADER).iter();
    let Some(key) = keys.next() else {
        return Ok(
            authorization_token(headers)?.map(|(secret, dpop)| Presented {
                secret,
                api_key_header: false,
                dpop,
            }),
        );
    };
    if headers.contains_key(header::AUTHORIZATION) {
        return Err(Rejection::TwoCredentials);
    }
    if keys.next().is_some() {
        return Err(Rejection::Malformed);
    }
    let key = key.to_str().map_err(|_| Rejection::Malformed)?.trim();
    if !is_token68(key) {
        return Err(Rejection::Malformed);
    }
    Ok(Some(Presented {
        secret: Secret::from_presented(key),
        api_key_header: true,
        dpop: false,
    }))
}

/// The bearer token of `Authorization`, if any. `Err` for a present header that is not a
/// usable `Bearer` credential (RFC 6750 §2.1; the scheme is case-insensitive).
pub fn bearer_token(headers: &HeaderMap) -> Result<Option<Secret>, Rejection> {
    match authorization_token(headers)? {
        Some((_, true)) => Err(Rejection::Malformed),
        Some((secret, false)) => Ok(Some(secret)),
        None => Ok(None),
    }
}

/// The token of `Authorization`, if any, and whether its scheme is `DPoP` (RFC 9449 §7.1)
/// rather than `Bearer` (RFC 6750 §2.1; schemes are case-insensitive). `Err` for a present
/// header that is neither, or not a token.
pub fn authorization_token(headers: &HeaderMap) -> Result<Option<(Secret, bool)>, Rejection> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(Rejection::Malformed);
    }
    let value = value.to_str().map_err(|_| Rejection::Malformed)?;
    let (scheme, token) = value.split_once(' ').ok_or(Rejection::Malformed)?;
    let token = token.trim();
    let dpop = scheme.eq_ignore_ascii_case(dpop::TOKEN_TYPE);
    if !(dpop || scheme.eq_ignore_ascii_case("bearer")) || !is_token68(token) {
        return Err(Rejection::Malformed);
    }
    Ok(Some((Secret::from_presented(token), dpop)))
}

/// Checks a live grant against this resource (RFC 8707 audience, compared by
/// [`ResourceIndicator::matches`]); the scopes it carries.
pub fn check_grant(
    grant: &AccessGrant,
    resource: &ResourceIndicator,
) -> Result<ScopeSet, Rejection> {
    if !resource.matches(&grant.resource) {
        return Err(Rejection::WrongAudience);
    }
    ScopeSet::parse(&grant.scope).map_err(|_| Rejection::BadScope)
}

/// The `WWW-Authenticate` value for a 401 (`error` = `None` when no credential was sent).
pub fn unauthorized_challenge(config: &Config, error: Option<&str>) -> String {
    let mut params = Vec::new();
    if let Some(error) = error {
        params.push(format!("error=\"{error}\""));
    }
    if config.oauth_enabled {
        params.push(format!(
            "resource_metadata=\"{}\"",
            config.protected_resource_metadata_url()
        ));
        params.push(format!("scope=\"{}\"", challenge_scope()));
    } else {
        params.push("realm=\"gatehouse\"".to_string());
    }
    format!("Bearer {}", params.join(", "))
}

/// The `WWW-Authenticate` value for a 403 step-up.
pub fn insufficient_scope_challenge(config: &Config) -> String {
    let mut value = format!(
        "Bearer error=\"insufficient_scope\", scope=\"{}\"",
        challenge_scope()
    );
    if config.oauth_enabled {
        value.push_str(&format!(
            ", resource_metadata=\"{}\"",
            config.protected_resource_metadata_url()
        ));
    }
    value
}

fn challenge_response(
    status: StatusCode,
    challenge: String,
    error: &str,
    description: &str,
) -> Response {
    let mut response = (
        status,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        serde_json::json!({"error": error, "error_description": description}).to_string(),
    )
        .into_response();
    if let Ok(value) = HeaderValue::try_from(challenge) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// `401` without an error code: no credential was sent.
pub fn missing_credentials(config: &Config) -> Response {
    challenge_response(
        StatusCode::UNAUTHORIZED,
        unauthorized_challenge(config, None),
        "invalid_request",
        if config.oauth_enabled {
            "This MCP server needs an access token (sign in through the authorization server named in the protected-resource metadata) or an API key (X-Api-Key header)."
        } else {
            "This MCP server needs an API key: send it in the X-Api-Key header or as Authorization: Bearer."
        },
    )
}

/// `400 invalid_request`: both `Authorization` and `X-Api-Key` were sent (RFC 6750 §3.1).
pub fn two_credentials(config: &Config) -> Response {
    challenge_response(
        StatusCode::BAD_REQUEST,
        unauthorized_challenge(config, Some("invalid_request")),
        "invalid_request",
        "Send one credential: either Authorization: Bearer or X-Api-Key, not both.",
    )
}

/// `403`: a project key used from an address outside its allow-list. No challenge: another
/// credential would not help from this address.
pub fn address_not_allowed() -> Response {
    (
        StatusCode::FORBIDDEN,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        serde_json::json!({
            "error": "access_denied",
            "error_description": "This API key may not be used from your address."
        })
        .to_string(),
    )
        .into_response()
}

/// `401 invalid_token`: the credential was refused.
pub fn invalid_token(config: &Config) -> Response {
    challenge_response(
        StatusCode::UNAUTHORIZED,
        unauthorized_challenge(config, Some("invalid_token")),
        "invalid_token",
        "The access token or API key is unknown, expired, revoked or not valid for this server.",
    )
}

/// The `DPoP` challenge (RFC 9449 §7.1) with `error`: the algorithms proofs may use.
pub fn dpop_challenge(error: &str) -> String {
    format!(
        "DPoP error=\"{error}\", algs=\"{}\"",
        dpop::SIGNING_ALGS.join(" ")
    )
}

/// `401` for a DPoP request or a DPoP-bound token (RFC 9449 §7.1, §7.2): `error` is
/// `invalid_token` or `invalid_dpop_proof`; the `WWW-Authenticate` values are the `DPoP`
/// challenge, then the `Bearer` one (with the protected-resource metadata) for clients without
/// DPoP.
pub fn dpop_refusal(config: &Config, error: &str, description: &str) -> Response {
    let mut response = challenge_response(
        StatusCode::UNAUTHORIZED,
        dpop_challenge(error),
        error,
        description,
    );
    if let Ok(value) = HeaderValue::from_str(&unauthorized_challenge(config, None)) {
        response
            .headers_mut()
            .append(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// `403 insufficient_scope`.
pub fn insufficient_scope(config: &Config) -> Response {
    challenge_response(
        StatusCode::FORBIDDEN,
        insufficient_scope_challenge(config),
        "insufficient_scope",
        "This operation needs a scope the credential does not have: authorize again with the scopes named in the challenge, or use a read-write API key.",
    )
}

/// In-process record of when this instance last wrote each key's use, so that concurrent
/// requests with a key whose stored `last_used_at` is stale start one write, not one each.
#[derive(Debug, Default)]
pub struct KeyUseTracker {
    written: Mutex<HashMap<String, i64>>,
}

/// Entries the tracker keeps before it forgets those older than a minute.
const TRACKER_PRUNE_AT: usize = 10_000;

impl KeyUseTracker {
    /// Whether this request should write key `id`'s use at `now` (Unix seconds): `true` at
    /// most once a minute per key in this process.
    pub fn claim(&self, id: &str, now: i64) -> bool {
        let mut written = match self.written.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if written
            .get(id)
            .is_some_and(|&at| !last_use_due(Some(at), now))
        {
            return false;
        }
        if written.len() >= TRACKER_PRUNE_AT {
            written.retain(|_, at| !last_use_due(Some(*at), now));
        }
        written.insert(id.to_string(), now);
        true
    }
}

/// Why authentication did not produce a principal.
enum Refusal {
    /// `401 invalid_token`.
    Invalid(Rejection),
    /// `403`: a key used from an address outside its allow-list.
    Address,
    /// `401 invalid_dpop_proof`.
    Proof(ProofError),
    /// The database failed: `503`.
    Unavailable(crate::store::StoreError),
}

impl From<crate::store::StoreError> for Refusal {
    fn from(e: crate::store::StoreError) -> Self {
        Refusal::Unavailable(e)
    }
}

/// The principal of an OAuth access token.
async fn oauth_principal(mcp: &McpState, secret: &Secret, now: i64) -> Result<Principal, Refusal> {
    let grant = mcp
        .app
        .store
        .live_access_token(&secret.hash(), now)
        .await?
        .ok_or(Refusal::Invalid(Rejection::NotLive))?;
    if grant.jkt.is_some() {
        return Err(Refusal::Invalid(Rejection::BoundToKey));
    }
    grant_principal(mcp, grant)
}

/// The single `DPoP` header's value (RFC 9449 §4.1: exactly one).
fn one_proof(headers: &HeaderMap) -> Result<&str, ProofError> {
    let mut values = headers.get_all(dpop::HEADER).iter();
    let value = values.next().ok_or(ProofError::NotJwt)?;
    if values.next().is_some() {
        return Err(ProofError::NotOne);
    }
    Ok(value.to_str().map_err(|_| ProofError::NotOne)?.trim())
}

/// The principal of an access token sent as `Authorization: DPoP` with a proof (RFC 9449
/// §4.3, §7.1): the proof checked for this request (`method`, `MCP_SERVER_URL`, the token's
/// `ath`), its `jti` new to this instance, then one statement reads the token and whether
/// another instance recorded the proof; the token must be bound to the proof's key. The proof
/// is then recorded for the other instances (batched, off the response path).
async fn dpop_principal(
    mcp: &McpState,
    headers: &HeaderMap,
    method: &str,
    secret: &Secret,
    now: i64,
) -> Result<Principal, Refusal> {
    let store = &mcp.app.store;
    let proof = one_proof(headers).map_err(Refusal::Proof)?;
    let verified = dpop::verify_proof(
        proof,
        &dpop::Expected {
            method,
            url: &mcp.app.config.mcp_server_url,
            access_token: Some(secret.expose()),
            now,
        },
    )
    .map_err(Refusal::Proof)?;
    let key = verified.replay_key();
    let until = verified.remember_until();
    if store.dpop_proof_seen_here(&key, until, now) {
        return Err(Refusal::Proof(ProofError::Replayed));
    }
    let (grant, seen) = store
        .live_access_token_with_proof(&secret.hash(), &key, now)
        .await?
        .ok_or(Refusal::Invalid(Rejection::NotLive))?;
    if seen {
        return Err(Refusal::Proof(ProofError::Replayed));
    }
    match &grant.jkt {
        Some(jkt) if constant_time_eq(jkt.as_bytes(), verified.jkt.as_bytes()) => {}
        Some(_) => return Err(Refusal::Invalid(Rejection::WrongKey)),
        None => return Err(Refusal::Invalid(Rejection::NotBound)),
    }
    store.record_dpop_proof(key, until);
    grant_principal(mcp, grant)
}

/// The principal of a live access grant checked against this resource.
fn grant_principal(mcp: &McpState, grant: AccessGrant) -> Result<Principal, Refusal> {
    let scopes = check_grant(&grant, &mcp.app.config.resource).map_err(Refusal::Invalid)?;
    // A service client limited to one project, else the person's choice kept with the grant.
    let reach = match grant.project_id {
        Some(project) => Reach::Project(project),
        None => Reach::from_choice(grant.chosen_projects.as_deref()),
    };
    let (credential, credential_id) = if grant.service {
        (CredentialKind::ServiceToken, grant.client_id.clone())
    } else {
        (CredentialKind::OAuthToken, grant.family_id)
    };
    Ok(Principal {
        account_id: grant.account_id,
        reach,
        scopes,
        credential,
        credential_id,
        client_id: Some(grant.client_id),
        calls_per_hour: own_budget(grant.calls_per_hour),
        tools: crate::domain::principal::ToolFilter::from_stored(grant.tool_filter.as_deref()),
    })
}

/// Checks a live key's allow-list against the peer address (fails closed: no known address,
/// or an entry that does not parse, matches nothing).
fn key_address_allowed(grant: &KeyGrant, peer: Option<IpAddr>) -> bool {
    if grant.allowed_ips.is_empty() {
        return true;
    }
    let Some(peer) = peer else {
        return false;
    };
    let nets: Vec<_> = grant
        .allowed_ips
        .iter()
        .filter_map(|entry| parse_allowed(entry).ok())
        .collect();
    address_allowed(&nets, peer)
}

/// Which key-like credential a secret is presented as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyLike {
    /// An API key, from a header.
    ApiKey,
    /// The secret segment of a personal MCP URL.
    PersonalUrl,
}

/// The principal of an API key or a personal URL, and its use recorded off the response path.
async fn key_principal(
    mcp: &McpState,
    secret: &Secret,
    kind: KeyLike,
    peer: Option<IpAddr>,
    now: i64,
) -> Result<Principal, Refusal> {
    let store = &mcp.app.store;
    let grant = match kind {
        KeyLike::ApiKey => store.live_api_key(&secret.hash(), now).await?,
        KeyLike::PersonalUrl => store.live_personal_url(&secret.hash(), now).await?,
    }
    .ok_or(Refusal::Invalid(Rejection::NotLive))?;
    let scopes =
        ScopeSet::parse(&grant.scope).map_err(|_| Refusal::Invalid(Rejection::BadScope))?;
    if !key_address_allowed(&grant, peer) {
        return Err(Refusal::Address);
    }
    let (reach, credential) = match (&grant.project_id, kind) {
        (Some(project), KeyLike::ApiKey) => {
            (Reach::Project(project.clone()), CredentialKind::ProjectKey)
        }
        (None, KeyLike::ApiKey) => (Reach::Account, CredentialKind::AccountKey),
        (Some(project), KeyLike::PersonalUrl) => {
            (Reach::Project(project.clone()), CredentialKind::PersonalUrl)
        }
        (None, KeyLike::PersonalUrl) => (Reach::Account, CredentialKind::PersonalUrl),
    };
    if last_use_due(grant.last_used_at, now) && mcp.key_use.claim(&grant.id, now) {
        let store = store.clone();
        let (id, account) = (grant.id.clone(), grant.account_id.clone());
        let first = grant.last_used_at.is_none();
        let source_ip = peer.map(|ip| ip.to_canonical().to_string());
        tokio::spawn(async move {
            let recorded = match kind {
                KeyLike::ApiKey => store.record_key_use(&id, first, now).await,
                KeyLike::PersonalUrl => store.record_url_use(&id, first, now).await,
            };
            let event = match kind {
                KeyLike::ApiKey => Event::KeyFirstUse,
                KeyLike::PersonalUrl => Event::UrlFirstUse,
            };
            match recorded {
                Ok(KeyUse::First) => {
                    store
                        .audit(
                            AuditEvent {
                                event,
                                outcome: Outcome::Success,
                                account_id: Some(&account),
                                client_id: None,
                                subject: Some(&id),
                                source_ip: source_ip.as_deref(),
                                detail: Some(credential.as_str()),
                            },
                            now,
                        )
                        .await;
                }
                Ok(KeyUse::Updated | KeyUse::Unchanged) => {}
                Err(e) => tracing::warn!(error = %e, "could not record a key's or URL's use"),
            }
        });
    }
    Ok(Principal {
        account_id: grant.account_id,
        reach,
        scopes,
        credential,
        tools: crate::domain::principal::ToolFilter::from_stored(grant.tool_filter.as_deref()),
        credential_id: grant.id,
        client_id: None,
        calls_per_hour: own_budget(grant.calls_per_hour),
    })
}

/// An account's own budget as stored (`accounts.calls_per_hour`) as [`Principal`] carries it
/// (a negative number, which the command line never writes, reads as unlimited like 0).
fn own_budget(stored: Option<i64>) -> Option<u64> {
    stored.map(|n| u64::try_from(n).unwrap_or(0))
}

/// Why an API key presented by a local process (`gatehouse stdio`) was refused.
#[derive(Debug, thiserror::Error)]
pub enum KeyRefused {
    /// Unknown, revoked or expired, its account disabled, or not an API key at all.
    #[error("invalid key")]
    Invalid,
    /// The key may be used only from listed addresses; a local process has no peer address.
    #[error("address not allowed")]
    Address,
    /// The database could not be asked.
    #[error("storage unavailable: {0}")]
    Unavailable(crate::store::StoreError),
}

/// The principal of the API key `secret` presented without a network peer (`gatehouse
/// stdio`): resolved exactly like an `X-Api-Key` header, and its use recorded the same way. A
/// key with an address allow-list fails closed ([`KeyRefused::Address`]).
pub async fn local_key_principal(
    mcp: &McpState,
    secret: &Secret,
    now: i64,
) -> Result<Principal, KeyRefused> {
    if secret.kind() != Some(TokenKind::ApiKey) {
        return Err(KeyRefused::Invalid);
    }
    match key_principal(mcp, secret, KeyLike::ApiKey, None, now).await {
        Ok(principal) => Ok(principal),
        Err(Refusal::Invalid(_)) => Err(KeyRefused::Invalid),
        Err(Refusal::Address) => Err(KeyRefused::Address),
        Err(Refusal::Proof(_)) => Err(KeyRefused::Invalid),
        Err(Refusal::Unavailable(e)) => Err(KeyRefused::Unavailable(e)),
    }
}

/// Authentication of `POST <mcp path>` ([`super::layers`]): the request with the
/// [`Principal`] in its extensions (rmcp hands the request's `http::request::Parts`,
/// extensions included, to the handlers), or `Err` with the refusal — `401` with a challenge,
/// `400` for two credentials, `403` for a key used from an address it does not allow, `503`
/// when the database cannot be asked.
pub async fn authenticate(mcp: &McpState, request: Request) -> Result<Request, Response> {
    let config = &mcp.app.config;
    let now = crate::store::now();
    let presented = match presented_credential(request.headers()) {
        Ok(Some(presented)) => presented,
        Ok(None) => return Err(missing_credentials(config)),
        Err(Rejection::TwoCredentials) => {
            tracing::info!(why = ?Rejection::TwoCredentials, "MCP credential refused");
            return Err(two_credentials(config));
        }
        Err(why) => {
            tracing::info!(?why, "MCP credential refused");
            return Err(invalid_token(config));
        }
    };
    let peer = ClientAddr::of(request.extensions()).map(|c| c.0);
    let resolved = match presented.secret.kind() {
        _ if presented.dpop && presented.secret.kind() != Some(TokenKind::AccessToken) => {
            Err(Refusal::Invalid(Rejection::NotBound))
        }
        Some(TokenKind::ApiKey) => {
            key_principal(mcp, &presented.secret, KeyLike::ApiKey, peer, now).await
        }
        Some(TokenKind::AccessToken) if presented.api_key_header => {
            Err(Refusal::Invalid(Rejection::NotAKey))
        }
        Some(TokenKind::AccessToken) if config.oauth_enabled && presented.dpop => {
            let method = request.method().as_str();
            dpop_principal(mcp, request.headers(), method, &presented.secret, now).await
        }
        Some(TokenKind::AccessToken) if config.oauth_enabled => {
            oauth_principal(mcp, &presented.secret, now).await
        }
        _ => Err(Refusal::Invalid(Rejection::NotLive)),
    };
    let principal = match resolved {
        Ok(principal) => principal,
        Err(Refusal::Invalid(why)) if presented.dpop || matches!(why, Rejection::BoundToKey) => {
            tracing::info!(?why, "MCP credential refused");
            return Err(dpop_refusal(
                config,
                "invalid_token",
                match why {
                    Rejection::BoundToKey => {
                        "This access token is bound to a DPoP key: send it as Authorization: DPoP with a DPoP proof."
                    }
                    Rejection::WrongKey => {
                        "The DPoP proof is signed with another key than the access token is bound to."
                    }
                    _ => {
                        "The access token is unknown, expired, revoked, not bound to a DPoP key or not valid for this server."
                    }
                },
            ));
        }
        Err(Refusal::Invalid(why)) => {
            tracing::info!(?why, "MCP credential refused");
            return Err(invalid_token(config));
        }
        Err(Refusal::Proof(why)) => {
            tracing::info!(?why, "MCP DPoP proof refused");
            return Err(dpop_refusal(config, "invalid_dpop_proof", &why.to_string()));
        }
        Err(Refusal::Address) => {
            tracing::info!("MCP API key refused: address not allowed");
            return Err(address_not_allowed());
        }
        Err(Refusal::Unavailable(e)) => {
            tracing::error!(error = %e, "MCP credential lookup failed");
            return Err(unavailable());
        }
    };
    Ok(admit(principal, request))
}

/// The `WWW-Authenticate` value of a refused personal URL: no OAuth metadata, since signing in
/// would not make this URL work.
pub const PERSONAL_URL_CHALLENGE: &str = "Bearer error=\"invalid_token\", realm=\"gatehouse\"";

/// `401 invalid_token` for a personal URL that is unknown, expired or revoked.
pub fn invalid_personal_url() -> Response {
    challenge_response(
        StatusCode::UNAUTHORIZED,
        PERSONAL_URL_CHALLENGE.to_string(),
        "invalid_token",
        "This MCP URL is unknown, expired or revoked.",
    )
}

/// The secret segment of a personal URL's path (`<mcp path>/<secret>`), if the path has one.
fn url_secret(mcp_path: &str, path: &str) -> Option<Secret> {
    let secret = path.strip_prefix(mcp_path)?.strip_prefix('/')?;
    (is_token68(secret) && secret.starts_with(TokenKind::PersonalUrl.prefix()))
        .then(|| Secret::from_presented(secret))
}

/// Authentication of `POST <mcp path>/<secret>` (personal MCP URLs; [`super::layers`]): the
/// secret in the path is the credential, resolved like an API key without an address allow-list; a header credential
/// besides it is `400 invalid_request` (one method per request, RFC 6750 §3.1); an unknown,
/// expired or revoked URL gets `401 invalid_token`. Then the same checks as
/// [`authenticate`]. The secret is never logged.
pub async fn authenticate_personal(mcp: &McpState, request: Request) -> Result<Request, Response> {
    let config = &mcp.app.config;
    let now = crate::store::now();
    if request.headers().contains_key(header::AUTHORIZATION)
        || request.headers().contains_key(API_KEY_HEADER)
    {
        tracing::info!(why = ?Rejection::TwoCredentials, "MCP credential refused");
        return Err(two_credentials(config));
    }
    let Some(secret) = url_secret(&config.mcp_path, request.uri().path()) else {
        tracing::info!(why = ?Rejection::NotLive, "MCP personal URL refused");
        return Err(invalid_personal_url());
    };
    let peer = ClientAddr::of(request.extensions()).map(|c| c.0);
    let principal = match key_principal(mcp, &secret, KeyLike::PersonalUrl, peer, now).await {
        Ok(principal) => principal,
        Err(Refusal::Invalid(why)) => {
            tracing::info!(?why, "MCP personal URL refused");
            return Err(invalid_personal_url());
        }
        Err(Refusal::Proof(why)) => {
            tracing::info!(?why, "MCP personal URL refused");
            return Err(invalid_personal_url());
        }
        Err(Refusal::Address) => return Err(address_not_allowed()),
        Err(Refusal::Unavailable(e)) => {
            tracing::error!(error = %e, "MCP credential lookup failed");
            return Err(unavailable());
        }
    };
    Ok(admit(principal, request))
}

/// `503`: the database could not be asked.
fn unavailable() -> Response {
    crate::metrics::Unavailable::Database.mark(
        (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "5")],
            "The server cannot check credentials right now; try again shortly.",
        )
            .into_response(),
    )
}

/// After authentication: the principal attached for the next steps ([`super::body::read`],
/// [`super::stepup::step_up`], [`super::body::check_request`]) and the handlers.
fn admit(principal: Principal, mut request: Request) -> Request {
    request.extensions_mut().insert(principal);
    request
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn headers(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        h
    }

    #[test]
    fn bearer_parsing() {
        assert!(bearer_token(&HeaderMap::new()).unwrap().is_none());
        let t = bearer_token(&headers("Bearer gate_at_abc-_"))
            .unwrap()
            .unwrap();
        assert_eq!(t.expose(), "gate_at_abc-_");
        assert_eq!(
            bearer_token(&headers("bearer  x "))
                .unwrap()
                .unwrap()
                .expose(),
            "x"
        );
        for bad in [
            "Basic abc",
            "Bearer",
            "Bearer ",
            "Bearer a b",
            "Bearer a\"b",
        ] {
            assert_eq!(
                bearer_token(&headers(bad)).unwrap_err(),
                Rejection::Malformed,
                "{bad}"
            );
        }
    }

    #[test]
    fn credentials_come_from_one_header() {
        let mut h = HeaderMap::new();
        h.insert(API_KEY_HEADER, HeaderValue::from_static(" gate_key_abc "));
        let p = presented_credential(&h).unwrap().unwrap();
        assert_eq!(p.secret.expose(), "gate_key_abc");
        assert!(p.api_key_header);
        let p = presented_credential(&headers("Bearer gate_key_abc"))
            .unwrap()
            .unwrap();
        assert_eq!(p.secret.expose(), "gate_key_abc");
        assert!(!p.api_key_header);
        assert!(presented_credential(&HeaderMap::new()).unwrap().is_none());

        let mut both = headers("Bearer gate_key_abc");
        both.insert(API_KEY_HEADER, HeaderValue::from_static("gate_key_abc"));
        assert_eq!(
            presented_credential(&both).unwrap_err(),
            Rejection::TwoCredentials
        );
        let mut twice = HeaderMap::new();
        twice.append(API_KEY_HEADER, HeaderValue::from_static("gate_key_a"));
        twice.append(API_KEY_HEADER, HeaderValue::from_static("gate_key_b"));
        assert_eq!(
            presented_credential(&twice).unwrap_err(),
            Rejection::Malformed
        );
        for bad in ["", "gate key", "gate_key_\"x\""] {
            let mut h = HeaderMap::new();
            h.insert(API_KEY_HEADER, HeaderValue::from_str(bad).unwrap());
            assert_eq!(
                presented_credential(&h).unwrap_err(),
                Rejection::Malformed,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn key_use_is_claimed_once_a_minute_per_key() {
        let tracker = KeyUseTracker::default();
        assert!(tracker.claim("k1", 1_000));
        assert!(!tracker.claim("k1", 1_000));
        assert!(!tracker.claim("k1", 1_059));
        assert!(tracker.claim("k2", 1_001));
        assert!(tracker.claim("k1", 1_060));
    }

    #[test]
    fn allow_lists_fail_closed() {
        let grant = |ips: &[&str]| KeyGrant {
            id: "k".into(),
            account_id: "a".into(),
            project_id: Some("p".into()),
            scope: "mcp:read".into(),
            allowed_ips: ips.iter().map(ToString::to_string).collect(),
            last_used_at: None,
            calls_per_hour: None,
            tool_filter: None,
        };
        let local: Option<IpAddr> = Some("127.0.0.1".parse().unwrap());
        assert!(key_address_allowed(&grant(&[]), None));
        assert!(key_address_allowed(&grant(&["127.0.0.0/8"]), local));
        assert!(!key_address_allowed(&grant(&["127.0.0.0/8"]), None));
        assert!(!key_address_allowed(&grant(&["10.0.0.0/8"]), local));
        assert!(!key_address_allowed(&grant(&["not an address"]), local));
    }

    fn grant() -> AccessGrant {
        AccessGrant {
            account_id: "a".into(),
            client_id: "c".into(),
            scope: "mcp:read".into(),
            resource: "http://127.0.0.1:8080/mcp".into(),
            issued_at: 0,
            expires_at: 100,
            family_id: "f".into(),
            service: false,
            grant_type: "authorization_code".into(),
            project_id: None,
            calls_per_hour: None,
            chosen_projects: None,
            jkt: None,
            tool_filter: None,
        }
    }

    #[test]
    fn grant_checks() {
        let url = &ResourceIndicator::parse("http://127.0.0.1:8080/mcp").unwrap();
        assert_eq!(check_grant(&grant(), url).unwrap().to_string(), "mcp:read");
        // One rule for every resource comparison: a trailing slash is another resource.
        let g = AccessGrant {
            resource: "http://127.0.0.1:8080/mcp/".into(),
            ..grant()
        };
        assert_eq!(check_grant(&g, url), Err(Rejection::WrongAudience));
        let g = AccessGrant {
            resource: "http://127.0.0.1:8080/other".into(),
            ..grant()
        };
        assert_eq!(check_grant(&g, url), Err(Rejection::WrongAudience));
        let g = AccessGrant {
            scope: "admin".into(),
            ..grant()
        };
        assert_eq!(check_grant(&g, url), Err(Rejection::BadScope));
    }

    #[test]
    fn challenges() {
        let mut vars = HashMap::new();
        vars.insert(
            "MCP_SERVER_URL".to_string(),
            "https://mcp.example.com/mcp".to_string(),
        );
        let config = Config::from_vars(&vars).unwrap();
        let prm = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp";
        assert_eq!(
            unauthorized_challenge(&config, None),
            format!("Bearer resource_metadata=\"{prm}\", scope=\"mcp:read mcp:write\"")
        );
        assert_eq!(
            unauthorized_challenge(&config, Some("invalid_token")),
            format!(
                "Bearer error=\"invalid_token\", resource_metadata=\"{prm}\", scope=\"mcp:read mcp:write\""
            )
        );
        assert_eq!(
            insufficient_scope_challenge(&config),
            format!(
                "Bearer error=\"insufficient_scope\", scope=\"mcp:read mcp:write\", resource_metadata=\"{prm}\""
            )
        );
    }
}
