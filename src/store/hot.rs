//! Hot reads: the lookups every authenticated request makes, each declared once as a
//! [`Lookup`] (its SQL and its record) and asked through one dispatcher, [`Store::hot`], which
//! chooses where it runs and counts each choice ([`Store::hot_reads`]):
//!
//! 1. in place on `SQLite` ([`super::in_place`]: on the calling thread, no hand-off), and when
//!    that fails,
//! 2. in a batch on `PostgreSQL`, for a lookup declared with one ([`Lookup::batched`],
//!    [`super::read_batches`]: concurrent lookups of one kind in one statement), or
//! 3. through the pool.
//!
//! Every path runs the same declaration: the in-place reader decodes the record with its
//! [`FromSqliteRow`], the pool with its `sqlx::FromRow`, and a batch's statement is derived from
//! the single lookup's SQL ([`batch_sql`]), never written by hand, so a condition added to a
//! lookup holds on every path.

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sqlx::FromRow;
use sqlx::any::AnyRow;

use super::in_place::{self, FromSqliteRow};
use super::read_batches::ReadBatches;
use super::{Backend, Store, StoreError};

/// The hot lookups, one name each (the `lookup` label of `gatehouse_hot_reads_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HotLookup {
    /// An access token by its hash, with its grant ([`super::oauth`]).
    AccessToken,
    /// An access token with whether its request's DPoP proof was seen before.
    AccessTokenWithProof,
    /// A refresh token's state by its hash (batched on `PostgreSQL`).
    RefreshToken,
    /// A registered client by its `client_id`.
    Client,
    /// An API key by its hash ([`super::keys`]).
    ApiKey,
    /// A personal MCP URL by its hash.
    PersonalUrl,
    /// An account's active projects (batched on `PostgreSQL`; [`super::projects`]).
    ProjectsOfAccount,
    /// An account's membership in one project.
    Membership,
    /// The validation cache's generation row (`SQLite`; [`super::auth_cache`]).
    AuthGeneration,
}

impl HotLookup {
    /// Every hot lookup, in the order of their counts.
    pub const ALL: [HotLookup; 9] = [
        HotLookup::AccessToken,
        HotLookup::AccessTokenWithProof,
        HotLookup::RefreshToken,
        HotLookup::Client,
        HotLookup::ApiKey,
        HotLookup::PersonalUrl,
        HotLookup::ProjectsOfAccount,
        HotLookup::Membership,
        HotLookup::AuthGeneration,
    ];

    /// The lookup's name, as metrics and logs show it.
    pub fn name(self) -> &'static str {
        match self {
            HotLookup::AccessToken => "access_token",
            HotLookup::AccessTokenWithProof => "access_token_with_proof",
            HotLookup::RefreshToken => "refresh_token",
            HotLookup::Client => "client",
            HotLookup::ApiKey => "api_key",
            HotLookup::PersonalUrl => "personal_url",
            HotLookup::ProjectsOfAccount => "projects_of_account",
            HotLookup::Membership => "membership",
            HotLookup::AuthGeneration => "auth_generation",
        }
    }

    fn slot(self) -> usize {
        self as usize
    }
}

/// A parameter of a hot lookup (`$1` is the first).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Param<'a> {
    /// A text value.
    Text(&'a str),
    /// An integer (Unix seconds, counts).
    Int(i64),
}

impl rusqlite::ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        match self {
            Param::Text(s) => s.to_sql(),
            Param::Int(i) => i.to_sql(),
        }
    }
}

/// A record a hot lookup reads, decodable on every path.
pub(crate) trait HotRow:
    for<'r> FromRow<'r, AnyRow> + FromSqliteRow + Clone + Send + Unpin + 'static
{
}

impl<T> HotRow for T where
    T: for<'r> FromRow<'r, AnyRow> + FromSqliteRow + Clone + Send + Unpin + 'static
{
}

/// What a lookup answers: at most one record (`Option<R>`) or every row (`Vec<R>`).
pub(crate) trait Answer<R: HotRow>: Sized + Send {
    /// Whether the statement may return more than one row.
    const MANY: bool;

    /// The answer read in place.
    fn read_in_place(
        conn: &rusqlite::Connection,
        sql: &str,
        params: &[&dyn rusqlite::ToSql],
    ) -> rusqlite::Result<Self>;

    /// The answer made of the rows a batch or the pool returned.
    fn from_rows(rows: Vec<R>) -> Self;
}

impl<R: HotRow> Answer<R> for Option<R> {
    const MANY: bool = false;

    fn read_in_place(
        conn: &rusqlite::Connection,
        sql: &str,
        params: &[&dyn rusqlite::ToSql],
    ) -> rusqlite::Result<Self> {
        in_place::optional(conn, sql, params)
    }

