//! Storage: one interface over `SQLite` (embedded default) and `PostgreSQL`.
//!
//! Both backends run the same SQL through sqlx's `Any` driver: statements use `$1`-style
//! placeholders (understood by both engines), integers are `BIGINT`/`INTEGER` (`i64`), times are
//! Unix seconds, identifiers are text. Where the dialects really differ (full-text search), the
//! SQL lives in [`sqlite`] and [`postgres`] behind [`Dialect`]. Schema migrations live in
//! `migrations/sqlite` and `migrations/postgres` with the same file names and are applied at
//! start. Rotation and single-use checks are conditional updates, atomic on both engines.

use std::time::Duration;

use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::{AnyPool, Executor};

use crate::domain::secret::TokenHash;

pub mod accounts;
pub mod assertions;
pub mod audit;
pub mod audit_query;
pub mod auth_cache;
pub(crate) mod batcher;
pub mod checkpoints;
pub mod device_grants;
pub mod devices;
pub mod dpop;
pub mod hot;
pub mod idps;
pub mod in_place;
pub mod invitations;
pub mod keys;
pub mod limits;
pub mod notes;
pub mod oauth;
pub mod passkeys;
pub mod personal_upstreams;
pub mod postgres;
pub mod projects;
pub mod quotas;
pub mod read_batches;
pub mod resources;
pub mod rotations;
pub mod second_factor;
pub mod services;
pub mod sessions;
pub mod signing_keys;
pub mod sqlite;
pub mod upstreams;
pub mod urls;
pub mod vault;
pub mod workloads;
mod writable_again;

#[cfg(test)]
mod trigger_coverage;

pub use sessions::SessionBackend;

/// Errors from the storage layer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A uniqueness rule was broken (e.g. an email already registered).
    #[error("already exists: {0}")]
    Conflict(String),
    /// The named row does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// The database could not be reached or failed.
    #[error("database error: {0}")]
    Database(#[source] sqlx::Error),
    /// A migration failed.
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The store's own queues could not get this request to the database in time (no turn,
    /// no answer, the store closing): answered like a busy database, `503` with `Retry-After`
    /// ([`StoreError::is_unavailable`]).
    #[error("database unavailable: {0}")]
    Unavailable(Unavailable),
}

/// Why the store's own queues (the write turns on `SQLite`, the read batches and the group
/// commits of rotations) gave a request no answer. Each is the database being busy or going
/// away, never the request's fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    /// No turn came within [`WRITE_TURN_WAIT`].
    #[error("no turn within the wait")]
    NoTurn,
    /// The shared statement (a batch, a group commit) that took this request gave no answer
    /// within [`WRITE_TURN_WAIT`].
    #[error("no answer from the shared statement within the wait")]
    NoAnswer,
    /// The task running the shared statement that took this request ended without
    /// answering (only when the runtime shuts down).
    #[error("the shared statement ended without an answer")]
    LeaderGone,
    /// The turns are closed: the store is closing.
    #[error("the store is closing")]
    Closed,
}

impl StoreError {
    /// Whether the database is busy or out of reach (no pooled connection came free in time,
    /// the pool is closed, the connection or its worker broke) rather than the request being
    /// at fault: answered `503` with `Retry-After` (RFC 9110 §15.6.4), never `500`.
    ///
    /// On `SQLite` the same holds for a file that cannot be written or read: the disk is full
    /// (`SQLITE_FULL`), the file or its folder is read-only (`SQLITE_READONLY`), the disk
    /// failed an I/O (`SQLITE_IOERR`), or the file cannot be opened (`SQLITE_CANTOPEN`),
    /// extended codes included.
    pub fn is_unavailable(&self) -> bool {
        match self {
            StoreError::Database(e) => database_unavailable(e),
            StoreError::Unavailable(_) => true,
            _ => false,
        }
    }

    /// Maps a unique-constraint violation to [`StoreError::Conflict`], anything else to
    /// [`StoreError::Database`].
    pub fn from_insert(e: sqlx::Error, what: &str) -> StoreError {
        if let sqlx::Error::Database(db) = &e
            && db.is_unique_violation()
        {
            return StoreError::Conflict(what.to_string());
        }
        StoreError::from(e)
    }
}

impl From<sqlx::Error> for StoreError {
    /// Wraps `e`; a `SQLite` file found read-only or unopenable is noted first
    /// ([`note_cannot_write`]).
    fn from(e: sqlx::Error) -> Self {
        if let sqlx::Error::Database(db) = &e
            && sqlite_code(db.as_ref()).is_some_and(|code| SQLITE_REOPEN.contains(&code))
        {
            note_cannot_write();
        }
        StoreError::Database(e)
    }
}

/// Whether a driver error says the database is busy or out of reach, or its `SQLite` file full
/// or unwritable ([`StoreError::is_unavailable`]).
pub(crate) fn database_unavailable(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => {
            sqlite_code(db.as_ref()).is_some_and(|code| SQLITE_UNAVAILABLE.contains(&code))
                || postgres_code(db.as_ref()).is_some_and(postgres_unavailable)
        }
        _ => false,
    }
}

/// The SQLSTATE of a `PostgreSQL` error.
fn postgres_code(db: &dyn sqlx::error::DatabaseError) -> Option<&str> {
    db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
        .map(sqlx::postgres::PgDatabaseError::code)
}

/// Whether a `PostgreSQL` SQLSTATE (Appendix A of its manual) says the database is out of reach
/// or out of room for now rather than the request being wrong: class `08` (connection
/// exception), class `53` (insufficient resources: disk full, out of memory, too many
/// connections), `57P01` `admin_shutdown` (the backend was terminated: a failover, a restart,
/// `pg_terminate_backend`), `57P02` `crash_shutdown`, `57P03` `cannot_connect_now` (starting up
/// or shutting down), `57P05` `idle_session_timeout`, and `25006` `read_only_sql_transaction` (a
/// write reached a standby, as after a failover before the address moves).
fn postgres_unavailable(code: &str) -> bool {
    code.starts_with("08")
        || code.starts_with("53")
        || matches!(code, "57P01" | "57P02" | "57P03" | "57P05" | "25006")
}

/// A copy of `e` for the other requests a shared statement answered (a group commit, a batch
/// of lookups): of the same class, the database unavailable (`503`) or not (`500`), with the
/// same message.
pub(crate) fn same_class_error(e: &sqlx::Error) -> sqlx::Error {
    if database_unavailable(e) {
        sqlx::Error::Io(std::io::Error::other(e.to_string()))
    } else {
        sqlx::Error::Protocol(e.to_string())
    }
}

