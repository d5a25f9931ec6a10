//! The console pages: one CSRF-checked form extractor behind every page form, the home,
//! project, connected-apps and account pages.

use crate::helpers::{TestApp, hidden_input, html_unescape, new_client, spawn_app};
use crate::oauth_helpers::{
    EMAIL, PASSWORD, REDIRECT, code_in, register_public, revoke_on_apps_page, signed_in_browser,
};
use gatehouse::domain::account::{Email, Role};
use gatehouse::domain::audit::{Event, Outcome};
use gatehouse::store::audit::AuditEvent;
use gatehouse::store::notes::NewNote;
use gatehouse::store::now;
use gatehouse::store::oauth::ClientRecord;
use reqwest::StatusCode;

/// A client without a cookie jar and without redirects, for requests with hand-made cookies.
fn bare_client() -> reqwest::Client {
    crate::helpers::client_builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// `name=value` of the cookie `name` set by `r`.
fn set_cookie(r: &reqwest::Response, name: &str) -> Option<String> {
    r.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap().to_string())
        .find(|c| c.starts_with(&format!("{name}=")))
}

/// The session cookie of a fresh sign-in as `EMAIL` (created if missing).
async fn session_cookie_of_sign_in(app: &TestApp) -> String {
    signed_in_browser(app).await;
    let r = app.sign_in(&new_client(), EMAIL, PASSWORD).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    set_cookie(&r, "gatehouse_session").expect("a session cookie")
}

