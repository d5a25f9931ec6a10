//! Client addresses behind a reverse proxy (`GATEHOUSE_TRUSTED_PROXIES`; issue "Credentials
//! beyond the browser", bullet 6): from a trusted peer the client is the rightmost
//! `X-Forwarded-For` entry that is not itself a trusted proxy; from any other peer the header
//! is ignored. Project-key allow-lists, registration limits, sign-in throttling and audit
//! source addresses all use that one address.

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{TestApp, spawn_app_with};
use crate::keys::{ALICE, alice, create_key};
use crate::mcp::modern;
use crate::oauth_helpers::REDIRECT;

/// The peer trusted as a proxy in these tests (any 127.0.0.0/8 address is this machine).
const PROXY: &str = "127.0.0.2";

/// A server trusting `PROXY` and 10.0.0.0/8 as proxies, with `adjust` applied after.
async fn behind_proxy(
    adjust: impl FnOnce(&mut std::collections::HashMap<String, String>),
) -> TestApp {
    spawn_app_with(|v| {
        v.insert(
            "GATEHOUSE_TRUSTED_PROXIES".into(),
            format!("{PROXY}/32, 10.0.0.0/8"),
        );
        adjust(v);
    })
    .await
}

/// An HTTP client whose connections come from `source` and carry `X-Forwarded-For: xff`.
fn client(source: &str, xff: Option<&str>) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(xff) = xff {
        headers.insert("x-forwarded-for", xff.parse().unwrap());
    }
    crate::helpers::client_builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .local_address(source.parse::<std::net::IpAddr>().unwrap())
        .default_headers(headers)
        .build()
        .unwrap()
}

/// `list_projects` with `key` in `X-Api-Key`, sent by `via`: the HTTP status.
async fn list_projects(app: &TestApp, via: &reqwest::Client, key: &str) -> StatusCode {
    let request = modern(
        app,
        None,
        "tools/call",
        json!({"name": "list_projects", "arguments": {}}),
    )
    .header("x-api-key", key)
    .build()
    .unwrap();
    via.execute(request).await.unwrap().status()
}

#[tokio::test]
async fn a_forwarded_address_counts_only_from_a_trusted_proxy() {
    let app = behind_proxy(|_| {}).await;
    let (_, research, _) = alice(&app).await;
    let (_, key) = create_key(
        &app,
        &[
            "--account",
            ALICE,
            "--project",
            &research,
            "--allow-ip",
            "203.0.113.7",
        ],
    );
    // Through the trusted proxy, the forwarded address is the client's.
    let trusted = client(PROXY, Some("203.0.113.7"));
    assert_eq!(list_projects(&app, &trusted, &key).await, StatusCode::OK);
    // A chain of trusted proxies is walked from the right.
    let chain = client(PROXY, Some("203.0.113.7, 10.1.2.3"));
    assert_eq!(list_projects(&app, &chain, &key).await, StatusCode::OK);
    // From a peer that is not a trusted proxy, the header is ignored: the client is the peer.
    let direct = client("127.0.0.1", Some("203.0.113.7"));
    assert_eq!(
        list_projects(&app, &direct, &key).await,
        StatusCode::FORBIDDEN
    );
    // Entries left of the first untrusted one are the client's to write: never believed.
    for spoofed in [
        "203.0.113.7, 198.51.100.9",
        "203.0.113.7, 198.51.100.9, 10.1.2.3",
    ] {
        let spoofing = client(PROXY, Some(spoofed));
        assert_eq!(
            list_projects(&app, &spoofing, &key).await,
            StatusCode::FORBIDDEN,
            "{spoofed}"
        );
    }
}

#[tokio::test]
async fn without_trusted_proxies_the_header_is_ignored() {
    let app = spawn_app_with(|_| {}).await;
    let (_, research, _) = alice(&app).await;
    let (_, key) = create_key(
        &app,
        &[
            "--account",
            ALICE,
            "--project",
            &research,
            "--allow-ip",
            "203.0.113.7",
        ],
    );
    let forwarded = client(PROXY, Some("203.0.113.7"));
    assert_eq!(
        list_projects(&app, &forwarded, &key).await,
        StatusCode::FORBIDDEN
    );
}

/// Registers a public client through `via`: the HTTP status.
async fn register(app: &TestApp, via: &reqwest::Client) -> StatusCode {
    via.post(app.url("/oauth/register"))
        .json(&json!({
            "redirect_uris": [REDIRECT],
            "token_endpoint_auth_method": "none",
            "client_name": "Test Client",
        }))
        .send()
        .await
        .unwrap()
        .status()
}

#[tokio::test]
async fn registration_limits_and_the_audit_count_the_forwarded_client() {
    let app = behind_proxy(|v| {
        v.insert("GATEHOUSE_REGISTRATIONS_PER_HOUR".into(), "1".into());
    })
    .await;
    let first = client(PROXY, Some("203.0.113.7"));
    let second = client(PROXY, Some("198.51.100.9"));
    assert_eq!(register(&app, &first).await, StatusCode::CREATED);
    // Another client behind the same proxy has its own budget.
    assert_eq!(register(&app, &second).await, StatusCode::CREATED);
    assert_eq!(register(&app, &first).await, StatusCode::TOO_MANY_REQUESTS);
    // A spoofed leftmost entry does not buy a fresh budget.
    let spoofing = client(PROXY, Some("192.0.2.1, 203.0.113.7"));
    assert_eq!(
        register(&app, &spoofing).await,
        StatusCode::TOO_MANY_REQUESTS
    );

    // Sign-in attempts are throttled and audited under the forwarded address.
    app.create_account(ALICE, "a-long-password").await;
    app.sign_in(&first, ALICE, "a-wrong-password").await;
    let audit = app.store.recent_audit(100).await.unwrap();
    let signin = audit
        .iter()
        .find(|r| r.event == "signin")
        .expect("a sign-in row");
    assert_eq!(signin.source_ip.as_deref(), Some("203.0.113.7"));
    let registrations: Vec<_> = audit
        .iter()
        .filter(|r| r.event == "client_registered")
        .map(|r| r.source_ip.as_deref())
        .collect();
    assert_eq!(registrations.len(), 2, "{audit:?}");
    assert!(registrations.contains(&Some("203.0.113.7")));
    assert!(registrations.contains(&Some("198.51.100.9")));
}
