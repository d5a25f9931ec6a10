//! `GET/POST /signin`, `POST /signout` and the account page `GET /`.

use std::net::SocketAddr;

use askama::Template;
use axum::extract::{ConnectInfo, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use tower_sessions::Session;

use super::session::{csrf_ok, csrf_token, safe_next, signed_in};
use super::{PageForm, PageQuery, form_expired, render, see_other};
use crate::app::AppState;
use crate::domain::account::{AccountStatus, Email};
use crate::error::AppError;
use crate::store::now;

/// The one message for a wrong password, an unknown email and a disabled account.
pub const BAD_CREDENTIALS: &str = "Wrong email or password.";

/// The window in which failed sign-ins are counted, in seconds.
pub const THROTTLE_WINDOW_SECS: i64 = 15 * 60;
/// Failed sign-ins for one email from one address within the window after which further
/// attempts are refused (429) until the window has passed.
pub const MAX_FAILURES_PER_EMAIL: i64 = 5;
/// Failed sign-ins from one address (any email) within the window before refusal.
pub const MAX_FAILURES_PER_ADDRESS: i64 = 50;

#[derive(Template)]
#[template(path = "signin.html")]
struct SigninPage<'a> {
    csrf_token: &'a str,
    next: &'a str,
    email: &'a str,
    error: Option<&'a str>,
}

#[derive(Template)]
#[template(path = "home.html")]
struct HomePage<'a> {
    email: &'a str,
    csrf_token: &'a str,
    oauth_enabled: bool,
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
/// signed in (unless `reauth=1`).
pub async fn show(
    State(state): State<AppState>,
    session: Session,
    PageQuery(q): PageQuery<SigninQuery>,
) -> Result<Response, AppError> {
    let next = safe_next(q.next.as_deref());
    if q.reauth.as_deref() != Some("1") && signed_in(&state, &session).await?.is_some() {
        return Ok(see_other(&next));
    }
    let csrf = csrf_token(&session).await?;
    render(
        StatusCode::OK,
        &SigninPage {
            csrf_token: &csrf,
            next: &next,
            email: "",
            error: None,
        },
    )
}

/// Body of `POST /signin`.
#[derive(Deserialize)]
pub struct SigninForm {
    #[serde(default)]
    csrf_token: String,
    #[serde(default)]
    next: Option<String>,
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: String,
}

/// `POST /signin`: checks CSRF, then the password (argon2id off the runtime; a dummy
/// verification for unknown emails), then cycles the session id and lands on `next`.
pub async fn submit(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    session: Session,
    PageForm(form): PageForm<SigninForm>,
) -> Result<Response, AppError> {
    if !csrf_ok(&session, &form.csrf_token).await? {
        return Ok(form_expired());
    }
    let next = safe_next(form.next.as_deref());
    let ip = peer.ip().to_string();
    let now = now();
    // The attempt is recorded as a failure before anything is checked, then counted with the
    // recent ones: concurrent guesses see each other, so at most the limit get through, and a
    // refused attempt costs no argon2 work.
    let email_key: String = form.email.trim().to_lowercase().chars().take(254).collect();
    let attempt = state
        .store
        .begin_signin_attempt(&ip, &email_key, now)
        .await?;
    let (from_address, for_email) = state
        .store
        .recent_signin_failures(&ip, &email_key, now - THROTTLE_WINDOW_SECS)
        .await?;
    if from_address > MAX_FAILURES_PER_ADDRESS || for_email > MAX_FAILURES_PER_EMAIL {
        state
            .store
            // A refused attempt still counts: guessing on keeps the lock, and concurrent
            // guesses that were all refused leave it in place.
            .finish_signin_attempt(attempt, "failure", None, Some("throttled"))
            .await?;
        let csrf = csrf_token(&session).await?;
        return render(
            StatusCode::TOO_MANY_REQUESTS,
            &SigninPage {
                csrf_token: &csrf,
                next: &next,
                email: &form.email,
                error: Some("Too many failed sign-ins. Wait 15 minutes and try again."),
            },
        );
    }
    let account = match Email::parse(&form.email) {
        Ok(email) => state.store.account_by_email(&email).await?,
        Err(_) => None,
    };
    let verified = crate::password::verify_password(
        form.password.clone(),
        account.as_ref().map(|a| a.password_hash.clone()),
    )
    .await;
    let failure = match (&account, verified) {
        (Some(a), true) if a.status == AccountStatus::Active => None,
        (Some(_), true) => Some("account disabled"),
        _ => Some("bad credentials"),
    };
    if let Some(reason) = failure {
        state
            .store
            .finish_signin_attempt(
                attempt,
                "failure",
                account.as_ref().map(|a| a.id.as_str()),
                Some(reason),
            )
            .await?;
        let csrf = csrf_token(&session).await?;
        return render(
            StatusCode::UNAUTHORIZED,
            &SigninPage {
                csrf_token: &csrf,
                next: &next,
                email: &form.email,
                error: Some(BAD_CREDENTIALS),
            },
        );
    }
    let account = account.expect("checked above");
    super::session::sign_in(&session, &account).await?;
    state
        .store
        .finish_signin_attempt(attempt, "success", Some(&account.id), None)
        .await?;
    Ok(see_other(&next))
}

/// Body of `POST /signout`.
#[derive(Deserialize)]
pub struct SignoutForm {
    #[serde(default)]
    csrf_token: String,
}

/// `POST /signout`: ends the session server-side.
pub async fn sign_out(
    session: Session,
    PageForm(form): PageForm<SignoutForm>,
) -> Result<Response, AppError> {
    if !csrf_ok(&session, &form.csrf_token).await? {
        return Ok(form_expired());
    }
    super::session::sign_out(&session).await?;
    Ok(see_other("/signin"))
}

/// `GET /`: who is signed in, with sign-out; the sign-in page otherwise.
pub async fn home(State(state): State<AppState>, session: Session) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other("/signin"));
    };
    let csrf = csrf_token(&session).await?;
    render(
        StatusCode::OK,
        &HomePage {
            email: &account.email,
            csrf_token: &csrf,
            oauth_enabled: state.config.oauth_enabled,
        },
    )
}
