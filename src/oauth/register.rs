//! Dynamic client registration (RFC 7591) at `POST /oauth/register`.
//!
//! Public clients register with `token_endpoint_auth_method: none`; confidential ones with
//! `client_secret_basic` or `client_secret_post` and receive a `client_secret` once (stored as
//! SHA-256). Omitted members take RFC 7591 §2 defaults, except `grant_types`, which defaults to
//! `authorization_code` + `refresh_token`: `refresh_token` is implied by `authorization_code`
//! (the token endpoint issues a refresh token with every code) and always registered with it.
//! Unknown members and unknown scope values are ignored; known ones we store are echoed back
//! (§3.2.1), never as empty strings. Text a person may be shown (`client_name`, the URIs,
//! `software_id`, `software_version`, `contacts`) holds no control, invisible or formatting
//! character, and `client_name` holds something visible ([`crate::domain::text`]).

use axum::body::Body;
use axum::extract::State;

use crate::client_addr::ClientAddr;
use crate::domain::audit::{Event, Outcome};
use crate::domain::client_assertion::{PRIVATE_KEY_JWT, validate_jwks_uri, validate_public_jwks};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value, json};

use super::OAuthError;
use crate::domain::device::DEVICE_CODE_GRANT;
use crate::domain::grant::GrantType;
use crate::domain::redirect_uri::validate_registration;
use crate::domain::scope::ScopeSet;
use crate::domain::secret::{Secret, TokenKind, random_urlsafe};
use crate::domain::text::{check_line, forbidden_char};
use crate::domain::throttle::{Policy, source_key};
use crate::state::AppState;
use crate::store::audit::AuditEvent;
use crate::store::limits::{Admission, Limit};
use crate::store::now;
use crate::store::oauth::ClientRecord;

/// Largest registration body accepted, in bytes.
pub const MAX_BODY_BYTES: usize = crate::domain::client::MAX_REGISTRATION_BYTES;
/// Most redirect URIs one client may register.
pub const MAX_REDIRECT_URIS: usize = 20;
/// Longest `client_name`, in characters.
pub const MAX_CLIENT_NAME_CHARS: usize = 200;
/// Longest URI member (`client_uri`, `logo_uri`, …), in bytes.
pub const MAX_URI_BYTES: usize = 2000;

/// `POST /oauth/register`.
pub async fn register(
    State(state): State<AppState>,
    client: ClientAddr,
    headers: http::HeaderMap,
    body: Body,
) -> Response {
    match register_inner(&state, &headers, body, &client.to_string()).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

/// The steps of `POST /oauth/register`: the request head is checked, the address's budget
/// consulted before and spent after the body is read, the metadata parsed, the client stored
/// and audited, and the RFC 7591 §3.2.1 response rendered.
///
/// Errors: `invalid_client_metadata` / `invalid_redirect_uri` for a refused request,
/// `invalid_request` for a body that stopped arriving, or a store error. A spent budget is
/// answered `Ok` with the 429 of [`throttled`].
async fn register_inner(
    state: &AppState,
    headers: &http::HeaderMap,
    body: Body,
    ip: &str,
) -> Result<Response, OAuthError> {
    check_request_head(headers)?;
    let budget = registration_budget(state, ip, 0);
    if let Some(retry_after) = state.store.refusal(&[budget], now()).await? {
        return Ok(throttled(retry_after));
    }
    let bytes = read_body(body).await?;
    if let Some(refused) = registration_limit(state, ip, bytes.len()).await? {
        return Ok(refused);
    }
    let mut parsed = read_document(&bytes)?;
    let now = now();
    let client_id = format!("gc_{}", random_urlsafe(18));
    // A secret for the secret methods; `none` and `private_key_jwt` clients get none.
    let secret = parsed
        .token_endpoint_auth_method
        .starts_with("client_secret_")
        .then(|| Secret::generate(TokenKind::ClientSecret));
    let echoed = echoed_metadata(&mut parsed);

    let record = client_record(&parsed, &client_id, secret.as_ref(), &echoed, now);
    state.store.create_client(&record).await?;
    metrics::counter!(crate::metrics::REGISTRATIONS, "outcome" => "success").increment(1);
    state
        .store
        .audit(
            AuditEvent {
                client_id: Some(&client_id),
                source_ip: Some(ip),
                detail: Some(&parsed.token_endpoint_auth_method),
                ..AuditEvent::new(Event::ClientRegistered, Outcome::Success)
            },
            now,
        )
        .await;

    Ok(registered(&client_id, now, secret.as_ref(), echoed))
}

/// Refusals that need no body, made before the body is read: a `Content-Type` that is not
/// JSON, or a declared `Content-Length` over [`MAX_BODY_BYTES`].
///
/// Errors: `invalid_client_metadata` saying which.
fn check_request_head(headers: &http::HeaderMap) -> Result<(), OAuthError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !content_type
        .to_ascii_lowercase()
        .starts_with("application/json")
    {
        return Err(OAuthError::InvalidClientMetadata(
            "the request body must be JSON (Content-Type: application/json)".into(),
        ));
    }
    if crate::request_body::declared_over(headers, MAX_BODY_BYTES) {
        return Err(OAuthError::InvalidClientMetadata(format!(
            "the request body is larger than {MAX_BODY_BYTES} bytes"
        )));
    }
    Ok(())
}

