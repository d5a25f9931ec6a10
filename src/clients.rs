//! Finding the client behind a `client_id`: a registered one (RFC 7591), or a URL-shaped one
//! whose client ID metadata document is fetched, validated and cached (MCP 2025-11-25, CIMD
//! draft §3–§6). Fetches are bounded in size and time, follow no redirects, and never reach
//! private, loopback or link-local addresses; errors are never cached.
//!
//! A metadata document that would add a client not yet stored spends the caller's
//! per-address budget of registrations (`GATEHOUSE_REGISTRATIONS_PER_HOUR`, the same counter
//! as `/oauth/register`), unless the visitor is signed in: an anonymous visitor cannot add
//! clients faster than it could register them. Such clients that never get a consent are
//! deleted like registered ones (`Store::expire_unused_clients`). The in-memory cache holds
//! at most [`MAX_CACHED_DOCUMENTS`] documents, expired ones pruned when it is full, and is
//! only a cache: a client whose row is gone is fetched (and budgeted) again.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use url::Url;

use crate::domain::cimd::{
    CimdError, MAX_DOCUMENT_BYTES, cache_lifetime, is_forbidden_ip, validate_client_id_url,
    validate_document,
};
use crate::domain::client::ClientId;
use crate::domain::client_assertion::validate_jwks_uri;
pub use crate::domain::client_assertion::validate_trusted_uri;
use crate::store::auth_cache::Reads;
use crate::store::limits::{Admission, Limit};
use crate::store::oauth::ClientRecord;
use crate::store::{Store, StoreError};

/// A fetched document: the body (at most [`MAX_DOCUMENT_BYTES`]) and its `Cache-Control`.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// Response body.
    pub body: Vec<u8>,
    /// The `Cache-Control` header, if any.
    pub cache_control: Option<String>,
}

/// Fetches client metadata documents and clients' key sets. The real one is
/// [`HttpsFetcher`]; tests supply their own.
#[async_trait]
pub trait MetadataFetcher: Send + Sync + 'static {
    /// Fetches `url` (already validated by [`validate_client_id_url`]).
    async fn fetch(&self, url: &Url) -> Result<Fetched, CimdError>;

    /// Fetches a client's JSON Web Key Set at `url` (its `jwks_uri`, already validated by
    /// [`validate_jwks_uri`]), with the same protections as [`MetadataFetcher::fetch`]. By
    /// default the same fetch.
    async fn fetch_jwks(&self, url: &Url) -> Result<Fetched, CimdError> {
        self.fetch(url).await
    }

    /// Fetches a document an operator named on the command line (an identity provider's or a
    /// workload issuer's key set or discovery document, already validated by
    /// [`validate_trusted_uri`]): as [`MetadataFetcher::fetch_jwks`], except that plain http is
    /// fetched when the host is a loopback name or literal and resolves only to loopback
    /// addresses (a provider on the same machine: development and tests). By default the
    /// same fetch as [`MetadataFetcher::fetch_jwks`].
    async fn fetch_trusted(&self, url: &Url) -> Result<Fetched, CimdError> {
        self.fetch_jwks(url).await
    }
}

/// Largest key set fetched from a `jwks_uri`, in bytes (a few RSA keys fit many times over).
pub const MAX_JWKS_BYTES: usize = 64 * 1024;

/// Fetches over HTTPS with a 5-second budget, no redirects, a 5 KiB cap, and only after every
/// address the host resolves to has been checked against [`is_forbidden_ip`]; the connection is
/// pinned to the checked address so a second DNS answer cannot redirect it. A failed lookup,
/// connection, read or time budget, a 5xx or a 429 is [`CimdError::Unavailable`] (try again);
/// another status or an oversized body is [`CimdError::Fetch`].
#[derive(Debug, Default)]
pub struct HttpsFetcher {
    /// A test harness's own https hosts (debug builds only; see [`HarnessHosts`]).
    #[cfg(debug_assertions)]
    harness: Option<Arc<HarnessHosts>>,
}

