//! `--interactive`: a full authorization-code flow as a native client runs it, with the
//! `oauth2` crate as the client: register a public client with a loopback redirect (RFC 8252
//! §7.3), open the browser at the authorization endpoint with PKCE S256 (RFC 7636) and
//! `resource` (RFC 8707), receive the code on the loopback listener and check `state` and `iss`
//! (RFC 9207 §2.4), redeem it (OAuth 2.1 §4.1.3), then refresh once and check the refresh token
//! rotated (OAuth 2.1 §4.3.1: public clients' refresh tokens rotate).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use oauth2::basic::BasicClient;
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, CsrfToken, EndpointNotSet, EndpointSet,
    PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, RefreshToken, Scope, TokenResponse, TokenUrl,
};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::Step;
use super::checks::{ServerMetadata, json_object};
use super::http::Probe;

/// Opens the browser at a URL (the command line prints it and asks the desktop to open it;
/// tests hand it to a scripted browser).
#[derive(Clone)]
pub struct BrowserOpener(pub Arc<OpenFn>);

/// A function opening a URL in a browser.
pub type OpenFn = dyn Fn(&str) -> Result<(), String> + Send + Sync;

impl fmt::Debug for BrowserOpener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BrowserOpener")
    }
}

impl BrowserOpener {
    /// Prints `url` on standard error and asks the desktop to open it (`xdg-open`, `open` or
    /// `start`); the printed URL is enough when no browser can be started.
    pub fn desktop() -> BrowserOpener {
        BrowserOpener(Arc::new(|url: &str| {
            eprintln!(
                "Open this URL in a browser to sign in and approve the doctor:\n{}",
                super::terminal_safe(url)
            );
            let program = if cfg!(target_os = "macos") {
                "open"
            } else if cfg!(windows) {
                "explorer"
            } else {
                "xdg-open"
            };
            std::process::Command::new(program)
                .arg(url)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .map(|_| ())
                .map_err(|e| format!("cannot start {program}: {e}"))
        }))
    }
}

/// Whether the doctor may hand `url` to the desktop's browser opener: https, or http on a
/// loopback host (RFC 8252 §8.3; a development server), nothing else.
pub fn browser_may_open(url: &url::Url) -> bool {
    match url.scheme() {
        "https" => url.host_str().is_some(),
        "http" => url
            .host_str()
            .is_some_and(crate::domain::loopback::is_loopback_host),
        _ => false,
    }
}

/// What the flow produced.
#[derive(Debug, Default)]
pub struct Interactive {
    /// The client registered for the flow.
    pub client_id: Option<String>,
    /// The access token obtained by the refresh.
    pub access_token: Option<String>,
}

/// The `oauth2` client of the flow: authorization and token endpoints set.
type FlowClient =
    BasicClient<EndpointSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointSet>;

