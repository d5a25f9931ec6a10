//! `GET/POST /signin` and `POST /signout`.

use askama::Template;
use axum::extract::State;

use crate::client_addr::ClientAddr;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde::Deserialize;
use tower_sessions::Session;

use super::session::{PageCsrf, safe_next, signed_in};
use super::{CsrfForm, PageQuery, render, see_other};
use crate::domain::account::{AccountStatus, Email};
use crate::domain::throttle::{CounterState, Policy, source_key};
use crate::error::AppError;
use crate::state::AppState;
use crate::store::audit::AuditEvent;
use crate::store::limits::{Admission, Limit};
use crate::store::now;

/// The one message for a wrong password, an unknown email and a disabled account.
pub const BAD_CREDENTIALS: &str = "Wrong email or password.";

/// The window in which failed sign-ins per source address are counted, in seconds.
pub const THROTTLE_WINDOW_SECS: i64 = 15 * 60;
/// Failed sign-ins for one email from one address within the window after which further
/// attempts are refused (429) until the window has passed.
pub const MAX_FAILURES_PER_EMAIL: i64 = 5;
/// Failed sign-ins from one address (any email) within the window before refusal.
pub const MAX_FAILURES_PER_ADDRESS: i64 = 50;
/// Consecutive failed sign-ins for one account, from any address, before sign-in for it is
/// slowed (NIST SP 800-63B §5.2.2).
pub const ACCOUNT_FREE_FAILURES: i64 = 10;
/// The first delay after [`ACCOUNT_FREE_FAILURES`], in seconds; each further failure doubles it.
pub const ACCOUNT_FIRST_DELAY_SECS: i64 = 1;
/// The longest delay between attempts on a slowed account, in seconds.
pub const ACCOUNT_MAX_DELAY_SECS: i64 = 15 * 60;
/// Quiet time after which an account's failures are forgotten, in seconds.
pub const ACCOUNT_RESET_SECS: i64 = 24 * 3600;
/// `Retry-After` of a sign-in turned away because every password worker is busy, in seconds.
pub const BUSY_RETRY_AFTER_SECS: u64 = 1;

/// The counters one sign-in attempt is checked against, in this order: the source address
/// (its IPv6 /64, see [`source_key`]), the (address, email) pair, and the account named by the
/// email (whether or not it exists, so the limits do not tell which emails have accounts).
pub(super) fn signin_limits(source: std::net::IpAddr, email_key: &str) -> [Limit; 3] {
    let ip = &source_key(source);
    let window = |max_hits| Policy::Window {
        max_hits,
        max_amount: i64::MAX,
        window_secs: THROTTLE_WINDOW_SECS,
    };
    [
        Limit::new("signin-address", ip, window(MAX_FAILURES_PER_ADDRESS), 0),
        Limit::new(
            "signin-address-email",
            &format!("{ip} {email_key}"),
            window(MAX_FAILURES_PER_EMAIL),
            0,
        ),
        Limit::new(
            "signin-account",
            email_key,
            Policy::Backoff {
                free: ACCOUNT_FREE_FAILURES,
                base_secs: ACCOUNT_FIRST_DELAY_SECS,
                cap_secs: ACCOUNT_MAX_DELAY_SECS,
                reset_secs: ACCOUNT_RESET_SECS,
            },
            0,
        ),
    ]
}
pub(super) const ACCOUNT_LIMIT: usize = 2;

#[derive(Template)]
#[template(path = "signin.html")]
struct SigninPage<'a> {
    csrf_token: &'a str,
    next: &'a str,
    email: &'a str,
    error: Option<&'a str>,
}

/// Query of `GET /signin`.
#[derive(Debug, Deserialize)]
pub struct SigninQuery {
    next: Option<String>,
    /// `1`: show the form even when signed in (an authorization request asked to sign in
    /// again with `prompt=login`).
    reauth: Option<String>,
}

/// `GET /signin?next=/path[&reauth=1]`: the form, or straight on to `next` when already
/// signed in (unless `reauth=1`). Writes nothing: the CSRF token of a browser without a session
/// lives in a cookie ([`PageCsrf`]).
pub async fn show(
    State(state): State<AppState>,
    session: Session,
    mut csrf: PageCsrf,
    PageQuery(q): PageQuery<SigninQuery>,
) -> Result<Response, AppError> {
    let next = safe_next(q.next.as_deref());
    if q.reauth.as_deref() != Some("1") && signed_in(&state, &session).await?.is_some() {
        return Ok(see_other(&next));
    }
    let token = csrf.token(&session).await?;
    let page = render(
        StatusCode::OK,
        &SigninPage {
            csrf_token: &token,
            next: &next,
            email: "",
            error: None,
        },
    )?;
    Ok(csrf.respond(page))
}

/// Body of `POST /signin`.
#[derive(Deserialize)]
pub struct SigninForm {
    #[serde(default)]
    next: Option<String>,
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: String,
}

/// Counts a sign-in attempt by outcome (`success`, `failure`, `throttled`, `busy`).
fn signin_metric(outcome: &'static str) {
    metrics::counter!(crate::metrics::SIGNINS, "outcome" => outcome).increment(1);
}

/// A wait in words: "N seconds" under two minutes, else "N minutes" (rounded up).
pub(super) fn wait_in_words(secs: i64) -> String {
    match secs {
        1 => "1 second".to_string(),
        s if s < 120 => format!("{s} seconds"),
        s => format!("{} minutes", (s + 59) / 60),
    }
}

