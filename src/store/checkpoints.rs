//! `SQLite` WAL checkpoints off the write path.
//!
//! In WAL mode a commit appends pages to the write-ahead log; a checkpoint copies them into
//! the database file and makes both durable (`fsync`), which with `synchronous = NORMAL` is
//! the only time a write waits for the disk. By default the connection whose commit brings the
//! log past 1,000 pages runs the checkpoint inside that `COMMIT`: on the in-place write
//! connection ([`super::in_place`]) that stalled every refresh rotation and audit batch queued
//! behind it, a quarter of the writer's time under rotation load (docs/benchmarks.md).
//!
//! Here a thread of its own ([`Checkpointer`]) runs `PRAGMA wal_checkpoint(PASSIVE)` on a
//! connection of its own after every [`COMMITS_PER_CHECKPOINT`] in-place commits (a rotation
//! group writes about 30 pages, an audit batch a few). A passive checkpoint waits for no one:
//! writers keep appending to the log meanwhile, and what readers still use is copied next
//! time. The in-place write connection keeps an automatic checkpoint of its own at
//! [`WRITER_BACKSTOP_FRAMES`] pages, should this thread fall behind (a stalled disk). The
//! pool's connections keep `SQLite`'s default.
//!
//! As every connection of [`super::in_place`], the thread's connection is closed and no
//! checkpoint runs within [`super::UNWRITABLE_PAUSE`] of the file being found
//! unwritable, and a connection opened before that is not reused; a failed checkpoint closes
//! it too (the next one opens another).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rusqlite::{Connection, OpenFlags};

/// The in-place write connection's own automatic checkpoint, in pages of log. Reached when
/// the checkpoint thread falls behind, and under steady writes: `SQLite` starts the log again
/// from its beginning only when a write begins with every page of it copied, which a
/// checkpoint on another connection, with commits in between, seldom leaves; the writer's
/// own checkpoint (of what the thread has not copied yet) does, so the log stays below about
/// this many pages (16 MiB). Measured against 10,000 and 2,000 (docs/benchmarks.md).
pub const WRITER_BACKSTOP_FRAMES: u32 = 4_000;

/// In-place commits between two checkpoints. Measured (docs/benchmarks.md): a checkpoint
/// learnt from the pages each commit wrote let hundreds of commits pass after a quiet spell,
/// and the checkpoint that followed (9,000 pages, 36 ms) put refresh rotation's p99 at 35–40 ms;
/// every 20 commits kept it at 14–16 ms.
pub const COMMITS_PER_CHECKPOINT: u64 = 20;

/// The checkpoint thread of one `SQLite` file, started at the first commit it is told of;
/// it ends when this is dropped.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    path: PathBuf,
    unwritable_within: fn(std::time::Duration) -> bool,
    wake: Mutex<Option<SyncSender<()>>>,
    /// Commits since the thread was last woken.
    commits: AtomicU64,
    /// Checkpoints the thread ran.
    done: Arc<AtomicU64>,
}

impl Checkpointer {
    /// The checkpointer of the file at `path`; `unwritable_within` says whether the file was
    /// found unwritable within a given time ([`super::in_place`]).
    pub(crate) fn new(
        path: PathBuf,
        unwritable_within: fn(std::time::Duration) -> bool,
    ) -> Checkpointer {
        Checkpointer {
            path,
            unwritable_within,
            wake: Mutex::new(None),
            commits: AtomicU64::new(0),
            done: Arc::new(AtomicU64::new(0)),
        }
    }

    /// How many checkpoints the thread has run.
    pub(crate) fn done(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }

    /// Tells of one commit on the in-place write connection; every so many, wakes the thread
    /// (never waits: a checkpoint already asked for covers this one too).
    pub(crate) fn committed(&self) {
        if self.commits.fetch_add(1, Ordering::Relaxed) + 1 < COMMITS_PER_CHECKPOINT {
            return;
        }
        self.commits.store(0, Ordering::Relaxed);
        let Ok(mut wake) = self.wake.lock() else {
            return;
        };
        if wake.is_none() {
            *wake = self.start();
        }
        if let Some(tx) = wake.as_ref()
            && let Err(TrySendError::Disconnected(())) = tx.try_send(())
        {
            // The thread ended (it panicked): the next commit starts another.
            *wake = None;
        }
    }

