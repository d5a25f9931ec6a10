//! Upgrades (issue 39, item 3): a database left at an earlier migration level, with data in
//! it, is migrated to the newest by the real startup path, and what it held works over HTTP.
//!
//! Each fixture is made here rather than kept as a binary file: the migrations up to the
//! level, applied from the migration folder with sqlx's migrator, then rows inserted with SQL
//! valid at that level (an account with a password, a project and membership, a note, a
//! public client, its consent, a token family with an access token and a refresh token, an API
//! key, audit rows), all as an older release wrote them (tokens without their issue time). On
//! `SQLite`, or on `PostgreSQL` (a fresh database per level) with `GATEHOUSE_TEST_BACKEND=postgres`.

use std::borrow::Cow;

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{TestDb, spawn_app_on};
use crate::keys::call_with_header;
use crate::mcp::{call, ok, rpc};
use crate::oauth_helpers::{EMAIL, PASSWORD, REDIRECT, refresh};

/// Every level from 0016 (the last of the first releases, whose SQL the fixture is written
/// in) to the newest but one: a database left at any earlier migration.
fn levels() -> Vec<i64> {
    let mut all = migration_versions();
    all.sort_unstable();
    let newest = all.pop();
    assert!(newest.is_some(), "no migrations");
    all.retain(|&v| v >= 16);
    all
}

fn folder(url: &str) -> &'static str {
    if url.starts_with("sqlite:") {
        concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/sqlite")
    } else {
        concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/postgres")
    }
}

fn migration_versions() -> Vec<i64> {
    std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/sqlite"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.split('_').next()?.parse::<i64>().ok()
        })
        .collect()
}

/// What a fixture holds that the test presents again after the upgrade.
struct Fixture {
    client_id: String,
    project_id: String,
    note_id: String,
    access: String,
    refresh: String,
    key: String,
}

/// An old-format secret (before tokens carried their issue time): prefix and 43 random
/// characters; stored as its plain SHA-256.
fn old_secret(prefix: &str) -> (String, String) {
    let secret = format!("{prefix}{}", gatehouse::domain::secret::random_urlsafe(32));
    let hash = gatehouse::domain::secret::TokenHash::of(&secret)
        .as_str()
        .to_string();
    assert_eq!(hash.len(), 64, "a plain hash, as an older release stored");
    (secret, hash)
}

/// Applies the migrations up to `level` to the database at `url`.
async fn migrate_to(pool: &sqlx::AnyPool, url: &str, level: i64) {
    let mut migrator = sqlx::migrate::Migrator::new(std::path::Path::new(folder(url)))
        .await
        .unwrap();
    let kept: Vec<_> = migrator
        .migrations
        .iter()
        .filter(|m| m.version <= level)
        .cloned()
        .collect();
    assert_eq!(
        kept.last().map(|m| m.version),
        Some(level),
        "no migration {level}"
    );
    migrator.migrations = Cow::Owned(kept);
    migrator.run(pool).await.unwrap();
}