/// The answer of a request that a leader took into its shared statement (a group commit, a
/// batch of lookups), waited for at most [`WRITE_TURN_WAIT`]; then answered like a busy
/// database (for a write, what the leader commits later is what a lost response would have
/// carried).
pub(crate) async fn leader_answer<A>(
    answer: tokio::sync::oneshot::Receiver<Result<A, StoreError>>,
) -> Result<A, StoreError> {
    match tokio::time::timeout(WRITE_TURN_WAIT, answer).await {
        Ok(answered) => answered.unwrap_or(Err(StoreError::Unavailable(Unavailable::LeaderGone))),
        Err(_) => Err(StoreError::Unavailable(Unavailable::NoAnswer)),
    }
}

/// The primary result code (the low byte of the extended code) of a `SQLite` error.
fn sqlite_code(db: &dyn sqlx::error::DatabaseError) -> Option<i32> {
    db.try_downcast_ref::<sqlx::sqlite::SqliteError>()
        .and_then(sqlx::error::DatabaseError::code)
        .and_then(|code| code.parse::<i32>().ok())
        .map(|code| code & 0xff)
}

/// `SQLite` codes after which the connections open at the time are replaced rather than
/// reused: `SQLITE_READONLY` (8), `SQLITE_IOERR` (10), `SQLITE_CANTOPEN` (14). A connection
/// opened while its file or file system was read-only stays read-only for its whole life,
/// even once the file is writable again; a full disk, by contrast, heals by itself.
const SQLITE_REOPEN: [i32; 3] = [8, 10, 14];

/// When a `SQLite` file was last found read-only or unopenable, in this process.
static CANNOT_WRITE_SEEN: std::sync::Mutex<Option<std::time::Instant>> =
    std::sync::Mutex::new(None);

/// Notes that a `SQLite` file was just found read-only or unopenable: every connection opened
/// before now is closed instead of reused when it next comes back to its pool
/// ([`release_outside_transaction`]), so the server writes again, without restart, once the
/// file is writable.
fn note_cannot_write() {
    if let Ok(mut seen) = CANNOT_WRITE_SEEN.lock() {
        *seen = Some(std::time::Instant::now());
    }
}

/// How long after its file was last found read-only or unopenable (`SQLITE_READONLY`,
/// `SQLITE_IOERR`, `SQLITE_CANTOPEN`) every read goes through the pool, with no connection of
/// [`in_place`] left open. `SQLite` shares one shared-memory index per file among a process's
/// connections, read-only if the first of them opened it on a read-only file system, for as
/// long as any of them stays open; the pool recovers by replacing its connections one by one
/// ([`note_cannot_write`]), which works only if no connection here holds that index.
pub const UNWRITABLE_PAUSE: Duration = Duration::from_secs(5);

/// When the last [`note_cannot_write`] was, if ever.
fn last_cannot_write() -> Option<std::time::Instant> {
    CANNOT_WRITE_SEEN.lock().ok().and_then(|seen| *seen)
}

/// Whether the last [`note_cannot_write`] was less than `within` ago.
pub(super) fn cannot_write_within(within: Duration) -> bool {
    CANNOT_WRITE_SEEN
        .lock()
        .ok()
        .and_then(|seen| *seen)
        .is_some_and(|at| at.elapsed() < within)
}

/// Whether a connection of age `age` was opened before the last [`note_cannot_write`].
pub(super) fn opened_before_cannot_write(age: Duration) -> bool {
    CANNOT_WRITE_SEEN
        .lock()
        .ok()
        .and_then(|seen| *seen)
        .is_some_and(|at| age >= at.elapsed())
}

/// `SQLite`'s primary result codes (the low byte of an extended code) of a database that cannot
/// be written or read right now rather than a wrong request: `SQLITE_BUSY` (5) and
/// `SQLITE_LOCKED` (6) after the busy timeout, `SQLITE_READONLY` (8), `SQLITE_IOERR` (10),
/// `SQLITE_FULL` (13), `SQLITE_CANTOPEN` (14).
const SQLITE_UNAVAILABLE: [i32; 6] = [5, 6, 8, 10, 13, 14];

/// Rows deleted per pruning transaction ([`Store::housekeeping`] and the upkeep task's rounds).
pub const PRUNE_BATCH: i64 = 1000;

/// Which database engine a `DATABASE_URL` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `sqlite://path` (file, WAL, foreign keys on).
    Sqlite,
    /// `postgres://…` or `postgresql://…`.
    Postgres,
}

impl Backend {
    /// Detects the backend from the URL scheme; the error says which schemes are accepted.
    pub fn from_url(url: &str) -> Result<Backend, String> {
        let scheme = url.split(':').next().unwrap_or("");
        match scheme {
            "sqlite" => Ok(Backend::Sqlite),
            "postgres" | "postgresql" => Ok(Backend::Postgres),
            other => Err(format!(
                "unsupported scheme \"{other}\" (use sqlite://FILE or postgres://…)"
            )),
        }
    }
}

/// Whether a connection coming back to the pool may be reused: not while sqlx still counts a
/// transaction open on it. That happens when `SQLite` rolled a transaction back by itself (a
/// full disk or an I/O error at `COMMIT`): sqlx's own `ROLLBACK` then fails, its count stays
/// at one, and every later `BEGIN` on the connection would fail with "attempted to call
/// `begin_with` at non-zero transaction depth" until the process stopped. Such a connection is
/// closed (which rolls back whatever is still open) and the pool opens a fresh one.
///
/// A dropped transaction queues its `ROLLBACK` without waiting for it; a ping waits for the
/// queue before the count is read again.
///
/// A connection opened before its `SQLite` file was last found read-only is closed too
/// ([`note_cannot_write`]).
async fn release_outside_transaction(
    conn: &mut sqlx::AnyConnection,
    meta: sqlx::pool::PoolConnectionMetadata,
) -> Result<bool, sqlx::Error> {
    use sqlx::Connection;
    if opened_before_cannot_write(meta.age) {
        return Ok(false);
    }
    if !conn.is_in_transaction() {
        return Ok(true);
    }
    conn.ping().await?;
    if conn.is_in_transaction() {
        tracing::warn!("closing a database connection left inside a transaction");
        return Ok(false);
    }
    Ok(true)
}

/// Dialect-specific SQL for the few statements the engines spell differently.
pub trait Dialect: Send + Sync + 'static {
    /// Full-text note search: binds `$1` project id, `$2` query text, `$3` limit; returns
    /// `id, title, snippet, rank` ordered by relevance.
    fn search_notes_sql(&self) -> &'static str;

    /// Reads a consent for token issuance under a lock held until the transaction ends (see
    /// `oauth::lock_live_consent`): binds `$1` consent id; returns `scope, revoked_at,
    /// account_status, expires_at`.
    fn lock_consent_sql(&self) -> &'static str;
}

