//! Per-person upstreams (`gatehouse upstream add NAME --url URL --per-person-oauth`): each
//! person connects their own account at the upstream's authorization server, and Gatehouse
//! keeps the tokens — sealed, per person and upstream — and calls the upstream with them.
//! The MCP client never sees them (MCP 2025-11-25 `client/elicitation` §URL Mode, "third-party
//! authorization").
//!
//! - [`discovery`]: how Gatehouse finds the upstream's authorization server and registers
//!   there, once, when the upstream is added;
//! - this module: the OAuth client on the `oauth2` crate (authorization code, PKCE S256,
//!   `resource` = the upstream's MCP URL, RFC 8707), refresh and revocation (RFC 7009);
//! - [`vault`]: the access token of a person for a call, refreshed before it ends, one refresh
//!   at a time per grant across instances;
//! - [`crate::web::connections`]: the pages (start, callback, the Connections page).

pub mod discovery;
pub mod vault;

use std::time::Duration;

use oauth2::basic::{BasicClient, BasicErrorResponseType};
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, PkceCodeChallenge,
    PkceCodeVerifier, RedirectUrl, RefreshToken, RequestTokenError, RevocationUrl, Scope,
    StandardRevocableToken, TokenResponse, TokenUrl,
};
use sha2::{Digest as _, Sha256};

use crate::domain::server_key::Keyring;
use crate::domain::upstream::{UpstreamName, seal_context};
use crate::store::vault::UpstreamOAuth;

/// Time each request to the upstream's authorization server may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// How long an authorization request at the upstream may take, from the confirm button to the
/// callback.
pub const STATE_TTL_SECS: i64 = 600;
/// How long a link given to an MCP client works.
pub const LINK_TTL_SECS: i64 = 900;

/// The sealing context of one person's `what` (`access`, `refresh`, `verifier`) at an
/// upstream: a sealed value cannot be moved to another person or upstream.
pub fn grant_context(upstream: &str, account_id: &str, what: &str) -> Vec<u8> {
    format!("upstream\0{upstream}\0grant\0{account_id}\0{what}").into_bytes()
}

/// The sealing context of an upstream's client secret.
pub fn secret_context(upstream: &UpstreamName) -> Vec<u8> {
    seal_context(upstream, "client_secret")
}

/// SHA-256 hex of a random handle (`state`, a link id), as stored.
pub fn handle_hash(handle: &str) -> String {
    hex::encode(Sha256::digest(handle.as_bytes()))
}

/// A fresh random handle: 32 bytes, base64url.
pub fn new_handle() -> String {
    crate::domain::secret::random_urlsafe(32)
}

/// Tokens the upstream's token endpoint issued.
pub struct Tokens {
    /// The access token.
    pub access: String,
    /// The refresh token, if one was issued.
    pub refresh: Option<String>,
    /// When the access token ends (Unix seconds), if the server said.
    pub expires_at: Option<i64>,
    /// The scope granted, if the server said.
    pub scope: Option<String>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// Why a request to the upstream's authorization server failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowError {
    /// The server answered `invalid_grant` (RFC 6749 §5.2): the code or refresh token is no
    /// longer good; the grant is over.
    #[error("the authorization server answered invalid_grant")]
    InvalidGrant,
    /// Any other failure (unreachable, an error status, another error code): worth a retry.
    #[error("{0}")]
    Failed(String),
    /// The settings stored for the upstream are unusable (a bad URL, a secret that does not
    /// open).
    #[error("{0}")]
    Settings(String),
}

