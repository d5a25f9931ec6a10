//! The second factor's pages (issue 36, item 3).
//!
//! - After a right password for an account with a TOTP authenticator, the session holds a
//!   pending sign-in (account, session epoch, where to go next, until when: [`PENDING_SECS`]),
//!   not a signed-in account, and `GET/POST /signin/second-factor` asks for a code from the
//!   app or a recovery code. The right one signs the session in and goes on to `next` (a
//!   pending MCP authorization continues exactly as after a password sign-in).
//! - With `GATEHOUSE_REQUIRE_2FA=on`, an account without one enrols on that same page at its
//!   next password sign-in: QR code, a confirmation code, then its recovery codes, shown once.
//! - On the account page: `POST /account/second-factor/start` begins enrolment (the QR code
//!   and the form on `GET /account/second-factor`), `POST /account/second-factor/confirm`
//!   confirms it and shows the recovery codes once, `POST /account/second-factor/remove`
//!   (with a current code) removes it.
//!
//! Audited: `second_factor_enrolled`, `second_factor_removed`, `signin` / `success` with the
//! method (`password+totp`, `password+recovery_code`), `signin_second_factor` / `failure`.
//! Never a code or a secret.

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use tower_sessions::Session;

use super::session::{PageCsrf, SignInMethod, csrf_token, sign_in_with, signed_in};
use super::{CsrfForm, NoFields, error_page, render, retry_after, see_other};
use crate::client_addr::ClientAddr;
use crate::domain::account::AccountStatus;
use crate::domain::audit::{Event, Outcome};
use crate::domain::throttle::CounterState;
use crate::error::AppError;
use crate::second_factor::{
    PENDING_SECS, limits, looks_like_totp, matching_step, new_recovery_codes, new_totp_secret,
    recovery_code_hash, totp,
};
use crate::state::AppState;
use crate::store::accounts::Account;
use crate::store::audit::AuditEvent;
use crate::store::limits::{Admission, Limit};
use crate::store::now;
use crate::store::second_factor::totp_seal_context;

/// The session key of a pending sign-in.
const PENDING_KEY: &str = "pending_signin";

/// A sign-in waiting for its second factor, kept in the session.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pending {
    /// The account whose password was right.
    pub account_id: String,
    /// Its session epoch then: a reset or "sign out everywhere" since voids the pending sign-in.
    pub epoch: i64,
    /// Where to go once signed in (already checked by `safe_next`).
    pub next: String,
    /// Unix seconds after which the password must be entered again.
    pub until: i64,
    /// The account has no second factor and must enrol (`GATEHOUSE_REQUIRE_2FA=on`).
    pub enrol: bool,
}

/// Keeps a pending sign-in in the session (a new session id: the password step is done).
pub async fn begin(
    session: &Session,
    account: &Account,
    next: &str,
    enrol: bool,
    now: i64,
) -> Result<(), AppError> {
    session.cycle_id().await?;
    session
        .insert(
            PENDING_KEY,
            Pending {
                account_id: account.id.clone(),
                epoch: account.session_epoch,
                next: next.to_string(),
                until: now + PENDING_SECS,
                enrol,
            },
        )
        .await?;
    Ok(())
}

/// The session's pending sign-in and its account, while it is in time and the account still
/// active with the same session epoch.
async fn pending(
    state: &AppState,
    session: &Session,
    now: i64,
) -> Result<Option<(Pending, Account)>, AppError> {
    let Some(p) = session.get::<Pending>(PENDING_KEY).await? else {
        return Ok(None);
    };
    if p.until <= now {
        session.remove::<Pending>(PENDING_KEY).await?;
        return Ok(None);
    }
    match state.store.account_by_id(&p.account_id).await? {
        Some(a) if a.status == AccountStatus::Active && a.session_epoch == p.epoch => {
            Ok(Some((p, a)))
        }
        _ => {
            session.remove::<Pending>(PENDING_KEY).await?;
            Ok(None)
        }
    }
}

