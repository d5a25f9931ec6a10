//! The checks, one function each, in the order MCP clients walk a server. Each returns the
//! [`Step`] to report and what later checks need. The integration tests run these same
//! functions against Gatehouse itself.

use reqwest::Method;
use serde_json::{Value, json};
use url::Url;

use super::challenge::{BearerChallenge, parse_bearer};
use super::clients::ClientProfile;
use super::http::{Fetched, Probe};
use super::{Status, Step};

/// The origin the MCP Inspector's browser pages run on; browser-based clients send their own.
pub const INSPECTOR_ORIGIN: &str = "http://localhost:6274";

/// The protocol revision the doctor announces in `initialize` and metadata requests.
pub const PROTOCOL_REVISION: &str = "2025-11-25";

/// The stateless revision (no `initialize`; per-request `_meta`).
pub const STATELESS_REVISION: &str = "2026-07-28";

/// Which form the unauthenticated `POST` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostForm {
    /// `initialize`, as clients of revisions 2025-03-26 to 2025-11-25 start.
    Initialize,
    /// `server/discover` with `_meta` and the `MCP-Protocol-Version`/`Mcp-Method` headers,
    /// as 2026-07-28 clients send (MCP 2026-07-28 basic §`_meta`, transports §Request Metadata).
    Stateless,
}

/// What the discovery steps learned, for the steps after them.
#[derive(Debug, Clone)]
pub struct ResourceMetadata {
    /// The URL the document was read from.
    pub url: String,
    /// `resource`.
    pub resource: String,
    /// `authorization_servers`.
    pub authorization_servers: Vec<String>,
}

/// The authorization-server metadata document found, and where.
#[derive(Debug, Clone)]
pub struct ServerMetadata {
    /// The URL that answered.
    pub url: String,
    /// The document.
    pub document: Value,
}

impl ServerMetadata {
    /// A string member of the document.
    pub fn str(&self, name: &str) -> Option<&str> {
        self.document.get(name).and_then(Value::as_str)
    }

    fn list_contains(&self, name: &str, value: &str) -> Option<bool> {
        self.document
            .get(name)
            .and_then(Value::as_array)
            .map(|a| a.iter().any(|v| v.as_str() == Some(value)))
    }
}

/// A client the doctor registered.
#[derive(Debug, Clone)]
pub struct Registration {
    /// Which well-known client it imitates.
    pub profile: &'static ClientProfile,
    /// The `client_id` issued.
    pub client_id: String,
    /// The `client_secret` issued, if any.
    pub client_secret: Option<String>,
}