fn http_client() -> Result<reqwest::Client, FlowError> {
    reqwest::Client::builder()
        // RFC 6749 §3.2 / oauth2's advice: never follow redirects at the token endpoint.
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(REQUEST_TIMEOUT)
        .timeout(REQUEST_TIMEOUT)
        .user_agent(concat!("gatehouse/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| FlowError::Settings(format!("HTTP client: {e}")))
}

fn settings<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> FlowError {
    move |e| FlowError::Settings(format!("{what}: {e}"))
}

/// The client secret of `oauth`, opened with the server key.
fn client_secret(oauth: &UpstreamOAuth, keys: &Keyring) -> Result<Option<ClientSecret>, FlowError> {
    let Some(sealed) = &oauth.client_secret_sealed else {
        return Ok(None);
    };
    let name = UpstreamName::parse(&oauth.upstream).map_err(|e| FlowError::Settings(e.0))?;
    let plain = keys
        .open(&secret_context(&name), sealed)
        .map_err(settings("client secret"))?;
    let text = String::from_utf8(plain).map_err(settings("client secret"))?;
    Ok(Some(ClientSecret::new(text)))
}

fn map_token_error<RE: std::error::Error + 'static>(
    e: RequestTokenError<RE, oauth2::StandardErrorResponse<BasicErrorResponseType>>,
) -> FlowError {
    match e {
        RequestTokenError::ServerResponse(r)
            if *r.error() == BasicErrorResponseType::InvalidGrant =>
        {
            FlowError::InvalidGrant
        }
        RequestTokenError::ServerResponse(r) => {
            FlowError::Failed(format!("the authorization server answered {}", r.error()))
        }
        RequestTokenError::Request(_) => {
            FlowError::Failed("the token endpoint could not be reached".to_string())
        }
        RequestTokenError::Parse(_, _) => {
            FlowError::Failed("the token endpoint's answer was not a token response".to_string())
        }
        RequestTokenError::Other(_) => {
            FlowError::Failed("the token endpoint answered unexpectedly".to_string())
        }
    }
}

fn tokens_of<T: TokenResponse>(t: &T, now: i64) -> Tokens {
    Tokens {
        access: t.access_token().secret().clone(),
        refresh: t.refresh_token().map(|r| r.secret().clone()),
        expires_at: t
            .expires_in()
            .map(|d| now.saturating_add(i64::try_from(d.as_secs()).unwrap_or(i64::MAX / 2))),
        scope: t.scopes().map(|s| {
            s.iter()
                .map(|s| s.as_str().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        }),
    }
}

/// The authorization request to send the person to: the upstream's authorization endpoint
/// with `response_type=code`, `client_id`, `redirect_uri`, `scope`, `state`, PKCE S256
/// (RFC 7636 §4.3) and `resource` (RFC 8707 §2). Returns the URL and the PKCE verifier.
///
/// Errors: [`FlowError::Settings`] when a stored URL is unusable.
pub fn authorization_request(
    oauth: &UpstreamOAuth,
    redirect_uri: &str,
    state: &str,
) -> Result<(url::Url, String), FlowError> {
    let client = BasicClient::new(ClientId::new(oauth.client_id.clone()))
        .set_auth_uri(
            AuthUrl::new(oauth.authorization_endpoint.clone())
                .map_err(settings("authorization endpoint"))?,
        )
        .set_redirect_uri(
            RedirectUrl::new(redirect_uri.to_string()).map_err(settings("redirect URI"))?,
        );
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let state = state.to_string();
    let mut request = client
        .authorize_url(move || CsrfToken::new(state))
        .set_pkce_challenge(challenge)
        .add_extra_param("resource", oauth.resource.clone());
    if let Some(scope) = &oauth.scope {
        for s in scope.split_whitespace() {
            request = request.add_scope(Scope::new(s.to_string()));
        }
    }
    let (url, _) = request.url();
    Ok((url, verifier.secret().clone()))
}

/// Redeems an authorization code (RFC 6749 §4.1.3) with its PKCE verifier and `resource`.
///
/// Errors: [`FlowError`].
pub async fn exchange_code(
    oauth: &UpstreamOAuth,
    keys: &Keyring,
    redirect_uri: &str,
    code: &str,
    verifier: &str,
    now: i64,
) -> Result<Tokens, FlowError> {
    let mut client = BasicClient::new(ClientId::new(oauth.client_id.clone()))
        .set_token_uri(
            TokenUrl::new(oauth.token_endpoint.clone()).map_err(settings("token endpoint"))?,
        )
        .set_redirect_uri(
            RedirectUrl::new(redirect_uri.to_string()).map_err(settings("redirect URI"))?,
        );
    if let Some(secret) = client_secret(oauth, keys)? {
        client = client.set_client_secret(secret);
    }
    let http = http_client()?;
    let response = client
        .exchange_code(AuthorizationCode::new(code.to_string()))
        .set_pkce_verifier(PkceCodeVerifier::new(verifier.to_string()))
        .add_extra_param("resource", oauth.resource.clone())
        .request_async(&http)
        .await
        .map_err(map_token_error)?;
    Ok(tokens_of(&response, now))
}

/// Refreshes (RFC 6749 §6) with `refresh_token` and `resource`.
///
/// Errors: [`FlowError::InvalidGrant`] when the grant is over; [`FlowError::Failed`] when a
/// retry may help.
pub async fn refresh(
    oauth: &UpstreamOAuth,
    keys: &Keyring,
    refresh_token: &str,
    now: i64,
) -> Result<Tokens, FlowError> {
    let mut client = BasicClient::new(ClientId::new(oauth.client_id.clone())).set_token_uri(
        TokenUrl::new(oauth.token_endpoint.clone()).map_err(settings("token endpoint"))?,
    );
    if let Some(secret) = client_secret(oauth, keys)? {
        client = client.set_client_secret(secret);
    }
    let http = http_client()?;
    let token = RefreshToken::new(refresh_token.to_string());
    let response = client
        .exchange_refresh_token(&token)
        .add_extra_param("resource", oauth.resource.clone())
        .request_async(&http)
        .await
        .map_err(map_token_error)?;
    Ok(tokens_of(&response, now))
}

/// Revokes `token` at the upstream's RFC 7009 endpoint (the refresh token when there is
/// one: RFC 7009 §2.1 has the server revoke the grant's access tokens with it). Does nothing
/// when the upstream has no revocation endpoint.
///
/// Errors: [`FlowError::Failed`] when the endpoint could not be reached or refused.
pub async fn revoke(
    oauth: &UpstreamOAuth,
    keys: &Keyring,
    token: StandardRevocableToken,
) -> Result<(), FlowError> {
    let Some(endpoint) = &oauth.revocation_endpoint else {
        return Ok(());
    };
    if endpoint.starts_with("http://") {
        // The `oauth2` crate sends revocations over https only (RFC 7009 §2); an http endpoint
        // can only be the upstream's own host, which the operator registered over http.
        return revoke_over_http(oauth, keys, endpoint, token).await;
    }
    let mut client = BasicClient::new(ClientId::new(oauth.client_id.clone())).set_revocation_url(
        RevocationUrl::new(endpoint.clone()).map_err(settings("revocation endpoint"))?,
    );
    if let Some(secret) = client_secret(oauth, keys)? {
        client = client.set_client_secret(secret);
    }
    let http = http_client()?;
    client
        .revoke_token(token)
        .map_err(settings("revocation"))?
        .request_async(&http)
        .await
        .map_err(|e| FlowError::Failed(format!("revocation at the upstream failed: {e}")))
}

/// RFC 7009 §2.1 by hand for an http endpoint: `token` and `token_type_hint` as a form, the
/// client authenticated with HTTP Basic (RFC 6749 §2.3.1) when it has a secret, else by
/// `client_id`; any 200 is success (RFC 7009 §2.2).
async fn revoke_over_http(
    oauth: &UpstreamOAuth,
    keys: &Keyring,
    endpoint: &str,
    token: StandardRevocableToken,
) -> Result<(), FlowError> {
    let (value, hint) = match &token {
        StandardRevocableToken::AccessToken(t) => (t.secret().clone(), "access_token"),
        StandardRevocableToken::RefreshToken(t) => (t.secret().clone(), "refresh_token"),
        _ => return Err(FlowError::Settings("an unknown kind of token".into())),
    };
    let mut form = vec![("token", value), ("token_type_hint", hint.to_string())];
    let mut request = http_client()?.post(endpoint);
    match client_secret(oauth, keys)? {
        Some(secret) => {
            // RFC 6749 §2.3.1: each part form-urlencoded before Basic.
            let encode = |s: &str| -> String {
                url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
            };
            request = request.basic_auth(encode(&oauth.client_id), Some(encode(secret.secret())));
        }
        None => form.push(("client_id", oauth.client_id.clone())),
    }
    let response =
        request.form(&form).send().await.map_err(|_| {
            FlowError::Failed("the revocation endpoint could not be reached".into())
        })?;
    if response.status().is_success() {
        Ok(())
    } else {
        Err(FlowError::Failed(format!(
            "the revocation endpoint answered {}",
            response.status().as_u16()
        )))
    }
}