#[derive(Template)]
#[template(path = "second_factor.html")]
struct CodePage<'a> {
    csrf_token: &'a str,
    error: Option<&'a str>,
}

#[derive(Template)]
#[template(path = "totp_enrol.html")]
struct EnrolPage<'a> {
    csrf_token: &'a str,
    action: &'a str,
    qr_png_base64: &'a str,
    secret_base32: &'a str,
    otpauth_url: &'a str,
    error: Option<&'a str>,
    /// Shown inside the console (account page) rather than during sign-in.
    console: bool,
}

#[derive(Template)]
#[template(path = "recovery_codes.html")]
struct CodesPage<'a> {
    codes: &'a [String],
    next: &'a str,
}

/// The label authenticator apps show for this server.
fn issuer_label(state: &AppState) -> String {
    state.config.surface.server_title.clone()
}

/// The enrolment page for `account`: a new secret is sealed and stored (replacing an
/// unconfirmed one), its QR code and text shown. Errors shown as a page: no server key.
async fn enrol_page(
    state: &AppState,
    account: &Account,
    csrf_token: &str,
    action: &str,
    console: bool,
    status: StatusCode,
    error: Option<&str>,
) -> Result<Response, AppError> {
    let keyring = match state.keyring() {
        Ok(k) => k,
        Err(message) => {
            return Ok(error_page(
                StatusCode::SERVICE_UNAVAILABLE,
                "Second factor not available",
                &format!("This server cannot store authenticator secrets: {message}."),
            ));
        }
    };
    let secret = new_totp_secret();
    let t = totp(secret.clone(), &issuer_label(state), &account.email).map_err(AppError::Other)?;
    let sealed = keyring.seal(&totp_seal_context(&account.id), &secret);
    if !state.store.start_totp(&account.id, &sealed, now()).await? {
        return Ok(see_other("/account"));
    }
    let qr = t.get_qr_base64().map_err(AppError::Other)?;
    render(
        status,
        &EnrolPage {
            csrf_token,
            action,
            qr_png_base64: &qr,
            secret_base32: &t.get_secret_base32(),
            otpauth_url: &t.get_url(),
            error,
            console,
        },
    )
}

/// What a presented code proved.
enum Checked {
    /// Right: the TOTP code of a new step, or an unused recovery code (now spent).
    Right(SignInMethod),
    /// Wrong, reused, or the account has no second factor.
    Wrong,
}

/// Checks `input` against the account's confirmed authenticator (a 6-digit code) or its
/// recovery codes, spending what matched.
async fn check_code(
    state: &AppState,
    account: &Account,
    input: &str,
    now: i64,
) -> Result<Checked, AppError> {
    if looks_like_totp(input) {
        let Some(factor) = state.store.totp_factor(&account.id).await? else {
            return Ok(Checked::Wrong);
        };
        if factor.confirmed_at.is_none() {
            return Ok(Checked::Wrong);
        }
        let keyring = state
            .keyring()
            .map_err(|e| AppError::Other(e.to_string()))?;
        let secret = keyring
            .open(&totp_seal_context(&account.id), &factor.secret_sealed)
            .map_err(|e| AppError::Other(format!("a TOTP secret does not open: {e}")))?;
        let t = totp(secret, &issuer_label(state), &account.email).map_err(AppError::Other)?;
        let Some(step) = matching_step(&t, input, now) else {
            return Ok(Checked::Wrong);
        };
        if state.store.accept_totp_step(&account.id, step).await? {
            return Ok(Checked::Right(SignInMethod::PasswordAndTotp));
        }
        return Ok(Checked::Wrong);
    }
    if state
        .store
        .use_recovery_code(&account.id, &recovery_code_hash(input), now)
        .await?
    {
        return Ok(Checked::Right(SignInMethod::PasswordAndRecoveryCode));
    }
    Ok(Checked::Wrong)
}