/// Checks the given MCP URL itself: absolute `http`/`https`, a host, no fragment
/// (MCP 2025-06-18 §Canonical Server URI).
pub fn given_url(given: &str) -> Result<Url, Box<Step>> {
    let fail = |got: &str| {
        Box::new(Step::fail(
            "url",
            given.to_string(),
            got.to_string(),
            "an absolute http or https URL with a host and no fragment",
            "Give the MCP endpoint's full URL, e.g. https://mcp.example.com/mcp.",
        ))
    };
    let url = Url::parse(given).map_err(|e| fail(&format!("not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(fail("not an http or https URL with a host"));
    }
    if url.fragment().is_some() {
        return Err(fail("has a fragment"));
    }
    Ok(url)
}

/// The unauthenticated `POST` every client starts with: it must answer `401` with a
/// `WWW-Authenticate: Bearer` challenge carrying `resource_metadata` (RFC 9728 §5.1, MCP
/// 2025-06-18 §Authorization Server Location) and `scope` (RFC 6750 §3; MCP 2025-11-25 §Scope
/// Selection Strategy); never a redirect or an HTML page.
pub async fn unauthenticated_post(
    probe: &Probe,
    url: &Url,
    form: PostForm,
) -> (Step, Option<BearerChallenge>) {
    let check = match form {
        PostForm::Initialize => "challenge",
        PostForm::Stateless => "challenge-2026",
    };
    let (body, what) = match form {
        PostForm::Initialize => (
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": PROTOCOL_REVISION, "capabilities": {},
                "clientInfo": {"name": "gatehouse-doctor", "version": env!("CARGO_PKG_VERSION")}}}),
            format!("initialize, {PROTOCOL_REVISION}"),
        ),
        PostForm::Stateless => (
            json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": STATELESS_REVISION,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "gatehouse-doctor", "version": env!("CARGO_PKG_VERSION")}}}}),
            format!("server/discover, {STATELESS_REVISION}"),
        ),
    };
    let request = format!("POST {url} ({what}) without credentials");
    let mut builder = probe
        .client()
        .post(url.clone())
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(body.to_string());
    if form == PostForm::Stateless {
        builder = builder
            .header("mcp-protocol-version", STATELESS_REVISION)
            .header("mcp-method", "server/discover");
    }
    let expected = "401 with WWW-Authenticate: Bearer resource_metadata=\"…\", scope=\"…\"";
    let fetched = match probe.send(builder).await {
        Ok(f) => f,
        Err(e) => {
            return (
                Step::fail(
                    check,
                    request,
                    e,
                    expected,
                    "Start the server, or check that this host and port are reachable from here (DNS, firewall, TLS certificate).",
                ),
                None,
            );
        }
    };
    let fail =
        |got: String, fix: &str| (Step::fail(check, request.clone(), got, expected, fix), None);
    if fetched.is_redirect() {
        let location = fetched.header("location").unwrap_or("");
        let fix = if url.scheme() == "https" && location.starts_with("http://") {
            "The server redirects https to http because TLS is terminated in front of it: set MCP_SERVER_URL to the https URL (other servers may need X-Forwarded-Proto: https from the proxy)."
        } else {
            "Clients do not follow redirects on the MCP URL: give them the final URL and set MCP_SERVER_URL to exactly it."
        };
        return fail(fetched.summary(), fix);
    }
    if fetched.media_type() == "text/html" {
        return fail(
            fetched.summary(),
            "The MCP URL must answer clients itself, not with an HTML (sign-in) page: do not put the MCP route behind a single-sign-on proxy.",
        );
    }
    match fetched.status {
        401 => {}
        200..=299 => {
            return fail(
                format!("{} without credentials", fetched.status),
                "The endpoint answers without credentials, so no client starts OAuth: turn OAuth on (GATEHOUSE_OAUTH=on) or put the endpoint behind the bearer check.",
            );
        }
        404 => {
            return fail(
                fetched.summary(),
                "Nothing answers at this path: check the URL, and that a proxy forwards the path unchanged (MCP_SERVER_URL's path is where Gatehouse mounts its MCP route).",
            );
        }
        405 => {
            return fail(
                fetched.summary(),
                "This URL does not accept POST: it is not a Streamable HTTP MCP endpoint, or a proxy routes POST elsewhere.",
            );
        }
        403 => {
            return fail(
                format!("403 {}", fetched.excerpt()),
                "Refused before authentication (Origin or Host check): behind a proxy pass the original Host header, or set MCP_SERVER_URL to the public URL.",
            );
        }
        _ => {
            return fail(
                format!("{} {}", fetched.status, fetched.excerpt()),
                "The endpoint must answer an unauthenticated request with 401 and a Bearer challenge.",
            );
        }
    }
    let Some(value) = fetched.header("www-authenticate") else {
        return fail(
            "401 without WWW-Authenticate".into(),
            "Pass the WWW-Authenticate header through the proxy unchanged (and expose it to browsers via Access-Control-Expose-Headers): clients find the metadata from it.",
        );
    };
    let got = format!("401 WWW-Authenticate: {value}");
    let challenge = match parse_bearer(value) {
        Ok(c) => c,
        Err(e) => {
            return fail(
                format!("{got} ({e})"),
                "Send a well-formed challenge: Bearer resource_metadata=\"<metadata URL>\", scope=\"<scopes>\" (RFC 6750 §3).",
            );
        }
    };
    let Some(metadata) = challenge.resource_metadata.clone() else {
        return fail(
            got,
            "Add resource_metadata=\"<protected-resource metadata URL>\" to the challenge (RFC 9728 §5.1).",
        );
    };
    if Url::parse(&metadata).is_err() {
        return fail(
            format!("{got} (resource_metadata is not an absolute URL)"),
            "resource_metadata must be an absolute URL (RFC 9728 §5.1).",
        );
    }
    if challenge.scope.is_none() {
        return fail(
            got,
            "Add scope=\"…\" to the challenge: clients ask for exactly the scopes it names (RFC 6750 §3; MCP 2025-11-25 §Scope Selection Strategy).",
        );
    }
    (Step::pass(check, request, got, expected), Some(challenge))
}

/// The well-known protected-resource metadata URLs clients try for `url`: path-suffixed
/// first, then the root (RFC 9728 §3.1; MCP 2025-11-25 §Protected Resource Metadata Discovery).
pub fn resource_metadata_urls(url: &Url) -> (String, String) {
    let origin = url.origin().ascii_serialization();
    let path = url.path().trim_end_matches('/');
    (
        format!("{origin}/.well-known/oauth-protected-resource{path}"),
        format!("{origin}/.well-known/oauth-protected-resource"),
    )
}

