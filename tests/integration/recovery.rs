//! A way back from a lost password (issue 36, item 4): `gatehouse account set-password |
//! reset-link | enable | list`, the one-time reset link, and "Forgot your password?" mailing
//! that link through an SMTP server.

use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use reqwest::StatusCode;

use crate::helpers::{
    TestApp, hidden_input, new_client, quoted_printable_decode, smtp_sink, spawn_app,
    spawn_app_with,
};
use crate::keys::gatehouse;
use crate::oauth_helpers::{EMAIL, PASSWORD, access_token_live, full_grant};

const NEW_PASSWORD: &str = "a-brand-new-password";

/// `gatehouse ARGS…`, which must succeed: its standard output.
fn ok(app: &TestApp, args: &[&str]) -> String {
    let (success, out, err) = gatehouse(app, args);
    assert!(success, "{args:?}: {err}");
    out
}

/// `gatehouse ARGS…` with `stdin` on its standard input: (success, stdout, stderr).
fn gatehouse_with_stdin(app: &TestApp, args: &[&str], stdin: &str) -> (bool, String, String) {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .args(args)
        .env("DATABASE_URL", &app.db.url)
        .env("MCP_SERVER_URL", &app.config.mcp_server_url)
        .env("RUST_LOG", "error")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// The link `gatehouse account reset-link EMAIL` prints.
fn reset_link(app: &TestApp, email: &str) -> String {
    let out = ok(app, &["account", "reset-link", email]);
    let link = out
        .lines()
        .find(|l| l.starts_with("http"))
        .unwrap_or_else(|| panic!("no link in {out}"))
        .to_string();
    assert!(
        link.starts_with(&app.url("/reset?token=gate_reset_")),
        "{link}"
    );
    link
}

/// A browser signed in as `email`.
async fn signed_in(app: &TestApp, email: &str, password: &str) -> reqwest::Client {
    let browser = new_client();
    let r = app.sign_in(&browser, email, password).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "signed in");
    browser
}

/// Whether `browser` is still signed in (the account page shows instead of a redirect).
async fn still_signed_in(app: &TestApp, browser: &reqwest::Client) -> bool {
    let r = browser.get(app.url("/account")).send().await.unwrap();
    r.status() == StatusCode::OK
}

/// Submits the reset form at `link` with `password` in `browser`.
async fn submit_reset(
    app: &TestApp,
    browser: &reqwest::Client,
    link: &str,
    password: &str,
) -> reqwest::Response {
    let page = browser.get(link).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK, "the link shows its form");
    let html = page.text().await.unwrap();
    let csrf = hidden_input(&html, "csrf_token").unwrap();
    let token = hidden_input(&html, "token").unwrap();
    browser
        .post(app.url("/reset"))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("token", token.as_str()),
            ("password", password),
        ])
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_reset_link_sets_a_new_password_once_and_ends_the_sessions_but_not_the_grants() {
    let app = spawn_app().await;
    // An MCP client holds a grant of the account, and a browser is signed in.
    let (_client_id, tokens) = full_grant(&app).await;
    let access = tokens["access_token"].as_str().unwrap().to_string();
    let other = signed_in(&app, EMAIL, PASSWORD).await;
    let link = reset_link(&app, EMAIL);

    let browser = new_client();
    // A password the policy refuses: the form again, nothing spent.
    let short = submit_reset(&app, &browser, &link, "short").await;
    assert_eq!(short.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        short
            .text()
            .await
            .unwrap()
            .contains("at least 8 characters")
    );
    let done = submit_reset(&app, &browser, &link, NEW_PASSWORD).await;
    assert_eq!(done.status(), StatusCode::SEE_OTHER);
    assert_eq!(done.headers()["location"], "/signin?reset=1");
    let signin = browser
        .get(app.url("/signin?reset=1"))
        .send()
        .await
        .unwrap();
    assert!(
        signin
            .text()
            .await
            .unwrap()
            .contains("Your password was changed")
    );

    // The old password no longer works, the new one does, and the other browser was signed out.
    assert!(!still_signed_in(&app, &other).await, "sessions end");
    assert_eq!(
        app.sign_in(&new_client(), EMAIL, PASSWORD).await.status(),
        StatusCode::UNAUTHORIZED
    );
    signed_in(&app, EMAIL, NEW_PASSWORD).await;
    // The grant stays.
    assert!(access_token_live(&app, &access).await, "grants stay");

    // The link works once.
    let again = browser.get(&link).send().await.unwrap();
    assert_eq!(again.status(), StatusCode::NOT_FOUND);
    assert!(again.text().await.unwrap().contains("Link not valid"));

    // Audited, never with the token.
    let token = link.split("token=").nth(1).unwrap();
    let rows = app.store.recent_audit(100).await.unwrap();
    assert!(
        rows.iter().any(|r| r.event == "password_reset"
            && r.outcome == "success"
            && r.detail.as_deref() == Some("reset link")),
        "{rows:?}"
    );
    assert!(
        rows.iter().any(|r| r.event == "password_reset_requested"),
        "{rows:?}"
    );
    assert!(
        !format!("{rows:?}").contains(token),
        "no token in the audit"
    );
    assert!(!format!("{rows:?}").contains(NEW_PASSWORD));
}

