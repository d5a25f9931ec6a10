//! The resource server's side: the unauthenticated `POST` and its challenge, then the
//! protected-resource metadata (RFC 9728).

use serde_json::{Value, json};
use url::Url;

use super::{PROTOCOL_REVISION, PostForm, ResourceMetadata, STATELESS_REVISION, json_object};
use crate::doctor::Step;
use crate::doctor::challenge::{BearerChallenge, parse_bearer};
use crate::doctor::http::{Fetched, Probe};

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
    let (request, builder) = unauthenticated_request(probe, url, form);
    let expected = "401 with WWW-Authenticate: Bearer resource_metadata=\"…\", scope=\"…\"";
    let fetched = match probe.send(builder).await {
        Ok(f) => f,
        Err(e) => {
            let fix = unreached_fix(probe, url, &e).await;
            return (Step::fail(check, request, e, expected, fix), None);
        }
    };
    let fail =
        |got: String, fix: &str| (Step::fail(check, request.clone(), got, expected, fix), None);
    if let Some((got, fix)) = not_a_challenge(url, &fetched) {
        return fail(got, fix);
    }
    match read_challenge(&fetched) {
        Ok((got, challenge)) => (Step::pass(check, request, got, expected), Some(challenge)),
        Err((got, fix)) => fail(got, fix),
    }
}

/// The `POST` of `form` to `url` without credentials, as a client sends it (`initialize`, or
/// `server/discover` with the stateless revision's headers): its description for the report
/// and the request.
fn unauthenticated_request(
    probe: &Probe,
    url: &Url,
    form: PostForm,
) -> (String, reqwest::RequestBuilder) {
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
    (request, builder)
}

/// What is wrong with an answer that is not a `401` (a redirect, an HTML page, a `2xx`,
/// `404`, `405`, `403` or another status): what came back and the fix; `None` for a `401`.
fn not_a_challenge(url: &Url, fetched: &Fetched) -> Option<(String, &'static str)> {
    if fetched.is_redirect() {
        let location = fetched.header("location").unwrap_or("");
        let fix = if url.scheme() == "https" && location.starts_with("http://") {
            "The server redirects https to http because TLS is terminated in front of it: set MCP_SERVER_URL to the https URL (other servers may need X-Forwarded-Proto: https from the proxy)."
        } else {
            "Clients do not follow redirects on the MCP URL: give them the final URL and set MCP_SERVER_URL to exactly it."
        };
        return Some((fetched.summary(), fix));
    }
    // A 404 is "nothing here" whatever its body (servers answer it with an HTML page too).
    if fetched.media_type() == "text/html" && fetched.status != 404 {
        return Some((
            fetched.summary(),
            "The MCP URL must answer clients itself, not with an HTML (sign-in) page: do not put the MCP route behind a single-sign-on proxy.",
        ));
    }
    match fetched.status {
        401 => None,
        200..=299 => Some((
            format!("{} without credentials", fetched.status),
            "The endpoint answers without credentials, so no client starts OAuth: turn OAuth on (GATEHOUSE_OAUTH=on) or put the endpoint behind the bearer check.",
        )),
        404 => Some((
            fetched.summary(),
            "Nothing answers at this path: check the URL, and that a proxy forwards the path unchanged (MCP_SERVER_URL's path is where Gatehouse mounts its MCP route).",
        )),
        405 => Some((
            fetched.summary(),
            "This URL does not accept POST: it is not a Streamable HTTP MCP endpoint, or a proxy routes POST elsewhere.",
        )),
        403 => Some((
            format!("403 {}", fetched.excerpt()),
            "Refused before authentication (Origin or Host check): behind a proxy pass the original Host header, or set MCP_SERVER_URL to the public URL.",
        )),
        _ => Some((
            format!("{} {}", fetched.status, fetched.excerpt()),
            "The endpoint must answer an unauthenticated request with 401 and a Bearer challenge.",
        )),
    }
}

/// The `Bearer` challenge of a `401` answer: what came back and the challenge, when it is
/// well formed and carries an absolute `resource_metadata` URL and a `scope`; otherwise what
/// came back and the fix.
fn read_challenge(fetched: &Fetched) -> Result<(String, BearerChallenge), (String, &'static str)> {
    let Some(value) = fetched.header("www-authenticate") else {
        return Err((
            "401 without WWW-Authenticate".into(),
            "Pass the WWW-Authenticate header through the proxy unchanged (and expose it to browsers via Access-Control-Expose-Headers): clients find the metadata from it.",
        ));
    };
    let got = format!("401 WWW-Authenticate: {value}");
    let challenge = match parse_bearer(value) {
        Ok(c) => c,
        Err(e) => {
            return Err((
                format!("{got} ({e})"),
                "Send a well-formed challenge: Bearer resource_metadata=\"<metadata URL>\", scope=\"<scopes>\" (RFC 6750 §3).",
            ));
        }
    };
    let Some(metadata) = challenge.resource_metadata.clone() else {
        return Err((
            got,
            "Add resource_metadata=\"<protected-resource metadata URL>\" to the challenge (RFC 9728 §5.1).",
        ));
    };
    if Url::parse(&metadata).is_err() {
        return Err((
            format!("{got} (resource_metadata is not an absolute URL)"),
            "resource_metadata must be an absolute URL (RFC 9728 §5.1).",
        ));
    }
    if challenge.scope.is_none() {
        return Err((
            got,
            "Add scope=\"…\" to the challenge: clients ask for exactly the scopes it names (RFC 6750 §3; MCP 2025-11-25 §Scope Selection Strategy).",
        ));
    }
    Ok((got, challenge))
}

/// The advice when the MCP URL gave no HTTP answer (`error` is [`Probe::send`]'s sentence):
/// TLS spoken to a plain-HTTP port, nothing listening, no answer in time, or another failure.
async fn unreached_fix(probe: &Probe, url: &Url, error: &str) -> String {
    let host = url.host_str().unwrap_or("");
    let port = url.port_or_known_default().unwrap_or(443);
    if url.scheme() == "https" && probe.speaks_plain_http(host, port).await {
        let mut plain = url.clone();
        let _ = plain.set_scheme("http");
        if url.port().is_none() {
            let _ = plain.set_port(Some(443));
        }
        return format!(
            "This port speaks plain HTTP, not TLS: use {plain}, or put a TLS-terminating proxy in front and give its https URL."
        );
    }
    if error.starts_with("no answer within") {
        return format!(
            "Something accepts connections on {host}:{port} but did not answer in time: check that it is this server and that it is not overloaded (or raise --timeout)."
        );
    }
    if error.contains("Connection refused") || error.contains("connection refused") {
        return format!(
            "Nothing listens on {host}:{port}: start the server, or check the host and port (GATEHOUSE_BIND)."
        );
    }
    "Check that this host and port are reachable from here (DNS, firewall, proxy) and, for https, that the certificate is valid for this host.".to_string()
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
