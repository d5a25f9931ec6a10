//! Bounded growth (issue 39, item 1): the upkeep task's pruning against the real server. Rows
//! past their time go, live ones stay and keep working over HTTP; on `SQLite` and `PostgreSQL`.
//! Time is moved by pruning "at" a later `now`, as the upkeep task would days later.

use gatehouse::upkeep::{prune_round, prunings};
use reqwest::StatusCode;

use crate::helpers::{TestApp, spawn_app};
use crate::oauth_helpers::{full_grant, refresh};

async fn count(app: &TestApp, sql: &str) -> i64 {
    use sqlx::Row;
    sqlx::query(sql)
        .fetch_one(app.db.pool().await)
        .await
        .unwrap()
        .try_get::<i64, _>(0)
        .unwrap()
}

async fn rows(app: &TestApp, table: &str) -> i64 {
    count(app, &format!("SELECT COUNT(*) FROM {table}")).await
}

#[tokio::test]
async fn credentials_past_their_time_are_pruned_and_live_ones_stay() {
    let app = spawn_app().await;
    let day = 86_400;
    // A grant refreshed once: its first refresh token is now a rotated one (kept for replay
    // detection), the second is live.
    let (client_id, first) = full_grant(&app).await;
    let (status, second) = refresh(
        &app,
        &client_id,
        first["refresh_token"].as_str().unwrap(),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{second}");
    let live_refresh = second["refresh_token"].as_str().unwrap().to_string();
    // A second grant, revoked by its client (RFC 7009): its whole family is revoked.
    let (other_client, other) = full_grant(&app).await;
    let r = app
        .client
        .post(app.url("/oauth/revoke"))
        .form(&[
            ("token", other["refresh_token"].as_str().unwrap()),
            ("client_id", other_client.as_str()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(rows(&app, "refresh_tokens").await, 3);
    assert_eq!(rows(&app, "token_families").await, 2);
    assert!(rows(&app, "access_tokens").await >= 3);
    assert_eq!(rows(&app, "authorization_codes").await, 2);
    assert!(
        rows(&app, "rate_limits").await > 0,
        "registrations are counted"
    );
    let plan = prunings(&app.config);
    let now = gatehouse::store::now();

    // Two days on: expired access tokens, codes and counters go; every refresh token stays
    // (the rotated one within the replay window, the revoked family's for 30 days).
    let later = now + 2 * day;
    let round = prune_round(&app.store, &plan, later, 1000, 100).await;
    assert_eq!(rows(&app, "access_tokens").await, 0, "{round:?}");
    assert_eq!(rows(&app, "authorization_codes").await, 0);
    assert_eq!(
        count(
            &app,
            &format!("SELECT COUNT(*) FROM rate_limits WHERE expires_at < {later}")
        )
        .await,
        0
    );
    assert_eq!(rows(&app, "refresh_tokens").await, 3);
    assert_eq!(rows(&app, "token_families").await, 2);
    let deleted = |name: &str| -> u64 {
        round
            .iter()
            .filter(|p| p.name == name)
            .map(|p| p.deleted)
            .sum()
    };
    assert!(deleted("access_tokens") >= 3, "{round:?}");
    assert_eq!(deleted("authorization_codes"), 2, "{round:?}");

    // Thirty-one days on: the rotated refresh token (past the replay window) and the revoked
    // family with its tokens go; the live refresh token and its family stay.
    let round = prune_round(&app.store, &plan, now + 31 * day, 1000, 100).await;
    assert_eq!(rows(&app, "refresh_tokens").await, 1, "{round:?}");
    assert_eq!(rows(&app, "token_families").await, 1, "{round:?}");
    assert_eq!(
        round
            .iter()
            .filter(|p| p.name == "token_families")
            .map(|p| p.deleted)
            .sum::<u64>(),
        1
    );
    let (status, third) = refresh(&app, &client_id, &live_refresh, &[]).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the live grant still refreshes: {third}"
    );

    // Batches are bounded: with batches of 1 and at most 1 per round, one row per round.
    let (_, more) = full_grant(&app).await;
    assert!(more["access_token"].is_string());
    let before = rows(&app, "access_tokens").await;
    assert!(before >= 2);
    let round = prune_round(&app.store, &plan, now + 40 * day, 1, 1).await;
    let access: u64 = round
        .iter()
        .filter(|p| p.name == "access_tokens")
        .map(|p| p.deleted)
        .sum();
    assert!(access <= 2, "one batch of one row per pruning: {round:?}");
    assert!(rows(&app, "access_tokens").await < before);
}

/// A spent confirmation of a destructive upstream call is answered once, and is kept until
/// its state expires: pruning then removes it, while a live one stays spent.
#[tokio::test]
async fn spent_confirmations_stay_spent_until_they_expire() {
    use gatehouse::domain::secret::TokenHash;
    let app = spawn_app().await;
    let now = gatehouse::store::now();
    let (soon, later) = (TokenHash::of("state-soon"), TokenHash::of("state-later"));
    assert!(app.store.spend_confirmation(&soon, now + 10).await.unwrap());
    assert!(
        app.store
            .spend_confirmation(&later, now + 1000)
            .await
            .unwrap()
    );
    assert!(
        !app.store
            .spend_confirmation(&later, now + 1000)
            .await
            .unwrap(),
        "a state is spent once"
    );
    let round = prune_round(&app.store, &prunings(&app.config), now + 100, 1000, 100).await;
    let deleted: u64 = round
        .iter()
        .filter(|p| p.name == "spent_confirmations")
        .map(|p| p.deleted)
        .sum();
    assert_eq!(deleted, 1, "{round:?}");
    assert_eq!(rows(&app, "spent_confirmations").await, 1);
    assert!(
        !app.store
            .spend_confirmation(&later, now + 1000)
            .await
            .unwrap(),
        "the live one is still spent after pruning"
    );
}

/// Ended browser sessions go in bounded batches, live ones stay signed in. Sessions end after
/// seven days without use, so a round "at" eight days later finds every session of this test
/// ended; a round now finds none.
#[tokio::test]
async fn ended_sessions_are_pruned_in_bounded_batches() {
    use gatehouse::upkeep::sessions_pruning;
    let app = spawn_app().await;
    let table = if app.db.url.starts_with("sqlite:") {
        "tower_sessions"
    } else {
        "tower_sessions.session"
    };
    let first = crate::oauth_helpers::signed_in_browser(&app).await;
    let _second = crate::oauth_helpers::signed_in_browser(&app).await;
    let _third = crate::oauth_helpers::signed_in_browser(&app).await;
    let sessions = rows(&app, table).await;
    assert!(sessions >= 3, "{sessions} sessions");
    let pruning = [sessions_pruning(&app.store)];
    let now = gatehouse::store::now();

    let done = prune_round(&app.store, &pruning, now, 1, 10).await;
    assert_eq!((done[0].name, done[0].deleted), ("sessions", 0));
    assert_eq!(rows(&app, table).await, sessions);
    let page = first.get(app.url("/account")).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK, "still signed in");

    let later = now + 8 * 86_400;
    // One batch of one row: the round stops at its bound.
    let done = prune_round(&app.store, &pruning, later, 1, 1).await;
    assert_eq!(done[0].deleted, 1);
    assert_eq!(rows(&app, table).await, sessions - 1);
    let done = prune_round(&app.store, &pruning, later, 1, 100).await;
    assert_eq!(done[0].deleted as i64, sessions - 1);
    assert_eq!(rows(&app, table).await, 0);
    let page = first.get(app.url("/account")).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::SEE_OTHER, "signed out");
}

/// On `PostgreSQL` a table pruning deleted many rows from is vacuumed, so the space of the
/// deleted rows is reused (`pg_stat_user_tables.last_vacuum` set); on `SQLite` the call does
/// nothing; a name that is not a pruned table is refused.
#[tokio::test]
async fn tables_pruned_of_many_rows_are_vacuumed() {
    use gatehouse::upkeep::{VACUUM_AFTER_ROWS, Vacuums};
    let app = spawn_app().await;
    let old = 1_000;
    let n = VACUUM_AFTER_ROWS as i64 + 500;
    // Old audit rows, as a busy server leaves them.
    let mut tx = app.db.pool().await.begin().await.unwrap();
    for chunk in 0..(n / 500) {
        let values: Vec<String> = (0..500)
            .map(|i| {
                format!(
                    "('tool_call', 'success', {}, 'row {}')",
                    old,
                    chunk * 500 + i
                )
            })
            .collect();
        sqlx::query(&format!(
            "INSERT INTO audit_events (event, outcome, at, detail) VALUES {}",
            values.join(", ")
        ))
        .execute(&mut *tx)
        .await
        .unwrap();
    }
    tx.commit().await.unwrap();
    let plan: Vec<_> = prunings(&app.config)
        .into_iter()
        .filter(|p| p.retention.name == "audit_events")
        .collect();
    let now = gatehouse::store::now();
    let mut vacuums = Vacuums::default();
    let round = prune_round(&app.store, &plan, now, 1000, 100).await;
    assert_eq!(round[0].deleted, n as u64);
    assert_eq!(vacuums.due(&round), ["audit_events"]);
    app.store.vacuum("audit_events").await.unwrap();
    assert!(
        app.store.vacuum("accounts").await.is_err(),
        "not a pruned table"
    );
    if app.db.url.starts_with("postgres") {
        let vacuumed = count(
            &app,
            "SELECT COUNT(*) FROM pg_stat_user_tables \
             WHERE relname = 'audit_events' AND last_vacuum IS NOT NULL",
        )
        .await;
        assert_eq!(vacuumed, 1, "audit_events was vacuumed");
    }
    assert_eq!(rows(&app, "audit_events").await, 0);
}
