//! `gatehouse project list|remove-member` and `gatehouse client list|revoke` (issue 39, item
//! 7), run as the real binary against the test server's database.

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{TestApp, spawn_app};
use crate::keys::gatehouse;
use crate::mcp::{modern, send};
use crate::oauth_helpers::{EMAIL, PASSWORD, access_token_live, full_grant, refresh};

/// `gatehouse ARGS…`, which must succeed: its standard output.
fn ok(app: &TestApp, args: &[&str]) -> String {
    let (success, out, err) = gatehouse(app, args);
    assert!(success, "{args:?}: {err}");
    out
}

/// `gatehouse ARGS…`, which must fail: its one-line message.
fn refused(app: &TestApp, args: &[&str]) -> String {
    let (success, out, err) = gatehouse(app, args);
    assert!(!success, "{args:?} succeeded: {out}");
    err
}

/// The tab-separated row of a listing whose first column is `id`.
fn row(listing: &str, id: &str) -> Vec<String> {
    listing
        .lines()
        .find(|l| l.split('\t').next() == Some(id))
        .unwrap_or_else(|| panic!("no row {id} in {listing}"))
        .split('\t')
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn projects_are_listed_and_members_removed_but_never_the_owner() {
    let app = spawn_app().await;
    app.create_account("carol@example.com", PASSWORD).await;
    app.create_account("dave@example.com", PASSWORD).await;
    assert!(ok(&app, &["project", "list"]).contains("(no projects)"));
    let project = ok(
        &app,
        &["project", "add", "Atlas", "--owner", "carol@example.com"],
    )
    .trim()
    .to_string();
    ok(
        &app,
        &[
            "project",
            "add-member",
            &project,
            "dave@example.com",
            "--role",
            "read",
        ],
    );
    let all = ok(&app, &["project", "list"]);
    assert_eq!(
        all.lines().next().unwrap(),
        "ID\tNAME\tOWNER\tSTATUS\tMEMBERS\tCREATED"
    );
    let atlas = row(&all, &project);
    assert_eq!(atlas[1..5], ["Atlas", "carol@example.com", "active", "2"]);
    assert!(
        row(
            &ok(&app, &["project", "list", "--account", "dave@example.com"]),
            &project
        )
        .len()
            == 6
    );
    assert_eq!(
        ok(
            &app,
            &["project", "remove-member", &project, "dave@example.com"]
        )
        .trim(),
        format!("removed dave@example.com from {project}")
    );
    assert!(
        ok(&app, &["project", "list", "--account", "dave@example.com"]).contains("(no projects)")
    );
    assert_eq!(row(&ok(&app, &["project", "list"]), &project)[4], "1");
    assert!(
        refused(
            &app,
            &["project", "remove-member", &project, "dave@example.com"]
        )
        .contains("is not a member")
    );
    assert!(
        refused(
            &app,
            &["project", "remove-member", &project, "carol@example.com"]
        )
        .contains("owner cannot be removed")
    );
    assert!(
        refused(
            &app,
            &[
                "project",
                "remove-member",
                "no-such-project",
                "dave@example.com"
            ]
        )
        .contains("no project with id")
    );
    assert!(
        refused(
            &app,
            &["project", "list", "--account", "nobody@example.com"]
        )
        .contains("no account with email")
    );
}

/// A revoked client is refused at once everywhere: its refresh token (`invalid_client`: the
/// client is unknown now), its access token on MCP (401), and a new authorization; the listing
/// shows it revoked and never a secret.
#[tokio::test]
async fn clients_are_listed_and_a_revoked_client_loses_every_grant_at_once() {
    let app = spawn_app().await;
    let (client_id, tokens) = full_grant(&app).await;
    let access = tokens["access_token"].as_str().unwrap();
    let refresh_token = tokens["refresh_token"].as_str().unwrap();
    let confidential = ok(&app, &["client", "add", "Billing"]);
    let secret = confidential
        .lines()
        .find_map(|l| l.strip_prefix("client_secret: "))
        .unwrap()
        .to_string();
    let listed = ok(&app, &["client", "list"]);
    assert_eq!(
        listed.lines().next().unwrap(),
        "CLIENT_ID\tNAME\tKIND\tAUTH\tGRANTS\tCREATED\tSTATUS"
    );
    assert!(!listed.contains(&secret), "a secret in the listing");
    let public = row(&listed, &client_id);
    assert_eq!(public[1..5], ["Test Client", "public", "none", "1"]);
    assert_eq!(public[6], "active");
    assert!(
        listed
            .lines()
            .any(|l| l.contains("\tBilling\tconfidential\tclient_secret_basic\t0\t"))
    );
    assert!(access_token_live(&app, access).await);

    assert_eq!(
        ok(&app, &["client", "revoke", &client_id]).trim(),
        format!("revoked client {client_id} and every grant and token it held")
    );
    let (status, body) = refresh(&app, &client_id, refresh_token, &[]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(body["error"], "invalid_client");
    assert!(!access_token_live(&app, access).await);
    let (status, _, _) = send(modern(
        &app,
        Some(access),
        "tools/call",
        json!({"name": "list_projects", "arguments": {}}),
    ))
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let revoked = row(&ok(&app, &["client", "list"]), &client_id);
    assert_eq!(revoked[4], "0", "no live grant");
    assert!(revoked[6].starts_with("revoked "), "{revoked:?}");
    assert!(refused(&app, &["client", "revoke", &client_id]).contains("is already revoked"));
    assert!(refused(&app, &["client", "revoke", "gc_nope"]).contains("no client with id gc_nope"));
    // The account is untouched: it signs in as before.
    let browser = crate::helpers::new_client();
    assert_eq!(
        app.sign_in(&browser, EMAIL, PASSWORD).await.status(),
        StatusCode::SEE_OTHER
    );
}