/// The whole registration body, at most [`MAX_BODY_BYTES`].
///
/// Errors: `invalid_request` when the body stopped arriving in time, else
/// `invalid_client_metadata` for a body over the limit.
async fn read_body(body: Body) -> Result<axum::body::Bytes, OAuthError> {
    axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|e| {
            if crate::error::body_stalled(&e) {
                OAuthError::InvalidRequest(
                    "the request body stopped arriving before its end".to_string(),
                )
            } else {
                OAuthError::InvalidClientMetadata(format!(
                    "the request body is larger than {MAX_BODY_BYTES} bytes"
                ))
            }
        })
}

/// The registered metadata echoed in the response and stored with the client (RFC 7591
/// §3.2.1): the members this server registered, in their order, then `parsed`'s other echoed
/// members (taken out of it).
fn echoed_metadata(parsed: &mut Parsed) -> Map<String, Value> {
    let mut echoed = Map::new();
    echoed.insert("redirect_uris".into(), json!(parsed.redirect_uris));
    echoed.insert(
        "token_endpoint_auth_method".into(),
        json!(parsed.token_endpoint_auth_method),
    );
    echoed.insert("grant_types".into(), json!(parsed.grant_types));
    let code_grant = parsed
        .grant_types
        .iter()
        .any(|g| g == GrantType::AuthorizationCode.as_str());
    let response_types: &[&str] = if code_grant { &["code"] } else { &[] };
    echoed.insert("response_types".into(), json!(response_types));
    if let Some(n) = &parsed.client_name {
        echoed.insert("client_name".into(), json!(n));
    }
    if let Some(s) = &parsed.scope {
        echoed.insert("scope".into(), json!(s));
    }
    for (k, v) in std::mem::take(&mut parsed.extra) {
        echoed.insert(k, v);
    }
    echoed
}

/// The stored client of a registration: `parsed`'s metadata under `client_id`, the hash of its
/// `secret` if it has one, and the `echoed` metadata; registered at `now`.
fn client_record(
    parsed: &Parsed,
    client_id: &str,
    secret: Option<&Secret>,
    echoed: &Map<String, Value>,
    now: i64,
) -> ClientRecord {
    ClientRecord {
        client_id: client_id.to_owned(),
        client_secret_hash: secret.map(Secret::hash),
        token_endpoint_auth_method: parsed.token_endpoint_auth_method.clone(),
        client_name: parsed.client_name.clone(),
        redirect_uris: parsed.redirect_uris.clone(),
        grant_types: parsed.grant_types.clone(),
        scope: parsed.scope.clone(),
        metadata: Value::Object(echoed.clone()),
        can_introspect: false,
        created_at: now,
    }
}

