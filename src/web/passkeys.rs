//! Passkey pages and ceremonies (issue 36, item 2; `WebAuthn` Level 3 §7 for what the
//! `webauthn-rs` crate checks).
//!
//! - `POST /signin/passkey/options` and `POST /signin/passkey`: a discoverable sign-in (no
//!   email). The answer signs in like a password and its second factor would: a strong
//!   sign-in ([`SignInMethod::Passkey`], no code asked), the same `next` continued (a pending
//!   authorization request), audited `signin` with `method=passkey`.
//! - `POST /account/passkeys/options` and `POST /account/passkeys`: adding a named passkey to
//!   the signed-in account.
//! - `GET/POST /account/passkeys/remove`: removing one, after a confirmation page.
//! - `GET /static/passkey.js`: the one script of the console, which runs these ceremonies in
//!   the browser (`navigator.credentials`).
//!
//! The ceremony endpoints speak JSON: a body `{"ceremony": ID, "credential": …}` posted with
//! the page's CSRF token in `X-CSRF-Token`; errors are `{"error": "words for the page"}` with
//! 400 (not understood, ceremony expired or used), 401 (the passkey's answer refused), 403
//! (CSRF, a disabled account), 409 (a passkey already registered) or 503 (passkeys not
//! available on this server). Nothing is created or changed by a refused answer.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;
use serde_json::json;
use tower_sessions::Session;
use webauthn_rs::prelude::{
    AuthenticationResult, DiscoverableAuthentication, DiscoverableKey, Passkey,
    PasskeyRegistration, PublicKeyCredential, RegisterPublicKeyCredential,
};

use super::session::{PageCsrf, SignInMethod, safe_next, set_notice, signed_in};
use super::{Confirmation, CsrfForm, PageQuery, confirm_page, see_other};
use crate::client_addr::ClientAddr;
use crate::domain::account::AccountStatus;
use crate::domain::audit::{Event, Outcome};
use crate::domain::secret::{TokenHash, random_urlsafe};
use crate::error::AppError;
use crate::passkeys::{self, CEREMONY_LIFETIME_SECS};
use crate::state::AppState;
use crate::store::audit::AuditEvent;
use crate::store::now;
use crate::store::passkeys::{CeremonyKind, StoredPasskey};

/// Largest JSON body of a ceremony endpoint, in bytes (an attestation with a certificate
/// chain fits well within).
pub const MAX_CEREMONY_BODY_BYTES: usize = 64 * 1024;

/// The header that carries the page's CSRF token on the JSON endpoints.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// The script of the passkey buttons (served at `/static/passkey.js`).
const SCRIPT: &str = include_str!("../../static/passkey.js");

/// `GET /static/passkey.js`: the passkey script, cached for an hour.
pub async fn script() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        SCRIPT,
    )
        .into_response()
}

/// The Content-Security-Policy of the pages with a passkey button: the site's policy plus
/// this server's own scripts and `fetch` to itself (no inline script).
pub const CONTENT_SECURITY_POLICY_WITH_SCRIPT: &str = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'";

/// `response` (a page with a passkey button) allowed to run `/static/passkey.js`.
pub fn with_script(mut response: Response) -> Response {
    response.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY_WITH_SCRIPT),
    );
    response
}

/// Whether passkeys work on this server (the frontend's host can be a relying party id).
pub fn available(state: &AppState) -> bool {
    passkeys::relying_party(&state.config).is_ok()
}

/// A JSON error `{"error": message}` with `status`, never cached.
fn refuse(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(header::CACHE_CONTROL, "no-store")],
        axum::Json(json!({ "error": message })),
    )
        .into_response()
}

/// A JSON answer with 200, never cached.
fn answer(value: serde_json::Value) -> Response {
    (
        StatusCode::OK,
        [(header::CACHE_CONTROL, "no-store")],
        axum::Json(value),
    )
        .into_response()
}

const EXPIRED: &str = "This passkey request has expired or was already used. Try again.";
const NOT_UNDERSTOOD: &str = "The request was not understood. Reload the page and try again.";
const UNAVAILABLE: &str = "Passkeys are not available on this server.";

