//! The rules of the authorization endpoint (OAuth 2.1 §4.1.1–4.1.2, RFC 7636, RFC 8707,
//! RFC 9207). The pages (sign-in, consent) are in `web::consent`, which calls these.
//!
//! An unknown `client_id` or a `redirect_uri` that matches no registered one is shown as an
//! error page and never redirected to (§4.1.2.1). Every other error goes back to the client's
//! redirect URI with `error`, `error_description`, `state` and `iss`.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use url::Url;

use super::clients::{ClientLookupError, FetchFor};
use crate::domain::audit::{Event, Outcome};
use crate::domain::authorization::AuthorizationErrorCode;
use crate::domain::authorization::AuthorizationErrorCode as Code;
use crate::domain::client::ClientId;
use crate::domain::device::DEVICE_CODE_GRANT;
use crate::domain::pkce::is_valid_challenge;
use crate::domain::redirect_uri::{host_for_display, matches, uses_only_uri_characters};
use crate::domain::registry::{ResourceScope, granted_resource_scopes, scopes_within};
use crate::domain::resource::ResourceIndicator;
use crate::domain::scope::ScopeSet;
use crate::domain::secret::{Secret, TokenHash, TokenKind};
use crate::domain::text::check_line;
use crate::state::AppState;
use crate::store::StoreError;
use crate::store::audit::AuditEvent;
use crate::store::oauth::{BUILT_IN, CodeRecord};

/// Longest `state` accepted, in bytes (it is stored until the decision and echoed back).
pub const MAX_STATE_BYTES: usize = 2048;

/// Lifetime of an authorization code, in seconds (OAuth 2.1 §4.1.2 recommends at most 10 min).
pub const CODE_TTL_SECS: i64 = 600;

/// A validated authorization request, kept in the session while the consent page is shown.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct AuthorizationRequest {
    /// The client.
    pub client_id: String,
    /// Its registered name, if any and if it passes [`check_line`] (shown as unverified;
    /// otherwise the page says "An unnamed application").
    pub client_name: Option<String>,
    /// The redirect URI to answer at, exactly as requested.
    pub redirect_uri: String,
    /// The registered redirect URI it matched (consent is remembered per this one).
    pub registered_redirect_uri: String,
    /// The scopes granted if the person approves ([`ScopeSet::granted_for_request`]: unknown
    /// values ignored, the client's registered scope by default; never empty of MCP scopes).
    pub scope: String,
    /// `state`, echoed unchanged.
    pub state: Option<String>,
    /// PKCE S256 challenge.
    pub code_challenge: String,
    /// RFC 8707 resource: the MCP server URL, or a registered resource's URL.
    pub resource: String,
    /// `prompt` (`none`, `consent`, `login`), if sent.
    pub prompt: Option<String>,
    /// The registered resource the request is for; `None` for the built-in one (Gatehouse's
    /// own MCP endpoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registered: Option<RegisteredTarget>,
    /// For a device authorization (RFC 8628) answered on the consent page: the SHA-256 of its
    /// device code. Its `redirect_uri` is then [`DEVICE_CODE_GRANT`] (nothing is redirected
    /// to) and it has no `code_challenge`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// `dpop_jkt` (RFC 9449 §10): the thumbprint of the DPoP key the code may be redeemed
    /// with only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dpop_jkt: Option<String>,
    /// What the client published about itself for the consent page (RFC 7591 §2).
    #[serde(default)]
    pub about: ClientAbout,
}

/// What a client says about itself (RFC 7591 §2 `client_uri`, `policy_uri`, `tos_uri`, each an
/// `http(s)` URL or absent) and when this server first stored it (Unix seconds; `0`: unknown).
/// Shown on the consent page as the client's claims, never as verified facts.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClientAbout {
    /// `client_uri`: the client's homepage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub homepage: Option<String>,
    /// `policy_uri`: how it treats the data it gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// `tos_uri`: its terms of service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terms: Option<String>,
    /// When the client was registered (or its metadata document first fetched).
    #[serde(default)]
    pub registered_at: i64,
}