    fn from_rows(rows: Vec<R>) -> Self {
        rows.into_iter().next()
    }
}

impl<R: HotRow> Answer<R> for Vec<R> {
    const MANY: bool = true;

    fn read_in_place(
        conn: &rusqlite::Connection,
        sql: &str,
        params: &[&dyn rusqlite::ToSql],
    ) -> rusqlite::Result<Self> {
        in_place::all(conn, sql, params)
    }

    fn from_rows(rows: Vec<R>) -> Self {
        rows
    }
}

/// Where a store keeps a batched lookup's queue.
type BatchOf<R> = fn(&Store) -> &Arc<ReadBatches<R>>;

/// One hot lookup, declared once: its name, its SQL (`$1`… its parameters, the same text on
/// both engines; a lookup of many rows ends with `ORDER BY` over its result columns), the
/// record `R` of each row, what it answers (`A`: `Option<R>` or `Vec<R>`), and for a lookup
/// batched on `PostgreSQL`, where its store keeps the batch queue.
pub(crate) struct Lookup<R: HotRow, A: Answer<R>> {
    /// Its name.
    pub(crate) which: HotLookup,
    /// The single lookup's statement.
    pub(crate) sql: &'static str,
    batch: Option<BatchOf<R>>,
    answer: PhantomData<fn() -> A>,
}

impl<R: HotRow, A: Answer<R>> Lookup<R, A> {
    /// The lookup `which` running `sql`.
    pub(crate) const fn new(which: HotLookup, sql: &'static str) -> Self {
        Lookup {
            which,
            sql,
            batch: None,
            answer: PhantomData,
        }
    }

    /// This lookup batched on `PostgreSQL` through the queue `batch` of its store, which runs
    /// [`Lookup::batch_sql`]. Such a lookup takes one parameter, a text key.
    pub(crate) const fn batched(self, batch: BatchOf<R>) -> Self {
        Lookup {
            batch: Some(batch),
            ..self
        }
    }

    /// `PostgreSQL`: the batched form of this lookup ([`batch_sql`]).
    pub(crate) fn batch_sql(&self) -> String {
        batch_sql(self.sql, A::MANY)
    }
}

/// `PostgreSQL`: the statement that runs the single lookup `sql` (one text parameter `$1`, and
/// when `many`, an optional trailing `ORDER BY` over its result columns) for each key of the
/// JSON array `$1`, each row led by its key as `batch_key` ([`super::read_batches`]), each
/// key's rows in the single lookup's order.
///
/// Each key is looked up on its own: a `LATERAL` subquery that `LIMIT 1` (one row) or
/// `OFFSET 0` (many) keeps from being merged into one join, so the plan is the single lookup's
/// index probe whatever the statistics say.
pub(crate) fn batch_sql(sql: &str, many: bool) -> String {
    let (select, order) = match sql.rsplit_once(" ORDER BY ") {
        Some((select, order)) if many => (select, Some(order)),
        _ => (sql, None),
    };
    let select = select.replace("$1", "k.batch_key");
    let fence = if many { "OFFSET 0" } else { "LIMIT 1" };
    let mut batch = format!(
        "SELECT k.batch_key AS batch_key, t.* FROM json_array_elements_text($1::text::json) AS k(batch_key) \
         CROSS JOIN LATERAL ({select} {fence}) t"
    );
    if let Some(order) = order {
        batch.push_str(" ORDER BY k.batch_key");
        for column in order.split(',') {
            batch.push_str(", t.");
            batch.push_str(column.trim());
        }
    }
    batch
}

/// How often each path answered one hot lookup ([`Store::hot_reads`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HotReads {
    /// Answered in place (`SQLite`).
    pub in_place: u64,
    /// Answered by a batch (`PostgreSQL`).
    pub batched: u64,
    /// Answered through the pool (after an in-place read failed, or on `PostgreSQL` for an
    /// unbatched lookup).
    pub pool: u64,
}

/// The counts of one store's hot lookups, by [`HotLookup`].
#[derive(Debug, Default)]
pub(crate) struct HotCounts([[AtomicU64; 3]; HotLookup::ALL.len()]);

impl HotCounts {
    fn add(&self, which: HotLookup, path: usize) {
        self.0[which.slot()][path].fetch_add(1, Ordering::Relaxed);
    }
}

const IN_PLACE: usize = 0;
const BATCHED: usize = 1;
const POOL: usize = 2;

