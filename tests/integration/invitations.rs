//! Invitations to a project (issue 37 item 4): an owner invites anyone by email from the project
//! page; the one-time link lets the invitee join, creating their account on the way when they
//! have none. The link is mailed (and shown only to an operator), and the form answers alike
//! whether or not the email has an account.

use std::time::Duration;

use reqwest::StatusCode;

use crate::console::{account_id, page, post_form};
use crate::helpers::{
    TestApp, hidden_input, html_unescape, new_client, quoted_printable_decode, smtp_sink,
    spawn_app, spawn_app_with,
};
use crate::oauth_helpers::{EMAIL, signed_in_browser};
use gatehouse::domain::account::{Email, Role};
use gatehouse::store::now;

const NEWCOMER: &str = "newcomer@example.com";
const CAROL: &str = "carol@example.com";

/// Alice (an operator when `operator`) signed in, owning "Garden": (browser, project id).
async fn alice_owns_garden(app: &TestApp, operator: bool) -> (reqwest::Client, String) {
    let browser = signed_in_browser(app).await;
    if operator {
        app.store
            .set_account_admin(&Email::parse(EMAIL).unwrap(), true)
            .await
            .unwrap();
    }
    let alice = account_id(app, EMAIL).await;
    let p = app
        .store
        .create_project("Garden", &alice, now())
        .await
        .unwrap();
    (browser, p)
}

/// The owner's member form posted with `email` and `role`.
async fn add_or_invite(
    app: &TestApp,
    browser: &reqwest::Client,
    project: &str,
    email: &str,
    role: &str,
) -> reqwest::Response {
    let path = format!("/projects/{project}");
    post_form(
        app,
        browser,
        &path,
        &format!("{path}/members"),
        &[("email", email), ("role", role)],
    )
    .await
}

/// The invitation link shown to an operator on the page answering the member form.
fn shown_link(html: &str) -> String {
    let html = html_unescape(html);
    let field = html
        .split("id=\"invitation-link\"")
        .nth(1)
        .unwrap_or_else(|| panic!("an invitation link on the page: {html}"));
    field
        .split("value=\"")
        .nth(1)
        .and_then(|v| v.split('"').next())
        .unwrap()
        .to_string()
}

/// `POST /invite` in `browser` for the token of `link`, with the CSRF token of the invitation
/// page it holds.
async fn post_invite(
    browser: &reqwest::Client,
    app: &TestApp,
    invite_page: &str,
    link: &str,
    password: Option<&str>,
) -> reqwest::Response {
    let csrf = hidden_input(invite_page, "csrf_token").unwrap();
    let token = link.split("token=").nth(1).unwrap().to_string();
    let mut form = vec![("csrf_token", csrf.as_str()), ("token", token.as_str())];
    if let Some(p) = password {
        form.push(("password", p));
    }
    browser
        .post(app.url("/invite"))
        .form(&form)
        .send()
        .await
        .unwrap()
}

async fn get(browser: &reqwest::Client, url: &str) -> (StatusCode, String) {
    let r = browser.get(url).send().await.unwrap();
    (r.status(), r.text().await.unwrap())
}

/// The number of invitation rows (used or not).
async fn invitation_rows(app: &TestApp) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM project_invitations")
        .fetch_one(app.db.pool().await)
        .await
        .unwrap()
}

