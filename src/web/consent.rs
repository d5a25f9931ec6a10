//! The authorization endpoint's pages: `GET/POST /oauth/authorize` (sign-in redirect, remembered
//! consent, the consent page) and `POST /oauth/authorize/decision`. The rules are in
//! [`crate::oauth::authorize`].

use askama::Template;
use axum::extract::{RawQuery, State};

use crate::client_addr::ClientAddr;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use tower_sessions::Session;

use super::session::{csrf_token, signed_in};
use super::{CsrfForm, PageForm, error_page, render, see_other};
use crate::domain::authorization::AuthorizationErrorCode;
use crate::domain::loopback::is_loopback_host;
use crate::domain::redirect_uri::host_for_display;
use crate::domain::secret::random_urlsafe;
use crate::error::AppError;
use crate::oauth::authorize::{
    self, AuthorizeError, consent_covers, error_redirect, issue_code, validate,
};
use crate::oauth::clients::FetchFor;
use crate::oauth::register::registration_budget;
use crate::state::AppState;
use crate::store::now;

/// How long the consent page may stay open before its answer is refused, in seconds.
pub const CONSENT_TTL_SECS: i64 = 600;

#[derive(Template)]
#[template(path = "consent.html")]
struct ConsentPage<'a> {
    client_name: &'a str,
    client_id: &'a str,
    redirect_host: &'a str,
    loopback: bool,
    /// For a device authorization: the user code the person typed.
    user_code: Option<&'a str>,
    /// A registered resource the request is for: its host and name.
    server: Option<String>,
    scopes: Vec<String>,
    email: &'a str,
    csrf_token: &'a str,
    request_id: &'a str,
}

/// `GET /oauth/authorize?…`.
pub async fn authorize_get(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    RawQuery(query): RawQuery,
) -> Result<Response, AppError> {
    let pairs: Vec<(String, String)> =
        url::form_urlencoded::parse(query.unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    authorize(state, client, session, pairs).await
}

/// `POST /oauth/authorize` with a form body (OAuth 2.1 §4.1.1 allows POST).
pub async fn authorize_post(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    PageForm(pairs): PageForm<Vec<(String, String)>>,
) -> Result<Response, AppError> {
    authorize(state, client, session, pairs).await
}

fn redirect_error(state: &AppState, e: AuthorizeError) -> Response {
    match e {
        AuthorizeError::Storage { unavailable: true } => crate::error::unavailable_page(),
        AuthorizeError::Storage { unavailable: false } => crate::error::internal_error_page(),
        AuthorizeError::ClientUnavailable => super::retry_after(
            error_page(
                StatusCode::SERVICE_UNAVAILABLE,
                "Try again in a moment",
                "This application's identity could not be checked right now: its metadata document could not be fetched. Try again in a minute.",
            ),
            http::HeaderValue::from_static(crate::oauth::error::RETRY_AFTER_SECS),
        ),
        AuthorizeError::Throttled { retry_after } => super::retry_after(
            error_page(
                StatusCode::TOO_MANY_REQUESTS,
                "Too many new applications",
                "This address has asked for too many applications this server did not know yet. Sign in first, or try again later.",
            ),
            retry_after,
        ),
        AuthorizeError::Page(message) => error_page(
            StatusCode::BAD_REQUEST,
            "This sign-in request is not valid",
            &message,
        ),
        AuthorizeError::Redirect {
            redirect_uri,
            state: s,
            error,
            description,
        } => see_other(&error_redirect(
            &state.config.issuer,
            &redirect_uri,
            s.as_deref(),
            error,
            &description,
        )),
    }
}

/// The sign-in page (`reauth=1`: even for a signed-in account), then back to the
/// authorization request of `pairs` without `prompt=login`, so that sign-in is asked for once.
fn signin_then_authorize(pairs: &[(String, String)], reauth: bool) -> String {
    let again: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| {
            if k == "prompt" {
                let rest: Vec<&str> = v.split(' ').filter(|p| *p != "login").collect();
                (k.clone(), rest.join(" "))
            } else {
                (k.clone(), v.clone())
            }
        })
        .collect();
    let query: String = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(again.iter())
        .finish();
    let next = format!("/oauth/authorize?{query}");
    let mut signin = url::form_urlencoded::Serializer::new(String::new());
    signin.append_pair("next", &next);
    if reauth {
        signin.append_pair("reauth", "1");
    }
    format!("/signin?{}", signin.finish())
}