/// Runs the flow; `wait` bounds the time the person has in the browser.
pub async fn flow(
    probe: &Probe,
    meta: &ServerMetadata,
    resource: &str,
    scope: Option<&str>,
    opener: &BrowserOpener,
    wait: Duration,
) -> (Vec<Step>, Interactive) {
    let mut steps = Vec::new();
    let mut out = Interactive::default();
    let (Some(auth), Some(token), Some(register)) = (
        meta.str("authorization_endpoint"),
        meta.str("token_endpoint"),
        meta.str("registration_endpoint"),
    ) else {
        steps.push(Step::skip(
            "interactive-register",
            "the metadata lacks an authorization, token or registration endpoint",
        ));
        return (steps, out);
    };

    // A loopback listener for the redirect.
    let listener = match TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(e) => {
            steps.push(Step::fail(
                "interactive-register",
                "bind 127.0.0.1:0".into(),
                e.to_string(),
                "a loopback port for the redirect",
                "Allow the doctor to listen on a loopback port.",
            ));
            return (steps, out);
        }
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");

    // 1. Registration as a native public client.
    let client_id = match register_native(probe, register, &redirect_uri).await {
        Ok((client_id, step)) => {
            steps.push(step);
            client_id
        }
        Err(step) => {
            steps.push(*step);
            return (steps, out);
        }
    };
    out.client_id = Some(client_id.clone());

    let (Ok(auth_url), Ok(token_url), Ok(redirect)) = (
        AuthUrl::new(auth.to_string()),
        TokenUrl::new(token.to_string()),
        RedirectUrl::new(redirect_uri.clone()),
    ) else {
        steps.push(Step::skip(
            "interactive-authorize",
            "the endpoints are not absolute URLs",
        ));
        return (steps, out);
    };
    let client = BasicClient::new(ClientId::new(client_id))
        .set_auth_uri(auth_url)
        .set_token_uri(token_url)
        .set_redirect_uri(redirect);

    // 2. The browser: sign in, approve, come back to the loopback listener.
    let browser = Browser {
        listener: &listener,
        auth,
        redirect_uri: &redirect_uri,
        opener,
        wait,
    };
    let (code, verifier) = match browser.authorize(&client, meta, resource, scope).await {
        Ok((code, verifier, step)) => {
            steps.push(step);
            (code, verifier)
        }
        Err(step) => {
            steps.push(*step);
            return (steps, out);
        }
    };

    // 3. The code for tokens, then one refresh.
    let (token_steps, access) = tokens(probe, &client, token, code, verifier, resource).await;
    steps.extend(token_steps);
    out.access_token = access;
    (steps, out)
}

/// Step 1: registers a native public client with the loopback `redirect_uri` at `register`:
/// its `client_id` and the passing step, or the failing step.
async fn register_native(
    probe: &Probe,
    register: &str,
    redirect_uri: &str,
) -> Result<(String, Step), Box<Step>> {
    let body = json!({
        "client_name": "gatehouse doctor (interactive)",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": "native",
    });
    let request = format!("POST {register} {body}");
    let expected = "201 JSON with client_id";
    let builder = probe
        .client()
        .post(register)
        .header("content-type", "application/json")
        .body(body.to_string());
    let client_id = match probe.send(builder).await {
        Ok(f) if (200..300).contains(&f.status) => match json_object(&f).ok().and_then(|d| {
            d.get("client_id")
                .and_then(|v| v.as_str())
                .map(String::from)
        }) {
            Some(id) => id,
            None => {
                return Err(Box::new(Step::fail(
                    "interactive-register",
                    request,
                    format!("{} without client_id", f.status),
                    expected,
                    "Return client_id in the registration response (RFC 7591 §3.2.1).",
                )));
            }
        },
        Ok(f) => {
            return Err(Box::new(Step::fail(
                "interactive-register",
                request,
                format!("{} {}", f.summary(), f.excerpt()),
                expected,
                "Accept a native public client with a loopback redirect (RFC 8252 §7.3); on 429 raise GATEHOUSE_REGISTRATIONS_PER_HOUR or wait.",
            )));
        }
        Err(e) => {
            return Err(Box::new(Step::fail(
                "interactive-register",
                request,
                e,
                expected,
                "Make the registration endpoint reachable.",
            )));
        }
    };
    let step = Step::pass(
        "interactive-register",
        request,
        format!("client_id \"{client_id}\""),
        expected,
    );
    Ok((client_id, step))
}

/// Step 2: where the person signs in and approves, and where the browser comes back.
struct Browser<'a> {
    listener: &'a TcpListener,
    auth: &'a str,
    redirect_uri: &'a str,
    opener: &'a BrowserOpener,
    wait: Duration,
}

