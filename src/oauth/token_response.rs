//! The token endpoint's successful answer, shared by every grant it serves: the
//! authorization code and refresh grants (`token`), identity assertions (`id_jag`) and workload
//! identities (`workload`).

use serde::{Deserialize, Serialize};

/// The successful token response (OAuth 2.1 §3.2.3).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TokenResponse {
    /// The access token.
    pub access_token: String,
    /// `Bearer`, or `DPoP` for a token bound to the key of the request's DPoP proof (RFC 9449
    /// §5).
    pub token_type: String,
    /// Seconds until the access token expires.
    pub expires_in: i64,
    /// The refresh token (none for `client_credentials`, RFC 6749 §4.4.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// Granted scopes, space-delimited.
    pub scope: String,
}
