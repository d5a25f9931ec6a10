//! The consent page puts the decision first: what can be verified is the headline, the name
//! is a claim, the reach is in the body, and a step-up lists only what is new (issue 37,
//! part 1).

use std::sync::Arc;

use async_trait::async_trait;
use gatehouse::domain::cimd::CimdError;
use gatehouse::oauth::clients::{Fetched, MetadataFetcher};
use reqwest::StatusCode;
use serde_json::{Value, json};
use url::Url;

use crate::helpers::{TestApp, hidden_input, html_unescape, spawn_app, spawn_app_full};
use crate::oauth_helpers::{REDIRECT, authorize_url, code_in, pkce, signed_in_browser};

/// Registers a public client with `metadata` added; returns its `client_id`.
async fn register(app: &TestApp, metadata: Value) -> String {
    let mut body = json!({
        "redirect_uris": [REDIRECT],
        "token_endpoint_auth_method": "none",
    });
    body.as_object_mut()
        .unwrap()
        .extend(metadata.as_object().unwrap().clone());
    let r = app
        .client
        .post(app.url("/oauth/register"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    r.json::<Value>().await.unwrap()["client_id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The consent page `browser` gets for `client_id` with `extra` authorize parameters.
async fn consent_page(
    app: &TestApp,
    browser: &reqwest::Client,
    client_id: &str,
    extra: &[(&str, &str)],
) -> String {
    let (_, challenge) = pkce();
    let r = browser
        .get(authorize_url(app, client_id, &challenge, extra))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    html_unescape(&r.text().await.unwrap())
}

/// The text of the page's `<h1>`.
fn h1(html: &str) -> &str {
    let start = html.find("<h1>").unwrap() + 4;
    &html[start..start + html[start..].find("</h1>").unwrap()]
}

#[tokio::test]
async fn the_verified_host_is_the_headline_and_the_name_a_claim() {
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    let client_id = register(
        &app,
        json!({
            "client_name": "Claude (Official Anthropic connector) - verified",
            "client_uri": "https://notes-helper.example/",
            "policy_uri": "https://notes-helper.example/privacy",
            "tos_uri": "https://legal.notes-helper.example/terms",
        }),
    )
    .await;
    let html = consent_page(&app, &browser, &client_id, &[]).await;
    assert_eq!(
        h1(&html),
        "Allow an app at 127.0.0.1:7777 to use your Gatehouse account?"
    );
    assert!(
        html.contains("It calls itself <strong>“Claude (Official Anthropic connector) - verified”</strong>. Gatehouse has <strong>not verified</strong> this name"),
        "{html}"
    );
    assert!(
        html.contains("this name claims to be official or verified"),
        "{html}"
    );
    // The reach is in the body, not a footnote.
    assert!(
        html.contains(
            "<p><strong>Access covers all your projects, including ones you join later</strong>"
        ),
        "{html}"
    );
    // What the app says about itself, as links, and how new it is.
    for (href, text) in [
        (
            "https://notes-helper.example/",
            "Its homepage (notes-helper.example)",
        ),
        (
            "https://notes-helper.example/privacy",
            "Its privacy policy (notes-helper.example)",
        ),
        (
            "https://legal.notes-helper.example/terms",
            "Its terms (legal.notes-helper.example)",
        ),
    ] {
        assert!(
            html.contains(&format!(
                "<a href=\"{href}\" rel=\"noopener noreferrer nofollow\">{text}</a>"
            )),
            "{href}: {html}"
        );
    }
    assert!(
        html.contains("This app was first registered here just now."),
        "{html}"
    );

    // A plain name gets no warning; no links when none were given.
    let plain = register(&app, json!({"client_name": "Notes helper"})).await;
    let html = consent_page(&app, &browser, &plain, &[]).await;
    assert!(
        html.contains("It calls itself <strong>“Notes helper”</strong>"),
        "{html}"
    );
    assert!(!html.contains("claims to be official"), "{html}");
    assert!(!html.contains("What the app says about itself"), "{html}");
}

#[tokio::test]
async fn a_step_up_lists_only_what_is_new() {
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    let client_id = register(&app, json!({"client_name": "Notes helper"})).await;
    // First approval: read only.
    code_in(&app, &browser, &client_id, &[("scope", "mcp:read")]).await;
    // The app now asks for write as well.
    let html = consent_page(
        &app,
        &browser,
        &client_id,
        &[("scope", "mcp:read mcp:write")],
    )
    .await;
    assert_eq!(h1(&html), "The app at 127.0.0.1:7777 asks for more access");
    let new = html
        .split("<ul class=\"scopes new\">")
        .nth(1)
        .and_then(|rest| rest.split("</ul>").next())
        .expect("the list of what is new");
    assert!(
        new.contains("Create and change notes in your projects"),
        "{new}"
    );
    assert!(!new.contains("Read your projects and notes"), "{new}");
    assert!(
        html.contains("Already allowed: Read your projects and notes."),
        "{html}"
    );
    // Asked again for what is already allowed (prompt=consent): a first-approval page.
    let html = consent_page(
        &app,
        &browser,
        &client_id,
        &[("scope", "mcp:read"), ("prompt", "consent")],
    )
    .await;
    assert!(h1(&html).starts_with("Allow an app at"), "{html}");
    assert!(!html.contains("Already allowed"), "{html}");
    assert!(hidden_input(&html, "request").is_some());
}

/// Serves one client ID metadata document.
struct OneDocument(Value);

#[async_trait]
impl MetadataFetcher for OneDocument {
    async fn fetch(&self, _url: &Url) -> Result<Fetched, CimdError> {
        Ok(Fetched {
            body: self.0.to_string().into_bytes(),
            cache_control: None,
        })
    }
}

#[tokio::test]
async fn a_metadata_document_client_is_headlined_by_its_publisher() {
    const CLIENT: &str = "https://publisher.example/oauth/client.json";
    let fetcher = Arc::new(OneDocument(json!({
        "client_id": CLIENT,
        "client_name": "Publisher's app",
        "redirect_uris": [REDIRECT],
        "token_endpoint_auth_method": "none",
    })));
    let app = spawn_app_full(|_| {}, fetcher).await;
    let browser = signed_in_browser(&app).await;
    let html = consent_page(&app, &browser, CLIENT, &[]).await;
    assert_eq!(
        h1(&html),
        "Allow an app at publisher.example to use your Gatehouse account?"
    );
    assert!(
        html.contains("The app's identity is a document published at publisher.example."),
        "{html}"
    );
    assert!(
        html.contains("you will be sent back to <strong>127.0.0.1:7777</strong>"),
        "{html}"
    );
}
