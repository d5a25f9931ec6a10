//! [`OAuthError`]: the RFC error codes, answered in the RFC 6749 §5.2 JSON shape.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// An OAuth error response (RFC 6749 §5.2, RFC 7591 §3.2.2, RFC 8707 §2, RFC 7009 §2.2.1).
/// `Display` gives the `error` code; the payload is the `error_description`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OAuthError {
    /// `invalid_request` (400).
    #[error("invalid_request")]
    InvalidRequest(String),
    /// `invalid_client` (401). `basic` adds `WWW-Authenticate: Basic` (RFC 6749 §5.2).
    #[error("invalid_client")]
    InvalidClient {
        /// Description.
        description: String,
        /// Whether the client tried HTTP Basic authentication.
        basic: bool,
    },
    /// `invalid_grant` (400).
    #[error("invalid_grant")]
    InvalidGrant(String),
    /// `unauthorized_client` (400).
    #[error("unauthorized_client")]
    UnauthorizedClient(String),
    /// `unsupported_grant_type` (400).
    #[error("unsupported_grant_type")]
    UnsupportedGrantType(String),
    /// `invalid_scope` (400).
    #[error("invalid_scope")]
    InvalidScope(String),
    /// `invalid_target` (400, RFC 8707 §2).
    #[error("invalid_target")]
    InvalidTarget(String),
    /// `invalid_redirect_uri` (400, RFC 7591 §3.2.2).
    #[error("invalid_redirect_uri")]
    InvalidRedirectUri(String),
    /// `invalid_client_metadata` (400, RFC 7591 §3.2.2).
    #[error("invalid_client_metadata")]
    InvalidClientMetadata(String),
    /// `unsupported_token_type` (400, RFC 7009 §2.2.1).
    #[error("unsupported_token_type")]
    UnsupportedTokenType(String),
    /// `authorization_pending` (400, RFC 8628 §3.5): the person has not answered yet.
    #[error("authorization_pending")]
    AuthorizationPending(String),
    /// `slow_down` (400, RFC 8628 §3.5): polled sooner than the interval allows.
    #[error("slow_down")]
    SlowDown(String),
    /// `expired_token` (400, RFC 8628 §3.5): the device code expired unanswered.
    #[error("expired_token")]
    ExpiredToken(String),
    /// `access_denied` (400, RFC 8628 §3.5): the person denied the request.
    #[error("access_denied")]
    AccessDenied(String),
    /// `invalid_dpop_proof` (400, RFC 9449 §5): the `DPoP` header's proof is refused.
    #[error("invalid_dpop_proof")]
    InvalidDpopProof(String),
    /// `temporarily_unavailable` (503 with `Retry-After`): the database is busy or out of
    /// reach (RFC 6749 §4.1.2.1 names the code; RFC 9110 §15.6.4 the status).
    #[error("temporarily_unavailable")]
    TemporarilyUnavailable,
    /// `temporarily_unavailable` (503 with `Retry-After`): the client's metadata document
    /// could not be fetched right now ([`crate::domain::cimd::CimdError::is_temporary`]). Not
    /// `invalid_client`, which tells a client to throw its identity away.
    #[error("temporarily_unavailable")]
    ClientMetadataUnavailable,
    /// `temporarily_unavailable` (429 Too Many Requests with `Retry-After`, RFC 6585 §4): the
    /// caller's address spent its budget of something (registrations, device
    /// authorizations); `description` names it, `retry_after` is in seconds.
    #[error("temporarily_unavailable")]
    Throttled {
        /// Description.
        description: String,
        /// Seconds until the budget allows the next one.
        retry_after: i64,
    },
    /// `server_error` (500): an unexpected failure, details logged, not sent.
    #[error("server_error")]
    ServerError,
}

