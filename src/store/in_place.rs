//! `SQLite` reads in place: the lookups every authenticated request makes (an access token, an
//! API key or personal URL, a client, a refresh token, the caller's projects) are asked of
//! `SQLite` on the calling thread, through read connections of this module (rusqlite over the
//! same `libsqlite3` that sqlx links), instead of through the pool.
//!
//! Why: sqlx runs each `SQLite` statement on its connection's worker thread and hands the
//! rows back, so every statement costs at least two thread wake-ups, and on a loaded server
//! those wake-ups (futex, scheduler) took more CPU than `SQLite` itself (docs/benchmarks.md).
//! A lookup by primary or unique key takes microseconds of CPU; run where it is asked, it
//! costs no hand-off.
//!
//! What keeps it bounded and as correct as the pool:
//! - Only single-statement reads by key (at most one row, or one account's projects) run
//!   here; writes and everything else stay on the pool.
//! - The connections are opened with `PRAGMA query_only = ON`, and `busy_timeout = 0`: in WAL
//!   mode a reader never waits for writers, and in the rare cases `SQLite` would make it wait
//!   (a lock held during WAL recovery), the read fails at once with `SQLITE_BUSY` instead of
//!   sleeping on the runtime.
//! - Each statement is its own read transaction (autocommit; a statement is reset when its
//!   read ends), so it sees every transaction committed before it began, by this process or
//!   any other: a revocation is seen by the very next lookup, as through the pool.
//! - Any failure (no connection free, the file cannot be opened, `SQLITE_BUSY`, an I/O error,
//!   a row that does not decode) makes the caller ask the pool instead, which answers as it
//!   always did (waiting for a busy database, or an error in the protocol's shape). A failed
//!   connection other than a busy one is closed. [`InPlace::stats`] counts both outcomes.
//! - At most [`MAX_CONNECTIONS`] connections exist; each is used by one thread at a time and
//!   never across an `.await`.
//!
//! Writes in place: the two writes that run in batches on `SQLite` (the group commit of refresh
//! rotations, [`super::rotations`], and the routine audit rows, [`super::audit`]) run on one
//! write connection of this module ([`InPlace::write`]), on a blocking thread, while the writer
//! holds this process's write turn ([`super::Store::begin_write`]): `BEGIN IMMEDIATE`, the
//! statements, `COMMIT`, with no hand-off per statement. Any failure rolls the transaction
//! back (nothing of it is committed) and the caller writes the same rows through the pool,
//! which waits for a busy database and answers errors as it always did; the connection is
//! closed after any failure. The write connection has no busy timeout either
//! (the write turn keeps this process's batches apart; another writer holding the lock sends
//! the batch to the pool), `foreign_keys = ON` and `synchronous = NORMAL`, as the pool's.

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use rusqlite::{Connection, OpenFlags, ToSql};

use super::UNWRITABLE_PAUSE;

/// Most read connections open at once (a caller finding none free and this many open asks the
/// pool instead).
pub const MAX_CONNECTIONS: usize = 8;

/// Prepared statements kept per connection.
const STATEMENT_CACHE: usize = 32;

/// The placeholder names of the statements (`$1`…), bound by name so that the binding does
/// not depend on the order in which they first appear in the text.
const PARAMETERS: [&str; 8] = ["$1", "$2", "$3", "$4", "$5", "$6", "$7", "$8"];

/// How many reads ran in place, how many were handed to the pool after failing here, and how
/// many went to the pool because the file had just been found unwritable; the same for the
/// write transactions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InPlaceStats {
    /// Reads answered here.
    pub reads: u64,
    /// Reads that failed here (or found no connection) and were asked of the pool.
    pub fallbacks: u64,
    /// Reads and writes sent to the pool without trying here, within [`UNWRITABLE_PAUSE`] of
    /// the file being found unwritable (in this process, whichever store found it).
    pub paused: u64,
    /// Write transactions committed here.
    pub writes: u64,
    /// Write transactions that failed here (rolled back) and were handed to the pool.
    pub write_fallbacks: u64,
    /// WAL checkpoints run by the checkpoint thread ([`super::checkpoints`]).
    pub checkpoints: u64,
}

