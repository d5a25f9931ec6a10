//! `gatehouse login URL`: the authorization-code flow of a native MCP client, with the `oauth2`
//! crate as the client, and the refresh the bridge uses.
//!
//! 1. `POST URL` without credentials: the `401` challenge names the protected-resource
//!    metadata (RFC 9728 §5.1; the well-known URL when it does not) and the scopes to ask for.
//! 2. The protected-resource metadata: `resource` must equal the URL (RFC 9728 §3.3), its
//!    first authorization server is used.
//! 3. The authorization server's metadata (RFC 8414 §3.1, then `OpenID` Connect discovery):
//!    `issuer` must equal what the resource named (RFC 8414 §3.3).
//! 4. Dynamic registration of a public native client with a loopback redirect (RFC 7591,
//!    RFC 8252 §7.3, `token_endpoint_auth_method: none`).
//! 5. The browser at the authorization endpoint with PKCE S256 (RFC 7636) and `resource`
//!    (RFC 8707); the redirect back to the loopback listener, `state` and `iss` checked
//!    (RFC 9207 §2.4).
//! 6. The code for tokens (`resource` again), saved in the credentials file
//!    ([`super::credentials`]).

use std::time::Duration;

use oauth2::basic::BasicClient;
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, CsrfToken, PkceCodeChallenge, RedirectUrl, RefreshToken,
    Scope, TokenResponse, TokenUrl,
};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use url::Url;

use super::RemoteError;
use super::credentials::{CredentialsFile, SavedTokens};
use crate::doctor::challenge::parse_bearer;
use crate::doctor::checks::{resource_metadata_urls, server_metadata};
use crate::doctor::http::Probe;
use crate::doctor::interactive::{BrowserOpener, callback, describe};

/// Time each HTTP request of the flow may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// What the flow learned before the browser step.
struct Discovered {
    resource: String,
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    registration_endpoint: String,
    scope: String,
}

fn probe() -> Result<Probe, RemoteError> {
    Probe::new(REQUEST_TIMEOUT).map_err(RemoteError::new)
}

async fn get_json(probe: &Probe, url: &str) -> Result<Value, RemoteError> {
    let fetched = probe
        .send(probe.client().get(url).header("accept", "application/json"))
        .await
        .map_err(|e| RemoteError::new(format!("GET {url}: {e}")))?;
    if fetched.status != 200 {
        return Err(RemoteError::new(format!(
            "GET {url}: {}",
            fetched.summary()
        )));
    }
    serde_json::from_str(&fetched.body)
        .map_err(|_| RemoteError::new(format!("GET {url}: the answer is not JSON")))
}

/// Steps 1 to 3.
async fn discover(
    probe: &Probe,
    url: &Url,
    scope: Option<&str>,
) -> Result<Discovered, RemoteError> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "gatehouse-login", "version": env!("CARGO_PKG_VERSION")}}});
    let fetched = probe
        .send(
            probe
                .client()
                .post(url.as_str())
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .body(body.to_string()),
        )
        .await
        .map_err(|e| RemoteError::new(format!("POST {url}: {e}")))?;
    if fetched.status != 401 {
        return Err(RemoteError::new(format!(
            "POST {url} without credentials answered {} instead of 401: the URL is not an MCP \
             endpoint that asks for OAuth (with API keys only, set GATEHOUSE_API_KEY instead)",
            fetched.summary()
        )));
    }
    let challenge = fetched
        .header("www-authenticate")
        .and_then(|v| parse_bearer(v).ok())
        .unwrap_or_default();
    let metadata_url = challenge
        .resource_metadata
        .clone()
        .unwrap_or_else(|| resource_metadata_urls(url).0);
    let prm = get_json(probe, &metadata_url).await?;
    let resource = prm["resource"].as_str().unwrap_or_default().to_string();
    if resource != url.as_str() && resource != url.as_str().trim_end_matches('/') {
        return Err(RemoteError::new(format!(
            "{metadata_url} names the resource \"{resource}\", not {url} (RFC 9728 §3.3): use \
             exactly the URL the server publishes"
        )));
    }
    let issuer = prm["authorization_servers"][0]
        .as_str()
        .ok_or_else(|| RemoteError::new(format!("{metadata_url} names no authorization server")))?
        .to_string();
    let (_, meta) = server_metadata(probe, &issuer).await;
    let meta = meta.ok_or_else(|| {
        RemoteError::new(format!(
            "no authorization-server metadata found for {issuer}"
        ))
    })?;
    if meta.str("issuer") != Some(issuer.as_str()) {
        return Err(RemoteError::new(format!(
            "the metadata of {issuer} names another issuer (RFC 8414 §3.3)"
        )));
    }
    let endpoint = |name: &str| {
        meta.str(name)
            .map(str::to_string)
            .ok_or_else(|| RemoteError::new(format!("the metadata of {issuer} has no {name}")))
    };
    let offers_offline = meta.document["scopes_supported"]
        .as_array()
        .is_some_and(|s| s.iter().any(|v| v == "offline_access"));
    let scope = match scope {
        Some(s) => s.to_string(),
        None => {
            let mut s = challenge.scope.clone().unwrap_or_default();
            if offers_offline && !s.split_whitespace().any(|w| w == "offline_access") {
                s = format!("{s} offline_access").trim().to_string();
            }
            s
        }
    };
    Ok(Discovered {
        resource,
        authorization_endpoint: endpoint("authorization_endpoint")?,
        token_endpoint: endpoint("token_endpoint")?,
        registration_endpoint: endpoint("registration_endpoint")?,
        issuer,
        scope,
    })
}

