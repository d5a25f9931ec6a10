//! The account page: `GET /account`, `POST /account/password` (the current password is
//! required; the account's other sessions end) and `POST /account/sign-out-everywhere`.
//! Connected apps are never touched here.

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use tower_sessions::Session;

use super::session::{csrf_token, keep_after_epoch, set_notice, signed_in, take_notice};
use super::{Confirmation, CsrfForm, NoFields, confirm_page, done_page, render, see_other};
use crate::client_addr::ClientAddr;
use crate::domain::account::validate_password;
use crate::domain::audit::{Event, Outcome};
use crate::error::AppError;
use crate::state::AppState;
use crate::store::accounts::Account;
use crate::store::audit::AuditEvent;
use crate::store::now;

/// Wrong current passwords one signed-in session may send on this page; the last of them
/// signs the session out (signing in again goes through the sign-in page's limits).
pub const MAX_PASSWORD_FAILURES_PER_SESSION: u32 = 5;

/// The session's count of wrong current passwords sent on this page.
const FAILURES_KEY: &str = "password_failures";

#[derive(Template)]
#[template(path = "account.html")]
struct AccountPage<'a> {
    email: &'a str,
    notice: Option<String>,
    error: Option<&'a str>,
    csrf_token: &'a str,
    oauth_enabled: bool,
    /// The signed-in account is an operator: the nav links the upstream page.
    operator: bool,
    usage: Usage,
    /// The account has a confirmed TOTP authenticator.
    totp: bool,
    /// Its unused recovery codes.
    recovery_codes_left: i64,
    /// The server requires a second factor (it cannot be removed).
    require_2fa: bool,
    /// The account's passkeys, oldest first.
    passkeys: Vec<PasskeyRow>,
    /// Whether passkeys can be added on this server (the button is shown by
    /// `/static/passkey.js`).
    passkeys_available: bool,
}

/// A passkey as the account page lists it.
struct PasskeyRow {
    id: String,
    name: String,
    /// When it was added, in words.
    created: String,
    /// When it last signed in, in words (`never`).
    last_used: String,
}

/// The account's MCP tool calls of the last hour against its budget (issue "The rest of the MCP
/// surface", part 3), counted from the tool-call audit rows.
struct Usage {
    /// Admitted tool calls in the rolling hour ending now.
    calls: u64,
    /// Calls per rolling hour; `None` = unlimited.
    budget: Option<u64>,
    /// The budget is the account's own (`gatehouse account quota`), not the server's default.
    own: bool,
}

async fn usage(state: &AppState, account_id: &str) -> Result<Usage, AppError> {
    let now = now();
    let own = state.store.account_calls_per_hour(account_id).await?;
    let per_minute = state.store.tool_calls_per_minute(account_id, now).await?;
    let budget = own.unwrap_or(state.config.quota_calls_per_hour);
    Ok(Usage {
        calls: per_minute.iter().map(|(_, n)| n).sum(),
        budget: (budget > 0).then_some(budget),
        own: own.is_some(),
    })
}

async fn account_page(
    state: &AppState,
    session: &Session,
    account: &Account,
    status: StatusCode,
    error: Option<&str>,
) -> Result<Response, AppError> {
    let notice = take_notice(session).await?;
    let csrf = csrf_token(session).await?;
    let usage = usage(state, &account.id).await?;
    let totp = state.store.has_second_factor(&account.id).await?;
    let recovery_codes_left = state.store.recovery_codes_left(&account.id).await?;
    let passkeys_available = super::passkeys::available(state);
    let passkeys = state
        .store
        .passkeys_of(&account.id)
        .await?
        .into_iter()
        .map(|p| PasskeyRow {
            id: p.id,
            name: p.name,
            created: super::when(p.created_at),
            last_used: p
                .last_used_at
                .map_or_else(|| "never".to_string(), super::when),
        })
        .collect();
    let page = render(
        status,
        &AccountPage {
            email: &account.email,
            notice,
            error,
            csrf_token: &csrf,
            oauth_enabled: state.config.oauth_enabled,
            operator: account.admin,
            usage,
            totp,
            recovery_codes_left,
            require_2fa: state.config.identity.require_2fa,
            passkeys,
            passkeys_available,
        },
    )?;
    Ok(if passkeys_available {
        super::passkeys::with_script(page)
    } else {
        page
    })
}

/// `GET /account`.
pub async fn show(State(state): State<AppState>, session: Session) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other("/signin?next=%2Faccount"));
    };
    account_page(&state, &session, &account, StatusCode::OK, None).await
}

/// Body of `POST /account/password`. The passwords are never shown again.
#[derive(Deserialize)]
pub struct PasswordForm {
    #[serde(default)]
    current_password: String,
    #[serde(default)]
    new_password: String,
}