impl Store {
    /// Runs the hot lookup `lookup` with `params`: in place on `SQLite`, in a batch on
    /// `PostgreSQL` when it is batched, otherwise (or when in place failed) through the pool
    /// (module docs). Each answer is counted by its path ([`Store::hot_reads`]).
    ///
    /// Errors: the pool's or the batch's [`StoreError`] (a database unavailable is
    /// [`StoreError::is_unavailable`]).
    pub(crate) async fn hot<R: HotRow, A: Answer<R>>(
        &self,
        lookup: &Lookup<R, A>,
        params: &[Param<'_>],
    ) -> Result<A, StoreError> {
        if self.in_place.is_some() {
            let bound: [&dyn rusqlite::ToSql; 4] = [
                param(params, 0),
                param(params, 1),
                param(params, 2),
                param(params, 3),
            ];
            let bound = &bound[..params.len().min(4)];
            if let Some(answer) =
                self.read_in_place(|conn| A::read_in_place(conn, lookup.sql, bound))
            {
                self.hot_counts.add(lookup.which, IN_PLACE);
                return Ok(answer);
            }
        }
        if self.backend() == Backend::Postgres
            && let (Some(batch), [Param::Text(key)]) = (lookup.batch, params)
        {
            self.hot_counts.add(lookup.which, BATCHED);
            return Ok(A::from_rows(
                batch(self).read(self, (*key).to_string()).await?,
            ));
        }
        self.hot_counts.add(lookup.which, POOL);
        let mut query = sqlx::query_as::<_, R>(lookup.sql);
        for p in params {
            query = match *p {
                Param::Text(s) => query.bind(s),
                Param::Int(i) => query.bind(i),
            };
        }
        let pool = self.pool();
        let rows = if A::MANY {
            query.fetch_all(&pool).await?
        } else {
            query.fetch_optional(&pool).await?.into_iter().collect()
        };
        Ok(A::from_rows(rows))
    }

    /// How often each path answered `which` on this store (and its clones) so far.
    pub fn hot_reads(&self, which: HotLookup) -> HotReads {
        let counts = &self.hot_counts.0[which.slot()];
        HotReads {
            in_place: counts[IN_PLACE].load(Ordering::Relaxed),
            batched: counts[BATCHED].load(Ordering::Relaxed),
            pool: counts[POOL].load(Ordering::Relaxed),
        }
    }
}

/// The `i`th of `params` as a `SQLite` parameter (an unused slot: `NULL`, never bound).
fn param<'p>(params: &'p [Param<'_>], i: usize) -> &'p dyn rusqlite::ToSql {
    match params.get(i) {
        Some(p) => p,
        None => &rusqlite::types::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_the_single_lookup_per_key_with_its_order() {
        let single = "SELECT p.id AS id, p.created_at AS created_at FROM memberships m JOIN projects p ON p.id = m.project_id \
             WHERE m.account_id = $1 AND p.status = 'active' ORDER BY created_at, id";
        assert_eq!(
            batch_sql(single, true),
            "SELECT k.batch_key AS batch_key, t.* FROM json_array_elements_text($1::text::json) AS k(batch_key) \
             CROSS JOIN LATERAL (SELECT p.id AS id, p.created_at AS created_at FROM memberships m JOIN projects p ON p.id = m.project_id \
             WHERE m.account_id = k.batch_key AND p.status = 'active' OFFSET 0) t ORDER BY k.batch_key, t.created_at, t.id"
        );
        assert_eq!(
            batch_sql(
                "SELECT r.x AS x FROM refresh_tokens r WHERE r.token_hash = $1",
                false
            ),
            "SELECT k.batch_key AS batch_key, t.* FROM json_array_elements_text($1::text::json) AS k(batch_key) \
             CROSS JOIN LATERAL (SELECT r.x AS x FROM refresh_tokens r WHERE r.token_hash = k.batch_key LIMIT 1) t"
        );
    }

    /// A batch binds one key as `$1` ([`batch_sql`] puts each key in its place): a batched
    /// lookup with a second parameter would lose it.
    #[test]
    fn every_batched_lookup_takes_one_key_only() {
        for sql in [
            super::super::oauth::REFRESH_TOKEN.sql,
            super::super::projects::PROJECTS_OF_ACCOUNT.sql,
        ] {
            assert!(sql.contains("$1"), "{sql}");
            for n in 2..=9 {
                assert!(!sql.contains(&format!("${n}")), "${n} in {sql}");
            }
        }
    }

    #[test]
    fn every_lookup_has_its_own_name_and_slot() {
        let mut names: Vec<&str> = HotLookup::ALL.iter().map(|l| l.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), HotLookup::ALL.len());
        for (i, which) in HotLookup::ALL.iter().enumerate() {
            assert_eq!(which.slot(), i, "{which:?}");
        }
    }
}