/// Inserts the fixture's rows with SQL valid at migration 0016 (and so at every later level:
/// the migrations since only add tables, nullable columns and columns with defaults).
async fn insert_rows(pool: &sqlx::AnyPool, resource: &str) -> Fixture {
    let now = gatehouse::store::now();
    let id = || uuid::Uuid::new_v4().to_string();
    let (account, project, note, consent, family, key_id) = (id(), id(), id(), id(), id(), id());
    let client_id = format!("old-client-{}", id());
    let (access, access_hash) = old_secret("gate_at_");
    let (refresh, refresh_hash) = old_secret("gate_rt_");
    let (key, key_hash) = old_secret("gate_key_");
    let password_hash = gatehouse::password::hash_password(PASSWORD.to_string())
        .await
        .unwrap();
    let scope = "mcp:read mcp:write";
    let statements: Vec<(&str, Vec<String>)> = vec![
        (
            "INSERT INTO accounts (id, email, password_hash, status, created_at) \
             VALUES ($1, $2, $3, 'active', $4)",
            vec![
                account.clone(),
                EMAIL.into(),
                password_hash,
                now.to_string(),
            ],
        ),
        (
            "INSERT INTO projects (id, name, owner_account_id, status, created_at) \
             VALUES ($1, 'Research', $2, 'active', $3)",
            vec![project.clone(), account.clone(), now.to_string()],
        ),
        (
            "INSERT INTO memberships (project_id, account_id, role, created_at) \
             VALUES ($1, $2, 'write', $3)",
            vec![project.clone(), account.clone(), now.to_string()],
        ),
        (
            "INSERT INTO notes (id, project_id, author_account_id, title, body, tags, \
             created_at, updated_at) VALUES ($1, $2, $3, 'Before the upgrade', \
             'Written by an older release.', '[\"old\"]', $4, $4)",
            vec![
                note.clone(),
                project.clone(),
                account.clone(),
                now.to_string(),
            ],
        ),
        (
            "INSERT INTO oauth_clients (client_id, client_secret_hash, auth_method, client_name, \
             redirect_uris, grant_types, scope, metadata, can_introspect, created_at) \
             VALUES ($1, NULL, 'none', 'Old Client', $2, \
             '[\"authorization_code\",\"refresh_token\"]', $3, $4, 0, $5)",
            vec![
                client_id.clone(),
                json!([REDIRECT]).to_string(),
                scope.into(),
                json!({"client_name": "Old Client", "redirect_uris": [REDIRECT],
                       "token_endpoint_auth_method": "none",
                       "grant_types": ["authorization_code", "refresh_token"]})
                .to_string(),
                now.to_string(),
            ],
        ),
        (
            "INSERT INTO consents (id, account_id, client_id, redirect_uri, scope, created_at, \
             updated_at) VALUES ($1, $2, $3, $4, $5, $6, $6)",
            vec![
                consent.clone(),
                account.clone(),
                client_id.clone(),
                REDIRECT.into(),
                scope.into(),
                now.to_string(),
            ],
        ),
        (
            "INSERT INTO token_families (id, account_id, client_id, consent_id, scope, resource, \
             created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            vec![
                family.clone(),
                account.clone(),
                client_id.clone(),
                consent.clone(),
                scope.into(),
                resource.into(),
                now.to_string(),
            ],
        ),
        (
            "INSERT INTO refresh_tokens (token_hash, family_id, created_at) VALUES ($1, $2, $3)",
            vec![refresh_hash, family.clone(), now.to_string()],
        ),
        (
            "INSERT INTO access_tokens (token_hash, family_id, account_id, client_id, scope, \
             audience, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            vec![
                access_hash,
                family.clone(),
                account.clone(),
                client_id.clone(),
                scope.into(),
                resource.into(),
                now.to_string(),
                (now + 3600).to_string(),
            ],
        ),
        (
            "INSERT INTO api_keys (id, key_hash, account_id, name, scope, created_at) \
             VALUES ($1, $2, $3, 'old key', 'mcp:read', $4)",
            vec![key_id, key_hash, account.clone(), now.to_string()],
        ),
        (
            "INSERT INTO audit_events (at, event, outcome, account_id, client_id, subject, \
             detail) VALUES ($1, 'consent', 'success', $2, $3, $4, 'from an older release')",
            vec![
                now.to_string(),
                account.clone(),
                client_id.clone(),
                family.clone(),
            ],
        ),
        (
            "INSERT INTO audit_events (at, event, outcome, account_id, client_id, subject, \
             detail) VALUES ($1, 'tool_call', 'success', $2, $3, 'list_projects', \
             'from an older release')",
            vec![now.to_string(), account.clone(), client_id.clone()],
        ),
    ];
    for (sql, values) in statements {
        let mut query = sqlx::query(sql);
        for value in values {
            // Integers bound as integers, everything else as text.
            query = match value.parse::<i64>() {
                Ok(n) if !value.starts_with('[') => query.bind(n),
                _ => query.bind(value),
            };
        }
        query
            .execute(pool)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    Fixture {
        client_id,
        project_id: project,
        note_id: note,
        access,
        refresh,
        key,
    }
}