/// The read of [`Dialect::lock_consent_sql`], without the lock clause (a literal, so that each
/// dialect's variant is `&'static str`).
macro_rules! consent_read {
    () => {
        "SELECT scope, revoked_at, \
         (SELECT status FROM accounts WHERE accounts.id = consents.account_id) AS account_status, \
         expires_at FROM consents WHERE id = $1"
    };
}
pub(crate) use consent_read;

/// Longest wait for a write turn on `SQLite` ([`Store::begin_write`]): the busy timeout the
/// connections are given (`PRAGMA busy_timeout`), so that a write waits no longer in the queue
/// than it did in `SQLite`'s busy handler.
pub const WRITE_TURN_WAIT: Duration = Duration::from_secs(10);

/// Takes one of `turns` (this process's write turn on `SQLite`), waiting at most
/// [`WRITE_TURN_WAIT`]: [`Unavailable::NoTurn`] beyond that, [`Unavailable::Closed`] once the
/// turns are closed.
async fn take_turn(
    turns: std::sync::Arc<tokio::sync::Semaphore>,
) -> Result<tokio::sync::OwnedSemaphorePermit, StoreError> {
    tokio::time::timeout(WRITE_TURN_WAIT, turns.acquire_owned())
        .await
        .map_err(|_| StoreError::Unavailable(Unavailable::NoTurn))?
        .map_err(|_| StoreError::Unavailable(Unavailable::Closed))
}

/// This process's write turn on `SQLite`, held until dropped ([`Store::write_turn`]): what
/// [`Store::write_in_place`] requires, so that no write runs in place outside the turn.
pub(crate) struct WriteTurn(
    #[allow(dead_code, reason = "held, not read")] tokio::sync::OwnedSemaphorePermit,
);

/// A write transaction begun by [`Store::begin_write`]. Statements run on it as on its
/// connection (`&mut *tx`); [`WriteTx::commit`] or [`WriteTx::rollback`] end it, and dropping
/// it rolls it back. On `SQLite` it holds this process's write turn until it ends.
pub(crate) struct WriteTx {
    tx: sqlx::Transaction<'static, sqlx::Any>,
    /// Released when the transaction ends: after [`WriteTx::commit`] or [`WriteTx::rollback`]
    /// returns, or, when it is dropped, once its rollback has been handed to the connection
    /// (which runs it before anything else; the next writer may meet the lock for that moment).
    _turn: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl WriteTx {
    /// Commits the transaction, then gives the turn to the next writer.
    pub(crate) async fn commit(self) -> Result<(), sqlx::Error> {
        let WriteTx { tx, _turn } = self;
        tx.commit().await
    }

    /// Rolls the transaction back, then gives the turn to the next writer.
    pub(crate) async fn rollback(self) -> Result<(), sqlx::Error> {
        let WriteTx { tx, _turn } = self;
        tx.rollback().await
    }
}

impl std::ops::Deref for WriteTx {
    type Target = sqlx::AnyConnection;

    fn deref(&self) -> &sqlx::AnyConnection {
        &self.tx
    }
}

impl std::ops::DerefMut for WriteTx {
    fn deref_mut(&mut self) -> &mut sqlx::AnyConnection {
        &mut self.tx
    }
}

/// The storage handle shared by every part of the server. Cheap to clone: one shared
/// reference to its [`StoreParts`] (every request clones it several times, so one counter
/// rather than one per part).
#[derive(Clone)]
pub struct Store(std::sync::Arc<StoreParts>);

impl std::ops::Deref for Store {
    type Target = StoreParts;

    fn deref(&self) -> &StoreParts {
        &self.0
    }
}

/// What a [`Store`] holds (its fields are the storage layer's own).
#[derive(Clone)]
pub struct StoreParts {
    pool: AnyPool,
    backend: Backend,
    sessions: SessionBackend,
    audit_queue: std::sync::Arc<audit::AuditQueue>,
    /// DPoP proofs seen by this instance and still to be recorded ([`dpop`]).
    dpop_proofs: std::sync::Arc<dpop::ProofLog>,
    /// Permits for full-text searches, fewer than the pool's connections, so that slow
    /// searches can never hold every connection ([`Store::search_notes`]).
    searches: std::sync::Arc<tokio::sync::Semaphore>,
    /// The validation cache of credential lookups ([`auth_cache`]).
    auth_cache: std::sync::Arc<auth_cache::AuthCache>,
    /// One turn: on `SQLite`, the write transactions of this process take it in order
    /// ([`Store::begin_write`]).
    write_turns: std::sync::Arc<tokio::sync::Semaphore>,
    /// The turns of refresh-rotation group commits ([`rotations`]): on `SQLite` the write
    /// turn itself, on `PostgreSQL` [`rotations::POSTGRES_GROUPS`] of their own.
    rotation_turns: std::sync::Arc<tokio::sync::Semaphore>,
    /// Refresh rotations waiting for a group commit (`SQLite`; [`rotations`]).
    rotations: std::sync::Arc<rotations::RotationQueue>,
    /// How often each path answered each hot lookup ([`hot`]).
    hot_counts: std::sync::Arc<hot::HotCounts>,
    /// `PostgreSQL`: refresh-token lookups batched ([`read_batches`], [`Store::refresh_state`]).
    refresh_reads: std::sync::Arc<read_batches::ReadBatches<oauth::RefreshState>>,
    /// `PostgreSQL`: project listings batched ([`read_batches`], [`Store::projects_of_account`]).
    project_reads: std::sync::Arc<read_batches::ReadBatches<projects::ProjectMembership>>,
    /// Whether [`Store::start_auth_listener`] ran.
    auth_listener_started: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// The database URL (`PostgreSQL`: the invalidation listener connects with it).
    url: std::sync::Arc<str>,
    /// `SQLite` (a file): the connections that run the hot lookups in place ([`in_place`]).
    in_place: Option<std::sync::Arc<in_place::InPlace>>,
    /// The pool's settings, for the pools of serving lanes ([`Store::for_lane`]).
    lane_options: AnyPoolOptions,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("backend", &self.backend)
            .finish()
    }
}

