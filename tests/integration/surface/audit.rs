//! The readable audit (issue 38 part 5): `gatehouse audit` with its filters, the project
//! activity page for owners, and retention pruned in bounded batches.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, new_client, spawn_app};
use crate::keys::{ALICE, alice, create_key, gatehouse};
use crate::mcp::{account_id, call, ok};
use gatehouse::domain::account::Role;
use gatehouse::domain::audit::{Event, Outcome};
use gatehouse::store::audit::AuditEvent;
use gatehouse::store::audit_query::AUDIT_RETENTION;
use gatehouse::upkeep::{Pruning, prune_round};

const BOB: &str = "bob@example.com";

/// Alice owns Research (Bob reads it) and Garden; each has made calls with a key.
async fn with_calls(app: &TestApp) -> (String, String, String, String) {
    let (alice_id, research, garden) = alice(app).await;
    app.create_account(BOB, "bobs-long-password").await;
    let bob_id = account_id(app, BOB).await;
    app.store
        .add_member(&research, &bob_id, Role::Read, gatehouse::store::now())
        .await
        .unwrap();
    let (_, alice_key) = create_key(app, &["--account", ALICE]);
    let (_, bob_key) = create_key(app, &["--account", BOB]);
    ok(&call(
        app,
        &alice_key,
        "search_notes",
        json!({"project_id": research, "query": "plan"}),
    )
    .await);
    ok(&call(
        app,
        &alice_key,
        "get_project",
        json!({"project_id": garden}),
    )
    .await);
    ok(&call(
        app,
        &bob_key,
        "get_project",
        json!({"project_id": research}),
    )
    .await);
    // Tool calls are audited in batches after the answer; the `gatehouse audit` command is
    // another process and reads only what is committed, so commit the batch first.
    app.store.flush_audit().await;
    (alice_id, research, garden, alice_key)
}

fn audit_json(app: &TestApp, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["audit", "--json"];
    all.extend_from_slice(args);
    let (success, out, err) = gatehouse(app, &all);
    assert!(success, "{err}");
    serde_json::from_str::<Value>(&out)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test]