#[tokio::test]
async fn once_signed_in_a_planted_csrf_cookie_does_not_count() {
    let app = spawn_app().await;
    app.create_account("mallory@example.com", "mallory-password")
        .await;
    let session = session_cookie_of_sign_in(&app).await;
    // Someone able to plant a cookie sets `gatehouse_csrf` and submits a form with the same
    // value to sign the victim's browser into their own account.
    let planted = "A".repeat(43);
    let r = bare_client()
        .post(app.url("/signin"))
        .header("cookie", format!("{session}; gatehouse_csrf={planted}"))
        .form(&[
            ("csrf_token", planted.as_str()),
            ("next", "/"),
            ("email", "mallory@example.com"),
            ("password", "mallory-password"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert!(r.text().await.unwrap().contains("Form expired"));
}

#[tokio::test]
async fn every_page_form_refuses_a_missing_or_forged_token() {
    let app = spawn_app().await;
    let session = session_cookie_of_sign_in(&app).await;
    for path in [
        "/signin",
        "/setup",
        "/signout",
        "/apps/revoke",
        "/apps/tools",
        "/upstreams/approve",
        "/upstreams/disable",
        "/upstreams/enable",
        "/oauth/authorize/decision",
        "/keys/create",
        "/keys/revoke",
        "/keys/urls/create",
        "/keys/urls/revoke",
    ] {
        for token in [None, Some("forged-token")] {
            let mut form = vec![("decision", "approve"), ("consent_id", "x")];
            if let Some(t) = token {
                form.push(("csrf_token", t));
            }
            let r = bare_client()
                .post(app.url(path))
                .header("cookie", session.as_str())
                .form(&form)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::FORBIDDEN, "{path} {token:?}");
            assert!(r.text().await.unwrap().contains("Form expired"), "{path}");
        }
    }
    // Still signed in: nothing was changed.
    let r = bare_client()
        .get(app.url("/"))
        .header("cookie", session.as_str())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

// ---- pages ----

/// The body of `GET path` in `browser` (asserting `200`).
pub(crate) async fn page(app: &TestApp, browser: &reqwest::Client, path: &str) -> String {
    let r = browser.get(app.url(path)).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK, "GET {path}");
    r.text().await.unwrap()
}

/// POSTs `form` (plus the CSRF token found on `form_page`) in `browser`.
pub(crate) async fn post_form(
    app: &TestApp,
    browser: &reqwest::Client,
    form_page: &str,
    path: &str,
    form: &[(&str, &str)],
) -> reqwest::Response {
    let html = page(app, browser, form_page).await;
    let csrf = hidden_input(&html, "csrf_token").expect("csrf_token on the page");
    let mut fields = vec![("csrf_token", csrf.as_str())];
    fields.extend_from_slice(form);
    browser
        .post(app.url(path))
        .form(&fields)
        .send()
        .await
        .unwrap()
}

pub(crate) async fn account_id(app: &TestApp, email: &str) -> String {
    app.store
        .account_by_email(&Email::parse(email).unwrap())
        .await
        .unwrap()
        .unwrap()
        .id
}

async fn add_note(
    app: &TestApp,
    project: &str,
    author: &str,
    title: &str,
    body: &str,
) -> gatehouse::store::notes::Note {
    app.store
        .create_note(
            &NewNote {
                project_id: project,
                author_account_id: author,
                title,
                body,
                tags: &[],
            },
            now(),
        )
        .await
        .unwrap()
}

#[tokio::test]
async fn home_lists_the_projects_with_role_and_note_count() {
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    let alice = account_id(&app, EMAIL).await;
    let bob = app
        .create_account("bob@example.com", "bob-password-1")
        .await;
    let mine = app
        .store
        .create_project("Garden plans", &alice, now())
        .await
        .unwrap();
    add_note(&app, &mine, &alice, "Tomatoes", "plant in May").await;
    add_note(&app, &mine, &alice, "Beans", "plant in June").await;
    let shared = app
        .store
        .create_project("Bob's recipes", &bob, now())
        .await
        .unwrap();
    app.store
        .add_member(&shared, &alice, Role::Read, now())
        .await
        .unwrap();
    let hidden = app
        .store
        .create_project("Bob's secrets", &bob, now())
        .await
        .unwrap();
    let home = html_unescape(&page(&app, &browser, "/").await);
    assert!(
        home.contains(&format!("href=\"/projects/{mine}\"")),
        "{home}"
    );
    assert!(
        home.contains(&format!("href=\"/projects/{shared}\"")),
        "{home}"
    );
    assert!(home.contains("Garden plans") && home.contains("Bob's recipes"));
    assert!(home.contains("2 notes"), "{home}");
    assert!(home.contains("0 notes"), "{home}");
    assert!(home.contains("read") && home.contains("write"));
    assert!(!home.contains("Bob's secrets") && !home.contains(&hidden));
}

#[tokio::test]
async fn project_page_lists_notes_and_members_and_searches_like_the_tool() {
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    let alice = account_id(&app, EMAIL).await;
    let bob = app
        .create_account("bob@example.com", "bob-password-1")
        .await;
    let p = app
        .store
        .create_project("Garden plans", &alice, now())
        .await
        .unwrap();
    app.store
        .add_member(&p, &bob, Role::Read, now())
        .await
        .unwrap();
    add_note(&app, &p, &alice, "Tomatoes", "plant them in May").await;
    let beans = add_note(&app, &p, &alice, "Beans", "sow in June").await;
    let html = page(&app, &browser, &format!("/projects/{p}")).await;
    assert!(
        html.contains(&gatehouse::web::when(beans.updated_at)),
        "{html}"
    );
    assert!(html.contains("Garden plans") && html.contains("Tomatoes") && html.contains("Beans"));
    assert!(html.contains("bob@example.com") && html.contains(EMAIL));
    assert!(html.contains("<input") && html.contains("name=\"q\""));
    // The same search as the `search_notes` tool.
    let hits = app.store.search_notes(&p, "june", 50).await.unwrap();
    assert_eq!(hits.len(), 1);
    let html = page(&app, &browser, &format!("/projects/{p}?q=june")).await;
    assert!(
        html.contains("Beans") && !html.contains("Tomatoes"),
        "{html}"
    );
    assert!(
        html.contains("value=\"june\""),
        "the query is kept in the box"
    );
    let html = page(&app, &browser, &format!("/projects/{p}?q=%22%29%28*")).await;
    assert!(!html.contains("Beans") && !html.contains("Tomatoes"));
}

#[tokio::test]
async fn a_project_of_another_account_answers_like_a_missing_one() {
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    let bob = app
        .create_account("bob@example.com", "bob-password-1")
        .await;
    let theirs = app
        .store
        .create_project("Bob's secrets", &bob, now())
        .await
        .unwrap();
    let a = browser
        .get(app.url(&format!("/projects/{theirs}")))
        .send()
        .await
        .unwrap();
    let b = browser
        .get(app.url("/projects/00000000-0000-4000-8000-000000000000"))
        .send()
        .await
        .unwrap();
    assert_eq!(a.status(), StatusCode::NOT_FOUND);
    assert_eq!(b.status(), StatusCode::NOT_FOUND);
    let a = a.text().await.unwrap();
    assert_eq!(a, b.text().await.unwrap());
    assert!(!a.contains("Bob"));
    // The member forms are no way in either.
    let home = page(&app, &browser, "/").await;
    let csrf = hidden_input(&home, "csrf_token").unwrap();
    let r = browser
        .post(app.url(&format!("/projects/{theirs}/members")))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("email", EMAIL),
            ("role", "write"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert!(
        app.store
            .membership(&account_id(&app, EMAIL).await, &theirs)
            .await
            .unwrap()
            .is_none()
    );
    // Signed out: to the sign-in page and back.
    let r = new_client()
        .get(app.url(&format!("/projects/{theirs}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert!(
        r.headers()["location"]
            .to_str()
            .unwrap()
            .starts_with("/signin?next=")
    );
}

#[tokio::test]
async fn an_owner_adds_and_removes_members_by_email() {
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    let alice = account_id(&app, EMAIL).await;
    let bob = app
        .create_account("bob@example.com", "bob-password-1")
        .await;
    let p = app
        .store
        .create_project("Garden plans", &alice, now())
        .await
        .unwrap();
    let path = format!("/projects/{p}");
    let members = format!("/projects/{p}/members");
    // Only people who already share a project with the owner can be added here (issue 30):
    // an account that shares none gets the same answer as an email without an account.
    let _carol = app
        .create_account("carol@example.com", "carol-password")
        .await;
    let mut answers = Vec::new();
    for email in ["carol@example.com", "nobody-here@example.com"] {
        let r = post_form(
            &app,
            &browser,
            &path,
            &members,
            &[("email", email), ("role", "read")],
        )
        .await;
        assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY, "{email}");
        let html = html_unescape(&r.text().await.unwrap());
        let alert = html
            .split("role=\"alert\"")
            .nth(1)
            .and_then(|rest| rest.split('<').next().map(str::to_string))
            .unwrap_or_default();
        answers.push(alert);
    }
    assert_eq!(answers[0], answers[1], "the same answer either way");
    let shared = app
        .store
        .create_project("Shared", &alice, now())
        .await
        .unwrap();
    app.store
        .add_member(&shared, &bob, Role::Read, now())
        .await
        .unwrap();
    let r = post_form(
        &app,
        &browser,
        &path,
        &members,
        &[("email", "Bob@Example.com"), ("role", "read")],
    )
    .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], path.as_str());
    let m = app.store.membership(&bob, &p).await.unwrap().unwrap();
    assert_eq!(m.role, Role::Read);
    assert!(
        page(&app, &browser, &path)
            .await
            .contains("bob@example.com")
    );
    // Changing the role.
    let r = post_form(
        &app,
        &browser,
        &path,
        &members,
        &[("email", "bob@example.com"), ("role", "write")],
    )
    .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        app.store.membership(&bob, &p).await.unwrap().unwrap().role,
        Role::Write
    );
    // Mistakes show on the page with the entered values kept.
    for (email, role) in [
        ("nobody@example.com", "read"),
        ("not an email", "read"),
        ("bob@example.com", "admin"),
    ] {
        let r = post_form(
            &app,
            &browser,
            &path,
            &members,
            &[("email", email), ("role", role)],
        )
        .await;
        assert_eq!(
            r.status(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "{email} {role}"
        );
        let html = html_unescape(&r.text().await.unwrap());
        assert!(html.contains("role=\"alert\""), "{html}");
        assert!(html.contains(&format!("value=\"{email}\"")), "{html}");
    }
    // Removing.
    let r = post_form(
        &app,
        &browser,
        &path,
        &format!("/projects/{p}/members/remove"),
        &[("account_id", &bob)],
    )
    .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert!(app.store.membership(&bob, &p).await.unwrap().is_none());
    // The owner stays.
    let r = post_form(
        &app,
        &browser,
        &path,
        &format!("/projects/{p}/members/remove"),
        &[("account_id", &alice)],
    )
    .await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(app.store.membership(&alice, &p).await.unwrap().is_some());
}

#[tokio::test]
async fn only_the_owner_manages_members() {
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    let alice = account_id(&app, EMAIL).await;
    let bob = app
        .create_account("bob@example.com", "bob-password-1")
        .await;
    let carol = app
        .create_account("carol@example.com", "carol-password")
        .await;
    let p = app
        .store
        .create_project("Bob's recipes", &bob, now())
        .await
        .unwrap();
    app.store
        .add_member(&p, &alice, Role::Write, now())
        .await
        .unwrap();
    let path = format!("/projects/{p}");
    let html = page(&app, &browser, &path).await;
    assert!(
        !html.contains(&format!("action=\"/projects/{p}/members\"")),
        "no form for a member"
    );
    let r = post_form(
        &app,
        &browser,
        &path,
        &format!("/projects/{p}/members"),
        &[("email", "carol@example.com"), ("role", "write")],
    )
    .await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert!(app.store.membership(&carol, &p).await.unwrap().is_none());
    let r = post_form(
        &app,
        &browser,
        &path,
        &format!("/projects/{p}/members/remove"),
        &[("account_id", &bob)],
    )
    .await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert!(app.store.membership(&bob, &p).await.unwrap().is_some());
}

async fn tool_call(
    app: &TestApp,
    account: &str,
    client: &str,
    tool: &str,
    project: &str,
    outcome: Outcome,
    at: i64,
) {
    app.store
        .record_audit(
            &AuditEvent {
                event: Event::ToolCall,
                outcome,
                account_id: Some(account),
                client_id: Some(client),
                subject: Some(tool),
                source_ip: Some("127.0.0.1"),
                detail: Some(&format!("project={project} duration_ms=3")),
            },
            at,
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn connected_apps_show_what_they_may_do_in_words_and_when_they_were_used() {
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    let alice = account_id(&app, EMAIL).await;
    let client = register_public(&app, &[REDIRECT]).await;
    code_in(&app, &browser, &client, &[]).await;
    let html = html_unescape(&page(&app, &browser, "/apps").await);
    assert!(html.contains("Test Client"), "{html}");
    assert!(html.contains("not verified"), "{html}");
    assert!(html.contains("127.0.0.1:7777"), "{html}");
    assert!(html.contains("Read your projects and notes"), "{html}");
    assert!(
        html.contains("Create and change notes in your projects"),
        "{html}"
    );
    assert!(!html.contains("mcp:read"), "no raw scopes: {html}");
    assert!(html.contains("Never used"), "{html}");
    let p = app
        .store
        .create_project("Garden plans", &alice, now())
        .await
        .unwrap();
    // 2026-01-02 03:04 UTC
    tool_call(
        &app,
        &alice,
        &client,
        "search_notes",
        &p,
        Outcome::Success,
        1_767_323_040,
    )
    .await;
    let html = page(&app, &browser, "/apps").await;
    assert!(html.contains("2026-01-02 03:04 UTC"), "{html}");
    // Revoked apps leave the list.
    revoke_on_apps_page(&app, &browser).await;
    let html = page(&app, &browser, "/apps").await;
    assert!(!html.contains("<h2>Test Client</h2>") && hidden_input(&html, "consent_id").is_none());
    // The notice names the app that was revoked, once.
    assert!(
        html.contains("Test Client can no longer use your account."),
        "{html}"
    );
}

#[tokio::test]
async fn a_client_with_a_metadata_document_shows_its_host() {
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    let alice = account_id(&app, EMAIL).await;
    let client_id = "https://tools.example.com/oauth/client.json";
    app.store
        .create_client(&ClientRecord {
            client_id: client_id.into(),
            client_secret_hash: None,
            token_endpoint_auth_method: "none".into(),
            client_name: Some("Example Tools".into()),
            redirect_uris: vec!["https://tools.example.com/cb".into()],
            grant_types: vec!["authorization_code".into()],
            scope: None,
            metadata: serde_json::json!({}),
            can_introspect: false,
            created_at: now(),
        })
        .await
        .unwrap();
    app.store
        .approve_consent(
            &alice,
            client_id,
            "https://tools.example.com/cb",
            "mcp:read",
            now(),
        )
        .await
        .unwrap();
    let html = page(&app, &browser, "/apps").await;
    assert!(html.contains("Example Tools"), "{html}");
    assert!(html.contains("published by tools.example.com"), "{html}");
    assert!(!html.contains("not verified"), "{html}");
}

#[tokio::test]
async fn each_app_has_a_bounded_activity_timeline_of_its_own() {
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    let alice = account_id(&app, EMAIL).await;
    let bob = app
        .create_account("bob@example.com", "bob-password-1")
        .await;
    let client = register_public(&app, &[REDIRECT]).await;
    let other = register_public(&app, &[REDIRECT]).await;
    code_in(&app, &browser, &client, &[]).await;
    let p = app
        .store
        .create_project("Garden plans", &alice, now())
        .await
        .unwrap();
    let secret = app
        .store
        .create_project("Bob's secrets", &bob, now())
        .await
        .unwrap();
    let t0 = 1_767_323_040;
    for i in 0..60 {
        tool_call(
            &app,
            &alice,
            &client,
            "get_note",
            &p,
            Outcome::Success,
            t0 + i,
        )
        .await;
    }
    tool_call(
        &app,
        &alice,
        &client,
        "create_note",
        &p,
        Outcome::Denied,
        t0 + 100,
    )
    .await;
    tool_call(
        &app,
        &alice,
        &other,
        "export_project",
        &p,
        Outcome::Success,
        t0 + 101,
    )
    .await;
    tool_call(
        &app,
        &bob,
        &client,
        "update_note",
        &secret,
        Outcome::Success,
        t0 + 102,
    )
    .await;
    let apps = page(&app, &browser, "/apps").await;
    let consent = hidden_input(&apps, "consent_id").unwrap();
    assert!(
        apps.contains(&format!("href=\"/apps/{consent}\"")),
        "{apps}"
    );
    let html = page(&app, &browser, &format!("/apps/{consent}")).await;
    assert!(
        html.contains("create_note") && html.contains("denied"),
        "{html}"
    );
    assert!(html.contains("Garden plans"), "{html}");
    assert!(!html.contains("export_project"), "another app's activity");
    assert!(
        !html.contains("update_note") && !html.contains("Bob"),
        "another account's activity"
    );
    assert_eq!(
        html.matches("<tr class=\"event\">").count(),
        50,
        "bounded to the last 50"
    );
    // Newest first.
    assert!(html.find("create_note").unwrap() < html.find("get_note").unwrap());
    // Someone else's consent answers like a missing one.
    let r = new_client();
    app.sign_in(&r, "bob@example.com", "bob-password-1").await;
    let resp = r
        .get(app.url(&format!("/apps/{consent}")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn changing_the_password_needs_the_current_one_and_ends_the_other_sessions() {
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    let other = signed_in_browser(&app).await;
    let wrong = post_form(
        &app,
        &browser,
        "/account",
        "/account/password",
        &[
            ("current_password", "not-the-password"),
            ("new_password", "a-new-long-password"),
        ],
    )
    .await;
    assert_eq!(wrong.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let html = wrong.text().await.unwrap();
    assert!(html.contains("role=\"alert\""), "{html}");
    assert!(!html.contains("not-the-password") && !html.contains("a-new-long-password"));
    let short = post_form(
        &app,
        &browser,
        "/account",
        "/account/password",
        &[("current_password", PASSWORD), ("new_password", "short")],
    )
    .await;
    assert_eq!(short.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let ok = post_form(
        &app,
        &browser,
        "/account",
        "/account/password",
        &[
            ("current_password", PASSWORD),
            ("new_password", "a-new-long-password"),
        ],
    )
    .await;
    assert_eq!(ok.status(), StatusCode::SEE_OTHER);
    assert!(
        page(&app, &browser, "/account")
            .await
            .contains("Password changed")
    );
    // The other sessions end (issue 36: a changed password ends them); this one stays.
    let r = other.get(app.url("/")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], "/signin");
    assert_eq!(
        app.sign_in(&new_client(), EMAIL, PASSWORD).await.status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        app.sign_in(&new_client(), EMAIL, "a-new-long-password")
            .await
            .status(),
        StatusCode::SEE_OTHER
    );
}

#[tokio::test]
async fn sign_out_everywhere_ends_every_session_of_the_account() {
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    let other = signed_in_browser(&app).await;
    app.create_account("bob@example.com", "bob-password-1")
        .await;
    let bob = new_client();
    app.sign_in(&bob, "bob@example.com", "bob-password-1").await;
    let r = post_form(
        &app,
        &browser,
        "/account",
        "/account/sign-out-everywhere",
        &[],
    )
    .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    for b in [&browser, &other] {
        let r = b.get(app.url("/")).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::SEE_OTHER);
        assert_eq!(r.headers()["location"], "/signin");
    }
    page(&app, &bob, "/").await;
    // Signing in again works.
    assert_eq!(
        app.sign_in(&new_client(), EMAIL, PASSWORD).await.status(),
        StatusCode::SEE_OTHER
    );
}

/// Every visible input has a label pointing at it.
fn assert_labelled(html: &str, what: &str) {
    for input in html.split("<input").skip(1) {
        let tag = &input[..input.find('>').unwrap()];
        if tag.contains("type=\"hidden\"") {
            continue;
        }
        let id = tag.split("id=\"").nth(1).and_then(|s| s.split('"').next());
        let id = id.unwrap_or_else(|| panic!("{what}: an input without id: {tag}"));
        assert!(
            html.contains(&format!("<label for=\"{id}\"")),
            "{what}: no label for {id}"
        );
    }
}

#[tokio::test]
async fn pages_are_labelled_set_their_language_and_fit_a_phone() {
    let app = spawn_app().await;
    let signin = page(&app, &new_client(), "/signin").await;
    assert!(
        signin.contains("autocomplete=\"username\"")
            && signin.contains("autocomplete=\"current-password\"")
    );
    let browser = signed_in_browser(&app).await;
    let alice = account_id(&app, EMAIL).await;
    let p = app
        .store
        .create_project("Garden plans", &alice, now())
        .await
        .unwrap();
    let account = page(&app, &browser, "/account").await;
    assert!(
        account.contains("autocomplete=\"current-password\"")
            && account.contains("autocomplete=\"new-password\"")
    );
    for (what, html) in [
        ("signin", signin),
        ("home", page(&app, &browser, "/").await),
        (
            "project",
            page(&app, &browser, &format!("/projects/{p}")).await,
        ),
        ("apps", page(&app, &browser, "/apps").await),
        ("keys", page(&app, &browser, "/keys").await),
        ("account", account),
    ] {
        assert!(html.contains("<html lang=\"en\">"), "{what}");
        assert!(html.contains("name=\"viewport\""), "{what}");
        assert!(html.contains(":focus-visible"), "{what}: visible focus");
        assert_labelled(&html, what);
        if what != "signin" {
            for link in [
                "href=\"/\"",
                "href=\"/apps\"",
                "href=\"/keys\"",
                "href=\"/account\"",
            ] {
                assert!(html.contains(link), "{what}: navigation {link}");
            }
        }
    }
}

#[tokio::test]
async fn guessing_the_current_password_on_the_account_page_ends_the_session() {
    // Someone holding a signed-in browser must not get unlimited guesses at the password
    // through the change-password form. The limit is the session's (issue 30, finding 3: the
    // sign-in page's per-account counters are filled by strangers, and must not stop the
    // owner here): the fifth wrong password signs the session out, and signing in again goes
    // through the sign-in page's limits.
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    let guess = |i: usize| {
        let (app, browser) = (&app, &browser);
        async move {
            post_form(
                app,
                browser,
                "/account",
                "/account/password",
                &[
                    ("current_password", &format!("guess-number-{i}")),
                    ("new_password", "a-new-long-password"),
                ],
            )
            .await
        }
    };
    for i in 0..4 {
        assert_eq!(
            guess(i).await.status(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "guess {i}"
        );
    }
    let last = guess(4).await;
    assert_eq!(last.status(), StatusCode::SEE_OTHER);
    assert!(
        last.headers()["location"]
            .to_str()
            .unwrap()
            .starts_with("/signin")
    );
    let account = browser.get(app.url("/account")).send().await.unwrap();
    assert_eq!(account.status(), StatusCode::SEE_OTHER, "signed out");
    // The password did not change.
    assert_ne!(
        app.sign_in(&new_client(), EMAIL, "a-new-long-password")
            .await
            .status(),
        StatusCode::SEE_OTHER
    );
}
