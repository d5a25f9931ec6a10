//! Group commit of refresh-token rotations.
//!
//! `SQLite` takes one writer at a time, so rotations that arrive together used to commit one
//! after another, each its own `BEGIN IMMEDIATE` … `COMMIT` with the turns between them; on
//! `PostgreSQL` each rotation was a statement and a commit (a WAL flush) of its own. Here a
//! rotation is queued, and whichever queued rotation gets a turn first becomes the leader: it
//! takes every rotation waiting (at most [`GROUP_MAX`]) and commits them together, then
//! answers each with whether it won. On `SQLite` the turn is this process's write turn
//! ([`Store::begin_write`]'s semaphore) and the group one transaction, each rotation its own
//! guarded statements ([`super::sqlite::ROTATE_REFRESH`]); on `PostgreSQL` up to
//! [`POSTGRES_GROUPS`] groups run at once, each one statement
//! ([`super::postgres::ROTATE_REFRESH_GROUP`], a group of one included), and when it fails
//! otherwise than by the database being unavailable (a deadlock with another instance's group
//! over the same tokens), each rotation runs alone, as a group of one. So each engine has one
//! text of the rotation, and every binder of it reads one list of parameters
//! ([`RotationWrite::params`]). The queue, turns, deadline and withdrawal are the store's
//! batcher's ([`super::batcher`]).
//! A rotation is answered only after the transaction holding it committed, so nothing is
//! acknowledged before it is committed (a crash of the process cannot take it back; with the
//! server's `synchronous = NORMAL` a power loss can still take back the last commits, as for
//! every write).
//!
//! - Each rotation's statements are conditional and touch only its own token, so one that
//!   loses (already rotated, family revoked, consent changed) writes nothing and leaves the
//!   others alone.
//! - If the group's transaction fails (a full disk, a statement error), it is rolled back and
//!   each rotation of the group is run again alone, in its own transaction, so that each gets
//!   its own answer (a rotation is never answered with another's error).
//! - On `SQLite` the group's transaction runs on the in-place write connection ([`super::in_place`]), in
//!   one hand-off to a blocking thread; when it is not committed there (any failure rolls it
//!   back), it runs again through the pool as below.
//! - The group runs in a task of its own: a leader whose request is cancelled does not cancel
//!   the others' rotations.
//! - A rotation that waits longer than [`super::WRITE_TURN_WAIT`] for its turn leaves the queue
//!   and is answered like a busy database (503), unless a leader has already taken it, in
//!   which case it waits for that leader's answer. A rotation whose request is cancelled while
//!   it waits leaves the queue too: nothing runs it later, with a time long past.

use std::sync::Arc;

use sqlx::AnyConnection;
use tokio::sync::OwnedSemaphorePermit;

use super::{Store, StoreError};

/// Most rotations committed in one transaction.
pub const GROUP_MAX: usize = 64;

/// Group commits of one `PostgreSQL` store running at once (one at a time on `SQLite`, which
/// has one writer): while one group's statement runs, the next gathers and can start.
pub const POSTGRES_GROUPS: usize = 2;

/// One rotation's parameters, owned so that it can wait in the queue ([`RotationWrite::params`]
/// names them, in the order of their numbers in the statements).
#[derive(Debug, Clone)]
pub(crate) struct RotationWrite {
    pub now: i64,
    pub refresh_hash: String,
    pub successor_sealed: Vec<u8>,
    pub presented: String,
    pub family_id: String,
    pub account_id: String,
    pub client_id: String,
    pub scope: String,
    pub resource: String,
    pub access_hash: String,
    pub access_expires_at: i64,
    pub consent_id: String,
    pub consent_scope: String,
    /// The DPoP key thumbprint the new access token is bound to (`None`: bearer).
    pub jkt: Option<String>,
}

/// A value of a rotation's parameter list ([`RotationWrite::params`]).
#[derive(Debug, Clone, Copy)]
enum Value<'a> {
    Int(i64),
    Text(&'a str),
    Bytes(&'a [u8]),
    OptionalText(Option<&'a str>),
}

impl rusqlite::ToSql for Value<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        match self {
            Value::Int(i) => i.to_sql(),
            Value::Text(s) => s.to_sql(),
            Value::Bytes(b) => b.to_sql(),
            Value::OptionalText(s) => s.to_sql(),
        }
    }
}

