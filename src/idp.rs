//! Signing in at an organisation's identity provider with OpenID Connect (OpenID Connect Core
//! 1.0 §3.1, the authorization-code flow, with PKCE, RFC 7636), built on the `openidconnect`
//! crate: discovery (OpenID Connect Discovery 1.0 §4), the provider's key set fetched with it
//! and cached, fetched again when an ID token names a key it does not hold (Core §10.1.1, key
//! rotation), and the ID token's signature, `iss`, `aud`, `exp` and `nonce` checked
//! (Core §3.1.3.7).
//!
//! The pages (`/signin/idp/NAME` and its callback) are [`crate::web::idp`]; the registry is
//! [`crate::store::idps`].

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use openidconnect::core::{
    CoreAuthenticationFlow, CoreClient, CoreClientAuthMethod, CoreIdTokenClaims,
    CoreProviderMetadata,
};
use openidconnect::{
    AuthType, AuthorizationCode, ClaimsVerificationError, ClientId, ClientSecret, CsrfToken,
    IssuerUrl, JsonWebKeySet, Nonce, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope,
    SignatureVerificationError, TokenResponse as _,
};

/// How long a provider's discovery document (and the key set fetched with it) is used before it
/// is fetched again.
pub const DISCOVERY_TTL: Duration = Duration::from_secs(3600);
/// The shortest time between two fetches of a provider's key set for an unknown `kid`.
pub const JWKS_REFETCH_GAP: Duration = Duration::from_secs(10);
/// The time limit of one request to a provider (discovery, key set, token endpoint).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a provider sign-in did not go through.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdpError {
    /// The provider could not be reached or answered nonsense (discovery, key set or token
    /// endpoint): the page says it is unavailable.
    #[error("the identity provider is unavailable: {0}")]
    Unavailable(String),
    /// The provider's answer was refused: a code it would not redeem, an ID token that failed
    /// a check (signature, `iss`, `aud`, `exp`, `nonce`).
    #[error("the identity provider's answer was refused: {0}")]
    Refused(String),
}

/// The provider's word about the person, from a verified ID token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// `sub`: the provider's stable id of the person.
    pub subject: String,
    /// `email`, if given.
    pub email: Option<String>,
    /// `email_verified` is `true`.
    pub email_verified: bool,
}

/// What to send the browser to the provider with, and what to keep for the callback.
#[derive(Debug)]
pub struct Start {
    /// The provider's authorization URL with every parameter.
    pub url: String,
    /// The `state` sent (32 random bytes, base64url).
    pub state: String,
    /// The `nonce` sent.
    pub nonce: String,
    /// The PKCE `code_verifier` (RFC 7636 §4.1).
    pub pkce_verifier: String,
}

struct Cached {
    metadata: CoreProviderMetadata,
    fetched: Instant,
    /// When the key set was last fetched again for an unknown `kid`.
    refetched: Option<Instant>,
}

/// Discovery documents by issuer: one entry per registered provider's issuer.
static CACHE: LazyLock<Mutex<HashMap<String, Cached>>> = LazyLock::new(Default::default);

