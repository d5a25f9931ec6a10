//! Shared steps of the OAuth tests: registration and the browser walk through sign-in and
//! consent, done with a cookie-keeping HTTP client as a person's browser would.

use crate::helpers::{TestApp, hidden_input, new_client};
use reqwest::StatusCode;
use serde_json::{Value, json};

pub(crate) const EMAIL: &str = "alice@example.com";
pub(crate) const PASSWORD: &str = "a-long-password";
pub(crate) const REDIRECT: &str = "http://127.0.0.1:7777/callback";

/// Registers a public client; returns its `client_id`.
pub(crate) async fn register_public(app: &TestApp, redirect_uris: &[&str]) -> String {
    let r = app
        .client
        .post(app.url("/oauth/register"))
        .json(&json!({
            "redirect_uris": redirect_uris,
            "token_endpoint_auth_method": "none",
            "client_name": "Test Client",
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    r.json::<Value>().await.unwrap()["client_id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A browser that has signed in as `EMAIL` (the account is created if missing).
pub(crate) async fn signed_in_browser(app: &TestApp) -> reqwest::Client {
    if app
        .store
        .account_by_email(&gatehouse::domain::account::Email::parse(EMAIL).unwrap())
        .await
        .unwrap()
        .is_none()
    {
        app.create_account(EMAIL, PASSWORD).await;
    }
    let browser = new_client();
    let r = app.sign_in(&browser, EMAIL, PASSWORD).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    browser
}

/// Follows `authorize_url` in `browser` (signed in or not: the sign-in form is filled when
/// shown) and answers the consent page with `decision` when it appears. Returns the final
/// `Location` sent back to the client.
pub(crate) async fn walk(
    app: &TestApp,
    browser: &reqwest::Client,
    authorize_url: &str,
    decision: &str,
) -> String {
    let mut r = browser.get(authorize_url).send().await.unwrap();
    if r.status() == StatusCode::SEE_OTHER {
        let loc = r.headers()["location"].to_str().unwrap().to_string();
        if loc.starts_with("/signin") {
            if app
                .store
                .account_by_email(&gatehouse::domain::account::Email::parse(EMAIL).unwrap())
                .await
                .unwrap()
                .is_none()
            {
                app.create_account(EMAIL, PASSWORD).await;
            }
            let page = browser
                .get(app.url(&loc))
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            let csrf = hidden_input(&page, "csrf_token").unwrap();
            let next = hidden_input(&page, "next").unwrap();
            let s = browser
                .post(app.url("/signin"))
                .form(&[
                    ("csrf_token", csrf.as_str()),
                    ("next", next.as_str()),
                    ("email", EMAIL),
                    ("password", PASSWORD),
                ])
                .send()
                .await
                .unwrap();
            assert_eq!(s.status(), StatusCode::SEE_OTHER);
            let next = s.headers()["location"].to_str().unwrap().to_string();
            assert!(
                next.starts_with("/oauth/authorize?"),
                "back to the same request: {next}"
            );
            r = browser.get(app.url(&next)).send().await.unwrap();
        } else {
            return loc;
        }
    }
    assert_eq!(r.status(), StatusCode::OK, "consent page expected");
    assert!(
        r.headers().get("access-control-allow-origin").is_none(),
        "no CORS on pages"
    );
    let page = r.text().await.unwrap();
    assert!(
        page.contains("Test Client") || page.contains("application"),
        "names the client"
    );
    let csrf = hidden_input(&page, "csrf_token").unwrap();
    let request = hidden_input(&page, "request").unwrap();
    let d = decide(app, browser, csrf.as_str(), request.as_str(), decision).await;
    assert_eq!(
        d.status(),
        StatusCode::SEE_OTHER,
        "a 303, never a 307 that re-POSTs"
    );
    d.headers()["location"].to_str().unwrap().to_string()
}

/// Answers a consent page: `POST /oauth/authorize/decision` with its CSRF token, request id
/// and `decision` (`approve` or `deny`).
pub(crate) async fn decide(
    app: &TestApp,
    browser: &reqwest::Client,
    csrf: &str,
    request: &str,
    decision: &str,
) -> reqwest::Response {
    browser
        .post(app.url("/oauth/authorize/decision"))
        .form(&[
            ("csrf_token", csrf),
            ("request", request),
            ("decision", decision),
        ])
        .send()
        .await
        .unwrap()
}

/// Opens the consent page again (`prompt=consent`) in a signed-in browser; returns the
/// request id its form carries.
pub(crate) async fn consent_request(
    app: &TestApp,
    browser: &reqwest::Client,
    client_id: &str,
    challenge: &str,
) -> String {
    let url = authorize_url(app, client_id, challenge, &[("prompt", "consent")]);
    let page = browser.get(url).send().await.unwrap().text().await.unwrap();
    hidden_input(&page, "request").expect("a consent page")
}

/// A fresh authorization code for `client_id` (the default scopes), approved by `EMAIL` in a
/// newly signed-in browser; returns (code, PKCE verifier).
pub(crate) async fn code_for(app: &TestApp, client_id: &str) -> (String, String) {
    code_in(app, &signed_in_browser(app).await, client_id, &[]).await
}

/// An authorization code obtained in `browser`: through the consent page (approved) or, when
/// a remembered consent covers the request, straight away. `extra` changes the authorize
/// parameters (see [`authorize_url`]). Returns (code, PKCE verifier).
pub(crate) async fn code_in(
    app: &TestApp,
    browser: &reqwest::Client,
    client_id: &str,
    extra: &[(&str, &str)],
) -> (String, String) {
    let (verifier, challenge) = pkce();
    let loc = walk(
        app,
        browser,
        &authorize_url(app, client_id, &challenge, extra),
        "approve",
    )
    .await;
    let code = query_of(&loc)
        .remove("code")
        .unwrap_or_else(|| panic!("a code in {loc}"));
    (code, verifier)
}

/// Revokes the first app listed on the connected-apps page of a signed-in browser, through
/// the page's own form; returns the consent id revoked.
pub(crate) async fn revoke_on_apps_page(app: &TestApp, browser: &reqwest::Client) -> String {
    let page = browser
        .get(app.url("/apps"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = hidden_input(&page, "csrf_token").expect("csrf_token on /apps");
    let consent = hidden_input(&page, "consent_id").expect("an app listed on /apps");
    let r = browser
        .post(app.url("/apps/revoke"))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("consent_id", consent.as_str()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    consent
}

/// The query parameters of a redirect `Location`.
pub(crate) fn query_of(location: &str) -> std::collections::HashMap<String, String> {
    let url = url::Url::parse(location).unwrap();
    let mut out = std::collections::HashMap::new();
    for (k, v) in url.query_pairs() {
        assert!(
            out.insert(k.to_string(), v.to_string()).is_none(),
            "{k} at most once"
        );
    }
    out
}

/// A PKCE pair (verifier, S256 challenge).
pub(crate) fn pkce() -> (String, String) {
    let verifier = gatehouse::domain::secret::random_urlsafe(32);
    let challenge = gatehouse::domain::pkce::s256_challenge(&verifier);
    (verifier, challenge)
}

/// An authorize URL with every parameter right; `extra` overrides or adds parameters
/// (an empty value removes one).
pub(crate) fn authorize_url(
    app: &TestApp,
    client_id: &str,
    challenge: &str,
    extra: &[(&str, &str)],
) -> String {
    let mcp = format!("{}/mcp", app.address);
    let mut params: Vec<(String, String)> = vec![
        ("response_type".into(), "code".into()),
        ("client_id".into(), client_id.into()),
        ("redirect_uri".into(), REDIRECT.into()),
        ("code_challenge".into(), challenge.into()),
        ("code_challenge_method".into(), "S256".into()),
        ("state".into(), "xyz-state".into()),
        ("scope".into(), "mcp:read mcp:write".into()),
        ("resource".into(), mcp),
    ];
    for (k, v) in extra {
        params.retain(|(pk, _)| pk != k);
        if !v.is_empty() {
            params.push((k.to_string(), v.to_string()));
        }
    }
    let q: String = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(params)
        .finish();
    app.url(&format!("/oauth/authorize?{q}"))
}

/// Exchanges a code at the token endpoint as a public client; returns status and JSON.
pub(crate) async fn exchange(
    app: &TestApp,
    client_id: &str,
    code: &str,
    verifier: &str,
    extra: &[(&str, &str)],
) -> (StatusCode, Value, reqwest::header::HeaderMap) {
    let mut form = vec![
        ("grant_type", "authorization_code"),
        ("code", code),
        ("code_verifier", verifier),
        ("client_id", client_id),
        ("redirect_uri", REDIRECT),
    ];
    for (k, v) in extra {
        form.retain(|(fk, _)| fk != k);
        if !v.is_empty() {
            form.push((k, v));
        }
    }
    let r = app
        .client
        .post(app.url("/oauth/token"))
        .form(&form)
        .send()
        .await
        .unwrap();
    let status = r.status();
    let headers = r.headers().clone();
    (status, r.json().await.unwrap(), headers)
}

/// Refreshes as a public client; returns status and JSON.
pub(crate) async fn refresh(
    app: &TestApp,
    client_id: &str,
    refresh_token: &str,
    extra: &[(&str, &str)],
) -> (StatusCode, Value) {
    let mut form = vec![
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh_token),
        ("client_id", client_id),
    ];
    form.extend_from_slice(extra);
    let r = app
        .client
        .post(app.url("/oauth/token"))
        .form(&form)
        .send()
        .await
        .unwrap();
    (r.status(), r.json().await.unwrap())
}

/// Runs the whole flow for a fresh public client; returns (`client_id`, token response JSON).
pub(crate) async fn full_grant(app: &TestApp) -> (String, Value) {
    let client_id = register_public(app, &[REDIRECT]).await;
    let (verifier, challenge) = pkce();
    let browser = new_client();
    let loc = walk(
        app,
        &browser,
        &authorize_url(app, &client_id, &challenge, &[]),
        "approve",
    )
    .await;
    let code = query_of(&loc)["code"].clone();
    let (status, body, _) = exchange(app, &client_id, &code, &verifier, &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    (client_id, body)
}

/// Whether the store still accepts an access token.
pub(crate) async fn access_token_live(app: &TestApp, token: &str) -> bool {
    let hash = gatehouse::domain::secret::Secret::from_presented(token.to_string()).hash();
    app.store
        .authenticate_access_token(&hash, gatehouse::store::now())
        .await
        .unwrap()
        .is_some()
}