/// Https hosts a test harness serves on loopback, with certificates from the harness's own
/// certificate authority (PEM), which only a fetcher made by [`HttpsFetcher::for_harness`]
/// trusts. Each named host is fetched at its given loopback address, which no other host
/// may use; every other host gets the whole protection (public addresses only, the
/// platform's roots). It exists in debug builds only, so a release binary has no way to
/// trust the harness or fetch from loopback, and no configuration reaches it: only a test
/// that builds its own server can.
#[cfg(debug_assertions)]
#[derive(Debug)]
pub struct HarnessHosts {
    /// The harness's certificate authority, PEM.
    pub root_pem: Vec<u8>,
    /// Host name → the loopback address it is served at.
    pub hosts: HashMap<String, SocketAddr>,
}

#[cfg(debug_assertions)]
impl HttpsFetcher {
    /// A fetcher that also reaches a test harness's `hosts` over https (debug builds only).
    pub fn for_harness(hosts: HarnessHosts) -> Self {
        HttpsFetcher {
            harness: Some(Arc::new(hosts)),
        }
    }

    /// The harness's address for `host`, when the harness serves it.
    fn harness_address(&self, host: &str) -> Option<SocketAddr> {
        self.harness.as_ref()?.hosts.get(host).copied()
    }

    /// `builder` trusting the harness's authority too, when there is a harness.
    fn with_harness_root(
        &self,
        builder: reqwest::ClientBuilder,
    ) -> Result<reqwest::ClientBuilder, CimdError> {
        Ok(match &self.harness {
            Some(h) => builder.add_root_certificate(
                reqwest::Certificate::from_pem(&h.root_pem)
                    .map_err(|e| CimdError::Unavailable(e.to_string()))?,
            ),
            None => builder,
        })
    }
}

#[cfg(not(debug_assertions))]
impl HttpsFetcher {
    fn harness_address(&self, _host: &str) -> Option<SocketAddr> {
        None
    }

    #[allow(clippy::unnecessary_wraps, clippy::unused_self)]
    fn with_harness_root(
        &self,
        builder: reqwest::ClientBuilder,
    ) -> Result<reqwest::ClientBuilder, CimdError> {
        Ok(builder)
    }
}

#[async_trait]
impl MetadataFetcher for HttpsFetcher {
    async fn fetch(&self, url: &Url) -> Result<Fetched, CimdError> {
        let result = self.fetch_inner(url, MAX_DOCUMENT_BYTES).await;
        if let Err(CimdError::Fetch(detail) | CimdError::Unavailable(detail)) = &result {
            tracing::warn!(client_id = %url, detail = %detail, "client metadata document fetch failed");
        }
        result
    }

    async fn fetch_jwks(&self, url: &Url) -> Result<Fetched, CimdError> {
        let result = self.fetch_inner(url, MAX_JWKS_BYTES).await;
        if let Err(CimdError::Fetch(detail) | CimdError::Unavailable(detail)) = &result {
            tracing::warn!(jwks_uri = %url, detail = %detail, "client key set fetch failed");
        }
        result
    }

    async fn fetch_trusted(&self, url: &Url) -> Result<Fetched, CimdError> {
        let result = if url.scheme() == "http" {
            self.fetch_loopback(url).await
        } else {
            self.fetch_inner(url, MAX_JWKS_BYTES).await
        };
        if let Err(CimdError::Fetch(detail) | CimdError::Unavailable(detail)) = &result {
            tracing::warn!(url = %url, detail = %detail, "key set or discovery document fetch failed");
        }
        result
    }
}

impl HttpsFetcher {
    /// A plain-http fetch of an operator's URL on a loopback host
    /// ([`MetadataFetcher::fetch_trusted`]): every address the host resolves to must be
    /// loopback; otherwise the limits of every fetch.
    async fn fetch_loopback(&self, url: &Url) -> Result<Fetched, CimdError> {
        if !url
            .host_str()
            .is_some_and(crate::domain::loopback::is_loopback_host)
        {
            return Err(CimdError::BadUrl(
                "plain http is fetched only from a loopback host",
            ));
        }
        self.fetch_inner(url, MAX_JWKS_BYTES).await
    }