impl Store {
    /// Connects to `url` (see [`Backend::from_url`]); `SQLite` files are created when missing.
    ///
    /// Errors: [`StoreError::Database`] when the database cannot be reached.
    pub async fn connect(url: &str) -> Result<Store, StoreError> {
        install_default_drivers();
        let backend = Backend::from_url(url)
            .map_err(|m| StoreError::Database(sqlx::Error::Configuration(m.into())))?;
        let url = match backend {
            Backend::Sqlite if !url.contains("mode=") => {
                let sep = if url.contains('?') { '&' } else { '?' };
                format!("{url}{sep}mode=rwc")
            }
            _ => url.to_string(),
        };
        let (min, max) = pool_size(backend, cpus());
        // No ping on acquire: with sqlx's default every statement costs two more round trips
        // (to SQLite's worker thread or to the PostgreSQL server). The price: a connection
        // that broke while idle (a PostgreSQL restart) fails the next statement given to it,
        // which is answered as a database error (500/503, logged); idle connections above the
        // minimum are closed after IDLE_TIMEOUT.
        let options = AnyPoolOptions::new()
            .min_connections(min)
            .max_connections(max)
            .test_before_acquire(false)
            .idle_timeout(IDLE_TIMEOUT)
            .acquire_timeout(Duration::from_secs(5))
            .after_release(|conn, meta| Box::pin(release_outside_transaction(conn, meta)));
        let options = if backend == Backend::Sqlite {
            options.after_connect(|conn, _meta| {
                Box::pin(async move {
                    // The busy timeout first, so that the statements after it (and the
                    // journal-mode switch, which takes a lock) wait for a busy database
                    // instead of failing at once.
                    conn.execute("PRAGMA busy_timeout = 10000").await?;
                    conn.execute("PRAGMA journal_mode = WAL").await?;
                    conn.execute("PRAGMA foreign_keys = ON").await?;
                    conn.execute("PRAGMA synchronous = NORMAL").await?;
                    Ok(())
                })
            })
        } else {
            options
        };
        let lane_options = options.clone();
        let pool = options.connect(&url).await?;
        // One pool for reads and writes on both engines: a separate one-connection writer pool
        // on SQLite failed the read-only drill (docs/benchmarks.md).
        let sessions = SessionBackend::connect(backend, &url).await?;
        let write_turns = std::sync::Arc::new(tokio::sync::Semaphore::new(1));
        let store = Store(std::sync::Arc::new(StoreParts {
            pool,
            backend,
            sessions,
            audit_queue: Default::default(),
            dpop_proofs: Default::default(),
            searches: std::sync::Arc::new(tokio::sync::Semaphore::new(search_permits(max))),
            auth_cache: std::sync::Arc::new(auth_cache::AuthCache::new(backend)),
            write_turns: std::sync::Arc::clone(&write_turns),
            rotation_turns: match backend {
                Backend::Sqlite => write_turns,
                Backend::Postgres => {
                    std::sync::Arc::new(tokio::sync::Semaphore::new(rotations::POSTGRES_GROUPS))
                }
            },
            rotations: Default::default(),
            hot_counts: Default::default(),
            refresh_reads: std::sync::Arc::new(read_batches::ReadBatches::new(
                oauth::REFRESH_TOKEN.batch_sql(),
            )),
            project_reads: std::sync::Arc::new(read_batches::ReadBatches::new(
                projects::PROJECTS_OF_ACCOUNT.batch_sql(),
            )),
            auth_listener_started: Default::default(),
            in_place: match backend {
                Backend::Sqlite => in_place::InPlace::for_url(&url).map(std::sync::Arc::new),
                Backend::Postgres => None,
            },
            url: url.as_str().into(),
            lane_options,
        }));
        if let Some(in_place) = &store.in_place {
            writable_again::watch(
                std::sync::Arc::downgrade(&store.0),
                in_place.path().to_path_buf(),
            );
        }
        Ok(store)
    }