/// Checks the CSRF header, then reads a JSON body of at most [`MAX_CEREMONY_BODY_BYTES`].
/// Refusals: 403 (no or wrong token), 415 (not JSON), 413 (too large), 400 (not `T`).
async fn read_json<T: serde::de::DeserializeOwned>(
    session: &Session,
    csrf: &PageCsrf,
    request: Request,
) -> Result<T, Response> {
    let (parts, body) = request.into_parts();
    let token = parts
        .headers
        .get(CSRF_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let good = csrf
        .verify(session, token)
        .await
        .map_err(IntoResponse::into_response)?;
    if token.is_empty() || !good {
        return Err(refuse(
            StatusCode::FORBIDDEN,
            "This page has expired. Reload it and try again.",
        ));
    }
    let json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().starts_with("application/json"));
    if !json {
        return Err(refuse(StatusCode::UNSUPPORTED_MEDIA_TYPE, NOT_UNDERSTOOD));
    }
    if crate::request_body::declared_over(&parts.headers, MAX_CEREMONY_BODY_BYTES) {
        return Err(refuse(StatusCode::PAYLOAD_TOO_LARGE, NOT_UNDERSTOOD));
    }
    let bytes = axum::body::to_bytes(body, MAX_CEREMONY_BODY_BYTES)
        .await
        .map_err(|_| refuse(StatusCode::PAYLOAD_TOO_LARGE, NOT_UNDERSTOOD))?;
    serde_json::from_slice(&bytes).map_err(|_| refuse(StatusCode::BAD_REQUEST, NOT_UNDERSTOOD))
}

/// Body of `POST /account/passkeys/options`.
#[derive(Deserialize)]
pub struct AddOptions {
    #[serde(default)]
    name: String,
}

/// Body of `POST /account/passkeys` and `POST /signin/passkey`.
#[derive(Deserialize)]
pub struct Finish<C> {
    ceremony: String,
    credential: C,
    #[serde(default)]
    next: Option<String>,
}

/// Stores a new ceremony and returns its id for the browser.
async fn begin(
    state: &AppState,
    kind: CeremonyKind,
    account_id: Option<&str>,
    name: Option<&str>,
    ceremony_state: &impl serde::Serialize,
) -> Result<String, AppError> {
    let id = random_urlsafe(32);
    let state_json = serde_json::to_string(ceremony_state)
        .map_err(|e| AppError::Other(format!("passkey ceremony state: {e}")))?;
    let now = now();
    state
        .store
        .begin_ceremony(
            &TokenHash::of(&id),
            kind,
            account_id,
            name,
            &state_json,
            now + CEREMONY_LIFETIME_SECS,
            now,
        )
        .await?;
    Ok(id)
}

/// `POST /account/passkeys/options` (`{"name": …}`): the `navigator.credentials.create`
/// options for a new passkey of the signed-in account, `{"ceremony": ID, "publicKey": …}`.
pub async fn add_options(
    State(state): State<AppState>,
    session: Session,
    csrf: PageCsrf,
    request: Request,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(refuse(
            StatusCode::UNAUTHORIZED,
            "You are signed out. Sign in again.",
        ));
    };
    let body: AddOptions = match read_json(&session, &csrf, request).await {
        Ok(b) => b,
        Err(r) => return Ok(r),
    };
    let (Ok(rp), Some(user)) = (
        passkeys::relying_party(&state.config),
        passkeys::user_handle(&account.id),
    ) else {
        return Ok(refuse(StatusCode::SERVICE_UNAVAILABLE, UNAVAILABLE));
    };
    let existing = state
        .store
        .passkeys_of(&account.id)
        .await?
        .iter()
        .filter_map(|p| serde_json::from_str::<Passkey>(&p.passkey).ok())
        .map(|p| p.cred_id().clone())
        .collect();
    let (options, ceremony_state) =
        match passkeys::start_registration(&rp, user, &account.email, existing) {
            Ok(started) => started,
            Err(e) => {
                tracing::warn!(error = %e, "passkey registration not started");
                return Ok(refuse(StatusCode::SERVICE_UNAVAILABLE, UNAVAILABLE));
            }
        };
    let name = passkeys::clean_name(&body.name);
    let id = begin(
        &state,
        CeremonyKind::Register,
        Some(&account.id),
        Some(&name),
        &ceremony_state,
    )
    .await?;
    Ok(answer(
        json!({ "ceremony": id, "publicKey": options.public_key }),
    ))
}