    async fn fetch_inner(&self, url: &Url, max_bytes: usize) -> Result<Fetched, CimdError> {
        // Plain http only reaches here for an operator's URL on a loopback host.
        let loopback_http = url.scheme() == "http";
        let host = url
            .host_str()
            .ok_or(CimdError::BadUrl("it has no host"))?
            .to_string();
        let port = url.port_or_known_default().unwrap_or(443);
        let lookup_host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let harness = self
            .harness_address(&lookup_host)
            .filter(|_| !loopback_http);
        let addrs: Vec<SocketAddr> = match harness {
            Some(addr) => vec![addr],
            None => tokio::time::timeout(
                Duration::from_secs(2),
                tokio::net::lookup_host((lookup_host.as_str(), port)),
            )
            .await
            .map_err(|_| CimdError::Unavailable("DNS lookup timed out".into()))?
            .map_err(|e| CimdError::Unavailable(format!("DNS lookup failed: {e}")))?
            .collect(),
        };
        if addrs.is_empty() {
            return Err(CimdError::Unavailable("the host has no address".into()));
        }
        if harness.is_some() {
            // A test harness's own host, at the address it was given.
        } else if loopback_http {
            if !addrs.iter().all(|a| a.ip().is_loopback()) {
                return Err(CimdError::ForbiddenAddress);
            }
        } else if addrs.iter().any(|a| is_forbidden_ip(a.ip())) {
            tracing::warn!(client_id = %url, "client metadata document host resolves to a forbidden address");
            return Err(CimdError::ForbiddenAddress);
        }
        let client = self
            .with_harness_root(
                reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .timeout(Duration::from_secs(5))
                    .https_only(!loopback_http)
                    .resolve(&lookup_host, addrs[0]),
            )?
            .build()
            .map_err(|e| CimdError::Unavailable(e.to_string()))?;
        let mut response = client
            .get(url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| CimdError::Unavailable(e.without_url().to_string()))?;
        let status = response.status();
        if status != reqwest::StatusCode::OK {
            let detail = format!("HTTP status {status}");
            // A server error or a 429 may pass; any other answer is the host's final word.
            return Err(
                if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
                    CimdError::Unavailable(detail)
                } else {
                    CimdError::Fetch(detail)
                },
            );
        }
        let cache_control = response
            .headers()
            .get(reqwest::header::CACHE_CONTROL)
            .and_then(|v| v.to_str().ok())
            .map(String::from);
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| CimdError::Unavailable(e.without_url().to_string()))?
        {
            body.extend_from_slice(&chunk);
            if body.len() > max_bytes {
                return Err(CimdError::Fetch(format!(
                    "the document is larger than {max_bytes} bytes"
                )));
            }
        }
        Ok(Fetched {
            body,
            cache_control,
        })
    }
}

/// Why a client could not be found.
#[derive(Debug, thiserror::Error)]
pub enum ClientLookupError {
    /// The metadata document was refused or could not be fetched.
    #[error(transparent)]
    Metadata(#[from] CimdError),
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A new client would exceed the caller's per-address budget of registrations; retry
    /// after this many seconds.
    #[error("too many new applications from this address; retry after {0} seconds")]
    Throttled(i64),
}

/// Most client metadata documents kept in memory at once.
pub const MAX_CACHED_DOCUMENTS: usize = 1_000;

/// Whom a metadata document is fetched for: a caller whose new clients spend a per-address
/// budget (`limit`, [`crate::oauth::register::registration_budget`]), or a signed-in person.
#[derive(Debug, Clone)]
pub enum FetchFor {
    /// An anonymous caller: a new client spends one attempt of this limit.
    Budgeted(Limit),
    /// A signed-in person: no budget.
    SignedIn,
}

/// Resolves `client_id`s, caching metadata documents in memory for their HTTP lifetime (at
/// most [`MAX_CACHED_DOCUMENTS`]).
pub struct ClientResolver {
    fetcher: Arc<dyn MetadataFetcher>,
    cache: Mutex<HashMap<String, (ClientRecord, Instant)>>,
    key_sets: Mutex<HashMap<String, CachedKeySet>>,
}

/// A fetched key set: its text, until when it may be used, and when a `kid` it lacked last
/// made it be fetched again.
#[derive(Debug, Clone)]
struct CachedKeySet {
    body: Arc<Vec<u8>>,
    until: Instant,
    refreshed: Option<Instant>,
}

/// Shortest time between two fetches of one `jwks_uri` asked for by unknown `kid`s, so that
/// assertions naming made-up keys cannot make the server fetch without end.
pub const JWKS_REFETCH_INTERVAL: Duration = Duration::from_secs(30);
/// Most key sets kept in memory at once.
pub const MAX_CACHED_KEY_SETS: usize = 1_000;

/// Keeps `record` for `ttl` in `cache`, pruning expired documents when the cache is full; a
/// cache still full of live documents keeps what it has (the next use fetches again).
fn remember(
    cache: &mut HashMap<String, (ClientRecord, Instant)>,
    record: &ClientRecord,
    ttl: Duration,
) {
    let now = Instant::now();
    if cache.len() >= MAX_CACHED_DOCUMENTS && !cache.contains_key(&record.client_id) {
        cache.retain(|_, (_, until)| *until > now);
        if cache.len() >= MAX_CACHED_DOCUMENTS {
            return;
        }
    }
    cache.insert(record.client_id.clone(), (record.clone(), now + ttl));
}

impl std::fmt::Debug for ClientResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientResolver").finish_non_exhaustive()
    }
}