    /// Applies the migrations of this backend's folder and the session table's schema.
    /// Migrations applied by a newer release and unknown to this one are left alone (not an
    /// error), so an instance of the previous release can start during a rolling upgrade.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let mut migrator = match self.backend {
            Backend::Sqlite => sqlx::migrate!("migrations/sqlite"),
            Backend::Postgres => sqlx::migrate!("migrations/postgres"),
        };
        // A database a newer release already migrated (a rolling upgrade on `PostgreSQL`,
        // docs/reliability.md "Upgrades") is served as it is: the migrations follow the
        // expand/contract rule, so what this release reads is still there.
        migrator.set_ignore_missing(true);
        migrator.run(&self.pool).await?;
        self.sessions.migrate().await?;
        Ok(())
    }

    /// Begins a transaction that writes. On `SQLite` it is `BEGIN IMMEDIATE`: the write lock is
    /// taken at the start (waiting up to the busy timeout), so a transaction that reads before
    /// it writes cannot fail at once with `SQLITE_BUSY` because another connection committed
    /// in between (a deferred transaction cannot wait for that case). On `PostgreSQL`, `BEGIN`.
    ///
    /// The beginning runs to its end in a task of its own, even when the caller is dropped
    /// (its request cancelled by a client that went away, or by a timeout). sqlx hands a
    /// transaction back only after `BEGIN` ran, and a beginning dropped in between left its
    /// connection in the pool inside the transaction (on `SQLite`, holding the write lock:
    /// every later write failed `database is locked` or `attempted to call begin_with at
    /// non-zero transaction depth`). Here the begun transaction is always handed to someone:
    /// the caller, or, when the caller is gone, the task, which drops it, and a dropped
    /// [`sqlx::Transaction`] rolls back before its connection is used again. The pool's
    /// release check ([`release_outside_transaction`]) catches any other way back.
    ///
    /// On `SQLite` the write transactions of this process also take turns ([`WriteTx`]): one at
    /// a time, in the order they asked, so that they queue in memory instead of in `SQLite`'s
    /// busy handler, which sleeps in growing steps (up to 100 ms) between tries and so let a
    /// writer wait far longer than the writes ahead of it took.
    ///
    /// Errors: [`Unavailable::NoTurn`] when no turn came within [`WRITE_TURN_WAIT`]
    /// (answered 503, like a busy database); otherwise what `BEGIN` returned.
    pub(crate) async fn begin_write(&self) -> Result<WriteTx, StoreError> {
        let pool = self.pool();
        let backend = self.backend;
        let turns = std::sync::Arc::clone(&self.write_turns);
        let begin = tokio::spawn(async move {
            match backend {
                Backend::Sqlite => {
                    let turn = take_turn(turns).await?;
                    let tx = pool.begin_with("BEGIN IMMEDIATE").await?;
                    Ok(WriteTx {
                        tx,
                        _turn: Some(turn),
                    })
                }
                Backend::Postgres => Ok(WriteTx {
                    tx: pool.begin().await?,
                    _turn: None,
                }),
            }
        });
        match begin.await {
            Ok(begun) => begun,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Only when the runtime shuts down.
            Err(_) => Err(StoreError::Unavailable(Unavailable::Closed)),
        }
    }

    /// The connection pool (both engines, `$n` placeholders): a serving lane's own for a
    /// lane's store ([`Store::for_lane`]), otherwise the shared one.
    pub(crate) fn pool(&self) -> AnyPool {
        self.pool.clone()
    }

    /// Where a write outside a transaction runs (the pool of [`Store::pool`]). Not called
    /// while the same task holds a [`Store::begin_write`] transaction.
    pub(crate) fn writer(&self) -> AnyPool {
        self.pool()
    }

    /// This store for a serving lane ([`crate::lanes`]): on `PostgreSQL` with a pool of its
    /// own, of `per_lane` connections at most, opened as they are needed (none kept when idle
    /// past [`IDLE_TIMEOUT`]), so that each connection's socket is driven by the runtime of the
    /// lane that uses it; everything else (the validation cache, the batches, the write turns,
    /// the counts) shared with this store. Call it on the lane's thread, inside its runtime.
    /// On `SQLite` the lane uses this store itself (its connections run on threads of their
    /// own), as it does when a pool cannot be made (logged).
    pub fn for_lane(&self, per_lane: u32) -> LaneStore {
        if self.backend == Backend::Postgres {
            let options = self
                .lane_options
                .clone()
                .min_connections(0)
                .max_connections(per_lane.max(1));
            match options.connect_lazy(&self.url) {
                Ok(pool) => {
                    let mut parts = StoreParts::clone(&self.0);
                    parts.pool = pool;
                    parts.searches = std::sync::Arc::new(tokio::sync::Semaphore::new(
                        search_permits(per_lane.max(1)),
                    ));
                    return LaneStore {
                        store: Store(std::sync::Arc::new(parts)),
                        own_pool: true,
                    };
                }
                Err(e) => tracing::warn!(error = %e, "no pool of its own for a serving lane"),
            }
        }
        LaneStore {
            store: self.clone(),
            own_pool: false,
        }
    }

    /// The permits of full-text searches ([`search_permits`]) of this store's pool.
    pub(crate) fn searches(&self) -> std::sync::Arc<tokio::sync::Semaphore> {
        std::sync::Arc::clone(&self.searches)
    }

    /// Runs `read` in place on `SQLite` ([`in_place`]): `Some` with its answer, `None` on
    /// `PostgreSQL`, for an in-memory database, or when it could not be answered in place, in
    /// which case the caller asks the pool.
    pub(crate) fn read_in_place<T>(
        &self,
        read: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<T>,
    ) -> Option<T> {
        self.in_place.as_ref()?.read(read)
    }

    /// Runs `write` over `carried` in one transaction on the `SQLite` write connection
    /// ([`in_place::InPlace::write`]), on a blocking thread: `carried` back, with `Some` of the
    /// answer once committed, or `None` when nothing was committed there (on `PostgreSQL`, for
    /// an in-memory database, or after a failure rolled it back), in which case the caller
    /// writes through the pool. The caller holds the write turn ([`Store::begin_write`]'s)
    /// for the whole call. `None` without `carried` only when the runtime shuts down before
    /// the blocking thread starts.
    pub(crate) async fn write_in_place<C, T>(
        &self,
        _turn: &WriteTurn,
        carried: C,
        write: impl FnOnce(&rusqlite::Connection, &C) -> rusqlite::Result<T> + Send + 'static,
    ) -> Option<(C, Option<T>)>
    where
        C: Send + 'static,
        T: Send + 'static,
    {
        let Some(in_place) = self.in_place.clone() else {
            return Some((carried, None));
        };
        let blocking = tokio::task::spawn_blocking(move || {
            let answer = in_place.write(|conn| write(conn, &carried));
            (carried, answer)
        });
        match blocking.await {
            Ok(done) => Some(done),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => None,
        }
    }

    /// This process's write turn on `SQLite` (the one [`Store::begin_write`] takes).
    ///
    /// Errors: [`Unavailable::NoTurn`] when no turn came within [`WRITE_TURN_WAIT`].
    pub(crate) async fn write_turn(&self) -> Result<WriteTurn, StoreError> {
        Ok(WriteTurn(
            take_turn(std::sync::Arc::clone(&self.write_turns)).await?,
        ))
    }

    /// `permit` as this process's write turn, when it is one of the write turns' (on `SQLite`
    /// the rotations' turns are); otherwise `permit` back.
    pub(crate) fn as_write_turn(
        &self,
        permit: tokio::sync::OwnedSemaphorePermit,
    ) -> Result<WriteTurn, tokio::sync::OwnedSemaphorePermit> {
        if std::sync::Arc::ptr_eq(permit.semaphore(), &self.write_turns) {
            Ok(WriteTurn(permit))
        } else {
            Err(permit)
        }
    }

    /// How many lookups ran in place and how many were asked of the pool after failing there
    /// (`None`: this store reads only through the pool).
    pub fn in_place_stats(&self) -> Option<in_place::InPlaceStats> {
        self.in_place.as_ref().map(|reads| reads.stats())
    }

    /// This store with every read through the pool (a comparison of the two ways of reading).
    #[must_use]
    pub fn without_in_place_reads(self) -> Store {
        let mut parts = StoreParts::clone(&self.0);
        parts.in_place = None;
        Store(std::sync::Arc::new(parts))
    }

    /// Which engine this store talks to.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The SQL spellings for this engine.
    pub fn dialect(&self) -> &'static dyn Dialect {
        match self.backend {
            Backend::Sqlite => &sqlite::Sqlite,
            Backend::Postgres => &postgres::Postgres,
        }
    }

    /// The tower-sessions store, kept in this same database.
    pub fn session_store(&self) -> SessionBackend {
        self.sessions.clone()
    }

    /// Whether the database answers a trivial query (`/readyz`).
    pub async fn ping(&self) -> bool {
        sqlx::query("SELECT 1").execute(&self.pool()).await.is_ok()
    }

    /// Closes every connection.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// How long an idle pooled connection is kept before it is closed (above the pool's minimum).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// A serving lane's store ([`Store::for_lane`]).
#[derive(Debug)]
pub struct LaneStore {
    store: Store,
    own_pool: bool,
}

impl LaneStore {
    /// The store the lane's requests use.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Whether the lane has a pool of its own (`PostgreSQL`) rather than the shared one.
    pub fn has_own_pool(&self) -> bool {
        self.own_pool
    }

    /// Ends the lane: its own pool is closed, waiting at most `within` for its connections in
    /// use to come back (a connection still out after that is closed when it is dropped); the
    /// shared pool is left open.
    pub async fn close(self, within: Duration) {
        if self.own_pool {
            let _ = tokio::time::timeout(within, self.store.pool.close()).await;
        }
    }
}

/// The pool's `(min, max)` connections for `cpus` cores. `SQLite` runs one statement at a time per
/// connection on a worker thread each and one writer at a time: twice the cores (4 to 16) keep
/// reads parallel without a crowd of threads waiting on the write lock. `PostgreSQL` does its
/// work in its own processes: four per core (8 to 32). Both keep 2 connections open.
pub fn pool_size(backend: Backend, cpus: u32) -> (u32, u32) {
    match backend {
        Backend::Sqlite => (2, cpus.saturating_mul(2).clamp(4, 16)),
        Backend::Postgres => (2, cpus.saturating_mul(4).clamp(8, 32)),
    }
}