/// Reads protected-resource metadata at `metadata_url`: `200` JSON, `resource` identical to
/// the URL the client was given (RFC 9728 §3.3) and `authorization_servers` present (MCP
/// 2025-06-18 §Authorization Server Location).
pub async fn protected_resource_metadata(
    probe: &Probe,
    check: &'static str,
    metadata_url: &str,
    given: &str,
) -> (Step, Option<ResourceMetadata>) {
    let request = format!("GET {metadata_url}");
    let expected = format!("200 JSON with resource \"{given}\" and authorization_servers");
    let builder = probe
        .client()
        .get(metadata_url)
        .header("accept", "application/json")
        .header("mcp-protocol-version", PROTOCOL_REVISION);
    let fail = |got: String, fix: String| {
        (
            Step::fail(check, request.clone(), got, expected.clone(), fix),
            None,
        )
    };
    let fetched = match probe.send(builder).await {
        Ok(f) => f,
        Err(e) => return fail(e, "Make the metadata URL reachable from clients.".into()),
    };
    if fetched.status != 200 {
        let fix = if fetched.is_redirect() {
            "Serve the document at this URL without a redirect.".to_string()
        } else {
            format!(
                "Serve the protected-resource metadata at {metadata_url}: a proxy must forward /.well-known/ paths to the server unchanged."
            )
        };
        return fail(fetched.summary(), fix);
    }
    let doc = match json_object(&fetched) {
        Ok(doc) => doc,
        Err(got) => {
            return fail(
                got,
                "Answer with the JSON document (Content-Type: application/json), not a page."
                    .into(),
            );
        }
    };
    let resource = doc.get("resource").and_then(Value::as_str).unwrap_or("");
    let servers: Vec<String> = doc
        .get("authorization_servers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let got = format!(
        "200 resource \"{resource}\", authorization_servers {}",
        serde_json::to_string(&servers).unwrap_or_default()
    );
    if resource != given {
        let fix = if resource.trim_end_matches('/') == given.trim_end_matches('/') {
            format!(
                "resource differs from the URL by a trailing slash: give clients exactly \"{resource}\" or set MCP_SERVER_URL to \"{given}\" (RFC 9728 §3.3 compares them byte for byte)."
            )
        } else {
            format!(
                "Set MCP_SERVER_URL to exactly the URL clients are given ({given}): behind a proxy that is the public URL, not the listen address (RFC 9728 §3.3)."
            )
        };
        return fail(got, fix);
    }
    if servers.is_empty() {
        return fail(
            got,
            "List the issuer in authorization_servers (MCP requires at least one).".into(),
        );
    }
    let found = ResourceMetadata {
        url: metadata_url.to_string(),
        resource: resource.to_string(),
        authorization_servers: servers,
    };
    (Step::pass(check, request, got, expected), Some(found))
}

/// The metadata URLs clients try for `issuer`, in their order (MCP 2025-11-25 §Authorization
/// Server Metadata Discovery): RFC 8414 §3.1 path insertion, then OpenID Connect Discovery 1.0
/// §4 with the well-known segment inserted, then appended; for an issuer without a path, RFC
/// 8414 then OpenID Connect.
pub fn server_metadata_urls(issuer: &Url) -> Vec<String> {
    let origin = issuer.origin().ascii_serialization();
    let path = issuer.path().trim_end_matches('/');
    if path.is_empty() {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ]
    }
}

