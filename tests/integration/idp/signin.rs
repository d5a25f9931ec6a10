//! Signing in at an identity provider (OpenID Connect, issue "Identity" item 1): linking by
//! `sub`, the verified-email and domain rules, `--create-accounts`, disabled accounts, spoiled
//! ID tokens, replayed or foreign `state`, key rotation, a provider that is down,
//! `GATEHOUSE_PASSWORD_SIGNIN=off`, a pending authorization request, and two instances.

use reqwest::StatusCode;

use super::provider::{CLIENT_ID, CLIENT_SECRET, Person, Provider, Spoil};
use super::{TEST_KEY, cli_ok, spawn_with_key};
use crate::helpers::{TestApp, TestDb, hidden_input, new_client};
use crate::oauth_helpers::{REDIRECT, authorize_url, pkce, register_public};

const PASSWORD: &str = "a-long-password";

fn person(sub: &str, email: &str, verified: bool) -> Person {
    Person {
        sub: sub.to_string(),
        email: Some(email.to_string()),
        email_verified: verified,
    }
}

/// Registers `provider` as `acme` with `extra` arguments.
async fn add_acme(app: &TestApp, provider: &Provider, extra: &[&str]) {
    let mut args = vec![
        "idp",
        "add",
        "acme",
        "--issuer",
        provider.issuer.as_str(),
        "--client-id",
        CLIENT_ID,
        "--client-secret-stdin",
        "--display-name",
        "Acme SSO",
    ];
    args.extend_from_slice(extra);
    cli_ok(app, &args, &format!("{CLIENT_SECRET}\n")).await;
}

fn location(r: &reqwest::Response) -> String {
    r.headers()
        .get("location")
        .unwrap_or_else(|| panic!("a redirect, got {}", r.status()))
        .to_str()
        .unwrap()
        .to_string()
}

