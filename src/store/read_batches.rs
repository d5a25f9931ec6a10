//! Batched hot lookups on `PostgreSQL`: concurrent lookups of one kind in one statement.
//!
//! On `PostgreSQL` every statement is a round trip and a transaction of its own, and for a
//! small lookup that fixed part (the protocol messages, the transaction, the executor's set-up,
//! the wake-ups on both sides) is most of what it costs the database. Two lookups run once per
//! request on hot paths: a refresh token's state on every rotation ([`Store::refresh_state`])
//! and an account's projects on every `list_projects` tool call
//! ([`Store::projects_of_account`]). Each kind is queued here: whichever queued lookup gets
//! a turn ([`READ_TURNS`] of each kind at once) takes every lookup waiting (at most
//! [`BATCH_MAX`]; a key asked for twice is read once) and runs them as one statement in a task
//! of its own, then answers each with its rows. `SQLite` reads in place
//! ([`super::in_place`]) and never comes here.
//!
//! - Fresh: a lookup is answered only by a statement that started after it was queued, so it
//!   sees every write committed before its request reached it; a result already in flight is
//!   never handed to a later lookup.
//! - The statement runs in a task of its own: a leader whose request is cancelled does not
//!   leave the others of its batch unanswered.
//! - A failed statement answers every lookup of its batch with its error, classified as it
//!   was (the database unavailable: `503`; otherwise `500`). Nothing here writes.
//! - Bounded and withdrawn as every batch of the store ([`super::batcher`]): a lookup waits at
//!   most [`super::WRITE_TURN_WAIT`] for a turn and as long again for its answer (then it is
//!   answered like a busy database, `503`), and one whose request was cancelled while it waits
//!   leaves the queue.
//!
//! A batched statement takes `$1`, a JSON array of the keys (text), and returns the column
//! `batch_key` (the key a row answers) beside the rows' own columns, each key's rows in the
//! order its lookup wants.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sqlx::any::AnyRow;
use sqlx::{FromRow, Row};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::batcher::Batcher;

use super::{Store, StoreError};

/// Most lookups answered by one statement.
pub const BATCH_MAX: usize = 64;

/// Statements of one kind of lookup running at once, per store: while one runs, the next
/// lookups gather.
pub const READ_TURNS: usize = 1;

/// What a lookup's waiting end receives: its rows, or the batch's error.
type Answer<T> = Result<Vec<T>, StoreError>;

/// A lookup waiting for a batch: its key.
type Waiting<T> = super::batcher::Waiting<String, Vec<T>>;

/// The lookups of one kind waiting for a batch ([`super::batcher`]), and the turns of its
/// statements. Shared by every clone of a [`Store`] (and so by every serving lane).
pub(crate) struct ReadBatches<T> {
    sql: String,
    waiting: Arc<Batcher<String, Vec<T>>>,
    turns: Arc<Semaphore>,
    statements: AtomicU64,
}

/// A row of a batched statement: the key it answers and the row itself.
struct Keyed<T> {
    key: String,
    row: T,
}

impl<'r, T: FromRow<'r, AnyRow>> FromRow<'r, AnyRow> for Keyed<T> {
    fn from_row(row: &'r AnyRow) -> Result<Self, sqlx::Error> {
        Ok(Keyed {
            key: row.try_get("batch_key")?,
            row: T::from_row(row)?,
        })
    }
}