/// `GET /signin/second-factor`: the code form, or the enrolment of a person who must enrol;
/// without a pending sign-in, back to the sign-in page.
pub async fn show(
    State(state): State<AppState>,
    session: Session,
    csrf: PageCsrf,
) -> Result<Response, AppError> {
    let Some((p, account)) = pending(&state, &session, now()).await? else {
        return Ok(see_other("/signin"));
    };
    let token = csrf_token(&session).await?;
    let r = if p.enrol {
        enrol_page(
            &state,
            &account,
            &token,
            "/signin/second-factor",
            false,
            StatusCode::OK,
            None,
        )
        .await?
    } else {
        render(
            StatusCode::OK,
            &CodePage {
                csrf_token: &token,
                error: None,
            },
        )?
    };
    Ok(csrf.respond(r))
}

/// Body of the code forms.
#[derive(Deserialize)]
pub struct CodeForm {
    #[serde(default)]
    code: String,
}

/// `POST /signin/second-factor`: counts the attempt against [`limits`] (429 with
/// `Retry-After` when one refuses), then checks the code: for a person enrolling, against the
/// new authenticator (then the recovery codes are shown once, with a link on to `next`);
/// otherwise a TOTP code or a recovery code. Right: the session is signed in with its method
/// and goes on to `next`; wrong: 401 and the form again.
pub async fn submit(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    CsrfForm(form): CsrfForm<CodeForm>,
) -> Result<Response, AppError> {
    let now = now();
    let Some((p, account)) = pending(&state, &session, now).await? else {
        return Ok(see_other("/signin"));
    };
    let token = csrf_token(&session).await?;
    let limits = limits(client.0, &account.email, &account.id);
    let counted = match state.store.admit(&limits, now).await? {
        Admission::Admitted(counted) => counted,
        Admission::Refused {
            retry_after: wait, ..
        } => return too_many_codes(&token, wait),
    };
    let submitted = Submitted {
        state: &state,
        session: &session,
        pending: &p,
        account: &account,
        csrf_token: &token,
        limits: &limits,
        counted: &counted,
        ip: client.to_string(),
        now,
    };
    if p.enrol {
        return submitted.confirm_enrolment(&form.code).await;
    }
    submitted.check(&form.code).await
}

/// The code form refusing an attempt the [`limits`] turned away: 429 with `Retry-After`
/// (`wait` seconds), counted as `throttled`. Errors: the page's rendering.
fn too_many_codes(csrf_token: &str, wait: i64) -> Result<Response, AppError> {
    crate::signin::count(Outcome::Throttled);
    let message = format!(
        "Too many wrong codes. Wait {} and try again.",
        crate::signin::wait_in_words(wait)
    );
    let r = render(
        StatusCode::TOO_MANY_REQUESTS,
        &CodePage {
            csrf_token,
            error: Some(&message),
        },
    )?;
    Ok(retry_after(r, wait))
}

/// A code submitted for a pending sign-in, admitted by the [`limits`]: what checking it and
/// answering share.
struct Submitted<'a> {
    state: &'a AppState,
    session: &'a Session,
    pending: &'a Pending,
    account: &'a Account,
    csrf_token: &'a str,
    limits: &'a [Limit; 3],
    /// The counters' states after the attempt was counted.
    counted: &'a [CounterState],
    ip: String,
    now: i64,
}