/// `POST /account/passkeys` (`{"ceremony": ID, "credential": …}`): checks the authenticator's
/// answer against the ceremony this account began and stores the passkey. `{"redirect":
/// "/account"}` on success (the account page then says it was added).
pub async fn add(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    csrf: PageCsrf,
    request: Request,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(refuse(
            StatusCode::UNAUTHORIZED,
            "You are signed out. Sign in again.",
        ));
    };
    let body: Finish<RegisterPublicKeyCredential> = match read_json(&session, &csrf, request).await
    {
        Ok(b) => b,
        Err(r) => return Ok(r),
    };
    let now = now();
    let ip = client.to_string();
    let Some(taken) = state
        .store
        .take_ceremony(
            &TokenHash::of(&body.ceremony),
            CeremonyKind::Register,
            Some(&account.id),
            now,
        )
        .await?
    else {
        return Ok(refuse(StatusCode::BAD_REQUEST, EXPIRED));
    };
    let Ok(ceremony_state) = serde_json::from_str::<PasskeyRegistration>(&taken.state) else {
        return Ok(refuse(StatusCode::BAD_REQUEST, EXPIRED));
    };
    let Ok(rp) = passkeys::relying_party(&state.config) else {
        return Ok(refuse(StatusCode::SERVICE_UNAVAILABLE, UNAVAILABLE));
    };
    let passkey = match rp.finish_passkey_registration(&body.credential, &ceremony_state) {
        Ok(p) => p,
        Err(e) => {
            audit(
                &state,
                Event::PasskeyAdded,
                Outcome::Failure,
                Some(&account.id),
                &ip,
                &format!("refused: {e}"),
                now,
            )
            .await;
            return Ok(refuse(
                StatusCode::UNAUTHORIZED,
                "The passkey's answer could not be verified, so it was not added. Try again.",
            ));
        }
    };
    let name = taken
        .name
        .unwrap_or_else(|| passkeys::DEFAULT_NAME.to_string());
    let credential_id = URL_SAFE_NO_PAD.encode(passkey.cred_id().as_slice());
    let passkey_json =
        serde_json::to_string(&passkey).map_err(|e| AppError::Other(format!("passkey: {e}")))?;
    match state
        .store
        .add_passkey(&account.id, &credential_id, &name, &passkey_json, now)
        .await
    {
        Ok(_) => {}
        Err(crate::store::StoreError::Conflict(_)) => {
            return Ok(refuse(
                StatusCode::CONFLICT,
                "This passkey is already registered.",
            ));
        }
        Err(e) => return Err(e.into()),
    }
    audit(
        &state,
        Event::PasskeyAdded,
        Outcome::Success,
        Some(&account.id),
        &ip,
        "",
        now,
    )
    .await;
    set_notice(&session, &format!("Passkey \u{201c}{name}\u{201d} added.")).await?;
    Ok(answer(json!({ "redirect": "/account" })))
}

/// `POST /signin/passkey/options`: the `navigator.credentials.get` options of a discoverable
/// sign-in, `{"ceremony": ID, "publicKey": …}`. Writes only the ceremony row.
pub async fn sign_in_options(
    State(state): State<AppState>,
    session: Session,
    csrf: PageCsrf,
    request: Request,
) -> Result<Response, AppError> {
    let _: serde_json::Value = match read_json(&session, &csrf, request).await {
        Ok(b) => b,
        Err(r) => return Ok(r),
    };
    let Ok(rp) = passkeys::relying_party(&state.config) else {
        return Ok(refuse(StatusCode::SERVICE_UNAVAILABLE, UNAVAILABLE));
    };
    let (options, ceremony_state) = match passkeys::start_sign_in(&rp) {
        Ok(started) => started,
        Err(e) => {
            tracing::warn!(error = %e, "passkey sign-in not started");
            return Ok(refuse(StatusCode::SERVICE_UNAVAILABLE, UNAVAILABLE));
        }
    };
    let id = begin(&state, CeremonyKind::SignIn, None, None, &ceremony_state).await?;
    Ok(answer(
        json!({ "ceremony": id, "publicKey": options.public_key }),
    ))
}

/// What a refused passkey sign-in is recorded with: where it came from and when.
#[derive(Clone, Copy)]
struct Failed<'a> {
    state: &'a AppState,
    ip: &'a str,
    now: i64,
}

impl Failed<'_> {
    /// Counts a failed sign-in, then audits it (`signin`, `failure`, with `reason` and the
    /// `account` when known).
    async fn signin(self, reason: &str, account: Option<&str>) {
        crate::signin::count(Outcome::Failure);
        audit(
            self.state,
            Event::Signin,
            Outcome::Failure,
            account,
            self.ip,
            reason,
            self.now,
        )
        .await;
    }
}

