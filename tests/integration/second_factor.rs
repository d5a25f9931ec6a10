//! The second factor (issue 36, item 3): TOTP enrolment with a confirmation code, the code
//! asked after a password sign-in (a pending MCP authorization continuing after it), recovery
//! codes good once, `GATEHOUSE_REQUIRE_2FA=on`, and wrong codes limited like passwords. Codes
//! are made by `totp-rs` from the key the enrolment page shows, as an authenticator app would.

use reqwest::StatusCode;
use totp_rs::{Algorithm, Secret, TOTP};

use crate::helpers::{
    TestApp, hidden_input, html_unescape, new_client, new_client_from, spawn_app_with,
};
use crate::oauth_helpers::{EMAIL, PASSWORD, REDIRECT, authorize_url, pkce, register_public};

/// A test app with a server key (TOTP secrets are sealed with it, on `PostgreSQL` too).
async fn app_with(extra: &[(&str, &str)]) -> TestApp {
    let extra: Vec<(String, String)> = extra
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect();
    spawn_app_with(move |v| {
        v.insert(
            "GATEHOUSE_SECRET_KEY".into(),
            "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY".into(),
        );
        for (k, val) in extra {
            v.insert(k, val);
        }
    })
    .await
}

/// The authenticator an app would make from the enrolment page's key.
fn authenticator(page: &str) -> TOTP {
    let start = page.find("id=\"totp-secret\">").expect("the key is shown") + 17;
    let key = &page[start..start + page[start..].find('<').unwrap()];
    TOTP::new(
        Algorithm::SHA1,
        6,
        1,
        30,
        Secret::Encoded(key.to_string()).to_bytes().unwrap(),
        None,
        String::new(),
    )
    .unwrap()
}

/// The code the authenticator shows `steps` steps of 30 s from now.
fn code(t: &TOTP, steps: i64) -> String {
    let now = gatehouse::store::now() + steps * 30;
    t.generate(u64::try_from(now).unwrap())
}

/// The recovery codes on the page shown once after enrolment.
fn recovery_codes(page: &str) -> Vec<String> {
    page.split("<li><code>")
        .skip(1)
        .map(|s| s[..s.find('<').unwrap()].to_string())
        .collect()
}

async fn get(browser: &reqwest::Client, url: &str) -> reqwest::Response {
    browser.get(url).send().await.unwrap()
}

/// Signs `browser` in with the password, from the form at `/signin?next=NEXT`.
async fn password_step(app: &TestApp, browser: &reqwest::Client, next: &str) -> reqwest::Response {
    let page = get(
        browser,
        &app.url(&format!("/signin?next={}", urlencode(next))),
    )
    .await
    .text()
    .await
    .unwrap();
    let csrf = hidden_input(&page, "csrf_token").unwrap();
    let next = hidden_input(&page, "next").unwrap();
    browser
        .post(app.url("/signin"))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("next", next.as_str()),
            ("email", EMAIL),
            ("password", PASSWORD),
        ])
        .send()
        .await
        .unwrap()
}

fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// Posts `code` on the second-factor page of `browser`.
async fn code_step(app: &TestApp, browser: &reqwest::Client, code: &str) -> reqwest::Response {
    let page = get(browser, &app.url("/signin/second-factor")).await;
    assert_eq!(page.status(), StatusCode::OK, "the code page shows");
    let csrf = hidden_input(&page.text().await.unwrap(), "csrf_token").unwrap();
    browser
        .post(app.url("/signin/second-factor"))
        .form(&[("csrf_token", csrf.as_str()), ("code", code)])
        .send()
        .await
        .unwrap()
}