/// The HTTP client of every provider request: no redirects followed (the `openidconnect`
/// crate's advice against SSRF), [`REQUEST_TIMEOUT`].
fn http() -> &'static reqwest::Client {
    static CLIENT: LazyLock<reqwest::Client> = LazyLock::new(|| {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(Duration::from_secs(5))
            .user_agent(concat!("gatehouse/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default()
    });
    &CLIENT
}

fn cached(issuer: &str) -> Option<CoreProviderMetadata> {
    let cache = CACHE.lock().ok()?;
    cache
        .get(issuer)
        .filter(|c| c.fetched.elapsed() < DISCOVERY_TTL)
        .map(|c| c.metadata.clone())
}

/// The provider's discovery document with its key set: from the cache, else fetched
/// (`ISSUER/.well-known/openid-configuration`, its `issuer` required to equal `issuer`).
///
/// Errors: [`IdpError::Unavailable`] when it cannot be fetched or read.
pub async fn metadata(issuer: &str) -> Result<CoreProviderMetadata, IdpError> {
    if let Some(m) = cached(issuer) {
        return Ok(m);
    }
    let url = IssuerUrl::new(issuer.to_string())
        .map_err(|e| IdpError::Unavailable(format!("issuer URL: {e}")))?;
    let metadata = CoreProviderMetadata::discover_async(url, http())
        .await
        .map_err(|e| IdpError::Unavailable(describe(&e)))?;
    if let Ok(mut cache) = CACHE.lock() {
        cache.insert(
            issuer.to_string(),
            Cached {
                metadata: metadata.clone(),
                fetched: Instant::now(),
                refetched: None,
            },
        );
    }
    Ok(metadata)
}

/// Fetches the provider's key set again (an ID token named a key the cached set lacks), at
/// most once per [`JWKS_REFETCH_GAP`]; returns the metadata with the newest set.
async fn refetch_jwks(
    issuer: &str,
    metadata: CoreProviderMetadata,
) -> Result<CoreProviderMetadata, IdpError> {
    let recent = CACHE.lock().ok().is_some_and(|c| {
        c.get(issuer)
            .and_then(|c| c.refetched)
            .is_some_and(|at| at.elapsed() < JWKS_REFETCH_GAP)
    });
    if recent {
        return Ok(metadata);
    }
    let jwks = JsonWebKeySet::fetch_async(metadata.jwks_uri(), http())
        .await
        .map_err(|e| IdpError::Unavailable(describe(&e)))?;
    let metadata = metadata.set_jwks(jwks);
    if let Ok(mut cache) = CACHE.lock() {
        let now = Instant::now();
        let fetched = cache.get(issuer).map_or(now, |c| c.fetched);
        cache.insert(
            issuer.to_string(),
            Cached {
                metadata: metadata.clone(),
                fetched,
                refetched: Some(now),
            },
        );
    }
    Ok(metadata)
}

/// An error with its sources, on one line (no secrets: the crate's errors name URLs and
/// statuses, never a client secret).
fn describe(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text.chars().take(300).collect()
}

fn client(
    metadata: CoreProviderMetadata,
    client_id: &str,
    client_secret: Option<&str>,
    redirect_uri: &str,
) -> Result<
    CoreClient<
        openidconnect::EndpointSet,
        openidconnect::EndpointNotSet,
        openidconnect::EndpointNotSet,
        openidconnect::EndpointNotSet,
        openidconnect::EndpointMaybeSet,
        openidconnect::EndpointMaybeSet,
    >,
    IdpError,
> {
    // client_secret_basic unless the provider says it takes only client_secret_post.
    let post_only = metadata
        .token_endpoint_auth_methods_supported()
        .is_some_and(|m| {
            m.contains(&CoreClientAuthMethod::ClientSecretPost)
                && !m.contains(&CoreClientAuthMethod::ClientSecretBasic)
        });
    let redirect = RedirectUrl::new(redirect_uri.to_string())
        .map_err(|e| IdpError::Unavailable(format!("redirect URI: {e}")))?;
    let client = CoreClient::from_provider_metadata(
        metadata,
        ClientId::new(client_id.to_string()),
        client_secret.map(|s| ClientSecret::new(s.to_string())),
    )
    .set_redirect_uri(redirect);
    Ok(if post_only {
        client.set_auth_type(AuthType::RequestBody)
    } else {
        client
    })
}

/// Begins a sign-in at the provider of `issuer` for our `client_id`: the authorization URL with
/// `response_type=code`, `scope=openid email`, a random `state` and `nonce`, and an S256 PKCE
/// challenge (RFC 7636 §4.2), returning to `redirect_uri`.
///
/// Errors: [`IdpError::Unavailable`] when discovery fails.
pub async fn start(issuer: &str, client_id: &str, redirect_uri: &str) -> Result<Start, IdpError> {
    let metadata = metadata(issuer).await?;
    let client = client(metadata, client_id, None, redirect_uri)?;
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let (url, state, nonce) = client
        .authorize_url(
            CoreAuthenticationFlow::AuthorizationCode,
            || CsrfToken::new(crate::domain::secret::random_urlsafe(32)),
            || Nonce::new(crate::domain::secret::random_urlsafe(32)),
        )
        .add_scope(Scope::new("email".to_string()))
        .set_pkce_challenge(challenge)
        .url();
    Ok(Start {
        url: url.to_string(),
        state: state.secret().clone(),
        nonce: nonce.secret().clone(),
        pkce_verifier: verifier.secret().clone(),
    })
}

/// Finishes a sign-in: redeems `code` at the provider's token endpoint with the PKCE
/// `pkce_verifier` and our client credentials, then checks the ID token (signature with the
/// provider's keys, fetched again once when it names an unknown key; `iss` equal to the
/// issuer; `aud` holding our client id; `exp` in the future; `nonce` equal to the one sent).
///
/// Errors: [`IdpError::Unavailable`] when the provider cannot be reached;
/// [`IdpError::Refused`] when it refuses the code or its ID token fails a check.
pub async fn finish(
    issuer: &str,
    client_id: &str,
    client_secret: Option<&str>,
    redirect_uri: &str,
    code: &str,
    nonce: &str,
    pkce_verifier: &str,
) -> Result<Identity, IdpError> {
    let metadata = metadata(issuer).await?;
    let client = client(metadata.clone(), client_id, client_secret, redirect_uri)?;
    let request = client
        .exchange_code(AuthorizationCode::new(code.to_string()))
        .map_err(|e| IdpError::Unavailable(format!("no token endpoint: {e}")))?
        .set_pkce_verifier(PkceCodeVerifier::new(pkce_verifier.to_string()));
    let response = request.request_async(http()).await.map_err(|e| match e {
        openidconnect::RequestTokenError::ServerResponse(r) => {
            IdpError::Refused(format!("the token endpoint answered {}", r.error()))
        }
        other => IdpError::Unavailable(describe(&other)),
    })?;
    let id_token = response
        .id_token()
        .ok_or_else(|| IdpError::Refused("the token response held no ID token".to_string()))?;
    let nonce = Nonce::new(nonce.to_string());
    let verify = |client: &CoreClient<_, _, _, _, _, _>| -> Result<CoreIdTokenClaims, ClaimsVerificationError> {
        id_token.claims(&client.id_token_verifier(), &nonce).cloned()
    };
    let claims = match verify(&client) {
        Ok(claims) => claims,
        Err(ClaimsVerificationError::SignatureVerification(
            SignatureVerificationError::NoMatchingKey,
        )) => {
            let metadata = refetch_jwks(issuer, metadata).await?;
            let client = self::client(metadata, client_id, client_secret, redirect_uri)?;
            verify(&client).map_err(|e| IdpError::Refused(format!("ID token: {e}")))?
        }
        Err(e) => return Err(IdpError::Refused(format!("ID token: {e}"))),
    };
    Ok(Identity {
        subject: claims.subject().as_str().to_string(),
        email: claims.email().map(|e| e.as_str().to_string()),
        email_verified: claims.email_verified() == Some(true),
    })
}

/// Forgets every cached discovery document (tests that restart a provider on a new key).
pub fn forget_cache() {
    if let Ok(mut cache) = CACHE.lock() {
        cache.clear();
    }
}
