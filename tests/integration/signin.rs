//! Browser sign-in and sign-out (sessions, CSRF, `next`, disabled accounts).

use crate::helpers::{hidden_input, new_client, new_client_from, spawn_app};
use gatehouse::domain::account::{AccountStatus, Email};
use reqwest::StatusCode;

const EMAIL: &str = "alice@example.com";
const PASSWORD: &str = "a-long-password";

async fn signin_page(
    app: &crate::helpers::TestApp,
    client: &reqwest::Client,
    next: &str,
) -> String {
    let page = client
        .get(app.url(&format!("/signin?next={}", urlencode(next))))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    page.text().await.unwrap()
}

fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

#[tokio::test]
async fn right_password_signs_in_and_lands_on_next() {
    let app = spawn_app().await;
    app.create_account(EMAIL, PASSWORD).await;
    let client = new_client();
    let page = signin_page(&app, &client, "/oauth/authorize?client_id=x&state=y").await;
    let csrf = hidden_input(&page, "csrf_token").unwrap();
    let next = hidden_input(&page, "next").unwrap();
    assert_eq!(next, "/oauth/authorize?client_id=x&state=y");
    let r = client
        .post(app.url("/signin"))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("next", next.as_str()),
            ("email", "Alice@Example.com"),
            ("password", PASSWORD),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        r.headers()["location"],
        "/oauth/authorize?client_id=x&state=y"
    );
    let cookie = r
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with("gatehouse_session="))
        .expect("a session cookie")
        .to_string();
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Lax"), "{cookie}");
    assert!(
        !cookie.contains("Secure"),
        "plain-http issuer must not set Secure: {cookie}"
    );
    let home = client.get(app.url("/")).send().await.unwrap();
    assert_eq!(home.status(), StatusCode::OK);
    assert!(home.text().await.unwrap().contains(EMAIL));
}

/// The `gatehouse_session=…` pair a response sets.
fn session_cookie(r: &reqwest::Response) -> Option<String> {
    r.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with("gatehouse_session="))
        .map(|c| c.split(';').next().unwrap().to_string())
}

#[tokio::test]
async fn session_id_cycles_at_sign_in() {
    let app = spawn_app().await;
    app.create_account(EMAIL, PASSWORD).await;
    let client = new_client();
    let r = client.get(app.url("/signin")).send().await.unwrap();
    assert_eq!(session_cookie(&r), None, "no session before sign-in");
    let before = session_cookie(&app.sign_in(&client, EMAIL, PASSWORD).await).unwrap();
    // Signing in again (as `prompt=login` asks) gives a new session id.
    let page = client
        .get(app.url("/signin?reauth=1"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = hidden_input(&page, "csrf_token").unwrap();
    let r = client
        .post(app.url("/signin"))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("next", "/"),
            ("email", EMAIL),
            ("password", PASSWORD),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let after = session_cookie(&r).unwrap();
    assert_ne!(before, after, "the session id must change at sign-in");
    // The earlier session id is no longer signed in.
    let r = crate::helpers::client_builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(app.url("/"))
        .header("cookie", before)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], "/signin");
    // A session id made up by someone else is never adopted.
    let planted = "gatehouse_session=AAAAAAAAAAAAAAAAAAAAAA";
    let no_jar = crate::helpers::client_builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = no_jar
        .get(app.url("/signin"))
        .header("cookie", planted)
        .send()
        .await
        .unwrap();
    let csrf_cookie = r.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let csrf = hidden_input(&r.text().await.unwrap(), "csrf_token").unwrap();
    let r = no_jar
        .post(app.url("/signin"))
        .header("cookie", format!("{planted}; {csrf_cookie}"))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("next", "/"),
            ("email", EMAIL),
            ("password", PASSWORD),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_ne!(session_cookie(&r).unwrap(), planted);
}