/// One level: the fixture, the newest release started on it, and its data used over HTTP.
async fn upgrade_from(level: i64) {
    // An empty database (not the migrated copy `TestDb::for_app` gives on `PostgreSQL`).
    let db = if std::env::var("GATEHOUSE_TEST_BACKEND").as_deref() == Ok("postgres") {
        TestDb::postgres()
            .await
            .expect("GATEHOUSE_TEST_BACKEND=postgres needs GATEHOUSE_TEST_POSTGRES")
    } else {
        TestDb::sqlite()
    };
    let url = db.url.clone();
    let pool = db.pool().await;
    migrate_to(pool, &url, level).await;
    // The audience the fixture's tokens are bound to: the deployment's public MCP URL, which
    // the upgraded server keeps.
    let mcp = "http://127.0.0.1:8080/mcp";
    let fixture = insert_rows(pool, mcp).await;
    let app = spawn_app_on(db, |v| {
        v.insert("MCP_SERVER_URL".into(), mcp.into());
        v.insert("GATEHOUSE_ISSUER".into(), "http://127.0.0.1:8080".into());
    })
    .await;
    use sqlx::Row;
    let applied: i64 = sqlx::query("SELECT MAX(version) FROM _sqlx_migrations")
        .fetch_one(app.db.pool().await)
        .await
        .unwrap()
        .try_get(0)
        .unwrap();
    assert_eq!(
        applied,
        *migration_versions().iter().max().unwrap(),
        "level {level}: migrated to the newest"
    );

    // The account signs in with its old password.
    let browser = crate::helpers::new_client();
    assert_eq!(
        app.sign_in(&browser, EMAIL, PASSWORD).await.status(),
        StatusCode::SEE_OTHER,
        "level {level}: sign-in"
    );
    // The old access token lists the tools and reads the old note.
    let listed = rpc(&app, &fixture.access, "tools/list", json!({})).await;
    let tools = listed["result"]["tools"].as_array().unwrap();
    assert!(
        tools.iter().any(|t| t["name"] == "create_note"),
        "level {level}: {listed}"
    );
    let note = ok(&call(
        &app,
        &fixture.access,
        "get_note",
        json!({"project_id": fixture.project_id, "note_id": fixture.note_id}),
    )
    .await);
    assert_eq!(note["title"], "Before the upgrade", "level {level}");
    // The old refresh token rotates, and the new access token works.
    let (status, rotated) = refresh(&app, &fixture.client_id, &fixture.refresh, &[]).await;
    assert_eq!(status, StatusCode::OK, "level {level}: {rotated}");
    let fresh = rotated["access_token"].as_str().unwrap();
    rpc(&app, fresh, "tools/list", json!({})).await;
    // The old API key calls a tool and sees the old project.
    let (status, called) = call_with_header(&app, &fixture.key, "list_projects", json!({})).await;
    assert_eq!(status, StatusCode::OK, "level {level}");
    assert!(
        called.to_string().contains("Research"),
        "level {level}: {called}"
    );
    // The old audit rows are still there.
    let old_rows: i64 =
        sqlx::query("SELECT COUNT(*) FROM audit_events WHERE detail = 'from an older release'")
            .fetch_one(app.db.pool().await)
            .await
            .unwrap()
            .try_get(0)
            .unwrap();
    assert_eq!(old_rows, 2, "level {level}");
}

#[tokio::test]
async fn databases_at_every_earlier_level_upgrade_with_their_data_working() {
    let levels = levels();
    assert!(levels.len() > 20, "{levels:?}");
    for level in levels {
        upgrade_from(level).await;
    }
}
