//! Authorization-server metadata (RFC 8414) and the `ChatGPT` Apps domain-verification token.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::OAuthError;
use crate::config::Config;
use crate::domain::client_assertion::SIGNING_ALGS;
use crate::domain::grant::GrantType;
use crate::domain::scope::Scope;
use crate::state::AppState;
use crate::store::resources::ResourceRecord;

/// The grant types a registered client may use only when registered for them (the token
/// endpoint answers `unauthorized_client` otherwise): `authorization_code`, `refresh_token`
/// and the device authorization grant (RFC 8628 §3.4).
pub const GRANT_TYPES: [&str; 3] = [
    GrantType::AuthorizationCode.as_str(),
    GrantType::RefreshToken.as_str(),
    GrantType::DeviceCode.as_str(),
];
/// The grant types dynamic registration accepts: [`GRANT_TYPES`] and the JWT-bearer grant of
/// identity assertions (RFC 7523 §2.1), which an enterprise client that redeems ID-JAGs may
/// declare, with or without the code grant. The token endpoint accepts that grant from any
/// client the assertion's `client_id` claim names, registered for it or not (clients
/// registered before they used it keep working).
pub const REGISTRABLE_GRANT_TYPES: [&str; 4] = [
    GrantType::AuthorizationCode.as_str(),
    GrantType::RefreshToken.as_str(),
    GrantType::DeviceCode.as_str(),
    GrantType::JwtBearer.as_str(),
];
/// The grant types the token endpoint accepts: [`GRANT_TYPES`] and `client_credentials`, which
/// only service clients made on the command line may use (RFC 6749 §4.4), and the JWT-bearer
/// grant of identity assertions (ID-JAG, [`super::id_jag`]).
pub const SUPPORTED_GRANT_TYPES: [&str; 5] = [
    GrantType::ALL[0].as_str(),
    GrantType::ALL[1].as_str(),
    GrantType::ALL[2].as_str(),
    GrantType::ALL[3].as_str(),
    GrantType::ALL[4].as_str(),
];
/// The grant types a client registered for `registered` may use (RFC 7591 §2 `grant_types`):
/// the registered ones, plus `refresh_token` whenever `authorization_code` or the device grant
/// is there, since the token endpoint issues a refresh token with every code (OAuth 2.1
/// §4.1.3, §4.3; RFC 8628 §3.5) and a client must be able to use it. Order: as registered,
/// `refresh_token` appended.
pub fn effective_grant_types(registered: &[String]) -> Vec<String> {
    let mut grants = registered.to_vec();
    if grants
        .iter()
        .any(|g| g == GrantType::AuthorizationCode.as_str() || g == GrantType::DeviceCode.as_str())
        && !grants.iter().any(|g| g == GrantType::RefreshToken.as_str())
    {
        grants.push(GrantType::RefreshToken.as_str().into());
    }
    grants
}

/// Whether a client registered for `registered` grant types may use `grant`
/// ([`effective_grant_types`]).
pub fn permits_grant(registered: &[String], grant: &str) -> bool {
    effective_grant_types(registered).iter().any(|g| g == grant)
}

/// The client authentication methods the token endpoint accepts (`private_key_jwt`: RFC 7523
/// §2.2, `OpenID` Connect Core §9).
pub const AUTH_METHODS: [&str; 4] = [
    "none",
    "client_secret_basic",
    "client_secret_post",
    "private_key_jwt",
];
/// The methods of confidential clients, accepted at the introspection endpoint.
pub const CONFIDENTIAL_AUTH_METHODS: [&str; 3] = [
    "client_secret_basic",
    "client_secret_post",
    "private_key_jwt",
];