/// The read connections of one `SQLite` file (shared by a store's clones).
#[derive(Debug)]
pub(crate) struct InPlace {
    path: PathBuf,
    /// Free connections, each with when it was opened.
    idle: Mutex<Vec<(Connection, Instant)>>,
    open: AtomicUsize,
    /// The write connection, with when it was opened (opened at its first write).
    writer: Mutex<Option<(Connection, Instant)>>,
    reads: AtomicU64,
    fallbacks: AtomicU64,
    paused: AtomicU64,
    writes: AtomicU64,
    write_fallbacks: AtomicU64,
    /// The WAL checkpoints of the file, off the write connection ([`super::checkpoints`]).
    checkpoints: super::checkpoints::Checkpointer,
    /// Whether this process found its `SQLite` file read-only or unopenable less than the
    /// given time ago (`store::cannot_write_within`; its own in unit tests, since that record
    /// is one per process).
    unwritable_within: fn(std::time::Duration) -> bool,
}

/// A record read from a row of an in-place statement (the columns named as in the pool's
/// `sqlx::FromRow` spelling of the same record).
pub(crate) trait FromSqliteRow: Sized {
    /// The statement's result columns, in order: a column is read by its position in this
    /// list (a name resolved by `SQLite` itself costs a call and a string compare per column
    /// tried). [`optional`] and [`all`] refuse a statement with another number of columns, and
    /// the tests of each record, one with other names.
    const COLUMNS: &'static [&'static str];

    /// Reads one record; an error makes the caller ask the pool.
    fn from_sqlite(row: &Named<'_, '_>) -> rusqlite::Result<Self>;
}

/// A row of an in-place statement whose columns are read by the names of
/// [`FromSqliteRow::COLUMNS`].
pub(crate) struct Named<'r, 's> {
    row: &'r rusqlite::Row<'s>,
    columns: &'static [&'static str],
}

impl Named<'_, '_> {
    /// The position of column `name`; an error for a name the record does not declare.
    pub(crate) fn index(&self, name: &str) -> rusqlite::Result<usize> {
        self.columns
            .iter()
            .position(|c| *c == name)
            .ok_or_else(|| rusqlite::Error::InvalidColumnName(name.to_string()))
    }

    /// The value of column `name`.
    pub(crate) fn get<T: rusqlite::types::FromSql>(&self, name: &str) -> rusqlite::Result<T> {
        self.row.get(self.index(name)?)
    }

    /// The value of the column at `index` (from [`Named::index`]).
    pub(crate) fn get_at<T: rusqlite::types::FromSql>(&self, index: usize) -> rusqlite::Result<T> {
        self.row.get(index)
    }
}

/// Whether `statement` answers as many columns as `T` declares (their names are checked by
/// each record's tests); an error makes the caller ask the pool.
fn declared_columns<T: FromSqliteRow>(statement: &rusqlite::Statement<'_>) -> rusqlite::Result<()> {
    if statement.column_count() != T::COLUMNS.len() {
        return Err(rusqlite::Error::InvalidColumnIndex(T::COLUMNS.len()));
    }
    Ok(())
}

impl InPlace {
    /// Reads for the `SQLite` database `url` names; `None` for an in-memory database (no other
    /// connection could see it) or a URL that does not parse.
    pub(crate) fn for_url(url: &str) -> Option<InPlace> {
        use std::str::FromStr;
        if url.contains("mode=memory") || url.contains(":memory:") {
            return None;
        }
        let options = sqlx::sqlite::SqliteConnectOptions::from_str(url).ok()?;
        let path = options.get_filename().to_path_buf();
        if path.as_os_str().is_empty() || path.as_os_str() == ":memory:" {
            return None;
        }
        Some(InPlace {
            path: path.clone(),
            idle: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
            writer: Mutex::new(None),
            reads: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
            paused: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            write_fallbacks: AtomicU64::new(0),
            checkpoints: super::checkpoints::Checkpointer::new(
                path.clone(),
                super::cannot_write_within,
            ),
            unwritable_within: super::cannot_write_within,
        })
    }

    /// How many reads ran here and how many went to the pool after failing here.
    pub(crate) fn stats(&self) -> InPlaceStats {
        InPlaceStats {
            reads: self.reads.load(Ordering::Relaxed),
            fallbacks: self.fallbacks.load(Ordering::Relaxed),
            paused: self.paused.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
            write_fallbacks: self.write_fallbacks.load(Ordering::Relaxed),
            checkpoints: self.checkpoints.done(),
        }
    }

