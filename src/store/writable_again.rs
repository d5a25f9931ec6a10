//! `SQLite`: reopening every connection once a file found read-only is writable again.
//!
//! `SQLite` keeps one view of a file's shared-memory index (its `-shm` file) per process,
//! shared by all the connections the process has open on the file, and that view is read-only
//! when the first of them opened it on a read-only file or file system. It stays read-only as
//! long as any of those connections is open: a connection opened after the file became
//! writable again joins the read-only view, and its first write fails `SQLITE_READONLY`.
//! Replacing connections one by one as they come back to their pool
//! ([`super::note_cannot_write`]) therefore leaves the first writes after the repair failing
//! until the last old connection happens to be taken.
//!
//! [`watch`] watches for the repair instead: after a file was found unwritable it tries, every
//! [`PROBE_EVERY`], to open the file for writing (one `open(2)` on a blocking thread, no
//! `SQLite` connection). Once that works it marks every open connection as opened before the
//! repair, closes at once those no request is using (the pool's idle connections, the
//! sessions' pool's, and the in-place readers and writer), and leaves the ones in use to be
//! closed when they come back. The next write then opens a fresh connection on a fresh view.

use std::path::PathBuf;
use std::sync::Weak;
use std::time::{Duration, Instant};

/// How often a file found unwritable is tried again.
pub(super) const PROBE_EVERY: Duration = Duration::from_millis(250);

/// Starts the watch of `path` for the store `parts`; it ends when the store is dropped.
pub(super) fn watch(parts: Weak<super::StoreParts>, path: PathBuf) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        // When this store last reopened its connections; a newer note means the file was
        // found unwritable again since.
        let mut reopened: Option<Instant> = None;
        loop {
            tokio::time::sleep(PROBE_EVERY).await;
            let Some(seen) = super::last_cannot_write() else {
                if parts.strong_count() == 0 {
                    return;
                }
                continue;
            };
            if reopened.is_some_and(|at| at >= seen) {
                if parts.strong_count() == 0 {
                    return;
                }
                continue;
            }
            let probe = path.clone();
            // Asked with access(2), never by opening the file: closing any descriptor of a
            // database file drops every POSIX lock this process holds on it, the locks SQLite's
            // connections here rely on, and another process (the command line) could then
            // write or recover the log under them.
            let writable = tokio::task::spawn_blocking(move || {
                rustix::fs::access(&probe, rustix::fs::Access::WRITE_OK).is_ok()
            })
            .await
            .unwrap_or(false);
            if !writable {
                if parts.strong_count() == 0 {
                    return;
                }
                continue;
            }
            let Some(parts) = parts.upgrade() else {
                return;
            };
            // Every connection open now joined the read-only view (or may have): closed now
            // when idle, and when it comes back otherwise.
            super::note_cannot_write();
            reopened = Some(Instant::now());
            close_idle(&parts.pool).await;
            if let Some(sessions) = parts.sessions.sqlite_pool() {
                close_idle(sessions).await;
            }
            if let Some(in_place) = parts.in_place.clone() {
                let _ = tokio::task::spawn_blocking(move || in_place.close_unused()).await;
            }
            tracing::info!(
                file = %path.display(),
                "the database file is writable again; its connections are reopened"
            );
        }
    });
}

/// Closes the connections of `pool` that are idle right now (at most its size: taking an idle
/// connection never opens one).
async fn close_idle<DB: sqlx::Database>(pool: &sqlx::Pool<DB>) {
    let most = pool.options().get_max_connections() as usize;
    let mut taken = Vec::with_capacity(most);
    while taken.len() < most {
        match pool.try_acquire() {
            Some(conn) => taken.push(conn),
            None => break,
        }
    }
    for conn in taken {
        let _ = conn.close().await;
    }
}
