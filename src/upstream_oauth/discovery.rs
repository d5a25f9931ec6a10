//! Discovery and registration for `gatehouse upstream add NAME --url URL --per-person-oauth`:
//! the chain an MCP client follows (MCP 2025-11-25 `basic/authorization` §Authorization Server
//! Discovery), run once when the upstream is added.
//!
//! 1. `POST URL` (an `initialize`) without credentials must answer `401`; its `Bearer`
//!    challenge names the protected-resource metadata (RFC 9728 §5.1), else the well-known
//!    URLs are tried (path-suffixed, then the root; RFC 9728 §3.1).
//! 2. The protected-resource metadata: `resource` identical to the URL (RFC 9728 §3.3), its
//!    first authorization server is used.
//! 3. The authorization server's metadata (RFC 8414 §3.1, then `OpenID` Connect discovery),
//!    `issuer` identical to what the resource named (RFC 8414 §3.3), PKCE `S256` offered
//!    (RFC 7636; MCP: clients MUST refuse a server that does not say so).
//! 4. Every endpoint found is checked ([`check_endpoint`]): https, or the upstream's own host
//!    with its own scheme; never a loopback, private or link-local address literal elsewhere.
//! 5. Registration: the pre-registered client given; else a client ID metadata document
//!    Gatehouse serves (`client_id_metadata_document_supported`, https deployments); else
//!    dynamic registration (RFC 7591).
//!
//! Any failure is one sentence naming the step and the URL; nothing is stored by the caller.

use serde_json::{Value, json};
use url::Url;

use crate::doctor::challenge::{BearerChallenge, parse_bearer};
use crate::doctor::checks::{ServerMetadata, resource_metadata_urls, server_metadata};
use crate::doctor::http::Probe;
use crate::domain::cimd::is_forbidden_ip;

/// What discovery found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    /// `resource` of the protected-resource metadata (the upstream's MCP URL).
    pub resource: String,
    /// The authorization server's issuer.
    pub issuer: String,
    /// Where people sign in and consent.
    pub authorization_endpoint: String,
    /// Where codes and refresh tokens are redeemed.
    pub token_endpoint: String,
    /// RFC 7009, if offered.
    pub revocation_endpoint: Option<String>,
    /// RFC 7591, if offered.
    pub registration_endpoint: Option<String>,
    /// `client_id_metadata_document_supported`.
    pub metadata_documents: bool,
    /// `token_endpoint_auth_methods_supported` (RFC 8414 default: `client_secret_basic`).
    pub auth_methods: Vec<String>,
    /// The scope to ask for (empty: the server's default).
    pub scope: String,
}

/// A client registration at the upstream's authorization server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// `pre-registered`, `dynamic` or `metadata-document`.
    pub method: &'static str,
    /// The client ID.
    pub client_id: String,
    /// The client secret, when the client has one.
    pub client_secret: Option<String>,
}

/// Why discovery or registration failed: one sentence, no secret in it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DiscoveryError(pub String);

fn fail<T>(message: impl Into<String>) -> Result<T, DiscoveryError> {
    Err(DiscoveryError(message.into()))
}

/// Time each request of discovery may take.
const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// The path of the client ID metadata document Gatehouse serves for its connections.
pub const CLIENT_METADATA_PATH: &str = "/connections/client-metadata.json";
/// The path of the redirect URI of its connections.
pub const CALLBACK_PATH: &str = "/connections/callback";

/// `FRONTEND_URL` + `path`.
pub fn public_url(frontend: &str, path: &str) -> String {
    format!("{}{path}", frontend.trim_end_matches('/'))
}

/// Whether `endpoint`, read from metadata the upstream serves, may be used, and it parsed:
/// an absolute URL without credentials or fragment; on the upstream's own host with the
/// upstream's scheme (what the operator chose), or else https to a host that is not a
/// loopback, private or link-local address literal.
///
/// Errors: a sentence naming `what` and why.
pub fn check_endpoint(what: &str, endpoint: &str, upstream: &Url) -> Result<Url, DiscoveryError> {
    let Ok(url) = Url::parse(endpoint) else {
        return fail(format!(
            "the {what} \"{}\" is not an absolute URL",
            endpoint.escape_debug()
        ));
    };
    if !url.username().is_empty() || url.password().is_some() || url.fragment().is_some() {
        return fail(format!(
            "the {what} {url} carries credentials or a #fragment"
        ));
    }
    let Some(host) = url.host() else {
        return fail(format!("the {what} {url} has no host"));
    };
    let same_host = url.host_str() == upstream.host_str();
    if same_host && url.scheme() == upstream.scheme() {
        return Ok(url);
    }
    if url.scheme() != "https" {
        return fail(format!(
            "the {what} {url} is not https (only the upstream's own host {} may use {})",
            upstream.host_str().unwrap_or_default(),
            upstream.scheme()
        ));
    }
    let ip = match host {
        url::Host::Ipv4(v4) => Some(std::net::IpAddr::V4(v4)),
        url::Host::Ipv6(v6) => Some(std::net::IpAddr::V6(v6)),
        url::Host::Domain(d) if d.eq_ignore_ascii_case("localhost") => {
            Some(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST))
        }
        url::Host::Domain(_) => None,
    };
    if ip.is_some_and(is_forbidden_ip) {
        return fail(format!(
            "the {what} {url} points at a loopback, private or link-local address"
        ));
    }
    Ok(url)
}

