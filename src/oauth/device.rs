//! The device authorization endpoint `POST /oauth/device_authorization` (RFC 8628 §3.1–3.2),
//! for command-line agents and devices without a browser, and the look-up of a user code the
//! person types at `/device` (the page is in `web::device`; the polling grant in
//! [`super::token`]).
//!
//! A client registered for the `urn:ietf:params:oauth:grant-type:device_code` grant (public
//! or confidential, authenticated as at the token endpoint) asks with `scope` and `resource`,
//! which follow the authorization endpoint's rules ([`super::authorize::resolve_target`]). It
//! gets a device code (`gate_dc_` + 256 random bits) and a user code (8 letters, RFC 8628
//! §6.1), both stored only as SHA-256, valid [`DEVICE_CODE_TTL_SECS`]. Each source address may
//! start [`DEVICE_REQUESTS_PER_WINDOW`] device authorizations per [`DEVICE_WINDOW_SECS`]
//! (beyond: 429 `temporarily_unavailable` with `Retry-After`, as at registration).

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::OAuthError;
use super::authorize::{AuthorizationRequest, TargetError, resolve_target};
use super::client_auth::ClientForm;
use crate::client_addr::ClientAddr;
use crate::domain::audit::{Event, Outcome};
use crate::domain::authorization::AuthorizationErrorCode;
use crate::domain::device::{
    DEVICE_CODE_GRANT, DEVICE_CODE_TTL_SECS, POLL_INTERVAL_SECS, generate_user_code,
    normalize_user_code,
};
use crate::domain::secret::{Secret, TokenHash, TokenKind};
use crate::domain::text::check_line;
use crate::domain::throttle::{Policy, source_key};
use crate::state::AppState;
use crate::store::audit::AuditEvent;
use crate::store::device_grants::{DeviceRecord, NewDevice};
use crate::store::limits::{Admission, Limit};
use crate::store::{StoreError, now};

/// Device authorizations one source address (an IPv6 /64) may start per window.
pub const DEVICE_REQUESTS_PER_WINDOW: i64 = 30;
/// The window of [`DEVICE_REQUESTS_PER_WINDOW`], in seconds.
pub const DEVICE_WINDOW_SECS: i64 = 600;

/// The device authorization response (RFC 8628 §3.2).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DeviceAuthorizationResponse {
    /// The device verification code the client polls with.
    pub device_code: String,
    /// The code the person types, `XXXX-XXXX`.
    pub user_code: String,
    /// Where the person types it: `<issuer>/device`.
    pub verification_uri: String,
    /// The same page with the code filled in (`?user_code=…`), for a QR code or a link.
    pub verification_uri_complete: String,
    /// Seconds until both codes expire.
    pub expires_in: i64,
    /// Seconds the client waits between polls.
    pub interval: i64,
}

/// The per-address budget of device authorizations.
fn device_budget(ip: &str) -> Limit {
    let source = match ip.parse() {
        Ok(addr) => source_key(addr),
        Err(_) => ip.to_string(),
    };
    Limit::new(
        "device-address",
        &source,
        Policy::Window {
            max_hits: DEVICE_REQUESTS_PER_WINDOW,
            max_amount: i64::MAX,
            window_secs: DEVICE_WINDOW_SECS,
        },
        0,
    )
}

/// `429` with `Retry-After` and `temporarily_unavailable` (RFC 6585 §4, RFC 6749 §5.2).
fn throttled(retry_after: i64) -> Response {
    OAuthError::Throttled {
        description: format!(
            "too many device authorizations from this address; retry after {retry_after} seconds"
        ),
        retry_after,
    }
    .into_response()
}