impl Browser<'_> {
    /// Opens the authorization request of `client` in the browser and waits for the redirect
    /// back: the code, its PKCE verifier and the passing step, or the failing step.
    async fn authorize(
        &self,
        client: &FlowClient,
        meta: &ServerMetadata,
        resource: &str,
        scope: Option<&str>,
    ) -> Result<(String, PkceCodeVerifier, Step), Box<Step>> {
        let (auth, redirect_uri) = (self.auth, self.redirect_uri);
        let (url, state, verifier) = authorization_url(client, resource, scope);
        let request = format!("browser GET {auth}?… then the redirect to {redirect_uri}");
        let expected = "the redirect back with code, the same state and iss equal to the issuer";
        if !browser_may_open(&url) {
            // A server's metadata decides this URL: `file:`, `javascript:` or another scheme
            // handed to the desktop's opener could run or reveal anything.
            return Err(Box::new(Step::fail(
                "interactive-authorize",
                request,
                format!(
                    "the authorization endpoint is a {} URL; not opened",
                    url.scheme()
                ),
                "an https authorization endpoint (http only on a loopback host)",
                "Publish an https authorization_endpoint in the authorization-server metadata.",
            )));
        }
        if let Err(e) = (self.opener.0)(url.as_str()) {
            // The URL was printed; the person may still open it by hand.
            tracing::debug!("browser not opened: {e}");
        }
        let query = match tokio::time::timeout(self.wait, callback(self.listener)).await {
            Ok(Ok(q)) => q,
            Ok(Err(e)) => {
                return Err(Box::new(Step::fail(
                    "interactive-authorize",
                    request,
                    e,
                    expected,
                    "The redirect must reach the client's loopback URI.",
                )));
            }
            Err(_) => {
                return Err(Box::new(Step::fail(
                    "interactive-authorize",
                    request,
                    format!("no redirect within {} s", self.wait.as_secs()),
                    expected,
                    "Sign in and approve in the browser before the time runs out.",
                )));
            }
        };
        match authorization_response(&query, &state, meta) {
            Ok((code, got)) => Ok((
                code,
                verifier,
                Step::pass("interactive-authorize", request, got, expected),
            )),
            Err((got, fix)) => Err(Box::new(Step::fail(
                "interactive-authorize",
                request,
                got,
                expected,
                fix,
            ))),
        }
    }
}

/// The authorization request of `client` for `resource` and the words of `scope`, with a
/// new PKCE S256 challenge (RFC 7636) and a new `state`: its URL, the state and the PKCE
/// verifier.
fn authorization_url(
    client: &FlowClient,
    resource: &str,
    scope: Option<&str>,
) -> (url::Url, CsrfToken, PkceCodeVerifier) {
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let mut request = client
        .authorize_url(CsrfToken::new_random)
        .set_pkce_challenge(challenge)
        .add_extra_param("resource", resource);
    for s in scope.unwrap_or("").split_whitespace() {
        request = request.add_scope(Scope::new(s.to_string()));
    }
    let (url, state) = request.url();
    (url, state, verifier)
}

/// Checks the authorization response in the redirect's `query` (OAuth 2.1 §4.1.2): no
/// `error`, a `code`, `state` echoed unchanged and `iss` equal to the metadata's issuer when
/// sent, or required by `authorization_response_iss_parameter_supported` (RFC 9207 §2). The
/// code and the summary of what came back, or what came back and the fix.
fn authorization_response(
    query: &[(String, String)],
    state: &CsrfToken,
    meta: &ServerMetadata,
) -> Result<(String, String), (String, &'static str)> {
    let issuer = meta.str("issuer").unwrap_or("").to_string();
    let get = |k: &str| query.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let got = format!(
        "code {}, state {}, iss {}",
        if get("code").is_some() {
            "present"
        } else {
            "absent"
        },
        if get("state").as_deref() == Some(state.secret().as_str()) {
            "echoed"
        } else {
            "wrong"
        },
        get("iss")
            .map(|i| format!("\"{i}\""))
            .unwrap_or_else(|| "absent".into())
    );
    if let Some(error) = get("error") {
        return Err((
            format!(
                "error={error} {}",
                get("error_description").unwrap_or_default()
            ),
            "The authorization was refused: approve it in the browser, or read the error.",
        ));
    }
    let iss_required = meta
        .document
        .get("authorization_response_iss_parameter_supported")
        .and_then(serde_json::Value::as_bool)
        == Some(true);
    let iss_ok = match get("iss") {
        Some(i) => i == issuer,
        None => !iss_required,
    };
    let Some(code) = get("code") else {
        return Err((got, "Redirect back with a code (OAuth 2.1 §4.1.2)."));
    };
    if get("state").as_deref() != Some(state.secret().as_str()) || !iss_ok {
        return Err((
            got,
            "Echo state unchanged and send iss byte-identical to the metadata's issuer (RFC 9207 §2).",
        ));
    }
    Ok((code, got))
}