impl Submitted<'_> {
    /// Signs the session in with `method`: the failures forgotten, the pending sign-in
    /// removed, the success audited (`signin` / `success` with the method). Errors: the
    /// store's, the session's.
    async fn sign_in(&self, method: SignInMethod) -> Result<(), AppError> {
        crate::signin::forget_failures(self.state, self.limits, self.counted).await?;
        sign_in_with(self.session, self.account, method).await?;
        self.session.remove::<Pending>(PENDING_KEY).await?;
        self.audit(Event::Signin, Outcome::Success, Some(method.as_str()))
            .await;
        Ok(())
    }

    /// Audits `event` / `outcome` for the account, from the browser's address.
    async fn audit(&self, event: Event, outcome: Outcome, detail: Option<&str>) {
        audit(
            self.state,
            event,
            outcome,
            self.account,
            &self.ip,
            detail,
            self.now,
        )
        .await;
    }

    /// An enrolling person's `code`, against the new authenticator ([`confirm`]). Right: the
    /// enrolment audited (`second_factor_enrolled`), the session signed in
    /// (`password+totp`) and the recovery codes shown once, with a link on to `next`. Wrong:
    /// audited (`signin_second_factor` / `failure`), 401 and the enrolment page again.
    /// Errors: the store's, the session's, the page's.
    async fn confirm_enrolment(&self, code: &str) -> Result<Response, AppError> {
        let Some(codes) = confirm(self.state, self.account, code, self.now).await? else {
            self.audit(
                Event::SigninSecondFactor,
                Outcome::Failure,
                Some("enrolment code"),
            )
            .await;
            return enrol_page(
                self.state,
                self.account,
                self.csrf_token,
                "/signin/second-factor",
                false,
                StatusCode::UNAUTHORIZED,
                Some("That code is not right. Scan the new QR code and enter the code it shows."),
            )
            .await;
        };
        self.audit(Event::SecondFactorEnrolled, Outcome::Success, Some("totp"))
            .await;
        self.sign_in(SignInMethod::PasswordAndTotp).await?;
        render(
            StatusCode::OK,
            &CodesPage {
                codes: &codes,
                next: &self.pending.next,
            },
        )
    }

    /// `code`, a TOTP code or a recovery code ([`check_code`]). Right: the session signed in
    /// with its method, on to `next`. Wrong: counted as a `failure`, audited
    /// (`signin_second_factor` / `failure`), 401 and the form again. Errors: the store's, the
    /// session's, the page's.
    async fn check(&self, code: &str) -> Result<Response, AppError> {
        match check_code(self.state, self.account, code, self.now).await? {
            Checked::Right(method) => {
                self.sign_in(method).await?;
                Ok(see_other(&self.pending.next))
            }
            Checked::Wrong => {
                crate::signin::count(Outcome::Failure);
                self.audit(Event::SigninSecondFactor, Outcome::Failure, None)
                    .await;
                render(
                    StatusCode::UNAUTHORIZED,
                    &CodePage {
                        csrf_token: self.csrf_token,
                        error: Some("That code is not right, or was already used."),
                    },
                )
            }
        }
    }
}

/// Confirms the account's enrolment with `code` (a code of the new authenticator): its
/// recovery codes, made and stored, are returned to be shown once. `None`: wrong code.
async fn confirm(
    state: &AppState,
    account: &Account,
    code: &str,
    now: i64,
) -> Result<Option<Vec<String>>, AppError> {
    let Some(factor) = state.store.totp_factor(&account.id).await? else {
        return Ok(None);
    };
    if factor.confirmed_at.is_some() {
        return Ok(None);
    }
    let keyring = state
        .keyring()
        .map_err(|e| AppError::Other(e.to_string()))?;
    let secret = keyring
        .open(&totp_seal_context(&account.id), &factor.secret_sealed)
        .map_err(|e| AppError::Other(format!("a TOTP secret does not open: {e}")))?;
    let t = totp(secret, &issuer_label(state), &account.email).map_err(AppError::Other)?;
    let Some(step) = matching_step(&t, code, now) else {
        return Ok(None);
    };
    let codes = new_recovery_codes();
    let hashes: Vec<_> = codes.iter().map(|c| recovery_code_hash(c)).collect();
    if !state
        .store
        .confirm_totp(&account.id, step, &hashes, now)
        .await?
    {
        return Ok(None);
    }
    Ok(Some(codes))
}

