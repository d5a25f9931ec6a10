//! A way back from a lost password (issue 36, item 4): `GET/POST /signin/forgot` mails a reset
//! link when `GATEHOUSE_SMTP_URL` is set, and `GET/POST /reset?token=…` sets a new password with
//! such a link (or one made by `gatehouse account reset-link`).
//!
//! A reset link is a random token (prefix `gate_reset_`) kept only as its SHA-256, good for one
//! use within [`RESET_LINK_SECS`]. Setting the password with it spends the account's other
//! links and ends every browser session of the account; grants and API keys stay.
//!
//! `POST /signin/forgot` answers the same page, at once, whether or not the email has an
//! account: the lookup, the link and the mail happen afterwards, off the request
//! ([`crate::mail::Mailer::send_later`]). Requests are limited per source address
//! ([`FORGOT_PER_ADDRESS`], 429 when over) and per email ([`FORGOT_PER_EMAIL`], silently: no
//! more mail), so the form cannot be used to flood a mailbox.

use std::net::IpAddr;

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use tower_sessions::Session;

use super::session::PageCsrf;
use super::{CsrfForm, PageQuery, error_page, render, retry_after, see_other};
use crate::client_addr::ClientAddr;
use crate::domain::account::{AccountStatus, Email, validate_password};
use crate::domain::audit::{Event, Outcome};
use crate::domain::secret::{Secret, TokenKind};
use crate::domain::throttle::{Policy, source_key};
use crate::error::AppError;
use crate::mail::Mail;
use crate::state::AppState;
use crate::store::accounts::Account;
use crate::store::audit::AuditEvent;
use crate::store::limits::{Admission, Limit};
use crate::store::{Store, StoreError, now};

/// How long a reset link works, in seconds (one hour).
pub const RESET_LINK_SECS: i64 = 3600;
/// "Forgot your password?" requests one source address (its IPv6 /64) may make per hour.
pub const FORGOT_PER_ADDRESS: i64 = 10;
/// Reset mails one email address may be sent per hour.
pub const FORGOT_PER_EMAIL: i64 = 3;

/// Makes a reset link for `account` valid for [`RESET_LINK_SECS`] from `now`: the token's hash
/// is stored, the link (`<issuer>/reset?token=gate_reset_…`) returned. The one place the token
/// exists in the clear is that return value.
pub async fn new_reset_link(
    store: &Store,
    issuer_url: impl Fn(&str) -> String,
    account: &Account,
    now: i64,
) -> Result<String, StoreError> {
    let token = Secret::generate(TokenKind::ResetToken);
    store
        .create_reset_token(&token.hash(), &account.id, now, now + RESET_LINK_SECS)
        .await?;
    Ok(issuer_url(&format!("/reset?token={}", token.expose())))
}

fn hourly(kind: &str, value: &str, max_hits: i64) -> Limit {
    Limit::new(
        kind,
        value,
        Policy::Window {
            max_hits,
            max_amount: i64::MAX,
            window_secs: 3600,
        },
        0,
    )
}

#[derive(Template)]
#[template(path = "forgot.html")]
struct ForgotPage<'a> {
    csrf_token: &'a str,
    /// Mail is set up: the form is shown.
    mail: bool,
    /// The request was taken: the same words whether or not the email has an account.
    sent: bool,
    error: Option<&'a str>,
}

/// `GET /signin/forgot`: the form, or, without `GATEHOUSE_SMTP_URL`, how to get a link from
/// the administrator.
pub async fn forgot_show(
    State(state): State<AppState>,
    session: Session,
    csrf: PageCsrf,
) -> Result<Response, AppError> {
    let mail = state.mailer.is_some();
    csrf.page(&session, |csrf_token| {
        render(
            StatusCode::OK,
            &ForgotPage {
                csrf_token,
                mail,
                sent: false,
                error: None,
            },
        )
    })
    .await
}

/// Body of `POST /signin/forgot`.
#[derive(Deserialize)]
pub struct ForgotForm {
    #[serde(default)]
    email: String,
}