/// The `201 Created` client information response (RFC 7591 §3.2.1), not cached: `client_id`,
/// its issue time `now`, the `secret` (once, never expiring) when there is one, then the
/// `echoed` metadata.
fn registered(
    client_id: &str,
    now: i64,
    secret: Option<&Secret>,
    echoed: Map<String, Value>,
) -> Response {
    let mut out = Map::new();
    out.insert("client_id".into(), json!(client_id));
    out.insert("client_id_issued_at".into(), json!(now));
    if let Some(s) = secret {
        out.insert("client_secret".into(), json!(s.expose()));
        out.insert("client_secret_expires_at".into(), json!(0));
    }
    out.extend(echoed);
    (
        StatusCode::CREATED,
        [
            (header::CACHE_CONTROL, "no-store"),
            (header::PRAGMA, "no-cache"),
        ],
        axum::Json(Value::Object(out)),
    )
        .into_response()
}

/// RFC 7591 §3 lets a server limit registrations: each source address (an IPv6 /64) may send
/// `GATEHOUSE_REGISTRATIONS_PER_HOUR` requests and `GATEHOUSE_REGISTRATION_BYTES_PER_HOUR` bytes
/// of requests per hour (counted before the request is parsed, whatever its outcome). Beyond
/// that: `429 Too Many Requests` with `Retry-After` (RFC 6585 §4) and an RFC 6749 §5.2 body,
/// `temporarily_unavailable`, with nothing written.
/// The per-address budget of registrations: `GATEHOUSE_REGISTRATIONS_PER_HOUR` requests and
/// `GATEHOUSE_REGISTRATION_BYTES_PER_HOUR` bytes per source address (an IPv6 /64) per hour,
/// an attempt of `size` bytes. Client ID metadata documents fetched for anonymous visitors
/// spend the same budget ([`super::clients`]).
pub fn registration_budget(state: &AppState, ip: &str, size: usize) -> Limit {
    let source = match ip.parse() {
        Ok(addr) => source_key(addr),
        Err(_) => ip.to_string(),
    };
    Limit::new(
        "register-address",
        &source,
        Policy::Window {
            max_hits: state.config.registrations_per_hour,
            max_amount: state.config.registration_bytes_per_hour,
            window_secs: 3600,
        },
        i64::try_from(size).unwrap_or(i64::MAX),
    )
}

/// The 429 of a spent registration budget (`Retry-After` in seconds).
fn throttled(retry_after: i64) -> Response {
    metrics::counter!(crate::metrics::REGISTRATIONS, "outcome" => "throttled").increment(1);
    OAuthError::Throttled {
        description: format!(
            "too many registrations from this address; retry after {retry_after} seconds"
        ),
        retry_after,
    }
    .into_response()
}

async fn registration_limit(
    state: &AppState,
    ip: &str,
    size: usize,
) -> Result<Option<Response>, OAuthError> {
    let limit = registration_budget(state, ip, size);
    Ok(match state.store.admit(&[limit], now()).await? {
        Admission::Admitted(_) => None,
        Admission::Refused { retry_after, .. } => Some(throttled(retry_after)),
    })
}

struct Parsed {
    redirect_uris: Vec<String>,
    token_endpoint_auth_method: String,
    grant_types: Vec<String>,
    client_name: Option<String>,
    scope: Option<String>,
    extra: Vec<(String, Value)>,
}

fn bad(msg: impl Into<String>) -> OAuthError {
    OAuthError::InvalidClientMetadata(msg.into())
}