#[tokio::test]
async fn an_expired_or_unknown_reset_link_changes_nothing() {
    let app = spawn_app().await;
    let id = app.create_account(EMAIL, PASSWORD).await;
    let token = gatehouse::domain::secret::Secret::generate(
        gatehouse::domain::secret::TokenKind::ResetToken,
    );
    let now = gatehouse::store::now();
    // Made an hour and a second ago: expired.
    app.store
        .create_reset_token(&token.hash(), &id, now - 3601, now - 1)
        .await
        .unwrap();
    let browser = new_client();
    let link = app.url(&format!("/reset?token={}", token.expose()));
    assert_eq!(
        browser.get(&link).send().await.unwrap().status(),
        StatusCode::NOT_FOUND
    );
    // A form posted with it anyway (the CSRF token from another page).
    let page = browser
        .get(app.url("/signin"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = hidden_input(&page, "csrf_token").unwrap();
    for presented in [token.expose(), "gate_reset_unknown", ""] {
        let r = browser
            .post(app.url("/reset"))
            .form(&[
                ("csrf_token", csrf.as_str()),
                ("token", presented),
                ("password", NEW_PASSWORD),
            ])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{presented}");
    }
    // The password is the old one.
    signed_in(&app, EMAIL, PASSWORD).await;
    assert_eq!(
        app.sign_in(&new_client(), EMAIL, NEW_PASSWORD)
            .await
            .status(),
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn the_command_line_lists_enables_and_sets_passwords() {
    let app = spawn_app().await;
    app.create_account(EMAIL, PASSWORD).await;
    app.create_account("bob@example.com", PASSWORD).await;
    let other = signed_in(&app, EMAIL, PASSWORD).await;

    let list = ok(&app, &["account", "list"]);
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines[0], "EMAIL\tID\tSTATUS\tCREATED\tROLE");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&format!("{EMAIL}\t")) && l.contains("\tactive\t"))
    );

    // set-password: the new password works, the old does not, sessions end.
    let (success, out, err) = gatehouse_with_stdin(
        &app,
        &["account", "set-password", EMAIL, "--password-stdin"],
        &format!("{NEW_PASSWORD}\n"),
    );
    assert!(success, "{err}");
    assert!(out.contains("signed out"), "{out}");
    assert!(!still_signed_in(&app, &other).await);
    assert_eq!(
        app.sign_in(&new_client(), EMAIL, PASSWORD).await.status(),
        StatusCode::UNAUTHORIZED
    );
    signed_in(&app, EMAIL, NEW_PASSWORD).await;
    // A bad password, an unknown account: one clear line, nothing changed.
    let (success, _, err) = gatehouse_with_stdin(
        &app,
        &["account", "set-password", EMAIL, "--password-stdin"],
        "short\n",
    );
    assert!(!success && err.contains("at least 8 characters"), "{err}");
    let (success, _, err) = gatehouse_with_stdin(
        &app,
        &[
            "account",
            "set-password",
            "nobody@example.com",
            "--password-stdin",
        ],
        "a-long-enough-one\n",
    );
    assert!(
        !success && err.contains("no account with email nobody@example.com"),
        "{err}"
    );
    signed_in(&app, EMAIL, NEW_PASSWORD).await;

    // disable, then enable: the account signs in again.
    ok(&app, &["account", "disable", "bob@example.com"]);
    assert!(
        ok(&app, &["account", "list"])
            .lines()
            .any(|l| l.starts_with("bob@example.com\t") && l.contains("\tdisabled\t"))
    );
    assert_eq!(
        app.sign_in(&new_client(), "bob@example.com", PASSWORD)
            .await
            .status(),
        StatusCode::UNAUTHORIZED
    );
    // A reset link for a disabled account says so.
    assert!(ok(&app, &["account", "reset-link", "bob@example.com"]).contains("disabled"));
    assert_eq!(
        ok(&app, &["account", "enable", "bob@example.com"]).trim(),
        "enabled account bob@example.com"
    );
    signed_in(&app, "bob@example.com", PASSWORD).await;
    let rows = app.store.recent_audit(100).await.unwrap();
    for event in ["account_enabled", "password_reset"] {
        assert!(rows.iter().any(|r| r.event == event), "{event}: {rows:?}");
    }
    assert!(!format!("{rows:?}").contains(NEW_PASSWORD));
}