/// Step 4: a public native client with `redirect_uri`.
async fn register(
    probe: &Probe,
    d: &Discovered,
    redirect_uri: &str,
) -> Result<String, RemoteError> {
    let body = json!({
        "client_name": "Gatehouse command line",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": "native",
    });
    let fetched = probe
        .send(
            probe
                .client()
                .post(&d.registration_endpoint)
                .header("content-type", "application/json")
                .body(body.to_string()),
        )
        .await
        .map_err(|e| RemoteError::new(format!("registration: {e}")))?;
    let doc: Value = serde_json::from_str(&fetched.body).unwrap_or_default();
    match doc["client_id"].as_str() {
        Some(id) if (200..300).contains(&fetched.status) => Ok(id.to_string()),
        _ => Err(RemoteError::new(format!(
            "registration at {} refused: {} {}",
            d.registration_endpoint,
            fetched.summary(),
            fetched.excerpt()
        ))),
    }
}

/// Runs the whole flow for `url` and saves the tokens in `file`; `opener` shows the sign-in
/// URL (prints it, and starts a browser unless told not to); the person has `wait`.
///
/// Errors: each step's failure as one sentence (no 401 challenge, metadata missing, the
/// registration or the authorization refused, the time ran out, the code not redeemed).
pub async fn login(
    url: &Url,
    scope: Option<&str>,
    opener: &BrowserOpener,
    wait: Duration,
    file: &CredentialsFile,
) -> Result<SavedTokens, RemoteError> {
    let probe = probe()?;
    let d = discover(&probe, url, scope).await?;
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| RemoteError::new(format!("cannot listen on a loopback port: {e}")))?;
    let port = listener
        .local_addr()
        .map_err(|e| RemoteError::new(e.to_string()))?
        .port();
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");
    let client_id = register(&probe, &d, &redirect_uri).await?;
    let bad_url = |e: url::ParseError| RemoteError::new(format!("an endpoint is not a URL: {e}"));
    let client = BasicClient::new(ClientId::new(client_id.clone()))
        .set_auth_uri(AuthUrl::new(d.authorization_endpoint.clone()).map_err(bad_url)?)
        .set_token_uri(TokenUrl::new(d.token_endpoint.clone()).map_err(bad_url)?)
        .set_redirect_uri(RedirectUrl::new(redirect_uri).map_err(bad_url)?);
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let mut request = client
        .authorize_url(CsrfToken::new_random)
        .set_pkce_challenge(challenge)
        .add_extra_param("resource", &d.resource);
    for s in d.scope.split_whitespace() {
        request = request.add_scope(Scope::new(s.to_string()));
    }
    let (auth_url, state) = request.url();
    if let Err(e) = (opener.0)(auth_url.as_str()) {
        tracing::debug!("browser not started: {e}");
    }
    let query = tokio::time::timeout(wait, callback(&listener))
        .await
        .map_err(|_| {
            RemoteError::new(format!(
                "no sign-in came back within {} s; run gatehouse login again",
                wait.as_secs()
            ))
        })?
        .map_err(RemoteError::new)?;
    let get = |k: &str| query.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    if let Some(error) = get("error") {
        return Err(RemoteError::new(format!(
            "the authorization was refused: {error} {}",
            get("error_description").unwrap_or_default()
        )));
    }
    if get("state").as_deref() != Some(state.secret().as_str()) {
        return Err(RemoteError::new("the redirect carried another state"));
    }
    if get("iss").is_some_and(|iss| iss != d.issuer) {
        return Err(RemoteError::new(
            "the redirect came from another issuer (RFC 9207)",
        ));
    }
    let code = get("code").ok_or_else(|| RemoteError::new("the redirect carried no code"))?;
    let http = http_client()?;
    let tokens = client
        .exchange_code(AuthorizationCode::new(code))
        .set_pkce_verifier(verifier)
        .add_extra_param("resource", &d.resource)
        .request_async(&http)
        .await
        .map_err(|e| RemoteError::new(format!("the code was not redeemed: {}", describe(&e))))?;
    let saved = SavedTokens {
        issuer: d.issuer,
        token_endpoint: d.token_endpoint,
        client_id,
        access_token: tokens.access_token().secret().clone(),
        refresh_token: tokens.refresh_token().map(|r| r.secret().clone()),
        expires_at: tokens
            .expires_in()
            .map(|e| crate::store::now() + e.as_secs() as i64),
        scope: tokens
            .scopes()
            .map(|s| {
                s.iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .or(Some(d.scope)),
    };
    file.save(url.as_str(), &saved)?;
    Ok(saved)
}

/// The HTTP client of the token requests: no redirects followed (RFC 6749 §3.2 endpoints
/// answer directly), bounded in time.
fn http_client() -> Result<reqwest::Client, RemoteError> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(REQUEST_TIMEOUT)
        .build()
        .map_err(|e| RemoteError::new(format!("cannot build the HTTP client: {e}")))
}

