//! `gatehouse backup` and `gatehouse restore` (issue 39, item 2), run as the real binary
//! against a serving test server's `SQLite` file; on `PostgreSQL` both refuse with the
//! `pg_dump`/`pg_restore` advice.

use std::path::{Path, PathBuf};

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{TestApp, spawn_app, spawn_successor};
use crate::keys::{call_with_header, create_key};
use crate::mcp::{modern, rpc, send};
use crate::oauth_helpers::{EMAIL, PASSWORD, full_grant, refresh};

/// `gatehouse ARGS…` with `DATABASE_URL=url`: (success, stdout, stderr).
fn run(url: &str, args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .args(args)
        .env("DATABASE_URL", url)
        .env("MCP_SERVER_URL", "http://127.0.0.1:9/mcp")
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn ok(url: &str, args: &[&str]) -> String {
    let (success, out, err) = run(url, args);
    assert!(success, "{args:?}: {err}");
    out
}

fn refused(url: &str, args: &[&str]) -> String {
    let (success, out, err) = run(url, args);
    assert!(!success, "{args:?} succeeded: {out}");
    err
}

/// The newest migration version in `migrations/sqlite` (what this build migrates to).
fn newest_version() -> i64 {
    std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/sqlite"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.split('_').next()?.parse::<i64>().ok()
        })
        .max()
        .unwrap()
}

/// The `SQLite` file behind a test database URL.
fn file_of(url: &str) -> PathBuf {
    PathBuf::from(
        url.trim_start_matches("sqlite://")
            .split('?')
            .next()
            .unwrap(),
    )
}

fn sqlite_url(path: &Path) -> String {
    format!("sqlite://{}?mode=rwc", path.display())
}

fn is_sqlite(app: &TestApp) -> bool {
    app.db.url.starts_with("sqlite:")
}

async fn tools_list_status(app: &TestApp, token: &str) -> StatusCode {
    send(modern(app, Some(token), "tools/list", json!({})))
        .await
        .0
}