impl ClientAbout {
    /// Reads the links of a client's registered metadata: only absolute `http`/`https` URLs
    /// are kept (anything else is not offered as a link).
    pub fn of(metadata: &serde_json::Value, registered_at: i64) -> ClientAbout {
        let link = |member: &str| {
            metadata
                .get(member)
                .and_then(serde_json::Value::as_str)
                .filter(|u| {
                    Url::parse(u).is_ok_and(|u| {
                        matches!(u.scheme(), "http" | "https") && u.host_str().is_some()
                    })
                })
                .map(str::to_string)
        };
        ClientAbout {
            homepage: link("client_uri"),
            policy: link("policy_uri"),
            terms: link("tos_uri"),
            registered_at,
        }
    }
}

/// A registered resource as an authorization request for it needs it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RegisteredTarget {
    /// Its name.
    pub name: String,
    /// The scopes granted if the person approves, with their words for the consent page.
    pub scopes: Vec<ResourceScope>,
}

impl AuthorizationRequest {
    /// The scopes as a set (the built-in resource's; empty for a registered resource).
    pub fn scopes(&self) -> ScopeSet {
        ScopeSet::parse(&self.scope).unwrap_or_default()
    }

    /// The resource its remembered consent is kept under: [`BUILT_IN`] or the registered
    /// resource's URL.
    pub fn consent_resource(&self) -> &str {
        if self.registered.is_some() {
            &self.resource
        } else {
            BUILT_IN
        }
    }

    /// Each scope granted on approval with its words for the consent page: `(scope token,
    /// words)`.
    pub fn ability_pairs(&self) -> Vec<(String, String)> {
        match &self.registered {
            Some(target) => target
                .scopes
                .iter()
                .map(|s| (s.scope.clone(), s.description.clone()))
                .collect(),
            None => self
                .scopes()
                .iter()
                .map(|s| (s.as_str().to_string(), s.describe().to_string()))
                .collect(),
        }
    }

    /// A step-up (the account already allowed this client some scopes, `granted`): what is
    /// already allowed and what is new, in words. `offline_access` is never new (it is not a
    /// permission, [`consent_covers`]).
    pub fn step_up(&self, granted: &str) -> (Vec<String>, Vec<String>) {
        let already = match &self.registered {
            Some(_) => self
                .ability_pairs()
                .into_iter()
                .filter(|(scope, _)| consent_covers(granted, scope))
                .map(|(_, words)| words)
                .collect(),
            None => ScopeSet::parse(granted)
                .map(|set| set.iter().map(|s| s.describe().to_string()).collect())
                .unwrap_or_default(),
        };
        let new = self
            .ability_pairs()
            .into_iter()
            .filter(|(scope, _)| !consent_covers(granted, scope))
            .map(|(_, words)| words)
            .collect();
        (already, new)
    }

    /// What the approval lets the application do, in words, for the consent page.
    pub fn abilities(&self) -> Vec<String> {
        match &self.registered {
            Some(target) => target
                .scopes
                .iter()
                .map(|s| s.description.clone())
                .collect(),
            None => self
                .scopes()
                .iter()
                .map(|s| s.describe().to_string())
                .collect(),
        }
    }
}

/// Why an authorization request cannot go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthorizeError {
    /// Show this message on an error page; never redirect.
    Page(String),
    /// Redirect back to the client with an error.
    Redirect {
        /// Where to.
        redirect_uri: String,
        /// `state` to echo.
        state: Option<String>,
        /// The RFC 6749 §4.1.2.1 error code.
        error: AuthorizationErrorCode,
        /// `error_description`.
        description: String,
    },
    /// The storage failed while the request was checked (already logged): shown as the
    /// server's error page, 503 with `Retry-After` when the database was busy or unreachable
    /// (RFC 9110 §15.6.4), else 500; never as a fault of the request; never redirects.
    Storage {
        /// Whether the database was unavailable for now ([`crate::store::StoreError::is_unavailable`]).
        unavailable: bool,
    },
    /// The client's metadata document could not be fetched right now (DNS, connection, time,
    /// 5xx): a "try again" page with `503` and `Retry-After`; never redirects.
    ClientUnavailable,
    /// The client is a metadata document not yet known, and the visitor's address has spent
    /// its budget of new applications: a page with `429` and `Retry-After` (seconds); never
    /// redirects.
    Throttled {
        /// Seconds until the budget allows another.
        retry_after: i64,
    },
}

