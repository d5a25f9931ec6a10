//! What a client does with the authorization server: CORS preflights from a browser-based
//! client, registration as each well-known client, the authorization request, and `ChatGPT` Apps'
//! domain verification.

use reqwest::Method;
use serde_json::Value;
use url::Url;

use super::{INSPECTOR_ORIGIN, Registration, json_object};
use crate::doctor::Step;
use crate::doctor::clients::ClientProfile;
use crate::doctor::http::{Fetched, Probe};

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
    if let Some((got, fix)) = registration_refused(&fetched, profile) {
        return fail(got, fix);
    }
    match read_registration(&fetched, profile) {
        Ok((got, registration)) => (
            Step::pass(check, request, got, expected),
            Some(registration),
        ),
        Err((got, fix)) => fail(got, fix),
    }
}

/// Why a registration answer is a refusal: `429` (with its `Retry-After`) or another status
/// than `2xx` (with the error the server gave); what came back and the fix, or `None` for a
/// `2xx`.
fn registration_refused(fetched: &Fetched, profile: &ClientProfile) -> Option<(String, String)> {
    if fetched.status == 429 {
        return Some((
            format!(
                "429 (Retry-After {})",
                fetched.header("retry-after").unwrap_or("absent")
            ),
            "Registrations are limited per source address: wait for Retry-After, or raise the limit (Gatehouse: GATEHOUSE_REGISTRATIONS_PER_HOUR, default 20; the doctor registers 4 clients per run).".into(),
        ));
    }
    if (200..300).contains(&fetched.status) {
        return None;
    }
    let detail = json_object(fetched)
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
    Some((
        format!("{} {}", fetched.summary(), detail.trim()),
        format!(
            "Accept the registration {} sends (redirect URIs {}, token_endpoint_auth_method {}): it cannot connect otherwise.",
            profile.name,
            profile.redirect_uris.join(" "),
            profile.token_endpoint_auth_method
        ),
    ))
}

/// The client information response of a `2xx` registration (RFC 7591 §3.2.1) as `profile`:
/// what came back and the client registered, when it is JSON with a `client_id`, a
/// `client_secret` for a secret-based method and every requested redirect URI kept;
/// otherwise what came back and the fix.
fn read_registration(
    fetched: &Fetched,
    profile: &'static ClientProfile,
) -> Result<(String, Registration), (String, String)> {
    let doc = match json_object(fetched) {
        Ok(d) => d,
        Err(got) => {
            return Err((
                got,
                "Answer a registration with its JSON (RFC 7591 §3.2.1).".into(),
            ));
        }
    };
    let Some(client_id) = doc.get("client_id").and_then(Value::as_str) else {
        return Err((
            format!("{} without client_id", fetched.status),
            "Return client_id in the registration response (RFC 7591 §3.2.1).".into(),
        ));
    };
    let method = doc
        .get("token_endpoint_auth_method")
        .and_then(Value::as_str)
        .unwrap_or(profile.token_endpoint_auth_method);
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
        return Err((
            got,
            "A client registered with a secret-based method needs its client_secret in the response (RFC 7591 §3.2.1).".into(),
        ));
    }
    if let Some(uris) = doc.get("redirect_uris").and_then(Value::as_array) {
        let kept: Vec<&str> = uris.iter().filter_map(Value::as_str).collect();
        if let Some(lost) = profile.redirect_uris.iter().find(|u| !kept.contains(u)) {
            return Err((
                format!("{got}, redirect_uris {kept:?}"),
                format!("Keep every requested redirect URI ({lost} was dropped)."),
            ));
        }
    }
    let registration = Registration {
        profile,
        client_id: client_id.to_string(),
        client_secret: secret,
    };
    Ok((got, registration))
}

/// Which client an authorization request is made for.
#[derive(Debug, Clone, Copy)]
pub struct AuthorizeAs<'a> {
    /// The step id (`authorize-claude`, …, or `authorize` for `--client-id`).
    pub check: &'a str,
    /// The client imitated, for the fix sentence.
    pub name: &'a str,
    /// Its `client_id`.
    pub client_id: &'a str,
    /// The registered redirect URI sent.
    pub redirect_uri: &'a str,
}

impl<'a> AuthorizeAs<'a> {
    /// The client registered in `registration`, with its profile's first redirect URI.
    pub fn registered(registration: &'a Registration) -> AuthorizeAs<'a> {
        AuthorizeAs {
            check: registration.profile.authorize_check,
            name: registration.profile.name,
            client_id: &registration.client_id,
            redirect_uri: registration.profile.redirect_uris[0],
        }
    }
}

/// The authorization request a client opens in the browser (OAuth 2.1 §4.1.1, PKCE S256 per
/// RFC 7636, `resource` per RFC 8707): the endpoint must answer with a page (sign-in or
/// consent, possibly after redirects on the server's side), never an error and never an
/// immediate redirect back to the client.
pub async fn authorize(
    probe: &Probe,
    endpoint: &str,
    client: AuthorizeAs<'_>,
    resource: &str,
    scope: Option<&str>,
) -> Step {
    let check = client.check;
    let redirect_uri = client.redirect_uri;
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
            .append_pair("client_id", client.client_id)
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
        client.name
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

/// `GET /.well-known/openai-apps-challenge` on the MCP URL's origin: `ChatGPT` Apps' domain
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

fn short(url: &Url) -> String {
    let s = url.as_str();
    if s.chars().count() > 80 {
        format!("{}…", s.chars().take(80).collect::<String>())
    } else {
        s.to_string()
    }
}
