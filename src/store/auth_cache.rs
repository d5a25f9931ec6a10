//! The validation cache: live credential lookups (access token, API key, personal URL → grant)
//! kept in this process for a few seconds, so that a request with a credential seen a moment
//! ago does not run the lookup's join again. Used unless `GATEHOUSE_AUTH_CACHE=off`
//! ([`Store::set_auth_cache`]; why: docs/architecture.md "Validation cache"); while off every
//! lookup goes to the database. Revocation can never outrun it:
//!
//! - Only live answers are kept, each at most [`CACHE_TTL`] and never past the credential's own
//!   expiry; at most [`CACHE_CAPACITY`] of them (a full cache keeps what it has and stores
//!   nothing more until entries age out).
//! - Every change to a row the lookups read (access tokens, families, consents, account status,
//!   project status, memberships, service clients, API keys, personal URLs) is announced by the
//!   database itself, through triggers (migration `0012_auth_generation`), whoever writes it: a
//!   server instance, the command line in another process, an operator with `psql`.
//!   - `SQLite` raises a generation row. A cached answer is used only after reading that row (one
//!     single-row query, cheaper than the lookup's joins): a changed generation empties the
//!     cache first. So every writer, in this process or another, is seen by the next request.
//!   - `PostgreSQL` sends `NOTIFY gatehouse_auth` when the writing transaction commits; every
//!     instance listens ([`Store::start_auth_listener`], sqlx `PgListener`) and empties its
//!     cache on each notification. While the listener is not connected, or has not heard its
//!     own heartbeat (a notification it sends itself every [`HEARTBEAT`]) within
//!     [`HEARTBEAT_STALE`], the cache is bypassed: no answer is read from it or stored in it,
//!     and it is emptied when the listener comes back.
//! - The store's own revoking methods also empty the cache of their process right after they
//!   commit, so a revocation answered by this instance is seen by its next request without
//!   waiting for the notification.
//! - A lookup that ran before an invalidation never lands in the cache after it: each
//!   invalidation raises an epoch, and an answer is stored only if the epoch it started under
//!   is still current.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::keys::KeyGrant;
use super::oauth::{AccessGrant, ClientRecord};
use super::{Backend, Store, StoreError};
use crate::domain::secret::TokenHash;

/// Longest time a cached lookup is used (seconds).
pub const CACHE_TTL: i64 = 30;

/// Most lookups kept at once.
pub const CACHE_CAPACITY: usize = 10_000;

/// The `PostgreSQL` channel of invalidations (sent by the triggers of migration 0011).
pub const AUTH_CHANNEL: &str = "gatehouse_auth";

/// How often a listening instance notifies itself to prove its listener still hears.
pub const HEARTBEAT: Duration = Duration::from_millis(500);

/// How long without hearing anything (heartbeat or invalidation) before the cache is bypassed.
pub const HEARTBEAT_STALE: Duration = Duration::from_millis(2_000);

/// Which kind of lookup a cached answer belongs to (the key of the cache is kind + the
/// credential's hash, or the `client_id` of a client).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    AccessToken,
    ApiKey,
    PersonalUrl,
    Client,
}

/// A cached live answer.
#[derive(Debug, Clone)]
enum Grant {
    Access(AccessGrant),
    Key(KeyGrant),
    Client(Box<ClientRecord>),
}

#[derive(Debug)]
struct Entry {
    grant: Grant,
    /// Unix seconds after which the entry is not used (the earlier of the credential's expiry
    /// and the time it was stored plus [`CACHE_TTL`]).
    until: i64,
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<(Kind, String), Entry>,
    /// Raised by every invalidation.
    epoch: u64,
    /// `SQLite`: the generation row's value the entries belong to.
    generation: i64,
}

/// How this process learns of changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `SQLite`: the generation row, read before each use.
    Generation,
    /// `PostgreSQL`: `LISTEN`; bypassed until the listener runs and hears.
    Notify,
}