    fn start(&self) -> Option<SyncSender<()>> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let thread = Thread {
            path: self.path.clone(),
            unwritable_within: self.unwritable_within,
            done: Arc::clone(&self.done),
            conn: None,
        };
        match std::thread::Builder::new()
            .name("gatehouse-checkpoint".into())
            .spawn(move || thread.run(&rx))
        {
            Ok(_) => Some(tx),
            Err(e) => {
                tracing::warn!(error = %e, "no checkpoint thread; the writer checkpoints by itself");
                None
            }
        }
    }
}

struct Thread {
    path: PathBuf,
    unwritable_within: fn(std::time::Duration) -> bool,
    done: Arc<AtomicU64>,
    /// The connection, with when it was opened.
    conn: Option<(Connection, Instant)>,
}

impl Thread {
    /// Runs a checkpoint each time it is woken, until its [`Checkpointer`] is dropped.
    fn run(mut self, wake: &Receiver<()>) {
        while wake.recv().is_ok() {
            self.checkpoint();
        }
    }

    fn checkpoint(&mut self) {
        if (self.unwritable_within)(super::UNWRITABLE_PAUSE) {
            self.conn = None;
            return;
        }
        if self
            .conn
            .as_ref()
            .is_some_and(|(_, opened)| super::opened_before_cannot_write(opened.elapsed()))
        {
            self.conn = None;
        }
        if self.conn.is_none() {
            match open(&self.path) {
                Ok(conn) => self.conn = Some((conn, Instant::now())),
                Err(e) => {
                    tracing::debug!(error = %e, "checkpoint connection not opened");
                    return;
                }
            }
        }
        let Some((conn, _)) = &self.conn else {
            return;
        };
        match conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            Ok(()) => {
                self.done.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                tracing::debug!(error = %e, "checkpoint failed");
                self.conn = None;
            }
        }
    }
}

fn open(path: &std::path::Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(std::time::Duration::ZERO)?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Commits told of reach the database file through the thread's checkpoints, while the
    /// committing connection checkpoints only past its backstop: without the thread the file
    /// would stay as small as its schema.
    #[test]
    fn committed_pages_reach_the_database_file_through_the_thread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let writer = Connection::open(&path).unwrap();
        writer
            .execute_batch(&format!(
                "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = {WRITER_BACKSTOP_FRAMES};
                 CREATE TABLE t (b BLOB NOT NULL);"
            ))
            .unwrap();
        let schema_only = std::fs::metadata(&path).unwrap().len();
        let checkpoints = Checkpointer::new(path.clone(), |_| false);
        let blob = vec![7u8; 16 * 1024];
        // 400 commits of about 5 pages each: about 2,000 pages, below the backstop.
        for _ in 0..400 {
            writer
                .execute("INSERT INTO t (b) VALUES (?1)", [&blob])
                .unwrap();
            checkpoints.committed();
        }
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        while std::fs::metadata(&path).unwrap().len() < 4 * 1024 * 1024 {
            assert!(Instant::now() < deadline, "pages never reached the file");
            std::thread::sleep(std::time::Duration::from_millis(20));
            // Later commits wake the thread again.
            writer
                .execute("INSERT INTO t (b) VALUES (?1)", [&blob])
                .unwrap();
            checkpoints.committed();
        }
        assert!(schema_only < 64 * 1024);
        assert!(checkpoints.done() >= 1);
    }

    /// While the file was just found unwritable no checkpoint runs and no connection is kept.
    #[test]
    fn no_checkpoint_within_the_unwritable_pause() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let writer = Connection::open(&path).unwrap();
        writer
            .execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (n INTEGER);")
            .unwrap();
        let mut thread = Thread {
            path,
            unwritable_within: |_| true,
            done: Arc::new(AtomicU64::new(0)),
            conn: None,
        };
        thread.checkpoint();
        assert!(thread.conn.is_none());
        assert_eq!(thread.done.load(Ordering::Relaxed), 0);
        thread.unwritable_within = |_| false;
        thread.checkpoint();
        assert!(thread.conn.is_some());
        assert_eq!(thread.done.load(Ordering::Relaxed), 1);
    }
}
