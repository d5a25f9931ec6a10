//! Clients identified by a client ID metadata document URL (MCP 2025-11-25, CIMD draft).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use gatehouse::domain::cimd::CimdError;
use gatehouse::oauth::clients::{Fetched, MetadataFetcher};
use reqwest::StatusCode;
use serde_json::{Value, json};
use url::Url;

use crate::helpers::{new_client, spawn_app, spawn_app_full};
use crate::oauth_helpers::*;

const CLIENT: &str = "https://app.example.com/oauth/client.json";

/// Serves documents from memory and counts fetches; a URL may be set to fail once.
#[derive(Default)]
struct FakeFetcher {
    docs: Mutex<HashMap<String, (Value, Option<String>)>>,
    fail_next: Mutex<Option<String>>,
    fetches: AtomicUsize,
}

#[async_trait]
impl MetadataFetcher for FakeFetcher {
    async fn fetch(&self, url: &Url) -> Result<Fetched, CimdError> {
        self.fetches.fetch_add(1, Ordering::SeqCst);
        if self.fail_next.lock().unwrap().take().as_deref() == Some(url.as_str()) {
            return Err(CimdError::Unavailable("HTTP status 503".into()));
        }
        match self.docs.lock().unwrap().get(url.as_str()) {
            Some((doc, cc)) => Ok(Fetched {
                body: doc.to_string().into_bytes(),
                cache_control: cc.clone(),
            }),
            None => Err(CimdError::Fetch("HTTP status 404".into())),
        }
    }
}

fn document(client_id: &str) -> Value {
    json!({"client_id": client_id, "client_name": "Metadata App", "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"})
}

#[tokio::test]
async fn a_metadata_document_client_completes_the_flow_and_is_cached() {
    let fetcher = Arc::new(FakeFetcher::default());
    fetcher.docs.lock().unwrap().insert(
        CLIENT.into(),
        (document(CLIENT), Some("public, max-age=600".into())),
    );
    let app = spawn_app_full(|_| {}, fetcher.clone()).await;
    let m: Value = app
        .client
        .get(app.url("/.well-known/oauth-authorization-server"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(m["client_id_metadata_document_supported"], true);
    let (verifier, challenge) = pkce();
    let browser = new_client();
    let r = browser
        .get(authorize_url(&app, CLIENT, &challenge, &[]))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::SEE_OTHER,
        "valid client: on to sign-in"
    );
    let loc = walk(
        &app,
        &browser,
        &authorize_url(&app, CLIENT, &challenge, &[]),
        "approve",
    )
    .await;
    let q = query_of(&loc);
    assert_eq!(q["iss"], app.address);
    let (s, body, _) = exchange(&app, CLIENT, &q["code"], &verifier, &[]).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let (s, _) = refresh(&app, CLIENT, body["refresh_token"].as_str().unwrap(), &[]).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        fetcher.fetches.load(Ordering::SeqCst),
        1,
        "cached for its max-age"
    );
    let apps = app
        .store
        .connected_apps(
            &app.store
                .account_by_email(&gatehouse::domain::account::Email::parse(EMAIL).unwrap())
                .await
                .unwrap()
                .unwrap()
                .id,
        )
        .await
        .unwrap();
    assert_eq!(apps[0].client_name.as_deref(), Some("Metadata App"));
}

#[tokio::test]
async fn bad_documents_show_an_error_page_and_errors_are_not_cached() {
    let fetcher = Arc::new(FakeFetcher::default());
    let other = "https://app.example.com/other.json";
    let foreign = "https://app.example.com/foreign.json";
    {
        let mut docs = fetcher.docs.lock().unwrap();
        docs.insert(CLIENT.into(), (document(CLIENT), None));
        docs.insert(
            other.into(),
            (document("https://app.example.com/someone-else.json"), None),
        );
        docs.insert(foreign.into(), (json!({"client_id": foreign, "client_name": "X", "redirect_uris": [REDIRECT], "client_secret": "s"}), None));
    }
    *fetcher.fail_next.lock().unwrap() = Some(CLIENT.into());
    let app = spawn_app_full(|_| {}, fetcher.clone()).await;
    let (_, challenge) = pkce();
    // A fetch that fails for now (a 503) is a "try again" page, never a redirect.
    let r = app
        .client
        .get(authorize_url(&app, CLIENT, &challenge, &[]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE, "fetch fails");
    assert!(r.headers().get("location").is_none());
    assert!(r.headers().get("retry-after").is_some());
    for (client, why) in [
        (other, "client_id mismatch"),
        (foreign, "secret in document"),
        ("https://app.example.com/missing.json", "404"),
        ("https://app.example.com", "no path"),
    ] {
        let r = app
            .client
            .get(authorize_url(&app, client, &challenge, &[]))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{why}");
        assert!(
            r.headers().get("location").is_none(),
            "{why}: never redirects"
        );
    }
    // The failed fetch was not cached: the next request fetches again and succeeds.
    let r = app
        .client
        .get(authorize_url(&app, CLIENT, &challenge, &[]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    // A redirect URI not in the document is refused on a page.
    let r = app
        .client
        .get(authorize_url(
            &app,
            CLIENT,
            &challenge,
            &[("redirect_uri", "https://evil.example/cb")],
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.headers().get("location").is_none());
}

#[tokio::test]
async fn documents_on_private_or_loopback_addresses_are_never_fetched() {
    let app = spawn_app().await;
    let (_, challenge) = pkce();
    for client in [
        "https://127.0.0.1/client.json",
        "https://localhost/client.json",
        "https://[::1]/client.json",
        "https://169.254.169.254/latest/meta-data",
    ] {
        let r = app
            .client
            .get(authorize_url(&app, client, &challenge, &[]))
            .send()
            .await
            .unwrap();
        // Answered like a fetch that failed for now (503, "try again"), so the page cannot
        // tell which names resolve to internal addresses (issue 30, finding 11).
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE, "{client}");
        let page = r.text().await.unwrap();
        // One message for a forbidden address and a failed fetch.
        assert!(page.contains("could not be fetched"), "{client}: {page}");
        assert!(!page.contains("private"), "{client}: {page}");
    }
    // At the token endpoint a forbidden address is answered like a lookup or connection that
    // failed: 503 `temporarily_unavailable`, never `invalid_client`.
    let (s, b, h) = exchange(&app, "https://127.0.0.1/client.json", "gate_ac_x", "v", &[]).await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(b["error"], "temporarily_unavailable");
    assert!(h.get("retry-after").is_some());
}