async fn get_json(probe: &Probe, url: &str, what: &str) -> Result<Value, DiscoveryError> {
    let fetched = probe
        .send(probe.client().get(url).header("accept", "application/json"))
        .await
        .map_err(|e| DiscoveryError(format!("{what}: GET {url}: {e}")))?;
    if fetched.status != 200 {
        return fail(format!("{what}: GET {url} answered {}", fetched.summary()));
    }
    serde_json::from_str(&fetched.body)
        .map_err(|_| DiscoveryError(format!("{what}: GET {url}: the answer is not JSON")))
}

/// Steps 1 to 4 for the upstream at `url`; `scope` overrides the scope asked for.
///
/// Errors: see the module documentation.
pub async fn discover(url: &Url, scope: Option<&str>) -> Result<Discovered, DiscoveryError> {
    let probe = Probe::new(REQUEST_TIMEOUT).map_err(DiscoveryError)?;
    let challenge = unauthenticated_challenge(&probe, url).await?;
    let (prm_url, prm) = resource_metadata(&probe, url, &challenge).await?;
    let (resource, issuer) = resource_and_issuer(url, &prm_url, &prm)?;
    let meta = authorization_server_metadata(&probe, url, &issuer).await?;
    let doc = &meta.document;
    let authorization_endpoint =
        endpoint(doc, "authorization_endpoint", true, &issuer, url)?.unwrap_or_default();
    let token_endpoint = endpoint(doc, "token_endpoint", true, &issuer, url)?.unwrap_or_default();
    let revocation_endpoint = endpoint(doc, "revocation_endpoint", false, &issuer, url)?;
    let registration_endpoint = endpoint(doc, "registration_endpoint", false, &issuer, url)?;
    let mut auth_methods = strings(&doc["token_endpoint_auth_methods_supported"]);
    if auth_methods.is_empty() {
        auth_methods.push("client_secret_basic".to_string());
    }
    let scope = match scope {
        Some(s) => s.trim().to_string(),
        None => default_scope(&challenge, &prm, doc),
    };
    Ok(Discovered {
        resource,
        issuer,
        authorization_endpoint,
        token_endpoint,
        revocation_endpoint,
        registration_endpoint,
        metadata_documents: doc["client_id_metadata_document_supported"] == Value::Bool(true),
        auth_methods,
        scope,
    })
}

/// Step 1: `POST url` (an MCP `initialize`) without credentials, which must answer `401`.
///
/// Returns the `Bearer` challenge of its `WWW-Authenticate` (empty when there is none or it
/// does not parse). Errors: the request failed, or it answered something else than `401`.
async fn unauthenticated_challenge(
    probe: &Probe,
    url: &Url,
) -> Result<BearerChallenge, DiscoveryError> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "gatehouse", "version": env!("CARGO_PKG_VERSION")}}});
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
        .map_err(|e| DiscoveryError(format!("POST {url}: {e}")))?;
    if fetched.status != 401 {
        return fail(format!(
            "POST {url} without credentials answered {} instead of 401: it does not ask for \
             OAuth, so it cannot be a per-person upstream (give its credential with --header instead)",
            fetched.summary()
        ));
    }
    Ok(fetched
        .header("www-authenticate")
        .and_then(|v| parse_bearer(v).ok())
        .unwrap_or_default())
}

/// Step 1's end: the protected-resource metadata (RFC 9728) of the upstream at `url`, from the
/// URL the `challenge` names (checked with [`check_endpoint`]), else from the first of the
/// well-known URLs (path-suffixed, then the root) that answers.
///
/// Returns the URL it was read from and the document. Errors: a bad URL in the challenge, or
/// the failure of the last URL tried.
async fn resource_metadata(
    probe: &Probe,
    url: &Url,
    challenge: &BearerChallenge,
) -> Result<(String, Value), DiscoveryError> {
    let candidates = match &challenge.resource_metadata {
        Some(u) => vec![check_endpoint("protected-resource metadata URL", u, url)?.to_string()],
        None => {
            let (suffixed, root) = resource_metadata_urls(url);
            vec![suffixed, root]
        }
    };
    let mut last = None;
    for candidate in &candidates {
        match get_json(probe, candidate, "protected-resource metadata (RFC 9728)").await {
            Ok(doc) => return Ok((candidate.clone(), doc)),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        DiscoveryError("no protected-resource metadata (RFC 9728) found".into())
    }))
}