/// The cache of one [`Store`] (shared by its clones).
#[derive(Debug)]
pub(crate) struct AuthCache {
    inner: Mutex<Inner>,
    mode: Mode,
    /// Whether the cache is used at all (`GATEHOUSE_AUTH_CACHE`).
    enabled: AtomicBool,
    /// `PostgreSQL`: the listener is connected and listening.
    listening: AtomicBool,
    /// `PostgreSQL`: when the listener last heard anything, in milliseconds since `started`.
    heard_ms: AtomicU64,
    started: Instant,
}

/// What a caller may do with the cache for one lookup.
#[derive(Debug, Clone, Copy)]
struct Ticket {
    epoch: u64,
}

/// Whether the validation cache may be used, looked at once for the lookups of one request
/// ([`Store::cache_ticket`]). On `SQLite` the look is the read of the generation row, a read
/// transaction of its own; a request that makes two cached lookups (introspection: the
/// client, then the token) takes one ticket and hands it to both (`*_with` methods), so its
/// answer is the database as of that read, like a request that ran at that moment.
///
/// On `PostgreSQL` a ticket costs nothing to take (whether the listener hears), so every lookup
/// looks again with its own; only `SQLite`'s reading of the row is shared.
#[derive(Debug, Clone, Copy)]
pub struct CacheTicket(Option<Ticket>);

impl CacheTicket {
    /// A ticket that sends every lookup made with it to the database (for a request that took
    /// none because its lookup was not of the cache's kinds, such as a client metadata document).
    pub fn bypass() -> CacheTicket {
        CacheTicket(None)
    }
}