async fn authorize(
    state: AppState,
    client: ClientAddr,
    session: Session,
    pairs: Vec<(String, String)>,
) -> Result<Response, AppError> {
    // A metadata document not yet known, fetched for an anonymous visitor, spends the
    // address's budget of new applications (a signed-in person has none).
    let account = signed_in(&state, &session).await?;
    let for_whom = match account {
        Some(_) => FetchFor::SignedIn,
        None => FetchFor::Budgeted(registration_budget(&state, &client.to_string(), 0)),
    };
    let req = match validate(&state, &pairs, &for_whom).await {
        Ok(r) => r,
        Err(e) => return Ok(redirect_error(&state, e)),
    };
    let fail = |error: AuthorizationErrorCode, description: &str| {
        redirect_error(
            &state,
            AuthorizeError::Redirect {
                redirect_uri: req.redirect_uri.clone(),
                state: req.state.clone(),
                error,
                description: description.to_string(),
            },
        )
    };
    let prompt = req.prompt.as_deref().unwrap_or("");
    let wants = |value: &str| prompt.split(' ').any(|p| p == value);
    // Not signed in, or `prompt=login` (OpenID Connect Core §3.1.2.1: authenticate again): the
    // sign-in page, then back to this request without `login`, so it is asked for once.
    if account.is_none() || wants("login") {
        if wants("none") {
            return Ok(fail(
                AuthorizationErrorCode::LoginRequired,
                "the user is not signed in",
            ));
        }
        return Ok(see_other(&signin_then_authorize(&pairs, account.is_some())));
    }
    let account = account.expect("checked above");
    let now = now();
    let forced = wants("consent");
    if !forced
        && let Some(consent) = state
            .store
            .consent_for(
                &account.id,
                &req.client_id,
                &req.registered_redirect_uri,
                req.consent_resource(),
            )
            .await?
        && consent_covers(&consent.scope, &req.scope)
    {
        let location = issue_code(&state, &req, &account.id, &consent.id, now).await?;
        return Ok(see_other(&location));
    }
    if prompt.split(' ').any(|p| p == "none") {
        return Ok(fail(
            AuthorizationErrorCode::ConsentRequired,
            "the user has not approved this application",
        ));
    }
    consent_page(&state, &session, &account, &req, None, now).await
}

/// Keeps `req` as a pending authorization request of `account` ([`CONSENT_TTL_SECS`]) and
/// shows its consent page, answered at `POST /oauth/authorize/decision`. For a device
/// authorization, `user_code` is the code the person typed, shown for them to compare with
/// their device's (RFC 8628 §5.4).
pub(super) async fn consent_page(
    state: &AppState,
    session: &Session,
    account: &crate::store::accounts::Account,
    req: &authorize::AuthorizationRequest,
    user_code: Option<&str>,
    now: i64,
) -> Result<Response, AppError> {
    let request_id = random_urlsafe(16);
    let request_json = serde_json::to_string(req)
        .map_err(|e| AppError::Other(format!("authorization request: {e}")))?;
    state
        .store
        .create_authorization_request(
            &request_id,
            &account.id,
            &request_json,
            now,
            now + CONSENT_TTL_SECS,
        )
        .await?;
    let csrf = csrf_token(session).await?;
    let host = host_for_display(&req.redirect_uri);
    let loopback = url::Url::parse(&req.redirect_uri)
        .ok()
        .and_then(|u| u.host_str().map(is_loopback_host))
        .unwrap_or(false);
    render(
        StatusCode::OK,
        &ConsentPage {
            client_name: req
                .client_name
                .as_deref()
                .unwrap_or("An unnamed application"),
            client_id: &req.client_id,
            redirect_host: &host,
            loopback,
            user_code,
            server: req
                .registered
                .as_ref()
                .map(|r| format!("{} ({})", host_for_display(&req.resource), r.name)),
            scopes: req.abilities(),
            email: &account.email,
            csrf_token: &csrf,
            request_id: &request_id,
        },
    )
}

/// Body of `POST /oauth/authorize/decision`.
#[derive(Deserialize)]
pub struct DecisionForm {
    #[serde(default)]
    request: String,
    #[serde(default)]
    decision: String,
}

/// `POST /oauth/authorize/decision`: approve (`code`, `state`, `iss`) or deny
/// (`error=access_denied`), always by a 303 so the browser follows with GET.
pub async fn decide(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    CsrfForm(form): CsrfForm<DecisionForm>,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(error_page(
            StatusCode::FORBIDDEN,
            "Signed out",
            "You were signed out. Start the connection again from the application.",
        ));
    };
    // Check the choice before using up the request, so a bad value can be corrected.
    let approved = match form.decision.as_str() {
        "approve" => true,
        "deny" => false,
        _ => {
            return Ok(error_page(
                StatusCode::BAD_REQUEST,
                "Unknown choice",
                "Choose Allow or Deny.",
            ));
        }
    };
    let now = now();
    let Some(req) = authorize::take_request(&state, &form.request, &account.id, now).await? else {
        return Ok(error_page(
            StatusCode::BAD_REQUEST,
            "Request expired",
            "This authorization request was already answered or has expired. Start the connection again from the application.",
        ));
    };
    let ip = client.to_string();
    if req.device.is_some() {
        return super::device::answered(&state, &req, &account.id, &ip, approved, now).await;
    }
    let location = if approved {
        authorize::approve(&state, &req, &account.id, &ip, now).await?
    } else {
        authorize::deny(&state, &req, &account.id, &ip, now).await
    };
    Ok(see_other(&location))
}