/// `POST /signin/forgot`: counts the request against the address's limit (429 with
/// `Retry-After` when over), then answers "if an account exists, a link is on its way" — the
/// same page whether or not it does — and, in the background, mails a new reset link to an
/// active account with that email unless the email's limit is reached.
pub async fn forgot_submit(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    csrf: PageCsrf,
    CsrfForm(form): CsrfForm<ForgotForm>,
) -> Result<Response, AppError> {
    let Some(mailer) = state.mailer.clone() else {
        return forgot_show(State(state), session, csrf).await;
    };
    let now = now();
    let address = hourly("forgot-address", &source_key(client.0), FORGOT_PER_ADDRESS);
    if let Admission::Refused {
        retry_after: wait, ..
    } = state.store.admit(&[address], now).await?
    {
        let message = format!(
            "Too many requests from your network. Try again in {}.",
            crate::signin::wait_in_words(wait)
        );
        let r = csrf
            .page(&session, |csrf_token| {
                render(
                    StatusCode::TOO_MANY_REQUESTS,
                    &ForgotPage {
                        csrf_token,
                        mail: true,
                        sent: false,
                        error: Some(&message),
                    },
                )
            })
            .await?;
        return Ok(retry_after(r, wait));
    }
    let background = state.clone();
    let source = client.0;
    mailer.send_later(async move {
        match reset_mail(&background, &form.email, source, now).await {
            Ok(mail) => mail,
            Err(e) => {
                tracing::warn!(error = %e, "a reset link was not made");
                None
            }
        }
    });
    csrf.page(&session, |csrf_token| {
        render(
            StatusCode::OK,
            &ForgotPage {
                csrf_token,
                mail: true,
                sent: true,
                error: None,
            },
        )
    })
    .await
}

/// The reset mail for `email`, if it names an active account and the email's hourly limit
/// lets one more go: a new link is stored and the request audited
/// (`password_reset_requested`).
async fn reset_mail(
    state: &AppState,
    email: &str,
    source: IpAddr,
    now: i64,
) -> Result<Option<Mail>, StoreError> {
    let Ok(email) = Email::parse(email) else {
        return Ok(None);
    };
    let limit = hourly("forgot-email", email.as_str(), FORGOT_PER_EMAIL);
    if let Admission::Refused { .. } = state.store.admit(&[limit], now).await? {
        return Ok(None);
    }
    let Some(account) = state.store.account_by_email(&email).await? else {
        return Ok(None);
    };
    if account.status != AccountStatus::Active {
        return Ok(None);
    }
    let config = &state.config;
    let link = new_reset_link(&state.store, |p| config.url(p), &account, now).await?;
    let ip = source.to_string();
    state
        .store
        .audit(
            AuditEvent {
                account_id: Some(&account.id),
                subject: Some(&account.email),
                source_ip: Some(&ip),
                detail: Some("mailed"),
                ..AuditEvent::new(Event::PasswordResetRequested, Outcome::Success)
            },
            now,
        )
        .await;
    Ok(Some(Mail {
        to: account.email.clone(),
        subject: "Reset your Gatehouse password".to_string(),
        body: format!(
            "Someone (hopefully you) asked to reset the password of the Gatehouse account {} at {}.\r\n\r\n\
             Open this link within an hour to choose a new password:\r\n\r\n{link}\r\n\r\n\
             It works once. If you did not ask, ignore this mail: your password stays as it is.\r\n",
            account.email, config.issuer
        ),
    }))
}

#[derive(Template)]
#[template(path = "reset.html")]
struct ResetPage<'a> {
    csrf_token: &'a str,
    token: &'a str,
    email: &'a str,
    error: Option<&'a str>,
}

/// Query of `GET /reset`.
#[derive(Deserialize)]
pub struct ResetQuery {
    #[serde(default)]
    token: String,
}

/// The page of an unknown, used or expired reset link (404; nothing changed).
fn reset_link_invalid() -> Response {
    error_page(
        StatusCode::NOT_FOUND,
        "Link not valid",
        "This password-reset link is unknown, was already used, or has expired (links work for one hour). Ask for a new one under “Forgot your password?” on the sign-in page, or ask your administrator.",
    )
}