/// Step 2: the protected-resource metadata `prm` (read from `prm_url`) must name `url` as its
/// `resource` (RFC 9728 §3.3, a trailing slash aside) and an authorization server.
///
/// Returns the `resource` and the first authorization server's issuer. Errors: a sentence
/// saying which is wrong.
fn resource_and_issuer(
    url: &Url,
    prm_url: &str,
    prm: &Value,
) -> Result<(String, String), DiscoveryError> {
    let resource = prm["resource"].as_str().unwrap_or_default().to_string();
    if resource != url.as_str() && resource != url.as_str().trim_end_matches('/') {
        return fail(format!(
            "{prm_url} names the resource \"{}\", not {url} (RFC 9728 §3.3): register the upstream \
             with exactly the URL it publishes",
            resource.escape_debug()
        ));
    }
    let Some(issuer) = prm["authorization_servers"][0].as_str().map(str::to_string) else {
        return fail(format!("{prm_url} names no authorization server"));
    };
    Ok((resource, issuer))
}

/// Step 3: the metadata of the authorization server `issuer` (checked with
/// [`check_endpoint`] against the upstream `url`), read at the issuer without its trailing
/// slash, else as written; its `issuer` must be identical (RFC 8414 §3.3) and it must offer
/// PKCE `S256`.
///
/// Errors: a bad issuer URL, no metadata found, another issuer, or no `S256`.
async fn authorization_server_metadata(
    probe: &Probe,
    url: &Url,
    issuer: &str,
) -> Result<ServerMetadata, DiscoveryError> {
    let issuer_url = check_endpoint("authorization server", issuer, url)?;
    let (_, meta) = server_metadata(probe, issuer_url.as_str().trim_end_matches('/')).await;
    let meta = match meta {
        Some(m) => m,
        None => {
            let (_, again) = server_metadata(probe, issuer).await;
            again.ok_or_else(|| {
                DiscoveryError(format!(
                    "no authorization-server metadata (RFC 8414 or OpenID Connect discovery) found for {issuer}"
                ))
            })?
        }
    };
    if meta.str("issuer") != Some(issuer) {
        return fail(format!(
            "the metadata of {issuer} names the issuer \"{}\" (RFC 8414 §3.3: they must be identical)",
            meta.str("issuer").unwrap_or_default().escape_debug()
        ));
    }
    let s256 = meta.document["code_challenge_methods_supported"]
        .as_array()
        .is_some_and(|m| m.iter().any(|v| v == "S256"));
    if !s256 {
        return fail(format!(
            "the metadata of {issuer} does not offer PKCE S256 (code_challenge_methods_supported)"
        ));
    }
    Ok(meta)
}

/// Step 4 for one endpoint: the member `name` of the metadata `doc` of `issuer`, checked with
/// [`check_endpoint`] against the upstream `url`; `None` when absent and not `required`.
///
/// Errors: a `required` endpoint absent, or one that may not be used.
fn endpoint(
    doc: &Value,
    name: &str,
    required: bool,
    issuer: &str,
    url: &Url,
) -> Result<Option<String>, DiscoveryError> {
    match doc[name].as_str() {
        Some(e) => Ok(Some(check_endpoint(name, e, url)?.to_string())),
        None if required => fail(format!("the metadata of {issuer} has no {name}")),
        None => Ok(None),
    }
}

/// The strings of a JSON array member (others skipped); empty when it is not an array.
fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The scope asked for when none is given: the `challenge`'s scope, else the protected-resource
/// metadata `prm`'s `scopes_supported`; with `offline_access` added when the authorization
/// server's metadata `doc` offers it and it is not there yet.
fn default_scope(challenge: &BearerChallenge, prm: &Value, doc: &Value) -> String {
    let offers_offline = strings(&doc["scopes_supported"])
        .iter()
        .any(|s| s == "offline_access");
    let mut s = challenge
        .scope
        .clone()
        .unwrap_or_else(|| strings(&prm["scopes_supported"]).join(" "));
    if offers_offline && !s.split_whitespace().any(|w| w == "offline_access") {
        s = format!("{s} offline_access").trim().to_string();
    }
    s
}

