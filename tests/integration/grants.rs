//! Grants and their generations: a revoked approval stays revoked, nothing minted under it
//! (codes, refresh tokens, access tokens) outlives it or joins a later approval, no token carries
//! more scope than the live approval (RFC 7009 §2.1, RFC 6749 §3.3), and a code or refresh token
//! is redeemed only for the resource it was issued for, by the issuer that issued it
//! (RFC 8707 §2.2). Each test runs on `SQLite`, or on `PostgreSQL` with
//! `GATEHOUSE_TEST_BACKEND=postgres`.

use crate::helpers::{TestApp, behind_the_back, spawn_app, spawn_instance};
use crate::mcp::{account_id, modern, ok, send};
use crate::oauth_helpers::*;
use gatehouse::domain::account::{AccountStatus, Email};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// Introspects `token` as a confidential service client created on the command line.
async fn introspect(app: &TestApp, token: &str) -> Value {
    let (client_id, client_secret) = crate::token::introspection_client(app);
    app.client
        .post(app.url("/oauth/introspect"))
        .basic_auth(client_id, Some(client_secret))
        .form(&[("token", token)])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// `create_note` in `project` with `token`: the HTTP status and, on 200, the tool result.
async fn create_note(app: &TestApp, token: &str, project: &str) -> (StatusCode, Value) {
    let (s, _, body) = send(modern(
        app,
        Some(token),
        "tools/call",
        json!({
            "name": "create_note",
            "arguments": {"project_id": project, "title": "t", "body": "b"}
        }),
    ))
    .await;
    (s, body["result"].clone())
}

fn refused(status: StatusCode, body: &Value, error: &str) {
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some(error)),
        "{body}"
    );
}

#[tokio::test]
async fn a_code_kept_through_revocation_and_a_narrower_approval_is_refused() {
    let app = spawn_app().await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let browser = signed_in_browser(&app).await;
    let project = app
        .store
        .create_project(
            "Research",
            &account_id(&app, EMAIL).await,
            gatehouse::store::now(),
        )
        .await
        .unwrap();
    // Alice approves the client for read and write.
    let (code, verifier) = code_in(&app, &browser, &client_id, &[]).await;
    let (s, first, _) = exchange(&app, &client_id, &code, &verifier, &[]).await;
    assert_eq!(s, StatusCode::OK, "{first}");
    // The client silently gets a second code through the remembered consent and keeps it.
    let (kept, kept_verifier) = code_in(&app, &browser, &client_id, &[]).await;
    // Alice revokes the app on Connected apps, then approves the same client for read only.
    revoke_on_apps_page(&app, &browser).await;
    let (fresh, fresh_verifier) =
        code_in(&app, &browser, &client_id, &[("scope", "mcp:read")]).await;

    // The kept code belongs to the revoked approval.
    let (s, b, _) = exchange(&app, &client_id, &kept, &kept_verifier, &[]).await;
    refused(s, &b, "invalid_grant");
    // Nothing minted before the revocation joins the new approval.
    let (s, b) = refresh(
        &app,
        &client_id,
        first["refresh_token"].as_str().unwrap(),
        &[],
    )
    .await;
    refused(s, &b, "invalid_grant");
    let (s, _) = create_note(&app, first["access_token"].as_str().unwrap(), &project).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert_eq!(
        introspect(&app, first["access_token"].as_str().unwrap()).await,
        json!({"active": false})
    );

    // The new approval gives what the page showed: read only.
    let (s, now, _) = exchange(&app, &client_id, &fresh, &fresh_verifier, &[]).await;
    assert_eq!(s, StatusCode::OK, "{now}");
    assert_eq!(now["scope"], "mcp:read");
    let (s, _) = create_note(&app, now["access_token"].as_str().unwrap(), &project).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "insufficient_scope");
    let page = browser
        .get(app.url("/apps"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("Read your projects and notes")
            && !page.contains("Create and change notes in your projects"),
        "{page}"
    );
    let audit = app.store.recent_audit(50).await.unwrap();
    assert!(
        audit
            .iter()
            .any(|e| e.event == "code_refused" && e.outcome == "denied"),
        "the refused redemption is audited"
    );
}