/// `GET /reset?token=…`: the new-password form, when the link is valid.
pub async fn reset_show(
    State(state): State<AppState>,
    session: Session,
    csrf: PageCsrf,
    PageQuery(q): PageQuery<ResetQuery>,
) -> Result<Response, AppError> {
    let hash = Secret::from_presented(q.token.clone()).hash();
    let Some(account) = state.store.reset_token_account(&hash, now()).await? else {
        return Ok(reset_link_invalid());
    };
    csrf.page(&session, |csrf_token| {
        render(
            StatusCode::OK,
            &ResetPage {
                csrf_token,
                token: &q.token,
                email: &account.email,
                error: None,
            },
        )
    })
    .await
}

/// Body of `POST /reset`.
#[derive(Deserialize)]
pub struct ResetForm {
    #[serde(default)]
    token: String,
    #[serde(default)]
    password: String,
}

/// `POST /reset`: checks the link and the new password (422 with the form again when it breaks
/// the policy), hashes it on the password pool (503 when full), then spends the link and sets
/// the password atomically ([`Store::reset_password_with_token`]): every session of the account
/// ends, its browsers are no longer recognised at sign-in, its sign-in delay is lifted, and the
/// reset is audited (`password_reset`). Lands on the sign-in page.
pub async fn reset_submit(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    csrf: PageCsrf,
    CsrfForm(form): CsrfForm<ResetForm>,
) -> Result<Response, AppError> {
    let now = now();
    let hash = Secret::from_presented(form.token.clone()).hash();
    let Some(account) = state.store.reset_token_account(&hash, now).await? else {
        return Ok(reset_link_invalid());
    };
    let problem = match validate_password(&form.password) {
        Err(e) => Some((StatusCode::UNPROCESSABLE_ENTITY, e.to_string())),
        Ok(()) => None,
    };
    let slot = match problem {
        Some(p) => Err(p),
        None => state.passwords.try_reserve().map_err(|_| {
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "The server is busy. Try again in a moment.".to_string(),
            )
        }),
    };
    let slot = match slot {
        Ok(slot) => slot,
        Err((status, problem)) => {
            let r = csrf
                .page(&session, |csrf_token| {
                    render(
                        status,
                        &ResetPage {
                            csrf_token,
                            token: &form.token,
                            email: &account.email,
                            error: Some(&problem),
                        },
                    )
                })
                .await?;
            if status == StatusCode::SERVICE_UNAVAILABLE {
                return Ok(super::password_busy(r));
            }
            return Ok(r);
        }
    };
    let password_hash = slot.hash(form.password).await?;
    let Some(account) = state
        .store
        .reset_password_with_token(&hash, &password_hash, now)
        .await?
    else {
        return Ok(reset_link_invalid());
    };
    after_password_reset(&state.store, &account, Some(client.0), "reset link", now).await?;
    super::session::sign_out(&session).await?;
    Ok(see_other("/signin?reset=1"))
}

/// What follows setting an account's password by a reset (link or command line), once the
/// password is stored and the session epoch raised: browsers signed in before are no longer
/// recognised at sign-in, the account's sign-in delay (strangers' failed guesses) is lifted, and
/// the reset audited (`password_reset` / `success`, `detail` = `how`). Grants and keys stay.
pub async fn after_password_reset(
    store: &Store,
    account: &Account,
    source: Option<IpAddr>,
    how: &str,
    now: i64,
) -> Result<(), StoreError> {
    store.forget_devices(&account.id).await?;
    let [_, _, per_account] = crate::signin::limits(
        source.unwrap_or(IpAddr::from([127, 0, 0, 1])),
        &account.email,
    );
    store.clear_counter(&per_account).await?;
    let ip = source.map(|s| s.to_string());
    store
        .audit(
            AuditEvent {
                account_id: Some(&account.id),
                subject: Some(&account.email),
                source_ip: ip.as_deref(),
                detail: Some(how),
                ..AuditEvent::new(Event::PasswordReset, Outcome::Success)
            },
            now,
        )
        .await;
    Ok(())
}
