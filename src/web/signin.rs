//! `GET/POST /signin` and `POST /signout`.

use askama::Template;
use axum::extract::{FromRequest, State};
use axum::http::{HeaderValue, header};
use tower_sessions::cookie::{Cookie, SameSite};

use crate::client_addr::ClientAddr;
use crate::domain::audit::Outcome;
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
    /// The error is about the email and password given (`401`): both fields are marked
    /// `aria-invalid` and described by it; a throttle or a busy server is about neither.
    invalid: bool,
    /// A notice above the form (after a password reset).
    notice: Option<&'a str>,
    /// Mail is set up: "Forgot your password?" is offered.
    forgot: bool,
    /// A button per identity provider that signs people in: (name, words).
    providers: &'a [(String, String)],
    /// Whether the email and password form is shown (`GATEHOUSE_PASSWORD_SIGNIN`).
    password_signin: bool,
    /// Whether "Sign in with a passkey" is offered (shown by `/static/passkey.js`).
    passkeys: bool,
}

/// The sign-in buttons of the identity providers that sign people in: (name, words). A
/// database that cannot be read shows none (password sign-in still works).
async fn provider_buttons(state: &AppState) -> Vec<(String, String)> {
    match state.store.identity_providers().await {
        Ok(providers) => providers
            .into_iter()
            .filter(crate::store::idps::IdentityProvider::signs_in)
            .map(|p| (p.name.clone(), p.label().to_string()))
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "identity providers not read for the sign-in page");
            Vec::new()
        }
    }
}

/// The sign-in page with `status`, `next`, the email typed and a message, for pages that send
/// a browser back to sign in (a provider sign-in that did not go through).
pub async fn signin_page(
    state: &AppState,
    session: &Session,
    csrf: PageCsrf,
    status: StatusCode,
    next: &str,
    email: &str,
    error: Option<&str>,
) -> Result<Response, AppError> {
    signin_page_with_notice(state, session, csrf, status, next, email, error, None).await
}

/// [`signin_page`] with a notice above the form (after a password reset).
#[allow(clippy::too_many_arguments)]
async fn signin_page_with_notice(
    state: &AppState,
    session: &Session,
    csrf: PageCsrf,
    status: StatusCode,
    next: &str,
    email: &str,
    error: Option<&str>,
    notice: Option<&str>,
) -> Result<Response, AppError> {
    let forgot = state.mailer.is_some();
    let providers = provider_buttons(state).await;
    let password_signin = state.config.password_signin;
    let passkeys = super::passkeys::available(state);
    let page = csrf
        .page(session, |csrf_token| {
            render(
                status,
                &SigninPage {
                    csrf_token,
                    next,
                    email,
                    error,
                    invalid: false,
                    providers: &providers,
                    password_signin,
                    passkeys,
                    notice,
                    forgot,
                },
            )
        })
        .await?;
    Ok(if passkeys {
        super::passkeys::with_script(page)
    } else {
        page
    })
}

/// Query of `GET /signin`.
#[derive(Debug, Deserialize)]
pub struct SigninQuery {
    next: Option<String>,
    /// `1`: show the form even when signed in (an authorization request asked to sign in
    /// again with `prompt=login`).
    reauth: Option<String>,
    /// `1`: the password was just reset (a notice says so).
    reset: Option<String>,
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
    let notice = (q.reset.as_deref() == Some("1"))
        .then_some("Your password was changed. Sign in with the new one.");
    signin_page_with_notice(
        &state,
        &session,
        csrf,
        StatusCode::OK,
        &next,
        "",
        None,
        notice,
    )
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

/// `POST /signin`: refuses what it can before reading the body (a full password queue: 503
/// with `Retry-After`; an address over its sign-in limit: 429; no CSRF token: 403), then reads
/// and checks the form, takes a place in the password queue, makes the attempt
/// ([`signin::attempt`]: 429 with `Retry-After` when a limit refuses it, 401 with
/// [`BAD_CREDENTIALS`] when it fails), then cycles the session id and lands on `next`.
pub async fn submit(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    csrf: PageCsrf,
    request: axum::extract::Request,
) -> Result<Response, AppError> {
    let now = now();
    if !state.config.password_signin {
        return signin_page(
            &state,
            &session,
            csrf,
            StatusCode::FORBIDDEN,
            "/",
            "",
            Some(PASSWORD_SIGNIN_OFF),
        )
        .await;
    }
    if let Some(refused) = refuse_unread(&state, &client, &session, &csrf, now).await? {
        return Ok(refused);
    }
    let device = device_cookie(request.headers());
    let form = match CsrfForm::<SigninForm>::from_request(request, &state).await {
        Ok(CsrfForm(form)) => form,
        Err(refused) => return Ok(refused),
    };
    let next = safe_next(form.next.as_deref());
    let page = FormPage {
        csrf,
        session: &session,
        next: &next,
        email: &form.email,
        forgot: state.mailer.is_some(),
        providers: provider_buttons(&state).await,
        passkeys: super::passkeys::available(&state),
    };
    // A place for the password check first: when every worker is busy the attempt is turned
    // away before it touches the database.
    let Ok(slot) = state.passwords.try_reserve() else {
        signin::count(Outcome::Busy);
        return page.busy().await;
    };
    let password = form.password.clone();
    let attempt = signin::attempt(
        &state,
        slot,
        client.0,
        &form.email,
        password,
        device.as_deref(),
        now,
    );
    let verified = match attempt.await? {
        Attempt::Verified(verified) => verified,
        Attempt::Throttled {
            retry_after,
            account,
        } => return page.throttled(retry_after, account).await,
        Attempt::Failed => return page.show(StatusCode::UNAUTHORIZED, BAD_CREDENTIALS).await,
        Attempt::Busy => return page.busy().await,
    };
    finish_signin(&state, &session, client.0, *verified, &next, now).await
}

/// The sign-in form of a `POST /signin` that did not go through, shown again with the email
/// typed and `next`.
struct FormPage<'a> {
    csrf: PageCsrf,
    session: &'a Session,
    next: &'a str,
    email: &'a str,
    /// Mail is set up: "Forgot your password?" is offered.
    forgot: bool,
    /// The identity providers' sign-in buttons ([`provider_buttons`]).
    providers: Vec<(String, String)>,
    /// "Sign in with a passkey" is offered (with its script).
    passkeys: bool,
}