#[tokio::test]
async fn a_code_redeemed_after_its_consent_was_revoked_is_refused() {
    let app = spawn_app().await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let browser = signed_in_browser(&app).await;
    let (code, verifier) = code_in(&app, &browser, &client_id, &[]).await;
    revoke_on_apps_page(&app, &browser).await;
    let (s, b, _) = exchange(&app, &client_id, &code, &verifier, &[]).await;
    refused(s, &b, "invalid_grant");
    // Approving again starts a new grant: the old code still does not come back.
    let (again, again_verifier) = code_in(&app, &browser, &client_id, &[]).await;
    let (s, b, _) = exchange(&app, &client_id, &code, &verifier, &[]).await;
    refused(s, &b, "invalid_grant");
    let (s, b, _) = exchange(&app, &client_id, &again, &again_verifier, &[]).await;
    assert_eq!(s, StatusCode::OK, "{b}");
}

#[tokio::test]
async fn a_code_redeemed_after_account_disable_is_refused() {
    let app = spawn_app().await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let (code, verifier) = code_for(&app, &client_id).await;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .args(["account", "disable", EMAIL])
        .env("DATABASE_URL", &app.db.url)
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (s, b, _) = exchange(&app, &client_id, &code, &verifier, &[]).await;
    refused(s, &b, "invalid_grant");
    // Disabling used the code up: enabling the account again does not revive it.
    app.store
        .set_account_status(&Email::parse(EMAIL).unwrap(), AccountStatus::Active)
        .await
        .unwrap();
    let (s, b, _) = exchange(&app, &client_id, &code, &verifier, &[]).await;
    refused(s, &b, "invalid_grant");
}

#[tokio::test]
async fn no_token_carries_more_scope_than_the_live_approval() {
    let app = spawn_app().await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let browser = signed_in_browser(&app).await;
    let project = app
        .store
        .create_project(
            "Research",
            &account_id(&app, EMAIL).await,
            gatehouse::store::now(),
        )
        .await
        .unwrap();
    let (code, verifier) = code_in(&app, &browser, &client_id, &[]).await;
    let (s, grant, _) = exchange(&app, &client_id, &code, &verifier, &[]).await;
    assert_eq!(s, StatusCode::OK, "{grant}");
    let access = grant["access_token"].as_str().unwrap();
    let (s, r) = create_note(&app, access, &project).await;
    assert_eq!(s, StatusCode::OK);
    ok(&r);
    let (kept, kept_verifier) = code_in(&app, &browser, &client_id, &[]).await;
    // The live approval becomes narrower than what was minted under it.
    behind_the_back(
        &app,
        sqlx::query("UPDATE consents SET scope = 'mcp:read'").execute(app.db.pool().await),
    )
    .await
    .unwrap();
    // On every MCP request…
    let (s, _) = create_note(&app, access, &project).await;
    assert_eq!(
        s,
        StatusCode::UNAUTHORIZED,
        "the token exceeds the approval"
    );
    // …at introspection…
    assert_eq!(introspect(&app, access).await, json!({"active": false}));
    // …at refresh…
    let (s, b) = refresh(
        &app,
        &client_id,
        grant["refresh_token"].as_str().unwrap(),
        &[],
    )
    .await;
    refused(s, &b, "invalid_grant");
    // …and at redemption.
    let (s, b, _) = exchange(&app, &client_id, &kept, &kept_verifier, &[]).await;
    refused(s, &b, "invalid_grant");
}

