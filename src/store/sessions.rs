//! Server-side browser sessions: tower-sessions' sqlx stores, kept in Gatehouse's database.

use async_trait::async_trait;
use sqlx::postgres::PgPoolOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use std::str::FromStr;
use tower_sessions::session::{Id, Record};
use tower_sessions::session_store::{self, SessionStore};
use tower_sessions_sqlx_store::{PostgresStore, SqliteStore};

use super::{Backend, StoreError};

/// The session store of the configured engine.
#[derive(Debug, Clone)]
pub enum SessionBackend {
    /// Sessions in the `SQLite` file (table `tower_sessions`).
    Sqlite(SqliteStore, sqlx::SqlitePool),
    /// Sessions in `PostgreSQL` (schema `tower_sessions`).
    Postgres(PostgresStore),
}

impl SessionBackend {
    pub(super) async fn connect(backend: Backend, url: &str) -> Result<Self, StoreError> {
        Ok(match backend {
            Backend::Sqlite => {
                let opts = SqliteConnectOptions::from_str(url)?
                    .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
                    .busy_timeout(std::time::Duration::from_secs(10));
                // Connections opened while the file was read-only are replaced, as in the
                // main pool (`super::note_cannot_write`).
                let pool = SqlitePoolOptions::new()
                    .max_connections(4)
                    .after_release(|_conn, meta| {
                        Box::pin(async move { Ok(!super::opened_before_cannot_write(meta.age)) })
                    })
                    .connect_with(opts)
                    .await?;
                SessionBackend::Sqlite(SqliteStore::new(pool.clone()), pool)
            }
            Backend::Postgres => {
                let pool = PgPoolOptions::new().max_connections(4).connect(url).await?;
                SessionBackend::Postgres(PostgresStore::new(pool))
            }
        })
    }

    /// `SQLite`: the sessions' own pool (closed and reopened with the store's when the file
    /// is writable again, [`super::writable_again`]).
    pub(super) fn sqlite_pool(&self) -> Option<&sqlx::SqlitePool> {
        match self {
            SessionBackend::Sqlite(_, pool) => Some(pool),
            SessionBackend::Postgres(_) => None,
        }
    }

    pub(super) async fn migrate(&self) -> Result<(), StoreError> {
        match self {
            SessionBackend::Sqlite(s, _) => s.migrate().await?,
            SessionBackend::Postgres(s) => s.migrate().await?,
        }
        Ok(())
    }
}

impl SessionBackend {
    /// Deletes expired sessions.
    pub async fn delete_expired(&self) -> session_store::Result<()> {
        use tower_sessions::session_store::ExpiredDeletion;
        match self {
            SessionBackend::Sqlite(s, _) => s.delete_expired().await,
            SessionBackend::Postgres(s) => s.delete_expired().await,
        }
    }
}

#[async_trait]
impl SessionStore for SessionBackend {
    async fn create(&self, record: &mut Record) -> session_store::Result<()> {
        match self {
            SessionBackend::Sqlite(s, _) => s.create(record).await,
            SessionBackend::Postgres(s) => s.create(record).await,
        }
    }
    async fn save(&self, record: &Record) -> session_store::Result<()> {
        match self {
            SessionBackend::Sqlite(s, _) => s.save(record).await,
            SessionBackend::Postgres(s) => s.save(record).await,
        }
    }
    async fn load(&self, id: &Id) -> session_store::Result<Option<Record>> {
        match self {
            SessionBackend::Sqlite(s, _) => s.load(id).await,
            SessionBackend::Postgres(s) => s.load(id).await,
        }
    }
    async fn delete(&self, id: &Id) -> session_store::Result<()> {
        match self {
            SessionBackend::Sqlite(s, _) => s.delete(id).await,
            SessionBackend::Postgres(s) => s.delete(id).await,
        }
    }
}