/// The stored passkey that `credential` names (by its credential id, for the account of its
/// user handle) and the passkey it holds. Refusals, recorded with `failed`: 401 when the
/// answer names no account, or a passkey not registered here (or of another account).
/// Errors: the store's, or a stored passkey that cannot be read.
async fn named_passkey(
    state: &AppState,
    rp: &webauthn_rs::Webauthn,
    credential: &PublicKeyCredential,
    failed: Failed<'_>,
) -> Result<Result<(StoredPasskey, Passkey), Response>, AppError> {
    let Ok((user, credential_id)) = rp.identify_discoverable_authentication(credential) else {
        failed.signin("no user handle", None).await;
        return Ok(Err(refuse(
            StatusCode::UNAUTHORIZED,
            "The passkey did not say which account it is for. Try another passkey.",
        )));
    };
    let credential_id = URL_SAFE_NO_PAD.encode(credential_id);
    let stored = state.store.passkey_by_credential(&credential_id).await?;
    let Some(stored) = stored.filter(|s| passkeys::user_handle(&s.account_id) == Some(user)) else {
        failed.signin("unknown passkey", None).await;
        return Ok(Err(refuse(
            StatusCode::UNAUTHORIZED,
            "This passkey is not registered here (it may have been removed). Sign in another way.",
        )));
    };
    let Ok(passkey) = serde_json::from_str::<Passkey>(&stored.passkey) else {
        return Err(AppError::Other("a stored passkey could not be read".into()));
    };
    Ok(Ok((stored, passkey)))
}

/// Takes the sign-in ceremony `ceremony` (its id, as the browser sent it) at `now`, once: its
/// state, or `None` when it is unknown, expired, already used or unreadable. Errors: the
/// store's.
async fn take_sign_in_ceremony(
    state: &AppState,
    ceremony: &str,
    now: i64,
) -> Result<Option<DiscoverableAuthentication>, AppError> {
    let Some(taken) = state
        .store
        .take_ceremony(&TokenHash::of(ceremony), CeremonyKind::SignIn, None, now)
        .await?
    else {
        return Ok(None);
    };
    let Ok(ceremony_state) = serde_json::from_str::<DiscoverableAuthentication>(&taken.state)
    else {
        return Ok(None);
    };
    Ok(Some(ceremony_state))
}

/// Records the use of the `stored` passkey at `now`: `passkey` updated from the verified
/// `result` (counter and backup state, as the crate updates them) is stored when it changed.
/// `false` when the passkey was removed meanwhile. Errors: the store's, or a passkey that
/// cannot be written.
async fn record_use(
    state: &AppState,
    stored: &StoredPasskey,
    passkey: &mut Passkey,
    result: &AuthenticationResult,
    now: i64,
) -> Result<bool, AppError> {
    let updated = match passkey.update_credential(result) {
        Some(true) => Some(
            serde_json::to_string(&*passkey)
                .map_err(|e| AppError::Other(format!("passkey: {e}")))?,
        ),
        _ => None,
    };
    Ok(state
        .store
        .passkey_used(&stored.id, updated.as_deref(), now)
        .await?)
}