/// Starts a provider sign-in for `next` in `browser` and lets the provider sign the person in;
/// returns the callback URL the provider sends the browser back to.
async fn to_callback(app: &TestApp, browser: &reqwest::Client, next: &str) -> String {
    let next: String = url::form_urlencoded::byte_serialize(next.as_bytes()).collect();
    let r = browser
        .get(app.url(&format!("/signin/idp/acme?next={next}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "off to the provider");
    let at_provider = location(&r);
    assert!(
        at_provider.contains("code_challenge_method=S256"),
        "{at_provider}"
    );
    assert!(at_provider.contains("nonce="), "{at_provider}");
    let r = browser.get(&at_provider).send().await.unwrap();
    assert!(r.status().is_redirection(), "the provider signs in at once");
    let back = location(&r);
    assert!(
        back.starts_with(&format!("{}/signin/idp/acme/callback?", app.address)),
        "{back}"
    );
    back
}

/// A whole provider sign-in in `browser` for `next`: the callback's answer.
async fn provider_signin(
    app: &TestApp,
    browser: &reqwest::Client,
    next: &str,
) -> reqwest::Response {
    let back = to_callback(app, browser, next).await;
    browser.get(&back).send().await.unwrap()
}

/// Whether `browser` is signed in (the account page answers instead of sending to sign in).
async fn signed_in(app: &TestApp, browser: &reqwest::Client) -> bool {
    let r = browser.get(app.url("/account")).send().await.unwrap();
    r.status() == StatusCode::OK
}

async fn count(app: &TestApp, sql: &str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(app.db.pool().await)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_verified_email_links_the_account_then_the_sub_signs_in() {
    let provider = Provider::start(person("u-1", "alice@acme.example", true)).await;
    let app = spawn_with_key(|_| {}).await;
    let alice = app.create_account("alice@acme.example", PASSWORD).await;
    add_acme(&app, &provider, &["--domains", "acme.example"]).await;

    let browser = new_client();
    let r = provider_signin(&app, &browser, "/projects").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&r), "/projects", "lands where it was started for");
    assert!(signed_in(&app, &browser).await);
    assert_eq!(
        provider.token_requests(),
        1,
        "the code was redeemed with the secret"
    );
    let linked: String = sqlx::query_scalar(
        "SELECT account_id FROM identity_links WHERE provider = 'acme' AND subject = 'u-1'",
    )
    .fetch_one(app.db.pool().await)
    .await
    .unwrap();
    assert_eq!(linked, alice);
    let detail: String = sqlx::query_scalar(
        "SELECT detail FROM audit_events WHERE event = 'signin' AND outcome = 'success' AND account_id = $1",
    )
    .bind(&alice)
    .fetch_one(app.db.pool().await)
    .await
    .unwrap();
    assert_eq!(detail, "method=provider idp=acme");

    // Linked by sub: the same person signs in even when the provider now says another,
    // unverified email.
    provider.set_person(person("u-1", "renamed@elsewhere.example", false));
    let again = new_client();
    let r = provider_signin(&app, &again, "/").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert!(signed_in(&app, &again).await);
    let page = again
        .get(app.url("/account"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("alice@acme.example"), "the linked account");
}

#[tokio::test]
async fn unverified_emails_foreign_domains_and_unknown_people_create_nothing() {
    let provider = Provider::start(person("u-2", "alice@acme.example", false)).await;
    let app = spawn_with_key(|_| {}).await;
    app.create_account("alice@acme.example", PASSWORD).await;
    app.create_account("carol@other.example", PASSWORD).await;
    add_acme(&app, &provider, &["--domains", "acme.example"]).await;

    let cases = [
        (
            person("u-2", "alice@acme.example", false),
            "did not confirm a verified email",
        ),
        (
            person("u-3", "carol@other.example", true),
            "cannot sign in with Acme SSO",
        ),
        (
            person("u-4", "bob@acme.example", true),
            "There is no account for bob@acme.example",
        ),
    ];
    for (who, words) in cases {
        provider.set_person(who.clone());
        let browser = new_client();
        let r = provider_signin(&app, &browser, "/").await;
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "{who:?}");
        let page = r.text().await.unwrap();
        assert!(page.contains(words), "{who:?}: {page}");
        assert!(
            page.contains("name=\"password\""),
            "password sign-in still offered"
        );
        assert!(!signed_in(&app, &browser).await);
    }
    assert_eq!(count(&app, "SELECT COUNT(*) FROM identity_links").await, 0);
    assert_eq!(count(&app, "SELECT COUNT(*) FROM accounts").await, 2);
}

#[tokio::test]
async fn create_accounts_makes_one_for_an_allowed_domain_and_disabled_stays_disabled() {
    let provider = Provider::start(person("u-5", "bob@acme.example", true)).await;
    let app = spawn_with_key(|_| {}).await;
    add_acme(
        &app,
        &provider,
        &["--domains", "acme.example", "--create-accounts"],
    )
    .await;

    let browser = new_client();
    let r = provider_signin(&app, &browser, "/").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert!(signed_in(&app, &browser).await);
    assert_eq!(
        count(
            &app,
            "SELECT COUNT(*) FROM accounts WHERE email = 'bob@acme.example'"
        )
        .await,
        1
    );

    // Another domain gets no account even with --create-accounts.
    provider.set_person(person("u-6", "eve@evil.example", true));
    let r = provider_signin(&app, &new_client(), "/").await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(count(&app, "SELECT COUNT(*) FROM accounts").await, 1);

    // A disabled account stays disabled through its provider.
    cli_ok(&app, &["account", "disable", "bob@acme.example"], "").await;
    provider.set_person(person("u-5", "bob@acme.example", true));
    let browser = new_client();
    let r = provider_signin(&app, &browser, "/").await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert!(r.text().await.unwrap().contains("This account is disabled"));
    assert!(!signed_in(&app, &browser).await);
}

#[tokio::test]
async fn forged_expired_and_misaddressed_id_tokens_are_refused() {
    let provider = Provider::start(person("u-7", "alice@acme.example", true)).await;
    let app = spawn_with_key(|_| {}).await;
    app.create_account("alice@acme.example", PASSWORD).await;
    add_acme(&app, &provider, &[]).await;
    for spoil in [
        Spoil::ForgedSignature,
        Spoil::Expired,
        Spoil::WrongNonce,
        Spoil::WrongAudience,
        Spoil::WrongIssuer,
    ] {
        provider.spoil(spoil);
        let browser = new_client();
        let r = provider_signin(&app, &browser, "/").await;
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "{spoil:?}");
        assert!(
            r.text().await.unwrap().contains("could not be verified"),
            "{spoil:?}"
        );
        assert!(!signed_in(&app, &browser).await, "{spoil:?}");
    }
    assert_eq!(count(&app, "SELECT COUNT(*) FROM identity_links").await, 0);
    provider.spoil(Spoil::None);
    let browser = new_client();
    assert_eq!(
        provider_signin(&app, &browser, "/").await.status(),
        StatusCode::SEE_OTHER,
        "a good token still works"
    );
}

#[tokio::test]
async fn state_is_single_use_and_bound_to_the_browser_that_began() {
    let provider = Provider::start(person("u-8", "alice@acme.example", true)).await;
    let app = spawn_with_key(|_| {}).await;
    app.create_account("alice@acme.example", PASSWORD).await;
    add_acme(&app, &provider, &[]).await;

    // A callback URL opened in another browser signs nobody in, and spends nothing.
    let browser = new_client();
    let back = to_callback(&app, &browser, "/").await;
    let stranger = new_client();
    let r = stranger.get(&back).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(
        r.text()
            .await
            .unwrap()
            .contains("has expired, was already used")
    );
    assert!(!signed_in(&app, &stranger).await);
    assert_eq!(provider.token_requests(), 0, "the code was not redeemed");

    // The browser that began it finishes it, once.
    let r = browser.get(&back).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let replay = browser.get(&back).send().await.unwrap();
    assert_eq!(replay.status(), StatusCode::BAD_REQUEST, "a replayed state");

    // An unknown state with a matching cookie is refused too.
    let forged = back.replace("state=", "state=x");
    let r = new_client().get(&forged).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn a_rotated_provider_key_is_fetched_again() {
    let provider = Provider::start(person("u-9", "alice@acme.example", true)).await;
    let app = spawn_with_key(|_| {}).await;
    app.create_account("alice@acme.example", PASSWORD).await;
    add_acme(&app, &provider, &[]).await;
    assert_eq!(
        provider_signin(&app, &new_client(), "/").await.status(),
        StatusCode::SEE_OTHER
    );
    let fetched = provider.jwks_requests();
    provider.rotate_key("key-2");
    let browser = new_client();
    let r = provider_signin(&app, &browser, "/").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "signed with the new key");
    assert_eq!(
        provider.jwks_requests(),
        fetched + 1,
        "the key set fetched again"
    );
}

#[tokio::test]
async fn a_provider_that_is_down_says_so_and_passwords_still_work() {
    let app = spawn_with_key(|_| {}).await;
    app.create_account("alice@acme.example", PASSWORD).await;
    // Nothing listens on a port just bound and closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let issuer = format!("http://127.0.0.1:{port}");
    cli_ok(
        &app,
        &[
            "idp",
            "add",
            "acme",
            "--issuer",
            &issuer,
            "--client-id",
            "c",
            "--display-name",
            "Acme SSO",
        ],
        "",
    )
    .await;
    let browser = new_client();
    let r = browser
        .get(app.url("/signin/idp/acme"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_GATEWAY);
    let page = r.text().await.unwrap();
    assert!(
        page.contains("Acme SSO is not answering right now"),
        "{page}"
    );
    assert!(page.contains("name=\"password\""), "{page}");
    let r = app.sign_in(&browser, "alice@acme.example", PASSWORD).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert!(signed_in(&app, &browser).await);
    // An unknown provider is a 404 page.
    let r = new_client()
        .get(app.url("/signin/idp/nobody"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn password_signin_off_leaves_only_the_providers() {
    let provider = Provider::start(person("u-10", "alice@acme.example", true)).await;
    let app = spawn_with_key(|v| {
        v.insert("GATEHOUSE_PASSWORD_SIGNIN".into(), "off".into());
    })
    .await;
    app.create_account("alice@acme.example", PASSWORD).await;
    add_acme(&app, &provider, &[]).await;
    let browser = new_client();
    let page = browser
        .get(app.url("/signin"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!page.contains("name=\"password\""), "{page}");
    assert!(page.contains("Sign in with Acme SSO"), "{page}");
    let csrf = hidden_input(&page, "csrf_token").unwrap_or_default();
    let r = browser
        .post(app.url("/signin"))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("next", "/"),
            ("email", "alice@acme.example"),
            ("password", PASSWORD),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert!(!signed_in(&app, &browser).await);
    assert_eq!(
        provider_signin(&app, &browser, "/").await.status(),
        StatusCode::SEE_OTHER
    );
    assert!(signed_in(&app, &browser).await);
}

#[tokio::test]
async fn a_pending_authorization_continues_to_consent_after_the_provider() {
    let provider = Provider::start(person("u-11", "alice@acme.example", true)).await;
    let app = spawn_with_key(|_| {}).await;
    app.create_account("alice@acme.example", PASSWORD).await;
    add_acme(&app, &provider, &[]).await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let (_verifier, challenge) = pkce();
    let browser = new_client();
    let r = browser
        .get(authorize_url(&app, &client_id, &challenge, &[]))
        .send()
        .await
        .unwrap();
    let to_signin = location(&r);
    assert!(to_signin.starts_with("/signin?next="), "{to_signin}");
    let page = browser
        .get(app.url(&to_signin))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let next = hidden_input(&page, "next").unwrap();
    assert!(next.starts_with("/oauth/authorize?"), "{next}");
    let r = provider_signin(&app, &browser, &next).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let back = location(&r);
    assert_eq!(back, next, "back to the same authorization request");
    let consent = browser.get(app.url(&back)).send().await.unwrap();
    assert_eq!(consent.status(), StatusCode::OK);
    let page = consent.text().await.unwrap();
    assert!(
        hidden_input(&page, "request").is_some(),
        "the consent page: {page}"
    );
}

#[tokio::test]
async fn a_signin_begun_on_one_instance_finishes_on_another_once() {
    let provider = Provider::start(person("u-12", "alice@acme.example", true)).await;
    let a = spawn_with_key(|_| {}).await;
    a.create_account("alice@acme.example", PASSWORD).await;
    add_acme(&a, &provider, &[]).await;
    let b = crate::helpers::spawn_instance(&a, |v| {
        v.insert("GATEHOUSE_SECRET_KEY".into(), TEST_KEY.into());
        v.insert("GATEHOUSE_ISSUER".into(), a.config.issuer.clone());
        v.insert("MCP_SERVER_URL".into(), a.config.mcp_server_url.clone());
    })
    .await;
    let _keep: &TestDb = &b.db;
    let browser = new_client();
    let back = to_callback(&a, &browser, "/").await;
    // The same public name in front of both: the callback reaches instance b.
    let on_b = back.replace(&a.address, &b.address);
    let r = browser.get(&on_b).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "finished on b");
    let replay = browser.get(&back).send().await.unwrap();
    assert_eq!(
        replay.status(),
        StatusCode::BAD_REQUEST,
        "and not again on a"
    );
}
