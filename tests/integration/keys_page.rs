//! The console's `/keys` page (issues "Keys and personal URLs" and the console bullets of
//! "Credentials beyond the browser"): API keys and personal MCP URLs made and revoked by a
//! signed-in person, the secret shown once, another account's credentials out of reach.

use reqwest::StatusCode;
use serde_json::json;

use crate::console::{account_id, page, post_form};
use crate::helpers::{TestApp, html_unescape, new_client, spawn_app};
use crate::keys::{call_with_header, create_key};
use crate::oauth_helpers::{EMAIL, signed_in_browser};
use crate::urls::{assert_invalid_token, call_url};

/// The `value` of the read-only input `id` on a page showing a new secret.
fn shown(html: &str, id: &str) -> Option<String> {
    let marker = format!("id=\"{id}\" type=\"text\" readonly value=\"");
    let start = html.find(&marker)? + marker.len();
    let end = html[start..].find('"')? + start;
    Some(html_unescape(&html[start..end]))
}

async fn list_projects_status(app: &TestApp, key: &str) -> StatusCode {
    call_with_header(app, key, "list_projects", json!({}))
        .await
        .0
}

#[tokio::test]
async fn signed_out_the_keys_page_sends_to_sign_in() {
    let app = spawn_app().await;
    let r = new_client().get(app.url("/keys")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], "/signin?next=%2Fkeys");
}

#[tokio::test]
async fn a_key_made_on_the_page_works_is_shown_once_and_revokes() {
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    let alice = account_id(&app, EMAIL).await;
    let project = app
        .store
        .create_project("Garden plans", &alice, gatehouse::store::now())
        .await
        .unwrap();
    let html = page(&app, &browser, "/").await;
    assert!(html.contains("href=\"/keys\">Keys</a>"), "navigation link");
    let r = post_form(
        &app,
        &browser,
        "/keys",
        "/keys/create",
        &[
            ("name", "Laptop"),
            ("project", ""),
            ("access", "write"),
            ("expires", "90"),
        ],
    )
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    let html = r.text().await.unwrap();
    let key = shown(&html, "created-secret").expect("the key on the page");
    assert!(key.starts_with("gate_"), "{key}");
    let claude = shown(&html, "created-claude").expect("the claude line");
    assert!(
        claude.starts_with("claude mcp add --transport http gatehouse ")
            && claude.ends_with(&format!("--header \"X-Api-Key: {key}\"")),
        "{claude}"
    );
    assert!(html.contains("mcpServers") && html.contains("shown only this once"));
    assert_eq!(list_projects_status(&app, &key).await, StatusCode::OK);

    // A reload shows the key in the list, never its secret.
    let listed = page(&app, &browser, "/keys").await;
    assert!(!listed.contains(&key), "the key is shown only once");
    assert!(listed.contains("Laptop") && listed.contains("read-write"));
    assert!(listed.contains("account") && listed.contains("active"));

    // A project key names its project.
    let r = post_form(
        &app,
        &browser,
        "/keys",
        "/keys/create",
        &[
            ("name", "Garden key"),
            ("project", project.as_str()),
            ("access", "read"),
            ("expires", "none"),
        ],
    )
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    let listed = page(&app, &browser, "/keys").await;
    assert!(listed.contains("project Garden plans"), "{listed}");

    let keys = app.store.api_keys(Some(&alice)).await.unwrap();
    let laptop = keys.iter().find(|k| k.name == "Laptop").unwrap();
    let r = post_form(
        &app,
        &browser,
        "/keys",
        "/keys/revoke",
        &[("id", laptop.id.as_str())],
    )
    .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], "/keys");
    assert_eq!(
        list_projects_status(&app, &key).await,
        StatusCode::UNAUTHORIZED
    );
    let listed = page(&app, &browser, "/keys").await;
    assert!(listed.contains("API key “Laptop” revoked") && listed.contains("revoked"));
}

#[tokio::test]
async fn a_personal_url_made_on_the_page_works_without_a_header_until_revoked() {
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    let alice = account_id(&app, EMAIL).await;
    let keys_html = page(&app, &browser, "/keys").await;
    assert!(keys_html.contains("anyone who has it acts as you"));
    let r = post_form(
        &app,
        &browser,
        "/keys",
        "/keys/urls/create",
        &[
            ("name", "Phone"),
            ("project", ""),
            ("access", "read"),
            ("expires", "30"),
        ],
    )
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    let html = r.text().await.unwrap();
    let url = shown(&html, "created-secret").expect("the URL on the page");
    let secret = url.rsplit('/').next().unwrap().to_string();
    assert!(url.ends_with(&format!("/mcp/{secret}")), "{url}");
    assert!(html.contains("This URL is a credential"));
    let (status, _, _) = call_url(&app, &secret, "list_projects", json!({})).await;
    assert_eq!(status, StatusCode::OK);
    assert!(!page(&app, &browser, "/keys").await.contains(&secret));

    let urls = app.store.personal_urls(Some(&alice)).await.unwrap();
    assert_eq!(urls.len(), 1);
    let r = post_form(
        &app,
        &browser,
        "/keys",
        "/keys/urls/revoke",
        &[("id", urls[0].id.as_str())],
    )
    .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (status, headers, _) = call_url(&app, &secret, "list_projects", json!({})).await;
    assert_invalid_token(status, &headers, "revoked on the page");
}