impl Value<'_> {
    /// The value as a member of [`super::postgres::ROTATE_REFRESH_GROUP`]'s input (bytes as
    /// lowercase hex, which the statement decodes).
    fn to_json(self) -> serde_json::Value {
        match self {
            Value::Int(i) => i.into(),
            Value::Text(s) => s.into(),
            Value::Bytes(bytes) => {
                use std::fmt::Write as _;
                let mut hex = String::with_capacity(bytes.len() * 2);
                for byte in bytes {
                    let _ = write!(hex, "{byte:02x}");
                }
                hex.into()
            }
            Value::OptionalText(s) => s.into(),
        }
    }
}

/// Number of parameters of a rotation.
const PARAMETERS: usize = 14;

impl RotationWrite {
    /// The rotation's parameters, each with its name: `$n` of [`super::sqlite::ROTATE_REFRESH`]
    /// is the `n`th, and the same name is its member in
    /// [`super::postgres::ROTATE_REFRESH_GROUP`]'s input. Every binder reads this one list.
    fn params(&self) -> [(&'static str, Value<'_>); PARAMETERS] {
        [
            ("now", Value::Int(self.now)),
            ("refresh_hash", Value::Text(&self.refresh_hash)),
            ("sealed", Value::Bytes(&self.successor_sealed)),
            ("presented", Value::Text(&self.presented)),
            ("family_id", Value::Text(&self.family_id)),
            ("account_id", Value::Text(&self.account_id)),
            ("client_id", Value::Text(&self.client_id)),
            ("scope", Value::Text(&self.scope)),
            ("resource", Value::Text(&self.resource)),
            ("access_hash", Value::Text(&self.access_hash)),
            ("access_expires_at", Value::Int(self.access_expires_at)),
            ("consent_id", Value::Text(&self.consent_id)),
            ("consent_scope", Value::Text(&self.consent_scope)),
            ("jkt", Value::OptionalText(self.jkt.as_deref())),
        ]
    }

    /// `SQLite`, through the pool: runs the rotation's statements
    /// ([`super::sqlite::ROTATE_REFRESH`]) on `conn`, inside the caller's transaction; whether
    /// it won.
    async fn run(&self, conn: &mut AnyConnection) -> Result<bool, sqlx::Error> {
        let mut changed = 0;
        for sql in super::sqlite::ROTATE_REFRESH {
            let mut query = sqlx::query(sql);
            for (_, value) in self.params() {
                query = match value {
                    Value::Int(i) => query.bind(i),
                    Value::Text(s) => query.bind(s),
                    Value::Bytes(b) => query.bind(b),
                    Value::OptionalText(s) => query.bind(s),
                };
            }
            changed += query.execute(&mut *conn).await?.rows_affected();
        }
        Ok(changed > 0)
    }

    /// The rotation as one object of [`super::postgres::ROTATE_REFRESH_GROUP`]'s input, at
    /// place `i` of its group.
    fn as_json(&self, i: usize) -> serde_json::Value {
        let mut object = serde_json::Map::with_capacity(PARAMETERS + 1);
        object.insert("i".into(), i.into());
        for (name, value) in self.params() {
            object.insert(name.into(), value.to_json());
        }
        serde_json::Value::Object(object)
    }

    /// Runs the rotation's statements ([`super::sqlite::ROTATE_REFRESH`]) on the in-place
    /// write connection, inside the caller's transaction: whether it won.
    fn run_in_place(&self, conn: &rusqlite::Connection) -> rusqlite::Result<bool> {
        let params = self.params();
        let bound: [&dyn rusqlite::ToSql; PARAMETERS] = std::array::from_fn(|i| &params[i].1 as _);
        let mut changed = 0;
        for sql in super::sqlite::ROTATE_REFRESH {
            changed += super::in_place::execute(conn, sql, &bound)?;
        }
        Ok(changed > 0)
    }
}

/// A rotation waiting for a group commit.
type Queued = super::batcher::Waiting<RotationWrite, bool>;

/// The rotations waiting for a group commit ([`super::batcher`]) and the count of group
/// statements. Shared by every clone of a [`Store`].
pub(crate) struct RotationQueue {
    waiting: Arc<super::batcher::Batcher<RotationWrite, bool>>,
    statements: std::sync::atomic::AtomicU64,
}

impl Default for RotationQueue {
    fn default() -> Self {
        RotationQueue {
            waiting: Arc::new(super::batcher::Batcher::new(GROUP_MAX)),
            statements: std::sync::atomic::AtomicU64::new(0),
        }
    }
}