#[tokio::test]
async fn an_operators_invitation_creates_the_account_and_the_membership_once() {
    let app = spawn_app().await;
    let (alice_browser, garden) = alice_owns_garden(&app, true).await;

    let r = add_or_invite(&app, &alice_browser, &garden, NEWCOMER, "write").await;
    assert_eq!(r.status(), StatusCode::OK);
    let html = r.text().await.unwrap();
    let link = shown_link(&html);
    assert!(
        link.starts_with(&app.url("/invite?token=gate_inv_")),
        "{link}"
    );
    assert!(
        html.contains("Invitation made."),
        "not mailed: no mail set up"
    );
    let listed = page(&app, &alice_browser, &format!("/projects/{garden}")).await;
    assert!(listed.contains("<h2>Invited</h2>") && listed.contains(NEWCOMER));
    // Only the token's hash is stored.
    let token = link.split("token=").nth(1).unwrap();
    let stored: String = sqlx::query_scalar("SELECT token_hash FROM project_invitations")
        .fetch_one(app.db.pool().await)
        .await
        .unwrap();
    assert_ne!(stored, token);
    assert_eq!(stored.len(), 64);

    // The newcomer opens it: no account yet, so a password makes one.
    let newcomer = new_client();
    let (status, invite_page) = get(&newcomer, &link).await;
    assert_eq!(status, StatusCode::OK);
    assert!(invite_page.contains("Create your account"), "{invite_page}");
    assert!(invite_page.contains(NEWCOMER) && invite_page.contains("Garden"));
    assert!(invite_page.contains("read, create and change its notes"));
    let r = post_invite(&newcomer, &app, &invite_page, &link, Some("short")).await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let refused = r.text().await.unwrap();
    assert!(refused.contains("aria-invalid=\"true\" aria-describedby=\"invite-error\""));
    let r = post_invite(
        &newcomer,
        &app,
        &invite_page,
        &link,
        Some("newcomer-password"),
    )
    .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        r.headers()["location"],
        format!("/projects/{garden}").as_str()
    );
    // Signed in, a member with the invited role, told so.
    let project = page(&app, &newcomer, &format!("/projects/{garden}")).await;
    assert!(
        project.contains("You joined Garden with the role write"),
        "{project}"
    );
    let id = account_id(&app, NEWCOMER).await;
    let membership = app.store.membership(&id, &garden).await.unwrap().unwrap();
    assert_eq!(membership.role, Role::Write);
    let r = app
        .sign_in(&new_client(), NEWCOMER, "newcomer-password")
        .await;
    assert_eq!(
        r.status(),
        StatusCode::SEE_OTHER,
        "the new password signs in"
    );

    // The link worked once.
    let (status, body) = get(&new_client(), &link).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.contains("Invitation not valid"));
    // The one who joined with it is led to the project instead.
    let r = newcomer.get(&link).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        r.headers()["location"],
        format!("/projects/{garden}").as_str()
    );
    assert!(
        !page(&app, &alice_browser, &format!("/projects/{garden}"))
            .await
            .contains("<h2>Invited</h2>"),
        "no longer pending"
    );
    let events: Vec<(String, String)> = sqlx::query_as(
        "SELECT event, COALESCE(detail, '') FROM audit_events \
         WHERE event IN ('invitation_created', 'invitation_accepted', 'account_created') ORDER BY id",
    )
    .fetch_all(app.db.pool().await)
    .await
    .unwrap();
    let kinds: Vec<&str> = events.iter().map(|(e, _)| e.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "invitation_created",
            "account_created",
            "invitation_accepted"
        ]
    );
    assert_eq!(events[0].1, format!("email={NEWCOMER} role=write"));
    assert!(events.iter().all(|(_, d)| !d.contains(token)), "no token");
}

#[tokio::test]
async fn someone_with_an_account_signs_in_to_accept_and_nobody_else_can() {
    let app = spawn_app().await;
    let (alice_browser, garden) = alice_owns_garden(&app, true).await;
    app.create_account(CAROL, "carol-password").await;
    let r = add_or_invite(&app, &alice_browser, &garden, CAROL, "read").await;
    assert_eq!(r.status(), StatusCode::OK, "shares no project: invited");
    let link = shown_link(&r.text().await.unwrap());

    // Someone else signed in (the owner herself) is asked to sign out; posting changes nothing.
    let (status, other) = get(&alice_browser, &link).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(other.contains(&format!("You are signed in as {EMAIL}, not {CAROL}")));
    let r = post_invite(&alice_browser, &app, &other, &link, None).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let carol = account_id(&app, CAROL).await;
    assert!(
        app.store
            .membership(&carol, &garden)
            .await
            .unwrap()
            .is_none()
    );

    // Carol, signed out, is sent to sign in and comes back to join.
    let browser = new_client();
    let r = browser.get(&link).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let location = r.headers()["location"].to_str().unwrap().to_string();
    let token = link.split("token=").nth(1).unwrap();
    assert_eq!(
        location,
        format!("/signin?next=%2Finvite%3Ftoken%3D{token}"),
        "sign in, then back"
    );
    let signin = page(&app, &browser, &location).await;
    let csrf = hidden_input(&signin, "csrf_token").unwrap();
    let next = hidden_input(&signin, "next").unwrap();
    let r = browser
        .post(app.url("/signin"))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("email", CAROL),
            ("password", "carol-password"),
            ("next", next.as_str()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        r.headers()["location"],
        format!("/invite?token={token}").as_str()
    );
    let (status, join) = get(&browser, &link).await;
    assert_eq!(status, StatusCode::OK);
    assert!(join.contains("Join Garden</button>"), "{join}");
    assert!(!join.contains("Create your account"));
    let r = post_invite(&browser, &app, &join, &link, None).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let membership = app
        .store
        .membership(&carol, &garden)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(membership.role, Role::Read);
    // Once a member shares Garden, the owner changes her role directly, without a link.
    let r = add_or_invite(&app, &alice_browser, &garden, CAROL, "write").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let membership = app
        .store
        .membership(&carol, &garden)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(membership.role, Role::Write);
    assert_eq!(invitation_rows(&app).await, 1);
}