/// Finds the authorization-server metadata of `issuer` at the first URL of
/// [`server_metadata_urls`] answering `200` with a JSON object, as clients do.
pub async fn server_metadata(probe: &Probe, issuer: &str) -> (Step, Option<ServerMetadata>) {
    let check = "as-metadata";
    let expected = "200 JSON at one of the RFC 8414 / OpenID Connect discovery URLs";
    let Ok(issuer_url) = Url::parse(issuer) else {
        return (
            Step::fail(
                check,
                format!("issuer \"{issuer}\""),
                "not an absolute URL".into(),
                expected,
                "authorization_servers must hold absolute issuer URLs.",
            ),
            None,
        );
    };
    let urls = server_metadata_urls(&issuer_url);
    let mut tried = Vec::new();
    for u in &urls {
        let builder = probe
            .client()
            .get(u)
            .header("accept", "application/json")
            .header("mcp-protocol-version", PROTOCOL_REVISION);
        match probe.send(builder).await {
            Ok(f) if f.status == 200 => match json_object(&f) {
                Ok(document) => {
                    tried.push(format!("{u} → 200"));
                    return (
                        Step::pass(
                            check,
                            format!("GET {}", urls.join(", then ")),
                            tried.join("; "),
                            expected,
                        ),
                        Some(ServerMetadata {
                            url: u.clone(),
                            document,
                        }),
                    );
                }
                Err(got) => tried.push(format!("{u} → {got}")),
            },
            Ok(f) => tried.push(format!("{u} → {}", f.summary())),
            Err(e) => tried.push(format!("{u} → {e}")),
        }
    }
    (
        Step::fail(
            check,
            format!("GET {}", urls.join(", then ")),
            tried.join("; "),
            expected,
            format!(
                "Serve RFC 8414 metadata at {}: a proxy must forward /.well-known/ paths to the authorization server.",
                urls[0]
            ),
        ),
        None,
    )
}

/// The members of the metadata clients rely on: `issuer` byte-identical to the issuer
/// (RFC 8414 §3.3; MCP 2026-07-28 clients reject a mismatch), `response_types_supported` with
/// `code`, `code_challenge_methods_supported` with `S256` (MCP 2025-11-25 §Authorization Code
/// Protection), a `registration_endpoint` (RFC 7591) or `client_id_metadata_document_supported`
/// (MCP 2025-11-25 §Client Registration), and `none` among `token_endpoint_auth_methods_supported`
/// (RFC 8414 §2: absent means `client_secret_basic` only).
pub fn server_metadata_members(issuer: &str, meta: &ServerMetadata) -> Vec<Step> {
    let request = format!("GET {}", meta.url);
    let mut steps = Vec::new();
    let doc_issuer = meta.str("issuer").unwrap_or("");
    let got = format!("issuer \"{doc_issuer}\"");
    let expected = format!("issuer \"{issuer}\" (as named in authorization_servers)");
    steps.push(if doc_issuer == issuer {
        Step::pass("issuer", request.clone(), got, expected)
    } else if doc_issuer.trim_end_matches('/') == issuer.trim_end_matches('/') {
        Step::fail(
            "issuer",
            request.clone(),
            got,
            expected,
            "The issuer differs by a trailing slash: write it the same way in the metadata and in authorization_servers (RFC 8414 §3.3 compares byte for byte; Gatehouse: GATEHOUSE_ISSUER without a trailing slash).",
        )
    } else {
        Step::fail(
            "issuer",
            request.clone(),
            got,
            expected,
            "Make authorization_servers name the issuer exactly as the metadata states it (RFC 8414 §3.3): set GATEHOUSE_ISSUER (or MCP_SERVER_URL) to the public URL.",
        )
    });
    let member = |name: &str| {
        meta.document
            .get(name)
            .map(|v| v.to_string())
            .unwrap_or_else(|| "absent".into())
    };
    steps.push(
        match meta.list_contains("response_types_supported", "code") {
            Some(true) => Step::pass(
                "response-type-code",
                request.clone(),
                format!(
                    "response_types_supported {}",
                    member("response_types_supported")
                ),
                "\"code\" listed",
            ),
            _ => Step::fail(
                "response-type-code",
                request.clone(),
                format!(
                    "response_types_supported {}",
                    member("response_types_supported")
                ),
                "\"code\" listed",
                "Support and advertise the authorization-code flow (RFC 8414 §2).",
            ),
        },
    );
    steps.push(match meta.list_contains("code_challenge_methods_supported", "S256") {
        Some(true) => Step::pass(
            "pkce-s256",
            request.clone(),
            format!(
                "code_challenge_methods_supported {}",
                member("code_challenge_methods_supported")
            ),
            "\"S256\" listed",
        ),
        _ => Step::fail(
            "pkce-s256",
            request.clone(),
            format!(
                "code_challenge_methods_supported {}",
                member("code_challenge_methods_supported")
            ),
            "\"S256\" listed",
            "Advertise code_challenge_methods_supported [\"S256\"]: clients refuse a server that does not (MCP 2025-11-25 §Authorization Code Protection).",
        ),
    });
    let registration = meta.str("registration_endpoint");
    let cimd = meta
        .document
        .get("client_id_metadata_document_supported")
        .and_then(Value::as_bool)
        == Some(true);
    let got = format!(
        "registration_endpoint {}, client_id_metadata_document_supported {}",
        member("registration_endpoint"),
        member("client_id_metadata_document_supported")
    );
    steps.push(if registration.is_some() || cimd {
        Step::pass(
            "registration-or-cimd",
            request.clone(),
            got,
            "a registration endpoint or client ID metadata documents",
        )
    } else {
        Step::fail(
            "registration-or-cimd",
            request.clone(),
            got,
            "a registration endpoint or client ID metadata documents",
            "Offer dynamic registration (RFC 7591) or client ID metadata documents: clients without a preconfigured client ID cannot register otherwise.",
        )
    });
    let got = format!(
        "token_endpoint_auth_methods_supported {}",
        member("token_endpoint_auth_methods_supported")
    );
    steps.push(
        match meta.list_contains("token_endpoint_auth_methods_supported", "none") {
            Some(true) => Step::pass("auth-method-none", request.clone(), got, "\"none\" listed"),
            _ => Step::fail(
                "auth-method-none",
                request,
                got,
                "\"none\" listed",
                "Accept public clients at the token endpoint and list \"none\" (absent, RFC 8414 §2 means client_secret_basic only).",
            ),
        },
    );
    steps
}