/// `POST /signin`: checks CSRF, takes a place in the password queue (503 with `Retry-After`
/// when full), counts the attempt against the per-address, per-(address, email) and per-account
/// limits (429 with `Retry-After` and nothing written when one refuses), then checks the
/// password on the password pool (a dummy verification for unknown emails), cycles the session
/// id and lands on `next`.
pub async fn submit(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    mut csrf: PageCsrf,
    CsrfForm(form): CsrfForm<SigninForm>,
) -> Result<Response, AppError> {
    let next = safe_next(form.next.as_deref());
    let ip = client.to_string();
    let now = now();
    let page = |status: StatusCode, token: &str, error: &str| {
        render(
            status,
            &SigninPage {
                csrf_token: token,
                next: &next,
                email: &form.email,
                error: Some(error),
            },
        )
    };
    // A place for the password check first: when every worker is busy the attempt is turned
    // away before it touches the database.
    let Ok(slot) = state.passwords.try_reserve() else {
        signin_metric("busy");
        let token = csrf.token(&session).await?;
        let mut r = page(
            StatusCode::SERVICE_UNAVAILABLE,
            &token,
            "The server is busy checking other sign-ins. Try again in a moment.",
        )?;
        r.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from(BUSY_RETRY_AFTER_SECS),
        );
        return Ok(csrf.respond(r));
    };
    // The attempt is counted as a failure before the password is checked, so concurrent
    // guesses see each other and at most the limit get through; a refused attempt writes
    // nothing and costs no argon2 work.
    let email_key: String = form.email.trim().to_lowercase().chars().take(254).collect();
    let limits = signin_limits(client.0, &email_key);
    let counted = match state.store.admit(&limits, now).await? {
        Admission::Admitted(counted) => counted,
        Admission::Refused { retry_after, limit } => {
            signin_metric("throttled");
            let message = if limit == Some(ACCOUNT_LIMIT) {
                format!(
                    "Sign-in for this account is slowed down after many failed attempts. Try again in {}.",
                    wait_in_words(retry_after)
                )
            } else {
                format!(
                    "Too many failed sign-ins. Wait {} and try again.",
                    wait_in_words(retry_after)
                )
            };
            let token = csrf.token(&session).await?;
            let mut r = page(StatusCode::TOO_MANY_REQUESTS, &token, &message)?;
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
            return Ok(csrf.respond(r));
        }
    };
    let account = match Email::parse(&form.email) {
        Ok(email) => state.store.account_by_email(&email).await?,
        Err(_) => None,
    };
    let verified = slot
        .verify(
            form.password.clone(),
            account.as_ref().map(|a| a.password_hash.clone()),
        )
        .await;
    let failure = match (&account, verified) {
        (Some(a), true) if a.status == AccountStatus::Active => None,
        (Some(_), true) => Some("account disabled"),
        _ => Some("bad credentials"),
    };
    let audit = |outcome, account_id, detail| AuditEvent {
        event: "signin",
        outcome,
        account_id,
        subject: Some(email_key.as_str()),
        source_ip: Some(ip.as_str()),
        detail,
        ..Default::default()
    };
    if let Some(reason) = failure {
        signin_metric("failure");
        let account_id = account.as_ref().map(|a| a.id.as_str());
        state
            .store
            .audit(audit("failure", account_id, Some(reason)), now)
            .await;
        // This failure made a limit refuse the next attempts: worth a record of its own.
        for (limit, kind) in
            counted
                .iter()
                .zip(["per address", "per address and email", "per account"])
        {
            if Policy::blocks(limit) {
                state
                    .store
                    .audit(
                        AuditEvent {
                            event: "signin_throttled",
                            outcome: "denied",
                            account_id,
                            subject: Some(email_key.as_str()),
                            source_ip: Some(ip.as_str()),
                            detail: Some(kind),
                            ..Default::default()
                        },
                        now,
                    )
                    .await;
            }
        }
        let token = csrf.token(&session).await?;
        let r = page(StatusCode::UNAUTHORIZED, &token, BAD_CREDENTIALS)?;
        return Ok(csrf.respond(r));
    }
    let account = account.expect("checked above");
    signin_metric("success");
    super::session::sign_in(&session, &account).await?;
    // A success is not a failure: the account's count starts again, and the address's
    // counters give back the place this attempt took.
    forget_failures(&state, &limits, &counted).await?;
    state
        .store
        .audit(audit("success", Some(account.id.as_str()), None), now)
        .await;
    Ok(see_other(&next))
}

/// After a right password: the account's failure count starts again, and the address's
/// counters give back the place the attempt took (`counted` as [`Store::admit`] returned it).
pub(super) async fn forget_failures(
    state: &AppState,
    limits: &[Limit; 3],
    counted: &[CounterState],
) -> Result<(), AppError> {
    state.store.clear_counter(&limits[ACCOUNT_LIMIT]).await?;
    for (limit, state_after) in limits.iter().zip(counted).take(ACCOUNT_LIMIT) {
        state.store.refund_counter(limit, state_after.since).await?;
    }
    Ok(())
}

/// `POST /signout`: ends the session server-side.
pub async fn sign_out(
    session: Session,
    CsrfForm(_): CsrfForm<super::NoFields>,
) -> Result<Response, AppError> {
    super::session::sign_out(&session).await?;
    Ok(see_other("/signin"))
}
