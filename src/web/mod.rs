//! HTML pages for people: sign-in, first-run setup, the account page, the authorization consent
//! page and connected apps. Server-side sessions (tower-sessions in our database), CSRF tokens on
//! every form; no `JavaScript` but the one script of the passkey buttons ([`passkeys`]).

use askama::Template;
use axum::Router;
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use serde::de::DeserializeOwned;
use tower_sessions::cookie::SameSite;
use tower_sessions::{Expiry, Session, SessionManagerLayer};

use crate::error::AppError;
use crate::state::AppState;
use crate::store::SessionBackend;
use session::PageCsrf;

pub mod account;
pub mod activity;
pub mod apps;
pub mod connections;
pub mod consent;
pub mod device;
pub mod idp;
pub mod invitations;
pub mod keys;
pub mod notes;
pub mod passkeys;
pub mod personal_upstreams;
pub mod projects;
pub mod recovery;
pub mod second_factor;
pub mod session;
pub mod setup;
pub mod signin;
pub mod timeline;
pub mod upstreams;

/// Name of the session cookie.
pub const SESSION_COOKIE: &str = "gatehouse_session";

/// The routes of the pages, with the session layer: the console's, the sign-in's and the
/// connections' pages, and, when this server is an OAuth authorization server, its
/// authorization and apps pages.
pub fn router(state: AppState) -> Router {
    let mut pages = connection_routes(signin_routes(console_routes(Router::new())));
    if state.config.oauth_enabled {
        pages = authorization_routes(pages);
    }
    pages.layer(session_layer(&state)).with_state(state)
}

/// `pages` with the console's pages: projects, their notes, activity, members and
/// invitations; the account page; API keys and URLs; the operator's upstreams.
fn console_routes(pages: Router<AppState>) -> Router<AppState> {
    pages
        .route("/", get(projects::home))
        .route("/projects", post(projects::create))
        .route("/projects/{id}", get(projects::show))
        .route("/projects/{id}/notes/{note_id}", get(notes::show))
        .route("/projects/{id}/activity", get(activity::show))
        .route("/projects/{id}/members", post(projects::add_member))
        .route(
            "/projects/{id}/invitations/withdraw",
            get(projects::confirm_withdraw).post(projects::withdraw),
        )
        .route(
            "/projects/{id}/members/remove",
            get(projects::confirm_remove_member).post(projects::remove_member),
        )
        .route("/account", get(account::show))
        .route("/account/password", post(account::change_password))
        .route(
            "/account/sign-out-everywhere",
            get(account::confirm_sign_out_everywhere).post(account::sign_out_everywhere),
        )
        .route("/signed-out", get(account::signed_out))
        .route("/keys", get(keys::show))
        .route("/keys/create", post(keys::create_key))
        .route(
            "/keys/revoke",
            get(keys::confirm_revoke_key).post(keys::revoke_key),
        )
        .route("/keys/urls/create", post(keys::create_url))
        .route(
            "/keys/urls/revoke",
            get(keys::confirm_revoke_url).post(keys::revoke_url),
        )
        .route("/upstreams", get(upstreams::show))
        .route(
            "/upstreams/approve",
            get(upstreams::confirm_approve).post(upstreams::approve),
        )
        .route(
            "/upstreams/disable",
            get(upstreams::confirm_disable).post(upstreams::disable),
        )
        .route(
            "/upstreams/enable",
            get(upstreams::confirm_enable).post(upstreams::enable),
        )
}

/// `pages` with the sign-in pages: password, second factor (and its enrolment on the
/// account page), recovery, passkeys, identity providers, first-run setup, invitations.
fn signin_routes(pages: Router<AppState>) -> Router<AppState> {
    pages
        .route("/signin", get(signin::show).post(signin::submit))
        .route("/signout", post(signin::sign_out))
        .route(
            "/signin/forgot",
            get(recovery::forgot_show).post(recovery::forgot_submit),
        )
        .route(
            "/signin/second-factor",
            get(second_factor::show).post(second_factor::submit),
        )
        .route(
            "/account/second-factor/start",
            post(second_factor::account_start),
        )
        .route(
            "/account/second-factor/confirm",
            post(second_factor::account_confirm),
        )
        .route(
            "/account/second-factor/remove",
            post(second_factor::account_remove),
        )
        .route(
            "/reset",
            get(recovery::reset_show).post(recovery::reset_submit),
        )
        .route("/account/passkeys/options", post(passkeys::add_options))
        .route("/account/passkeys", post(passkeys::add))
        .route(
            "/account/passkeys/remove",
            get(passkeys::confirm_remove).post(passkeys::remove),
        )
        .route("/signin/passkey/options", post(passkeys::sign_in_options))
        .route("/signin/passkey", post(passkeys::sign_in))
        .route("/static/passkey.js", get(passkeys::script))
        .route("/signin/idp/{name}", get(idp::start))
        .route("/signin/idp/{name}/callback", get(idp::callback))
        .route("/setup", get(setup::show).post(setup::submit))
        .route("/invite", get(invitations::show).post(invitations::accept))
}