/// A CORS preflight as a browser-based client (the MCP Inspector, origin
/// [`INSPECTOR_ORIGIN`]) sends it before calling `url` (Fetch standard §CORS-preflight request;
/// MCP authorization: browser-based clients).
pub async fn cors_preflight(
    probe: &Probe,
    check: &'static str,
    url: &str,
    method: &str,
    headers: &[&str],
) -> Step {
    let request = format!(
        "OPTIONS {url} (Origin {INSPECTOR_ORIGIN}, {method}, headers {})",
        headers.join(", ")
    );
    let expected = format!(
        "2xx with Access-Control-Allow-Origin * or {INSPECTOR_ORIGIN}, allowing {method} and {}",
        headers.join(", ")
    );
    let builder = probe
        .client()
        .request(Method::OPTIONS, url)
        .header("origin", INSPECTOR_ORIGIN)
        .header("access-control-request-method", method)
        .header("access-control-request-headers", headers.join(","));
    let fix = format!(
        "Answer CORS preflights on {url} from any origin without credentials (Access-Control-Allow-Origin: *, the method and headers); a proxy must pass OPTIONS through unauthenticated."
    );
    let fetched = match probe.send(builder).await {
        Ok(f) => f,
        Err(e) => return Step::fail(check, request, e, expected, &fix),
    };
    let origin = fetched.header("access-control-allow-origin").unwrap_or("");
    let methods = fetched
        .header("access-control-allow-methods")
        .unwrap_or("")
        .to_ascii_lowercase();
    let allowed = fetched
        .header("access-control-allow-headers")
        .unwrap_or("")
        .to_ascii_lowercase();
    let got = format!(
        "{} Access-Control-Allow-Origin \"{origin}\", -Methods \"{methods}\", -Headers \"{allowed}\"",
        fetched.status
    );
    let list = |s: &str| {
        s.split(',')
            .map(|p| p.trim().to_string())
            .collect::<Vec<_>>()
    };
    let method_ok = methods.is_empty() && matches!(method, "GET" | "POST" | "HEAD")
        || list(&methods)
            .iter()
            .any(|m| m == "*" || m.eq_ignore_ascii_case(method));
    let headers_ok = headers.iter().all(|h| {
        list(&allowed)
            .iter()
            .any(|a| a == "*" || a.eq_ignore_ascii_case(h))
    });
    let ok = (200..300).contains(&fetched.status)
        && (origin == "*" || origin == INSPECTOR_ORIGIN)
        && method_ok
        && headers_ok;
    if ok {
        Step::pass(check, request, got, expected)
    } else {
        Step::fail(check, request, got, expected, &fix)
    }
}