/// `POST /oauth/device_authorization` (RFC 8628 §3.1): the authenticated client's request,
/// answered with the codes (§3.2) and `Cache-Control: no-store`. Errors (RFC 6749 §5.2 JSON):
/// `unauthorized_client` for a client not registered for the device grant, `invalid_scope`,
/// `invalid_target` (RFC 8707), `invalid_client` from client authentication, 429 beyond the
/// address's budget.
pub async fn device_authorization(
    State(state): State<AppState>,
    addr: ClientAddr,
    ClientForm { client, params, .. }: ClientForm,
) -> Result<Response, OAuthError> {
    let now = now();
    let ip = addr.to_string();
    if !super::metadata::permits_grant(&client.grant_types, DEVICE_CODE_GRANT) {
        return Err(OAuthError::UnauthorizedClient(format!(
            "this client is not registered for the device authorization grant (register grant_types with {DEVICE_CODE_GRANT})"
        )));
    }
    if let Admission::Refused { retry_after, .. } =
        state.store.admit(&[device_budget(&ip)], now).await?
    {
        return Ok(throttled(retry_after));
    }
    let (resource, scope, registered) = resolve_target(
        &state,
        client.scope.as_deref(),
        params.get("scope").map(String::as_str),
        params.get("resource").map(String::as_str),
    )
    .await
    .map_err(target_refused)?;
    let device_code = Secret::generate(TokenKind::DeviceCode);
    let device_hash = device_code.hash();
    let request = AuthorizationRequest {
        client_id: client.client_id.clone(),
        client_name: client.client_name.clone().filter(|n| check_line(n).is_ok()),
        redirect_uri: DEVICE_CODE_GRANT.to_string(),
        registered_redirect_uri: DEVICE_CODE_GRANT.to_string(),
        scope,
        state: None,
        code_challenge: String::new(),
        resource,
        prompt: None,
        registered,
        device: Some(device_hash.as_str().to_string()),
        dpop_jkt: None,
        about: super::authorize::ClientAbout::of(&client.metadata, client.created_at),
    };
    let request_json = serde_json::to_string(&request).map_err(|e| {
        tracing::error!(error = %e, "device authorization request not serializable");
        OAuthError::ServerError
    })?;
    let user_code =
        store_user_code(&state, &device_hash, &client.client_id, &request_json, now).await?;
    state
        .store
        .audit(
            AuditEvent {
                client_id: Some(&client.client_id),
                subject: Some(&request.scope),
                source_ip: Some(&ip),
                detail: Some(&format!("resource={}", request.resource)),
                ..AuditEvent::new(Event::DeviceAuthorization, Outcome::Success)
            },
            now,
        )
        .await;
    Ok(codes_response(&state, &device_code, user_code))
}

/// The `invalid_scope` or `invalid_target` (RFC 8707) answer for a refused scope or resource,
/// or the unavailable/server error of a failed read.
fn target_refused(e: TargetError) -> OAuthError {
    match e {
        TargetError::Refused(AuthorizationErrorCode::InvalidScope, d) => {
            OAuthError::InvalidScope(d)
        }
        TargetError::Refused(_, d) => OAuthError::InvalidTarget(d),
        TargetError::Storage { unavailable: true } => OAuthError::TemporarilyUnavailable,
        TargetError::Storage { unavailable: false } => OAuthError::ServerError,
    }
}

/// Stores the device authorization of `client_id` (`request_json`, the device code's hash)
/// under a new user code and returns that code as shown to the person (RFC 8628 §6.1).
/// A user code already taken (one chance in 2^34 per live code) is drawn again, at most three
/// times; then `temporarily_unavailable`. Errors: the store's.
async fn store_user_code(
    state: &AppState,
    device_hash: &TokenHash,
    client_id: &str,
    request_json: &str,
    now: i64,
) -> Result<String, OAuthError> {
    for _ in 0..3 {
        let candidate = generate_user_code();
        #[allow(
            clippy::expect_used,
            reason = "generate_user_code draws only from the alphabet normalize_user_code accepts"
        )]
        let normal = normalize_user_code(&candidate).expect("a generated code is valid");
        let stored = state
            .store
            .insert_device_authorization(&NewDevice {
                device_code_hash: device_hash,
                user_code_hash: &TokenHash::of(&normal),
                client_id,
                request: request_json,
                poll_interval: POLL_INTERVAL_SECS,
                created_at: now,
                expires_at: now + DEVICE_CODE_TTL_SECS,
            })
            .await;
        match stored {
            Ok(()) => return Ok(candidate),
            Err(StoreError::Conflict(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Err(OAuthError::TemporarilyUnavailable)
}

/// The device authorization response (RFC 8628 §3.2), not cached: the device code, the user
/// code, the verification URI with and without the code, its lifetime and the polling
/// interval (seconds).
fn codes_response(state: &AppState, device_code: &Secret, user_code: String) -> Response {
    let verification_uri = state.config.url("/device");
    let complete = format!(
        "{verification_uri}?{}",
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair("user_code", &user_code)
            .finish()
    );
    (
        [
            (header::CACHE_CONTROL, "no-store"),
            (header::PRAGMA, "no-cache"),
        ],
        Json(DeviceAuthorizationResponse {
            device_code: device_code.expose().to_string(),
            user_code,
            verification_uri,
            verification_uri_complete: complete,
            expires_in: DEVICE_CODE_TTL_SECS,
            interval: POLL_INTERVAL_SECS,
        }),
    )
        .into_response()
}

/// The pending, unexpired device authorization of the user code `typed` (in any case, with or
/// without its dash), with its request: `None` for a code of the wrong form, an unknown,
/// expired or answered one, or an unreadable request.
pub async fn pending_by_user_code(
    app: &AppState,
    typed: &str,
    now: i64,
) -> Result<Option<(DeviceRecord, AuthorizationRequest)>, StoreError> {
    let Some(normal) = normalize_user_code(typed) else {
        return Ok(None);
    };
    let Some(device) = app
        .store
        .pending_device_by_user_code(&TokenHash::of(&normal), now)
        .await?
    else {
        return Ok(None);
    };
    let Ok(request) = serde_json::from_str::<AuthorizationRequest>(&device.request) else {
        return Ok(None);
    };
    Ok(Some((device, request)))
}
