//! `gatehouse backup FILE` and `gatehouse restore FILE` for a `SQLite` deployment
//! (docs/reliability.md "Backup and restore").
//!
//! A backup is `SQLite`'s `VACUUM INTO` on a read-only connection: one read transaction, so the
//! copy is a consistent snapshot of the database at one instant while the server goes on
//! serving (in WAL mode readers and writers do not wait for each other). It is written to a
//! temporary file beside FILE and renamed into place, so FILE is never half written.
//!
//! A restore replaces the configured `SQLite` file with a backup, only when no process has the
//! database open (a server keeps at least two connections open, [`crate::store::pool_size`]):
//! leaving WAL mode needs every other connection closed, so a failed switch to
//! `journal_mode=DELETE` is the sign that a server (or another command) is running on it. The
//! backup must be a Gatehouse database whose schema is not newer than this binary's; an older
//! one is migrated forward with the startup's own migrations. The file it replaces is kept
//! beside it.
//!
//! Neither holds the server key (`GATEHOUSE_SECRET_KEY` or its key file): the secrets it sealed
//! open only with that key, which is kept apart from the backup.
//!
//! On `PostgreSQL` both commands refuse with the advice [`POSTGRES_ADVICE`] (`pg_dump -Fc` and
//! `pg_restore`), exit status 1.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use super::CliError;
use crate::config::Config;
use crate::store::Backend;

/// What `backup` and `restore` say on `PostgreSQL`.
pub const POSTGRES_ADVICE: &str = "DATABASE_URL is PostgreSQL: back it up with PostgreSQL's own tools, e.g. \
     `pg_dump -Fc -d \"$DATABASE_URL\" -f gatehouse.dump` (consistent while the server runs), \
     and restore into an empty database with \
     `pg_restore --no-owner -d \"$DATABASE_URL\" gatehouse.dump`; \
     then `gatehouse migrate` brings an older dump's schema forward";

/// The highest migration version this binary knows (the newest schema it can serve).
pub fn newest_schema_version() -> i64 {
    sqlx::migrate!("migrations/sqlite")
        .iter()
        .map(|m| m.version)
        .max()
        .unwrap_or(0)
}

/// The file a `sqlite://` URL names; `None` for an in-memory database.
fn sqlite_file(url: &str) -> Result<PathBuf, CliError> {
    use std::str::FromStr;
    if url.contains("mode=memory") || url.contains(":memory:") {
        return Err(CliError(
            "DATABASE_URL is an in-memory database: there is nothing to back up or restore".into(),
        ));
    }
    let options = sqlx::sqlite::SqliteConnectOptions::from_str(url)
        .map_err(|e| CliError(format!("DATABASE_URL: {e}")))?;
    let path = options.get_filename().to_path_buf();
    if path.as_os_str().is_empty() {
        return Err(CliError("DATABASE_URL names no file".into()));
    }
    Ok(path)
}

/// The `SQLite` file of `config`, or the `PostgreSQL` advice as the error.
fn configured_file(config: &Config) -> Result<PathBuf, CliError> {
    match Backend::from_url(&config.database_url).map_err(CliError)? {
        Backend::Postgres => Err(CliError(POSTGRES_ADVICE.to_string())),
        Backend::Sqlite => sqlite_file(&config.database_url),
    }
}

/// The schema version of a Gatehouse database (the highest migration applied), or an error
/// saying why `conn` is not one.
fn schema_version(conn: &Connection, what: &Path) -> Result<i64, CliError> {
    let not_ours = |detail: String| {
        CliError(format!(
            "{} is not a Gatehouse database ({detail})",
            what.display()
        ))
    };
    let tables: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' \
             AND name IN ('_sqlx_migrations', 'accounts', 'oauth_clients')",
            [],
            |row| row.get(0),
        )
        .map_err(|e| not_ours(e.to_string()))?;
    if tables < 3 {
        return Err(not_ours(
            "no _sqlx_migrations, accounts or oauth_clients table".into(),
        ));
    }
    let version: Option<i64> = conn
        .query_row(
            "SELECT max(version) FROM _sqlx_migrations WHERE success",
            [],
            |row| row.get(0),
        )
        .map_err(|e| not_ours(e.to_string()))?;
    version.ok_or_else(|| not_ours("no migration applied".into()))
}