/// Step 3: the code for tokens at `token`, then one refresh: the steps, and the refreshed
/// access token when the refresh rotated.
async fn tokens(
    probe: &Probe,
    client: &FlowClient,
    token: &str,
    code: String,
    verifier: PkceCodeVerifier,
    resource: &str,
) -> (Vec<Step>, Option<String>) {
    let http = probe.client().clone();
    let (step, first_refresh) =
        match redeem_code(probe, &http, client, token, code, verifier, resource).await {
            Ok(redeemed) => redeemed,
            Err(step) => return (vec![*step], None),
        };
    let (refresh_step, access) =
        refresh_once(probe, &http, client, token, &first_refresh, resource).await;
    (vec![step, refresh_step], access)
}

/// The authorization code and its PKCE `verifier` for tokens at `token` (OAuth 2.1 §4.1.3),
/// for `resource`: the passing step and the refresh token issued, or the failing step (an
/// error, no answer in time, or no refresh token).
async fn redeem_code(
    probe: &Probe,
    http: &reqwest::Client,
    client: &FlowClient,
    token: &str,
    code: String,
    verifier: PkceCodeVerifier,
    resource: &str,
) -> Result<(Step, RefreshToken), Box<Step>> {
    let request = format!("POST {token} grant_type=authorization_code (oauth2 crate)");
    let expected = "an access token and a refresh token";
    let exchange = client
        .exchange_code(AuthorizationCode::new(code))
        .set_pkce_verifier(verifier)
        .add_extra_param("resource", resource)
        .request_async(http);
    let tokens = match tokio::time::timeout(probe.timeout(), exchange).await {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => {
            return Err(Box::new(Step::fail(
                "interactive-token",
                request,
                describe(&e),
                expected,
                "The token endpoint must redeem the code for the PKCE verifier and resource it was issued with.",
            )));
        }
        Err(_) => {
            return Err(Box::new(Step::fail(
                "interactive-token",
                request,
                format!("no answer within {} s", probe.timeout().as_secs()),
                expected,
                "Make the token endpoint answer promptly.",
            )));
        }
    };
    let Some(first_refresh) = tokens.refresh_token().cloned() else {
        return Err(Box::new(Step::fail(
            "interactive-token",
            request,
            "an access token without a refresh token".into(),
            expected,
            "Issue a refresh token to clients registered for the refresh_token grant, or they ask people to sign in again every hour.",
        )));
    };
    let step = Step::pass(
        "interactive-token",
        request,
        format!(
            "access token, refresh token, expires_in {}",
            tokens
                .expires_in()
                .map(|d| format!("{} s", d.as_secs()))
                .unwrap_or_else(|| "absent".into())
        ),
        expected,
    );
    Ok((step, first_refresh))
}