/// The client metadata of an RFC 7591 §2 registration request, as sent. Members this server
/// does not use are ignored; a string member that is `null` or blank counts as absent.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RegistrationRequest {
    /// `redirect_uris`.
    #[serde(deserialize_with = "string_list")]
    pub redirect_uris: Option<Vec<String>>,
    /// `token_endpoint_auth_method` (default `client_secret_basic`).
    #[serde(deserialize_with = "opt_string")]
    pub token_endpoint_auth_method: Option<String>,
    /// `grant_types` (default `authorization_code`).
    #[serde(deserialize_with = "string_list")]
    pub grant_types: Option<Vec<String>>,
    /// `response_types` (only `code`).
    #[serde(deserialize_with = "string_list")]
    pub response_types: Option<Vec<String>>,
    /// `client_name`.
    #[serde(deserialize_with = "opt_string")]
    pub client_name: Option<String>,
    /// `scope`, space-delimited.
    #[serde(deserialize_with = "opt_string")]
    pub scope: Option<String>,
    /// `client_uri`.
    #[serde(deserialize_with = "opt_string")]
    pub client_uri: Option<String>,
    /// `logo_uri`.
    #[serde(deserialize_with = "opt_string")]
    pub logo_uri: Option<String>,
    /// `tos_uri`.
    #[serde(deserialize_with = "opt_string")]
    pub tos_uri: Option<String>,
    /// `policy_uri`.
    #[serde(deserialize_with = "opt_string")]
    pub policy_uri: Option<String>,
    /// `software_id`.
    #[serde(deserialize_with = "opt_string")]
    pub software_id: Option<String>,
    /// `software_version`.
    #[serde(deserialize_with = "opt_string")]
    pub software_version: Option<String>,
    /// `application_type` (`OpenID` Connect Registration §2: `web` or `native`).
    #[serde(deserialize_with = "opt_string")]
    pub application_type: Option<String>,
    /// `jwks_uri`.
    #[serde(deserialize_with = "opt_string")]
    pub jwks_uri: Option<String>,
    /// `contacts`.
    #[serde(deserialize_with = "string_list")]
    pub contacts: Option<Vec<String>>,
    /// `jwks`: the client's public keys given inline (RFC 7591 §2), for `private_key_jwt`.
    pub jwks: Option<Value>,
}

impl RegistrationRequest {
    /// Reads a registration body. Errors (`invalid_client_metadata`): not JSON, not an object,
    /// or a member of the wrong type, named with its path (`client_name must be a string`).
    pub fn from_json(bytes: &[u8]) -> Result<Self, OAuthError> {
        // A derived struct also reads a JSON array (its members by position): only an object is
        // a registration request.
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            return Err(
                match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
                    Ok(_) => bad("the request body must be a JSON object"),
                    Err(e) => bad(format!("the request body is not valid JSON: {e}")),
                },
            );
        }
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let result: Result<Self, _> = serde_path_to_error::deserialize(&mut de);
        let request = result.map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if inner.is_syntax() || inner.is_eof() {
                bad(format!("the request body is not valid JSON: {inner}"))
            } else if path == "." {
                bad("the request body must be a JSON object")
            } else {
                let why = inner.to_string();
                let why = why.split(" at line ").next().unwrap_or_default();
                bad(format!("{path} {why}"))
            }
        })?;
        de.end()
            .map_err(|e| bad(format!("the request body is not valid JSON: {e}")))?;
        Ok(request)
    }

    /// The echoed string members, in the order they are echoed (RFC 7591 §3.2.1).
    fn echoed_strings(&self) -> [(&'static str, &Option<String>); 8] {
        [
            ("client_uri", &self.client_uri),
            ("logo_uri", &self.logo_uri),
            ("tos_uri", &self.tos_uri),
            ("policy_uri", &self.policy_uri),
            ("software_id", &self.software_id),
            ("software_version", &self.software_version),
            ("application_type", &self.application_type),
            ("jwks_uri", &self.jwks_uri),
        ]
    }
}

/// A string member: absent, `null` or blank → `None`; another type → "must be a string".
fn opt_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::String(s) if s.trim().is_empty() => Ok(None),
        Value::String(s) => Ok(Some(s)),
        _ => Err(D::Error::custom("must be a string")),
    }
}

/// An array-of-strings member: absent or `null` → `None`; anything else but an array of
/// strings → "must be an array of strings".
fn string_list<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    let wrong = || D::Error::custom("must be an array of strings");
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::Array(items) => items
            .into_iter()
            .map(|v| match v {
                Value::String(s) => Ok(s),
                _ => Err(wrong()),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        _ => Err(wrong()),
    }
}