async fn the_audit_command_filters_by_account_project_event_and_time() {
    let app = spawn_app().await;
    let (alice_id, research, garden, alice_key) = with_calls(&app).await;

    let research_rows = audit_json(&app, &["--project", &research]);
    assert_eq!(research_rows.len(), 2, "{research_rows:?}");
    assert!(
        research_rows
            .iter()
            .all(|r| r["project_id"] == research.as_str())
    );
    let who: Vec<&str> = research_rows
        .iter()
        .map(|r| r["email"].as_str().unwrap())
        .collect();
    assert_eq!(who, [BOB, ALICE], "newest first");
    assert_eq!(research_rows[1]["subject"], "search_notes");

    let alice_calls = audit_json(
        &app,
        &["--account", ALICE, "--event", "tool_call", "--since", "1h"],
    );
    assert_eq!(alice_calls.len(), 2, "{alice_calls:?}");
    assert!(
        alice_calls
            .iter()
            .all(|r| r["account_id"] == alice_id.as_str())
    );
    assert_eq!(alice_calls[0]["project_id"], garden.as_str());
    // The key's creation is in the log, without the key.
    let created = audit_json(&app, &["--event", "key_created"]);
    assert_eq!(created.len(), 2, "{created:?}");
    let (success, text, _) = gatehouse(&app, &["audit", "--limit", "1000"]);
    assert!(success);
    assert!(text.starts_with("at\tevent\toutcome\taccount"), "{text}");
    assert!(
        text.contains(&format!("tool_call\tsuccess\t{ALICE}")),
        "{text}"
    );
    assert!(
        !text.contains(&alice_key) && !text.contains(&alice_key[9..]),
        "no secret"
    );
    // Rows older than --since are left out; bad filters are refused with one line.
    let old = gatehouse::store::now() - 7200;
    app.store
        .record_audit(
            &AuditEvent {
                account_id: Some(&alice_id),
                subject: Some("list_projects"),
                detail: Some(&format!(
                    "credential=account_key:k project={research} duration_ms=1"
                )),
                ..AuditEvent::new(Event::ToolCall, Outcome::Success)
            },
            old,
        )
        .await
        .unwrap();
    assert_eq!(audit_json(&app, &["--project", &research]).len(), 3);
    assert_eq!(
        audit_json(&app, &["--project", &research, "--since", "1h"]).len(),
        2
    );
    for bad in [
        vec!["audit", "--since", "1w"],
        vec!["audit", "--limit", "0"],
        vec!["audit", "--account", "nobody@example.com"],
    ] {
        let (success, _, err) = gatehouse(&app, &bad);
        assert!(!success, "{bad:?}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    let none = audit_json(&app, &["--client", "gc_unknown"]);
    assert!(none.is_empty());
}

#[tokio::test]
async fn a_projects_owner_reads_who_used_it_through_which_app() {
    let app = spawn_app().await;
    let (_, research, _, _) = with_calls(&app).await;
    let owner = new_client();
    app.sign_in(&owner, ALICE, "a-long-password").await;
    let project_page = owner
        .get(app.url(&format!("/projects/{research}")))
        .send()
        .await
        .unwrap();
    assert!(
        project_page
            .text()
            .await
            .unwrap()
            .contains(&format!("/projects/{research}/activity"))
    );
    let r = owner
        .get(app.url(&format!("/projects/{research}/activity")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let html = r.text().await.unwrap();
    let rows: Vec<&str> = html.split("<tr class=\"event\">").skip(1).collect();
    assert_eq!(rows.len(), 2, "{html}");
    assert!(
        rows[0].contains(BOB) && rows[0].contains("get_project"),
        "{}",
        rows[0]
    );
    assert!(
        rows[1].contains(ALICE) && rows[1].contains("search_notes"),
        "{}",
        rows[1]
    );
    assert!(rows[1].contains("API key (account)"), "{}", rows[1]);

    // Bob reads the project but does not own it; a stranger does not see it at all.
    let member = new_client();
    app.sign_in(&member, BOB, "bobs-long-password").await;
    let r = member
        .get(app.url(&format!("/projects/{research}/activity")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    app.create_account("carol@example.com", "carols-long-password")
        .await;
    let stranger = new_client();
    app.sign_in(&stranger, "carol@example.com", "carols-long-password")
        .await;
    let r = stranger
        .get(app.url(&format!("/projects/{research}/activity")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn old_audit_rows_are_pruned_in_bounded_batches() {
    let app = spawn_app().await;
    let now = gatehouse::store::now();
    let day = 86_400;
    for (i, age) in [
        (0, 100 * day),
        (1, 95 * day),
        (2, 91 * day),
        (3, 92 * day),
        (4, 93 * day),
        (5, 89 * day),
        (6, day),
    ] {
        app.store
            .record_audit(
                &AuditEvent {
                    subject: Some(&format!("row{i}")),
                    ..AuditEvent::new(Event::ToolCall, Outcome::Success)
                },
                now - age,
            )
            .await
            .unwrap();
    }
    let prunings = [Pruning {
        retention: AUDIT_RETENTION,
        max_age_secs: 90 * day,
    }];
    // Batches of 2, at most 2 per round: 4 of the 5 old rows go in the first round.
    let first = prune_round(&app.store, &prunings, now, 2, 2).await;
    assert_eq!(first[0].deleted, 4);
    assert!(!first[0].skipped);
    let second = prune_round(&app.store, &prunings, now, 2, 2).await;
    assert_eq!(second[0].deleted, 1);
    let left: Vec<String> = app
        .store
        .recent_audit(100)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|r| r.subject)
        .filter(|s| s.starts_with("row"))
        .collect();
    assert_eq!(left, ["row6", "row5"], "rows within 90 days stay");

    // On PostgreSQL one instance at a time prunes: while another holds the lock, this one
    // skips the round.
    if app.store.backend() == gatehouse::store::Backend::Postgres {
        let pool = sqlx::PgPool::connect(&app.db.url).await.unwrap();
        let mut held = pool.begin().await.unwrap();
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(gatehouse::store::audit_query::UPKEEP_LOCK_KEY)
            .execute(&mut *held)
            .await
            .unwrap();
        let skipped = prune_round(&app.store, &prunings, now + 100 * day, 10, 10).await;
        assert!(skipped[0].skipped);
        assert_eq!(skipped[0].deleted, 0);
        held.rollback().await.unwrap();
        let after = prune_round(&app.store, &prunings, now + 100 * day, 10, 10).await;
        assert!(!after[0].skipped);
        assert!(after[0].deleted >= 2);
    }
}
