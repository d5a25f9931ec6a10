//! The validation cache: live credential lookups (access token, API key, personal URL → grant)
//! kept in this process for a few seconds, so that a request with a credential seen a moment
//! ago does not run the lookup's join again. Used unless `GATEHOUSE_AUTH_CACHE=off`
//! ([`Store::set_auth_cache`]; why: docs/design-notes.md "Validation cache"); while off every
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
//!     cache on each notification. Freshness, not liveness, decides whether the cache is used:
//!     every [`HEARTBEAT`] the instance notifies its own heartbeat channel (on a connection of
//!     its own) with the time it sends it, and `PostgreSQL` delivers notifications in the
//!     order their transactions committed. So once the listener has heard the heartbeat sent
//!     at time S, it has heard (and applied) every change committed before S: the cache is
//!     current as of S. A cached answer is used only while the newest heartbeat heard was sent
//!     less than [`CURRENT_FOR`] ago; a listener path that delivers late (or not at all) makes
//!     every heartbeat it delivers too old, and the cache is bypassed, however much it hears.
//!   - The other half: every revoking method of the store, once its change has committed,
//!     waits [`ANNOUNCE_WAIT`] (longer than [`CURRENT_FOR`]) before it returns. By then every
//!     instance has either heard the change or heard no heartbeat sent after it, so it refuses
//!     the credential on its next request: the request that follows `gatehouse key revoke`,
//!     RFC 7009 revocation or a withdrawn consent on any instance is refused on every other
//!     one. A change made outside Gatehouse (an operator's `psql`) is seen within
//!     [`CURRENT_FOR`].
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

use super::hot::{HotLookup, Lookup};
use super::in_place::FromSqliteRow;
use super::keys::KeyGrant;
use super::oauth::{AccessGrant, ClientRecord};
use super::{Backend, Store, StoreError};
use crate::domain::secret::TokenHash;

/// Longest time a cached lookup is used (seconds).
pub const CACHE_TTL: i64 = 30;

/// Most lookups kept at once.
pub const CACHE_CAPACITY: usize = 10_000;

/// The `PostgreSQL` channel of invalidations (sent by the triggers of migration `0012_auth_generation`).
pub const AUTH_CHANNEL: &str = "gatehouse_auth";

/// How often a listening instance notifies its own heartbeat channel with the time it sends it.
pub const HEARTBEAT: Duration = Duration::from_millis(50);

/// `PostgreSQL`: the cache is used only while the newest heartbeat heard was sent less than this
/// long ago (it is then current as of that heartbeat's sending; module documentation).
pub const CURRENT_FOR: Duration = Duration::from_millis(250);

/// `PostgreSQL`: how long a revoking method waits after its change committed before it returns,
/// so that no instance still uses a cached answer from before the change: [`CURRENT_FOR`] and a
/// margin for the clocks of two machines running at slightly different rates.
pub const ANNOUNCE_WAIT: Duration = Duration::from_millis(300);

/// Which kind of lookup a cached answer belongs to (the key of the cache is kind + the
/// credential's hash, or the `client_id` of a client).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Kind {
    AccessToken,
    ApiKey,
    PersonalUrl,
    Client,
}

impl Kind {
    /// Every kind of cached lookup.
    #[cfg(test)]
    pub(super) const ALL: [Kind; 4] = [
        Kind::AccessToken,
        Kind::ApiKey,
        Kind::PersonalUrl,
        Kind::Client,
    ];

    /// The SQL of this kind's lookup: every table it names must announce its changes
    /// (`store::trigger_coverage` checks the migrations against it).
    #[cfg(test)]
    pub(super) fn lookup_sql(self) -> String {
        match self {
            Kind::AccessToken => super::oauth::ACCESS_TOKEN.sql.to_string(),
            Kind::ApiKey => {
                super::keys::key_lookup_sql(crate::domain::principal::IssuedCredential::ApiKey)
                    .to_string()
            }
            Kind::PersonalUrl => {
                super::keys::key_lookup_sql(crate::domain::principal::IssuedCredential::PersonalUrl)
                    .to_string()
            }
            Kind::Client => super::oauth::CLIENT.sql.to_string(),
        }
    }
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
    /// `PostgreSQL`: the time, in milliseconds since `started`, as of which the cache is known
    /// to be current: the sending time of the newest heartbeat heard, or the moment the
    /// listener started listening (with an empty cache).
    current_ms: AtomicU64,
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
pub(crate) struct CacheTicket(Option<Ticket>);

/// One request's reads through the validation cache ([`Store::reads`]): the cache's ticket
/// ([`Store::cache_ticket`]) is taken at its first cached lookup, and every later lookup of
/// the same request uses it, so a request that authenticates a client and then introspects a
/// token reads `SQLite`'s generation row once.
#[derive(Debug, Clone)]
pub struct Reads {
    store: Store,
    ticket: Option<CacheTicket>,
}

impl Reads {
    /// The store these reads are made of.
    pub fn store(&self) -> &Store {
        &self.store
    }