/// Reads a registration request body (RFC 7591 §2, §3.1): a JSON object whose members pass
/// the checks of `POST /oauth/register`. Pure and bounded by the body's size; the fuzz target
/// `registration` calls it through [`check_document`].
fn read_document(bytes: &[u8]) -> Result<Parsed, OAuthError> {
    parse_metadata(&RegistrationRequest::from_json(bytes)?)
}

/// Whether a registration request body (RFC 7591 §2) would be accepted as metadata: `Ok` or
/// the `invalid_client_metadata` / `invalid_redirect_uri` error `POST /oauth/register`
/// answers (RFC 7591 §3.2.2). No storage, no limits: the pure part of registration, exposed
/// for fuzzing.
pub fn check_document(bytes: &[u8]) -> Result<(), OAuthError> {
    read_document(bytes).map(|_| ())
}

/// Checks a registration request's metadata (RFC 7591 §2) step by step: the authentication
/// method and the client's keys, the grant and response types, the redirect URIs, the name,
/// the scope, then the other echoed members; the first refusal is returned.
///
/// Errors: `invalid_client_metadata`, or `invalid_redirect_uri` for the redirect URIs.
fn parse_metadata(req: &RegistrationRequest) -> Result<Parsed, OAuthError> {
    let (token_endpoint_auth_method, jwks) = auth_method_and_keys(req)?;
    let (grant_types, code_grant) = grant_and_response_types(req)?;
    let redirect_uris = redirect_uris(req, code_grant)?;
    let client_name = client_name(req)?;
    let scope = registered_scope(req)?;
    let extra = extra_members(req, jwks)?;
    Ok(Parsed {
        redirect_uris,
        token_endpoint_auth_method,
        grant_types,
        client_name,
        scope,
        extra,
    })
}

/// `token_endpoint_auth_method` (default `client_secret_basic`), one this server supports, and
/// the client's public keys: `jwks_uri` or inline `jwks` (a `null` one counts as absent), not
/// both, each valid, and one of them for `private_key_jwt`.
///
/// Returns the method and the inline `jwks`. Errors: `invalid_client_metadata`.
fn auth_method_and_keys(req: &RegistrationRequest) -> Result<(String, Option<&Value>), OAuthError> {
    let token_endpoint_auth_method = req
        .token_endpoint_auth_method
        .clone()
        .unwrap_or_else(|| "client_secret_basic".to_string());
    if !super::metadata::AUTH_METHODS.contains(&token_endpoint_auth_method.as_str()) {
        return Err(bad(format!(
            "token_endpoint_auth_method \"{token_endpoint_auth_method}\" is not supported (use none, client_secret_basic, client_secret_post or private_key_jwt)"
        )));
    }
    // RFC 7591 §2: `jwks_uri` and `jwks` MUST NOT both be present; `private_key_jwt` needs one.
    let jwks = req.jwks.as_ref().filter(|v| !v.is_null());
    if jwks.is_some() && req.jwks_uri.is_some() {
        return Err(bad("send jwks_uri or jwks, not both"));
    }
    if let Some(uri) = &req.jwks_uri {
        validate_jwks_uri(uri).map_err(bad)?;
    }
    if let Some(jwks) = jwks {
        validate_public_jwks(jwks).map_err(bad)?;
    }
    if token_endpoint_auth_method == PRIVATE_KEY_JWT && jwks.is_none() && req.jwks_uri.is_none() {
        return Err(bad(
            "private_key_jwt needs the client's public keys: jwks_uri or jwks",
        ));
    }
    Ok((token_endpoint_auth_method, jwks))
}