/// A refused authorization request: why, and the client it named when that client is known
/// (its connection timeline records the refusal; an unknown `client_id` records nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// What the endpoint answers.
    pub error: AuthorizeError,
    /// The known client the request named, if the refusal came after it was found.
    pub client_id: Option<String>,
}

impl AuthorizeError {
    /// The reason in words for a connection timeline: the page's message or the redirect's
    /// `error_description`; `None` for the server's own trouble (storage, a metadata document
    /// that could not be fetched, the budget of new applications).
    pub fn reason(&self) -> Option<&str> {
        match self {
            AuthorizeError::Page(message) => Some(message),
            AuthorizeError::Redirect { description, .. } => Some(description),
            AuthorizeError::Storage { .. }
            | AuthorizeError::ClientUnavailable
            | AuthorizeError::Throttled { .. } => None,
        }
    }
}

/// Validates the parameters of `GET/POST /oauth/authorize`. Repeated parameters are refused.
/// A client ID metadata document not yet stored spends `for_whom`'s budget ([`FetchFor`]).
pub async fn validate(
    app: &AppState,
    pairs: &[(String, String)],
    for_whom: &FetchFor,
) -> Result<AuthorizationRequest, Refusal> {
    let anonymous = |error| Refusal {
        error,
        client_id: None,
    };
    let (params, repeated) = parameters(pairs).map_err(anonymous)?;
    let client = known_client(app, &params, for_whom)
        .await
        .map_err(anonymous)?;
    let client_id = client.client_id.clone();
    check_request(app, client, &params, repeated)
        .await
        .map_err(|error| Refusal {
            error,
            client_id: Some(client_id),
        })
}

/// The request's parameters, empty ones left out, with the name of a repeated one; a NUL
/// anywhere, or a repeated `client_id` or `redirect_uri`, is refused at once.
fn parameters(
    pairs: &[(String, String)],
) -> Result<(HashMap<&str, &str>, Option<String>), AuthorizeError> {
    let mut params: HashMap<&str, &str> = HashMap::new();
    let mut repeated = None;
    for (k, v) in pairs {
        // No authorization parameter holds a NUL (and PostgreSQL cannot compare one).
        if k.contains('\0') || v.contains('\0') {
            return Err(AuthorizeError::Page(
                "A parameter contains a NUL character.".to_string(),
            ));
        }
        if v.is_empty() {
            continue;
        }
        if params.insert(k.as_str(), v.as_str()).is_some() {
            repeated = Some(k.clone());
        }
    }
    if let Some(k) = &repeated
        && (k == "client_id" || k == "redirect_uri")
    {
        return Err(AuthorizeError::Page(format!(
            "The parameter {k} was sent more than once."
        )));
    }
    Ok((params, repeated))
}

/// The client `client_id` names, looked up (a metadata document fetched for `for_whom`).
async fn known_client(
    app: &AppState,
    params: &HashMap<&str, &str>,
    for_whom: &FetchFor,
) -> Result<crate::store::oauth::ClientRecord, AuthorizeError> {
    let page = |m: &str| AuthorizeError::Page(m.to_string());
    let Some(client_id) = params.get("client_id") else {
        return Err(page("The request has no client_id."));
    };
    let unknown = || page(&unknown_client_message(client_id));
    let Ok(client_id) = ClientId::parse(client_id) else {
        return Err(unknown());
    };
    match app.clients.lookup(&app.store, &client_id, for_whom).await {
        Ok(Some(c)) => Ok(c),
        Ok(None) => Err(unknown()),
        Err(ClientLookupError::Metadata(e)) if e.is_temporary() => {
            Err(AuthorizeError::ClientUnavailable)
        }
        Err(ClientLookupError::Metadata(e)) => Err(page(&format!(
            "The application published at {} could not be checked: {e}. Its developer must fix its client ID metadata document.",
            host_for_display(client_id.as_str())
        ))),
        Err(ClientLookupError::Throttled(retry_after)) => {
            Err(AuthorizeError::Throttled { retry_after })
        }
        Err(ClientLookupError::Store(e)) => {
            let unavailable = e.is_unavailable();
            if unavailable {
                tracing::warn!(error = %e, "database unavailable at authorize");
            } else {
                tracing::error!(error = %e, "storage failure at authorize");
            }
            Err(AuthorizeError::Storage { unavailable })
        }
    }
}

