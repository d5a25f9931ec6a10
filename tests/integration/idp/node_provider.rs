//! Signing in at a real OpenID provider nobody here wrote: node-oidc-provider (the version
//! `tests/browser` and `bench/peers` pin), started by `tests/browser/oidc-idp.mjs` with its own
//! development login and consent pages. The flows of [`super::signin`] run against the tests'
//! own provider; this one shows that discovery, the key set, the code exchange with the client
//! secret, PKCE and the ID-token checks agree with a provider used in production.
//!
//! Needs `node` (≥ 20) and the packages of `tests/browser`; when those are not installed yet,
//! the test installs them with `npm ci` (once per test process) before it starts.

use std::io::BufRead as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;

use super::{cli_ok, spawn_with_key};
use crate::helpers::{TestApp, hidden_input, new_client};
use crate::oauth_helpers::{
    REDIRECT, authorize_url, decide, exchange, pkce, query_of, register_public,
};

const PASSWORD: &str = "a-long-password";
const EMAIL: &str = "alice@acme.example";

/// How long the provider may take to print its line after `node` starts.
const START_LIMIT: Duration = Duration::from_secs(30);
/// Redirects and pages a sign-in may pass through at the provider (auth, login, consent and
/// their resumes are six).
const MAX_STEPS: usize = 12;

/// `tests/browser`, whose `node_modules` hold `oidc-provider`.
fn browser_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/browser")
}

/// Installs the packages of `tests/browser` unless `oidc-provider` is there already.
fn ensure_packages() {
    static INSTALLED: Mutex<bool> = Mutex::new(false);
    let mut done = INSTALLED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if *done {
        return;
    }
    let dir = browser_dir();
    if !dir
        .join("node_modules/oidc-provider/package.json")
        .is_file()
    {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&dir)
            .status()
            .expect("npm must be installed for the node-oidc-provider test");
        assert!(status.success(), "npm ci in tests/browser failed: {status}");
    }
    *done = true;
}

/// A running node-oidc-provider; killed when dropped.
struct NodeProvider {
    child: Child,
    issuer: String,
    client_id: String,
    client_secret: String,
    /// The login name that is the account with the verified email (its `sub`).
    login: String,
}

impl NodeProvider {
    /// Starts the provider with one client whose redirect URI is `redirect_uri` and one
    /// person with the verified `email`.
    fn start(redirect_uri: &str, email: &str) -> NodeProvider {
        ensure_packages();
        let mut child = Command::new(std::env::var("NODE").unwrap_or_else(|_| "node".into()))
            .arg("oidc-idp.mjs")
            .args(["0", redirect_uri, email])
            .current_dir(browser_dir())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("node must be installed for the node-oidc-provider test");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        // The first line is the provider's; the rest (its notices) is read and dropped, so
        // that the provider never writes into a closed pipe.
        std::thread::spawn(move || {
            let mut reader = std::io::BufReader::new(stdout);
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let _ = tx.send(line);
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
        });
        let line = match rx.recv_timeout(START_LIMIT) {
            Ok(line) if !line.trim().is_empty() => line,
            other => {
                let _ = child.kill();
                panic!("node-oidc-provider did not start: {other:?}");
            }
        };
        let shown: Value = serde_json::from_str(line.trim()).expect("its JSON line");
        let field = |name: &str| shown[name].as_str().unwrap().to_string();
        NodeProvider {
            issuer: field("issuer"),
            client_id: field("clientId"),
            client_secret: field("clientSecret"),
            login: field("login"),
            child,
        }
    }
}

impl Drop for NodeProvider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn location(r: &reqwest::Response) -> String {
    r.headers()
        .get("location")
        .unwrap_or_else(|| panic!("a redirect, got {}", r.status()))
        .to_str()
        .unwrap()
        .to_string()
}

/// The `action` of the first form of an HTML page.
fn form_action(html: &str) -> Option<String> {
    let start = html.find("<form")?;
    let marker = "action=\"";
    let at = html[start..].find(marker)? + start + marker.len();
    let end = html[at..].find('"')? + at;
    Some(crate::helpers::html_unescape(&html[at..end]))
}

/// Walks the provider's pages from `url` as a person would: follows its redirects, signs in
/// as `idp.login` on the login page and allows on the consent page, until the provider sends
/// the browser back to `app`. Returns that callback URL.
async fn through_the_provider(
    app: &TestApp,
    idp: &NodeProvider,
    browser: &reqwest::Client,
    url: &str,
) -> String {
    let mut current = url::Url::parse(url).unwrap();
    let mut response = browser.get(current.clone()).send().await.unwrap();
    for _ in 0..MAX_STEPS {
        if response.status().is_redirection() {
            let next = current.join(&location(&response)).unwrap();
            if next.as_str().starts_with(&app.address) {
                return next.to_string();
            }
            response = browser.get(next.clone()).send().await.unwrap();
            current = next;
            continue;
        }
        assert_eq!(response.status(), StatusCode::OK, "a page at the provider");
        let page = response.text().await.unwrap();
        let action = current
            .join(&form_action(&page).unwrap_or_else(|| panic!("a form: {page}")))
            .unwrap();
        let form: Vec<(&str, &str)> = match hidden_input(&page, "prompt").as_deref() {
            Some("login") => vec![
                ("prompt", "login"),
                ("login", idp.login.as_str()),
                ("password", "any"),
            ],
            Some("consent") => vec![("prompt", "consent")],
            other => panic!("an unexpected provider page ({other:?}): {page}"),
        };
        response = browser
            .post(action.clone())
            .form(&form)
            .send()
            .await
            .unwrap();
        current = action;
    }
    panic!("the provider did not send the browser back within {MAX_STEPS} steps")
}