impl OAuthError {
    /// The `error_description`.
    pub fn description(&self) -> &str {
        match self {
            OAuthError::InvalidRequest(d)
            | OAuthError::InvalidGrant(d)
            | OAuthError::UnauthorizedClient(d)
            | OAuthError::UnsupportedGrantType(d)
            | OAuthError::InvalidScope(d)
            | OAuthError::InvalidTarget(d)
            | OAuthError::InvalidRedirectUri(d)
            | OAuthError::InvalidClientMetadata(d)
            | OAuthError::UnsupportedTokenType(d)
            | OAuthError::AuthorizationPending(d)
            | OAuthError::SlowDown(d)
            | OAuthError::ExpiredToken(d)
            | OAuthError::AccessDenied(d)
            | OAuthError::InvalidDpopProof(d) => d,
            OAuthError::InvalidClient { description, .. }
            | OAuthError::Throttled { description, .. } => description,
            OAuthError::ServerError => "the server could not complete the request",
            OAuthError::TemporarilyUnavailable => "the server is busy; try again in a few seconds",
            OAuthError::ClientMetadataUnavailable => {
                "the client's metadata document could not be fetched right now; try again in a few seconds"
            }
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            OAuthError::InvalidClient { .. } => StatusCode::UNAUTHORIZED,
            OAuthError::ServerError => StatusCode::INTERNAL_SERVER_ERROR,
            OAuthError::Throttled { .. } => StatusCode::TOO_MANY_REQUESTS,
            OAuthError::TemporarilyUnavailable | OAuthError::ClientMetadataUnavailable => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            _ => StatusCode::BAD_REQUEST,
        }
    }
}

/// The `error_description` of `invalid_client` for an unknown client and for a wrong
/// credential alike (a secret or a client assertion, RFC 6749 §5.2, RFC 7523 §3.2), so that
/// the answer does not tell which `client_id`s exist.
pub const AUTHENTICATION_FAILED: &str = "client authentication failed";

/// The `Retry-After` of a `503` (RFC 9110 §10.2.3), in seconds: [`crate::error::RETRY_AFTER_SECS`].
pub use crate::error::RETRY_AFTER_SECS;

impl From<crate::store::StoreError> for OAuthError {
    fn from(e: crate::store::StoreError) -> Self {
        if e.is_unavailable() {
            tracing::warn!(error = %e, "database unavailable (busy, unreachable, full or read-only) in an OAuth endpoint");
            return OAuthError::TemporarilyUnavailable;
        }
        tracing::error!(error = %e, "storage failure in an OAuth endpoint");
        OAuthError::ServerError
    }
}

impl IntoResponse for OAuthError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({
            "error": self.to_string(),
            "error_description": self.description(),
        });
        let mut r = (self.status(), Json(body)).into_response();
        let h = r.headers_mut();
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        h.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
        if let OAuthError::TemporarilyUnavailable | OAuthError::ClientMetadataUnavailable = self {
            h.insert(
                header::RETRY_AFTER,
                HeaderValue::from_static(RETRY_AFTER_SECS),
            );
        }
        if let OAuthError::Throttled { retry_after, .. } = &self {
            h.insert(header::RETRY_AFTER, HeaderValue::from(*retry_after));
        }
        if let OAuthError::InvalidClient { basic: true, .. } = self {
            h.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"gatehouse\""),
            );
        }
        if let OAuthError::TemporarilyUnavailable = self {
            // Only the store's unavailability becomes this code.
            r.extensions_mut()
                .insert(crate::metrics::Unavailable::Database);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_database_is_503_temporarily_unavailable_with_retry_after() {
        let e = OAuthError::from(crate::store::StoreError::Database(
            sqlx::Error::PoolTimedOut,
        ));
        assert_eq!(e, OAuthError::TemporarilyUnavailable);
        let r = e.into_response();
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(r.headers()[header::RETRY_AFTER], RETRY_AFTER_SECS);
        let other = OAuthError::from(crate::store::StoreError::Database(sqlx::Error::RowNotFound));
        assert_eq!(other, OAuthError::ServerError);
    }
}