/// The redirect URI of the request and the registered one it matches: `redirect_uri` when it
/// matches one the client registered, or the only one registered when none is sent; an error
/// page otherwise (never a redirect to an address the client did not register).
fn redirect_for(
    client: &crate::store::oauth::ClientRecord,
    params: &HashMap<&str, &str>,
) -> Result<(String, String), AuthorizeError> {
    let page = |m: &str| AuthorizeError::Page(m.to_string());
    Ok(match params.get("redirect_uri") {
        Some(requested) => {
            let registered = client
                .redirect_uris
                .iter()
                .find(|r| matches(r, requested))
                .ok_or_else(|| {
                    page(&format!(
                        "{} asked to send you back to {}, an address it did not register with this server. Its developer must fix this: the redirect_uri must be one of the application's registered redirect URIs.",
                        claimed_name(client),
                        shown(&host_for_display(requested)),
                    ))
                })?;
            (requested.to_string(), registered.clone())
        }
        None if client.redirect_uris.len() == 1 => (
            client.redirect_uris[0].clone(),
            client.redirect_uris[0].clone(),
        ),
        None => {
            return Err(page(&format!(
                "{} sent no redirect_uri, and it registered several, so this server cannot tell where to send you back. Its developer must fix this: the request must name one of its registered redirect URIs.",
                claimed_name(client),
            )));
        }
    })
}

/// The PKCE S256 challenge of the request (RFC 7636 §4.3; OAuth 2.1 allows no `plain`), or
/// the `error_description` of its `invalid_request`.
fn pkce_challenge<'a>(params: &HashMap<&str, &'a str>) -> Result<&'a str, String> {
    let Some(challenge) = params.get("code_challenge").copied() else {
        return Err("code_challenge is required (PKCE with S256)".into());
    };
    match params.get("code_challenge_method") {
        Some(&"S256") => {}
        Some(m) => {
            return Err(format!(
                "code_challenge_method {m} is not supported; use S256"
            ));
        }
        None => {
            return Err(
                "code_challenge_method is required: the default (plain) is not supported; use S256"
                    .into(),
            );
        }
    }
    if !is_valid_challenge(challenge) {
        return Err("code_challenge must be the 43-character base64url S256 digest".into());
    }
    Ok(challenge)
}

/// The rest of the checks, for a known `client`: the redirect URI (an error page when it is
/// not registered), then everything answered at the redirect URI (`state`, repeated
/// parameters, `response_type`, PKCE, resource and scope, `dpop_jkt`).
async fn check_request(
    app: &AppState,
    client: crate::store::oauth::ClientRecord,
    params: &HashMap<&str, &str>,
    repeated: Option<String>,
) -> Result<AuthorizationRequest, AuthorizeError> {
    let (redirect_uri, registered) = redirect_for(&client, params)?;
    if params
        .get("state")
        .is_some_and(|s| s.len() > MAX_STATE_BYTES)
    {
        return Err(AuthorizeError::Redirect {
            redirect_uri,
            state: None,
            error: Code::InvalidRequest,
            description: format!("state must be at most {MAX_STATE_BYTES} bytes"),
        });
    }
    let state = params.get("state").map(ToString::to_string);
    let fail = |error: AuthorizationErrorCode, description: String| AuthorizeError::Redirect {
        redirect_uri: redirect_uri.clone(),
        state: state.clone(),
        error,
        description,
    };
    if repeated.as_deref() == Some("resource") {
        return Err(fail(
            Code::InvalidTarget,
            "resource is sent more than once: one authorization request is for one resource (RFC 8707 §2); authorize each resource separately".into(),
        ));
    }
    if let Some(k) = repeated {
        return Err(fail(
            Code::InvalidRequest,
            format!("parameter {k} is repeated"),
        ));
    }
    match params.get("response_type") {
        Some(&"code") => {}
        Some(other) => {
            return Err(fail(
                Code::UnsupportedResponseType,
                format!("response_type {other} is not supported; use code"),
            ));
        }
        None => {
            return Err(fail(
                Code::InvalidRequest,
                "response_type is required".into(),
            ));
        }
    }
    let challenge =
        pkce_challenge(params).map_err(|description| fail(Code::InvalidRequest, description))?;
    let (resource, scope, target) = resolve_target(
        app,
        client.scope.as_deref(),
        params.get("scope").copied(),
        params.get("resource").copied(),
    )
    .await
    .map_err(|e| match e {
        TargetError::Refused(code, description) => fail(code, description),
        TargetError::Storage { unavailable } => AuthorizeError::Storage { unavailable },
    })?;
    let prompt = params.get("prompt").map(ToString::to_string);
    // A thumbprint has the shape of an S256 challenge: 43 base64url characters.
    let dpop_jkt = match params.get("dpop_jkt") {
        None => None,
        Some(jkt) if is_valid_challenge(jkt) => Some(jkt.to_string()),
        Some(_) => {
            return Err(fail(
                Code::InvalidRequest,
                "dpop_jkt must be the 43-character base64url SHA-256 thumbprint of a key (RFC 9449 §10)".into(),
            ));
        }
    };
    Ok(AuthorizationRequest {
        client_id: client.client_id,
        // A name stored before the rule of names applied at registration is not shown.
        client_name: client.client_name.filter(|n| check_line(n).is_ok()),
        redirect_uri,
        registered_redirect_uri: registered,
        scope,
        state,
        code_challenge: challenge.to_string(),
        resource,
        prompt,
        registered: target,
        device: None,
        dpop_jkt,
        about: ClientAbout::of(&client.metadata, client.created_at),
    })
}

