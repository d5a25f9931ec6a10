//! Form bodies and client authentication at the token, revocation and introspection endpoints
//! (RFC 6749 §2.3.1, §3.2.1; OAuth 2.1 §2.4).

use std::collections::HashMap;

use axum::body::Body;
use axum::extract::{FromRequest, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use base64::Engine;

use super::OAuthError;
use super::clients::{ClientLookupError, FetchFor};
use crate::domain::client::ClientId;
use crate::domain::client_assertion::PRIVATE_KEY_JWT;
use crate::domain::secret::{Secret, constant_time_eq};
use crate::request_body::declared_over;
use crate::state::AppState;
use crate::store::auth_cache::Reads;
use crate::store::oauth::ClientRecord;

/// The `error_description` of `invalid_client` for an unknown client and for a wrong
/// credential alike ([`super::error::AUTHENTICATION_FAILED`]).
pub use super::error::AUTHENTICATION_FAILED;

/// Largest form body accepted, in bytes.
pub const MAX_FORM_BYTES: usize = 16 * 1024;

/// Reads an `application/x-www-form-urlencoded` body. A repeated parameter is refused
/// (OAuth 2.1 §3.2: "parameters MUST NOT be included more than once"). A wrong content type
/// or a declared `Content-Length` over [`MAX_FORM_BYTES`] is refused before the body is read;
/// a body that has not arrived whole within `GATEHOUSE_BODY_READ_TIMEOUT` fails its read
/// ([`crate::request_body`]). Errors: `invalid_request`.
pub async fn read_form(
    headers: &HeaderMap,
    body: Body,
) -> Result<HashMap<String, String>, OAuthError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if !content_type.starts_with("application/x-www-form-urlencoded") {
        return Err(OAuthError::InvalidRequest(
            "the request body must be application/x-www-form-urlencoded".into(),
        ));
    }
    if declared_over(headers, MAX_FORM_BYTES) {
        return Err(OAuthError::InvalidRequest(format!(
            "the request body is larger than {MAX_FORM_BYTES} bytes"
        )));
    }
    let bytes = axum::body::to_bytes(body, MAX_FORM_BYTES)
        .await
        .map_err(|e| {
            OAuthError::InvalidRequest(if crate::error::body_stalled(&e) {
                "the request body stopped arriving before its end".to_string()
            } else {
                format!("the request body is larger than {MAX_FORM_BYTES} bytes")
            })
        })?;
    parse_params(url::form_urlencoded::parse(&bytes))
}

/// The extractor of the token, revocation and introspection endpoints: the form body
/// ([`read_form`]: `application/x-www-form-urlencoded`, at most [`MAX_FORM_BYTES`], no repeated
/// parameter) and the client it authenticates ([`authenticate_client`], with the
/// `Authorization` header). A bad body or a failed authentication is refused with the
/// RFC 6749 §5.2 JSON (`invalid_request`, `invalid_client`) before the handler runs.
#[derive(Debug, Clone)]
pub struct ClientForm {
    /// The authenticated client.
    pub client: ClientRecord,
    /// The form's parameters.
    pub params: HashMap<String, String>,
    /// The request's reads through the validation cache, which looked the client up, for its
    /// other cached lookups ([`Reads`]).
    pub reads: Reads,
}

impl FromRequest<AppState> for ClientForm {
    type Rejection = OAuthError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, OAuthError> {
        let (parts, body) = req.into_parts();
        // A malformed `Authorization: Basic` is refused before the body is read.
        basic_credentials(&parts.headers)?;
        let params = read_form(&parts.headers, body).await?;
        Self::authenticate(state, &parts, params).await
    }
}