/// Dynamic client registration (RFC 7591 §3) with the metadata a well-known client sends:
/// `201` (or `200`) JSON with a `client_id`, a `client_secret` when a secret-based method was
/// granted, and the redirect URIs kept.
pub async fn register(
    probe: &Probe,
    endpoint: &str,
    profile: &'static ClientProfile,
) -> (Step, Option<Registration>) {
    let check = profile.register_check;
    let body = profile.registration_body();
    let request = format!("POST {endpoint} {body}");
    let expected = "201 JSON with client_id (and client_secret for a secret-based method)";
    let builder = probe
        .client()
        .post(endpoint)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body(body.to_string());
    let fail =
        |got: String, fix: String| (Step::fail(check, request.clone(), got, expected, fix), None);
    let fetched = match probe.send(builder).await {
        Ok(f) => f,
        Err(e) => {
            return fail(
                e,
                "Make the registration endpoint reachable from clients.".into(),
            );
        }
    };
    if fetched.status == 429 {
        return fail(
            format!(
                "429 (Retry-After {})",
                fetched.header("retry-after").unwrap_or("absent")
            ),
            "Registrations are limited per source address: wait for Retry-After, or raise the limit (Gatehouse: GATEHOUSE_REGISTRATIONS_PER_HOUR, default 20; the doctor registers 4 clients per run).".into(),
        );
    }
    if !(200..300).contains(&fetched.status) {
        let detail = json_object(&fetched)
            .ok()
            .map(|d| {
                format!(
                    "{} {}",
                    d.get("error").and_then(Value::as_str).unwrap_or(""),
                    d.get("error_description")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                )
            })
            .unwrap_or_else(|| fetched.excerpt());
        return fail(
            format!("{} {}", fetched.summary(), detail.trim()),
            format!(
                "Accept the registration {} sends (redirect URIs {}, token_endpoint_auth_method {}): it cannot connect otherwise.",
                profile.name,
                profile.redirect_uris.join(" "),
                profile.auth_method
            ),
        );
    }
    let doc = match json_object(&fetched) {
        Ok(d) => d,
        Err(got) => {
            return fail(
                got,
                "Answer a registration with its JSON (RFC 7591 §3.2.1).".into(),
            );
        }
    };
    let Some(client_id) = doc.get("client_id").and_then(Value::as_str) else {
        return fail(
            format!("{} without client_id", fetched.status),
            "Return client_id in the registration response (RFC 7591 §3.2.1).".into(),
        );
    };
    let method = doc
        .get("token_endpoint_auth_method")
        .and_then(Value::as_str)
        .unwrap_or(profile.auth_method);
    let secret = doc
        .get("client_secret")
        .and_then(Value::as_str)
        .map(String::from);
    let got = format!(
        "{} client_id \"{client_id}\", token_endpoint_auth_method \"{method}\"{}",
        fetched.status,
        if secret.is_some() {
            ", client_secret issued"
        } else {
            ""
        }
    );
    if method.starts_with("client_secret") && secret.is_none() {
        return fail(
            got,
            "A client registered with a secret-based method needs its client_secret in the response (RFC 7591 §3.2.1).".into(),
        );
    }
    if let Some(uris) = doc.get("redirect_uris").and_then(Value::as_array) {
        let kept: Vec<&str> = uris.iter().filter_map(Value::as_str).collect();
        if let Some(lost) = profile.redirect_uris.iter().find(|u| !kept.contains(u)) {
            return fail(
                format!("{got}, redirect_uris {kept:?}"),
                format!("Keep every requested redirect URI ({lost} was dropped)."),
            );
        }
    }
    let registration = Registration {
        profile,
        client_id: client_id.to_string(),
        client_secret: secret,
    };
    (
        Step::pass(check, request, got, expected),
        Some(registration),
    )
}