impl<T> ReadBatches<T>
where
    T: for<'r> FromRow<'r, AnyRow> + Clone + Send + Unpin + 'static,
{
    /// The lookups of batched statement `sql` (module docs: `$1` the keys as a JSON array,
    /// the column `batch_key` in every row).
    pub(crate) fn new(sql: String) -> Self {
        ReadBatches {
            sql,
            waiting: Arc::new(Batcher::new(BATCH_MAX)),
            turns: Arc::new(Semaphore::new(READ_TURNS)),
            statements: AtomicU64::new(0),
        }
    }

    /// How many batched statements ran (each answering one lookup or more).
    pub(crate) fn statements(&self) -> u64 {
        self.statements.load(Ordering::Relaxed)
    }

    /// The rows for `key`, read in a batch with the lookups waiting beside it (module docs),
    /// through `store`'s pool.
    ///
    /// Errors: the batch statement's; [`super::Unavailable`] when no turn or no answer
    /// came within [`super::WRITE_TURN_WAIT`].
    pub(crate) async fn read(self: &Arc<Self>, store: &Store, key: String) -> Answer<T> {
        self.waiting
            .submit(key, &self.turns, |batch, turn| {
                Arc::clone(self).run(store.clone(), batch, turn)
            })
            .await
    }

    /// Runs one batch's statement holding `turn` and answers each of its lookups.
    async fn run(
        self: Arc<Self>,
        store: Store,
        batch: Vec<Waiting<T>>,
        turn: OwnedSemaphorePermit,
    ) {
        let mut keys: Vec<&str> = batch.iter().map(|w| w.item.as_str()).collect();
        keys.sort_unstable();
        keys.dedup();
        #[allow(clippy::expect_used, reason = "a list of strings always serializes")]
        let input = serde_json::to_string(&keys).expect("a list of strings serializes");
        let rows: Result<Vec<Keyed<T>>, sqlx::Error> = sqlx::query_as(&self.sql)
            .bind(input)
            .fetch_all(&store.pool())
            .await;
        drop(turn);
        self.statements.fetch_add(1, Ordering::Relaxed);
        match rows {
            Ok(rows) => answer_rows(batch, rows),
            Err(e) => answer_error(batch, e),
        }
    }
}

impl Store {
    /// How many batched lookup statements ran on this store (refresh-token states and project
    /// listings, module [`super::read_batches`]); 0 on `SQLite`, which reads in place.
    pub fn lookup_batch_statements(&self) -> u64 {
        self.refresh_reads.statements() + self.project_reads.statements()
    }
}

/// Hands each waiting lookup the rows of its key (none when the key matched nothing), in the
/// statement's order.
fn answer_rows<T: Clone>(batch: Vec<Waiting<T>>, rows: Vec<Keyed<T>>) {
    let mut by_key: HashMap<String, Vec<T>> = HashMap::with_capacity(batch.len());
    for Keyed { key, row } in rows {
        by_key.entry(key).or_default().push(row);
    }
    for w in batch {
        let rows = by_key.get(&w.item).cloned().unwrap_or_default();
        w.answer(Ok(rows));
    }
}

/// Answers every lookup of `batch` with `e`: the first with `e` itself, the others with an
/// error of the same class (the database unavailable, or not).
fn answer_error<T>(batch: Vec<Waiting<T>>, e: sqlx::Error) {
    tracing::warn!(error = %e, lookups = batch.len(), "a batch of lookups failed");
    let mut batch = batch.into_iter();
    let first = batch.next();
    for w in batch {
        w.answer(Err(StoreError::Database(super::same_class_error(&e))));
    }
    if let Some(first) = first {
        first.answer(Err(StoreError::from(e)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot;

    fn waiting(key: &str) -> (Waiting<String>, oneshot::Receiver<Answer<String>>) {
        Waiting::detached(key.to_string())
    }

    fn keyed(key: &str, row: &str) -> Keyed<String> {
        Keyed {
            key: key.to_string(),
            row: row.to_string(),
        }
    }

    #[test]
    fn each_lookup_gets_the_rows_of_its_own_key_in_order_and_a_repeated_key_gets_them_twice() {
        let (a, mut a_answer) = waiting("a");
        let (b, mut b_answer) = waiting("b");
        let (a_again, mut a_again_answer) = waiting("a");
        let (none, mut none_answer) = waiting("z");
        answer_rows(
            vec![a, b, a_again, none],
            vec![keyed("a", "a1"), keyed("b", "b1"), keyed("a", "a2")],
        );
        let rows = |r: &mut oneshot::Receiver<Answer<String>>| r.try_recv().unwrap().unwrap();
        assert_eq!(rows(&mut a_answer), ["a1", "a2"]);
        assert_eq!(rows(&mut a_again_answer), ["a1", "a2"]);
        assert_eq!(rows(&mut b_answer), ["b1"]);
        assert!(rows(&mut none_answer).is_empty());
    }

    #[test]
    fn a_failed_batch_answers_every_lookup_with_an_error_of_the_same_class() {
        for (error, unavailable) in [
            (sqlx::Error::PoolTimedOut, true),
            (sqlx::Error::RowNotFound, false),
        ] {
            let (a, mut a_answer) = waiting("a");
            let (b, mut b_answer) = waiting("b");
            answer_error(vec![a, b], error);
            for answer in [&mut a_answer, &mut b_answer] {
                let err = answer.try_recv().unwrap().unwrap_err();
                assert_eq!(err.is_unavailable(), unavailable, "{err}");
            }
        }
    }
}
