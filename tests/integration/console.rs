//! The console pages: one CSRF-checked form extractor behind every page form, the home,
//! project, connected-apps and account pages.

use crate::helpers::{TestApp, hidden_input, new_client, spawn_app};
use crate::oauth_helpers::{EMAIL, PASSWORD, signed_in_browser};
use reqwest::StatusCode;

/// A client without a cookie jar and without redirects, for requests with hand-made cookies.
fn bare_client() -> reqwest::Client {
    reqwest::Client::builder()
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
        "/oauth/authorize/decision",
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
    let _ = hidden_input;
}
