//! The error codes of the authorization endpoint, sent back to the client's redirect URI as
//! `error` (OAuth 2.1 §4.1.2.1, RFC 6749 §4.1.2.1; `invalid_target` from RFC 8707 §2;
//! `login_required` and `consent_required` from `OpenID` Connect Core §3.1.2.6 for `prompt=none`).

use std::fmt;

/// An authorization-endpoint `error` code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthorizationErrorCode {
    /// `invalid_request`: a parameter is missing, repeated or malformed.
    InvalidRequest,
    /// `access_denied`: the person denied the request.
    AccessDenied,
    /// `unsupported_response_type`: only `code` is served.
    UnsupportedResponseType,
    /// `invalid_scope`: the scope is malformed or not allowed for the client.
    InvalidScope,
    /// `invalid_target`: the resource is not served here (RFC 8707 §2).
    InvalidTarget,
    /// `login_required`: `prompt=none` and the person is not signed in.
    LoginRequired,
    /// `consent_required`: `prompt=none` and the person has not approved the client.
    ConsentRequired,
}

impl AuthorizationErrorCode {
    /// The code as sent in `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidRequest => "invalid_request",
            Self::AccessDenied => "access_denied",
            Self::UnsupportedResponseType => "unsupported_response_type",
            Self::InvalidScope => "invalid_scope",
            Self::InvalidTarget => "invalid_target",
            Self::LoginRequired => "login_required",
            Self::ConsentRequired => "consent_required",
        }
    }
}

impl fmt::Display for AuthorizationErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