#[tokio::test]
async fn changing_the_password_on_the_account_page_voids_reset_links() {
    let app = spawn_app().await;
    app.create_account(EMAIL, PASSWORD).await;
    let link = reset_link(&app, EMAIL);
    let browser = signed_in(&app, EMAIL, PASSWORD).await;
    let page = browser
        .get(app.url("/account"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = hidden_input(&page, "csrf_token").unwrap();
    let r = browser
        .post(app.url("/account/password"))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("current_password", PASSWORD),
            ("new_password", NEW_PASSWORD),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        new_client().get(&link).send().await.unwrap().status(),
        StatusCode::NOT_FOUND
    );
}

/// GETs the forgot page and posts `email` on it: (status, body).
async fn ask_for_a_link(app: &TestApp, email: &str) -> (StatusCode, String) {
    let browser = new_client();
    let page = browser
        .get(app.url("/signin/forgot"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = hidden_input(&page, "csrf_token").unwrap();
    let r = browser
        .post(app.url("/signin/forgot"))
        .form(&[("csrf_token", csrf.as_str()), ("email", email)])
        .send()
        .await
        .unwrap();
    let status = r.status();
    let body = r.text().await.unwrap().replace(&csrf, "CSRF");
    (status, body)
}

#[tokio::test]
async fn forgot_your_password_mails_a_link_and_answers_the_same_for_unknown_emails() {
    let (port, mut mails) = smtp_sink().await;
    let app = spawn_app_with(|v| {
        v.insert(
            "GATEHOUSE_SMTP_URL".into(),
            format!("smtp://127.0.0.1:{port}"),
        );
        v.insert(
            "GATEHOUSE_SMTP_FROM".into(),
            "Gatehouse <gatehouse@example.com>".into(),
        );
    })
    .await;
    app.create_account(EMAIL, PASSWORD).await;
    let signin = new_client()
        .get(app.url("/signin"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        signin.contains("href=\"/signin/forgot\""),
        "the link is offered"
    );

    let (unknown_status, unknown_page) = ask_for_a_link(&app, "nobody@example.com").await;
    let (known_status, known_page) = ask_for_a_link(&app, EMAIL).await;
    assert_eq!(unknown_status, StatusCode::OK);
    assert_eq!(known_status, StatusCode::OK);
    assert_eq!(unknown_page, known_page, "the same page either way");
    assert!(known_page.contains("If an account with that email exists"));

    let mail = tokio::time::timeout(Duration::from_secs(60), mails.recv())
        .await
        .expect("the mail arrives")
        .unwrap();
    assert!(mail.contains(&format!("To: {EMAIL}")), "{mail}");
    assert!(
        mail.contains("From: Gatehouse <gatehouse@example.com>"),
        "{mail}"
    );
    // The body is quoted-printable (RFC 2045 §6.7) when a line is long: decode it.
    let body = quoted_printable_decode(mail.split_once("\n\n").map_or("", |(_, b)| b));
    let link = body
        .lines()
        .find(|l| l.starts_with(&app.url("/reset?token=")))
        .unwrap_or_else(|| panic!("no link in {mail}"))
        .trim()
        .to_string();
    // No mail went to the unknown address.
    assert!(mails.try_recv().is_err(), "one mail only");

    let browser = new_client();
    let done = submit_reset(&app, &browser, &link, NEW_PASSWORD).await;
    assert_eq!(done.status(), StatusCode::SEE_OTHER);
    signed_in(&app, EMAIL, NEW_PASSWORD).await;
}

#[tokio::test]
async fn without_smtp_the_sign_in_page_offers_no_mail_and_says_whom_to_ask() {
    let app = spawn_app().await;
    let signin = new_client()
        .get(app.url("/signin"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!signin.contains("/signin/forgot"));
    let page = new_client()
        .get(app.url("/signin/forgot"))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let html = page.text().await.unwrap();
    assert!(html.contains("gatehouse account reset-link"), "{html}");
    assert!(!html.contains("name=\"email\""));
}