/// `POST /signin/passkey` (`{"ceremony": ID, "credential": …, "next": PATH}`): finds the
/// passkey the answer names, checks the answer ([`Webauthn::finish_discoverable_authentication`]:
/// challenge, origin, user verification, signature, counter), records its use (counter and
/// backup state as the crate updates them, the time) and signs the account in, strong.
/// `{"redirect": next}` on success.
///
/// [`Webauthn::finish_discoverable_authentication`]: webauthn_rs::Webauthn::finish_discoverable_authentication
pub async fn sign_in(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    csrf: PageCsrf,
    request: Request,
) -> Result<Response, AppError> {
    let body: Finish<PublicKeyCredential> = match read_json(&session, &csrf, request).await {
        Ok(b) => b,
        Err(r) => return Ok(r),
    };
    let now = now();
    let ip = client.to_string();
    let next = safe_next(body.next.as_deref());
    let Some(ceremony_state) = take_sign_in_ceremony(&state, &body.ceremony, now).await? else {
        return Ok(refuse(StatusCode::BAD_REQUEST, EXPIRED));
    };
    let Ok(rp) = passkeys::relying_party(&state.config) else {
        return Ok(refuse(StatusCode::SERVICE_UNAVAILABLE, UNAVAILABLE));
    };
    let failed = Failed {
        state: &state,
        ip: &ip,
        now,
    };
    let (stored, mut passkey) = match named_passkey(&state, &rp, &body.credential, failed).await? {
        Ok(named) => named,
        Err(refused) => return Ok(refused),
    };
    let result = match rp.finish_discoverable_authentication(
        &body.credential,
        ceremony_state,
        &[DiscoverableKey::from(&passkey)],
    ) {
        Ok(r) => r,
        Err(e) => {
            failed
                .signin(&format!("refused: {e}"), Some(&stored.account_id))
                .await;
            return Ok(refuse(
                StatusCode::UNAUTHORIZED,
                "The passkey's answer could not be verified, so you were not signed in. Try again.",
            ));
        }
    };
    let account = state.store.account_by_id(&stored.account_id).await?;
    let Some(account) = account.filter(|a| a.status == AccountStatus::Active) else {
        failed
            .signin("account disabled", Some(&stored.account_id))
            .await;
        return Ok(refuse(
            StatusCode::FORBIDDEN,
            "This account is disabled. Ask an administrator.",
        ));
    };
    if !record_use(&state, &stored, &mut passkey, &result, now).await? {
        failed.signin("passkey removed", Some(&account.id)).await;
        return Ok(refuse(
            StatusCode::UNAUTHORIZED,
            "This passkey is not registered here (it may have been removed). Sign in another way.",
        ));
    }
    // A passkey with user verification is strong: no second factor is asked.
    super::session::sign_in_with(&session, &account, SignInMethod::Passkey).await?;
    audit(
        &state,
        Event::Signin,
        Outcome::Success,
        Some(&account.id),
        &ip,
        "",
        now,
    )
    .await;
    crate::signin::count(Outcome::Success);
    Ok(answer(json!({ "redirect": next })))
}

/// Query of `GET /account/passkeys/remove`.
#[derive(Deserialize)]
pub struct RemoveQuery {
    id: String,
}

/// `GET /account/passkeys/remove?id=ID`: the confirmation page.
pub async fn confirm_remove(
    State(state): State<AppState>,
    session: Session,
    PageQuery(q): PageQuery<RemoveQuery>,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other("/signin?next=%2Faccount"));
    };
    let passkeys = state.store.passkeys_of(&account.id).await?;
    let Some(passkey) = passkeys.iter().find(|p| p.id == q.id) else {
        set_notice(&session, "That passkey was already removed.").await?;
        return Ok(see_other("/account"));
    };
    confirm_page(
        &state,
        &session,
        &Confirmation {
            title: format!("Remove the passkey \u{201c}{}\u{201d}?", passkey.name),
            consequence: "It can no longer sign in to this account. The passkey stays on \
                          your device until you delete it there."
                .to_string(),
            action: "/account/passkeys/remove".to_string(),
            fields: vec![("id", passkey.id.clone())],
            button: "Remove passkey".to_string(),
            cancel: "/account".to_string(),
        },
    )
    .await
}

/// Body of `POST /account/passkeys/remove`.
#[derive(Deserialize)]
pub struct RemoveForm {
    id: String,
}

/// `POST /account/passkeys/remove`: removes the account's passkey and returns to the account
/// page, which says so.
pub async fn remove(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    CsrfForm(form): CsrfForm<RemoveForm>,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other("/signin?next=%2Faccount"));
    };
    let now = now();
    match state.store.remove_passkey(&account.id, &form.id).await? {
        Some(name) => {
            audit(
                &state,
                Event::PasskeyRemoved,
                Outcome::Success,
                Some(&account.id),
                &client.to_string(),
                "",
                now,
            )
            .await;
            set_notice(
                &session,
                &format!("Passkey \u{201c}{name}\u{201d} removed."),
            )
            .await?;
        }
        None => set_notice(&session, "That passkey was already removed.").await?,
    }
    Ok(see_other("/account"))
}

/// Audits a passkey event: detail `method=passkey` and the reason, if any (never a
/// credential or challenge).
async fn audit(
    state: &AppState,
    event: Event,
    outcome: Outcome,
    account_id: Option<&str>,
    ip: &str,
    reason: &str,
    now: i64,
) {
    let reason: String = reason.chars().take(160).collect();
    let detail = if reason.is_empty() {
        "method=passkey".to_string()
    } else {
        format!("method=passkey {reason}")
    };
    state
        .store
        .audit(
            AuditEvent {
                account_id,
                source_ip: Some(ip),
                detail: Some(&detail),
                ..AuditEvent::new(event, outcome)
            },
            now,
        )
        .await;
}