async fn count(app: &TestApp, sql: &str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(app.db.pool().await)
        .await
        .unwrap()
}

#[tokio::test]
async fn node_oidc_provider_signs_a_person_in_while_an_mcp_client_waits() {
    let app = spawn_with_key(|_| {}).await;
    let alice = app.create_account(EMAIL, PASSWORD).await;
    let callback = format!("{}/signin/idp/acme/callback", app.address);
    let idp = tokio::task::spawn_blocking(move || NodeProvider::start(&callback, EMAIL))
        .await
        .unwrap();
    cli_ok(
        &app,
        &[
            "idp",
            "add",
            "acme",
            "--issuer",
            idp.issuer.as_str(),
            "--client-id",
            idp.client_id.as_str(),
            "--client-secret-stdin",
            "--display-name",
            "Acme SSO",
            "--domains",
            "acme.example",
        ],
        &format!("{}\n", idp.client_secret),
    )
    .await;

    // An MCP client's authorization request waits for a sign-in.
    let client_id = register_public(&app, &[REDIRECT]).await;
    let (verifier, challenge) = pkce();
    let browser = new_client();
    let r = browser
        .get(authorize_url(&app, &client_id, &challenge, &[]))
        .send()
        .await
        .unwrap();
    let to_signin = location(&r);
    assert!(to_signin.starts_with("/signin?next="), "{to_signin}");
    let page = browser
        .get(app.url(&to_signin))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("Acme SSO"), "a button for the provider");
    let next = hidden_input(&page, "next").unwrap();
    assert!(next.starts_with("/oauth/authorize?"), "{next}");

    // Off to node-oidc-provider (PKCE and a nonce on the way), and back with a code.
    let start: String = url::form_urlencoded::byte_serialize(next.as_bytes()).collect();
    let r = browser
        .get(app.url(&format!("/signin/idp/acme?next={start}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "off to the provider");
    let at_provider = location(&r);
    assert!(
        at_provider.starts_with(&format!("{}/auth?", idp.issuer)),
        "the authorization endpoint from discovery: {at_provider}"
    );
    assert!(at_provider.contains("code_challenge_method=S256"));
    assert!(at_provider.contains("nonce="));
    let back = through_the_provider(&app, &idp, &browser, &at_provider).await;
    assert!(
        back.starts_with(&format!("{}/signin/idp/acme/callback?", app.address)),
        "{back}"
    );
    let r = browser.get(&back).send().await.unwrap();
    assert_eq!(
        r.status(),
        StatusCode::SEE_OTHER,
        "the ID token was accepted"
    );
    assert_eq!(
        location(&r),
        next,
        "back to the waiting authorization request"
    );

    // The request goes on exactly as after a password sign-in: consent, code, token.
    let consent = browser.get(app.url(&next)).send().await.unwrap();
    assert_eq!(consent.status(), StatusCode::OK);
    let page = consent.text().await.unwrap();
    let csrf = hidden_input(&page, "csrf_token").expect("the consent page");
    let request = hidden_input(&page, "request").expect("the consent page");
    let d = decide(&app, &browser, &csrf, &request, "approve").await;
    assert_eq!(d.status(), StatusCode::SEE_OTHER);
    let code = query_of(&location(&d))
        .remove("code")
        .expect("a code for the MCP client");
    let (status, body, _) = exchange(&app, &client_id, &code, &verifier, &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let token = body["access_token"].as_str().unwrap();
    let mcp = app
        .client
        .post(app.url("/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(&serde_json::json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "1"}}
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(mcp.status(), StatusCode::OK, "the token works at /mcp");

    // The account was linked by the provider's sub (the login name), and the sign-in audited.
    let linked: String = sqlx::query_scalar(
        "SELECT account_id FROM identity_links WHERE provider = 'acme' AND subject = $1",
    )
    .bind(&idp.login)
    .fetch_one(app.db.pool().await)
    .await
    .unwrap();
    assert_eq!(linked, alice);
    let detail: String = sqlx::query_scalar(
        "SELECT detail FROM audit_events WHERE event = 'signin' AND outcome = 'success' AND account_id = $1",
    )
    .bind(&alice)
    .fetch_one(app.db.pool().await)
    .await
    .unwrap();
    assert_eq!(detail, "method=provider idp=acme");

    // A second browser signs in again through the provider; still one link, one account.
    let again = new_client();
    let r = again
        .get(app.url("/signin/idp/acme?next=%2Faccount"))
        .send()
        .await
        .unwrap();
    let back = through_the_provider(&app, &idp, &again, &location(&r)).await;
    let r = again.get(&back).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&r), "/account");
    let page = again
        .get(app.url("/account"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains(EMAIL), "the linked account");
    assert_eq!(count(&app, "SELECT COUNT(*) FROM identity_links").await, 1);
    assert_eq!(count(&app, "SELECT COUNT(*) FROM accounts").await, 1);

    // The callback replayed, even by the browser that began it, is refused.
    let replay = again.get(&back).send().await.unwrap();
    assert_eq!(replay.status(), StatusCode::BAD_REQUEST, "a replayed state");
    assert_eq!(count(&app, "SELECT COUNT(*) FROM identity_links").await, 1);
}