/// `grant_types` (default `authorization_code`): each one this server registers, and at least
/// one that obtains tokens by itself; then `response_types`, which may only hold `code`.
///
/// Returns the grant types registered ([`super::metadata::effective_grant_types`]) and whether
/// the authorization code grant is among those asked. Errors: `invalid_client_metadata`.
fn grant_and_response_types(req: &RegistrationRequest) -> Result<(Vec<String>, bool), OAuthError> {
    let requested_grants = req
        .grant_types
        .clone()
        .filter(|g| !g.is_empty())
        .unwrap_or_else(|| vec![GrantType::AuthorizationCode.as_str().into()]);
    for g in &requested_grants {
        if !super::metadata::REGISTRABLE_GRANT_TYPES.contains(&g.as_str()) {
            return Err(bad(format!(
                "grant type \"{g}\" is not supported (use authorization_code, refresh_token, {DEVICE_CODE_GRANT} or {})",
                super::id_jag::JWT_BEARER
            )));
        }
    }
    let code_grant = requested_grants
        .iter()
        .any(|g| g == GrantType::AuthorizationCode.as_str());
    if !code_grant
        && !requested_grants
            .iter()
            .any(|g| g == DEVICE_CODE_GRANT || g == super::id_jag::JWT_BEARER)
    {
        return Err(bad(format!(
            "grant_types must include authorization_code, {DEVICE_CODE_GRANT} or {}",
            super::id_jag::JWT_BEARER
        )));
    }
    let grant_types = super::metadata::effective_grant_types(&requested_grants);

    if let Some(rt) = &req.response_types
        && rt.iter().any(|r| r != "code")
    {
        return Err(bad("response_types may only contain \"code\""));
    }
    Ok((grant_types, code_grant))
}

/// `redirect_uris`: at least one when the client uses the authorization code grant
/// (`code_grant`), at most [`MAX_REDIRECT_URIS`], each one a registrable redirect URI.
///
/// Errors: `invalid_redirect_uri`.
fn redirect_uris(req: &RegistrationRequest, code_grant: bool) -> Result<Vec<String>, OAuthError> {
    // A client of the device grant alone (RFC 8628) is never redirected to: no redirect URI.
    let redirect_uris = req.redirect_uris.clone().unwrap_or_default();
    if redirect_uris.is_empty() && code_grant {
        return Err(OAuthError::InvalidRedirectUri(
            "redirect_uris is required: at least one redirect URI for the authorization_code grant"
                .into(),
        ));
    }
    if redirect_uris.len() > MAX_REDIRECT_URIS {
        return Err(OAuthError::InvalidRedirectUri(format!(
            "at most {MAX_REDIRECT_URIS} redirect URIs may be registered"
        )));
    }
    for uri in &redirect_uris {
        validate_registration(uri).map_err(|e| {
            OAuthError::InvalidRedirectUri(format!("redirect URI \"{}\": {e}", truncate(uri)))
        })?;
    }
    Ok(redirect_uris)
}

/// `client_name`, when given: at most [`MAX_CLIENT_NAME_CHARS`] characters, one line of
/// visible text ([`check_line`]).
///
/// Errors: `invalid_client_metadata`.
fn client_name(req: &RegistrationRequest) -> Result<Option<String>, OAuthError> {
    let client_name = req.client_name.clone();
    if let Some(n) = &client_name {
        if n.chars().count() > MAX_CLIENT_NAME_CHARS {
            return Err(bad(format!(
                "client_name must be at most {MAX_CLIENT_NAME_CHARS} characters"
            )));
        }
        check_line(n).map_err(|e| bad(format!("client_name {e}")))?;
    }
    Ok(client_name)
}

/// The scope registered: the values of `scope` this server serves; `None` when none is asked
/// or none is left.
///
/// Errors: `invalid_client_metadata` for a malformed `scope`.
fn registered_scope(req: &RegistrationRequest) -> Result<Option<String>, OAuthError> {
    // RFC 7591 §3.2.1 lets the server register less than asked and say so in the response:
    // scope values it does not serve (`openid`, `profile`, …) are left out, as at the
    // authorization endpoint (RFC 6749 §3.3); with none left, no scope is registered.
    Ok(match &req.scope {
        Some(s) => {
            let known = ScopeSet::parse_known(s).map_err(|e| bad(format!("scope: {e}")))?;
            (!known.is_empty()).then(|| known.to_string())
        }
        None => None,
    })
}

