//! `GET/POST /signin` and `POST /signout`.

use askama::Template;
use axum::extract::State;

use crate::client_addr::ClientAddr;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use tower_sessions::Session;

use super::session::{PageCsrf, safe_next, signed_in};
use super::{CsrfForm, PageQuery, render, retry_after, see_other};
use crate::error::AppError;
use crate::signin::{self, Attempt};
use crate::state::AppState;
use crate::store::now;

/// The one message for a wrong password, an unknown email and a disabled account.
pub const BAD_CREDENTIALS: &str = "Wrong email or password.";

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
    csrf: PageCsrf,
    PageQuery(q): PageQuery<SigninQuery>,
) -> Result<Response, AppError> {
    let next = safe_next(q.next.as_deref());
    if q.reauth.as_deref() != Some("1") && signed_in(&state, &session).await?.is_some() {
        return Ok(see_other(&next));
    }
    csrf.page(&session, |csrf_token| {
        render(
            StatusCode::OK,
            &SigninPage {
                csrf_token,
                next: &next,
                email: "",
                error: None,
            },
        )
    })
    .await
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

/// `POST /signin`: checks CSRF, takes a place in the password queue (503 with `Retry-After`
/// when full), makes the attempt ([`signin::attempt`]: 429 with `Retry-After` when a limit
/// refuses it, 401 with [`BAD_CREDENTIALS`] when it fails), then cycles the session id and
/// lands on `next`.
pub async fn submit(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    csrf: PageCsrf,
    CsrfForm(form): CsrfForm<SigninForm>,
) -> Result<Response, AppError> {
    let next = safe_next(form.next.as_deref());
    let now = now();
    let (shown_next, email) = (next.as_str(), form.email.as_str());
    let page = |status: StatusCode, error: String| {
        csrf.page(&session, move |csrf_token| {
            render(
                status,
                &SigninPage {
                    csrf_token,
                    next: shown_next,
                    email,
                    error: Some(&error),
                },
            )
        })
    };
    // A place for the password check first: when every worker is busy the attempt is turned
    // away before it touches the database.
    let Ok(slot) = state.passwords.try_reserve() else {
        signin::count("busy");
        let r = page(StatusCode::SERVICE_UNAVAILABLE, BUSY.to_string()).await?;
        return Ok(retry_after(r, signin::BUSY_RETRY_AFTER_SECS));
    };
    let password = form.password.clone();
    let verified = match signin::attempt(&state, slot, client.0, &form.email, password, now).await?
    {
        Attempt::Verified(verified) => verified,
        Attempt::Throttled {
            retry_after,
            account,
        } => {
            let wait = signin::wait_in_words(retry_after);
            let message = if account {
                format!(
                    "Sign-in for this account is slowed down after many failed attempts. Try again in {wait}."
                )
            } else {
                format!("Too many failed sign-ins. Wait {wait} and try again.")
            };
            let r = page(StatusCode::TOO_MANY_REQUESTS, message).await?;
            return Ok(super::retry_after(r, retry_after));
        }
        Attempt::Failed => {
            return page(StatusCode::UNAUTHORIZED, BAD_CREDENTIALS.to_string()).await;
        }
        Attempt::Busy => {
            let r = page(StatusCode::SERVICE_UNAVAILABLE, BUSY.to_string()).await?;
            return Ok(retry_after(r, signin::BUSY_RETRY_AFTER_SECS));
        }
    };
    super::session::sign_in(&session, &verified.account).await?;
    verified.finish(&state, client.0, now).await?;
    Ok(see_other(&next))
}

/// The sign-in page's message when every password worker is busy (503, `Retry-After`).
const BUSY: &str = "The server is busy checking other sign-ins. Try again in a moment.";

/// `POST /signout`: ends the session server-side.
pub async fn sign_out(
    session: Session,
    CsrfForm(_): CsrfForm<super::NoFields>,
) -> Result<Response, AppError> {
    super::session::sign_out(&session).await?;
    Ok(see_other("/signin"))
}
