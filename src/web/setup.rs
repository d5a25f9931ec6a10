//! First run: `GET/POST /setup?token=…` creates the first account with the one-time link printed
//! at start (random token, stored as SHA-256, valid until used or 24 hours).

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use tower_sessions::Session;

use super::session::PageCsrf;
use super::{CsrfForm, PageQuery, error_page, render, see_other};
use crate::domain::account::{Email, validate_password};
use crate::domain::audit::{Event, Outcome};
use crate::domain::secret::Secret;
use crate::error::AppError;
use crate::state::AppState;
use crate::store::audit::AuditEvent;
use crate::store::now;

#[derive(Template)]
#[template(path = "setup.html")]
struct SetupPage<'a> {
    csrf_token: &'a str,
    token: &'a str,
    email: &'a str,
    error: Option<&'a str>,
    /// The field the error is about (`email` or `password`): marked `aria-invalid` and
    /// described by the error.
    invalid: Option<&'static str>,
}

/// Query of `GET /setup`.
#[derive(Deserialize)]
pub struct SetupQuery {
    #[serde(default)]
    token: String,
}

fn link_invalid() -> Response {
    error_page(
        StatusCode::NOT_FOUND,
        "Link not valid",
        "This setup link is unknown, was already used, or has expired. Restart the server on an empty database to get a new one, or create an account with `gatehouse account add`.",
    )
}

/// `GET /setup?token=…`: the form, when the token is valid.
pub async fn show(
    State(state): State<AppState>,
    session: Session,
    csrf: PageCsrf,
    PageQuery(q): PageQuery<SetupQuery>,
) -> Result<Response, AppError> {
    let hash = Secret::from_presented(q.token.clone()).hash();
    if !state.store.setup_token_valid(&hash, now()).await? {
        return Ok(link_invalid());
    }
    csrf.page(&session, |csrf_token| {
        render(
            StatusCode::OK,
            &SetupPage {
                csrf_token,
                token: &q.token,
                email: "",
                error: None,
                invalid: None,
            },
        )
    })
    .await
}

/// Body of `POST /setup`.
#[derive(Deserialize)]
pub struct SetupForm {
    #[serde(default)]
    token: String,
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: String,
}

/// `POST /setup`: spends the token and creates the account atomically, then signs it in.
pub async fn submit(
    State(state): State<AppState>,
    session: Session,
    csrf: PageCsrf,
    CsrfForm(form): CsrfForm<SetupForm>,
) -> Result<Response, AppError> {
    let now = now();
    let hash = Secret::from_presented(form.token.clone()).hash();
    if !state.store.setup_token_valid(&hash, now).await? {
        return Ok(link_invalid());
    }
    let checked = match (Email::parse(&form.email), validate_password(&form.password)) {
        (Err(e), _) => Err(("email", e.to_string())),
        (_, Err(e)) => Err(("password", e.to_string())),
        (Ok(email), Ok(())) => Ok(email),
    };
    // A place on the password pool for the hash; when every worker is busy, 503.
    let slot = match (checked, state.passwords.try_reserve()) {
        (Ok(email), Ok(slot)) => Ok((email, slot)),
        (Err((field, problem)), _) => Err((StatusCode::UNPROCESSABLE_ENTITY, Some(field), problem)),
        (Ok(_), Err(_)) => Err((
            StatusCode::SERVICE_UNAVAILABLE,
            None,
            "The server is busy. Try again in a moment.".to_string(),
        )),
    };
    let (email, slot) = match slot {
        Ok(checked) => checked,
        Err((status, invalid, problem)) => {
            let r = csrf
                .page(&session, |csrf_token| {
                    render(
                        status,
                        &SetupPage {
                            csrf_token,
                            token: &form.token,
                            email: &form.email,
                            error: Some(&problem),
                            invalid,
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
        .create_account_with_setup_token(&hash, &email, &password_hash, now)
        .await?
    else {
        return Ok(link_invalid());
    };
    state
        .store
        .audit(
            AuditEvent {
                account_id: Some(&account.id),
                detail: Some("first-run setup link"),
                ..AuditEvent::new(Event::AccountCreated, Outcome::Success)
            },
            now,
        )
        .await;
    super::session::sign_in(&session, &account).await?;
    Ok(see_other("/"))
}