/// The most connections of each serving lane's pool on `PostgreSQL` ([`Store::for_lane`])
/// when a server of `max` pooled connections ([`pool_size`]) runs `lanes` lanes: an equal
/// share of `max`, rounded up, and at least 4 (a lane's requests wait on the database, not on
/// each other).
pub fn lane_pool_size(max: u32, lanes: usize) -> u32 {
    let lanes = u32::try_from(lanes.max(1)).unwrap_or(u32::MAX);
    max.div_ceil(lanes).max(4)
}

impl Store {
    /// The most connections of this store's shared pool ([`pool_size`]).
    pub fn max_connections(&self) -> u32 {
        self.pool.options().get_max_connections()
    }
}

/// How many full-text searches may run at once with a pool of `max` connections: half of
/// them (at least one), so the other half stays free for sign-in, tokens and everything else.
pub fn search_permits(max: u32) -> usize {
    usize::try_from((max / 2).max(1)).unwrap_or(1)
}

/// Cores this process may use (1 when unknown).
fn cpus() -> u32 {
    std::thread::available_parallelism()
        .map(|n| u32::try_from(n.get()).unwrap_or(u32::MAX))
        .unwrap_or(1)
}

/// How long expired credentials are kept before housekeeping deletes them, in seconds.
pub const EXPIRED_RETENTION_SECS: i64 = 24 * 3600;
/// How long the tokens of a revoked family are kept (for reuse reports), in seconds.
pub const REVOKED_RETENTION_SECS: i64 = 30 * 24 * 3600;

impl Store {
    /// Deletes the sessions past their expiry (the session store's own statement); a failure is
    /// logged.
    pub async fn delete_expired_sessions(&self) {
        if let Err(e) = self.sessions.delete_expired().await {
            tracing::warn!(error = %e, "could not delete expired sessions");
        }
    }

    /// Deletes what can no longer be used, at `now`: one full pass of every
    /// [`audit_query::CREDENTIAL_RETENTIONS`] and of the ended sessions
    /// ([`Store::sessions_retention`]) in batches (what the upkeep task spreads over its
    /// rounds, [`crate::upkeep`]). Rotated refresh tokens within the replay window are kept:
    /// presenting one must still be recognised as reuse. Returns how many rows were deleted.
    pub async fn housekeeping(&self, now: i64) -> Result<u64, StoreError> {
        let mut deleted = 0;
        let sessions = (self.sessions_retention(), 0);
        for (retention, age) in audit_query::CREDENTIAL_RETENTIONS
            .iter()
            .chain(std::iter::once(&sessions))
        {
            loop {
                match self.prune_batch(retention, now - age, PRUNE_BATCH).await? {
                    Some(n) => {
                        deleted += n;
                        if (n as i64) < PRUNE_BATCH {
                            break;
                        }
                    }
                    // Another instance is pruning now.
                    None => return Ok(deleted),
                }
            }
        }
        Ok(deleted)
    }
}