impl FormPage<'_> {
    /// The form with `status` and the message `error` (about the email and password given,
    /// marked so, when `status` is 401). Errors: the session's, the page's rendering.
    async fn show(self, status: StatusCode, error: &str) -> Result<Response, AppError> {
        let passkeys = self.passkeys;
        self.csrf
            .page(self.session, |csrf_token| {
                render(
                    status,
                    &SigninPage {
                        csrf_token,
                        next: self.next,
                        email: self.email,
                        error: Some(error),
                        invalid: status == StatusCode::UNAUTHORIZED,
                        notice: None,
                        forgot: self.forgot,
                        providers: &self.providers,
                        password_signin: true,
                        passkeys,
                    },
                )
                .map(|r| {
                    if passkeys {
                        super::passkeys::with_script(r)
                    } else {
                        r
                    }
                })
            })
            .await
    }

    /// The form saying every password worker is busy: 503 with `Retry-After`.
    async fn busy(self) -> Result<Response, AppError> {
        let r = self.show(StatusCode::SERVICE_UNAVAILABLE, BUSY).await?;
        Ok(super::password_busy(r))
    }

    /// The form saying a limit refused the attempt (the per-account one: `account`): 429 with
    /// `Retry-After` (`retry_after` seconds).
    async fn throttled(self, retry_after: i64, account: bool) -> Result<Response, AppError> {
        let wait = signin::wait_in_words(retry_after);
        let message = if account {
            format!(
                "Sign-in for this account is slowed down after many failed attempts. Try again in {wait}."
            )
        } else {
            format!("Too many failed sign-ins. Wait {wait} and try again.")
        };
        let r = self.show(StatusCode::TOO_MANY_REQUESTS, &message).await?;
        Ok(super::retry_after(r, retry_after))
    }
}

/// Finishes a verified password sign-in from `source`: the session signed in, or its second
/// factor begun when the account has one or the server requires one (then it enrols); the
/// sign-in finished ([`signin::Verified::finish`]). Output: `303` to `next` (or to the second
/// factor's page) with the new device cookie. Errors: the store's, the session's.
async fn finish_signin(
    state: &AppState,
    session: &Session,
    source: std::net::IpAddr,
    verified: signin::Verified,
    next: &str,
    now: i64,
) -> Result<Response, AppError> {
    // A second factor next: the account has one, or the server requires one (then it enrols).
    let has_factor = state.store.has_second_factor(&verified.account.id).await?;
    let second_factor = has_factor || state.config.identity.require_2fa;
    if second_factor {
        super::second_factor::begin(session, &verified.account, next, !has_factor, now).await?;
    } else {
        super::session::sign_in(session, &verified.account).await?;
    }
    let device = verified.finish(state, source, now, second_factor).await?;
    let mut response = see_other(if second_factor {
        "/signin/second-factor"
    } else {
        next
    });
    let cookie = Cookie::build((signin::DEVICE_COOKIE, device))
        .path("/signin")
        .http_only(true)
        .same_site(SameSite::Lax)
        .secure(state.config.secure_cookies())
        .max_age(time::Duration::seconds(signin::DEVICE_LIFETIME_SECS));
    if let Ok(value) = HeaderValue::from_str(&cookie.to_string()) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    Ok(response)
}

/// The value of the browser's device cookie ([`signin::DEVICE_COOKIE`]), if it sent one.
fn device_cookie(headers: &http::HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|c| c.name() == signin::DEVICE_COOKIE)
        .map(|c| c.value().to_string())
}

/// The refusals of `POST /signin` that need no body, made before it is read: a full password
/// queue (503) and an address already over its sign-in limit (429, the page without a form
/// field filled in).
async fn refuse_unread(
    state: &AppState,
    client: &ClientAddr,
    session: &Session,
    csrf: &PageCsrf,
    now: i64,
) -> Result<Option<Response>, AppError> {
    let page = |status: StatusCode, error: String| {
        let csrf = csrf.clone();
        async move { signin_page(state, session, csrf, status, "/", "", Some(&error)).await }
    };
    if state.passwords.is_full() {
        signin::count(Outcome::Busy);
        let r = page(StatusCode::SERVICE_UNAVAILABLE, BUSY.to_string()).await?;
        return Ok(Some(super::password_busy(r)));
    }
    if let Some(wait) = state
        .store
        .refusal(&[signin::address_limit(client.0)], now)
        .await?
    {
        signin::count(Outcome::Throttled);
        let message = format!(
            "Too many failed sign-ins. Wait {} and try again.",
            signin::wait_in_words(wait)
        );
        let r = page(StatusCode::TOO_MANY_REQUESTS, message).await?;
        return Ok(Some(retry_after(r, wait)));
    }
    Ok(None)
}

/// The sign-in page's message for a password sign-in when `GATEHOUSE_PASSWORD_SIGNIN=off`.
const PASSWORD_SIGNIN_OFF: &str =
    "Sign-in with a password is turned off on this server. Use your organisation's sign-in.";

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