/// Why the scope or resource of a request cannot be granted ([`resolve_target`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetError {
    /// `invalid_target` or `invalid_scope`, with a description.
    Refused(AuthorizationErrorCode, String),
    /// The resource registry could not be read (already logged).
    Storage {
        /// Whether the database was unavailable for now.
        unavailable: bool,
    },
}

/// The resource (RFC 8707) and scopes a request for `client` (its registered scope
/// `client_scope`) is granted, the same for the authorization endpoint and the device
/// authorization endpoint: `resource` absent or naming `MCP_SERVER_URL` → the built-in
/// resource and [`ScopeSet::granted_for_request`]; a registered resource → its scopes
/// ([`granted_resource_scopes`]) and its [`RegisteredTarget`]; anything else `invalid_target`.
/// Returns (resource URL, granted scope, registered target).
pub async fn resolve_target(
    app: &AppState,
    client_scope: Option<&str>,
    scope: Option<&str>,
    resource: Option<&str>,
) -> Result<(String, String, Option<RegisteredTarget>), TargetError> {
    let refuse = |code: AuthorizationErrorCode, d: String| TargetError::Refused(code, d);
    let registered_resource = match resource {
        Some(r) if !app.config.resource.matches(r) => {
            let not_served = || {
                refuse(
                    Code::InvalidTarget,
                    format!(
                        "resource {r} is not served here; use {} or a resource registered with this server",
                        app.config.mcp_server_url
                    ),
                )
            };
            let indicator = ResourceIndicator::parse(r).map_err(|e| {
                refuse(
                    Code::InvalidTarget,
                    format!("{e} (RFC 8707 §2); use {}", app.config.mcp_server_url),
                )
            })?;
            match app.store.resource_by_url(&indicator.to_string()).await {
                Ok(Some(found)) => Some(found),
                Ok(None) => return Err(not_served()),
                Err(e) => {
                    let unavailable = e.is_unavailable();
                    tracing::warn!(error = %e, "storage failure reading the resource registry");
                    return Err(TargetError::Storage { unavailable });
                }
            }
        }
        _ => None,
    };
    Ok(match registered_resource {
        None => {
            let scopes = ScopeSet::granted_for_request(scope, client_scope)
                .map_err(|e| refuse(Code::InvalidScope, e.to_string()))?;
            (app.config.mcp_server_url.clone(), scopes.to_string(), None)
        }
        Some(found) => {
            let scopes = granted_resource_scopes(scope, client_scope, &found.scopes)
                .map_err(|e| refuse(Code::InvalidScope, e.to_string()))?;
            let scope = scopes
                .iter()
                .map(|s| s.scope.as_str())
                .collect::<Vec<_>>()
                .join(" ");
            (
                found.url,
                scope,
                Some(RegisteredTarget {
                    name: found.name,
                    scopes,
                }),
            )
        }
    })
}

