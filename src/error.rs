//! The error policy.
//!
//! - A client's mistake is answered in the protocol's own shape by the module that owns the
//!   protocol: `oauth::OAuthError` (RFC 6749 §5.2 JSON), the MCP layer (JSON-RPC errors and
//!   `isError` tool results), the web pages (an HTML error page). Those are never 500s.
//! - Everything unexpected (the database is down, a task panicked) becomes [`AppError`]: logged
//!   once here with its cause, shown to the caller as a generic 500 without details.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

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
        tracing::error!(error = %self, "internal error");
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            [("cache-control", "no-store")],
            "Internal server error",
        )
            .into_response()
    }
}