    /// Runs `read` on a free connection of this file: `Some` with its answer, `None` when it
    /// could not be answered here (the caller asks the pool).
    pub(crate) fn read<T>(
        &self,
        read: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Option<T> {
        if (self.unwritable_within)(UNWRITABLE_PAUSE) {
            // Every connection a process opens on one file shares `SQLite`'s view of its
            // shared-memory index, read-only when it was first opened read-only; none of ours
            // may keep that alive while the pool replaces its own (see `UNWRITABLE_PAUSE`).
            self.close_idle();
            self.close_writer();
            self.paused.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let Some((conn, opened)) = self.take() else {
            self.fallbacks.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        match read(&conn) {
            Ok(answer) => {
                self.reads.fetch_add(1, Ordering::Relaxed);
                self.put_back(conn, opened);
                Some(answer)
            }
            Err(e) => {
                self.fallbacks.fetch_add(1, Ordering::Relaxed);
                if is_busy(&e) {
                    self.put_back(conn, opened);
                } else {
                    tracing::debug!(error = %e, "in-place read failed; asking the pool");
                    self.close(conn);
                }
                None
            }
        }
    }

    /// Runs `write` in one `BEGIN IMMEDIATE` transaction on the write connection and commits
    /// it: `Some` with its answer once committed, `None` when it was not committed here (the
    /// transaction rolled back; the caller writes through the pool). Blocks the calling
    /// thread for the transaction: call it from a blocking thread, holding the write turn.
    pub(crate) fn write<T>(
        &self,
        write: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Option<T> {
        if (self.unwritable_within)(UNWRITABLE_PAUSE) {
            self.close_idle();
            self.close_writer();
            self.paused.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let mut slot = match self.writer.lock() {
            Ok(slot) => slot,
            Err(poisoned) => {
                // A write panicked while it held the connection, perhaps inside its
                // transaction: closing the connection rolls that back.
                let mut slot = poisoned.into_inner();
                *slot = None;
                slot
            }
        };
        if slot
            .as_ref()
            .is_some_and(|(_, opened)| super::opened_before_cannot_write(opened.elapsed()))
        {
            *slot = None;
        }
        if slot.is_none() {
            match self.connect_writer() {
                Ok(conn) => *slot = Some((conn, Instant::now())),
                Err(e) => {
                    tracing::debug!(error = %e, "in-place write connection not opened");
                    self.write_fallbacks.fetch_add(1, Ordering::Relaxed);
                    return None;
                }
            }
        }
        let (conn, _) = slot.as_ref()?;
        let outcome = conn.execute_batch("BEGIN IMMEDIATE").and_then(|()| {
            let answer = write(conn)?;
            conn.execute_batch("COMMIT")?;
            Ok(answer)
        });
        match outcome {
            Ok(answer) => {
                self.writes.fetch_add(1, Ordering::Relaxed);
                self.checkpoints.committed();
                Some(answer)
            }
            Err(e) => {
                self.write_fallbacks.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(error = %e, "in-place write failed; writing through the pool");
                // Closed whatever the error (closing a connection inside a transaction rolls
                // it back): one opened while the file system was read-only keeps `SQLite`'s
                // shared-memory index read-only for the whole process as long as it is open,
                // and a busy error is what some of those writes get.
                if !conn.is_autocommit() {
                    let _ = conn.execute_batch("ROLLBACK");
                }
                *slot = None;
                None
            }
        }
    }

    fn connect_writer(&self) -> rusqlite::Result<Connection> {
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(std::time::Duration::ZERO)?;
        conn.pragma_update(None, "foreign_keys", true)?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        // Checkpoints run on their own thread ([`super::checkpoints`]); this one only past
        // the backstop.
        conn.pragma_update(
            None,
            "wal_autocheckpoint",
            super::checkpoints::WRITER_BACKSTOP_FRAMES,
        )?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        Ok(conn)
    }

    /// Closes the write connection unless a write is using it right now (that write checks
    /// the file's state itself when it starts and closes its connection if it fails; this is
    /// called from reads on the async runtime, which must not wait for a write).
    fn close_writer(&self) {
        match self.writer.try_lock() {
            Ok(mut slot) => *slot = None,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => *poisoned.into_inner() = None,
            Err(std::sync::TryLockError::WouldBlock) => {}
        }
    }

    fn take(&self) -> Option<(Connection, Instant)> {
        loop {
            let Some((conn, opened)) = self.idle.lock().ok()?.pop() else {
                break;
            };
            if super::opened_before_cannot_write(opened.elapsed()) {
                self.close(conn);
            } else {
                return Some((conn, opened));
            }
        }
        if self.open.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
            self.open.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        match self.connect() {
            Ok(conn) => Some((conn, Instant::now())),
            Err(e) => {
                self.open.fetch_sub(1, Ordering::AcqRel);
                tracing::debug!(error = %e, "in-place read connection not opened");
                None
            }
        }
    }

    fn connect(&self) -> rusqlite::Result<Connection> {
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(std::time::Duration::ZERO)?;
        conn.pragma_update(None, "query_only", true)?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        Ok(conn)
    }

    /// Keeps `conn` for the next read, unless it was opened before its file was last found
    /// read-only or unopenable: such a connection is closed, as the pool closes its own
    /// ([`super::opened_before_cannot_write`]), so that nothing opened while the file system
    /// was read-only outlives it.
    fn put_back(&self, conn: Connection, opened: Instant) {
        if super::opened_before_cannot_write(opened.elapsed()) {
            self.close(conn);
            return;
        }
        match self.idle.lock() {
            Ok(mut idle) => idle.push((conn, opened)),
            Err(_) => self.close(conn),
        }
    }

    /// The `SQLite` file these connections open.
    pub(crate) fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Closes every connection of this file that is not in use right now (the idle readers
    /// and the write connection); the next read or write opens fresh ones.
    pub(crate) fn close_unused(&self) {
        self.close_idle();
        self.close_writer();
    }

    fn close_idle(&self) {
        let idle = match self.idle.lock() {
            Ok(mut idle) => std::mem::take(&mut *idle),
            Err(_) => return,
        };
        for (conn, _) in idle {
            self.close(conn);
        }
    }

    fn close(&self, conn: Connection) {
        drop(conn);
        self.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Whether `e` says the database was locked for a moment (`SQLITE_BUSY`, `SQLITE_LOCKED`).
fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// Prepares `sql` (cached per connection) and binds `params` to `$1`, `$2`, … by name.
fn bound<'c>(
    conn: &'c Connection,
    sql: &str,
    params: &[&dyn ToSql],
) -> rusqlite::Result<rusqlite::CachedStatement<'c>> {
    let mut statement = conn.prepare_cached(sql)?;
    if params.len() != statement.parameter_count() || params.len() > PARAMETERS.len() {
        return Err(rusqlite::Error::InvalidParameterCount(
            params.len(),
            statement.parameter_count(),
        ));
    }
    for (name, value) in PARAMETERS.iter().zip(params) {
        let index = statement
            .parameter_index(name)?
            .ok_or_else(|| rusqlite::Error::InvalidParameterName((*name).to_string()))?;
        statement.raw_bind_parameter(index, value)?;
    }
    Ok(statement)
}

/// The first row of `sql` with `params` as a `T`, if any.
pub(crate) fn optional<T: FromSqliteRow>(
    conn: &Connection,
    sql: &str,
    params: &[&dyn ToSql],
) -> rusqlite::Result<Option<T>> {
    let mut statement = bound(conn, sql, params)?;
    declared_columns::<T>(&statement)?;
    let mut rows = statement.raw_query();
    match rows.next()? {
        Some(row) => T::from_sqlite(&Named {
            row,
            columns: T::COLUMNS,
        })
        .map(Some),
        None => Ok(None),
    }
}

/// Every row of `sql` with `params` as `T`s.
pub(crate) fn all<T: FromSqliteRow>(
    conn: &Connection,
    sql: &str,
    params: &[&dyn ToSql],
) -> rusqlite::Result<Vec<T>> {
    let mut statement = bound(conn, sql, params)?;
    declared_columns::<T>(&statement)?;
    let mut rows = statement.raw_query();
    let mut found = Vec::new();
    while let Some(row) = rows.next()? {
        found.push(T::from_sqlite(&Named {
            row,
            columns: T::COLUMNS,
        })?);
    }
    Ok(found)
}

/// Runs the write statement `sql` with those of `params` it names (`$1` is `params[0]`, …;
/// a statement may use any of them, in any order): how many rows it changed.
pub(crate) fn execute(
    conn: &Connection,
    sql: &str,
    params: &[&dyn ToSql],
) -> rusqlite::Result<usize> {
    let mut statement = conn.prepare_cached(sql)?;
    for index in 1..=statement.parameter_count() {
        let value = statement
            .parameter_name(index)
            .and_then(|name| name.strip_prefix('$'))
            .and_then(|n| n.parse::<usize>().ok())
            .and_then(|n| params.get(n.checked_sub(1)?))
            .ok_or(rusqlite::Error::InvalidParameterCount(
                params.len(),
                statement.parameter_count(),
            ))?;
        statement.raw_bind_parameter(index, value)?;
    }
    statement.raw_execute()
}

/// A column conversion that failed (a stored value the record cannot hold).
pub(crate) fn conversion(
    column: usize,
    e: impl std::error::Error + Send + Sync + 'static,
) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(column, rusqlite::types::Type::Text, Box::new(e))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A connection to an in-memory database with every `SQLite` migration applied.
    pub(crate) fn migrated() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/sqlite");
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|e| e == "sql"))
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no SQLite migrations found");
        for file in files {
            let sql = std::fs::read_to_string(&file).unwrap();
            conn.execute_batch(&sql)
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        }
        conn
    }

    /// Panics unless `sql`, prepared on the migrated schema, answers exactly the columns `T`
    /// declares, in order ([`FromSqliteRow::COLUMNS`]).
    pub(crate) fn assert_columns<T: FromSqliteRow>(sql: &str) {
        let conn = migrated();
        let statement = conn.prepare(sql).unwrap();
        assert_eq!(statement.column_names(), T::COLUMNS, "{sql}");
    }

    /// A database whose file another connection holds locked: the read does not wait (the
    /// connections have no busy timeout; rusqlite's default would sleep 5 s on the runtime),
    /// it is counted as handed to the pool, and its connection is kept for the next read.
    #[test]
    fn a_locked_database_hands_the_read_to_the_pool_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let writer = Connection::open(&path).unwrap();
        // A rollback journal: there, unlike WAL, a writer's exclusive lock shuts readers out.
        writer
            .execute_batch("CREATE TABLE t (id TEXT PRIMARY KEY); INSERT INTO t VALUES ('a');")
            .unwrap();
        let reads = InPlace {
            unwritable_within: |_| false,
            ..InPlace::for_url(&format!("sqlite://{}", path.display())).unwrap()
        };
        let read = |reads: &InPlace| {
            reads.read(|conn| {
                let found: Vec<String> = {
                    let mut statement = bound(conn, "SELECT id FROM t WHERE id = $1", &[&"a"])?;
                    let mut rows = statement.raw_query();
                    let mut found = Vec::new();
                    while let Some(row) = rows.next()? {
                        found.push(row.get(0)?);
                    }
                    found
                };
                Ok(found)
            })
        };
        assert_eq!(read(&reads), Some(vec!["a".to_string()]));

        writer
            .execute_batch("BEGIN EXCLUSIVE; DELETE FROM t;")
            .unwrap();
        let asked = Instant::now();
        assert_eq!(read(&reads), None);
        assert!(asked.elapsed() < std::time::Duration::from_millis(500));
        assert_eq!(
            reads.stats(),
            InPlaceStats {
                reads: 1,
                fallbacks: 1,
                ..InPlaceStats::default()
            }
        );
        assert_eq!(
            reads.open.load(Ordering::Relaxed),
            1,
            "the busy connection was kept"
        );

        writer.execute_batch("COMMIT").unwrap();
        assert_eq!(
            read(&reads),
            Some(Vec::new()),
            "the committed delete is seen at once"
        );
        assert_eq!(reads.open.load(Ordering::Relaxed), 1);
    }

    /// Parameters are bound by their names, whatever order they first appear in, and a
    /// statement given the wrong number of them fails instead of reading with one unbound.
    #[test]
    fn parameters_bind_by_name() {
        let conn = Connection::open_in_memory().unwrap();
        let mut statement = bound(&conn, "SELECT $2 || '-' || $1", &[&"one", &"two"]).unwrap();
        let mut rows = statement.raw_query();
        let joined: String = rows.next().unwrap().unwrap().get(0).unwrap();
        assert_eq!(joined, "two-one");
        drop(rows);
        assert!(matches!(
            bound(&conn, "SELECT $1, $2", &[&"one"]),
            Err(rusqlite::Error::InvalidParameterCount(1, 2))
        ));
    }

    /// For a while after the file was found unwritable, every read goes to the pool and no
    /// connection of ours stays open (`UNWRITABLE_PAUSE`).
    #[test]
    fn a_file_found_unwritable_closes_every_connection_and_reads_through_the_pool() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        Connection::open(&path).unwrap();
        let url = format!("sqlite://{}", path.display());
        let mut reads = InPlace {
            unwritable_within: |_| false,
            ..InPlace::for_url(&url).unwrap()
        };
        let one = |reads: &InPlace| {
            reads.read(|conn| conn.query_row("SELECT 1", [], |r| r.get::<_, i64>(0)))
        };
        assert_eq!(one(&reads), Some(1));
        assert_eq!(reads.open.load(Ordering::Relaxed), 1);
        reads.unwritable_within = |within| within == UNWRITABLE_PAUSE;
        assert_eq!(one(&reads), None);
        assert_eq!(
            reads.open.load(Ordering::Relaxed),
            0,
            "the idle connection was closed"
        );
        assert_eq!(
            reads.stats(),
            InPlaceStats {
                reads: 1,
                paused: 1,
                ..InPlaceStats::default()
            }
        );
    }