#[tokio::test]
async fn wrong_password_and_unknown_email_get_the_same_message_and_no_session() {
    let app = spawn_app().await;
    app.create_account(EMAIL, PASSWORD).await;
    let mut bodies = Vec::new();
    for (email, password) in [(EMAIL, "wrong-password"), ("nobody@example.com", PASSWORD)] {
        let client = new_client();
        let page = signin_page(&app, &client, "/").await;
        let csrf = hidden_input(&page, "csrf_token").unwrap();
        let r = client
            .post(app.url("/signin"))
            .form(&[
                ("csrf_token", csrf.as_str()),
                ("next", "/"),
                ("email", email),
                ("password", password),
            ])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        let body = r.text().await.unwrap();
        assert!(body.contains("Wrong email or password."), "{body}");
        bodies.push(body.replace(email, ""));
        let home = client.get(app.url("/")).send().await.unwrap();
        assert_eq!(
            home.status(),
            StatusCode::SEE_OTHER,
            "no session after a failed sign-in"
        );
    }
    let audit = app.store.recent_audit(10).await.unwrap();
    let failures = audit
        .iter()
        .filter(|e| e.event == "signin" && e.outcome == "failure")
        .count();
    assert_eq!(failures, 2);
    assert!(audit.iter().all(|e| e.detail.as_deref() != Some(PASSWORD)));
}

#[tokio::test]
async fn missing_or_wrong_csrf_token_is_refused_and_changes_nothing() {
    let app = spawn_app().await;
    app.create_account(EMAIL, PASSWORD).await;
    for csrf in [None, Some("forged-token")] {
        let client = new_client();
        signin_page(&app, &client, "/").await;
        let mut form = vec![("next", "/"), ("email", EMAIL), ("password", PASSWORD)];
        if let Some(c) = csrf {
            form.push(("csrf_token", c));
        }
        let r = client
            .post(app.url("/signin"))
            .form(&form)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
        let home = client.get(app.url("/")).send().await.unwrap();
        assert_eq!(
            home.status(),
            StatusCode::SEE_OTHER,
            "CSRF failure must not sign in"
        );
    }
    assert!(
        app.store.recent_audit(10).await.unwrap().is_empty(),
        "nothing recorded or changed"
    );
}

#[tokio::test]
async fn disabled_account_cannot_sign_in_and_loses_its_session() {
    let app = spawn_app().await;
    app.create_account(EMAIL, PASSWORD).await;
    let client = new_client();
    let r = app.sign_in(&client, EMAIL, PASSWORD).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    app.store
        .set_account_status(&Email::parse(EMAIL).unwrap(), AccountStatus::Disabled)
        .await
        .unwrap();
    let home = client.get(app.url("/")).send().await.unwrap();
    assert_eq!(
        home.status(),
        StatusCode::SEE_OTHER,
        "a disabled account's session ends"
    );
    let other = new_client();
    let r = app.sign_in(&other, EMAIL, PASSWORD).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(
        r.text().await.unwrap().contains("Wrong email or password."),
        "a disabled account gets the same message, so the page does not confirm the password"
    );
}

#[tokio::test]
async fn repeated_failures_are_throttled_per_email_and_address() {
    let app = spawn_app().await;
    app.create_account(EMAIL, PASSWORD).await;
    app.create_account("bob@example.com", PASSWORD).await;
    for _ in 0..5 {
        let r = app.sign_in(&new_client(), EMAIL, "wrong-password").await;
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    }
    // The sixth attempt is refused before the password is looked at, even the right one.
    let client = new_client();
    let r = app.sign_in(&client, EMAIL, PASSWORD).await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(r.text().await.unwrap().contains("Too many failed sign-ins"));
    assert_eq!(
        client.get(app.url("/")).send().await.unwrap().status(),
        StatusCode::SEE_OTHER
    );
    // Another email from the same address is not locked out by alice's failures.
    let r = app
        .sign_in(&new_client(), "bob@example.com", PASSWORD)
        .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let audit = app.store.recent_audit(20).await.unwrap();
    assert!(
        audit
            .iter()
            .any(|e| e.event == "signin_throttled" && e.outcome == "denied"),
        "reaching a limit is audited: {audit:?}"
    );
}

#[tokio::test]
async fn open_redirects_through_next_are_ignored() {
    let app = spawn_app().await;
    app.create_account(EMAIL, PASSWORD).await;
    for evil in [
        "https://evil.example/",
        "//evil.example/x",
        "/\\evil.example",
        "javascript:alert(1)",
    ] {
        let client = new_client();
        let page = signin_page(&app, &client, evil).await;
        let csrf = hidden_input(&page, "csrf_token").unwrap();
        let r = client
            .post(app.url("/signin"))
            .form(&[
                ("csrf_token", csrf.as_str()),
                ("next", evil),
                ("email", EMAIL),
                ("password", PASSWORD),
            ])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::SEE_OTHER);
        assert_eq!(r.headers()["location"], "/", "next={evil}");
    }
}

