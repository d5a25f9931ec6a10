//! The authorization endpoint's pages: `GET/POST /oauth/authorize` (sign-in redirect, remembered
//! consent, the consent page) and `POST /oauth/authorize/decision`. The rules are in
//! [`crate::oauth::authorize`].

use askama::Template;
use axum::extract::{FromRequest, RawQuery, State};

use crate::client_addr::ClientAddr;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use tower_sessions::Session;

use super::session::{csrf_token, signed_in};
use super::{
    CsrfForm, PageForm, PageQuery, authorization_error_page, error_page_with, render, see_other,
};
use crate::domain::authorization::AuthorizationErrorCode;
use crate::domain::cimd::is_url_client_id;
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
    /// What can be verified about the app: the host of its metadata document (a URL client
    /// ID), else the host it returns to.
    verified_host: String,
    /// The host of a URL client ID's metadata document.
    publisher: Option<String>,
    /// The name the app gave itself, if any (a claim).
    client_name: Option<&'a str>,
    /// The name claims to be official or verified ([`claims_authority`]).
    claims_authority: bool,
    client_id: &'a str,
    redirect_host: &'a str,
    loopback: bool,
    /// For a device authorization: the user code the person typed.
    user_code: Option<&'a str>,
    /// A registered resource the request is for: its host and name.
    server: Option<String>,
    /// `(text, href, host)` of the client's homepage, privacy policy and terms.
    links: Vec<(&'static str, String, String)>,
    /// "first registered 3 minutes ago".
    registered: Option<String>,
    scopes: Vec<String>,
    /// On a step-up: what the account already allowed this app.
    already: Vec<String>,
    email: &'a str,
    csrf_token: &'a str,
    request_id: &'a str,
}

/// Words in an app's self-chosen name that claim an authority Gatehouse cannot check
/// ("Claude (Official Anthropic connector) - verified"): the consent page warns about them.
const AUTHORITY_WORDS: [&str; 7] = [
    "official",
    "verified",
    "certified",
    "trusted",
    "authentic",
    "genuine",
    "approved",
];

/// Whether `name` claims to be official or verified: one of [`AUTHORITY_WORDS`] in it, in any
/// case, also inside a longer word ("Officially", "unverified" is warned about too, as a name
/// has no business speaking of verification at all).
fn claims_authority(name: &str) -> bool {
    let lower = name.to_lowercase();
    AUTHORITY_WORDS.iter().any(|w| lower.contains(w))
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
            authorization_error_page(
                StatusCode::SERVICE_UNAVAILABLE,
                "Try again in a moment",
                "This application's identity could not be checked right now: its metadata document could not be fetched. Try again in a minute.",
            ),
            http::HeaderValue::from_static(crate::oauth::error::RETRY_AFTER_SECS),
        ),
        AuthorizeError::Throttled { retry_after } => super::retry_after(
            authorization_error_page(
                StatusCode::TOO_MANY_REQUESTS,
                "Too many new applications",
                "This address has asked for too many applications this server did not know yet. Sign in first, or try again later.",
            ),
            retry_after,
        ),
        AuthorizeError::Page(message) => authorization_error_page(
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
    let account = match account {
        Some(account) if !wants("login") => account,
        signed_in => {
            if wants("none") {
                return Ok(fail(
                    AuthorizationErrorCode::LoginRequired,
                    "the user is not signed in",
                ));
            }
            return Ok(see_other(&signin_then_authorize(
                &pairs,
                signed_in.is_some(),
            )));
        }
    };
    let now = now();
    let forced = wants("consent");
    let remembered = state
        .store
        .consent_for(
            &account.id,
            &req.client_id,
            &req.registered_redirect_uri,
            req.consent_resource(),
        )
        .await?;
    // What the account allowed this app before, when the request asks for more (a step-up):
    // the page then lists only what is new.
    let mut step_up = None;
    if let Some(consent) = remembered {
        if consent_covers(&consent.scope, &req.scope) {
            if !forced {
                let location = issue_code(&state, &req, &account.id, &consent.id, now).await?;
                return Ok(see_other(&location));
            }
        } else {
            step_up = Some(consent.scope);
        }
    }
    if prompt.split(' ').any(|p| p == "none") {
        return Ok(fail(
            AuthorizationErrorCode::ConsentRequired,
            "the user has not approved this application",
        ));
    }
    consent_page(&state, &session, &account, &req, None, step_up, now).await
}