#[tokio::test]
async fn another_accounts_key_or_url_cannot_be_revoked_from_the_page() {
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    app.create_account("bob@example.com", "bob-password-1")
        .await;
    let (bob_key_id, bob_key) = create_key(&app, &["--account", "bob@example.com"]);
    for id in [bob_key_id.as_str(), "no-such-key"] {
        let r = post_form(&app, &browser, "/keys", "/keys/revoke", &[("id", id)]).await;
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{id}");
    }
    assert_eq!(list_projects_status(&app, &bob_key).await, StatusCode::OK);
    let bob = account_id(&app, "bob@example.com").await;
    let secret = gatehouse::domain::secret::Secret::generate(
        gatehouse::domain::secret::TokenKind::PersonalUrl,
    );
    let url_id = app
        .store
        .create_personal_url(
            &gatehouse::store::urls::NewPersonalUrl {
                account_id: &bob,
                project_id: None,
                name: "Bob's",
                scope: "mcp:read",
                expires_at: None,
            },
            &secret.hash(),
            gatehouse::store::now(),
        )
        .await
        .unwrap();
    let r = post_form(
        &app,
        &browser,
        "/keys",
        "/keys/urls/revoke",
        &[("id", url_id.as_str())],
    )
    .await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let record = app.store.personal_url(&url_id).await.unwrap().unwrap();
    assert!(record.revoked_at.is_none());
    assert!(!page(&app, &browser, "/keys").await.contains("Bob&#39;s"));
}

#[tokio::test]
async fn a_refused_form_keeps_what_was_entered_and_makes_nothing() {
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    let alice = account_id(&app, EMAIL).await;
    let r = post_form(
        &app,
        &browser,
        "/keys",
        "/keys/urls/create",
        &[
            ("name", "Tablet"),
            ("project", ""),
            ("access", "write"),
            ("expires", "400"),
        ],
    )
    .await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let html = r.text().await.unwrap();
    assert!(html.contains("1 to 365 days"), "{html}");
    assert!(html.contains("value=\"Tablet\"") && html.contains("value=\"400\""));
    let r = post_form(
        &app,
        &browser,
        "/keys",
        "/keys/create",
        &[
            ("name", "Elsewhere"),
            ("project", "not-my-project"),
            ("access", "read"),
            ("expires", "30"),
        ],
    )
    .await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let html = r.text().await.unwrap();
    assert!(html.contains("not a member of that project") && html.contains("value=\"Elsewhere\""));
    assert!(app.store.api_keys(Some(&alice)).await.unwrap().is_empty());
    assert!(
        app.store
            .personal_urls(Some(&alice))
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn creation_and_revocation_are_audited_without_the_secret() {
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    let alice = account_id(&app, EMAIL).await;
    let r = post_form(
        &app,
        &browser,
        "/keys",
        "/keys/create",
        &[
            ("name", "Audited"),
            ("project", ""),
            ("access", "read"),
            ("expires", "30"),
        ],
    )
    .await;
    let key = shown(&r.text().await.unwrap(), "created-secret").unwrap();
    let id = app.store.api_keys(Some(&alice)).await.unwrap()[0]
        .id
        .clone();
    post_form(
        &app,
        &browser,
        "/keys",
        "/keys/revoke",
        &[("id", id.as_str())],
    )
    .await;
    let mut events = Vec::new();
    for _ in 0..100 {
        events = app.store.recent_audit(200).await.unwrap();
        if events.iter().any(|e| e.event == "key_revoked") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    for event in ["key_created", "key_revoked"] {
        let row = events
            .iter()
            .find(|e| e.event == event)
            .unwrap_or_else(|| panic!("no {event}"));
        assert_eq!(row.account_id.as_deref(), Some(alice.as_str()));
        assert_eq!(row.subject.as_deref(), Some(id.as_str()));
        assert!(row.detail.as_deref().unwrap().starts_with("actor=console"));
        assert!(row.source_ip.is_some());
    }
    assert!(!format!("{events:?}").contains(&key));
}
