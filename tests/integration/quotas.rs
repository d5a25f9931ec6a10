//! Tool-call quotas (issue "The rest of the MCP surface", part 3): a per-account budget of tool
//! calls per rolling hour from `GATEHOUSE_QUOTA_CALLS_PER_HOUR` or `gatehouse account quota`
//! (0 = unlimited). Over budget a call is an `isError` result saying when the budget resets,
//! never an HTTP error; the count is seeded from the tool-call audit rows, so another instance
//! on the same database counts the calls made elsewhere; the console shows the usage.

use std::time::Duration;

use crate::helpers::{TestApp, new_client, spawn_app_with, spawn_instance};
use crate::keys::{ALICE, create_key, gatehouse};
use crate::mcp::{call, error_text, ok};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

const PASSWORD: &str = "a-long-password";

async fn app_with_budget(budget: &str) -> (TestApp, String) {
    let budget = budget.to_string();
    let app = spawn_app_with(move |vars| {
        vars.insert("GATEHOUSE_QUOTA_CALLS_PER_HOUR".into(), budget);
    })
    .await;
    let alice = app.create_account(ALICE, PASSWORD).await;
    app.store
        .create_project("Research", &alice, gatehouse::store::now())
        .await
        .unwrap();
    let (_, key) = create_key(&app, &["--account", ALICE]);
    (app, key)
}

async fn list(app: &TestApp, key: &str) -> Value {
    call(app, key, "list_projects", json!({})).await
}

/// The reset time an over-budget answer names, checked to lie within the next hour.
fn reset_time(text: &str) -> OffsetDateTime {
    let start = text.find("resets at ").expect("a reset time") + "resets at ".len();
    let end = start + text[start..].find(' ').unwrap();
    let at = OffsetDateTime::parse(&text[start..end], &Rfc3339).unwrap();
    let now = OffsetDateTime::now_utc();
    assert!(at > now, "{at} is not after {now}");
    assert!(at <= now + time::Duration::seconds(3600), "{at}");
    at
}

/// Waits until the audit log holds `n` rows of tool calls with `outcome`.
async fn wait_for_audit(app: &TestApp, outcome: &str, n: i64) {
    for _ in 0..100 {
        let count: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM audit_events WHERE event = 'tool_call' AND outcome = $1",
        )
        .bind(outcome)
        .fetch_one(app.db.pool().await)
        .await
        .unwrap();
        if count >= n {
            assert_eq!(count, n, "{outcome}");
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never {n} tool_call rows with outcome {outcome}");
}

#[tokio::test]
async fn a_call_over_budget_is_an_error_result_naming_the_reset_time() {
    let (app, key) = app_with_budget("3").await;
    for _ in 0..3 {
        ok(&list(&app, &key).await);
    }
    // `call` checks the HTTP status is 200: never an HTTP error.
    let refused = list(&app, &key).await;
    let text = error_text(&refused);
    assert!(
        text.contains("budget of 3 tool calls per rolling hour is spent"),
        "{text}"
    );
    reset_time(&text);
    // Any tool, not only the one that spent the budget.
    let text = error_text(&call(&app, &key, "get_job", json!({"job_id": "x"})).await);
    assert!(text.contains("resets at"), "{text}");
    // Refusals are audited, and never count against the budget themselves.
    wait_for_audit(&app, "over_quota", 2).await;
    wait_for_audit(&app, "success", 3).await;
}

#[tokio::test]
async fn the_command_line_sets_an_accounts_own_budget_for_the_next_call() {
    let (app, key) = app_with_budget("2").await;
    ok(&list(&app, &key).await);
    ok(&list(&app, &key).await);
    error_text(&list(&app, &key).await);

    let (success, out, err) =
        gatehouse(&app, &["account", "quota", ALICE, "--calls-per-hour", "4"]);
    assert!(success, "{err}");
    assert_eq!(
        out.trim(),
        format!("account {ALICE}: 4 tool calls per rolling hour")
    );
    ok(&list(&app, &key).await);
    ok(&list(&app, &key).await);
    let text = error_text(&list(&app, &key).await);
    assert!(text.contains("budget of 4 tool calls"), "{text}");

    // 0: unlimited for this account.
    let (success, out, err) =
        gatehouse(&app, &["account", "quota", ALICE, "--calls-per-hour", "0"]);
    assert!(success, "{err}");
    assert_eq!(out.trim(), format!("account {ALICE}: unlimited tool calls"));
    for _ in 0..5 {
        ok(&list(&app, &key).await);
    }

    // Back to the server's default of 2, long spent.
    let (success, _, err) = gatehouse(&app, &["account", "quota", ALICE, "--default"]);
    assert!(success, "{err}");
    let text = error_text(&list(&app, &key).await);
    assert!(text.contains("budget of 2 tool calls"), "{text}");

    // Bad input is refused with a clear line.
    let (success, _, err) = gatehouse(&app, &["account", "quota", ALICE]);
    assert!(!success);
    assert!(err.contains("--calls-per-hour"), "{err}");
    let (success, _, err) = gatehouse(
        &app,
        &[
            "account",
            "quota",
            "nobody@example.com",
            "--calls-per-hour",
            "1",
        ],
    );
    assert!(!success);
    assert!(err.contains("no account with email"), "{err}");
}

#[tokio::test]
async fn a_budget_of_zero_is_unlimited() {
    let (app, key) = app_with_budget("0").await;
    for _ in 0..40 {
        ok(&list(&app, &key).await);
    }
}

#[tokio::test]
async fn another_instance_counts_the_calls_made_elsewhere() {
    let (first, key) = app_with_budget("3").await;
    for _ in 0..3 {
        ok(&list(&first, &key).await);
    }
    wait_for_audit(&first, "success", 3).await;
    let second = spawn_instance(&first, |vars| {
        vars.insert("GATEHOUSE_QUOTA_CALLS_PER_HOUR".into(), "3".into());
    })
    .await;
    // Its count starts from the audit rows of the last hour: the budget is already spent.
    let text = error_text(&list(&second, &key).await);
    assert!(text.contains("budget of 3 tool calls"), "{text}");
}

#[tokio::test]
async fn the_account_page_shows_the_usage() {
    let (app, key) = app_with_budget("50").await;
    let browser = new_client();
    app.sign_in(&browser, ALICE, PASSWORD).await;
    let page = |b: reqwest::Client| {
        let url = app.url("/account");
        async move { b.get(url).send().await.unwrap().text().await.unwrap() }
    };
    let html = page(browser.clone()).await;
    assert!(
        html.contains("<strong>0</strong> of 50 MCP tool calls used in the last hour."),
        "{html}"
    );
    for _ in 0..3 {
        ok(&list(&app, &key).await);
    }
    wait_for_audit(&app, "success", 3).await;
    let html = page(browser.clone()).await;
    assert!(
        html.contains("<strong>3</strong> of 50 MCP tool calls used in the last hour."),
        "{html}"
    );
    let (success, _, err) = gatehouse(&app, &["account", "quota", ALICE, "--calls-per-hour", "0"]);
    assert!(success, "{err}");
    let html = page(browser).await;
    assert!(
        html.contains(
            "<strong>3</strong> MCP tool calls in the last hour (no limit), with a budget set for this account."
        ),
        "{html}"
    );
}