/// The other members echoed and stored: `application_type` (checked to be `web` or
/// `native`), the string members of [`RegistrationRequest::echoed_strings`] (at most
/// [`MAX_URI_BYTES`], nothing invisible), up to ten non-empty `contacts`, and the inline
/// `jwks`.
///
/// Errors: `invalid_client_metadata`.
fn extra_members(
    req: &RegistrationRequest,
    jwks: Option<&Value>,
) -> Result<Vec<(String, Value)>, OAuthError> {
    // OpenID Connect Registration §2 (MCP 2026-07-28 asks clients to send it): "web" or
    // "native". Both may use loopback redirect URIs here, which MCP's native clients need.
    if let Some(kind) = &req.application_type
        && kind != "web"
        && kind != "native"
    {
        return Err(bad(format!(
            "application_type \"{}\" is not supported (use web or native)",
            truncate(kind)
        )));
    }
    let mut extra = Vec::new();
    for (key, value) in req.echoed_strings() {
        if let Some(v) = value {
            if v.len() > MAX_URI_BYTES {
                return Err(bad(format!("{key} must be at most {MAX_URI_BYTES} bytes")));
            }
            refuse_invisible(key, v)?;
            extra.push((key.to_string(), Value::String(v.clone())));
        }
    }
    if let Some(contacts) = &req.contacts {
        let contacts: Vec<&String> = contacts.iter().filter(|c| !c.is_empty()).take(10).collect();
        for c in &contacts {
            refuse_invisible("contacts", c)?;
        }
        if !contacts.is_empty() {
            extra.push(("contacts".into(), json!(contacts)));
        }
    }
    if let Some(jwks) = jwks {
        extra.push(("jwks".into(), jwks.clone()));
    }
    Ok(extra)
}

/// Refuses a member a person may be shown (RFC 7591 §2 human-readable and URI members) when
/// it holds a control, invisible or formatting character
/// ([`crate::domain::text::is_forbidden_in_line`]); the description names the member and the
/// character.
fn refuse_invisible(key: &str, value: &str) -> Result<(), OAuthError> {
    match forbidden_char(value, false) {
        Some(c) => Err(bad(format!(
            "{key} must not contain control, invisible or formatting characters (found U+{:04X})",
            u32::from(c)
        ))),
        None => Ok(()),
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(100).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(body: &str) -> String {
        match RegistrationRequest::from_json(body.as_bytes()) {
            Err(OAuthError::InvalidClientMetadata(d)) => d,
            other => panic!("{body}: {other:?}"),
        }
    }

    #[test]
    fn errors_name_the_member_as_before() {
        assert_eq!(
            error(r#"{"client_name": 5}"#),
            "client_name must be a string"
        );
        assert_eq!(
            error(r#"{"redirect_uris": "https://a.example/cb"}"#),
            "redirect_uris must be an array of strings"
        );
        assert_eq!(
            error(r#"{"redirect_uris": ["https://a.example/cb", 1]}"#),
            "redirect_uris must be an array of strings"
        );
        assert_eq!(error("[1, 2]"), "the request body must be a JSON object");
        assert_eq!(
            error(r#"[["https://a.example/cb"]]"#),
            "the request body must be a JSON object"
        );
        assert_eq!(error(r#""text""#), "the request body must be a JSON object");
        assert!(error("{").starts_with("the request body is not valid JSON: "));
        assert!(error("{} x").starts_with("the request body is not valid JSON: "));
    }

    #[test]
    fn blank_and_null_members_are_absent_and_unknown_ones_ignored() {
        let req = RegistrationRequest::from_json(
            br#"{"client_name": "  ", "scope": null, "x_unknown": {"a": 1}, "contacts": ["a@b.example"]}"#,
        )
        .unwrap();
        assert_eq!(req.client_name, None);
        assert_eq!(req.scope, None);
        assert_eq!(req.contacts, Some(vec!["a@b.example".to_string()]));
    }
}