/// A backup taken while the server serves restores into a new database, and a server on it
/// honours everything the backup held: the access token lists tools, the refresh token
/// rotates, the API key calls a tool, the account signs in; what was revoked before the backup
/// stays revoked, and a token issued after it is unknown.
#[tokio::test]
async fn a_backup_taken_while_serving_restores_into_a_server_that_honours_it() {
    let app = spawn_app().await;
    if !is_sqlite(&app) {
        return; // PostgreSQL: see `postgres_is_told_to_use_pg_dump`.
    }
    let (client_id, tokens) = full_grant(&app).await;
    let access = tokens["access_token"].as_str().unwrap();
    let refresh_token = tokens["refresh_token"].as_str().unwrap();
    let (revoked_client, revoked) = full_grant(&app).await;
    ok(&app.db.url, &["client", "revoke", &revoked_client]);
    let (_, key) = create_key(&app, &["--account", EMAIL]);
    let listed_before = rpc(&app, access, "tools/list", json!({})).await;

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("backup.db");
    let file_arg = file.to_str().unwrap();
    let out = ok(&app.db.url, &["backup", file_arg]);
    let bytes = std::fs::metadata(&file).unwrap().len();
    assert!(
        out.starts_with(&format!(
            "backup written to {}: {bytes} bytes, schema version {}",
            file.display(),
            newest_version()
        )),
        "{out}"
    );
    assert!(out.contains("the server key is not in it"), "{out}");
    assert!(
        refused(&app.db.url, &["backup", file_arg]).contains("exists; give --force to replace it")
    );
    ok(&app.db.url, &["backup", file_arg, "--force"]);
    // Owner only: the copy holds password and token hashes and sealed secrets.
    #[cfg(unix)]
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&file).unwrap().permissions())
            & 0o777,
        0o600
    );
    // The database itself (or its write-ahead log) is never a backup's target, --force or
    // not: writing over it would corrupt what the server is serving.
    let database = file_of(&app.db.url);
    let mut wal = database.clone().into_os_string();
    wal.push("-wal");
    for target in [database.clone(), PathBuf::from(wal)] {
        let said = refused(
            &app.db.url,
            &["backup", target.to_str().unwrap(), "--force"],
        );
        assert!(said.contains("is the database itself"), "{said}");
    }
    let said = refused(&app.db.url, &["restore", database.to_str().unwrap()]);
    assert!(said.contains("is the configured database itself"), "{said}");
    assert_eq!(
        rpc(&app, access, "tools/list", json!({})).await,
        listed_before,
        "the database still serves"
    );

    // After the backup: this grant is not in it.
    let (_, later) = full_grant(&app).await;
    let later_access = later["access_token"].as_str().unwrap();

    // The serving database cannot be replaced under the server.
    let busy = refused(&app.db.url, &["restore", file_arg]);
    assert!(busy.contains("is in use"), "{busy}");
    assert_eq!(tools_list_status(&app, access).await, StatusCode::OK);

    let fresh = tempfile::tempdir().unwrap();
    let target = fresh.path().join("gatehouse.db");
    // The server key travels apart from the backup.
    std::fs::copy(
        format!("{}.key", file_of(&app.db.url).display()),
        format!("{}.key", target.display()),
    )
    .unwrap();
    let url = sqlite_url(&target);
    let out = ok(&url, &["restore", file_arg]);
    assert_eq!(
        out.trim(),
        format!(
            "restored {} from schema version {v}, migrated to {v}",
            target.display(),
            v = newest_version()
        )
    );
    let successor = spawn_successor(&app, &url, |_| {}).await;

    let listed = rpc(&successor, access, "tools/list", json!({})).await;
    assert_eq!(listed["result"], listed_before["result"]);
    assert!(!listed["result"]["tools"].as_array().unwrap().is_empty());
    let (status, rotated) = refresh(&successor, &client_id, refresh_token, &[]).await;
    assert_eq!(status, StatusCode::OK, "{rotated}");
    assert_eq!(
        tools_list_status(&successor, rotated["access_token"].as_str().unwrap()).await,
        StatusCode::OK
    );
    let (status, called) = call_with_header(&successor, &key, "list_projects", json!({})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(called["result"]["isError"], false, "{called}");
    let browser = crate::helpers::new_client();
    assert_eq!(
        successor.sign_in(&browser, EMAIL, PASSWORD).await.status(),
        StatusCode::SEE_OTHER
    );

    // Revoked before the backup: still revoked.
    assert_eq!(
        tools_list_status(&successor, revoked["access_token"].as_str().unwrap()).await,
        StatusCode::UNAUTHORIZED
    );
    let (status, _) = refresh(
        &successor,
        &revoked_client,
        revoked["refresh_token"].as_str().unwrap(),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // Issued after the backup: unknown.
    assert_eq!(
        tools_list_status(&successor, later_access).await,
        StatusCode::UNAUTHORIZED
    );
}

/// `restore` checks what it is given before touching the database: a missing file, a file
/// that is not a Gatehouse database and one from a newer release are refused and the
/// database is left as it was; an older-or-equal backup replaces an unused database, which
/// is kept beside it.
#[tokio::test]
async fn restore_refuses_foreign_and_newer_files_and_keeps_what_it_replaces() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("gatehouse.db");
    let url = sqlite_url(&db);
    ok(&url, &["migrate"]);
    let backup = dir.path().join("backup.db");
    ok(&url, &["backup", backup.to_str().unwrap()]);

    let missing = refused(
        &url,
        &["restore", dir.path().join("nope.db").to_str().unwrap()],
    );
    assert!(missing.contains("does not exist"), "{missing}");

    let foreign = dir.path().join("foreign.db");
    let conn = rusqlite::Connection::open(&foreign).unwrap();
    conn.execute("CREATE TABLE notes (body TEXT)", []).unwrap();
    drop(conn);
    let err = refused(&url, &["restore", foreign.to_str().unwrap()]);
    assert!(err.contains("is not a Gatehouse database"), "{err}");

    let newer = dir.path().join("newer.db");
    std::fs::copy(&backup, &newer).unwrap();
    let conn = rusqlite::Connection::open(&newer).unwrap();
    conn.execute(
        "INSERT INTO _sqlx_migrations (version, description, installed_on, success, checksum, \
         execution_time) VALUES (99999, 'from the future', CURRENT_TIMESTAMP, 1, x'00', 0)",
        [],
    )
    .unwrap();
    drop(conn);
    let err = refused(&url, &["restore", newer.to_str().unwrap()]);
    assert!(
        err.contains(&format!(
            "has schema version 99999, newer than this binary's {}",
            newest_version()
        )),
        "{err}"
    );
    assert!(
        db.exists(),
        "a refused restore leaves the database in place"
    );

    let out = ok(&url, &["restore", backup.to_str().unwrap()]);
    assert!(out.contains("; the file it replaced is kept as "), "{out}");
    let kept = out.trim().rsplit("kept as ").next().unwrap();
    assert!(Path::new(kept).exists(), "{kept}");
    // The restored database serves commands.
    assert!(ok(&url, &["account", "list"]).lines().count() >= 1);
}

/// On `PostgreSQL` both commands refuse, exit 1, and name `pg_dump -Fc` and `pg_restore`.
#[tokio::test]
async fn postgres_is_told_to_use_pg_dump() {
    let url = "postgres://nobody@127.0.0.1:9/none";
    for args in [&["backup", "x.dump"][..], &["restore", "x.dump"][..]] {
        let err = refused(url, args);
        assert!(err.contains("pg_dump -Fc"), "{err}");
        assert!(err.contains("pg_restore"), "{err}");
    }
}