async fn audit(
    state: &AppState,
    event: Event,
    outcome: Outcome,
    account: &Account,
    ip: &str,
    detail: Option<&str>,
    now: i64,
) {
    state
        .store
        .audit(
            AuditEvent {
                account_id: Some(&account.id),
                subject: Some(&account.email),
                source_ip: Some(ip),
                detail,
                ..AuditEvent::new(event, outcome)
            },
            now,
        )
        .await;
}

/// `POST /account/second-factor/start`: begins enrolling an authenticator (the page with the
/// QR code); an account that has one goes back to the account page.
pub async fn account_start(
    State(state): State<AppState>,
    session: Session,
    CsrfForm(_): CsrfForm<NoFields>,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other("/signin?next=%2Faccount"));
    };
    let token = csrf_token(&session).await?;
    enrol_page(
        &state,
        &account,
        &token,
        "/account/second-factor/confirm",
        true,
        StatusCode::OK,
        None,
    )
    .await
}

/// `POST /account/second-factor/confirm`: confirms the enrolment with a code of the app and
/// shows the recovery codes once; a wrong code shows a new QR code (401).
pub async fn account_confirm(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    CsrfForm(form): CsrfForm<CodeForm>,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other("/signin?next=%2Faccount"));
    };
    let now = now();
    let ip = client.to_string();
    match confirm(&state, &account, &form.code, now).await? {
        Some(codes) => {
            audit(
                &state,
                Event::SecondFactorEnrolled,
                Outcome::Success,
                &account,
                &ip,
                Some("totp"),
                now,
            )
            .await;
            render(
                StatusCode::OK,
                &CodesPage {
                    codes: &codes,
                    next: "/account",
                },
            )
        }
        None => {
            let token = csrf_token(&session).await?;
            enrol_page(
                &state,
                &account,
                &token,
                "/account/second-factor/confirm",
                true,
                StatusCode::UNAUTHORIZED,
                Some("That code is not right. Scan the new QR code and enter the code it shows."),
            )
            .await
        }
    }
}

/// `POST /account/second-factor/remove`: removes the authenticator and the recovery codes,
/// given a current code from the app or a recovery code (401 on the account page otherwise;
/// counted against the same limits as the sign-in step).
pub async fn account_remove(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    CsrfForm(form): CsrfForm<CodeForm>,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other("/signin?next=%2Faccount"));
    };
    let now = now();
    let ip = client.to_string();
    if state.config.identity.require_2fa {
        super::session::set_notice(
            &session,
            "This server requires a second factor: it cannot be removed.",
        )
        .await?;
        return Ok(see_other("/account"));
    }
    let limits = limits(client.0, &account.email, &account.id);
    let counted = match state.store.admit(&limits, now).await? {
        Admission::Admitted(counted) => counted,
        Admission::Refused {
            retry_after: wait, ..
        } => {
            super::session::set_notice(
                &session,
                &format!(
                    "Too many wrong codes. Wait {} and try again.",
                    crate::signin::wait_in_words(wait)
                ),
            )
            .await?;
            return Ok(see_other("/account"));
        }
    };
    match check_code(&state, &account, &form.code, now).await? {
        Checked::Right(_) => {
            state.store.remove_second_factor(&account.id).await?;
            crate::signin::forget_failures(&state, &limits, &counted).await?;
            audit(
                &state,
                Event::SecondFactorRemoved,
                Outcome::Success,
                &account,
                &ip,
                Some("totp"),
                now,
            )
            .await;
            super::session::set_notice(&session, "Two-step sign-in is off.").await?;
        }
        Checked::Wrong => {
            audit(
                &state,
                Event::SecondFactorRemoved,
                Outcome::Failure,
                &account,
                &ip,
                Some("wrong code"),
                now,
            )
            .await;
            super::session::set_notice(
                &session,
                "Not removed: that code is not right, or was already used.",
            )
            .await?;
        }
    }
    Ok(see_other("/account"))
}