/// Enrols the signed-in `browser` on the account page: (authenticator, recovery codes).
async fn enrol_on_account_page(app: &TestApp, browser: &reqwest::Client) -> (TOTP, Vec<String>) {
    let account = get(browser, &app.url("/account"))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        account.contains("/account/second-factor/start"),
        "{account}"
    );
    let csrf = hidden_input(&account, "csrf_token").unwrap();
    let page = browser
        .post(app.url("/account/second-factor/start"))
        .form(&[("csrf_token", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let page = page.text().await.unwrap();
    assert!(page.contains("data:image/png;base64,"), "a QR code");
    assert!(
        html_unescape(&page).contains("otpauth://totp/"),
        "the setup link"
    );
    let first = authenticator(&page);
    // A wrong code first: not turned on, a new QR code.
    let wrong = browser
        .post(app.url("/account/second-factor/confirm"))
        .form(&[("csrf_token", csrf.as_str()), ("code", "000000")])
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    let t = authenticator(&wrong.text().await.unwrap());
    assert_ne!(
        t.get_secret_base32(),
        first.get_secret_base32(),
        "a new key after a wrong code"
    );
    let done = browser
        .post(app.url("/account/second-factor/confirm"))
        .form(&[("csrf_token", csrf.as_str()), ("code", &code(&t, 0))])
        .send()
        .await
        .unwrap();
    assert_eq!(done.status(), StatusCode::OK);
    let codes = recovery_codes(&done.text().await.unwrap());
    assert_eq!(codes.len(), 10, "ten recovery codes");
    (t, codes)
}

#[tokio::test]
async fn a_password_sign_in_asks_for_the_code_and_the_pending_authorization_continues() {
    let app = app_with(&[]).await;
    app.create_account(EMAIL, PASSWORD).await;
    let owner = new_client();
    app.sign_in(&owner, EMAIL, PASSWORD).await;
    let (t, codes) = enrol_on_account_page(&app, &owner).await;

    // An MCP client's authorization request, in a new browser.
    let client_id = register_public(&app, &[REDIRECT]).await;
    let (_verifier, challenge) = pkce();
    let browser = new_client();
    let r = get(&browser, &authorize_url(&app, &client_id, &challenge, &[])).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let to_signin = r.headers()["location"].to_str().unwrap().to_string();
    let next = url::Url::parse(&app.url(&to_signin))
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "next")
        .unwrap()
        .1
        .into_owned();
    let r = password_step(&app, &browser, &next).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], "/signin/second-factor");
    // Not signed in yet.
    assert_eq!(
        get(&browser, &app.url("/account")).await.status(),
        StatusCode::SEE_OTHER
    );
    let wrong = code_step(&app, &browser, "123 456").await;
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    // The code of the next step (the enrolment used this step's): on to the authorization.
    let next_code = code(&t, 1);
    let r = code_step(&app, &browser, &next_code).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"].to_str().unwrap(), next);
    let consent = get(&browser, &app.url(&next)).await;
    assert_eq!(consent.status(), StatusCode::OK, "the consent page");
    assert!(consent.text().await.unwrap().contains("decision"));

    // The same code does not work twice.
    let again = new_client();
    password_step(&app, &again, "/").await;
    assert_eq!(
        code_step(&app, &again, &next_code).await.status(),
        StatusCode::UNAUTHORIZED
    );
    // A recovery code works once.
    let r = code_step(&app, &again, &codes[0].to_uppercase()).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let third = new_client();
    password_step(&app, &third, "/").await;
    assert_eq!(
        code_step(&app, &third, &codes[0]).await.status(),
        StatusCode::UNAUTHORIZED
    );

    let rows = app.store.recent_audit(200).await.unwrap();
    let details: Vec<_> = rows
        .iter()
        .filter(|r| r.event == "signin" && r.outcome == "success")
        .filter_map(|r| r.detail.clone())
        .collect();
    assert!(
        details.contains(&"password+totp".to_string()),
        "{details:?}"
    );
    assert!(
        details.contains(&"password+recovery_code".to_string()),
        "{details:?}"
    );
    assert!(rows.iter().any(|r| r.event == "second_factor_enrolled"));
    assert!(
        rows.iter()
            .any(|r| r.event == "signin_second_factor" && r.outcome == "failure")
    );
    let all = format!("{rows:?}");
    assert!(
        !all.contains(&next_code) && !all.contains(&codes[0]),
        "no code audited"
    );

    // Removed with a current code: the next sign-in asks nothing.
    let account = get(&owner, &app.url("/account"))
        .await
        .text()
        .await
        .unwrap();
    let csrf = hidden_input(&account, "csrf_token").unwrap();
    let r = owner
        .post(app.url("/account/second-factor/remove"))
        .form(&[("csrf_token", csrf.as_str()), ("code", &codes[1])])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let r = password_step(&app, &new_client(), "/").await;
    assert_eq!(r.headers()["location"], "/");
    assert!(
        app.store
            .recent_audit(200)
            .await
            .unwrap()
            .iter()
            .any(|r| r.event == "second_factor_removed" && r.outcome == "success")
    );
}

#[tokio::test]
async fn with_2fa_required_a_person_without_one_enrols_at_the_next_sign_in() {
    let app = app_with(&[("GATEHOUSE_REQUIRE_2FA", "on")]).await;
    app.create_account(EMAIL, PASSWORD).await;
    let browser = new_client();
    let r = password_step(&app, &browser, "/account").await;
    assert_eq!(r.headers()["location"], "/signin/second-factor");
    let page = get(&browser, &app.url("/signin/second-factor"))
        .await
        .text()
        .await
        .unwrap();
    assert!(page.contains("data:image/png;base64,"), "{page}");
    let t = authenticator(&page);
    let csrf = hidden_input(&page, "csrf_token").unwrap();
    let r = browser
        .post(app.url("/signin/second-factor"))
        .form(&[("csrf_token", csrf.as_str()), ("code", &code(&t, 0))])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let html = r.text().await.unwrap();
    assert_eq!(recovery_codes(&html).len(), 10);
    assert!(html.contains("href=\"/account\""), "continues to next");
    assert_eq!(
        get(&browser, &app.url("/account")).await.status(),
        StatusCode::OK
    );
    // From now on the code is asked.
    let other = new_client();
    password_step(&app, &other, "/").await;
    let r = code_step(&app, &other, &code(&t, 1)).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn wrong_codes_are_limited_like_passwords_without_locking_the_owner_out() {
    let app = app_with(&[]).await;
    app.create_account(EMAIL, PASSWORD).await;
    let owner = new_client();
    app.sign_in(&owner, EMAIL, PASSWORD).await;
    let (t, _codes) = enrol_on_account_page(&app, &owner).await;
    // Someone who has the password guesses codes from one address.
    let guesser = new_client_from("127.0.0.7");
    password_step(&app, &guesser, "/").await;
    for _ in 0..5 {
        assert_eq!(
            code_step(&app, &guesser, "000000").await.status(),
            StatusCode::UNAUTHORIZED
        );
    }
    let refused = code_step(&app, &guesser, &code(&t, 1)).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.headers().contains_key("retry-after"));
    // The owner, from another address, still gets in.
    let elsewhere = new_client_from("127.0.0.8");
    password_step(&app, &elsewhere, "/").await;
    assert_eq!(
        code_step(&app, &elsewhere, &code(&t, 1)).await.status(),
        StatusCode::SEE_OTHER
    );
}