/// At most this many characters of a request's value are quoted on an error page.
const QUOTED_CHARS: usize = 100;

/// `value` cut to [`QUOTED_CHARS`] characters (with `…` when cut), for an error page.
fn shown(value: &str) -> String {
    let mut out: String = value.chars().take(QUOTED_CHARS).collect();
    if value.chars().nth(QUOTED_CHARS).is_some() {
        out.push('…');
    }
    out
}

/// How an error page names a client: its registered name as a claim ("The application
/// calling itself “…”") when the name follows the visible-text rule, else the host of its
/// metadata document URL, else its client ID.
fn claimed_name(client: &crate::store::oauth::ClientRecord) -> String {
    match client
        .client_name
        .as_deref()
        .filter(|n| check_line(n).is_ok())
    {
        Some(name) => format!("The application calling itself “{}”", shown(name)),
        None if crate::domain::cimd::is_url_client_id(&client.client_id) => format!(
            "The application published at {}",
            host_for_display(&client.client_id)
        ),
        None => format!(
            "The application with client ID {}",
            shown(&client.client_id)
        ),
    }
}

/// The error page's text for a `client_id` this server does not know (OAuth 2.1 §4.1.2.1:
/// never redirected to).
fn unknown_client_message(client_id: &str) -> String {
    format!(
        "No application with the client ID {} is registered with this server. Its developer must fix this: the application must register (RFC 7591) or use a client ID metadata document before it asks for access.",
        shown(client_id)
    )
}

/// Whether a remembered consent's scopes cover the requested ones (space-delimited;
/// `mcp:write` implies `mcp:read`, `offline_access` is not a permission).
pub fn consent_covers(granted: &str, requested: &str) -> bool {
    scopes_within(granted, requested)
}

/// `redirect_uri` with `params` and `iss` appended to its query (RFC 9207 §2) in the
/// `application/x-www-form-urlencoded` format, its own query kept (RFC 6749 §3.1.2, §4.1.2).
///
/// A redirect URI made only of RFC 3986 characters and without a fragment (every URI
/// registered since registration refuses others, and every requested URI that matches one
/// registered) is kept byte for byte: the client is sent to the very string it registered, not
/// to a parser's normal form of it (case of the scheme and host, default port, dot segments).
/// Anything else (a URI stored before that rule) is read and written back by a URL parser,
/// which percent-encodes what RFC 3986 does not allow.
pub fn redirect_url(redirect_uri: &str, issuer: &str, params: &[(&str, &str)]) -> String {
    if uses_only_uri_characters(redirect_uri) && !redirect_uri.contains('#') {
        let mut url = String::with_capacity(redirect_uri.len() + 64);
        url.push_str(redirect_uri);
        // Where the query starts; the serializer puts `&` before the pairs when it is not
        // empty.
        let query_start = match redirect_uri.find('?') {
            Some(at) => at + 1,
            None => {
                url.push('?');
                url.len()
            }
        };
        let mut query = url::form_urlencoded::Serializer::for_suffix(url, query_start);
        for (k, v) in params {
            query.append_pair(k, v);
        }
        query.append_pair("iss", issuer);
        return query.finish();
    }
    match Url::parse(redirect_uri) {
        Ok(mut url) => {
            {
                let mut q = url.query_pairs_mut();
                for (k, v) in params {
                    q.append_pair(k, v);
                }
                q.append_pair("iss", issuer);
            }
            url.to_string()
        }
        Err(_) => redirect_uri.to_string(),
    }
}

/// The redirect for an [`AuthorizeError::Redirect`].
pub fn error_redirect(
    issuer: &str,
    redirect_uri: &str,
    state: Option<&str>,
    error: AuthorizationErrorCode,
    description: &str,
) -> String {
    let mut params = vec![
        ("error", error.as_str()),
        ("error_description", description),
    ];
    if let Some(s) = state {
        params.push(("state", s));
    }
    redirect_url(redirect_uri, issuer, &params)
}