/// Current time in Unix seconds; read once per request and passed down.
pub fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// A new random identifier (UUID v4, hyphenated text).
pub fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A text column holding a JSON array of strings (`notes.tags`, `api_keys.allowed_ips`,
/// `oauth_clients.redirect_uris`), read into a `Vec<String>` by
/// `#[sqlx(try_from = "JsonStrings")]`; NULL reads as empty.
#[derive(Debug, Clone, sqlx::Type)]
#[sqlx(transparent)]
pub struct JsonStrings(Option<String>);

impl TryFrom<JsonStrings> for Vec<String> {
    type Error = serde_json::Error;

    fn try_from(value: JsonStrings) -> Result<Self, Self::Error> {
        value
            .0
            .map_or_else(|| Ok(Vec::new()), |json| serde_json::from_str(&json))
    }
}

/// A text column holding a JSON document (`oauth_clients.metadata`), read into a
/// [`serde_json::Value`] by `#[sqlx(try_from = "JsonText")]`.
#[derive(Debug, Clone, sqlx::Type)]
#[sqlx(transparent)]
pub struct JsonText(String);

impl TryFrom<JsonText> for serde_json::Value {
    type Error = serde_json::Error;

    fn try_from(value: JsonText) -> Result<Self, Self::Error> {
        serde_json::from_str(&value.0)
    }
}

/// A column holding a SHA-256 in hex (`code_hash`, `client_secret_hash`), read into a
/// [`TokenHash`] (or `Option<TokenHash>` for a nullable column) by
/// `#[sqlx(try_from = "StoredHash")]`.
#[derive(Debug, Clone, sqlx::Type)]
#[sqlx(transparent)]
pub struct StoredHash(Option<String>);

impl From<StoredHash> for Option<TokenHash> {
    fn from(value: StoredHash) -> Self {
        value.0.map(TokenHash::from_hex)
    }
}

impl TryFrom<StoredHash> for TokenHash {
    type Error = sqlx::Error;

    fn try_from(value: StoredHash) -> Result<Self, Self::Error> {
        value
            .0
            .map(TokenHash::from_hex)
            .ok_or_else(|| sqlx::Error::Decode("unexpected NULL hash".into()))
    }
}

/// A yes/no column read alike from both engines by `#[sqlx(try_from = "Flag")]`: a boolean
/// expression in a `SELECT` (`x IS NOT NULL AS y`) is `BOOLEAN` on `PostgreSQL` and an
/// `INTEGER` 0/1 on `SQLite`, and stored flags (`can_introspect`) are integers on both; any
/// integer other than 0 reads as `true`.
#[derive(Debug, Clone, Copy)]
pub struct Flag(bool);

impl sqlx::Type<sqlx::Any> for Flag {
    fn type_info() -> sqlx::any::AnyTypeInfo {
        <bool as sqlx::Type<sqlx::Any>>::type_info()
    }

    fn compatible(ty: &sqlx::any::AnyTypeInfo) -> bool {
        ty.kind() == sqlx::any::AnyTypeInfoKind::Bool || ty.kind().is_integer()
    }
}

impl<'r> sqlx::Decode<'r, sqlx::Any> for Flag {
    fn decode(value: sqlx::any::AnyValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
        use sqlx::ValueRef;
        if value.type_info().kind() == sqlx::any::AnyTypeInfoKind::Bool {
            Ok(Flag(<bool as sqlx::Decode<'r, sqlx::Any>>::decode(value)?))
        } else {
            Ok(Flag(
                <i64 as sqlx::Decode<'r, sqlx::Any>>::decode(value)? != 0,
            ))
        }
    }
}

impl From<Flag> for bool {
    fn from(value: Flag) -> Self {
        value.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The classification behind every route's `503` (issue 39, item 4): a connection ended by
    /// the database (SQLSTATE `57P01` on a failover or `pg_terminate_backend`, `57P03` while it
    /// starts, class `08`), a broken pipe or a refused connection while it restarts, and a full
    /// pool are the database out of reach; a broken rule of the schema or a wrong statement is
    /// not.
    #[test]
    fn connection_class_errors_are_unavailable_and_the_rest_are_not() {
        for code in [
            "57P01", "57P02", "57P03", "57P05", "08006", "08001", "08P01", "53300", "53100",
            "25006",
        ] {
            assert!(postgres_unavailable(code), "{code}");
        }
        for code in [
            "23505", "23503", "42P01", "42601", "22P02", "40001", "57014", "57P04",
        ] {
            assert!(!postgres_unavailable(code), "{code}");
        }
        use std::io::{Error, ErrorKind};
        for kind in [
            ErrorKind::BrokenPipe,
            ErrorKind::ConnectionRefused,
            ErrorKind::ConnectionReset,
            ErrorKind::UnexpectedEof,
        ] {
            let e = StoreError::from(sqlx::Error::Io(Error::from(kind)));
            assert!(e.is_unavailable(), "{kind:?}");
        }
        for e in [
            sqlx::Error::PoolTimedOut,
            sqlx::Error::PoolClosed,
            sqlx::Error::WorkerCrashed,
        ] {
            assert!(StoreError::from(e).is_unavailable());
        }
        for e in [
            sqlx::Error::RowNotFound,
            sqlx::Error::Protocol("unexpected message".into()),
        ] {
            assert!(!StoreError::from(e).is_unavailable());
        }
        assert!(!StoreError::Conflict("x".into()).is_unavailable());
        // The store's own queues: every reason is the database busy or going away (503).
        for reason in [
            Unavailable::NoTurn,
            Unavailable::NoAnswer,
            Unavailable::LeaderGone,
            Unavailable::Closed,
        ] {
            assert!(StoreError::Unavailable(reason).is_unavailable(), "{reason}");
        }
    }

    /// A write transaction that reads before it writes, while another connection commits a
    /// write in between: on `SQLite` a deferred transaction fails at its first write with
    /// `SQLITE_BUSY` (its snapshot is stale and it cannot wait); `begin_write` takes the write
    /// lock first, so the other writer waits and both changes land.
    #[tokio::test]
    async fn a_write_transaction_that_reads_first_survives_a_concurrent_writer() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("t.db").display());
        let store = Store::connect(&url).await.unwrap();
        sqlx::query("CREATE TABLE counter (n INTEGER NOT NULL)")
            .execute(&store.pool())
            .await
            .unwrap();
        sqlx::query("INSERT INTO counter (n) VALUES (0)")
            .execute(&store.pool())
            .await
            .unwrap();
        let mut tx = store.begin_write().await.unwrap();
        let n: i64 = sqlx::query_scalar("SELECT n FROM counter")
            .fetch_one(&mut *tx)
            .await
            .unwrap();
        assert_eq!(n, 0);
        let other = {
            let store = store.clone();
            tokio::spawn(async move {
                sqlx::query("UPDATE counter SET n = n + 1")
                    .execute(&store.pool())
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        sqlx::query("UPDATE counter SET n = n + 10")
            .execute(&mut *tx)
            .await
            .expect("the transaction's write is not refused as busy");
        tx.commit().await.unwrap();
        other
            .await
            .unwrap()
            .expect("the other writer waited, then wrote");
        let n: i64 = sqlx::query_scalar("SELECT n FROM counter")
            .fetch_one(&store.pool())
            .await
            .unwrap();
        assert_eq!(n, 11);
    }

    /// Whether another connection finds `SQLite`'s write lock taken (it does not wait).
    async fn write_lock_is_held(url: &str) -> bool {
        use sqlx::Connection;
        let mut other = sqlx::AnyConnection::connect(url).await.unwrap();
        other.execute("PRAGMA busy_timeout = 0").await.unwrap();
        let held = match other.execute("BEGIN IMMEDIATE").await {
            Ok(_) => {
                other.execute("ROLLBACK").await.unwrap();
                false
            }
            Err(_) => true,
        };
        other.close().await.unwrap();
        held
    }

    /// Every connection the pool can hold, taken at once: each begins a write transaction,
    /// writes and commits. A connection left inside a transaction fails here, either itself
    /// (`attempted to call begin_with at non-zero transaction depth`) or by holding `SQLite`'s
    /// write lock against the others ("database is locked").
    async fn write_on_every_pooled_connection(store: &Store) {
        use sqlx::Connection;
        let max = store.pool().options().get_max_connections();
        let mut conns = Vec::new();
        for _ in 0..max {
            conns.push(store.pool().acquire().await.unwrap());
        }
        for (i, conn) in conns.iter_mut().enumerate() {
            let statement = match store.backend() {
                Backend::Sqlite => "BEGIN IMMEDIATE",
                Backend::Postgres => "BEGIN",
            };
            let mut tx = tokio::time::timeout(
                Duration::from_secs(20),
                Connection::begin_with(&mut **conn, statement),
            )
            .await
            .unwrap_or_else(|_| panic!("connection {i}: begin waited past 20 s"))
            .unwrap_or_else(|e| panic!("connection {i} of {max}: {e}"));
            sqlx::query("INSERT INTO counter (n) VALUES (1)")
                .execute(&mut *tx)
                .await
                .unwrap_or_else(|e| panic!("connection {i} of {max}: {e}"));
            tx.commit().await.unwrap();
        }
    }

    /// `SQLite` ends a transaction by itself on some errors (a full disk or an I/O error at
    /// `COMMIT`); here a raw `ROLLBACK` stands in for that. sqlx's `COMMIT` and `ROLLBACK`
    /// then fail, and its count of open transactions on the connection stays at one: reused,
    /// the connection would refuse every later `BEGIN` ("attempted to call `begin_with` at
    /// non-zero transaction depth"). It must be closed instead of coming back to the pool.
    #[tokio::test]
    async fn a_connection_whose_transaction_sqlite_ended_is_not_reused() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("t.db").display());
        let store = Store::connect(&url).await.unwrap();
        sqlx::query("CREATE TABLE t (n INTEGER NOT NULL)")
            .execute(&store.pool())
            .await
            .unwrap();
        let mut tx = store.begin_write().await.unwrap();
        sqlx::query("ROLLBACK").execute(&mut *tx).await.unwrap();
        assert!(
            tx.commit().await.is_err(),
            "no transaction is open any more"
        );
        let (_, max) = pool_size(Backend::Sqlite, cpus());
        for i in 0..2 * max {
            let mut tx = store
                .begin_write()
                .await
                .unwrap_or_else(|e| panic!("transaction {i}: {e}"));
            sqlx::query("INSERT INTO t (n) VALUES ($1)")
                .bind(i64::from(i))
                .execute(&mut *tx)
                .await
                .unwrap();
            tx.commit().await.unwrap();
        }
    }

    /// Regression (docs/reliability.md, "a `SQLite` connection left inside a write
    /// transaction"): a write transaction's future dropped (its request cancelled) just after
    /// `BEGIN IMMEDIATE` took the write lock, before the transaction was handed back, must not
    /// return its connection to the pool inside the transaction.
    #[tokio::test]
    async fn a_write_transaction_dropped_while_beginning_leaves_no_connection_inside_it() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("t.db").display());
        let store = Store::connect(&url).await.unwrap();
        sqlx::query("CREATE TABLE counter (n INTEGER NOT NULL)")
            .execute(&store.pool())
            .await
            .unwrap();
        // Twenty times: poll a beginning until SQLite shows the write lock taken, then once
        // more (the transaction is begun but not yet handed back), then drop it, as a cancelled
        // request drops its handler; then write on every pooled connection. (A beginning that
        // finishes first is dropped as a transaction.)
        for _ in 0..20 {
            let mut begin = Box::pin(store.begin_write());
            for _ in 0..1000 {
                tokio::select! {
                    biased;
                    tx = &mut begin => {
                        drop(tx.unwrap());
                        break;
                    }
                    () = std::future::ready(()) => {}
                }
                if write_lock_is_held(&url).await {
                    tokio::select! {
                        biased;
                        tx = &mut begin => drop(tx.unwrap()),
                        () = std::future::ready(()) => {}
                    }
                    break;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            drop(begin);
            write_on_every_pooled_connection(&store).await;
        }
    }

    /// Write transactions cancelled at random points (mid-begin, mid-statement, mid-commit)
    /// and failing ones (a statement refused) while others write: afterwards every pooled
    /// connection writes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cancelled_and_failed_write_transactions_leave_every_connection_usable() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("t.db").display());
        let store = Store::connect(&url).await.unwrap();
        sqlx::query("CREATE TABLE counter (n INTEGER NOT NULL)")
            .execute(&store.pool())
            .await
            .unwrap();
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..400u64 {
            let store = store.clone();
            tasks.spawn(async move {
                let write = async {
                    let mut tx = store.begin_write().await?;
                    sqlx::query("INSERT INTO counter (n) VALUES (1)")
                        .execute(&mut *tx)
                        .await?;
                    if i % 7 == 0 {
                        sqlx::query("INSERT INTO no_such_table (n) VALUES (1)")
                            .execute(&mut *tx)
                            .await?;
                    }
                    tx.commit().await?;
                    Ok::<_, StoreError>(())
                };
                let _ =
                    tokio::time::timeout(Duration::from_micros(50 + (i * 97) % 3000), write).await;
            });
        }
        while tasks.join_next().await.is_some() {}
        write_on_every_pooled_connection(&store).await;
    }

    /// A write that waited out `SQLite`'s busy timeout ("database is locked", `SQLITE_BUSY`)
    /// found the database busy: answered 503 with `Retry-After`, not 500.
    #[tokio::test]
    async fn a_write_that_waited_out_the_busy_timeout_is_unavailable() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("t.db").display());
        let store = Store::connect(&url).await.unwrap();
        sqlx::query("CREATE TABLE t (n INTEGER NOT NULL)")
            .execute(&store.writer())
            .await
            .unwrap();
        let holder = store.begin_write().await.unwrap();
        let mut other = store.pool().acquire().await.unwrap();
        sqlx::query("PRAGMA busy_timeout = 0")
            .execute(&mut *other)
            .await
            .unwrap();
        let busy = sqlx::query("INSERT INTO t (n) VALUES (1)")
            .execute(&mut *other)
            .await
            .unwrap_err();
        assert!(StoreError::from(busy).is_unavailable());
        other.close().await.unwrap();
        holder.rollback().await.unwrap();
    }

    /// A `SQLite` file that refuses writes (here: `PRAGMA query_only`, which fails writes with
    /// `SQLITE_READONLY` like a read-only file or file system) is a database unavailable for
    /// now, answered 503; an ordinary SQL error is not.
    #[tokio::test]
    async fn a_read_only_sqlite_database_is_unavailable_not_a_failure() {
        let store = Store::connect("sqlite::memory:").await.unwrap();
        let mut conn = store.pool().acquire().await.unwrap();
        sqlx::query("PRAGMA query_only = ON")
            .execute(&mut *conn)
            .await
            .unwrap();
        let refused = sqlx::query("CREATE TABLE t (n INTEGER)")
            .execute(&mut *conn)
            .await
            .unwrap_err();
        assert!(StoreError::from(refused).is_unavailable());
        let wrong = sqlx::query("SELECT n FROM missing")
            .execute(&mut *conn)
            .await
            .unwrap_err();
        assert!(!StoreError::from(wrong).is_unavailable());
        conn.close().await.unwrap();
    }

    #[test]
    fn searches_never_take_the_whole_pool() {
        for max in [4, 8, 16, 32] {
            let permits = u32::try_from(search_permits(max)).unwrap();
            assert!((1..max).contains(&permits), "{max}");
        }
        assert_eq!(search_permits(1), 1);
    }

    #[test]
    fn a_lane_pool_takes_its_share_and_at_least_four() {
        assert_eq!(lane_pool_size(8, 2), 4);
        assert_eq!(lane_pool_size(8, 1), 8);
        assert_eq!(lane_pool_size(32, 16), 4);
        assert_eq!(lane_pool_size(32, 3), 11);
        assert_eq!(lane_pool_size(8, 0), 8);
    }

    #[test]
    fn pool_sizes_follow_the_cores_within_bounds() {
        assert_eq!(pool_size(Backend::Sqlite, 1), (2, 4));
        assert_eq!(pool_size(Backend::Sqlite, 2), (2, 4));
        assert_eq!(pool_size(Backend::Sqlite, 4), (2, 8));
        assert_eq!(pool_size(Backend::Sqlite, 64), (2, 16));
        assert_eq!(pool_size(Backend::Postgres, 1), (2, 8));
        assert_eq!(pool_size(Backend::Postgres, 2), (2, 8));
        assert_eq!(pool_size(Backend::Postgres, 4), (2, 16));
        assert_eq!(pool_size(Backend::Postgres, 64), (2, 32));
        assert_eq!(pool_size(Backend::Postgres, u32::MAX), (2, 32));
    }
}