/// The authorization request a client opens in the browser (OAuth 2.1 §4.1.1, PKCE S256 per
/// RFC 7636, `resource` per RFC 8707): the endpoint must answer with a page (sign-in or
/// consent, possibly after redirects on the server's side), never an error and never an
/// immediate redirect back to the client.
pub async fn authorize(
    probe: &Probe,
    endpoint: &str,
    registration: &Registration,
    resource: &str,
    scope: Option<&str>,
) -> Step {
    let check = registration.profile.authorize_check;
    let redirect_uri = registration.profile.redirect_uris[0];
    let verifier = crate::domain::secret::random_urlsafe(32);
    let challenge = crate::domain::pkce::s256_challenge(&verifier);
    let expected = "a page (200 HTML), reached directly or through redirects on the server";
    let Ok(mut url) = Url::parse(endpoint) else {
        return Step::fail(
            check,
            format!("GET {endpoint}"),
            "not an absolute URL".into(),
            expected,
            "authorization_endpoint must be an absolute URL.",
        );
    };
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("response_type", "code")
            .append_pair("client_id", &registration.client_id)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("state", &crate::domain::secret::random_urlsafe(16))
            .append_pair("resource", resource);
        if let Some(scope) = scope {
            q.append_pair("scope", scope);
        }
    }
    let request = format!("GET {url}");
    let fix = format!(
        "The authorization endpoint must show a page for a client registered like {} (PKCE S256, resource {resource}).",
        registration.profile.name
    );
    let mut current = url;
    let mut trail = Vec::new();
    for _ in 0..5 {
        let fetched = match probe.send(probe.client().get(current.clone())).await {
            Ok(f) => f,
            Err(e) => {
                trail.push(e);
                return Step::fail(check, request, trail.join(" → "), expected, &fix);
            }
        };
        if fetched.is_redirect() {
            let location = fetched.header("location").unwrap_or("");
            let Ok(next) = current.join(location) else {
                trail.push(format!("{} to an unreadable Location", fetched.status));
                return Step::fail(check, request, trail.join(" → "), expected, &fix);
            };
            trail.push(format!("{} {}", fetched.status, short(&next)));
            if next.as_str().starts_with(redirect_uri) {
                let error: Vec<String> = next
                    .query_pairs()
                    .filter(|(k, _)| k == "error" || k == "error_description")
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                return Step::fail(
                    check,
                    request,
                    format!(
                        "{} (back to the client: {})",
                        trail.join(" → "),
                        error.join(" ")
                    ),
                    expected,
                    &fix,
                );
            }
            current = next;
            continue;
        }
        trail.push(fetched.summary());
        if fetched.status == 200 && fetched.media_type() == "text/html" {
            return Step::pass(check, request, trail.join(" → "), expected);
        }
        trail.push(fetched.excerpt());
        return Step::fail(check, request, trail.join(" → "), expected, &fix);
    }
    trail.push("(more than 5 redirects)".into());
    Step::fail(check, request, trail.join(" → "), expected, &fix)
}

/// `GET /.well-known/openai-apps-challenge` on the MCP URL's origin: ChatGPT Apps' domain
/// verification reads the token there as text.
pub async fn openai_apps_challenge(probe: &Probe, url: &Url) -> Step {
    let target = format!(
        "{}/.well-known/openai-apps-challenge",
        url.origin().ascii_serialization()
    );
    let request = format!("GET {target}");
    let expected = "200 text/plain with the verification token";
    let fix = "Set OPENAI_APPS_CHALLENGE to the token ChatGPT gives you, and let a proxy forward /.well-known/ to the server.";
    match probe.send(probe.client().get(&target)).await {
        Ok(f) if f.status == 200 && !f.body.trim().is_empty() && f.media_type() == "text/plain" => {
            Step::pass(
                "openai-challenge",
                request,
                format!("200 \"{}\"", f.excerpt()),
                expected,
            )
        }
        Ok(f) => Step::fail(
            "openai-challenge",
            request,
            format!("{} {}", f.summary(), f.excerpt()),
            expected,
            fix,
        ),
        Err(e) => Step::fail("openai-challenge", request, e, expected, fix),
    }
}

/// Every URL the documents name is `https` when the given URL is (OAuth 2.1 §1.5), and on the
/// given URL's host and port unless the documents say otherwise: the protected-resource side
/// (`resource_metadata`, `resource`) on the MCP URL's origin, the authorization server's
/// endpoints on the issuer's origin (which `authorization_servers` may place elsewhere).
pub fn url_rules(
    given: &Url,
    resource_side: &[(String, String)],
    issuer: Option<&str>,
    server_side: &[(String, String)],
) -> Vec<Step> {
    let all: Vec<&(String, String)> = resource_side.iter().chain(server_side).collect();
    let request = "the URLs named by the challenge and the metadata".to_string();
    let https = if given.scheme() == "https" {
        let plain: Vec<String> = all
            .iter()
            .filter(|(_, u)| !u.starts_with("https://"))
            .map(|(name, u)| format!("{name} {u}"))
            .collect();
        if plain.is_empty() {
            Step::pass(
                "https",
                request.clone(),
                format!("{} URLs, all https", all.len()),
                "every URL https",
            )
        } else {
            Step::fail(
                "https",
                request.clone(),
                plain.join(", "),
                "every URL https",
                "TLS is terminated in front of the server and it names http URLs: set MCP_SERVER_URL (and GATEHOUSE_ISSUER) to the https URL.",
            )
        }
    } else {
        Step::pass(
            "https",
            request.clone(),
            "the given URL is http: nothing to compare".into(),
            "every URL https when the given URL is",
        )
    };
    let given_authority = authority(given.as_str());
    let issuer_authority = issuer.and_then(authority);
    let mut stray = Vec::new();
    for (name, u) in resource_side {
        if authority(u) != given_authority {
            stray.push(format!("{name} {u}"));
        }
    }
    for (name, u) in server_side {
        let a = authority(u);
        if a != given_authority && a != issuer_authority {
            stray.push(format!("{name} {u}"));
        }
    }
    let expected = "resource URLs on the MCP URL's host, server endpoints on the issuer's host";
    let hosts = if stray.is_empty() {
        Step::pass(
            "same-host",
            request,
            format!("{} URLs on the expected hosts", all.len()),
            expected,
        )
    } else {
        Step::fail(
            "same-host",
            request,
            stray.join(", "),
            expected,
            "The documents name another host or port than clients use: set MCP_SERVER_URL (and GATEHOUSE_ISSUER) to the public URL, and have the proxy pass the original Host.",
        )
    };
    vec![https, hosts]
}