/// Issues a code for an approved request and returns the success redirect
/// (`code`, `state`, `iss`).
pub async fn issue_code(
    app: &AppState,
    req: &AuthorizationRequest,
    account_id: &str,
    consent_id: &str,
    now: i64,
) -> Result<String, StoreError> {
    let code = Secret::generate(TokenKind::AuthorizationCode);
    app.store
        .insert_code(&CodeRecord {
            code_hash: code.hash(),
            client_id: req.client_id.clone(),
            account_id: account_id.to_string(),
            consent_id: consent_id.to_string(),
            redirect_uri: req.redirect_uri.clone(),
            code_challenge: req.code_challenge.clone(),
            resource: req.resource.clone(),
            scope: req.scope.clone(),
            issuer: Some(app.config.issuer.clone()),
            created_at: now,
            expires_at: now + CODE_TTL_SECS,
            used_at: None,
            dpop_jkt: req.dpop_jkt.clone(),
            grant_expires_at: None,
        })
        .await?;
    let mut params = vec![("code", code.expose())];
    if let Some(s) = &req.state {
        params.push(("state", s));
    }
    Ok(redirect_url(&req.redirect_uri, &app.config.issuer, &params))
}

/// Takes (uses up) the authorization request the consent page showed as `request_id` to
/// `account_id`: `None` when it is unknown, someone else's, already answered, expired (at
/// `now`, Unix seconds) or unreadable.
pub async fn take_request(
    app: &AppState,
    request_id: &str,
    account_id: &str,
    now: i64,
) -> Result<Option<AuthorizationRequest>, StoreError> {
    Ok(app
        .store
        .take_authorization_request(request_id, account_id, now)
        .await?
        .and_then(|json| serde_json::from_str(&json).ok()))
}

/// Records the person's answer to a consent request (`consent` audit row, `granted` or
/// `denied`, the scope as subject), committed before the redirect is sent.
async fn audit_consent(
    app: &AppState,
    req: &AuthorizationRequest,
    account_id: &str,
    source_ip: &str,
    granted: bool,
    now: i64,
) {
    app.store
        .audit(
            AuditEvent {
                event: Event::Consent,
                outcome: if granted {
                    Outcome::Granted
                } else {
                    Outcome::Denied
                },
                account_id: Some(account_id),
                client_id: Some(&req.client_id),
                subject: Some(&req.scope),
                source_ip: Some(source_ip),
                detail: None,
            },
            now,
        )
        .await;
}

/// The person approved `req` on the consent page (OAuth 2.1 §4.1.2): audits it, widens the
/// live consent of (account, client, registered redirect URI) or starts a new grant generation
/// after a revocation, issues a code, and returns the success redirect (`code`, `state`,
/// `iss`; RFC 9207). `choice` is what the person chose on the page (issue 37: projects,
/// reading only, duration), kept with the consent; `None` keeps the live consent's.
pub async fn approve(
    app: &AppState,
    req: &AuthorizationRequest,
    account_id: &str,
    source_ip: &str,
    choice: Option<&crate::store::oauth::GrantChoice>,
    now: i64,
) -> Result<String, StoreError> {
    audit_consent(app, req, account_id, source_ip, true, now).await;
    let consent_id = app
        .store
        .approve_consent_with(
            account_id,
            &req.client_id,
            &req.registered_redirect_uri,
            req.consent_resource(),
            &req.scope,
            choice,
            now,
        )
        .await?;
    issue_code(app, req, account_id, &consent_id, now).await
}