/// Keeps `req` as a pending authorization request of `account` ([`CONSENT_TTL_SECS`]) and
/// shows its consent page, answered at `POST /oauth/authorize/decision`. For a device
/// authorization, `user_code` is the code the person typed, shown for them to compare with
/// their device's (RFC 8628 §5.4); `step_up` is the scope the account allowed this app before
/// when the request asks for more (the page then lists only what is new).
pub(super) async fn consent_page(
    state: &AppState,
    session: &Session,
    account: &crate::store::accounts::Account,
    req: &authorize::AuthorizationRequest,
    user_code: Option<&str>,
    step_up: Option<String>,
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
    let publisher = is_url_client_id(&req.client_id).then(|| host_for_display(&req.client_id));
    let (already, scopes) = match &step_up {
        Some(granted) => req.step_up(granted),
        None => (Vec::new(), req.abilities()),
    };
    let about = &req.about;
    let links = [
        ("Its homepage", &about.homepage),
        ("Its privacy policy", &about.policy),
        ("Its terms", &about.terms),
    ]
    .into_iter()
    .filter_map(|(text, href)| {
        href.as_ref()
            .map(|h| (text, h.clone(), host_for_display(h)))
    })
    .collect();
    render(
        StatusCode::OK,
        &ConsentPage {
            verified_host: publisher.clone().unwrap_or_else(|| host.clone()),
            publisher,
            client_name: req.client_name.as_deref(),
            claims_authority: req.client_name.as_deref().is_some_and(claims_authority),
            client_id: &req.client_id,
            redirect_host: &host,
            loopback,
            user_code,
            server: req
                .registered
                .as_ref()
                .map(|r| format!("{} ({})", host_for_display(&req.resource), r.name)),
            links,
            registered: (about.registered_at > 0).then(|| super::ago(now, about.registered_at)),
            scopes,
            already,
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

/// Query of `POST /oauth/authorize/decision` and `GET /oauth/authorize/resume`: the pending
/// authorization request the consent page showed.
#[derive(Deserialize)]
pub struct RequestQuery {
    #[serde(default)]
    request: String,
}

/// The page for an answer sent after the browser was signed out (another tab signed out, the
/// session ended): nothing is decided; a link signs in and goes back to the same authorization
/// request ([`resume`]).
fn signed_out_page(request_id: &str) -> Response {
    let resume = format!(
        "/oauth/authorize/resume?{}",
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair("request", request_id)
            .finish()
    );
    let signin = format!(
        "/signin?{}",
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair("next", &resume)
            .finish()
    );
    error_page_with(
        StatusCode::UNAUTHORIZED,
        "You were signed out",
        "You were signed out while this page was open, so nothing was decided. Sign in to continue: you will see the same request again.",
        true,
        Some((&signin, "Sign in to continue")),
    )
}

/// `POST /oauth/authorize/decision?request=ID`: approve (`code`, `state`, `iss`) or deny
/// (`error=access_denied`), always by a 303 so the browser follows with GET. A browser that
/// is no longer signed in gets a page to sign in and continue the same request (401; nothing
/// decided), checked before the form's CSRF token, which ended with the session.
pub async fn decide(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    PageQuery(query): PageQuery<RequestQuery>,
    request: axum::extract::Request,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(signed_out_page(&query.request));
    };
    let form = match CsrfForm::<DecisionForm>::from_request(request, &state).await {
        Ok(CsrfForm(form)) => form,
        Err(refused) => return Ok(refused),
    };
    // Check the choice before using up the request, so a bad value can be corrected.
    let approved = match form.decision.as_str() {
        "approve" => true,
        "deny" => false,
        _ => {
            return Ok(authorization_error_page(
                StatusCode::BAD_REQUEST,
                "Unknown choice",
                "Choose Allow or Deny.",
            ));
        }
    };
    let now = now();
    let Some(req) = authorize::take_request(&state, &form.request, &account.id, now).await? else {
        return Ok(request_expired());
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

fn request_expired() -> Response {
    authorization_error_page(
        StatusCode::BAD_REQUEST,
        "Request expired",
        "This authorization request was already answered, has expired, or was opened by another account. Start the connection again from the application.",
    )
}

/// `GET /oauth/authorize/resume?request=ID`: after signing in again, the authorization request
/// a consent page showed before the browser was signed out. The pending request (the signed-in
/// account's, unanswered, unexpired) is used up and its parameters are sent to
/// `/oauth/authorize` again, which checks them anew: the same client, redirect URI, `state`,
/// PKCE challenge, resource and scope, so the client's callback completes as if nothing had
/// happened. A device authorization (RFC 8628) goes back to `/device`, where its code is
/// entered again. Signed out: the sign-in page first.
pub async fn resume(
    State(state): State<AppState>,
    session: Session,
    PageQuery(query): PageQuery<RequestQuery>,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(signed_out_page(&query.request));
    };
    let Some(req) = authorize::take_request(&state, &query.request, &account.id, now()).await?
    else {
        return Ok(request_expired());
    };
    if req.device.is_some() {
        // A device authorization has no authorization URL to go back to: its code is typed
        // again on the device page (the device keeps polling with the same device code).
        return Ok(see_other("/device"));
    }
    let mut pairs = vec![
        ("response_type", "code".to_string()),
        ("client_id", req.client_id.clone()),
        ("redirect_uri", req.redirect_uri.clone()),
        ("scope", req.scope.clone()),
        ("code_challenge", req.code_challenge.clone()),
        ("code_challenge_method", "S256".to_string()),
        ("resource", req.resource.clone()),
    ];
    if let Some(s) = &req.state {
        pairs.push(("state", s.clone()));
    }
    // Signing in again was just done: `login` is not asked for twice.
    if let Some(prompt) = &req.prompt {
        let rest: Vec<&str> = prompt.split(' ').filter(|p| *p != "login").collect();
        if !rest.is_empty() {
            pairs.push(("prompt", rest.join(" ")));
        }
    }
    let query: String = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs.iter())
        .finish();
    Ok(see_other(&format!("/oauth/authorize?{query}")))
}

#[cfg(test)]
mod tests {
    use super::claims_authority;

    #[test]
    fn names_claiming_authority_are_recognised() {
        for name in [
            "Claude (Official Anthropic connector) - verified",
            "OFFICIAL GitHub",
            "Verified by Gatehouse",
            "Trusted notes app",
        ] {
            assert!(claims_authority(name), "{name}");
        }
        for name in ["Claude", "Cursor", "My notes helper", "VS Code"] {
            assert!(!claims_authority(name), "{name}");
        }
    }
}