/// `pages` with the connections to per-person upstreams: the list, activity, the client
/// metadata document, the callback, start and disconnect, and the person's own servers.
fn connection_routes(pages: Router<AppState>) -> Router<AppState> {
    pages
        .route("/connections", get(connections::list))
        .route("/connections/activity", get(activity::connections))
        .route(
            "/connections/client-metadata.json",
            get(connections::client_metadata),
        )
        .route("/connections/callback", get(connections::callback))
        .route(
            "/connections/{name}/start",
            get(connections::start_page).post(connections::start),
        )
        .route(
            "/connections/{name}/disconnect",
            post(connections::disconnect),
        )
        .route("/connections/servers", post(personal_upstreams::add))
        .route(
            "/connections/servers/{name}/check",
            post(personal_upstreams::check),
        )
        .route(
            "/connections/servers/{name}/approve",
            post(personal_upstreams::approve),
        )
        .route(
            "/connections/servers/{name}/remove",
            get(personal_upstreams::confirm_remove).post(personal_upstreams::remove),
        )
        .route(
            "/connections/servers/{name}/{action}",
            post(personal_upstreams::act),
        )
}

/// `pages` with the OAuth authorization server's pages: the authorization request's
/// consent (and its resumption), the device flow's page, and the connected apps.
fn authorization_routes(pages: Router<AppState>) -> Router<AppState> {
    pages
        .route(
            "/oauth/authorize",
            get(consent::authorize_get).post(consent::authorize_post),
        )
        .route("/oauth/authorize/decision", post(consent::decide))
        .route("/device", get(device::show).post(device::submit))
        .route("/oauth/authorize/resume", get(consent::resume))
        .route("/apps", get(apps::list))
        .route("/apps/revoke", get(apps::confirm_revoke).post(apps::revoke))
        .route("/apps/tools", post(apps::set_tools))
        .route("/apps/timeline", get(timeline::show))
        .route("/apps/{consent_id}", get(apps::activity))
        .route(
            "/apps/{consent_id}/access",
            get(apps::access).post(apps::change_access),
        )
}

/// Session cookies: `HttpOnly`, `SameSite=Lax`, `Secure` when the issuer is https, expiring after
/// seven days without use.
pub fn session_layer(state: &AppState) -> SessionManagerLayer<SessionBackend> {
    SessionManagerLayer::new(state.store.session_store())
        .with_name(SESSION_COOKIE)
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        .with_secure(state.config.secure_cookies())
        .with_path("/")
        .with_expiry(Expiry::OnInactivity(time::Duration::days(7)))
}

/// Renders a template as an HTML page that is never cached.
pub fn render<T: Template>(status: StatusCode, page: &T) -> Result<Response, AppError> {
    let body = page.render()?;
    Ok((status, [(header::CACHE_CONTROL, "no-store")], Html(body)).into_response())
}

/// `response` with `Retry-After: secs` (RFC 9110 §10.2.3): a busy password pool (503) or a
/// sign-in limit (429).
pub fn retry_after(mut response: Response, secs: impl Into<HeaderValue>) -> Response {
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, secs.into());
    response
}

/// `response` (a 503 page) as every password worker busy: `Retry-After` of
/// [`crate::signin::BUSY_RETRY_AFTER_SECS`], counted as
/// [`crate::metrics::Unavailable::PasswordWorkers`].
pub fn password_busy(response: Response) -> Response {
    crate::metrics::Unavailable::PasswordWorkers
        .mark(retry_after(response, crate::signin::BUSY_RETRY_AFTER_SECS))
}

/// HTML error pages (never a redirect): [`crate::error::error_page`] and its kin.
pub use crate::error::{authorization_error_page, error_page, error_page_with};

/// The answer to a path that no route serves: Gatehouse's 404 page, with links to the
/// console's pages.
pub async fn not_found() -> Response {
    error_page(
        StatusCode::NOT_FOUND,
        "Page not found",
        "There is no page at this address. It may have moved, or the link may be mistyped.",
    )
}

