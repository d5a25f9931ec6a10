//! Client ID metadata documents and the registration budget (issue 30, finding 4): an
//! anonymous visitor's new metadata-document clients spend the same per-address budget as
//! dynamic registrations, such clients that never get a consent expire like registered ones
//! (and are fetched again when used again), and the resolver's in-memory cache is bounded.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use gatehouse::domain::cimd::CimdError;
use gatehouse::oauth::clients::{Fetched, MetadataFetcher};
use reqwest::StatusCode;
use serde_json::json;
use url::Url;

use crate::helpers::{TestApp, new_client_from, spawn_app_full};
use crate::oauth_helpers::{EMAIL, PASSWORD, REDIRECT, authorize_url, pkce};

/// Serves a valid document for any URL (its own `client_id`), cacheable for ten minutes, and
/// counts fetches.
#[derive(Default)]
struct AnyDocument {
    fetches: AtomicUsize,
}

#[async_trait]
impl MetadataFetcher for AnyDocument {
    async fn fetch(&self, url: &Url) -> Result<Fetched, CimdError> {
        self.fetches.fetch_add(1, Ordering::SeqCst);
        let doc = json!({"client_id": url.as_str(), "client_name": "Some App",
            "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"});
        Ok(Fetched {
            body: doc.to_string().into_bytes(),
            cache_control: Some("max-age=600".into()),
        })
    }
}

async fn app_with_budget(fetcher: Arc<AnyDocument>) -> TestApp {
    spawn_app_full(
        |v| {
            v.insert("GATEHOUSE_REGISTRATIONS_PER_HOUR".into(), "3".into());
        },
        fetcher,
    )
    .await
}

/// `GET /oauth/authorize` for `client_id` from `browser`: the status.
async fn authorize(app: &TestApp, browser: &reqwest::Client, client_id: &str) -> StatusCode {
    let (_, challenge) = pkce();
    browser
        .get(authorize_url(app, client_id, &challenge, &[]))
        .send()
        .await
        .unwrap()
        .status()
}

async fn stored(app: &TestApp, client_id: &str) -> bool {
    app.store.client(client_id).await.unwrap().is_some()
}

#[tokio::test]
async fn anonymous_metadata_document_clients_spend_the_registration_budget() {
    let fetcher = Arc::new(AnyDocument::default());
    let app = app_with_budget(fetcher.clone()).await;
    let visitor = new_client_from("127.0.2.1");
    for n in 0..3 {
        let id = format!("https://apps{n}.example.com/client.json");
        assert_eq!(authorize(&app, &visitor, &id).await, StatusCode::SEE_OTHER);
        assert!(stored(&app, &id).await);
    }
    // The fourth new application from the address: refused before any fetch, nothing stored.
    let fourth = "https://apps3.example.com/client.json";
    let (_, challenge) = pkce();
    let r = visitor
        .get(authorize_url(&app, fourth, &challenge, &[]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(r.headers().get("retry-after").is_some());
    assert!(r.headers().get("location").is_none(), "never redirects");
    assert_eq!(fetcher.fetches.load(Ordering::SeqCst), 3);
    assert!(!stored(&app, fourth).await);
    // The same path through the token endpoint spends the same budget.
    let r = visitor
        .post(app.url("/oauth/token"))
        .form(&[
            ("grant_type", "authorization_code"),
            ("client_id", "https://apps4.example.com/client.json"),
            ("code", "gate_ac_x"),
            ("code_verifier", "v"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(!stored(&app, "https://apps4.example.com/client.json").await);
    assert_eq!(fetcher.fetches.load(Ordering::SeqCst), 3);
    // Known applications still resolve for the address, another address has its own
    // budget, and a signed-in person spends none.
    assert_eq!(
        authorize(&app, &visitor, "https://apps0.example.com/client.json").await,
        StatusCode::SEE_OTHER
    );
    let other = new_client_from("127.0.2.2");
    assert_eq!(authorize(&app, &other, fourth).await, StatusCode::SEE_OTHER);
    app.create_account(EMAIL, PASSWORD).await;
    let person = new_client_from("127.0.2.1");
    assert_eq!(
        app.sign_in(&person, EMAIL, PASSWORD).await.status(),
        StatusCode::SEE_OTHER
    );
    assert_eq!(
        authorize(&app, &person, "https://apps5.example.com/client.json").await,
        StatusCode::OK,
        "the consent page"
    );
}

#[tokio::test]
async fn metadata_document_clients_without_consent_expire_and_are_fetched_again() {
    let fetcher = Arc::new(AnyDocument::default());
    let app = app_with_budget(fetcher.clone()).await;
    let visitor = new_client_from("127.0.2.3");
    let id = "https://unused.example.com/client.json";
    assert_eq!(authorize(&app, &visitor, id).await, StatusCode::SEE_OTHER);
    assert!(stored(&app, id).await);
    let now = gatehouse::store::now();
    // A day and a bit later (the default GATEHOUSE_UNUSED_CLIENT_MAX_AGE is a day).
    let deleted = app
        .store
        .expire_unused_clients(now + 1, now + 90_000)
        .await
        .unwrap();
    assert_eq!(deleted, 1);
    assert!(!stored(&app, id).await, "expired like a registered client");
    // Used again: fetched again (the in-memory copy is not trusted without its row).
    let fetched = fetcher.fetches.load(Ordering::SeqCst);
    assert_eq!(authorize(&app, &visitor, id).await, StatusCode::SEE_OTHER);
    assert_eq!(fetcher.fetches.load(Ordering::SeqCst), fetched + 1);
    assert!(stored(&app, id).await);
}