/// `gatehouse backup FILE [--force]`: copies the configured `SQLite` database to `file` while
/// the server may be serving; returns what was written (path, bytes, schema version).
///
/// Errors: `PostgreSQL` ([`POSTGRES_ADVICE`]); `file` exists and `force` is false; the
/// database is missing, not a Gatehouse database, or cannot be read; `file` cannot be written.
pub async fn backup(config: &Config, file: PathBuf, force: bool) -> Result<String, CliError> {
    let source = configured_file(config)?;
    tokio::task::spawn_blocking(move || backup_blocking(&source, &file, force))
        .await
        .map_err(|e| CliError(format!("backup stopped: {e}")))?
}

fn backup_blocking(source: &Path, file: &Path, force: bool) -> Result<String, CliError> {
    if is_the_database(file, source) {
        return Err(CliError(format!(
            "{} is the database itself (or one of its files); name another file",
            file.display()
        )));
    }
    if file.exists() && !force {
        return Err(CliError(format!(
            "{} exists; give --force to replace it",
            file.display()
        )));
    }
    if !source.exists() {
        return Err(CliError(format!(
            "the database {} does not exist",
            source.display()
        )));
    }
    let conn = Connection::open_with_flags(
        source,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| CliError(format!("cannot open {}: {e}", source.display())))?;
    conn.busy_timeout(std::time::Duration::from_secs(30))
        .map_err(|e| CliError(e.to_string()))?;
    let version = schema_version(&conn, source)?;
    let partial = sibling(file, &format!("partial-{}", std::process::id()));
    let _ = std::fs::remove_file(&partial);
    // Made empty first, readable by the owner only (the copy holds password and token
    // hashes and sealed secrets); `VACUUM INTO` writes into an existing empty file.
    private_empty_file(&partial)
        .map_err(|e| CliError(format!("cannot write {}: {e}", file.display())))?;
    let target = partial
        .to_str()
        .ok_or_else(|| CliError(format!("{} is not valid UTF-8", file.display())))?;
    let written = conn.execute("VACUUM INTO ?1", [target]);
    if let Err(e) = written {
        let _ = std::fs::remove_file(&partial);
        return Err(CliError(format!("cannot write {}: {e}", file.display())));
    }
    drop(conn);
    if let Err(e) = std::fs::rename(&partial, file) {
        let _ = std::fs::remove_file(&partial);
        return Err(CliError(format!("cannot write {}: {e}", file.display())));
    }
    let bytes = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
    Ok(format!(
        "backup written to {}: {bytes} bytes, schema version {version} (this binary's newest: {}); \
         the server key is not in it: keep GATEHOUSE_SECRET_KEY or its key file as well",
        file.display(),
        newest_schema_version()
    ))
}

/// Whether `file` names the database at `database` or one of the files `SQLite` keeps beside
/// it (`-wal`, `-shm`, `-journal`), after resolving links and relative paths.
fn is_the_database(file: &Path, database: &Path) -> bool {
    let resolve = |p: &Path| -> Option<PathBuf> {
        let name = p.file_name()?;
        let parent = match p.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        Some(std::fs::canonicalize(parent).ok()?.join(name))
    };
    let (Some(file), Some(database)) = (resolve(file), resolve(database)) else {
        return false;
    };
    let file = std::fs::canonicalize(&file).unwrap_or(file);
    let database = std::fs::canonicalize(&database).unwrap_or(database);
    file == database
        || ["wal", "shm", "journal"].iter().any(|suffix| {
            let mut name = database.as_os_str().to_os_string();
            name.push(format!("-{suffix}"));
            file.as_os_str() == name
        })
}

/// Creates `path` empty with mode 0600 (on Unix); fails if it exists.
fn private_empty_file(path: &Path) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path).map(drop)
}

/// `file` with `.suffix` appended to its name.
fn sibling(file: &Path, suffix: &str) -> PathBuf {
    let mut name = file.as_os_str().to_os_string();
    name.push(".");
    name.push(suffix);
    PathBuf::from(name)
}