#[tokio::test]
async fn an_owner_who_is_not_an_operator_invites_by_mail_alone_and_learns_nothing() {
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
    let (alice_browser, garden) = alice_owns_garden(&app, false).await;
    app.create_account(CAROL, "carol-password").await;
    let mut notices = Vec::new();
    for email in [CAROL, NEWCOMER] {
        let r = add_or_invite(&app, &alice_browser, &garden, email, "read").await;
        assert_eq!(r.status(), StatusCode::SEE_OTHER, "{email}");
        let html = page(&app, &alice_browser, &format!("/projects/{garden}")).await;
        assert!(!html.contains("gate_inv_"), "the owner never sees the link");
        let notice = html_unescape(
            html.split("role=\"status\">")
                .nth(1)
                .and_then(|n| n.split('<').next())
                .unwrap(),
        );
        notices.push(notice.replace(email, "EMAIL"));
    }
    assert_eq!(notices[0], notices[1], "the same answer either way");
    assert!(notices[0].starts_with("Invitation mailed to EMAIL"));

    let mut mailed = Vec::new();
    for _ in 0..2 {
        let mail = tokio::time::timeout(Duration::from_secs(60), mails.recv())
            .await
            .expect("the mail arrives")
            .unwrap();
        mailed.push(quoted_printable_decode(&mail));
    }
    let to_newcomer = mailed
        .iter()
        .find(|m| m.contains(&format!("To: {NEWCOMER}")))
        .expect("a mail to the newcomer");
    assert!(to_newcomer.contains("invited you to the project \"Garden\""));
    let link = to_newcomer
        .split_whitespace()
        .find(|w| w.starts_with(&app.url("/invite?token=gate_inv_")))
        .unwrap()
        .to_string();
    let browser = new_client();
    let (status, invite_page) = get(&browser, &link).await;
    assert_eq!(status, StatusCode::OK);
    let r = post_invite(
        &browser,
        &app,
        &invite_page,
        &link,
        Some("newcomer-password"),
    )
    .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let id = account_id(&app, NEWCOMER).await;
    assert!(app.store.membership(&id, &garden).await.unwrap().is_some());

    // Carol's link, after its seven days, changes nothing.
    sqlx::query("UPDATE project_invitations SET expires_at = $1 WHERE email = $2")
        .bind(now() - 1)
        .bind(CAROL)
        .execute(app.db.pool().await)
        .await
        .unwrap();
    let to_carol = mailed
        .iter()
        .find(|m| m.contains(&format!("To: {CAROL}")))
        .unwrap();
    let carol_link = to_carol
        .split_whitespace()
        .find(|w| w.starts_with(&app.url("/invite?token=")))
        .unwrap();
    let (status, _) = get(&new_client(), carol_link).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn without_mail_an_owner_who_is_not_an_operator_is_told_whom_to_ask() {
    let app = spawn_app().await;
    let (alice_browser, garden) = alice_owns_garden(&app, false).await;
    let r = add_or_invite(&app, &alice_browser, &garden, NEWCOMER, "read").await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let html = html_unescape(&r.text().await.unwrap());
    assert!(html.contains("this server has no mail set up"), "{html}");
    assert!(html.contains(&format!("value=\"{NEWCOMER}\"")), "kept");
    assert_eq!(invitation_rows(&app).await, 0, "nothing stored");
}

#[tokio::test]
async fn a_later_decision_of_the_owner_ends_a_pending_invitation() {
    let app = spawn_app().await;
    let (alice_browser, garden) = alice_owns_garden(&app, true).await;
    let carol = app.create_account(CAROL, "carol-password").await;

    // Invited to write, then added to read by the operator and removed: the old link would
    // have brought her back with write. It no longer works.
    let r = add_or_invite(&app, &alice_browser, &garden, CAROL, "write").await;
    let write_link = shown_link(&r.text().await.unwrap());
    app.store
        .add_member(&garden, &carol, Role::Read, now())
        .await
        .unwrap();
    let (status, _) = get(&new_client(), &write_link).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "ended by the role given");
    assert!(
        app.store
            .remove_member(&garden, &carol, now())
            .await
            .unwrap()
    );
    let carol_browser = new_client();
    let r = app.sign_in(&carol_browser, CAROL, "carol-password").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (status, _) = get(&carol_browser, &write_link).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        app.store
            .membership(&carol, &garden)
            .await
            .unwrap()
            .is_none()
    );

    // Invited again, then removed after joining: that link is spent, and a pending one of a
    // removed member ends with the removal.
    let r = add_or_invite(&app, &alice_browser, &garden, CAROL, "read").await;
    let read_link = shown_link(&r.text().await.unwrap());
    let (_, join) = get(&carol_browser, &read_link).await;
    let r = post_invite(&carol_browser, &app, &join, &read_link, None).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    // A second click on Join, or the link opened again, leads to the project.
    let r = post_invite(&carol_browser, &app, &join, &read_link, None).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        r.headers()["location"],
        format!("/projects/{garden}").as_str()
    );
    let project = page(&app, &carol_browser, &format!("/projects/{garden}")).await;
    assert!(
        project.contains("You are a member of Garden already, with the role read."),
        "{project}"
    );
    let r = carol_browser.get(&read_link).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    // Someone else opening the spent link still learns nothing.
    let (status, _) = get(&alice_browser, &read_link).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // A role changed on the member form is audited as a change, not as a new member.
    let r = add_or_invite(&app, &alice_browser, &garden, CAROL, "write").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let changed: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM audit_events WHERE event = 'member_role_changed' AND subject = $1",
    )
    .bind(&garden)
    .fetch_one(app.db.pool().await)
    .await
    .unwrap();
    assert_eq!(changed, 1);
}

