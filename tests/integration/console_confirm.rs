//! Destructive actions of the console ask first, on a page of their own (no JavaScript), and
//! say afterwards what was done; error pages speak to people (issue 37, parts 6 and 8).

use crate::console::{account_id, page, post_form};
use crate::helpers::{TestApp, hidden_input, html_unescape, new_client, spawn_app};
use crate::oauth_helpers::{
    EMAIL, PASSWORD, REDIRECT, authorize_url, code_in, pkce, query_of, register_public,
    signed_in_browser,
};
use gatehouse::domain::account::Role;
use gatehouse::store::now;
use reqwest::StatusCode;

/// `GET path` in `browser`: status and unescaped body.
async fn get(app: &TestApp, browser: &reqwest::Client, path: &str) -> (StatusCode, String) {
    let r = browser.get(app.url(path)).send().await.unwrap();
    let status = r.status();
    (status, html_unescape(&r.text().await.unwrap()))
}

/// The `action` of the page's first POST form whose action starts with `prefix`.
fn post_action(html: &str, prefix: &str) -> Option<String> {
    html.split("<form method=\"post\" action=\"")
        .skip(1)
        .map(|rest| rest[..rest.find('"').unwrap()].to_string())
        .find(|a| a.starts_with(prefix))
}

#[tokio::test]
async fn revoking_an_app_asks_first_then_says_what_was_done() {
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    code_in(&app, &browser, &client_id, &[]).await;
    let alice = account_id(&app, EMAIL).await;
    let consent = app.store.connected_apps(&alice).await.unwrap()[0]
        .consent_id
        .clone();
    // The list's button opens the confirmation page (a GET form): nothing is revoked by it.
    let apps = page(&app, &browser, "/apps").await;
    assert!(
        apps.contains("<form method=\"get\" action=\"/apps/revoke\">"),
        "{apps}"
    );
    let (status, confirm) = get(
        &app,
        &browser,
        &format!("/apps/revoke?consent_id={consent}"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        confirm.contains("<h1>Revoke Test Client?</h1>"),
        "{confirm}"
    );
    assert!(
        confirm.contains("will no longer be able to use your account"),
        "{confirm}"
    );
    assert!(confirm.contains("returning to 127.0.0.1:7777"), "{confirm}");
    assert_eq!(
        post_action(&confirm, "/apps/revoke").as_deref(),
        Some("/apps/revoke")
    );
    assert_eq!(
        hidden_input(&confirm, "consent_id").as_deref(),
        Some(consent.as_str())
    );
    assert_eq!(
        app.store.connected_apps(&alice).await.unwrap().len(),
        1,
        "not revoked yet"
    );
    // Confirmed: revoked, and the list says so by name.
    let r = post_form(
        &app,
        &browser,
        "/apps",
        "/apps/revoke",
        &[("consent_id", &consent)],
    )
    .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], "/apps");
    assert!(app.store.connected_apps(&alice).await.unwrap().is_empty());
    let apps = html_unescape(&page(&app, &browser, "/apps").await);
    assert!(
        apps.contains("Test Client can no longer use your account."),
        "{apps}"
    );
    // The notice is shown once.
    let apps = page(&app, &browser, "/apps").await;
    assert!(!apps.contains("can no longer use your account"), "{apps}");
    // A revoked (or someone else's) grant has no confirmation page.
    let (status, _) = get(
        &app,
        &browser,
        &format!("/apps/revoke?consent_id={consent}"),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn revoking_a_key_or_url_asks_first_then_names_it() {
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    let alice = account_id(&app, EMAIL).await;
    for (create, revoke, name) in [
        ("/keys/create", "/keys/revoke", "Laptop"),
        ("/keys/urls/create", "/keys/urls/revoke", "Phone"),
    ] {
        let r = post_form(
            &app,
            &browser,
            "/keys",
            create,
            &[
                ("name", name),
                ("project", ""),
                ("access", "read"),
                ("expires", "30"),
            ],
        )
        .await;
        assert_eq!(r.status(), StatusCode::OK, "{create}");
        let id = if create == "/keys/create" {
            app.store.api_keys(Some(&alice)).await.unwrap()[0]
                .id
                .clone()
        } else {
            app.store.personal_urls(Some(&alice)).await.unwrap()[0]
                .id
                .clone()
        };
        let keys = page(&app, &browser, "/keys").await;
        assert!(
            keys.contains(&format!("<form method=\"get\" action=\"{revoke}\">")),
            "{keys}"
        );
        let (status, confirm) = get(&app, &browser, &format!("{revoke}?id={id}")).await;
        assert_eq!(status, StatusCode::OK);
        assert!(confirm.contains(&format!("“{name}”?</h1>")), "{confirm}");
        assert!(
            confirm.contains("is refused from its next call"),
            "{confirm}"
        );
        assert!(confirm.contains("This cannot be undone"), "{confirm}");
        assert_eq!(post_action(&confirm, revoke).as_deref(), Some(revoke));
        let r = post_form(&app, &browser, "/keys", revoke, &[("id", &id)]).await;
        assert_eq!(r.status(), StatusCode::SEE_OTHER);
        let keys = html_unescape(&page(&app, &browser, "/keys").await);
        assert!(
            keys.contains(&format!("“{name}” revoked: clients using it are refused")),
            "{keys}"
        );
        // Nothing left to revoke: back to the list with a notice, no confirmation.
        let r = browser
            .get(app.url(&format!("{revoke}?id={id}")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::SEE_OTHER);
        // Another account's id answers like a missing one.
        let (status, _) = get(&app, &browser, &format!("{revoke}?id=not-a-credential")).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
}

#[tokio::test]
async fn removing_a_member_asks_first_then_names_them() {
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
        .add_member(&p, &bob, Role::Write, now())
        .await
        .unwrap();
    let remove = format!("/projects/{p}/members/remove");
    let (status, confirm) = get(&app, &browser, &format!("{remove}?account_id={bob}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        confirm.contains("<h1>Remove bob@example.com from Garden plans?</h1>"),
        "{confirm}"
    );
    assert!(
        confirm.contains("will no longer read or change the notes of Garden plans"),
        "{confirm}"
    );
    assert!(
        app.store.membership(&bob, &p).await.unwrap().is_some(),
        "not removed yet"
    );
    // The owner has no confirmation page: the project page says why (422).
    let (status, html) = get(&app, &browser, &format!("{remove}?account_id={alice}")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(html.contains("the owner always stays"), "{html}");
    let r = post_form(
        &app,
        &browser,
        &format!("/projects/{p}"),
        &remove,
        &[("account_id", &bob)],
    )
    .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert!(app.store.membership(&bob, &p).await.unwrap().is_none());
    let html = page(&app, &browser, &format!("/projects/{p}")).await;
    assert!(
        html.contains("bob@example.com was removed from Garden plans."),
        "{html}"
    );
    // A member who is not the owner gets no confirmation page either.
    let carol = app
        .create_account("carol@example.com", "carol-password")
        .await;
    app.store
        .add_member(&p, &carol, Role::Read, now())
        .await
        .unwrap();
    let carol_browser = new_client();
    app.sign_in(&carol_browser, "carol@example.com", "carol-password")
        .await;
    let (status, _) = get(
        &app,
        &carol_browser,
        &format!("{remove}?account_id={alice}"),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn signing_out_everywhere_asks_first_then_says_so() {
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    let (status, confirm) = get(&app, &browser, "/account/sign-out-everywhere").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        confirm.contains("<h1>Sign out everywhere?</h1>"),
        "{confirm}"
    );
    assert!(
        confirm.contains(&format!(
            "Every browser signed in as {EMAIL}, this one included"
        )),
        "{confirm}"
    );
    // Seeing the page signed nobody out.
    page(&app, &browser, "/").await;
    let r = post_form(
        &app,
        &browser,
        "/account",
        "/account/sign-out-everywhere",
        &[],
    )
    .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], "/signed-out");
    let (status, done) = get(&app, &browser, "/signed-out").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        done.contains("Every session of your account was ended"),
        "{done}"
    );
    assert!(done.contains("href=\"/signin\""), "{done}");
    let r = browser.get(app.url("/")).send().await.unwrap();
    assert_eq!(r.headers()["location"], "/signin", "signed out");
}

#[tokio::test]
async fn an_unknown_path_gets_gatehouse_s_404_page_with_navigation() {
    let app = spawn_app().await;
    for path in ["/no-such-page", "/projects/x/y/z", "/apps/x/y"] {
        let (status, html) = get(&app, &new_client(), path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        assert!(html.contains("<h1>Page not found</h1>"), "{path}: {html}");
        assert!(html.contains("<nav aria-label=\"Gatehouse\""), "{html}");
        assert!(html.contains("href=\"/\""), "{html}");
        // Outside an authorization nothing is said about an application.
        assert!(!html.contains("Nothing was sent back"), "{html}");
    }
    // A console page's own 404 (a project that is not the account's) is the same kind of page.
    let browser = signed_in_browser(&app).await;
    let (status, html) = get(&app, &browser, "/projects/not-a-project").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(!html.contains("Nothing was sent back") && html.contains("aria-label=\"Gatehouse\""));
}

#[tokio::test]
async fn authorization_errors_name_the_app_and_who_must_fix_it() {
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let (_, challenge) = pkce();
    // A redirect URI the app did not register: named by its claimed name and the host asked for.
    let url = authorize_url(
        &app,
        &client_id,
        &challenge,
        &[("redirect_uri", "https://evil.example/cb")],
    );
    let r = browser.get(url).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let html = html_unescape(&r.text().await.unwrap());
    assert!(
        html.contains(
            "The application calling itself “Test Client” asked to send you back to evil.example"
        ),
        "{html}"
    );
    assert!(html.contains("Its developer must fix this"), "{html}");
    assert!(
        html.contains("Nothing was sent back to the application."),
        "{html}"
    );
    // An unknown client: its client ID is quoted.
    let url = authorize_url(&app, "no-such-client", &challenge, &[]);
    let r = browser.get(url).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let html = html_unescape(&r.text().await.unwrap());
    assert!(
        html.contains("No application with the client ID no-such-client is registered"),
        "{html}"
    );
    assert!(html.contains("Its developer must fix this"), "{html}");
    assert!(
        html.contains("Nothing was sent back to the application."),
        "{html}"
    );
}

#[tokio::test]
async fn signed_out_while_consent_was_open_signs_in_and_resumes_the_same_request() {
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let (_, challenge) = pkce();
    let consent = html_unescape(
        &browser
            .get(authorize_url(
                &app,
                &client_id,
                &challenge,
                &[("state", "resume-me")],
            ))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    );
    let request = hidden_input(&consent, "request").expect("the consent page");
    let csrf = hidden_input(&consent, "csrf_token").unwrap();
    let action = post_action(&consent, "/oauth/authorize/decision").unwrap();
    assert_eq!(
        action,
        format!("/oauth/authorize/decision?request={request}")
    );
    // Signed out in another tab.
    let r = post_form(&app, &browser, "/", "/signout", &[]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    // The consent page's Allow: not "Form expired", but a way to sign in and go on.
    let r = browser
        .post(app.url(&action))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("request", request.as_str()),
            ("decision", "approve"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let html = html_unescape(&r.text().await.unwrap());
    assert!(html.contains("You were signed out"), "{html}");
    assert!(!html.contains("Form expired"), "{html}");
    let signin = html
        .split("href=\"")
        .map(|rest| &rest[..rest.find('"').unwrap()])
        .find(|h| h.starts_with("/signin?"))
        .expect("a sign-in link")
        .to_string();
    // Signing in lands on the same request again: the consent page, then the client's callback
    // with the state it sent.
    let form = page(&app, &browser, &signin).await;
    let next = hidden_input(&form, "next").unwrap();
    assert_eq!(next, format!("/oauth/authorize/resume?request={request}"));
    let csrf = hidden_input(&form, "csrf_token").unwrap();
    let r = browser
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
    assert_eq!(r.headers()["location"].to_str().unwrap(), next);
    let r = browser.get(app.url(&next)).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let again = r.headers()["location"].to_str().unwrap().to_string();
    assert!(again.starts_with("/oauth/authorize?"), "{again}");
    let consent = page(&app, &browser, &again).await;
    let request2 = hidden_input(&consent, "request").unwrap();
    let csrf2 = hidden_input(&consent, "csrf_token").unwrap();
    let r = browser
        .post(app.url("/oauth/authorize/decision"))
        .form(&[
            ("csrf_token", csrf2.as_str()),
            ("request", request2.as_str()),
            ("decision", "approve"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let q = query_of(r.headers()["location"].to_str().unwrap());
    assert_eq!(q["state"], "resume-me");
    assert!(q.contains_key("code"));
    // The first request was used up by the resumption.
    let (status, html) = get(&app, &browser, &next).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(html.contains("Start the connection again"), "{html}");
}