#[tokio::test]
async fn a_grant_is_redeemed_only_for_its_resource_and_by_its_issuer() {
    let one = spawn_app().await;
    // A second instance on the same database, with its own MCP_SERVER_URL and issuer.
    let two = spawn_instance(&one, |_| {}).await;
    let two_resource = format!("{}/mcp", two.address);
    let client_id = register_public(&one, &[REDIRECT]).await;

    // A code from instance 1 at instance 2.
    let (code, verifier) = code_for(&one, &client_id).await;
    let (s, b, _) = exchange(
        &two,
        &client_id,
        &code,
        &verifier,
        &[("resource", &two_resource)],
    )
    .await;
    refused(s, &b, "invalid_target");
    let (s, b, _) = exchange(&two, &client_id, &code, &verifier, &[]).await;
    refused(s, &b, "invalid_target");
    // Refused validation leaves the code usable where it belongs.
    let (s, grant, _) = exchange(&one, &client_id, &code, &verifier, &[]).await;
    assert_eq!(s, StatusCode::OK, "{grant}");
    let rt = grant["refresh_token"].as_str().unwrap();

    // A refresh token from instance 1 at instance 2.
    let (s, b) = refresh(&two, &client_id, rt, &[("resource", &two_resource)]).await;
    refused(s, &b, "invalid_target");
    let (s, b) = refresh(&two, &client_id, rt, &[]).await;
    refused(s, &b, "invalid_target");

    // An instance serving the same resource under another issuer did not issue it either.
    let one_resource = one.config.mcp_server_url.clone();
    let three = spawn_instance(&one, |v| {
        let issuer = format!("http://{}", v["GATEHOUSE_BIND"]);
        v.insert("GATEHOUSE_ISSUER".into(), issuer);
        v.insert("MCP_SERVER_URL".into(), one_resource.clone());
    })
    .await;
    assert_ne!(three.config.issuer, one.config.issuer);
    let (s, b) = refresh(&three, &client_id, rt, &[("resource", &one_resource)]).await;
    refused(s, &b, "invalid_grant");
    let (code, verifier) = code_for(&one, &client_id).await;
    let (s, b, _) = exchange(&three, &client_id, &code, &verifier, &[]).await;
    refused(s, &b, "invalid_grant");

    // At its own issuer, for its own resource, the refresh token still works.
    let (s, b) = refresh(&one, &client_id, rt, &[("resource", &one_resource)]).await;
    assert_eq!(s, StatusCode::OK, "{b}");
}

/// Whichever wins, a redemption and a revocation of the same consent at the same moment end
/// with nothing live and never with a server error (both take the consent row first, so they
/// cannot deadlock on `PostgreSQL`).
#[tokio::test]
async fn a_redemption_racing_a_revocation_never_leaves_a_live_token() {
    let app = spawn_app().await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let browser = signed_in_browser(&app).await;
    let account = account_id(&app, EMAIL).await;
    for round in 0..8 {
        let (code, verifier) = code_in(&app, &browser, &client_id, &[]).await;
        let consent = app
            .store
            .consent(&account, &client_id, REDIRECT)
            .await
            .unwrap()
            .expect("a live consent")
            .id;
        let store = app.store.clone();
        let (account, consent) = (account.clone(), consent.clone());
        let revocation = tokio::spawn(async move {
            store
                .revoke_consent(&account, &consent, gatehouse::store::now())
                .await
        });
        let (s, b, _) = exchange(&app, &client_id, &code, &verifier, &[]).await;
        assert!(
            revocation.await.unwrap().unwrap().is_some(),
            "round {round}"
        );
        match s {
            StatusCode::OK => {
                // Redeemed first: the revocation that followed cut it off.
                assert!(!access_token_live(&app, b["access_token"].as_str().unwrap()).await);
                let (s, b) =
                    refresh(&app, &client_id, b["refresh_token"].as_str().unwrap(), &[]).await;
                refused(s, &b, "invalid_grant");
            }
            _ => refused(s, &b, "invalid_grant"),
        }
    }
}