#[tokio::test]
async fn the_owner_withdraws_an_invitation_after_a_confirmation() {
    let app = spawn_app().await;
    let (alice_browser, garden) = alice_owns_garden(&app, true).await;
    let r = add_or_invite(&app, &alice_browser, &garden, NEWCOMER, "read").await;
    let link = shown_link(&r.text().await.unwrap());
    let project = format!("/projects/{garden}");
    let listed = page(&app, &alice_browser, &project).await;
    assert!(
        listed.contains(&format!("Withdraw {NEWCOMER}…")),
        "{listed}"
    );

    // The confirmation page names it and changes nothing.
    let confirm_path = format!("{project}/invitations/withdraw?email={NEWCOMER}");
    let confirm = page(&app, &alice_browser, &confirm_path).await;
    assert!(confirm.contains(&format!("Withdraw the invitation of {NEWCOMER}?")));
    let (status, _) = get(&new_client(), &link).await;
    assert_eq!(status, StatusCode::OK, "still works until confirmed");

    let r = post_form(
        &app,
        &alice_browser,
        &confirm_path,
        &format!("{project}/invitations/withdraw"),
        &[("email", NEWCOMER)],
    )
    .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let after = page(&app, &alice_browser, &project).await;
    assert!(
        after.contains(&format!(
            "The invitation of {NEWCOMER} was withdrawn: its link no longer works."
        )),
        "{after}"
    );
    assert!(!after.contains("<h2>Invited</h2>"));
    let (status, _) = get(&new_client(), &link).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Nothing left to withdraw: said on the project page; a member who is not the owner
    // cannot withdraw at all.
    let r = post_form(
        &app,
        &alice_browser,
        &project,
        &format!("{project}/invitations/withdraw"),
        &[("email", NEWCOMER)],
    )
    .await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let reader = app.create_account(CAROL, "carol-password").await;
    app.store
        .add_member(&garden, &reader, Role::Read, now())
        .await
        .unwrap();
    let carol_browser = new_client();
    app.sign_in(&carol_browser, CAROL, "carol-password").await;
    let r = carol_browser
        .get(app.url(&confirm_path))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let withdrawn: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM audit_events WHERE event = 'invitation_withdrawn'",
    )
    .fetch_one(app.db.pool().await)
    .await
    .unwrap();
    assert_eq!(withdrawn, 1);
}