impl ClientResolver {
    /// A resolver using `fetcher` for metadata documents.
    pub fn new(fetcher: Arc<dyn MetadataFetcher>) -> Self {
        Self {
            fetcher,
            cache: Mutex::new(HashMap::new()),
            key_sets: Mutex::new(HashMap::new()),
        }
    }

    /// The key set (JSON text) at `jwks_uri`: the cached one while its HTTP lifetime lasts
    /// ([`cache_lifetime`]; a response that forbids caching is kept for
    /// [`JWKS_REFETCH_INTERVAL`]), else fetched through the same protected fetcher as
    /// metadata documents. `refresh` (a `kid` the cached set lacks: the client rotated its
    /// keys) fetches again, unless another `kid` did less than [`JWKS_REFETCH_INTERVAL`] ago.
    /// Errors are never cached.
    ///
    /// Errors: [`CimdError::BadUrl`] for a `jwks_uri` that is not an https URL, else the
    /// fetcher's ([`CimdError::is_temporary`] tells a failure for now).
    pub async fn key_set(&self, jwks_uri: &str, refresh: bool) -> Result<Arc<Vec<u8>>, CimdError> {
        let url = validate_jwks_uri(jwks_uri).map_err(CimdError::BadUrl)?;
        self.cached_fetch(jwks_uri, &url, refresh, false).await
    }

    /// [`ClientResolver::key_set`] for a URL an operator named (an identity provider's or a
    /// workload issuer's key set, or its OpenID Connect discovery document), cached the same
    /// way: https through the protected fetcher, or plain http on a loopback host
    /// ([`validate_trusted_uri`], [`MetadataFetcher::fetch_trusted`]).
    ///
    /// Errors: [`CimdError::BadUrl`] for any other URL, else the fetcher's.
    pub async fn trusted_document(
        &self,
        uri: &str,
        refresh: bool,
    ) -> Result<Arc<Vec<u8>>, CimdError> {
        let url = validate_trusted_uri(uri).map_err(CimdError::BadUrl)?;
        self.cached_fetch(uri, &url, refresh, true).await
    }

    async fn cached_fetch(
        &self,
        jwks_uri: &str,
        url: &Url,
        refresh: bool,
        trusted: bool,
    ) -> Result<Arc<Vec<u8>>, CimdError> {
        let now = Instant::now();
        let mut refreshed = None;
        if let Some(cached) = self
            .key_sets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(jwks_uri)
        {
            let refreshed_lately = cached
                .refreshed
                .is_some_and(|at| now.duration_since(at) < JWKS_REFETCH_INTERVAL);
            if (!refresh && cached.until > now) || (refresh && refreshed_lately) {
                return Ok(cached.body.clone());
            }
            refreshed = if refresh { Some(now) } else { cached.refreshed };
        }
        let fetched = if trusted {
            self.fetcher.fetch_trusted(url).await?
        } else {
            self.fetcher.fetch_jwks(url).await?
        };
        let body = Arc::new(fetched.body);
        let until =
            now + cache_lifetime(fetched.cache_control.as_deref()).unwrap_or(JWKS_REFETCH_INTERVAL);
        let mut sets = self.key_sets.lock().unwrap_or_else(PoisonError::into_inner);
        if sets.len() >= MAX_CACHED_KEY_SETS && !sets.contains_key(jwks_uri) {
            sets.retain(|_, c| c.until > now);
        }
        if sets.len() < MAX_CACHED_KEY_SETS || sets.contains_key(jwks_uri) {
            sets.insert(
                jwks_uri.to_string(),
                CachedKeySet {
                    body: body.clone(),
                    until,
                    refreshed,
                },
            );
        }
        Ok(body)
    }