    async fn ticket(&mut self) -> Result<CacheTicket, StoreError> {
        if let Some(ticket) = self.ticket {
            return Ok(ticket);
        }
        let ticket = self.store.cache_ticket().await?;
        self.ticket = Some(ticket);
        Ok(ticket)
    }

    /// [`Store::client`] with this request's ticket.
    ///
    /// Errors: [`StoreError::Database`] when the database cannot be asked.
    pub async fn client(&mut self, client_id: &str) -> Result<Option<ClientRecord>, StoreError> {
        let ticket = self.ticket().await?;
        self.store.client_with(ticket, client_id).await
    }

    /// [`Store::live_access_token`] with this request's ticket.
    ///
    /// Errors: [`StoreError::Database`] when the database cannot be asked.
    pub async fn live_access_token(
        &mut self,
        hash: &TokenHash,
        now: i64,
    ) -> Result<Option<AccessGrant>, StoreError> {
        let ticket = self.ticket().await?;
        self.store.live_access_token_with(ticket, hash, now).await
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
            current_ms: AtomicU64::new(0),
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

    /// The listener heard the heartbeat sent at `sent_ms` (milliseconds since `started`):
    /// every change committed before then has been heard and applied.
    fn current_as_of(&self, sent_ms: u64) {
        self.current_ms.fetch_max(sent_ms, Ordering::SeqCst);
    }

    /// `PostgreSQL`: whether the listener is connected and the cache is current as of less
    /// than [`CURRENT_FOR`] ago.
    fn current(&self) -> bool {
        self.listening.load(Ordering::SeqCst)
            && self
                .elapsed_ms()
                .saturating_sub(self.current_ms.load(Ordering::SeqCst))
                < CURRENT_FOR.as_millis() as u64
    }

    fn set_listening(&self, on: bool) {
        if on {
            // Whatever happened while nobody listened is unknown: start empty. What is cached
            // from now on is read after `LISTEN`, so any later change will be heard.
            self.invalidate();
            self.current_as_of(self.elapsed_ms());
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

/// The validation cache's generation (`SQLite`), raised by the triggers of every table a cached
/// lookup reads.
#[derive(Debug, Clone, sqlx::FromRow)]
struct Generation {
    generation: i64,
}

impl FromSqliteRow for Generation {
    const COLUMNS: &'static [&'static str] = &["generation"];

    fn from_sqlite(row: &super::in_place::Named<'_, '_>) -> rusqlite::Result<Self> {
        Ok(Generation {
            generation: row.get("generation")?,
        })
    }
}

/// The generation row: a [`Generation`].
const GENERATION: Lookup<Generation, Option<Generation>> = Lookup::new(
    HotLookup::AuthGeneration,
    "SELECT generation FROM auth_generation WHERE id = 1",
);

impl Store {
    /// The reads of one request through the validation cache ([`Reads`]).
    pub fn reads(&self) -> Reads {
        Reads {
            store: self.clone(),
            ticket: None,
        }
    }

    /// The cache may be used for this lookup: a ticket to store the answer with, or `None` to
    /// go to the database and leave the cache alone.
    async fn auth_ticket(&self) -> Result<Option<Ticket>, StoreError> {
        let cache = &self.auth_cache;
        if !cache.enabled.load(Ordering::SeqCst) {
            return Ok(None);
        }
        match cache.mode {
            Mode::Notify => Ok(cache.current().then(|| cache.ticket())),
            Mode::Generation => {
                // No row (never the case after the migrations): no ticket, the database.
                let Some(Generation { generation }) = self.hot(&GENERATION, &[]).await? else {
                    return Ok(None);
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
    pub(crate) async fn cache_ticket(&self) -> Result<CacheTicket, StoreError> {
        Ok(CacheTicket(self.auth_ticket().await?))
    }

    /// What `ticket` allows now: on `SQLite` what it allowed when taken (the generation row's
    /// reading it stands for); on `PostgreSQL` nothing once the cache is no longer known to be
    /// current (two atomic loads, no database work), so that no lookup trusts a listener that
    /// has since fallen behind. An invalidation since the ticket was taken needs no look: it emptied
    /// the cache, and its epoch refuses what the ticket would store.
    fn still(&self, CacheTicket(ticket): CacheTicket) -> Option<Ticket> {
        match self.auth_cache.mode {
            Mode::Generation => ticket,
            Mode::Notify => ticket.filter(|_| self.auth_cache.current()),
        }
    }

    /// Empties this process's validation cache: called by the store's revoking methods after
    /// they commit (other processes learn of the change from the database). On `PostgreSQL` it
    /// then waits [`ANNOUNCE_WAIT`], so that when the revoking method returns no instance uses
    /// a cached answer from before the change (module documentation).
    pub(crate) async fn auth_changed(&self) {
        self.auth_cache.invalidate();
        if self.auth_cache.mode == Mode::Notify {
            tokio::time::sleep(ANNOUNCE_WAIT).await;
        }
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
    /// (the cache is on, the listener connected and current): a change written by another
    /// process is then seen once its notification arrives, not before.
    pub fn auth_cache_waits_for_notifications(&self) -> bool {
        let cache = &self.auth_cache;
        cache.enabled.load(Ordering::SeqCst) && cache.mode == Mode::Notify && cache.current()
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
    async fn live_access_token_with(
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
    async fn client_with(
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
    /// heartbeat; until the cache is known current, and whenever it no longer is, the cache is
    /// bypassed. The listener connects to `listen_url` when given
    /// (`GATEHOUSE_LISTEN_DATABASE_URL`: the same database reached another way, such as past a
    /// pooler that cannot `LISTEN`), else to the store's own URL; the heartbeat is sent on a
    /// connection of its own to the store's URL. Both reconnect on their own (after 0.25–2 s).
    /// `None` on `SQLite` (nothing to listen to) or when already started. Must be called inside
    /// a Tokio runtime; the tasks run until [`AuthListener::stop`].
    pub fn start_auth_listener(&self, listen_url: Option<&str>) -> Option<AuthListener> {
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
            listen_url.map_or_else(|| url.to_string(), str::to_string),
            heartbeat.clone(),
        ));
        let beat = tokio::spawn(heartbeat_loop(self.clone(), url.to_string(), heartbeat));
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
                            } else if let Ok(sent_ms) = notification.payload().parse::<u64>() {
                                // Our own heartbeat channel: every change committed before
                                // it was sent has been heard (commit order).
                                cache.current_as_of(sent_ms);
                            }
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

/// Notifies this instance's heartbeat channel every [`HEARTBEAT`] with the time of sending
/// (milliseconds since the cache's start), on a connection of its own (a busy pool must not
/// delay it: a late heartbeat is taken as a late listener and bypasses the cache).
async fn heartbeat_loop(store: Store, url: String, channel: String) {
    use sqlx::Connection as _;
    let cache = &store.auth_cache;
    let mut backoff = Duration::from_millis(250);
    loop {
        match sqlx::postgres::PgConnection::connect(&url).await {
            Ok(mut conn) => {
                backoff = Duration::from_millis(250);
                let mut tick = tokio::time::interval(HEARTBEAT);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    let sent_ms = cache.elapsed_ms().to_string();
                    if let Err(e) = sqlx::query("SELECT pg_notify($1, $2)")
                        .bind(&channel)
                        .bind(&sent_ms)
                        .execute(&mut conn)
                        .await
                    {
                        tracing::debug!(error = %e, "validation cache: heartbeat not sent");
                        break;
                    }
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "validation cache: heartbeat cannot connect");
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(2));
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
            tool_filter: None,
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
        assert!(!cache.current());
        cache.set_listening(true);
        assert!(cache.current());
        cache.set_listening(false);
        assert!(!cache.current());
    }

    /// A listener that keeps hearing, but late, is not current: only the sending time of the
    /// heartbeats it hears counts.
    #[test]
    fn postgres_trusts_only_heartbeats_sent_recently() {
        let cache = AuthCache::new(Backend::Postgres);
        cache.set_listening(true);
        std::thread::sleep(CURRENT_FOR + Duration::from_millis(50));
        assert!(!cache.current(), "nothing heard since listening began");
        // A heartbeat heard now but sent at the start (a path delaying it by CURRENT_FOR).
        cache.current_as_of(0);
        assert!(
            !cache.current(),
            "a late heartbeat does not make it current"
        );
        cache.current_as_of(cache.elapsed_ms());
        assert!(cache.current(), "a heartbeat sent just now does");
        // An older heartbeat heard after a newer one changes nothing.
        cache.current_as_of(0);
        assert!(cache.current());
    }
}