#[tokio::test]
async fn sign_out_ends_the_session_server_side() {
    let app = spawn_app().await;
    app.create_account(EMAIL, PASSWORD).await;
    let client = new_client();
    let r = app.sign_in(&client, EMAIL, PASSWORD).await;
    let cookie = r
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with("gatehouse_session="))
        .expect("a session cookie")
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let home = client
        .get(app.url("/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = hidden_input(&home, "csrf_token").unwrap();
    let r = client
        .post(app.url("/signout"))
        .form(&[("csrf_token", csrf)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    // Replaying the old cookie from another client: the session is gone from the store.
    let replay = crate::helpers::client_builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(app.url("/"))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(replay.status(), StatusCode::SEE_OTHER);
    assert_eq!(replay.headers()["location"], "/signin");
}

#[tokio::test]
async fn html_pages_send_the_security_headers() {
    let app = spawn_app().await;
    let r = app.client.get(app.url("/signin")).send().await.unwrap();
    let csp = r.headers()["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert_eq!(r.headers()["x-content-type-options"], "nosniff");
    assert_eq!(r.headers()["referrer-policy"], "no-referrer");
}

#[tokio::test]
async fn health_and_readiness_answer_json() {
    let app = spawn_app().await;
    let r = app.client.get(app.url("/healthz")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.json::<serde_json::Value>().await.unwrap()["status"], "ok");
    let r = app.client.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        r.json::<serde_json::Value>().await.unwrap()["database"],
        "ok"
    );
}

#[tokio::test]
async fn first_run_setup_link_creates_the_first_account_once() {
    let app = spawn_app().await;
    // spawn_app started on an empty database: a setup token exists. Make our own to know it.
    let token = setup_token(&app).await;
    let client = new_client();
    let page = client
        .get(app.url(&format!("/setup?token={}", token.expose())))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let csrf = hidden_input(&page.text().await.unwrap(), "csrf_token").unwrap();
    let form = [
        ("csrf_token", csrf.as_str()),
        ("token", token.expose()),
        ("email", EMAIL),
        ("password", PASSWORD),
    ];
    let r = client
        .post(app.url("/setup"))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(app.store.count_accounts().await.unwrap(), 1);
    let other = new_client();
    let page = other
        .get(app.url("/signin"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = hidden_input(&page, "csrf_token").unwrap();
    let form = [
        ("csrf_token", csrf.as_str()),
        ("token", token.expose()),
        ("email", "eve@example.com"),
        ("password", PASSWORD),
    ];
    let again = other
        .post(app.url("/setup"))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::NOT_FOUND, "the link works once");
    assert_eq!(app.store.count_accounts().await.unwrap(), 1);
    let bad = client
        .get(app.url("/setup?token=gate_setup_nope"))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn cookies_are_secure_when_the_issuer_is_https() {
    let app = crate::helpers::spawn_app_with(|v| {
        v.insert("GATEHOUSE_ISSUER".into(), "https://auth.example.com".into());
    })
    .await;
    let r = app.client.get(app.url("/signin")).send().await.unwrap();
    let cookie = r.headers()["set-cookie"].to_str().unwrap();
    assert!(cookie.contains("Secure"), "{cookie}");
    assert!(cookie.contains("HttpOnly"), "{cookie}");
}

#[tokio::test]
async fn concurrent_guesses_count_each_other() {
    let app = spawn_app().await;
    app.create_account(EMAIL, PASSWORD).await;
    // Twelve wrong guesses at once: only the first five can be checked.
    let mut tasks = Vec::new();
    for _ in 0..12 {
        let (client, url_page, url_post) = (new_client(), app.url("/signin"), app.url("/signin"));
        tasks.push(tokio::spawn(async move {
            let page = client
                .get(url_page)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            let csrf = hidden_input(&page, "csrf_token").unwrap();
            client
                .post(url_post)
                .form(&[
                    ("csrf_token", csrf.as_str()),
                    ("next", "/"),
                    ("email", EMAIL),
                    ("password", "wrong-guess"),
                ])
                .send()
                .await
                .unwrap()
                .status()
        }));
    }
    let mut checked = 0;
    for t in tasks {
        match t.await.unwrap() {
            StatusCode::UNAUTHORIZED => checked += 1,
            other => assert_eq!(other, StatusCode::TOO_MANY_REQUESTS),
        }
    }
    assert!(checked <= 5, "{checked} guesses were checked");
    // Attempts that lost to concurrent ones were refused without being counted; guessing on,
    // no more than five are ever checked in the window.
    for _ in 0..10 {
        match app
            .sign_in(&new_client(), EMAIL, "wrong-guess")
            .await
            .status()
        {
            StatusCode::UNAUTHORIZED => checked += 1,
            other => assert_eq!(other, StatusCode::TOO_MANY_REQUESTS),
        }
    }
    assert_eq!(checked, 5, "{checked} guesses were checked");
    let r = app.sign_in(&new_client(), EMAIL, PASSWORD).await;
    assert_eq!(
        r.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "still locked for this email"
    );
}

/// The `Retry-After` of a refused attempt, in seconds (RFC 9110 §10.2.3).
fn retry_after(r: &reqwest::Response) -> u64 {
    r.headers()
        .get("retry-after")
        .expect("Retry-After on a refused attempt")
        .to_str()
        .unwrap()
        .parse()
        .expect("Retry-After in seconds")
}

// NIST SP 800-63B §5.2.2: failed attempts are limited per account, whatever address they come
// from. The account's first ten failures are free; each further attempt waits a delay that
// doubles from one second, so 100 guesses from 20 addresses are mostly refused unchecked.
#[tokio::test]
async fn guessing_spread_over_many_addresses_is_slowed_per_account() {
    let app = spawn_app().await;
    app.create_account(EMAIL, PASSWORD).await;
    let (mut checked, mut refused) = (0, 0);
    for a in 2..22 {
        let client = new_client_from(&format!("127.0.0.{a}"));
        for _ in 0..5 {
            let r = app.sign_in(&client, EMAIL, "wrong-password").await;
            match r.status() {
                StatusCode::UNAUTHORIZED => checked += 1,
                StatusCode::TOO_MANY_REQUESTS => {
                    refused += 1;
                    assert!(retry_after(&r) >= 1);
                    let body = r.text().await.unwrap();
                    assert!(body.contains("slowed"), "{body}");
                }
                other => panic!("unexpected {other}"),
            }
        }
    }
    assert_eq!(checked + refused, 100);
    // Ten free failures, then delays of 1, 2, 4, 8 s …: a slow machine may let a few through.
    assert!(
        (10..=15).contains(&checked),
        "{checked} of 100 guesses were checked"
    );
    // The right password, sent while a delay is running, is refused too, without being
    // checked. A probe finds a running delay with at least a second to go (times are whole
    // seconds); a shorter one is waited out, and the next probe is checked and starts a longer
    // one.
    let owner = new_client_from("127.0.0.30");
    let mut owner_refused = false;
    for a in 31..41 {
        let probe = app
            .sign_in(
                &new_client_from(&format!("127.0.0.{a}")),
                EMAIL,
                "wrong-password",
            )
            .await;
        if probe.status() != StatusCode::TOO_MANY_REQUESTS {
            continue;
        }
        let wait = retry_after(&probe);
        if wait < 2 {
            tokio::time::sleep(std::time::Duration::from_secs(wait)).await;
            continue;
        }
        let r = app.sign_in(&owner, EMAIL, PASSWORD).await;
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(retry_after(&r) >= 1);
        assert!(r.text().await.unwrap().contains("slowed"));
        owner_refused = true;
        break;
    }
    assert!(owner_refused, "no running delay found");
    assert_eq!(
        owner.get(app.url("/")).send().await.unwrap().status(),
        StatusCode::SEE_OTHER,
        "not signed in"
    );
}

// Growing delays, not a lock: once the delay has passed the owner signs in, and a success
// starts the account's count again.
#[tokio::test]
async fn a_slowed_account_signs_in_once_its_delay_has_passed() {
    let app = spawn_app().await;
    app.create_account(EMAIL, PASSWORD).await;
    for a in 2..12 {
        let r = app
            .sign_in(&new_client_from(&format!("127.0.0.{a}")), EMAIL, "wrong")
            .await;
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "failure {a} is free");
    }
    let owner = new_client_from("127.0.0.40");
    let r = app.sign_in(&owner, EMAIL, PASSWORD).await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait = retry_after(&r);
    assert!((1..=2).contains(&wait), "first delay is one second: {wait}");
    tokio::time::sleep(std::time::Duration::from_millis(wait * 1000 + 200)).await;
    let r = app.sign_in(&owner, EMAIL, PASSWORD).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "the delay has passed");
    let r = app
        .sign_in(&new_client_from("127.0.0.41"), EMAIL, "wrong")
        .await;
    assert_eq!(
        r.status(),
        StatusCode::UNAUTHORIZED,
        "a success starts the count again"
    );
}

/// Rows of the audit log and the state of the sign-in counters.
async fn writes_so_far(app: &crate::helpers::TestApp) -> (usize, i64, i64) {
    let audit = app.store.recent_audit(100_000).await.unwrap().len();
    let (rows, hits): (i64, i64) =
        sqlx::query_as("SELECT COUNT(*), CAST(COALESCE(SUM(hits), 0) AS BIGINT) FROM rate_limits")
            .fetch_one(app.db.pool().await)
            .await
            .unwrap();
    (audit, rows, hits)
}

// A refused attempt writes nothing: a flood of refused guesses costs reads only.
#[tokio::test]
async fn refused_attempts_write_nothing() {
    let app = spawn_app().await;
    app.create_account(EMAIL, PASSWORD).await;
    for _ in 0..5 {
        let r = app.sign_in(&new_client(), EMAIL, "wrong-password").await;
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    }
    let before = writes_so_far(&app).await;
    for _ in 0..10 {
        let r = app.sign_in(&new_client(), EMAIL, "wrong-password").await;
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    }
    assert_eq!(writes_so_far(&app).await, before);
}

/// The `<input …>` tag of the field named `name` in a page.
fn input_tag<'a>(html: &'a str, name: &str) -> &'a str {
    let at = html
        .find(&format!("name=\"{name}\""))
        .unwrap_or_else(|| panic!("no {name} field in {html}"));
    let start = html[..at].rfind("<input").unwrap();
    let end = at + html[at..].find('>').unwrap();
    &html[start..=end]
}

#[tokio::test]
async fn a_refused_form_marks_the_fields_it_is_about() {
    // WCAG 2.2 3.3.1: the field in error is identified (aria-invalid) and described by the
    // error's text (aria-describedby names the element that holds it).
    let app = spawn_app().await;
    let token = setup_token(&app).await;
    let client = new_client();
    let page = client
        .get(app.url(&format!("/setup?token={}", token.expose())))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !page.contains("aria-invalid=\"true\""),
        "nothing is marked before an error"
    );
    let csrf = hidden_input(&page, "csrf_token").unwrap();
    for (email, password, field, other) in [
        (EMAIL, "short", "password", "email"),
        ("not an email", PASSWORD, "email", "password"),
    ] {
        let r = client
            .post(app.url("/setup"))
            .form(&[
                ("csrf_token", csrf.as_str()),
                ("token", token.expose()),
                ("email", email),
                ("password", password),
            ])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
        let html = r.text().await.unwrap();
        assert!(html.contains("id=\"setup-error\""), "{html}");
        let marked = input_tag(&html, field);
        assert!(
            marked.contains("aria-invalid=\"true\" aria-describedby=\"setup-error\""),
            "{marked}"
        );
        assert!(!input_tag(&html, other).contains("aria-invalid"), "{html}");
    }

    app.create_account(EMAIL, PASSWORD).await;
    let r = app.sign_in(&new_client(), EMAIL, "not-the-password").await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let html = r.text().await.unwrap();
    assert!(html.contains("id=\"signin-error\""), "{html}");
    for field in ["email", "password"] {
        assert!(
            input_tag(&html, field)
                .contains("aria-invalid=\"true\" aria-describedby=\"signin-error\""),
            "{html}"
        );
    }
}

/// A setup token stored for `app`, valid for a minute (the tests' own, so they know it).
async fn setup_token(app: &crate::helpers::TestApp) -> gatehouse::domain::secret::Secret {
    let token = gatehouse::domain::secret::Secret::generate(
        gatehouse::domain::secret::TokenKind::SetupToken,
    );
    let now = gatehouse::store::now();
    app.store
        .create_setup_token(&token.hash(), now, now + 60)
        .await
        .unwrap();
    token
}