/// `POST /account/password`: checks the current password and hashes the new one on the
/// password pool (503 with `Retry-After` when it is full), stores it and ends every other
/// session of the account (issue 36: a changed password ends the other sessions; grants and
/// keys stay). This session stays signed in. Wrong current passwords
/// are limited per session ([`MAX_PASSWORD_FAILURES_PER_SESSION`], then signed out), never by
/// the sign-in page's per-address or per-account counters.
pub async fn change_password(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    CsrfForm(form): CsrfForm<PasswordForm>,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other("/signin?next=%2Faccount"));
    };
    let refuse = |status, error: String| {
        let (state, session, account) = (&state, &session, &account);
        async move {
            let r = account_page(state, session, account, status, Some(&error)).await?;
            if status == StatusCode::SERVICE_UNAVAILABLE {
                return Ok(super::password_busy(r));
            }
            Ok::<_, AppError>(r)
        }
    };
    let busy = || {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "the server is busy. Try again in a moment.".to_string(),
        )
    };
    if let Err(e) = validate_password(&form.new_password) {
        return refuse(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()).await;
    }
    let Ok(slot) = state.passwords.try_reserve() else {
        let (status, error) = busy();
        return refuse(status, error).await;
    };
    let now = now();
    let ip = client.to_string();
    let audit = |outcome| AuditEvent {
        account_id: Some(&account.id),
        source_ip: Some(&ip),
        ..AuditEvent::new(Event::PasswordChanged, outcome)
    };
    // Guessing the current password here is limited by the signed-in session, not by the
    // sign-in page's anonymous counters (which strangers can fill): after
    // MAX_PASSWORD_FAILURES_PER_SESSION wrong ones the session is signed out.
    let failures = session.get::<u32>(FAILURES_KEY).await?.unwrap_or(0);
    let Ok(verified) = slot
        .verify(form.current_password, Some(account.password_hash.clone()))
        .await
    else {
        let (status, error) = busy();
        return refuse(status, error).await;
    };
    if !verified {
        state.store.audit(audit(Outcome::Failure), now).await;
        if failures + 1 >= MAX_PASSWORD_FAILURES_PER_SESSION {
            super::session::sign_out(&session).await?;
            return Ok(see_other("/signin?next=%2Faccount"));
        }
        session.insert(FAILURES_KEY, failures + 1).await?;
        return refuse(
            StatusCode::UNPROCESSABLE_ENTITY,
            "the current password is wrong.".to_string(),
        )
        .await;
    }
    session.remove::<u32>(FAILURES_KEY).await?;
    let Ok(slot) = state.passwords.try_reserve() else {
        let (status, error) = busy();
        return refuse(status, error).await;
    };
    let hash = slot.hash(form.new_password).await?;
    let Some(epoch) = state
        .store
        .set_password_hash(&account.id, &hash, true)
        .await?
    else {
        return Ok(see_other("/signin"));
    };
    keep_after_epoch(&session, epoch).await?;
    // Reset links made before must not set the password again.
    state.store.void_reset_tokens(&account.id, now).await?;
    state.store.audit(audit(Outcome::Success), now).await;
    set_notice(
        &session,
        "Password changed. Your other sessions were signed out.",
    )
    .await?;
    Ok(see_other("/account"))
}

/// `GET /account/sign-out-everywhere`: the confirmation page of signing out everywhere.
pub async fn confirm_sign_out_everywhere(
    State(state): State<AppState>,
    session: Session,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other("/signin?next=%2Faccount"));
    };
    let confirmation = Confirmation {
        title: "Sign out everywhere?".into(),
        consequence: format!(
            "Every browser signed in as {}, this one included, is signed out and must sign in again with the password. Browsers remembered at sign-in are forgotten. Connected apps, API keys and personal URLs keep working: revoke them on their own pages.",
            account.email
        ),
        action: "/account/sign-out-everywhere".into(),
        fields: Vec::new(),
        button: "Sign out everywhere".into(),
        cancel: "/account".into(),
    };
    confirm_page(&state, &session, &confirmation).await
}

/// `GET /signed-out`: what signing out everywhere did, for the browser it signed out.
pub async fn signed_out() -> Response {
    done_page(
        "Signed out everywhere",
        "Every session of your account was ended, this one included: every browser must sign in again. Connected apps, API keys and personal URLs still work.",
        "/signin",
        "Sign in again",
    )
}

/// `POST /account/sign-out-everywhere`: ends every session of the account, this one too, then
/// `303` to `/signed-out`.
pub async fn sign_out_everywhere(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    CsrfForm(_): CsrfForm<NoFields>,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other("/signin"));
    };
    let now = now();
    state.store.end_sessions(&account.id).await?;
    // Browsers signed in before are no longer recognised at sign-in either.
    state.store.forget_devices(&account.id).await?;
    super::session::sign_out(&session).await?;
    state
        .store
        .audit(
            AuditEvent {
                account_id: Some(&account.id),
                source_ip: Some(&client.to_string()),
                ..AuditEvent::new(Event::SignedOutEverywhere, Outcome::Success)
            },
            now,
        )
        .await;
    Ok(see_other("/signed-out"))
}