/// `gatehouse restore FILE`: replaces the configured `SQLite` database with the backup `file`
/// (the replaced file is kept as `<database>.replaced-<unix time>`), then migrates it to this
/// binary's schema; returns what was done.
///
/// Errors: `PostgreSQL` ([`POSTGRES_ADVICE`]); a process has the database open (a running
/// server); `file` is missing, not a Gatehouse database, fails `SQLite`'s integrity check, or
/// has a schema newer than this binary's; a migration failed.
pub async fn restore(config: &Config, file: PathBuf) -> Result<String, CliError> {
    let target = configured_file(config)?;
    let (version, replaced) = {
        let target = target.clone();
        tokio::task::spawn_blocking(move || restore_blocking(&file, &target))
            .await
            .map_err(|e| CliError(format!("restore stopped: {e}")))??
    };
    let store = crate::app::open_store(&config.database_url)
        .await
        .map_err(|e| CliError(format!("restored, but {e}")))?;
    store.close().await;
    let kept = match replaced {
        Some(old) => format!("; the file it replaced is kept as {}", old.display()),
        None => String::new(),
    };
    Ok(format!(
        "restored {} from schema version {version}, migrated to {}{kept}",
        target.display(),
        newest_schema_version()
    ))
}

fn restore_blocking(file: &Path, target: &Path) -> Result<(i64, Option<PathBuf>), CliError> {
    if !file.is_file() {
        return Err(CliError(format!("{} does not exist", file.display())));
    }
    if is_the_database(file, target) {
        return Err(CliError(format!(
            "{} is the configured database itself; restore from a backup file",
            file.display()
        )));
    }
    let backup = Connection::open_with_flags(file, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| CliError(format!("cannot open {}: {e}", file.display())))?;
    let version = schema_version(&backup, file)?;
    let newest = newest_schema_version();
    if version > newest {
        return Err(CliError(format!(
            "{} has schema version {version}, newer than this binary's {newest}: restore it \
             with the release that wrote it",
            file.display()
        )));
    }
    let check: String = backup
        .query_row("PRAGMA quick_check", [], |row| row.get(0))
        .map_err(|e| CliError(format!("{}: {e}", file.display())))?;
    if check != "ok" {
        return Err(CliError(format!(
            "{} fails SQLite's integrity check: {check}",
            file.display()
        )));
    }
    drop(backup);
    let replaced = if target.exists() {
        ensure_unused(target)?;
        let old = sibling(target, &format!("replaced-{}", crate::store::now()));
        std::fs::rename(target, &old)
            .map_err(|e| CliError(format!("cannot move {} aside: {e}", target.display())))?;
        Some(old)
    } else {
        None
    };
    // A write-ahead log left beside the path would be replayed onto the restored file.
    for leftover in ["wal", "shm"] {
        let mut name = target.as_os_str().to_os_string();
        name.push(format!("-{leftover}"));
        let _ = std::fs::remove_file(PathBuf::from(name));
    }
    let partial = sibling(target, &format!("partial-{}", std::process::id()));
    let copied = std::fs::copy(file, &partial).and_then(|_| std::fs::rename(&partial, target));
    if let Err(e) = copied {
        let _ = std::fs::remove_file(&partial);
        if let Some(old) = &replaced {
            let _ = std::fs::rename(old, target);
        }
        return Err(CliError(format!("cannot write {}: {e}", target.display())));
    }
    Ok((version, replaced))
}

/// Fails unless no other connection has `target` open: leaving WAL mode needs them all
/// closed. On success the database is in rollback-journal mode with its WAL folded in and
/// removed, a single file that can be moved aside.
fn ensure_unused(target: &Path) -> Result<(), CliError> {
    let conn = Connection::open_with_flags(target, OpenFlags::SQLITE_OPEN_READ_WRITE)
        .map_err(|e| CliError(format!("cannot open {}: {e}", target.display())))?;
    conn.busy_timeout(std::time::Duration::ZERO)
        .map_err(|e| CliError(e.to_string()))?;
    let mode: Result<String, _> = conn.query_row("PRAGMA journal_mode = DELETE", [], |r| r.get(0));
    let busy = |code| {
        matches!(
            code,
            rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
        )
    };
    match mode {
        Ok(mode) if mode.eq_ignore_ascii_case("delete") => Ok(()),
        Err(rusqlite::Error::SqliteFailure(e, _)) if !busy(e.code) => Err(CliError(format!(
            "cannot check whether {} is in use: {e}; if it is damaged, stop every server on it, \
             move it (and its -wal and -shm files) aside, then restore",
            target.display()
        ))),
        Ok(_) | Err(_) => Err(CliError(format!(
            "{} is in use (a server or another command has it open): stop the server, then \
             restore",
            target.display()
        ))),
    }
}