/// One refresh with `first_refresh` at `token`, for `resource`: the step (passing only when
/// the refresh token rotated, OAuth 2.1 §4.3.1) and then the new access token.
async fn refresh_once(
    probe: &Probe,
    http: &reqwest::Client,
    client: &FlowClient,
    token: &str,
    first_refresh: &RefreshToken,
    resource: &str,
) -> (Step, Option<String>) {
    let request = format!("POST {token} grant_type=refresh_token (oauth2 crate)");
    let expected = "a new access token and a rotated refresh token";
    let refresh = client
        .exchange_refresh_token(first_refresh)
        .add_extra_param("resource", resource)
        .request_async(http);
    match tokio::time::timeout(probe.timeout(), refresh).await {
        Ok(Ok(t)) => {
            let rotated = t
                .refresh_token()
                .is_some_and(|r| r.secret() != first_refresh.secret());
            let got = format!(
                "access token, refresh token {}",
                if rotated { "rotated" } else { "not rotated" }
            );
            if rotated {
                (
                    Step::pass("interactive-refresh", request, got, expected),
                    Some(t.access_token().secret().clone()),
                )
            } else {
                (
                    Step::fail(
                        "interactive-refresh",
                        request,
                        got,
                        expected,
                        "Rotate refresh tokens of public clients (OAuth 2.1 §4.3.1).",
                    ),
                    None,
                )
            }
        }
        Ok(Err(e)) => (
            Step::fail(
                "interactive-refresh",
                request,
                describe(&e),
                expected,
                "The token endpoint must accept the refresh token it just issued.",
            ),
            None,
        ),
        Err(_) => (
            Step::fail(
                "interactive-refresh",
                request,
                format!("no answer within {} s", probe.timeout().as_secs()),
                expected,
                "Make the token endpoint answer promptly.",
            ),
            None,
        ),
    }
}

/// An error with its first three causes, for a one-line report.
pub fn describe<E: std::error::Error>(e: &E) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    let mut depth = 0;
    while let Some(s) = source {
        if depth == 3 {
            break;
        }
        text.push_str(&format!(": {s}"));
        source = s.source();
        depth += 1;
    }
    text
}

/// Waits for `GET /callback?…` on `listener` (RFC 8252 §7.3 loopback redirect) and returns its query pairs; other requests
/// (a favicon) get 404. At most 20 connections are looked at, each read up to 8 KiB.
pub async fn callback(listener: &TcpListener) -> Result<Vec<(String, String)>, String> {
    for _ in 0..20 {
        let (mut stream, _) = listener.accept().await.map_err(|e| e.to_string())?;
        let mut buf = vec![0u8; 8192];
        let mut len = 0;
        while len < buf.len() {
            let n = match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf[len..]))
                .await
            {
                Ok(Ok(n)) => n,
                _ => 0,
            };
            if n == 0 {
                break;
            }
            len += n;
            if buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
        }
        let head = String::from_utf8_lossy(&buf[..len]);
        let target = head
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("GET "))
            .and_then(|l| l.split(' ').next())
            .unwrap_or("");
        let Some(query) = target.strip_prefix("/callback?") else {
            let _ = stream
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await;
            continue;
        };
        let pairs: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect();
        let page = "<!doctype html><title>gatehouse doctor</title><p>Done: you can close this tab and return to the terminal.</p>";
        let _ = stream
            .write_all(
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
                    page.len()
                )
                .as_bytes(),
            )
            .await;
        return Ok(pairs);
    }
    Err("more than 20 requests on the loopback port without the callback".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_or_loopback_http_goes_to_the_browser() {
        let may = |s: &str| browser_may_open(&url::Url::parse(s).unwrap());
        assert!(may("https://auth.example.com/oauth/authorize?x=1"));
        assert!(may("http://127.0.0.1:8080/oauth/authorize"));
        assert!(may("http://localhost:3000/authorize"));
        assert!(may("http://[::1]:3000/authorize"));
        for refused in [
            "file:///etc/passwd?response_type=code",
            "http://auth.example.com/authorize",
            "javascript:alert(1)",
            "smb://host/share",
            "ftp://host/x",
            "data:text/html,hi",
        ] {
            assert!(!may(refused), "{refused}");
        }
    }
}