/// The person approved the device authorization `req` (RFC 8628 §3.3; `req.device` set) on
/// the consent page: audits it, widens or starts the consent of (account, client, the device
/// grant, resource) as [`approve`] does, and in one transaction marks the device authorization
/// approved and stores the authorization code its client's next poll redeems (bound to the
/// client, account, consent, resource and scopes; [`CODE_TTL_SECS`]). `false` when the device
/// authorization was answered meanwhile or has expired.
pub async fn approve_device(
    app: &AppState,
    req: &AuthorizationRequest,
    account_id: &str,
    source_ip: &str,
    choice: Option<&crate::store::oauth::GrantChoice>,
    now: i64,
) -> Result<bool, StoreError> {
    let Some(device) = &req.device else {
        return Ok(false);
    };
    audit_consent(app, req, account_id, source_ip, true, now).await;
    let consent_id = app
        .store
        .approve_consent_with(
            account_id,
            &req.client_id,
            &req.registered_redirect_uri,
            req.consent_resource(),
            &req.scope,
            choice,
            now,
        )
        .await?;
    // A code nobody is ever shown: only the poll that presents the device code reaches it.
    let code = Secret::generate(TokenKind::AuthorizationCode);
    let record = CodeRecord {
        code_hash: code.hash(),
        client_id: req.client_id.clone(),
        account_id: account_id.to_string(),
        consent_id,
        redirect_uri: DEVICE_CODE_GRANT.to_string(),
        code_challenge: String::new(),
        resource: req.resource.clone(),
        scope: req.scope.clone(),
        issuer: Some(app.config.issuer.clone()),
        created_at: now,
        expires_at: now + CODE_TTL_SECS,
        used_at: None,
        dpop_jkt: None,
        grant_expires_at: None,
    };
    app.store
        .approve_device(&TokenHash::from_hex(device.clone()), &record, now)
        .await
}

/// The person denied the device authorization `req` on the consent page: audits it and marks
/// it denied (the client's next poll gets `access_denied`, RFC 8628 §3.5). `false` when it was
/// answered meanwhile or has expired.
pub async fn deny_device(
    app: &AppState,
    req: &AuthorizationRequest,
    account_id: &str,
    source_ip: &str,
    now: i64,
) -> Result<bool, StoreError> {
    let Some(device) = &req.device else {
        return Ok(false);
    };
    audit_consent(app, req, account_id, source_ip, false, now).await;
    app.store
        .deny_device(&TokenHash::from_hex(device.clone()), account_id, now)
        .await
}

/// The person denied `req` on the consent page: audits it and returns the error redirect
/// (`error=access_denied`, `state`, `iss`; OAuth 2.1 §4.1.2.1).
pub async fn deny(
    app: &AppState,
    req: &AuthorizationRequest,
    account_id: &str,
    source_ip: &str,
    now: i64,
) -> String {
    audit_consent(app, req, account_id, source_ip, false, now).await;
    error_redirect(
        &app.config.issuer,
        &req.redirect_uri,
        req.state.as_deref(),
        Code::AccessDenied,
        "the user denied the request",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const ISSUER: &str = "https://issuer.example";

    #[test]
    fn the_redirect_is_the_registered_string_with_the_parameters_after_it() {
        for (uri, expected) in [
            (
                "https://good.example/cb",
                "https://good.example/cb?code=c+1&state=a%26b&iss=https%3A%2F%2Fissuer.example",
            ),
            (
                "https://good.example/cb?x=1",
                "https://good.example/cb?x=1&code=c+1&state=a%26b&iss=https%3A%2F%2Fissuer.example",
            ),
            (
                "https://good.example/cb?",
                "https://good.example/cb?code=c+1&state=a%26b&iss=https%3A%2F%2Fissuer.example",
            ),
            // Not rewritten into a parser's normal form (RFC 3986 §6): the client gets back the
            // string it registered.
            (
                "HTTPS://Good.Example:443/a/../cb",
                "HTTPS://Good.Example:443/a/../cb?code=c+1&state=a%26b&iss=https%3A%2F%2Fissuer.example",
            ),
            (
                "http://127.0.0.1:33418",
                "http://127.0.0.1:33418?code=c+1&state=a%26b&iss=https%3A%2F%2Fissuer.example",
            ),
            (
                "com.example.app:/cb%7C",
                "com.example.app:/cb%7C?code=c+1&state=a%26b&iss=https%3A%2F%2Fissuer.example",
            ),
        ] {
            assert_eq!(
                redirect_url(uri, ISSUER, &[("code", "c 1"), ("state", "a&b")]),
                expected
            );
        }
    }

    #[test]
    fn a_uri_stored_before_the_character_rule_is_sent_percent_encoded() {
        assert_eq!(
            redirect_url("cc:c%%W\u{FFFD}", ISSUER, &[("code", "c")]),
            "cc:c%%W%EF%BF%BD?code=c&iss=https%3A%2F%2Fissuer.example"
        );
    }
}
