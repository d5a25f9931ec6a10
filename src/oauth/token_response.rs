//! What the token endpoint's grants share: the successful answer of every grant it serves (the
//! authorization code and refresh grants in `token`, identity assertions in `id_jag`, workload
//! identities in `workload`), and the one-resource rule of the grants without a consent
//! (`client_credentials`, identity assertions, workloads).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::OAuthError;
use crate::config::Config;

/// Refuses a `resource` parameter (RFC 8707 §2) naming anything but the MCP resource served
/// here, for grants that only ever issue tokens for it. No parameter is fine. Errors:
/// `invalid_target` naming the resource served here.
pub fn served_resource_only(
    config: &Config,
    params: &HashMap<String, String>,
) -> Result<(), OAuthError> {
    if params
        .get("resource")
        .is_some_and(|r| !config.resource.matches(r))
    {
        return Err(OAuthError::InvalidTarget(format!(
            "resource must be {}, the resource served here",
            config.mcp_server_url
        )));
    }
    Ok(())
}

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