    /// A WAL-mode database file made with `schema`: its folder (to keep), a connection of the
    /// test's own, and this module's connections to it (never paused).
    fn wal_file(schema: &str) -> (tempfile::TempDir, Connection, InPlace) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let own = Connection::open(&path).unwrap();
        own.execute_batch(&format!("PRAGMA journal_mode = WAL; {schema};"))
            .unwrap();
        let store = InPlace {
            unwritable_within: |_| false,
            ..InPlace::for_url(&format!("sqlite://{}", path.display())).unwrap()
        };
        (dir, own, store)
    }

    /// A write transaction commits everything it ran, or, when a statement fails, nothing:
    /// the rows written before the failure are rolled back, the caller is told to use the
    /// pool, and the next write runs here again.
    #[test]
    fn a_write_commits_all_or_nothing() {
        let (_dir, setup, store) = wal_file("CREATE TABLE t (id TEXT PRIMARY KEY, n INTEGER)");
        let insert = "INSERT INTO t (n, id) VALUES ($2, $1)";
        let written = store.write(|conn| {
            Ok(execute(conn, insert, &[&"a", &1])? + execute(conn, insert, &[&"b", &2])?)
        });
        assert_eq!(written, Some(2));
        let count = |conn: &Connection| {
            conn.query_row("SELECT count(*), sum(n) FROM t", [], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))
            })
            .unwrap()
        };
        assert_eq!(count(&setup), (2, 3), "committed, parameters bound by name");

        // "c" is new, "a" collides: the whole transaction is rolled back.
        let refused = store.write(|conn| {
            execute(conn, insert, &[&"c", &3])?;
            execute(conn, insert, &[&"a", &4])
        });
        assert_eq!(refused, None);
        assert_eq!(
            count(&setup),
            (2, 3),
            "nothing of the failed write is committed"
        );

        assert_eq!(
            store.write(|conn| execute(conn, insert, &[&"c", &3])),
            Some(1)
        );
        assert_eq!(count(&setup), (3, 6));
        assert_eq!(
            store.stats(),
            InPlaceStats {
                writes: 2,
                write_fallbacks: 1,
                ..InPlaceStats::default()
            }
        );
    }

    /// Another connection holding the write lock sends the write to the pool at once (no busy
    /// handler sleeping on the thread), and the write runs here again once the lock is free.
    #[test]
    fn a_write_meeting_the_lock_goes_to_the_pool_at_once() {
        let (_dir, other, store) = wal_file("CREATE TABLE t (id TEXT PRIMARY KEY)");
        let insert = |id: &'static str| {
            move |conn: &Connection| execute(conn, "INSERT INTO t (id) VALUES ($1)", &[&id])
        };
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        let asked = Instant::now();
        assert_eq!(store.write(insert("a")), None);
        assert!(asked.elapsed() < std::time::Duration::from_millis(500));
        other.execute_batch("COMMIT").unwrap();
        assert_eq!(store.write(insert("b")), Some(1));
        let ids: Vec<String> = other
            .prepare("SELECT id FROM t")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(ids, vec!["b".to_string()]);
    }

    /// A statement naming a parameter beyond those given fails instead of running with it
    /// unbound (NULL).
    #[test]
    fn a_write_with_a_missing_parameter_fails() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (a TEXT, b TEXT)")
            .unwrap();
        assert!(matches!(
            execute(&conn, "INSERT INTO t VALUES ($1, $3)", &[&"x", &"y"]),
            Err(rusqlite::Error::InvalidParameterCount(2, 2))
        ));
        assert_eq!(
            execute(&conn, "INSERT INTO t VALUES ($2, $1)", &[&"x", &"y"]).unwrap(),
            1
        );
    }

    /// No in-place reads for a database only the pool's connections could see.
    #[test]
    fn an_in_memory_database_reads_through_the_pool() {
        assert!(InPlace::for_url("sqlite::memory:").is_none());
        assert!(InPlace::for_url("sqlite://x.db?mode=memory").is_none());
        assert!(InPlace::for_url("sqlite://gatehouse.db?mode=rwc").is_some());
    }
}