fn authority(u: &str) -> Option<(String, String, Option<u16>)> {
    let url = Url::parse(u).ok()?;
    Some((
        url.scheme().to_string(),
        url.host_str()?.to_ascii_lowercase(),
        url.port_or_known_default(),
    ))
}

fn short(url: &Url) -> String {
    let s = url.as_str();
    if s.chars().count() > 80 {
        format!("{}…", s.chars().take(80).collect::<String>())
    } else {
        s.to_string()
    }
}

/// The body as a JSON object, or a description of what it is instead.
pub fn json_object(fetched: &Fetched) -> Result<Value, String> {
    match serde_json::from_str::<Value>(&fetched.body) {
        Ok(v) if v.is_object() => Ok(v),
        Ok(_) => Err(format!("{} JSON that is not an object", fetched.status)),
        Err(_) => Err(format!(
            "{} not JSON ({}): {}",
            fetched.status,
            if fetched.media_type().is_empty() {
                "no Content-Type".to_string()
            } else {
                fetched.media_type()
            },
            fetched.excerpt()
        )),
    }
}

impl Step {
    /// A passed step.
    pub fn pass(check: &str, request: String, got: String, expected: impl Into<String>) -> Step {
        Step {
            check: check.to_string(),
            status: Status::Pass,
            request,
            got,
            expected: expected.into(),
            fix: None,
        }
    }

    /// A failed step with its fix in one sentence.
    pub fn fail(
        check: &str,
        request: String,
        got: String,
        expected: impl Into<String>,
        fix: impl Into<String>,
    ) -> Step {
        Step {
            check: check.to_string(),
            status: Status::Fail,
            request,
            got,
            expected: expected.into(),
            fix: Some(fix.into()),
        }
    }

    /// A step that could not run because an earlier one failed.
    pub fn skip(check: &str, why: &str) -> Step {
        Step {
            check: check.to_string(),
            status: Status::Skip,
            request: String::new(),
            got: why.to_string(),
            expected: String::new(),
            fix: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_urls_follow_the_clients_order() {
        let (suffixed, root) =
            resource_metadata_urls(&Url::parse("https://h.example/tenant/mcp").unwrap());
        assert_eq!(
            suffixed,
            "https://h.example/.well-known/oauth-protected-resource/tenant/mcp"
        );
        assert_eq!(
            root,
            "https://h.example/.well-known/oauth-protected-resource"
        );
        assert_eq!(
            server_metadata_urls(&Url::parse("https://a.example/tenant1").unwrap()),
            vec![
                "https://a.example/.well-known/oauth-authorization-server/tenant1",
                "https://a.example/.well-known/openid-configuration/tenant1",
                "https://a.example/tenant1/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            server_metadata_urls(&Url::parse("https://a.example/").unwrap()),
            vec![
                "https://a.example/.well-known/oauth-authorization-server",
                "https://a.example/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn url_rules_name_http_urls_and_foreign_hosts() {
        let given = Url::parse("https://mcp.example/mcp").unwrap();
        let steps = url_rules(
            &given,
            &[("resource".into(), "https://mcp.example/mcp".into())],
            Some("https://auth.example"),
            &[
                ("token_endpoint".into(), "http://auth.example/token".into()),
                ("jwks_uri".into(), "https://elsewhere.example/jwks".into()),
            ],
        );
        assert_eq!(steps[0].status, Status::Fail);
        assert!(
            steps[0]
                .got
                .contains("token_endpoint http://auth.example/token")
        );
        assert_eq!(steps[1].status, Status::Fail);
        assert!(steps[1].got.contains("jwks_uri"));
        assert!(
            steps[1].got.contains("token_endpoint"),
            "http ≠ https origin"
        );
    }
}