/// The authorization-server metadata document (RFC 8414 §2). `issuer` is byte-identical to
/// the configured issuer (§3.3), and only what the server accepts is advertised.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct AuthorizationServerMetadata {
    /// The issuer identifier (RFC 8414 §2).
    pub issuer: String,
    /// OAuth 2.1 §3.1.
    pub authorization_endpoint: String,
    /// OAuth 2.1 §3.2.
    pub token_endpoint: String,
    /// RFC 7591 §3.
    pub registration_endpoint: String,
    /// RFC 7009 §2.
    pub revocation_endpoint: String,
    /// RFC 8628 §4.
    pub device_authorization_endpoint: String,
    /// RFC 7662 §2.
    pub introspection_endpoint: String,
    /// The JWK Set of the keys JWT access tokens (RFC 9068) are signed with (RFC 8414 §2).
    pub jwks_uri: String,
    /// Only `code`.
    pub response_types_supported: [&'static str; 1],
    /// Only `query`.
    pub response_modes_supported: [&'static str; 1],
    /// [`SUPPORTED_GRANT_TYPES`].
    pub grant_types_supported: [&'static str; 5],
    /// Only `S256` (RFC 7636 §4.2).
    pub code_challenge_methods_supported: [&'static str; 1],
    /// [`AUTH_METHODS`].
    pub token_endpoint_auth_methods_supported: [&'static str; 4],
    /// The algorithms of `private_key_jwt` assertions ([`SIGNING_ALGS`]).
    pub token_endpoint_auth_signing_alg_values_supported: [&'static str; 4],
    /// [`AUTH_METHODS`].
    pub revocation_endpoint_auth_methods_supported: [&'static str; 4],
    /// [`SIGNING_ALGS`].
    pub revocation_endpoint_auth_signing_alg_values_supported: [&'static str; 4],
    /// Confidential clients only ([`CONFIDENTIAL_AUTH_METHODS`]).
    pub introspection_endpoint_auth_methods_supported: [&'static str; 3],
    /// [`SIGNING_ALGS`].
    pub introspection_endpoint_auth_signing_alg_values_supported: [&'static str; 4],
    /// [`Scope::ALL`], then every registered resource's scopes (each once).
    pub scopes_supported: Vec<String>,
    /// RFC 9207 §3.
    pub authorization_response_iss_parameter_supported: bool,
    /// Client ID metadata documents (MCP authorization).
    pub client_id_metadata_document_supported: bool,
    /// The algorithms of DPoP proofs (RFC 9449 §5.1): [`crate::domain::dpop::SIGNING_ALGS`].
    pub dpop_signing_alg_values_supported: [&'static str; 4],
    /// The resources tokens may be issued for: `MCP_SERVER_URL`, then every registered
    /// resource's URL.
    pub protected_resources: Vec<String>,
}

impl AuthorizationServerMetadata {
    /// The document for `config`.
    pub fn for_config(config: &Config) -> Self {
        AuthorizationServerMetadata {
            issuer: config.issuer.clone(),
            authorization_endpoint: config.url("/oauth/authorize"),
            token_endpoint: config.url("/oauth/token"),
            registration_endpoint: config.url("/oauth/register"),
            revocation_endpoint: config.url("/oauth/revoke"),
            device_authorization_endpoint: config.url("/oauth/device_authorization"),
            introspection_endpoint: config.url("/oauth/introspect"),
            jwks_uri: config.url("/oauth/jwks"),
            response_types_supported: ["code"],
            response_modes_supported: ["query"],
            grant_types_supported: SUPPORTED_GRANT_TYPES,
            code_challenge_methods_supported: ["S256"],
            token_endpoint_auth_methods_supported: AUTH_METHODS,
            token_endpoint_auth_signing_alg_values_supported: SIGNING_ALGS,
            revocation_endpoint_auth_methods_supported: AUTH_METHODS,
            revocation_endpoint_auth_signing_alg_values_supported: SIGNING_ALGS,
            introspection_endpoint_auth_methods_supported: CONFIDENTIAL_AUTH_METHODS,
            introspection_endpoint_auth_signing_alg_values_supported: SIGNING_ALGS,
            scopes_supported: Scope::ALL.iter().map(|s| s.as_str().to_string()).collect(),
            authorization_response_iss_parameter_supported: true,
            client_id_metadata_document_supported: true,
            dpop_signing_alg_values_supported: crate::domain::dpop::SIGNING_ALGS,
            protected_resources: vec![config.mcp_server_url.clone()],
        }
    }

    /// Adds the registered `resources`: their URLs to `protected_resources` and their scopes
    /// to `scopes_supported` (a scope two resources share is listed once).
    pub fn with_resources(mut self, resources: &[ResourceRecord]) -> Self {
        for resource in resources {
            self.protected_resources.push(resource.url.clone());
            for scope in resource.scope_names() {
                if !self.scopes_supported.iter().any(|s| s == scope) {
                    self.scopes_supported.push(scope.to_string());
                }
            }
        }
        self
    }
}

/// `GET /.well-known/oauth-authorization-server` (and its path-inserted form, and
/// `/.well-known/mcp-configuration`). The registered resources are read at each request, so a
/// `gatehouse resource add` shows at once on every instance (only a short HTTP cache life).
pub async fn authorization_server(State(state): State<AppState>) -> Result<Response, OAuthError> {
    let resources = state.store.resources().await?;
    Ok((
        [(header::CACHE_CONTROL, "public, max-age=60")],
        Json(AuthorizationServerMetadata::for_config(&state.config).with_resources(&resources)),
    )
        .into_response())
}

/// `GET /.well-known/openai-apps-challenge`: the configured token as text/plain, 404 when unset.
pub async fn openai_apps_challenge(State(state): State<AppState>) -> Response {
    match &state.config.openai_apps_challenge {
        Some(token) => (
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            token.clone(),
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "not configured").into_response(),
    }
}