impl Store {
    /// On `PostgreSQL`, how many groups of refresh rotations (more than one each) were
    /// committed in one statement ([`super::postgres::ROTATE_REFRESH_GROUP`]); 0 on `SQLite`.
    pub fn rotation_group_statements(&self) -> u64 {
        self.rotations
            .statements
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Runs `write` in a group commit with the rotations waiting beside it (module docs):
    /// whether it won, once the transaction holding it has committed.
    ///
    /// Errors: the database's, for this rotation alone; [`super::Unavailable`] when no
    /// turn or answer came within [`super::WRITE_TURN_WAIT`].
    pub(crate) async fn rotate_in_group(&self, write: RotationWrite) -> Result<bool, StoreError> {
        self.rotations
            .waiting
            .submit(write, &self.rotation_turns, |group, turn| {
                commit_group(self.clone(), group, turn)
            })
            .await
    }
}

/// Commits `group` in one transaction holding `turn`, and answers each rotation. When the
/// transaction fails because the database is unavailable, every rotation of the group is
/// answered with that; when it fails otherwise (one statement refused), each is run alone so
/// that each gets its own answer.
async fn commit_group(store: Store, group: Vec<Queued>, turn: OwnedSemaphorePermit) {
    if store.backend() == super::Backend::Postgres {
        commit_group_postgres(&store, group).await;
        drop(turn);
        return;
    }
    // In place first ([`super::in_place`]): one hand-off to a blocking thread for the whole
    // group; through the pool below when it was not committed there.
    let Ok(turn) = store.as_write_turn(turn) else {
        // Never: on `SQLite` the rotations' turns are the write turn.
        answer_unavailable_turn(group);
        return;
    };
    let in_place = store
        .write_in_place(&turn, group, |conn, group| {
            group
                .iter()
                .map(|q| q.item.run_in_place(conn))
                .collect::<rusqlite::Result<Vec<bool>>>()
        })
        .await;
    let group = match in_place {
        Some((group, Some(won))) => {
            for (q, won) in group.into_iter().zip(won) {
                q.answer(Ok(won));
            }
            drop(turn);
            return;
        }
        Some((group, None)) => group,
        // The runtime is shutting down: the group's requests are gone with it.
        None => return,
    };
    let together = async {
        let mut tx = store.pool().begin_with("BEGIN IMMEDIATE").await?;
        let mut won = Vec::with_capacity(group.len());
        for q in &group {
            won.push(q.item.run(&mut tx).await?);
        }
        tx.commit().await?;
        Ok::<_, sqlx::Error>(won)
    }
    .await;
    match together {
        Ok(won) => {
            for (q, won) in group.into_iter().zip(won) {
                q.answer(Ok(won));
            }
        }
        // Busy, out of reach, full or read-only: the same for every rotation of the group, so
        // each is answered with it (503) instead of trying each alone into it again.
        Err(e) if super::database_unavailable(&e) => answer_unavailable(group, e),
        Err(e) => {
            if group.len() > 1 {
                tracing::warn!(error = %e, rotations = group.len(), "a group of refresh rotations failed; running each alone");
            }
            for q in group {
                let alone = async {
                    let mut tx = store.pool().begin_with("BEGIN IMMEDIATE").await?;
                    let won = q.item.run(&mut tx).await?;
                    tx.commit().await?;
                    Ok::<_, sqlx::Error>(won)
                }
                .await;
                q.answer(alone.map_err(StoreError::from));
            }
        }
    }
    drop(turn);
}

/// `PostgreSQL`: the rotations of `group` in one statement
/// ([`super::postgres::ROTATE_REFRESH_GROUP`]): for each, whether it won.
async fn rotate_postgres(
    store: &Store,
    group: &[&RotationWrite],
) -> Result<Vec<bool>, sqlx::Error> {
    let input = serde_json::Value::Array(
        group
            .iter()
            .enumerate()
            .map(|(i, write)| write.as_json(i))
            .collect(),
    );
    let won: Vec<i64> = sqlx::query_scalar(super::postgres::ROTATE_REFRESH_GROUP)
        .bind(input.to_string())
        .fetch_all(&store.pool())
        .await?;
    Ok((0..group.len())
        .map(|i| won.iter().any(|&w| usize::try_from(w) == Ok(i)))
        .collect())
}

/// `PostgreSQL`: commits `group` in one statement ([`super::postgres::ROTATE_REFRESH_GROUP`])
/// and answers each rotation; when the database is unavailable every rotation is answered
/// with that, and when the statement fails otherwise (a deadlock with another instance's
/// group, one row refused) each rotation runs alone, as a group of one, so that each gets its
/// own answer.
async fn commit_group_postgres(store: &Store, group: Vec<Queued>) {
    let writes: Vec<&RotationWrite> = group.iter().map(|q| &q.item).collect();
    let together = rotate_postgres(store, &writes).await;
    drop(writes);
    match together {
        Ok(won) => {
            if group.len() > 1 {
                store
                    .rotations
                    .statements
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            for (q, won) in group.into_iter().zip(won) {
                q.answer(Ok(won));
            }
        }
        Err(e) if super::database_unavailable(&e) => answer_unavailable(group, e),
        Err(e) if group.len() == 1 => {
            if let Some(q) = group.into_iter().next() {
                q.answer(Err(StoreError::from(e)));
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, rotations = group.len(), "a group of refresh rotations failed; running each alone");
            for q in group {
                let alone = rotate_postgres(store, &[&q.item]).await;
                q.answer(
                    alone
                        .map(|won| won.first().copied().unwrap_or(false))
                        .map_err(StoreError::from),
                );
            }
        }
    }
}

/// Answers every rotation of `group` as not run for want of the write turn (503).
fn answer_unavailable_turn(group: Vec<Queued>) {
    for q in group {
        q.answer(Err(StoreError::Unavailable(super::Unavailable::NoTurn)));
    }
}

/// Answers every rotation of `group` with the database being unavailable (503), the first
/// with `e` itself.
fn answer_unavailable(group: Vec<Queued>, e: sqlx::Error) {
    tracing::warn!(error = %e, rotations = group.len(), "a group of refresh rotations could not be written");
    let mut group = group.into_iter();
    let first = group.next();
    for q in group {
        q.answer(Err(StoreError::Database(super::same_class_error(&e))));
    }
    if let Some(first) = first {
        first.answer(Err(StoreError::from(e)));
    }
}

#[cfg(test)]
mod tests {
    use super::super::oauth::{ClientRecord, CodeRecord, NewTokens, Redeemed, Rotation};
    use super::*;
    use crate::domain::account::Email;
    use crate::domain::secret::TokenHash;

    /// A fresh migrated `SQLite` store with one redeemed grant: the store, its refresh token's
    /// hash (the directory must outlive the store).
    async fn store_with_grant(dir: &tempfile::TempDir) -> (Store, TokenHash) {
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("r.db").display());
        let store = Store::connect(&url).await.unwrap();
        store.migrate().await.unwrap();
        let account = store
            .create_account(&Email::parse("r@example.com").unwrap(), "h", 1)
            .await
            .unwrap()
            .id;
        let client = ClientRecord {
            client_id: "c".into(),
            client_secret_hash: None,
            token_endpoint_auth_method: "none".into(),
            client_name: None,
            redirect_uris: vec!["https://a.example/cb".into()],
            grant_types: vec!["authorization_code".into(), "refresh_token".into()],
            scope: None,
            metadata: serde_json::json!({}),
            can_introspect: false,
            created_at: 1,
        };
        store.create_client(&client).await.unwrap();
        let consent = store
            .approve_consent(&account, "c", "https://a.example/cb", "mcp:read", 1)
            .await
            .unwrap();
        let code = CodeRecord {
            code_hash: TokenHash::of("code"),
            client_id: "c".into(),
            account_id: account,
            consent_id: consent,
            redirect_uri: "https://a.example/cb".into(),
            code_challenge: "x".repeat(43),
            resource: "https://mcp.example/mcp".into(),
            scope: "mcp:read".into(),
            issuer: None,
            created_at: 1,
            expires_at: 600,
            used_at: None,
            dpop_jkt: None,
            grant_expires_at: None,
        };
        store.insert_code(&code).await.unwrap();
        let tokens = NewTokens {
            refresh_hash: TokenHash::of("rt-0"),
            access_hash: TokenHash::of("at-0"),
            access_expires_at: 9000,
            scope: "mcp:read".into(),
            jkt: None,
            refresh_jkt: None,
        };
        assert!(matches!(
            store.redeem_code(&code, &tokens, 2).await.unwrap(),
            Redeemed::Issued { .. }
        ));
        (store, tokens.refresh_hash)
    }

    // A request cancelled while its rotation waits for the write turn must take the rotation
    // out of the queue: run later by another request's group, it would mark the token rotated
    // at a time long past, and the client's next try with that token would look like reuse
    // once the grace window is over.
    #[tokio::test]
    async fn a_cancelled_rotation_leaves_the_queue_and_its_token_unrotated() {
        let dir = tempfile::tempdir().unwrap();
        let (store, refresh) = store_with_grant(&dir).await;
        let state = store.refresh_state(&refresh).await.unwrap().unwrap();
        let next = NewTokens {
            refresh_hash: TokenHash::of("rt-1"),
            access_hash: TokenHash::of("at-1"),
            access_expires_at: 9000,
            scope: "mcp:read".into(),
            jkt: None,
            refresh_jkt: None,
        };
        // Another writer holds the turn; the rotation queues behind it.
        let holder = store.begin_write().await.unwrap();
        let mut rotation = Box::pin(store.rotate_refresh(&refresh, &state, b"s", &next, 3));
        tokio::select! {
            biased;
            r = &mut rotation => panic!("the rotation ran while the turn was held: {r:?}"),
            () = std::future::ready(()) => {}
        }
        assert_eq!(store.rotations.waiting.queued(), 1, "queued");
        drop(rotation);
        assert_eq!(
            store.rotations.waiting.queued(),
            0,
            "withdrawn when cancelled"
        );
        holder.rollback().await.unwrap();
        // The next rotation of the same token runs alone and wins.
        let again = NewTokens {
            refresh_hash: TokenHash::of("rt-2"),
            access_hash: TokenHash::of("at-2"),
            ..next.clone()
        };
        assert_eq!(
            store
                .rotate_refresh(&refresh, &state, b"s", &again, 4)
                .await
                .unwrap(),
            Rotation::Rotated
        );
        assert!(
            store
                .refresh_state(&next.refresh_hash)
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            store
                .refresh_state(&again.refresh_hash)
                .await
                .unwrap()
                .is_some()
        );
    }

    // Another writer (another process, the command line) holding SQLite's write lock makes the
    // in-place write connection, which never waits, fail at once: the group is rolled back
    // there and written through the pool, which waits for the lock. The rotation is neither
    // lost nor answered as busy, and is written exactly once.
    #[tokio::test]
    async fn a_group_refused_in_place_is_written_through_the_pool() {
        use sqlx::Connection;
        let dir = tempfile::tempdir().unwrap();
        let (store, refresh) = store_with_grant(&dir).await;
        let state = store.refresh_state(&refresh).await.unwrap().unwrap();
        let before = store.in_place_stats().unwrap();
        let url = format!("sqlite://{}", dir.path().join("r.db").display());
        let mut other = AnyConnection::connect(&url).await.unwrap();
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut other)
            .await
            .unwrap();
        let next = NewTokens {
            refresh_hash: TokenHash::of("rt-pool"),
            access_hash: TokenHash::of("at-pool"),
            access_expires_at: 9000,
            scope: "mcp:read".into(),
            jkt: None,
            refresh_jkt: None,
        };
        let rotation = {
            let (store, refresh, state, next) =
                (store.clone(), refresh.clone(), state.clone(), next.clone());
            tokio::spawn(
                async move { store.rotate_refresh(&refresh, &state, b"s", &next, 3).await },
            )
        };
        // The in-place try fails while the lock is held; the pool's try waits for it. (Within
        // `UNWRITABLE_PAUSE` of another test of this process finding a file unwritable, the
        // write skips the in-place try and goes to the pool at once, counted as paused.)
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let handed_to_pool = |stats: crate::store::in_place::InPlaceStats| {
            stats.write_fallbacks + stats.paused > before.write_fallbacks + before.paused
        };
        while !handed_to_pool(store.in_place_stats().unwrap()) {
            assert!(
                std::time::Instant::now() < deadline,
                "the in-place write was never tried"
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert!(!rotation.is_finished(), "answered while the lock was held");
        sqlx::query("COMMIT").execute(&mut other).await.unwrap();
        let rotated = tokio::time::timeout(std::time::Duration::from_secs(10), rotation)
            .await
            .expect("the pool's write followed the lock's release")
            .unwrap()
            .unwrap();
        assert_eq!(rotated, Rotation::Rotated);
        let after = store.in_place_stats().unwrap();
        assert_eq!(after.writes, before.writes, "nothing committed in place");
        assert!(
            store
                .refresh_state(&next.refresh_hash)
                .await
                .unwrap()
                .is_some()
        );
        let rows: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM access_tokens WHERE token_hash = $1")
                .bind(next.access_hash.as_str())
                .fetch_one(&store.pool())
                .await
                .unwrap();
        assert_eq!(rows, 1, "the new access token written once");
        let state = store.refresh_state(&refresh).await.unwrap().unwrap();
        assert_eq!(state.rotated_at, Some(3));
    }
}
