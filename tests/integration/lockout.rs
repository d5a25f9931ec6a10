//! Strangers cannot lock the owner out (issue 30, finding 3; NIST SP 800-63B §5.2.2): a
//! browser that signed in to the account before gets through the account's sign-in delay with
//! the right password, a wrong one from it during the delay burns its device cookie, and the
//! account page's current-password check is limited by the signed-in session, not by the
//! sign-in page's counters.

use reqwest::StatusCode;

use crate::helpers::{TestApp, hidden_input, new_client_from, spawn_app};
use crate::oauth_helpers::{EMAIL, PASSWORD};

/// Signs `browser` in through the form shown even to a signed-in browser (`reauth=1`).
async fn sign_in(app: &TestApp, browser: &reqwest::Client, password: &str) -> reqwest::Response {
    let page = browser
        .get(app.url("/signin?reauth=1"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = hidden_input(&page, "csrf_token").expect("the sign-in form");
    browser
        .post(app.url("/signin"))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("next", "/"),
            ("email", EMAIL),
            ("password", password),
        ])
        .send()
        .await
        .unwrap()
}

/// Strangers' wrong guesses for the account, from everywhere, until sign-in for it is slowed
/// for 15 minutes: twenty failures counted against the account (spread over the past hour and a
/// half, each after the delay the one before started, the last one now), then checked from a
/// fresh browser.
async fn strangers_slow_the_account(app: &TestApp) {
    let [_, _, account] =
        gatehouse::signin::limits("192.0.2.1".parse().unwrap(), &EMAIL.to_lowercase());
    let now = gatehouse::store::now();
    let mut at = now - 5_000;
    for n in 0..20 {
        let when = if n == 19 { now } else { at };
        match app
            .store
            .admit(std::slice::from_ref(&account), when)
            .await
            .unwrap()
        {
            gatehouse::store::limits::Admission::Admitted(states) => {
                at = at.max(states[0].blocked_until);
            }
            refused => panic!("{refused:?}"),
        }
    }
    let probe = app
        .sign_in(&new_client_from("127.0.1.200"), EMAIL, PASSWORD)
        .await;
    assert_eq!(
        probe.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "a fresh browser with the right password waits"
    );
}

#[tokio::test]
async fn a_browser_that_signed_in_before_gets_through_the_account_delay() {
    let app = spawn_app().await;
    app.create_account(EMAIL, PASSWORD).await;
    let owner = new_client_from("127.0.1.1");
    let r = sign_in(&app, &owner, PASSWORD).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let cookie = r
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with("gatehouse_device="))
        .expect("a device cookie")
        .to_string();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("Path=/signin"),
        "{cookie}"
    );
    strangers_slow_the_account(&app).await;
    // The owner's browser signs in, and the strangers' delay keeps holding for everyone else.
    let r = sign_in(&app, &owner, PASSWORD).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "the owner is let in");
    let r = app
        .sign_in(&new_client_from("127.0.1.201"), EMAIL, PASSWORD)
        .await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn a_wrong_password_from_a_recognised_browser_during_the_delay_burns_it() {
    let app = spawn_app().await;
    app.create_account(EMAIL, PASSWORD).await;
    let owner = new_client_from("127.0.1.2");
    assert_eq!(
        sign_in(&app, &owner, PASSWORD).await.status(),
        StatusCode::SEE_OTHER
    );
    strangers_slow_the_account(&app).await;
    // Someone holding the cookie guesses: checked once, and the cookie is no longer good.
    let r = sign_in(&app, &owner, "another-wrong-guess").await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "checked, wrong");
    let r = sign_in(&app, &owner, PASSWORD).await;
    assert_eq!(
        r.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "the burnt cookie no longer passes the delay"
    );
}

/// The account page's password form: its CSRF token, then the POST.
async fn change_password(
    app: &TestApp,
    browser: &reqwest::Client,
    current: &str,
    new: &str,
) -> reqwest::Response {
    let page = browser
        .get(app.url("/account"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = hidden_input(&page, "csrf_token").expect("the account page's form");
    browser
        .post(app.url("/account/password"))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("current_password", current),
            ("new_password", new),
        ])
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn the_account_page_checks_the_password_per_session_not_per_account() {
    let app = spawn_app().await;
    app.create_account(EMAIL, PASSWORD).await;
    let owner = new_client_from("127.0.1.3");
    assert_eq!(
        sign_in(&app, &owner, PASSWORD).await.status(),
        StatusCode::SEE_OTHER
    );
    strangers_slow_the_account(&app).await;
    // Strangers' guesses on the sign-in page do not stop the owner's password change.
    let r = change_password(&app, &owner, PASSWORD, "a-new-long-password").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "changed");
    // Guessing on the account page ends the session after five wrong passwords.
    for n in 1..5 {
        let r = change_password(&app, &owner, "not-it", "a-third-long-password").await;
        assert_eq!(
            r.status(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "wrong guess {n}"
        );
    }
    let r = change_password(&app, &owner, "not-it", "a-third-long-password").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert!(
        r.headers()["location"]
            .to_str()
            .unwrap()
            .starts_with("/signin"),
        "signed out"
    );
    let r = owner.get(app.url("/account")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "the session has ended");
}