/// A new access token for `saved` from its refresh token (RFC 6749 §6, `resource` per RFC 8707
/// §2.2), the rotated refresh token kept (OAuth 2.1 §4.3.1), saved in `file` for `mcp_url`.
///
/// Errors: no refresh token, or the server refused it (the person must run
/// `gatehouse login` again) or could not be reached.
pub async fn refresh(
    mcp_url: &str,
    saved: &SavedTokens,
    file: &CredentialsFile,
) -> Result<SavedTokens, RemoteError> {
    let again = format!("run gatehouse login {mcp_url} again");
    let refresh_token = saved.refresh_token.clone().ok_or_else(|| {
        RemoteError::new(format!(
            "the access token expired and there is no refresh token: {again}"
        ))
    })?;
    let token_url = TokenUrl::new(saved.token_endpoint.clone())
        .map_err(|e| RemoteError::new(format!("the saved token endpoint is not a URL: {e}")))?;
    let client = BasicClient::new(ClientId::new(saved.client_id.clone())).set_token_uri(token_url);
    let http = http_client()?;
    let tokens = client
        .exchange_refresh_token(&RefreshToken::new(refresh_token))
        .add_extra_param("resource", mcp_url)
        .request_async(&http)
        .await
        .map_err(|e| {
            RemoteError::new(format!(
                "the session could not be refreshed ({}): {again}",
                describe(&e)
            ))
        })?;
    let next = SavedTokens {
        access_token: tokens.access_token().secret().clone(),
        refresh_token: tokens
            .refresh_token()
            .map(|r| r.secret().clone())
            .or_else(|| saved.refresh_token.clone()),
        expires_at: tokens
            .expires_in()
            .map(|e| crate::store::now() + e.as_secs() as i64),
        ..saved.clone()
    };
    file.save(mcp_url, &next)?;
    Ok(next)
}
