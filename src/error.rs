//! The error policy.
//!
//! - A client's mistake is answered in the protocol's own shape by the module that owns the
//!   protocol: `oauth::OAuthError` (RFC 6749 §5.2 JSON), the MCP layer (JSON-RPC errors and
//!   `isError` tool results), the web pages (an HTML error page). Those are never 500s.
//! - A database that is busy or out of reach (no pooled connection in time, connection refused)
//!   is no fault of the request: `503` with `Retry-After`, in each protocol's shape (OAuth
//!   `temporarily_unavailable`, a JSON-RPC error on MCP, an HTML page here).
//! - Everything else unexpected (a query failed, a task panicked) becomes [`AppError`]: logged
//!   once here with its cause, shown to the caller as a generic 500 without details.

use askama::Template;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

/// The `Retry-After` of every `503` (RFC 9110 §10.2.3), in seconds: a database busy or out of
/// reach, on the pages, the OAuth endpoints (`temporarily_unavailable`) and MCP alike.
pub const RETRY_AFTER_SECS: &str = "5";

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage<'a> {
    title: &'a str,
    message: &'a str,
    /// The page answers an authorization request (`/oauth/authorize…`): it says that nothing
    /// was sent back to the application, and offers no console links.
    in_authorization: bool,
    /// A link to go on with (`(href, text)`), such as "Sign in to continue"; `href` is a path
    /// on this server.
    next: Option<(&'a str, &'a str)>,
}

/// An HTML error page of the console (never a redirect, never cached): `status` with `title`
/// and `message` (escaped by the template), with links to the console's pages. A page that
/// fails to render is a 500 ([`AppError::Template`]).
pub fn error_page(status: StatusCode, title: &str, message: &str) -> Response {
    error_page_with(status, title, message, false, None)
}

/// An HTML error page shown during an authorization request (never a redirect): it says
/// that nothing was sent back to the application (OAuth 2.1 §4.1.2.1: an unknown client or
/// an unregistered redirect URI is never redirected to).
pub fn authorization_error_page(status: StatusCode, title: &str, message: &str) -> Response {
    error_page_with(status, title, message, true, None)
}

/// An HTML error page with a link to go on with (`next`: `(path on this server, text)`);
/// `in_authorization` as in [`authorization_error_page`].
pub fn error_page_with(
    status: StatusCode,
    title: &str,
    message: &str,
    in_authorization: bool,
    next: Option<(&str, &str)>,
) -> Response {
    let page = ErrorPage {
        title,
        message,
        in_authorization,
        next,
    };
    match page.render() {
        Ok(body) => (status, [(header::CACHE_CONTROL, "no-store")], Html(body)).into_response(),
        Err(e) => AppError::from(e).into_response(),
    }
}

/// An unexpected failure. Its `Display` is logged, never sent.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// Password hashing failed.
    #[error(transparent)]
    Password(#[from] crate::password::PasswordError),
    /// A template failed to render.
    #[error("template: {0}")]
    Template(#[from] askama::Error),
    /// The session layer failed.
    #[error("session: {0}")]
    Session(#[from] tower_sessions::session::Error),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        if let AppError::Store(e) = &self
            && e.is_unavailable()
        {
            // Busy, not broken: 503 with Retry-After (RFC 9110 §15.6.4, §10.2.3).
            tracing::warn!(error = %e, "database unavailable (busy, unreachable, full or read-only)");
            return unavailable_page();
        }
        if let AppError::Password(
            e
            @ (crate::password::PasswordError::TimedOut | crate::password::PasswordError::Busy(_)),
        ) = &self
        {
            // Every password worker busy: the same 503 with Retry-After.
            tracing::warn!(error = %e, "password work not done in time");
            return crate::metrics::Unavailable::PasswordWorkers.mark(unavailable_page());
        }
        tracing::error!(error = %self, "internal error");
        internal_error_page()
    }
}

/// Whether a failed request-body read failed because the body did not arrive in time (the
/// whole-body deadline `GATEHOUSE_BODY_READ_TIMEOUT`, [`crate::request_body`]) rather
/// than because it was too large. Callers answer the first `408 Request Timeout` (RFC 9110
/// §15.5.9) and the second `413`, each in their protocol's shape.
pub fn body_stalled(error: &axum::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = cause {
        if e.is::<crate::request_body::BodyDeadlinePassed>() {
            return true;
        }
        cause = e.source();
    }
    false
}

/// The page of a database busy, unreachable, full or read-only for now: 503 with
/// `Retry-After` (RFC 9110 §15.6.4, §10.2.3), counted as [`crate::metrics::Unavailable::Database`].
pub fn unavailable_page() -> Response {
    let mut r = error_page(
        StatusCode::SERVICE_UNAVAILABLE,
        "Try again in a moment",
        "Gatehouse is busy right now. Please try again in a few seconds.",
    );
    r.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from_static(RETRY_AFTER_SECS),
    );
    crate::metrics::Unavailable::Database.mark(r)
}

/// The answer to a failure of the server's own (already logged): 500, never cached.
pub fn internal_error_page() -> Response {
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        [("cache-control", "no-store")],
        "Internal server error",
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::password::{PasswordError, PoolBusy};

    // Password work that could not be done for now (every worker busy: a full queue, or no
    // answer within the longest wait) is the server being busy, not broken: 503 with
    // `Retry-After` on every page that hashes or verifies, never 500.
    #[test]
    fn busy_password_workers_answer_503_with_retry_after() {
        for e in [PasswordError::TimedOut, PasswordError::Busy(PoolBusy)] {
            let r = AppError::Password(e).into_response();
            assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert!(r.headers().contains_key(header::RETRY_AFTER));
        }
        let broken = AppError::Password(PasswordError::Join).into_response();
        assert_eq!(broken.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