impl AuthCache {
    pub(crate) fn new(backend: Backend) -> AuthCache {
        AuthCache {
            inner: Mutex::new(Inner::default()),
            mode: match backend {
                Backend::Sqlite => Mode::Generation,
                Backend::Postgres => Mode::Notify,
            },
            enabled: AtomicBool::new(false),
            listening: AtomicBool::new(false),
            heard_ms: AtomicU64::new(0),
            started: Instant::now(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        match self.inner.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Empties the cache; lookups that started before are not stored.
    pub(crate) fn invalidate(&self) {
        let mut inner = self.lock();
        inner.epoch = inner.epoch.wrapping_add(1);
        inner.entries.clear();
    }

    fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn heard(&self) {
        self.heard_ms.store(self.elapsed_ms(), Ordering::SeqCst);
    }

    /// `PostgreSQL`: whether the listener is connected and heard something recently.
    fn hearing(&self) -> bool {
        self.listening.load(Ordering::SeqCst)
            && self
                .elapsed_ms()
                .saturating_sub(self.heard_ms.load(Ordering::SeqCst))
                < HEARTBEAT_STALE.as_millis() as u64
    }

    fn set_listening(&self, on: bool) {
        if on {
            // Whatever happened while nobody listened is unknown: start empty.
            self.invalidate();
            self.heard();
            self.listening.store(true, Ordering::SeqCst);
        } else {
            self.listening.store(false, Ordering::SeqCst);
            self.invalidate();
        }
    }

    /// `SQLite`: aligns the cache with the generation read from the database. A newer generation
    /// empties it; an older one (read before another request saw the newer) means this request
    /// must not use it. Returns whether it may be used.
    fn at_generation(&self, generation: i64) -> bool {
        let mut inner = self.lock();
        if generation > inner.generation {
            inner.generation = generation;
            inner.epoch = inner.epoch.wrapping_add(1);
            inner.entries.clear();
        }
        generation == inner.generation
    }

    fn ticket(&self) -> Ticket {
        Ticket {
            epoch: self.lock().epoch,
        }
    }

    fn get(&self, kind: Kind, key: &str, now: i64) -> Option<Grant> {
        let inner = self.lock();
        let entry = inner.entries.get(&(kind, key.to_string()))?;
        (now < entry.until).then(|| entry.grant.clone())
    }

    fn put(&self, ticket: Ticket, kind: Kind, key: &str, grant: Grant, until: i64) {
        let mut inner = self.lock();
        if inner.epoch != ticket.epoch {
            return;
        }
        if inner.entries.len() >= CACHE_CAPACITY {
            let now = super::now();
            inner.entries.retain(|_, e| e.until > now);
            if inner.entries.len() >= CACHE_CAPACITY {
                return;
            }
        }
        inner
            .entries
            .insert((kind, key.to_string()), Entry { grant, until });
    }

    /// How many answers are cached (for the unit tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Whether an answer is cached under `key`, of any kind ([`Store::is_cached`]).
    fn holds(&self, key: &str) -> bool {
        self.lock().entries.keys().any(|(_, k)| k == key)
    }
}

impl Store {
    /// The cache may be used for this lookup: a ticket to store the answer with, or `None` to
    /// go to the database and leave the cache alone.
    async fn auth_ticket(&self) -> Result<Option<Ticket>, StoreError> {
        let cache = &self.auth_cache;
        if !cache.enabled.load(Ordering::SeqCst) {
            return Ok(None);
        }
        match cache.mode {
            Mode::Notify => Ok(cache.hearing().then(|| cache.ticket())),
            Mode::Generation => {
                const GENERATION: &str = "SELECT generation FROM auth_generation WHERE id = 1";
                let generation: i64 = match self.read_in_place(|conn| {
                    conn.prepare_cached(GENERATION)?
                        .query_row([], |row| row.get(0))
                }) {
                    Some(generation) => generation,
                    None => {
                        sqlx::query_scalar(GENERATION)
                            .fetch_one(&self.pool())
                            .await?
                    }
                };
                Ok(cache.at_generation(generation).then(|| cache.ticket()))
            }
        }
    }

    /// A [`CacheTicket`] for the lookups of one request: on `SQLite` one read of the
    /// generation row (emptying the cache first if it moved), on `PostgreSQL` whether the
    /// listener hears; with the cache off, a ticket that sends every lookup to the database.
    ///
    /// Errors: [`StoreError::Database`] when the generation row cannot be read.
    pub async fn cache_ticket(&self) -> Result<CacheTicket, StoreError> {
        Ok(CacheTicket(self.auth_ticket().await?))
    }

    /// What `ticket` allows now: on `SQLite` what it allowed when taken (the generation row's
    /// reading it stands for); on `PostgreSQL` nothing once the listener has stopped hearing
    /// (two atomic loads, no database work), so that no lookup trusts a listener that has
    /// since gone quiet. An invalidation since the ticket was taken needs no look: it emptied
    /// the cache, and its epoch refuses what the ticket would store.
    fn still(&self, CacheTicket(ticket): CacheTicket) -> Option<Ticket> {
        match self.auth_cache.mode {
            Mode::Generation => ticket,
            Mode::Notify => ticket.filter(|_| self.auth_cache.hearing()),
        }
    }

    /// Empties this process's validation cache: called by the store's revoking methods after
    /// they commit (other processes learn of the change from the database).
    pub(crate) fn auth_changed(&self) {
        self.auth_cache.invalidate();
    }

    /// Turns the validation cache on or off for this store and its clones
    /// (`GATEHOUSE_AUTH_CACHE`; while off every lookup goes to the database). Turning it off
    /// empties it.
    pub fn set_auth_cache(&self, on: bool) {
        self.auth_cache.invalidate();
        self.auth_cache.enabled.store(on, Ordering::SeqCst);
    }

    /// How many times this process's validation cache was emptied (by an announcement or
    /// by the store's own revoking methods); tests wait on it for another process's change
    /// to be heard.
    pub fn auth_cache_epoch(&self) -> u64 {
        self.auth_cache.lock().epoch
    }

    /// Whether cached answers are being used on the strength of `PostgreSQL` notifications
    /// (the cache is on, and the listener connected and hearing): a change written by another
    /// process is then seen once its notification arrives, not before.
    pub fn auth_cache_waits_for_notifications(&self) -> bool {
        let cache = &self.auth_cache;
        cache.enabled.load(Ordering::SeqCst) && cache.mode == Mode::Notify && cache.hearing()
    }

    /// Whether this process has a live answer cached for `key`: a credential's stored hash
    /// ([`TokenHash::as_str`] of an access token, API key or personal URL secret) or a
    /// registered client's `client_id` (diagnostics and tests: unlike a count, it cannot be
    /// fooled by an invalidation that empties other entries meanwhile).
    pub fn is_cached(&self, key: &str) -> bool {
        self.auth_cache.holds(key)
    }

    /// [`Store::authenticate_access_token`] through the validation cache (module
    /// documentation): the same answer, from memory when a live answer for this hash was
    /// stored less than [`CACHE_TTL`] seconds ago and nothing it reads changed since.
    ///
    /// Errors: [`StoreError::Database`] when the database cannot be asked.
    pub async fn live_access_token(
        &self,
        hash: &TokenHash,
        now: i64,
    ) -> Result<Option<AccessGrant>, StoreError> {
        self.live_access_token_with(self.cache_ticket().await?, hash, now)
            .await
    }

    /// [`Store::live_access_token`] with a ticket this request already took
    /// ([`Store::cache_ticket`]).
    ///
    /// Errors: [`StoreError::Database`] when the database cannot be asked.
    pub async fn live_access_token_with(
        &self,
        ticket: CacheTicket,
        hash: &TokenHash,
        now: i64,
    ) -> Result<Option<AccessGrant>, StoreError> {
        let ticket = self.still(ticket);
        if ticket.is_some()
            && let Some(Grant::Access(grant)) =
                self.auth_cache.get(Kind::AccessToken, hash.as_str(), now)
            && grant.expires_at > now
        {
            return Ok(Some(grant));
        }
        let found = self.authenticate_access_token(hash, now).await?;
        if let (Some(ticket), Some(grant)) = (ticket, &found) {
            let until = grant.expires_at.min(now + CACHE_TTL);
            self.auth_cache.put(
                ticket,
                Kind::AccessToken,
                hash.as_str(),
                Grant::Access(grant.clone()),
                until,
            );
        }
        Ok(found)
    }

    /// [`Store::authenticate_api_key`] through the validation cache (see
    /// [`Store::live_access_token`]).
    ///
    /// Errors: [`StoreError::Database`] when the database cannot be asked.
    pub async fn live_api_key(
        &self,
        hash: &TokenHash,
        now: i64,
    ) -> Result<Option<KeyGrant>, StoreError> {
        self.live_key(Kind::ApiKey, hash, now).await
    }

    /// [`Store::authenticate_personal_url`] through the validation cache (see
    /// [`Store::live_access_token`]).
    ///
    /// Errors: [`StoreError::Database`] when the database cannot be asked.
    pub async fn live_personal_url(
        &self,
        hash: &TokenHash,
        now: i64,
    ) -> Result<Option<KeyGrant>, StoreError> {
        self.live_key(Kind::PersonalUrl, hash, now).await
    }

    /// The registered client `client_id` ([`Store::client_lookup`]) through the validation
    /// cache: a client seen less than [`CACHE_TTL`] seconds ago, with nothing announced since
    /// (clients are announced when updated or deleted, migration `0014_client_announcements`),
    /// comes from memory. Unknown clients are never cached.
    ///
    /// Errors: [`StoreError::Database`] when the database cannot be asked.
    pub async fn client(&self, client_id: &str) -> Result<Option<ClientRecord>, StoreError> {
        self.client_with(self.cache_ticket().await?, client_id)
            .await
    }

    /// [`Store::client`] with a ticket this request already took ([`Store::cache_ticket`]).
    ///
    /// Errors: [`StoreError::Database`] when the database cannot be asked.
    pub async fn client_with(
        &self,
        ticket: CacheTicket,
        client_id: &str,
    ) -> Result<Option<ClientRecord>, StoreError> {
        let ticket = self.still(ticket);
        let now = super::now();
        if ticket.is_some()
            && let Some(Grant::Client(client)) = self.auth_cache.get(Kind::Client, client_id, now)
        {
            return Ok(Some(*client));
        }
        let found = self.client_lookup(client_id).await?;
        if let (Some(ticket), Some(client)) = (ticket, &found) {
            self.auth_cache.put(
                ticket,
                Kind::Client,
                client_id,
                Grant::Client(Box::new(client.clone())),
                now + CACHE_TTL,
            );
        }
        Ok(found)
    }

    async fn live_key(
        &self,
        kind: Kind,
        hash: &TokenHash,
        now: i64,
    ) -> Result<Option<KeyGrant>, StoreError> {
        let ticket = self.auth_ticket().await?;
        if ticket.is_some()
            && let Some(Grant::Key(grant)) = self.auth_cache.get(kind, hash.as_str(), now)
        {
            return Ok(Some(grant));
        }
        let found = match kind {
            Kind::PersonalUrl => self.personal_url_lookup(hash, now).await?,
            _ => self.api_key_lookup(hash, now).await?,
        };
        let Some((grant, expires_at)) = found else {
            return Ok(None);
        };
        if let Some(ticket) = ticket {
            let until = expires_at.map_or(now + CACHE_TTL, |at| at.min(now + CACHE_TTL));
            self.auth_cache.put(
                ticket,
                kind,
                hash.as_str(),
                Grant::Key(grant.clone()),
                until,
            );
        }
        Ok(Some(grant))
    }

    /// `PostgreSQL`: starts listening for invalidations (`LISTEN gatehouse_auth`) with the
    /// heartbeat; until it hears, and whenever it stops hearing, the cache is bypassed. The
    /// listener reconnects on its own (after 0.25–2 s). `None` on `SQLite` (nothing to listen
    /// to) or when already started. Must be called inside a Tokio runtime; the tasks run until
    /// [`AuthListener::stop`].
    pub fn start_auth_listener(&self) -> Option<AuthListener> {
        if self.auth_cache.mode != Mode::Notify {
            return None;
        }
        let url = self.url.clone();
        if self.auth_listener_started.swap(true, Ordering::SeqCst) {
            return None;
        }
        let heartbeat = format!("gatehouse_heartbeat_{}", uuid::Uuid::new_v4().simple());
        let listen = tokio::spawn(listen_loop(
            self.clone(),
            url.to_string(),
            heartbeat.clone(),
        ));
        let beat = tokio::spawn(heartbeat_loop(self.clone(), heartbeat));
        Some(AuthListener { listen, beat })
    }
}

/// The running invalidation listener of a `PostgreSQL` store ([`Store::start_auth_listener`]).
#[derive(Debug)]
pub struct AuthListener {
    listen: tokio::task::JoinHandle<()>,
    beat: tokio::task::JoinHandle<()>,
}

impl AuthListener {
    /// Stops listening; the cache is bypassed from then on.
    pub fn stop(self) {
        self.listen.abort();
        self.beat.abort();
    }
}

/// Connects, listens, and empties the cache on every invalidation; on a lost connection
/// bypasses the cache and reconnects.
async fn listen_loop(store: Store, url: String, heartbeat: String) {
    let cache = &store.auth_cache;
    let mut backoff = Duration::from_millis(250);
    loop {
        let connected = async {
            let mut listener = sqlx::postgres::PgListener::connect(&url).await?;
            listener
                .listen_all([AUTH_CHANNEL, heartbeat.as_str()])
                .await?;
            Ok::<_, sqlx::Error>(listener)
        }
        .await;
        match connected {
            Ok(mut listener) => {
                backoff = Duration::from_millis(250);
                cache.set_listening(true);
                tracing::debug!("validation cache: listening for invalidations");
                loop {
                    match listener.try_recv().await {
                        Ok(Some(notification)) => {
                            if notification.channel() == AUTH_CHANNEL {
                                cache.invalidate();
                            }
                            cache.heard();
                        }
                        Ok(None) => {
                            tracing::warn!(
                                "validation cache: the listener lost its connection; bypassing the cache"
                            );
                            break;
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "validation cache: the listener failed; bypassing the cache");
                            break;
                        }
                    }
                }
                cache.set_listening(false);
            }
            Err(e) => {
                tracing::warn!(error = %e, "validation cache: cannot listen; bypassing the cache");
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
}

/// Notifies this instance's heartbeat channel every [`HEARTBEAT`], through the pool.
async fn heartbeat_loop(store: Store, channel: String) {
    let mut tick = tokio::time::interval(HEARTBEAT);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Err(e) = sqlx::query("SELECT pg_notify($1, '')")
            .bind(&channel)
            .execute(&store.pool())
            .await
        {
            tracing::debug!(error = %e, "validation cache: heartbeat not sent");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cache key of the credential whose secret is `s`.
    fn hash(s: &str) -> String {
        TokenHash::of(s).as_str().to_string()
    }

    fn key() -> Grant {
        Grant::Key(KeyGrant {
            id: "k".into(),
            account_id: "a".into(),
            project_id: None,
            scope: "mcp:read".into(),
            allowed_ips: Vec::new(),
            last_used_at: None,
            calls_per_hour: None,
        })
    }

    #[test]
    fn an_invalidation_drops_entries_and_refuses_older_lookups() {
        let cache = AuthCache::new(Backend::Sqlite);
        let t = cache.ticket();
        cache.put(t, Kind::ApiKey, &hash("a"), key(), 200);
        assert!(cache.get(Kind::ApiKey, &hash("a"), 100).is_some());
        assert!(cache.get(Kind::PersonalUrl, &hash("a"), 100).is_none());
        assert!(cache.get(Kind::ApiKey, &hash("a"), 200).is_none(), "until");
        let before = cache.ticket();
        cache.invalidate();
        assert!(cache.get(Kind::ApiKey, &hash("a"), 100).is_none());
        cache.put(before, Kind::ApiKey, &hash("b"), key(), 200);
        assert_eq!(
            cache.len(),
            0,
            "a lookup older than the invalidation is not kept"
        );
    }

    #[test]
    fn generations_only_move_forward() {
        let cache = AuthCache::new(Backend::Sqlite);
        assert!(cache.at_generation(0));
        let t = cache.ticket();
        cache.put(t, Kind::ApiKey, &hash("a"), key(), 200);
        assert!(cache.at_generation(3));
        assert_eq!(cache.len(), 0);
        assert!(
            !cache.at_generation(2),
            "an older reading may not use the cache"
        );
        assert!(cache.at_generation(3));
    }

    #[test]
    fn the_cache_is_bounded() {
        let cache = AuthCache::new(Backend::Sqlite);
        let far = super::super::now() + 1_000;
        for i in 0..CACHE_CAPACITY + 10 {
            let t = cache.ticket();
            cache.put(t, Kind::ApiKey, &hash(&i.to_string()), key(), far);
        }
        assert_eq!(cache.len(), CACHE_CAPACITY);
    }

    #[test]
    fn postgres_is_bypassed_until_the_listener_hears() {
        let cache = AuthCache::new(Backend::Postgres);
        assert!(!cache.hearing());
        cache.set_listening(true);
        assert!(cache.hearing());
        cache.set_listening(false);
        assert!(!cache.hearing());
    }
}