/// A confirmation page for a destructive action (no `JavaScript`): what will be done to what,
/// and its consequence, with one button that sends the action's form and a way back.
pub struct Confirmation {
    /// The question, naming the thing: `Revoke Cursor?`.
    pub title: String,
    /// What happens, in words.
    pub consequence: String,
    /// The path the form is posted to.
    pub action: String,
    /// The form's fields besides its CSRF token.
    pub fields: Vec<(&'static str, String)>,
    /// The text of the button that does it.
    pub button: String,
    /// Where "Cancel" leads (a path on this server).
    pub cancel: String,
}

#[derive(Template)]
#[template(path = "confirm.html")]
struct ConfirmPage<'a> {
    title: &'a str,
    consequence: &'a str,
    action: &'a str,
    fields: &'a [(&'static str, String)],
    button: &'a str,
    cancel: &'a str,
    csrf_token: &'a str,
    oauth_enabled: bool,
    /// The signed-in account is an operator: the nav links the upstream page.
    operator: bool,
}

/// Renders `c` for the signed-in session (200).
pub async fn confirm_page(
    state: &AppState,
    session: &Session,
    c: &Confirmation,
) -> Result<Response, AppError> {
    let csrf = session::csrf_token(session).await?;
    let operator = session::signed_in(state, session)
        .await?
        .is_some_and(|a| a.admin);
    render(
        StatusCode::OK,
        &ConfirmPage {
            title: &c.title,
            consequence: &c.consequence,
            action: &c.action,
            fields: &c.fields,
            button: &c.button,
            cancel: &c.cancel,
            csrf_token: &csrf,
            oauth_enabled: state.config.oauth_enabled,
            operator,
        },
    )
}

#[derive(Template)]
#[template(path = "done.html")]
struct DonePage<'a> {
    title: &'a str,
    message: &'a str,
    href: &'a str,
    link: &'a str,
}

/// A page that reports what was done to a browser that is no longer signed in, with one link
/// to go on (`href`, a path on this server).
pub fn done_page(title: &str, message: &str, href: &str, link: &str) -> Response {
    match render(
        StatusCode::OK,
        &DonePage {
            title,
            message,
            href,
            link,
        },
    ) {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

/// Largest form body of a page, in bytes (every page form holds a few short fields).
pub const MAX_PAGE_FORM_BYTES: usize = 16 * 1024;

/// Reads a page form's fields: `application/x-www-form-urlencoded`, at most
/// [`MAX_PAGE_FORM_BYTES`], within the body's deadline ([`crate::request_body`]). The content
/// type and a declared length are checked before the body is read. Errors: the "Request not
/// understood" page (400), the "Request too large" page (413), the "Request too slow" page (408).
async fn read_page_form(
    headers: &http::HeaderMap,
    body: axum::body::Body,
) -> Result<Vec<(String, String)>, Response> {
    let form_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.to_ascii_lowercase()
                .starts_with("application/x-www-form-urlencoded")
        });
    if !form_type {
        return Err(not_understood());
    }
    if crate::request_body::declared_over(headers, MAX_PAGE_FORM_BYTES) {
        return Err(too_large());
    }
    let bytes = axum::body::to_bytes(body, MAX_PAGE_FORM_BYTES)
        .await
        .map_err(|e| {
            if crate::error::body_stalled(&e) {
                error_page(
                    StatusCode::REQUEST_TIMEOUT,
                    "Request too slow",
                    "The form did not arrive in time. Go back and send it again.",
                )
            } else {
                too_large()
            }
        })?;
    serde_urlencoded::from_bytes(&bytes).map_err(|_| not_understood())
}

fn too_large() -> Response {
    error_page(
        StatusCode::PAYLOAD_TOO_LARGE,
        "Request too large",
        "This form was sent more than this page accepts. Go back, reload the page and try again.",
    )
}

/// A form body (`application/x-www-form-urlencoded`, at most [`MAX_PAGE_FORM_BYTES`]) whose
/// rejection — a missing or repeated field, a wrong content type, a body too large or too
/// slow — is an HTML error page rather than plain text.
pub struct PageForm<T>(pub T);

impl<S, T> FromRequest<S> for PageForm<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = Response;

    async fn from_request(req: Request, _state: &S) -> Result<Self, Self::Rejection> {
        let (parts, body) = req.into_parts();
        let pairs = read_page_form(&parts.headers, body).await?;
        let encoded = serde_urlencoded::to_string(&pairs).map_err(|_| not_understood())?;
        serde_urlencoded::from_str(&encoded)
            .map(PageForm)
            .map_err(|_| not_understood())
    }
}