impl ClientForm {
    /// The client that the request (`parts`, with the form `params` already read by
    /// [`read_form`]) authenticates ([`authenticate_client`]), as the extractor does.
    ///
    /// Errors: `invalid_client` (or 503 when a metadata document cannot be fetched now).
    pub async fn authenticate(
        state: &AppState,
        parts: &Parts,
        params: HashMap<String, String>,
    ) -> Result<Self, OAuthError> {
        // A metadata document met here for the first time spends the caller's budget.
        let for_whom = match crate::client_addr::ClientAddr::of(&parts.extensions) {
            Some(addr) => FetchFor::Budgeted(super::register::registration_budget(
                state,
                &addr.to_string(),
                0,
            )),
            None => FetchFor::SignedIn,
        };
        let (client, reads) =
            authenticate_client(state, &parts.headers, &params, &for_whom).await?;
        Ok(ClientForm {
            client,
            params,
            reads,
        })
    }
}

/// Collects parameters, refusing repeats; empty values count as absent (RFC 6749 §3.1).
/// Errors: `invalid_request` for a repeated parameter or a NUL character in a name or value
/// (no OAuth parameter holds one, and `PostgreSQL` cannot store or compare it).
pub fn parse_params<'a>(
    pairs: impl Iterator<Item = (std::borrow::Cow<'a, str>, std::borrow::Cow<'a, str>)>,
) -> Result<HashMap<String, String>, OAuthError> {
    let mut out = HashMap::new();
    for (k, v) in pairs {
        if k.contains('\0') || v.contains('\0') {
            return Err(OAuthError::InvalidRequest(
                "a parameter contains a NUL character".into(),
            ));
        }
        if v.is_empty() {
            continue;
        }
        if out.insert(k.to_string(), v.to_string()).is_some() {
            return Err(OAuthError::InvalidRequest(format!(
                "parameter {k} is repeated"
            )));
        }
    }
    Ok(out)
}