    /// The client for `client_id`: `Ok(None)` when no such registered client exists. A
    /// URL-shaped id is resolved through its metadata document and recorded in the clients
    /// table (so consents and tokens can refer to it); a new one spends `for_whom`'s budget
    /// ([`ClientLookupError::Throttled`] when it is spent).
    pub async fn lookup(
        &self,
        store: &Store,
        client_id: &ClientId,
        for_whom: &FetchFor,
    ) -> Result<Option<ClientRecord>, ClientLookupError> {
        self.lookup_with(&mut store.reads(), client_id, for_whom)
            .await
    }

    /// [`ClientResolver::lookup`] as one of the request's cached reads (`reads`: a registered
    /// client is looked up with the request's validation-cache ticket, which its later lookups
    /// share); a metadata document, which the validation cache does not hold, is resolved as
    /// [`ClientResolver::lookup`] does.
    pub async fn lookup_with(
        &self,
        reads: &mut Reads,
        client_id: &ClientId,
        for_whom: &FetchFor,
    ) -> Result<Option<ClientRecord>, ClientLookupError> {
        if !client_id.is_metadata_document() {
            return Ok(reads.client(client_id.as_str()).await?);
        }
        self.metadata_client(reads.store(), client_id, for_whom)
            .await
    }

    /// The client of the metadata document at the URL `client_id`.
    async fn metadata_client(
        &self,
        store: &Store,
        client_id: &ClientId,
        for_whom: &FetchFor,
    ) -> Result<Option<ClientRecord>, ClientLookupError> {
        let client_id = client_id.as_str();
        let cached = {
            let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            cache
                .get(client_id)
                .filter(|(_, until)| *until > Instant::now())
                .map(|(record, _)| record.clone())
        };
        // The stored row is what consents and tokens refer to: without it (deleted as
        // unused), the document is fetched again.
        let stored = store.client(client_id).await?;
        if let (Some(record), Some(_)) = (cached, &stored) {
            return Ok(Some(record));
        }
        let url = validate_client_id_url(client_id)?;
        if stored.is_none()
            && let FetchFor::Budgeted(limit) = for_whom
            && let Admission::Refused { retry_after, .. } = store
                .admit(std::slice::from_ref(limit), crate::store::now())
                .await?
        {
            return Err(ClientLookupError::Throttled(retry_after));
        }
        let fetched = self.fetcher.fetch(&url).await?;
        let meta = validate_document(client_id, &fetched.body)?;
        let record = ClientRecord {
            client_id: client_id.to_string(),
            client_secret_hash: None,
            token_endpoint_auth_method: meta.token_endpoint_auth_method,
            client_name: Some(meta.client_name),
            redirect_uris: meta.redirect_uris,
            grant_types: vec!["authorization_code".into(), "refresh_token".into()],
            scope: None,
            metadata: meta.document,
            can_introspect: false,
            created_at: crate::store::now(),
        };
        store.upsert_metadata_client(&record).await?;
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        match cache_lifetime(fetched.cache_control.as_deref()) {
            Some(ttl) => remember(&mut cache, &record, ttl),
            None => {
                cache.remove(client_id);
            }
        }
        Ok(Some(record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str) -> ClientRecord {
        ClientRecord {
            client_id: id.to_string(),
            client_secret_hash: None,
            token_endpoint_auth_method: "none".into(),
            client_name: None,
            redirect_uris: Vec::new(),
            grant_types: Vec::new(),
            scope: None,
            metadata: serde_json::Value::Null,
            can_introspect: false,
            created_at: 0,
        }
    }

    #[test]
    fn the_document_cache_is_bounded_and_pruned() {
        let mut cache = HashMap::new();
        for i in 0..MAX_CACHED_DOCUMENTS + 50 {
            remember(
                &mut cache,
                &record(&format!("https://a{i}.example/c")),
                Duration::from_secs(600),
            );
        }
        assert_eq!(cache.len(), MAX_CACHED_DOCUMENTS, "full of live documents");
        // Expired documents make room when the cache is full.
        for (_, until) in cache.values_mut().take(10) {
            *until = Instant::now() - Duration::from_secs(1);
        }
        remember(
            &mut cache,
            &record("https://new.example/c"),
            Duration::from_secs(600),
        );
        assert!(cache.contains_key("https://new.example/c"));
        assert_eq!(cache.len(), MAX_CACHED_DOCUMENTS - 9);
    }
}