/// A page form checked against CSRF: the one extractor behind every form of the pages.
///
/// The body must be `application/x-www-form-urlencoded` and carry exactly one `csrf_token`
/// field equal (in constant time) to the page's token: the session's once the browser has a
/// session, else the `gatehouse_csrf` cookie of an anonymous browser (see [`PageCsrf`]). A
/// body that does not fit `T` (a wrong content type, a repeated field) is the "Request not
/// understood" page (400); a missing, repeated or wrong token is the "Form expired" page (403).
/// Either way the handler never runs. `T` sees every field but `csrf_token`.
///
/// Nothing of the body is read before the cheap refusals: a browser that holds no token at
/// all (no session token, no `gatehouse_csrf` cookie) gets "Form expired", a wrong content
/// type or a declared length over [`MAX_PAGE_FORM_BYTES`] their pages, all without reading.
pub struct CsrfForm<T>(pub T);

impl<T> FromRequest<AppState> for CsrfForm<T>
where
    T: DeserializeOwned + Send,
{
    type Rejection = Response;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let (mut parts, body) = req.into_parts();
        let session = Session::from_request_parts(&mut parts, state)
            .await
            .map_err(|(_, why)| AppError::Other(format!("session: {why}")).into_response())?;
        let Ok(csrf) = PageCsrf::from_request_parts(&mut parts, state).await;
        if !csrf
            .has_token(&session)
            .await
            .map_err(IntoResponse::into_response)?
        {
            return Err(form_expired());
        }
        let pairs = read_page_form(&parts.headers, body).await?;
        let (tokens, fields): (Vec<_>, Vec<_>) =
            pairs.into_iter().partition(|(k, _)| k == "csrf_token");
        let encoded = serde_urlencoded::to_string(&fields).map_err(|_| not_understood())?;
        let value: T = serde_urlencoded::from_str(&encoded).map_err(|_| not_understood())?;
        let [(_, token)] = tokens.as_slice() else {
            return Err(form_expired());
        };
        if csrf
            .verify(&session, token)
            .await
            .map_err(IntoResponse::into_response)?
        {
            Ok(CsrfForm(value))
        } else {
            Err(form_expired())
        }
    }
}

/// The body of a form that carries nothing but its CSRF token (other fields are ignored).
#[derive(Debug, serde::Deserialize)]
pub struct NoFields {}

/// A query string whose rejection is an HTML error page (400).
pub struct PageQuery<T>(pub T);

impl<S, T> FromRequestParts<S> for PageQuery<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(value)) => Ok(PageQuery(value)),
            Err(_) => Err(not_understood()),
        }
    }
}

fn not_understood() -> Response {
    error_page(
        StatusCode::BAD_REQUEST,
        "Request not understood",
        "This page was sent something it does not accept. Go back, reload the page and try again.",
    )
}

/// The page for a form whose CSRF token is missing or wrong (403; nothing was changed).
pub fn form_expired() -> Response {
    error_page(
        StatusCode::FORBIDDEN,
        "Form expired",
        "This form has expired or was not sent by this site. Go back, reload the page and try again.",
    )
}

/// A time for people: `2026-01-02 03:04 UTC`.
pub fn when(unix_seconds: i64) -> String {
    let format = time::macros::format_description!("[year]-[month]-[day] [hour]:[minute] UTC");
    time::OffsetDateTime::from_unix_timestamp(unix_seconds)
        .ok()
        .and_then(|t| t.format(&format).ok())
        .unwrap_or_else(|| "unknown time".to_string())
}

/// How long ago `then` was at `now` (Unix seconds), in words: `just now`, `1 minute ago`,
/// `5 hours ago`, `3 days ago`.
pub fn ago(now: i64, then: i64) -> String {
    let secs = (now - then).max(0);
    let (n, unit) = match secs {
        0..60 => return "just now".to_string(),
        60..3_600 => (secs / 60, "minute"),
        3_600..86_400 => (secs / 3_600, "hour"),
        _ => (secs / 86_400, "day"),
    };
    format!("{n} {unit}{} ago", if n == 1 { "" } else { "s" })
}

/// `303 See Other` to `location` (a path on this server or a validated redirect URI).
pub fn see_other(location: &str) -> Response {
    (
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, location.to_string()),
            (header::CACHE_CONTROL, "no-store".to_string()),
        ],
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::ago;

    #[test]
    fn ago_says_how_long_in_the_largest_whole_unit() {
        assert_eq!(ago(1_000, 1_000), "just now");
        assert_eq!(ago(1_000, 2_000), "just now", "a time ahead is now");
        assert_eq!(ago(1_059, 1_000), "just now");
        assert_eq!(ago(1_060, 1_000), "1 minute ago");
        assert_eq!(ago(1_000 + 3_599, 1_000), "59 minutes ago");
        assert_eq!(ago(1_000 + 3_600, 1_000), "1 hour ago");
        assert_eq!(ago(1_000 + 86_400 * 3 + 5, 1_000), "3 days ago");
    }
}