/// The `(client_id, client_secret)` of an `Authorization: Basic` header (RFC 7617, RFC 6749
/// §2.3.1), `None` without one. The scheme name is matched case-insensitively and may be
/// followed by several spaces (RFC 9110 §11.1, §11.4: `auth-scheme 1*SP token68`).
/// Errors: `invalid_client` (401 with `WWW-Authenticate: Basic`) for a malformed header.
pub fn basic_credentials(headers: &HeaderMap) -> Result<Option<(String, String)>, OAuthError> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let value = value.to_str().unwrap_or("");
    let Some(encoded) = value
        .split_once(' ')
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("Basic"))
        .map(|(_, rest)| rest)
    else {
        return Ok(None);
    };
    let invalid = || OAuthError::InvalidClient {
        description: "malformed HTTP Basic credentials".into(),
        basic: true,
    };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|_| invalid())?;
    let decoded = String::from_utf8(decoded).map_err(|_| invalid())?;
    // NUL is in no client id or secret (and PostgreSQL cannot compare it).
    if decoded.contains('\0') || decoded.contains("%00") {
        return Err(invalid());
    }
    let (id, secret) = decoded.split_once(':').ok_or_else(invalid)?;
    // RFC 6749 §2.3.1: both parts are form-urlencoded before base64.
    let unescape = |s: &str| -> String {
        url::form_urlencoded::parse(format!("x={s}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default()
    };
    Ok(Some((unescape(id), unescape(secret))))
}

/// Authenticates the calling client with any method the metadata advertises (RFC 8414 §2
/// `*_endpoint_auth_methods_supported`): a client that was issued a secret presents it with
/// `client_secret_basic` (which RFC 6749 §2.3.1 requires the server to accept from every such
/// client, whatever it registered) or `client_secret_post`; a `private_key_jwt` client sends a
/// signed assertion ([`super::client_assertion::authenticate`]); a public client sends only
/// its `client_id` (`none`). Secrets are compared as SHA-256 digests in constant time.
///
/// Returns the client and the request's cached reads it was looked up with
/// ([`ClientResolver::lookup_with`](super::clients::ClientResolver::lookup_with)), for the
/// request's other cached lookups.
///
/// A client ID metadata document not yet stored spends `for_whom`'s budget
/// ([`FetchFor`]).
///
/// Errors: `invalid_client` (401) for an unknown client or a wrong secret (both described as
/// [`AUTHENTICATION_FAILED`]), a secret from a public client or none from a confidential one,
/// a refused metadata document, or a new metadata-document client over the caller's budget;
/// `temporarily_unavailable` (503) for a metadata document that cannot be fetched right now;
/// `invalid_request` for two methods at once.
pub async fn authenticate_client(
    app: &AppState,
    headers: &HeaderMap,
    params: &HashMap<String, String>,
    for_whom: &FetchFor,
) -> Result<(ClientRecord, Reads), OAuthError> {
    let basic = basic_credentials(headers)?;
    let used_basic = basic.is_some();
    if params.contains_key("client_assertion") || params.contains_key("client_assertion_type") {
        if used_basic || params.contains_key("client_secret") {
            return Err(OAuthError::InvalidRequest(
                "use one client authentication method, not two".into(),
            ));
        }
        return super::client_assertion::authenticate(app, params, for_whom).await;
    }
    let (client_id, secret, method) = match basic {
        Some((id, secret)) => {
            if params.contains_key("client_secret") {
                return Err(OAuthError::InvalidRequest(
                    "use one client authentication method, not two".into(),
                ));
            }
            if params.get("client_id").is_some_and(|b| b != &id) {
                return Err(OAuthError::InvalidRequest(
                    "client_id in the body differs from the authenticated client".into(),
                ));
            }
            (id, Some(secret), "client_secret_basic")
        }
        None => match (params.get("client_id"), params.get("client_secret")) {
            (Some(id), Some(secret)) => (id.clone(), Some(secret.clone()), "client_secret_post"),
            (Some(id), None) => (id.clone(), None, "none"),
            (None, _) => {
                return Err(OAuthError::InvalidClient {
                    description: "client authentication is required (client_id missing)".into(),
                    basic: false,
                });
            }
        },
    };
    let fail = |d: &str| OAuthError::InvalidClient {
        description: d.to_string(),
        basic: used_basic,
    };
    let Ok(client_id) = ClientId::parse(&client_id) else {
        return Err(fail(AUTHENTICATION_FAILED));
    };
    let mut reads = app.store.reads();
    let found = app
        .clients
        .lookup_with(&mut reads, &client_id, for_whom)
        .await;
    let client = match found {
        Ok(Some(c)) => c,
        Ok(None) => return Err(fail(AUTHENTICATION_FAILED)),
        Err(ClientLookupError::Metadata(e)) if e.is_temporary() => {
            return Err(OAuthError::ClientMetadataUnavailable);
        }
        Err(ClientLookupError::Metadata(e)) => return Err(fail(&e.to_string())),
        Err(e @ ClientLookupError::Throttled(_)) => return Err(fail(&e.to_string())),
        Err(ClientLookupError::Store(e)) => return Err(e.into()),
    };
    if client.token_endpoint_auth_method == PRIVATE_KEY_JWT {
        return Err(fail(
            "this client authenticates with private_key_jwt: send client_assertion_type and client_assertion",
        ));
    }
    let confidential = client.client_secret_hash.is_some();
    if confidential != (method != "none") {
        return Err(fail(&if confidential {
            "this client was issued a secret: authenticate with client_secret_basic or client_secret_post".to_string()
        } else {
            "this is a public client: send only its client_id (method none)".to_string()
        }));
    }
    if let (Some(expected), Some(presented)) = (&client.client_secret_hash, &secret) {
        let presented = Secret::from_presented(presented.clone()).hash();
        if !constant_time_eq(expected.as_str().as_bytes(), presented.as_str().as_bytes()) {
            return Err(fail(AUTHENTICATION_FAILED));
        }
    } else if client.client_secret_hash.is_some() != secret.is_some() {
        return Err(fail(AUTHENTICATION_FAILED));
    }
    Ok((client, reads))
}