/// Step 5: the client Gatehouse uses at the upstream's authorization server. `given` is the
/// pre-registered client (ID, secret); `frontend` is `FRONTEND_URL`, under which the callback
/// and the client ID metadata document are served; `client_name` is shown on the upstream's
/// consent page.
///
/// Errors: the server offers no way to register, or refused the registration.
pub async fn register(
    d: &Discovered,
    given: Option<(String, Option<String>)>,
    frontend: &Url,
    client_name: &str,
) -> Result<Registration, DiscoveryError> {
    if let Some((client_id, client_secret)) = given {
        return Ok(Registration {
            method: "pre-registered",
            client_id,
            client_secret,
        });
    }
    if d.metadata_documents && frontend.scheme() == "https" {
        return Ok(Registration {
            method: "metadata-document",
            client_id: public_url(frontend.as_str(), CLIENT_METADATA_PATH),
            client_secret: None,
        });
    }
    let Some(endpoint) = &d.registration_endpoint else {
        return fail(format!(
            "the authorization server {} offers neither dynamic registration nor client ID \
             metadata documents (for an https FRONTEND_URL): register Gatehouse there and give \
             --client-id (and --client-secret-stdin)",
            d.issuer
        ));
    };
    let method = ["client_secret_basic", "client_secret_post"]
        .into_iter()
        .find(|m| d.auth_methods.iter().any(|a| a == m))
        .unwrap_or("none");
    let body = json!({
        "client_name": client_name,
        "redirect_uris": [public_url(frontend.as_str(), CALLBACK_PATH)],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": method,
        "application_type": "web",
    });
    let probe = Probe::new(REQUEST_TIMEOUT).map_err(DiscoveryError)?;
    let fetched = probe
        .send(
            probe
                .client()
                .post(endpoint)
                .header("content-type", "application/json")
                .header("accept", "application/json")
                .body(body.to_string()),
        )
        .await
        .map_err(|e| DiscoveryError(format!("dynamic registration at {endpoint}: {e}")))?;
    let doc: Value = serde_json::from_str(&fetched.body).unwrap_or_default();
    match doc["client_id"].as_str() {
        Some(id) if (200..300).contains(&fetched.status) => Ok(Registration {
            method: "dynamic",
            client_id: id.to_string(),
            client_secret: doc["client_secret"].as_str().map(str::to_string),
        }),
        _ => fail(format!(
            "dynamic registration at {endpoint} refused: {} {}",
            fetched.summary(),
            doc["error_description"]
                .as_str()
                .or(doc["error"].as_str())
                .unwrap_or_default()
        )),
    }
}

/// The client ID metadata document Gatehouse serves at [`CLIENT_METADATA_PATH`] (draft
/// `oauth-client-id-metadata-document`): a public web client whose redirect URI is the
/// connections' callback.
pub fn client_metadata_document(frontend: &str, client_name: &str) -> Value {
    json!({
        "client_id": public_url(frontend, CLIENT_METADATA_PATH),
        "client_name": client_name,
        "client_uri": frontend,
        "redirect_uris": [public_url(frontend, CALLBACK_PATH)],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": "web",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_https_or_the_upstreams_own_host() {
        let upstream = Url::parse("http://localhost:8080/mcp").unwrap();
        assert!(
            check_endpoint(
                "token_endpoint",
                "http://localhost:8080/oauth/token",
                &upstream
            )
            .is_ok()
        );
        assert!(
            check_endpoint("token_endpoint", "https://as.example.com/token", &upstream).is_ok()
        );
        let e =
            check_endpoint("token_endpoint", "http://as.example.com/token", &upstream).unwrap_err();
        assert!(e.0.contains("not https"), "{e}");
        let e = check_endpoint(
            "authorization server",
            "https://169.254.169.254/",
            &upstream,
        )
        .unwrap_err();
        assert!(e.0.contains("link-local"), "{e}");
        let e = check_endpoint("authorization server", "https://10.0.0.1/", &upstream).unwrap_err();
        assert!(e.0.contains("private"), "{e}");
        assert!(
            check_endpoint("token_endpoint", "https://u:p@as.example.com/", &upstream).is_err()
        );
        assert!(check_endpoint("token_endpoint", "/relative", &upstream).is_err());
    }

    #[test]
    fn the_metadata_document_names_the_callback() {
        let doc = client_metadata_document("https://gh.example.com/", "Gatehouse");
        assert_eq!(
            doc["client_id"],
            "https://gh.example.com/connections/client-metadata.json"
        );
        assert_eq!(
            doc["redirect_uris"][0],
            "https://gh.example.com/connections/callback"
        );
        assert_eq!(doc["token_endpoint_auth_method"], "none");
    }
}
