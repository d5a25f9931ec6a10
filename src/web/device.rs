//! The verification page of the device authorization grant (RFC 8628 §3.3): `GET /device`
//! (`?user_code=…` fills the code in, as `verification_uri_complete` does) and `POST /device`.
//!
//! The signed-in person types the code their device shows; a pending, unexpired code leads to
//! the same consent page as `/oauth/authorize` (with the code repeated, so they can compare it
//! with their device's: RFC 8628 §5.4), answered at `POST /oauth/authorize/decision`. A device
//! authorization is always confirmed on that page: remembered consent does not skip it, since
//! the person must see what a code they were given by someone else would connect. Wrong codes
//! are limited per account and per source address ([`USER_CODE_ATTEMPTS`] per
//! [`USER_CODE_WINDOW_SECS`], RFC 8628 §5.1).

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use tower_sessions::Session;

use super::consent::consent_page;
use super::session::{csrf_token, signed_in};
use super::{CsrfForm, PageQuery, render, retry_after, see_other};
use crate::client_addr::ClientAddr;
use crate::domain::device::{USER_CODE_ATTEMPTS, USER_CODE_WINDOW_SECS, normalize_user_code};
use crate::domain::throttle::{Policy, source_key};
use crate::error::AppError;
use crate::oauth::device::pending_by_user_code;
use crate::state::AppState;
use crate::store::limits::{Admission, Limit};
use crate::store::now;

/// Longest user code kept from a query string or form, in characters (a real one has 9).
const MAX_TYPED_CHARS: usize = 32;

#[derive(Template)]
#[template(path = "device.html")]
struct DevicePage<'a> {
    csrf_token: &'a str,
    user_code: &'a str,
    email: &'a str,
    error: Option<&'a str>,
}

/// Query of `GET /device`.
#[derive(Debug, Deserialize)]
pub struct DeviceQuery {
    user_code: Option<String>,
}

/// Body of `POST /device`.
#[derive(Debug, Deserialize)]
pub struct CodeForm {
    #[serde(default)]
    user_code: String,
}

/// The sign-in page, then back to `/device` with the code typed so far.
fn signin_then_device(user_code: &str) -> String {
    let next = if user_code.is_empty() {
        "/device".to_string()
    } else {
        format!(
            "/device?{}",
            url::form_urlencoded::Serializer::new(String::new())
                .append_pair("user_code", user_code)
                .finish()
        )
    };
    format!(
        "/signin?{}",
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair("next", &next)
            .finish()
    )
}

fn typed(code: &str) -> String {
    code.trim().chars().take(MAX_TYPED_CHARS).collect()
}

/// `GET /device[?user_code=…]`: the form (after sign-in).
pub async fn show(
    State(state): State<AppState>,
    session: Session,
    PageQuery(q): PageQuery<DeviceQuery>,
) -> Result<Response, AppError> {
    let user_code = typed(q.user_code.as_deref().unwrap_or(""));
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other(&signin_then_device(&user_code)));
    };
    let csrf = csrf_token(&session).await?;
    render(
        StatusCode::OK,
        &DevicePage {
            csrf_token: &csrf,
            user_code: &user_code,
            email: &account.email,
            error: None,
        },
    )
}

/// A counter of user-code attempts of `kind` for `value`.
fn attempts(kind: &str, value: &str) -> Limit {
    Limit::new(
        kind,
        value,
        Policy::Window {
            max_hits: USER_CODE_ATTEMPTS,
            max_amount: i64::MAX,
            window_secs: USER_CODE_WINDOW_SECS,
        },
        0,
    )
}

/// `POST /device`: a code of the right form spends one attempt of the account's and the
/// address's; a pending one shows the consent page, anything else the form again with a
/// message (400), or 429 with `Retry-After` once the attempts are spent.
pub async fn submit(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    CsrfForm(form): CsrfForm<CodeForm>,
) -> Result<Response, AppError> {
    let user_code = typed(&form.user_code);
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other(&signin_then_device(&user_code)));
    };
    let csrf = csrf_token(&session).await?;
    let again = |status: StatusCode, error: &str| {
        render(
            status,
            &DevicePage {
                csrf_token: &csrf,
                user_code: &user_code,
                email: &account.email,
                error: Some(error),
            },
        )
    };
    let Some(normal) = normalize_user_code(&user_code) else {
        return again(
            StatusCode::BAD_REQUEST,
            "A code is 8 letters, like BCDF-GHJK. Check it and try again.",
        );
    };
    let now = now();
    let ip = client.to_string();
    let source = match ip.parse() {
        Ok(addr) => source_key(addr),
        Err(_) => ip.clone(),
    };
    let limits = [
        attempts("device-code-account", &account.id),
        attempts("device-code-address", &source),
    ];
    if let Admission::Refused {
        retry_after: wait, ..
    } = state.store.admit(&limits, now).await?
    {
        let minutes = (wait + 59) / 60;
        let page = again(
            StatusCode::TOO_MANY_REQUESTS,
            &format!("Too many codes were tried. Try again in {minutes} minute(s)."),
        )?;
        return Ok(retry_after(page, wait));
    }
    let Some((_, request)) = pending_by_user_code(&state, &normal, now).await? else {
        return again(
            StatusCode::BAD_REQUEST,
            "This code is not valid, has expired or was already used. Check the code on your device, or start again there.",
        );
    };
    let shown = format!("{}-{}", &normal[..4], &normal[4..]);
    consent_page(
        &state,
        &session,
        &account,
        &request,
        Some(&shown),
        None,
        None,
        now,
    )
    .await
}
