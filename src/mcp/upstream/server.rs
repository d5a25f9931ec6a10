//! One upstream MCP server as this instance speaks to it: an rmcp client over Streamable HTTP
//! ([`super::http`]), connected on first use and again after a failure, its tool listing
//! cached for [`LISTING_TTL`] (a failed listing is remembered for [`FAILURE_MEMORY`], so an
//! unreachable upstream costs one bounded attempt per that time, not one per request; after
//! the first listing those attempts run in the background while the cache answers), and
//! its calls bounded in number (`--max-concurrency`; beyond it "busy, retry") and in time
//! (`--timeout`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::ServiceExt as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ContentBlock,
    Implementation, JsonObject, Prompt, Resource, ResourceTemplate, Tool,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use sha2::{Digest as _, Sha256};

use super::http::UpstreamHttp;
use super::stdio::{Restarts, StdioCommand};
use crate::domain::audit::Outcome;
use crate::domain::scope::Scope;
use crate::domain::upstream::{
    MAX_DESCRIPTION_BYTES, MAX_SCHEMA_BYTES, MAX_TOOLS, UpstreamName, is_destructive,
    namespaced_tool, seal_context,
};
use crate::mcp::tool_meta::ToolMeta;
use crate::state::AppState;
use crate::store::upstreams::{Transport, UpstreamRecord};

/// How long a listing is served from the cache.
pub const LISTING_TTL: Duration = Duration::from_secs(30);
/// How long a failed listing or connection is remembered before the next attempt.
pub const FAILURE_MEMORY: Duration = Duration::from_secs(5);

/// The log target of a failed listing ("upstream left out of tools/list"), logged once per
/// attempt, so at most once per [`FAILURE_MEMORY`] for an upstream that stays down. A command
/// (`upstream add`) says the same in its answer and leaves it out of its log
/// ([`crate::telemetry::init_for_command`]).
pub const LISTING_LOG: &str = "gatehouse::upstream::listing";
/// The longest wait to connect or list, whatever the per-call timeout.
pub const LIST_TIMEOUT: Duration = Duration::from_secs(10);
/// Requests in a row that failed (the connection failed, or no answer within `--timeout`)
/// after which an upstream cools down: for [`COOL_DOWN`] its tool calls, prompt gets and
/// resource reads are answered at once with an error saying so, never sent, so that an
/// upstream that is down or hangs costs its callers no wait and gets no load while it
/// recovers. An answer of any kind (a JSON-RPC error, a tool's `isError` included) counts as
/// answered and ends the row.
pub const COOL_DOWN_AFTER: u32 = 5;
/// How long an upstream cools down after [`COOL_DOWN_AFTER`] failed requests in a row. The
/// first request after it is sent: its failure starts another cool-down at once, its answer
/// ends the row.
pub const COOL_DOWN: Duration = Duration::from_secs(10);

/// An upstream's tool as Gatehouse publishes it.
#[derive(Debug, Clone)]
pub struct UpstreamTool {
    /// The upstream's own name for it.
    pub upstream_name: String,
    /// The definition published: named `NAME__TOOL`, with Gatehouse's `_meta`.
    pub tool: Tool,
    /// The scope a call needs.
    pub scope: Scope,
    /// SHA-256 hex of the definition the upstream showed.
    pub hash: String,
    /// It may destroy data ([`is_destructive`]): listed and called only when the operator
    /// allowed it, each call confirmed by the person (seed 000: destructive operations stay
    /// off the public surface until explicitly authorized).
    pub destructive: bool,
}

/// What the operator approved, as one instance last read it.
#[derive(Debug, Default)]
pub struct Approvals {
    /// The approved definition hash of each (upstream, tool) that has one.
    pub hashes: HashMap<(String, String), String>,
    /// The destructive (upstream, tool) pairs allowed with `upstream allow-destructive`.
    pub destructive: std::collections::HashSet<(String, String)>,
}

/// Why an upstream could not be used; the text names no secret.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct UpstreamError(pub String);

/// The rmcp client of one upstream.
pub(super) type Client = RunningService<RoleClient, ListChangedHandler>;

/// Which of an upstream's listings it said changed since they were last asked for
/// (`notifications/tools/list_changed`, `…/prompts/list_changed`,
/// `…/resources/list_changed`: MCP server/tools, server/prompts, server/resources §List Changed
/// Notification): a listing so marked is not fresh, whatever its age, and is asked for again.
#[derive(Debug, Default)]
pub(super) struct ListChanged {
    /// The tools changed.
    pub(super) tools: std::sync::atomic::AtomicBool,
    /// The prompts or the resources changed.
    pub(super) extras: std::sync::atomic::AtomicBool,
}

/// Gatehouse's side of a connection to an upstream (rmcp's client handler): it declares no
/// client capability, answers the upstream's own requests as rmcp does by default (no
/// sampling, elicitation or roots), and marks the listings the upstream says changed
/// ([`ListChanged`]).
#[derive(Debug, Clone)]
pub(super) struct ListChangedHandler {
    info: ClientConfig,
    changed: Arc<ListChanged>,
}

impl rmcp::ClientHandler for ListChangedHandler {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn on_tool_list_changed(&self, _context: rmcp::service::NotificationContext<RoleClient>) {
        self.changed
            .tools
            .store(true, std::sync::atomic::Ordering::Release);
    }

    async fn on_prompt_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.changed
            .extras
            .store(true, std::sync::atomic::Ordering::Release);
    }

    async fn on_resource_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.changed
            .extras
            .store(true, std::sync::atomic::Ordering::Release);
    }
}

/// Whether a listing made at `at` may still be served: a listing that succeeded
/// ([`LISTING_TTL`]) unless the upstream said it `changed` since, a failed one
/// ([`FAILURE_MEMORY`]) while it is remembered.
pub(super) fn is_fresh(at: Instant, ok: bool, changed: &std::sync::atomic::AtomicBool) -> bool {
    if ok {
        at.elapsed() < LISTING_TTL && !changed.load(std::sync::atomic::Ordering::Acquire)
    } else {
        at.elapsed() < FAILURE_MEMORY
    }
}

/// An upstream's prompts, resources and resource templates as Gatehouse publishes them.
#[derive(Debug, Default)]
pub struct Extras {
    /// Prompts named `NAME__PROMPT`, by name.
    pub prompts: Vec<Prompt>,
    /// Resources under `gatehouse://upstreams/NAME/`, by URI.
    pub resources: Vec<Resource>,
    /// Resource templates under the same prefix, by template.
    pub templates: Vec<ResourceTemplate>,
}

/// The cached [`Extras`] of one upstream ([`super::extras`] lists and reads them).
pub(super) struct ExtrasListing {
    /// When it was listed.
    pub(super) at: Instant,
    /// What the listing gave.
    pub(super) result: Result<Arc<Extras>, UpstreamError>,
}

struct Listing {
    at: Instant,
    result: Result<Arc<Vec<UpstreamTool>>, UpstreamError>,
}

/// One upstream and this instance's connection to it.
pub struct UpstreamServer {
    app: AppState,
    record: UpstreamRecord,
    name: UpstreamName,
    http: Option<UpstreamHttp>,
    /// Stdio: the child's command ([`super::stdio`]).
    stdio: Option<StdioCommand>,
    /// Stdio: when its child may be started again.
    restarts: std::sync::Mutex<Restarts>,
    calls: Arc<tokio::sync::Semaphore>,
    client: tokio::sync::Mutex<Option<Arc<Client>>>,
    listing: tokio::sync::Mutex<Option<Listing>>,
    /// A listing past its time is being refreshed in the background ([`UpstreamServer::tools_as`]).
    refreshing: std::sync::atomic::AtomicBool,
    /// The same for the prompts and resources ([`super::extras`]).
    pub(super) refreshing_extras: std::sync::atomic::AtomicBool,
    /// Its prompts and resources ([`super::extras`]).
    pub(super) extras_listing: tokio::sync::Mutex<Option<ExtrasListing>>,
    /// The last error this instance recorded (`None`: none, or cleared).
    noted_error: tokio::sync::Mutex<Option<String>>,
    /// Its failed requests in a row on this instance, for the cool-down.
    health: Health,
    /// The listings it said changed ([`ListChanged`]).
    pub(super) changed: Arc<ListChanged>,
}

/// An upstream's failed requests in a row on one instance ([`COOL_DOWN_AFTER`]) and the end of
/// its cool-down. Requests made with a person's own token (a per-person upstream) are not
/// counted: one person's refused token says nothing of the upstream for the others.
#[derive(Debug, Default)]
struct Health {
    /// Failed requests in a row.
    failures: std::sync::atomic::AtomicU32,
    /// When the current cool-down ends, once one has started.
    until: std::sync::Mutex<Option<Instant>>,
    /// The one request sent when a cool-down ended is on its way (its outcome decides).
    trying: std::sync::atomic::AtomicBool,
}

impl UpstreamServer {
    /// The server of `record`, its header values opened with the server key.
    ///
    /// Errors: no server key, or a header or `--env` value that does not open.
    pub fn new(app: AppState, record: UpstreamRecord) -> Result<UpstreamServer, UpstreamError> {
        let name = UpstreamName::parse_any(&record.name).map_err(|e| UpstreamError(e.0))?;
        let mut http = None;
        let mut stdio = None;
        match record.transport {
            Transport::Http => {
                let mut headers = http::HeaderMap::new();
                for (n, v) in open_pairs(&app, &name, "headers", record.headers_sealed.as_deref())?
                {
                    let (Ok(n), Ok(mut v)) = (
                        http::HeaderName::from_bytes(n.as_bytes()),
                        http::HeaderValue::from_str(&v),
                    ) else {
                        return Err(UpstreamError(format!(
                            "upstream {name}: a header is invalid"
                        )));
                    };
                    v.set_sensitive(true);
                    headers.insert(n, v);
                }
                // A whole answer may carry the result twice (structured and as text), plus
                // framing.
                let max_body = app.config.max_result_bytes.saturating_mul(4).max(1 << 20);
                // A person's own upstream: where it is is checked again (the operator's allow
                // list may have changed), and every name lookup is guarded.
                let guard = if record.owner.is_some() {
                    let allow = &app.config.upstream_allow_hosts;
                    let url = record
                        .url
                        .as_deref()
                        .and_then(|u| url::Url::parse(u).ok())
                        .ok_or_else(|| UpstreamError(format!("upstream {name}: no URL")))?;
                    if let Some(why) = super::personal::literal_refusal(allow, &url) {
                        return Err(UpstreamError(format!("upstream {name}: {why}")));
                    }
                    Some(super::personal::GuardedResolver::new(allow.clone()))
                } else {
                    None
                };
                http = Some(
                    UpstreamHttp::new(headers, LIST_TIMEOUT, max_body, guard)
                        .map_err(|e| UpstreamError(format!("upstream {name}: {e}")))?,
                );
            }
            Transport::Stdio => {
                let env = open_pairs(&app, &name, "env", record.env_sealed.as_deref())?;
                stdio = Some(
                    StdioCommand::new(name.as_str(), &record.command, env)
                        .ok_or_else(|| UpstreamError(format!("upstream {name}: no command")))?,
                );
            }
        }
        let permits = usize::try_from(record.max_concurrency.max(1)).unwrap_or(1);
        Ok(UpstreamServer {
            app,
            name,
            http,
            stdio,
            restarts: std::sync::Mutex::new(Restarts::default()),
            calls: Arc::new(tokio::sync::Semaphore::new(permits)),
            client: tokio::sync::Mutex::new(None),
            listing: tokio::sync::Mutex::new(None),
            refreshing: std::sync::atomic::AtomicBool::new(false),
            refreshing_extras: std::sync::atomic::AtomicBool::new(false),
            extras_listing: tokio::sync::Mutex::new(None),
            noted_error: tokio::sync::Mutex::new(
                record.last_error.as_ref().map(|(e, _)| e.clone()),
            ),
            health: Health::default(),
            changed: Arc::default(),
            record,
        })
    }

    /// Its name.
    pub fn name(&self) -> &str {
        self.name.as_str()
    }

    /// Its name, checked.
    pub(super) fn upstream_name(&self) -> &UpstreamName {
        &self.name
    }

    /// The state it was made with.
    pub(super) fn app(&self) -> &AppState {
        &self.app
    }

    /// One of its `--max-concurrency` call slots, if one is free.
    pub(super) fn call_slot(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        Arc::clone(&self.calls).try_acquire_owned().ok()
    }

    /// Its per-call timeout (`--timeout`).
    pub(super) fn call_timeout(&self) -> Duration {
        self.timeout()
    }

    /// A request to it that found no answer within `timeout`: logged (`what` names the kind
    /// of request), and the text the caller is answered with.
    pub(super) fn timed_out(&self, what: &str, timeout: Duration) -> String {
        tracing::warn!(
            upstream = self.name(),
            timeout_ms = timeout.as_millis(),
            "upstream {what} timed out"
        );
        format!(
            "The upstream server {} did not answer within {} ms; try again later.",
            self.name(),
            timeout.as_millis()
        )
    }

    /// While the upstream cools down ([`COOL_DOWN_AFTER`], [`COOL_DOWN`]): the text a request
    /// is answered with instead of being sent. `None` otherwise (one atomic read when it has
    /// not failed), and for the one request that is sent when a cool-down is over.
    pub(super) fn cooling_down(&self) -> Option<String> {
        use std::sync::atomic::Ordering::Relaxed;
        let failures = self.health.failures.load(Relaxed);
        if failures < COOL_DOWN_AFTER {
            return None;
        }
        let now = Instant::now();
        let mut until = lock(&self.health.until);
        let Some(left) = until.and_then(|end| end.checked_duration_since(now)) else {
            // The cool-down is over: this request is sent, alone. The others wait for its
            // outcome as if the cool-down went on: its answer ends the row, its failure starts
            // the next cool-down.
            *until = Some(now + COOL_DOWN);
            self.health.trying.store(true, Relaxed);
            return None;
        };
        if self.health.trying.load(Relaxed) {
            return Some(format!(
                "The upstream server {} failed its last {failures} requests in a row; one request is being sent to it now to see whether it answers. Retry in a few seconds.",
                self.name
            ));
        }
        Some(format!(
            "The upstream server {} failed its last {failures} requests in a row; it is not called for another {} s. Retry then.",
            self.name,
            left.as_secs().max(1)
        ))
    }

    /// Records how a request sent to the upstream ended, for the cool-down and `upstream
    /// list`: `failed` names why when the connection failed or no answer came in time (then
    /// it is the upstream's last error, and the [`COOL_DOWN_AFTER`]th such failure in a row
    /// starts a cool-down, logged); `None` when it answered, which ends the row and clears
    /// the last error a failed request recorded.
    pub(super) async fn after_request(&self, failed: Option<String>) {
        use std::sync::atomic::Ordering::Relaxed;
        if self.health.trying.load(Relaxed) {
            self.health.trying.store(false, Relaxed);
        }
        match failed {
            None => {
                if self.health.failures.load(Relaxed) != 0
                    && self.health.failures.swap(0, Relaxed) != 0
                {
                    self.note_error(None).await;
                }
            }
            Some(why) => {
                let failures = self.health.failures.fetch_add(1, Relaxed).saturating_add(1);
                if failures >= COOL_DOWN_AFTER {
                    *lock(&self.health.until) = Some(Instant::now() + COOL_DOWN);
                    tracing::warn!(
                        upstream = self.name(),
                        failures,
                        cool_down_s = COOL_DOWN.as_secs(),
                        "upstream cooling down: its requests failed in a row"
                    );
                }
                self.note_error(Some(&why)).await;
            }
        }
    }

    /// Whether `record` has the settings this server was made with (then it is kept, with its
    /// connection and listing, across a reload).
    pub fn same_settings(&self, record: &UpstreamRecord) -> bool {
        let a = &self.record;
        a.name == record.name
            && a.transport == record.transport
            && a.url == record.url
            && a.headers_sealed == record.headers_sealed
            && a.command == record.command
            && a.env_sealed == record.env_sealed
            && a.timeout_ms == record.timeout_ms
            && a.max_concurrency == record.max_concurrency
            && a.trust_definitions == record.trust_definitions
            && a.accounts == record.accounts
            && a.projects == record.projects
            && a.per_person == record.per_person
    }

    /// Whether each person connects their own account (`--per-person-oauth`): the upstream is
    /// listed and called with the caller's token from the vault, never without one.
    pub fn is_per_person(&self) -> bool {
        self.record.per_person
    }

    /// Whether `tool` is listed: it is not destructive or the operator allowed it
    /// (`upstream allow-destructive`), and its definition is the approved one or the
    /// upstream's definitions are trusted.
    pub fn is_listed(&self, tool: &UpstreamTool, approved: &Approvals) -> bool {
        if !tool.destructive && self.record.trust_definitions {
            return true;
        }
        let key = (self.record.name.clone(), tool.upstream_name.clone());
        if tool.destructive && !approved.destructive.contains(&key) {
            return false;
        }
        self.record.trust_definitions
            || approved
                .hashes
                .get(&key)
                .is_some_and(|hash| *hash == tool.hash)
    }

    /// Whether the operator's upstream is restricted to some accounts or projects
    /// (`--accounts`, `--projects`): then a caller's projects decide. A person's own upstream
    /// is not (its owner alone decides).
    pub fn is_restricted(&self) -> bool {
        self.record.owner.is_none()
            && (self.record.accounts.is_some() || self.record.projects.is_some())
    }

    /// The account whose own upstream this is; `None` for the operator's.
    pub fn owner(&self) -> Option<&str> {
        self.record.owner.as_deref()
    }

    /// Whether `account_id`, reaching the projects `reachable`, may use the upstream. A
    /// person's own upstream: its owner alone, with a credential reaching the whole account
    /// (`account_wide`: OAuth tokens, account keys, personal URLs; never a project key). The
    /// operator's: anyone when it is not restricted; else an account it names, or a caller
    /// reaching a project it names.
    pub fn allows(&self, account_id: &str, account_wide: bool, reachable: &[String]) -> bool {
        if let Some(owner) = self.owner() {
            return account_wide && owner == account_id;
        }
        if !self.is_restricted() {
            return true;
        }
        let by_account = self
            .record
            .accounts
            .as_ref()
            .is_some_and(|a| a.iter().any(|id| id == account_id));
        let by_project = self
            .record
            .projects
            .as_ref()
            .is_some_and(|p| p.iter().any(|id| reachable.contains(id)));
        by_account || by_project
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(u64::try_from(self.record.timeout_ms).unwrap_or(30_000))
    }

    /// The longest wait to connect and list (tools, or prompts and resources): its
    /// `--timeout`, at least a second and at most [`LIST_TIMEOUT`].
    pub(super) fn list_timeout(&self) -> Duration {
        LIST_TIMEOUT.min(self.timeout().max(Duration::from_secs(1)))
    }

    /// The connected client, connecting first if there is none (for a stdio upstream:
    /// starting its child, within the restart back-off).
    pub(super) async fn connect(&self) -> Result<Arc<Client>, UpstreamError> {
        self.connect_as(None).await
    }

    /// [`UpstreamServer::connect`]; with `bearer` (a person's token at a per-person
    /// upstream) a client of that call alone, never shared.
    async fn connect_as(&self, bearer: Option<&str>) -> Result<Arc<Client>, UpstreamError> {
        if let Some(token) = bearer {
            return self.handshake(Some(token)).await.map(Arc::new);
        }
        if self.record.per_person {
            return Err(UpstreamError(format!(
                "upstream {} is per person: it is called with a person's own token",
                self.name
            )));
        }
        let mut slot = self.client.lock().await;
        if let Some(client) = slot
            .as_ref()
            .filter(|c| !c.is_closed() && !c.peer().is_transport_closed())
        {
            return Ok(Arc::clone(client));
        }
        let client = Arc::new(self.handshake(None).await?);
        // A new connection may reach another server than the listings were made on (a stdio
        // child started again, an HTTP server restarted or replaced): they are stale, and the
        // next use lists again, as after a `list_changed` notification. A listing that made
        // this connection clears its mark once connected.
        for changed in [&self.changed.tools, &self.changed.extras] {
            changed.store(true, std::sync::atomic::Ordering::Release);
        }
        *slot = Some(Arc::clone(&client));
        Ok(client)
    }

    async fn handshake(&self, bearer: Option<&str>) -> Result<Client, UpstreamError> {
        let info = ListChangedHandler {
            info: ClientConfig::new(
                ClientCapabilities::default(),
                Implementation::new("gatehouse", env!("CARGO_PKG_VERSION")),
            ),
            changed: Arc::clone(&self.changed),
        };
        let handshake = self.list_timeout();
        let served = if let Some(command) = &self.stdio {
            let now = Instant::now();
            {
                let mut restarts = lock(&self.restarts);
                if restarts.running() {
                    // The child started last is gone (it exited, or a failure dropped it).
                    restarts.exited(now);
                }
                if let Some(wait) = restarts.wait(now) {
                    return Err(UpstreamError(format!(
                        "upstream {}: its process exited; it is started again in {} s",
                        self.name,
                        wait.as_secs().max(1)
                    )));
                }
                restarts.started(now);
            }
            let child = command.spawn(self.name()).map_err(|e| {
                lock(&self.restarts).exited(Instant::now());
                UpstreamError(format!(
                    "upstream {}: could not start {}: {e}",
                    self.name,
                    command.program.escape_debug()
                ))
            })?;
            tokio::time::timeout(handshake, info.serve(child)).await
        } else {
            let (Some(http), Some(url)) = (&self.http, &self.record.url) else {
                return Err(UpstreamError(format!("upstream {}: no URL", self.name)));
            };
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            config.auth_header = bearer.map(str::to_string);
            config.max_json_response_size = http.max_body;
            config.max_sse_event_size = http.max_body;
            config.reinit_on_expired_session = true;
            let transport = StreamableHttpClientTransport::with_client(http.clone(), config);
            tokio::time::timeout(handshake, info.serve(transport)).await
        };
        let client = served
            .map_err(|_| {
                UpstreamError(format!(
                    "upstream {} did not answer the handshake in time",
                    self.name
                ))
            })?
            .map_err(|e| {
                UpstreamError(format!(
                    "upstream {} failed the handshake: {}",
                    self.name,
                    super::failure::handshake(&e)
                ))
            })?;
        Ok(client)
    }

    /// Ends the connection once the calls in flight have been answered, each within its
    /// `--timeout` (waiting at most that long, and a second more): called when the upstream is
    /// disabled, removed or changed, after it left the served set, so that a call it was
    /// answering is not cut off. Meanwhile a call that still reaches it is answered "busy,
    /// retry" (retried, it finds the served set as it is now).
    pub async fn retire(&self) {
        let all = u32::try_from(self.record.max_concurrency.max(1)).unwrap_or(u32::MAX);
        let calls = Arc::clone(&self.calls);
        let _ = tokio::time::timeout(
            self.timeout() + Duration::from_secs(1),
            calls.acquire_many(all),
        )
        .await;
        self.calls.close();
        self.stop().await;
    }

    /// Ends the connection now: a stdio upstream's child gets its stdin closed, then SIGTERM
    /// and SIGKILL ([`super::stdio`]).
    pub async fn stop(&self) {
        if let Some(client) = self.client.lock().await.take() {
            client.cancellation_token().cancel();
        }
    }

    /// Records the upstream's last error (`None`: it answered) for `upstream list`, writing
    /// only when it changed since this instance last wrote it.
    async fn note_error(&self, error: Option<&str>) {
        let mut noted = self.noted_error.lock().await;
        if noted.as_deref() == error {
            return;
        }
        let now = crate::store::now();
        match self
            .app
            .store
            .set_upstream_error(self.name(), error, now)
            .await
        {
            Ok(()) => *noted = error.map(str::to_string),
            Err(e) => {
                tracing::warn!(upstream = self.name(), error = %e, "could not record an upstream's error");
            }
        }
    }

    /// The listing in the cache, if any and without waiting.
    pub fn cached_tools(&self) -> Option<Arc<Vec<UpstreamTool>>> {
        let listing = self.listing.try_lock().ok()?;
        listing.as_ref()?.result.as_ref().ok().cloned()
    }

    /// Forgets the connection (the next use connects again).
    async fn disconnect(&self) {
        self.client.lock().await.take();
    }

    /// The upstream's tools as Gatehouse publishes them, from the cache while it is fresh;
    /// each definition seen is recorded ([`crate::store::Store::record_upstream_tools`]).
    ///
    /// Errors: the upstream could not be reached or listed (remembered for
    /// [`FAILURE_MEMORY`]).
    pub async fn tools(self: &Arc<Self>) -> Result<Arc<Vec<UpstreamTool>>, UpstreamError> {
        self.tools_as(None).await
    }

    /// [`UpstreamServer::tools`], listing with `bearer` (a person's token) when the cache is
    /// not fresh. A per-person upstream without a token serves the last listing seen, however
    /// old (definitions are the upstream's, the same for everyone, and pinned), else fails
    /// without trying.
    ///
    /// Only the first listing is waited for. Once one is cached, a listing past its time
    /// ([`LISTING_TTL`], or [`FAILURE_MEMORY`] for a failure) is still answered at once while
    /// one task lists again in the background, so an upstream that hangs costs the callers
    /// of `tools/list` nothing beyond its first listing; its next result replaces the cached
    /// one.
    pub async fn tools_as(
        self: &Arc<Self>,
        bearer: Option<&str>,
    ) -> Result<Arc<Vec<UpstreamTool>>, UpstreamError> {
        let mut listing = self.listing.lock().await;
        if let Some(l) = listing.as_ref() {
            let fresh = is_fresh(l.at, l.result.is_ok(), &self.changed.tools);
            if fresh {
                return l.result.clone();
            }
            if bearer.is_none() && !self.record.per_person {
                self.refresh_in_background(|s| &s.refreshing, |s| async move { s.refresh().await });
                return l.result.clone();
            }
        }
        if self.record.per_person && bearer.is_none() {
            // Without a token, the last listing seen serves whatever its age.
            if let Some(Listing {
                result: Ok(tools), ..
            }) = listing.as_ref()
            {
                return Ok(Arc::clone(tools));
            }
            return Err(UpstreamError(format!(
                "upstream {} is listed with a connected person's token",
                self.name
            )));
        }
        // Boxed: connecting and listing is a large future, and every lookup of an upstream
        // tool (the step-up check of each `tools/call` among them) would carry its size,
        // copied whenever the request's future moves, even when the listing is fresh.
        let result = Box::pin(self.list_now(bearer)).await;
        if self.record.per_person
            && let Err(e) = &result
        {
            // One person's token failing says nothing of the listing for everyone else.
            tracing::warn!(target: LISTING_LOG, upstream = self.name(), error = %e, "upstream left out of tools/list for a person: the listing with their token failed");
            return result;
        }
        self.after_listing(result.as_ref().err()).await;
        *listing = Some(Listing {
            at: Instant::now(),
            result: result.clone(),
        });
        result
    }

    /// Runs `refresh` on a task of its own unless the refresh whose flag `slot` gives is
    /// already running: one background listing per kind at a time. The flag is cleared when the
    /// task ends, also when it panics, so a refresh that failed never stops the next.
    pub(super) fn refresh_in_background<F, Fut>(
        self: &Arc<Self>,
        slot: fn(&UpstreamServer) -> &std::sync::atomic::AtomicBool,
        refresh: F,
    ) where
        F: FnOnce(Arc<UpstreamServer>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        use std::sync::atomic::Ordering;
        /// Clears the flag when dropped.
        struct Free(
            Arc<UpstreamServer>,
            fn(&UpstreamServer) -> &std::sync::atomic::AtomicBool,
        );
        impl Drop for Free {
            fn drop(&mut self) {
                (self.1)(&self.0).store(false, Ordering::Release);
            }
        }
        if slot(self).swap(true, Ordering::AcqRel) {
            return;
        }
        let free = Free(Arc::clone(self), slot);
        let server = Arc::clone(self);
        tokio::spawn(async move {
            let _free = free;
            refresh(server).await;
        });
    }

    /// What follows a listing that is kept: a failure drops the connection (the next use
    /// connects again), and the outcome is recorded for `upstream list`. A listing that
    /// succeeds clears the last error only when no run of failed requests is going on: an
    /// upstream that lists its tools but whose calls time out is still failing, and one that
    /// cools down shows why ([`UpstreamServer::after_request`] clears it at its next answer).
    async fn after_listing(&self, error: Option<&UpstreamError>) {
        match error {
            Some(e) => {
                tracing::warn!(target: LISTING_LOG, upstream = self.name(), error = %e, "upstream left out of tools/list");
                self.disconnect().await;
                self.note_error(Some(e.0.as_str())).await;
            }
            None if self
                .health
                .failures
                .load(std::sync::atomic::Ordering::Relaxed)
                == 0 =>
            {
                self.note_error(None).await;
            }
            None => {}
        }
    }

    /// Lists again in the background ([`UpstreamServer::tools_as`]): the cache is locked only
    /// to store the result, never while the upstream is asked.
    async fn refresh(&self) {
        let result = Box::pin(self.list_now(None)).await;
        self.after_listing(result.as_ref().err()).await;
        *self.listing.lock().await = Some(Listing {
            at: Instant::now(),
            result,
        });
    }

    async fn list_now(
        &self,
        bearer: Option<&str>,
    ) -> Result<Arc<Vec<UpstreamTool>>, UpstreamError> {
        // Connecting and listing together within the one wait.
        let deadline = tokio::time::Instant::now() + self.list_timeout();
        let client = self.connect_as(bearer).await?;
        // A change the upstream announces from here on is not in this listing: it marks the
        // listing again.
        self.changed
            .tools
            .store(false, std::sync::atomic::Ordering::Release);
        let tools = tokio::time::timeout_at(deadline, client.peer().list_all_tools())
            .await
            .map_err(|_| {
                UpstreamError(format!(
                    "upstream {} did not list its tools in time",
                    self.name
                ))
            })?
            .map_err(|e| {
                UpstreamError(format!(
                    "upstream {} could not list its tools: {}",
                    self.name,
                    super::failure::request(&e)
                ))
            })?;
        if tools.len() > MAX_TOOLS {
            return Err(UpstreamError(format!(
                "upstream {} lists {} tools, more than {MAX_TOOLS} tools; it is left out",
                self.name,
                tools.len()
            )));
        }
        // Names equal but for case would confuse people and some clients: both are refused,
        // as is a name listed twice.
        let mut folded: HashMap<String, usize> = HashMap::new();
        for tool in &tools {
            *folded.entry(tool.name.to_ascii_lowercase()).or_default() += 1;
        }
        let mut published = Vec::new();
        let mut seen = Vec::new();
        for tool in tools {
            let original = tool.name.to_string();
            let Some(public) = namespaced_tool(&self.name, &original) else {
                tracing::warn!(upstream = self.name(), tool = %original.escape_debug(), "upstream tool refused: its name is not [A-Za-z0-9_-] within 64 characters once namespaced");
                continue;
            };
            if folded.get(&original.to_ascii_lowercase()) != Some(&1) {
                tracing::warn!(upstream = self.name(), tool = %original, "upstream tool refused: another tool's name differs from it only by case, or it is listed twice");
                continue;
            }
            if let Some(why) = over_bounds(&tool) {
                tracing::warn!(upstream = self.name(), tool = %original, "upstream tool refused: {why}");
                continue;
            }
            let definition = serde_json::to_string(&tool).unwrap_or_default();
            let hash = hex::encode(Sha256::digest(definition.as_bytes()));
            let meta = ToolMeta::for_upstream(tool.annotations.as_ref(), &hash);
            let destructive = is_destructive(
                tool.annotations.as_ref().and_then(|a| a.read_only_hint),
                tool.annotations.as_ref().and_then(|a| a.destructive_hint),
            );
            let mut out = tool;
            out.name = public.into();
            out.meta = Some(meta.to_meta());
            seen.push((original.clone(), definition, hash.clone()));
            published.push(UpstreamTool {
                upstream_name: original,
                tool: out,
                scope: meta.scopes.first().copied().unwrap_or(Scope::McpWrite),
                hash,
                destructive,
            });
        }
        published.sort_by(|a, b| a.tool.name.cmp(&b.tool.name));
        if let Err(e) = self
            .app
            .store
            .record_upstream_tools(self.name(), &seen, crate::store::now())
            .await
        {
            tracing::warn!(upstream = self.name(), error = %e, "could not record the upstream's definitions");
        }
        Ok(Arc::new(published))
    }

    /// Calls `tool` with `arguments` on the upstream, within the concurrency bound and the
    /// per-call timeout. Every failure is an `isError` result naming the upstream, never an
    /// error of the whole request. Returns the result and the audit outcome.
    ///
    /// `bearer` is the caller's own token at a per-person upstream (`None` otherwise).
    pub async fn call(
        &self,
        tool: &UpstreamTool,
        arguments: Option<JsonObject>,
        bearer: Option<&str>,
    ) -> (CallToolResult, Outcome) {
        let shared = bearer.is_none();
        if shared && let Some(text) = self.cooling_down() {
            return (failure(text), Outcome::CoolingDown);
        }
        let Ok(_permit) = Arc::clone(&self.calls).try_acquire_owned() else {
            return (
                failure(format!(
                    "The upstream server {} is busy (all {} of its call slots are in use); retry shortly.",
                    self.name, self.record.max_concurrency
                )),
                Outcome::Busy,
            );
        };
        let timeout = self.timeout();
        let attempt = async {
            // The error's code when the upstream answered a JSON-RPC error (the connection is
            // fine), none when the connection failed; whether it counts toward the cool-down
            // (no answer came: [`super::failure::unreachable`]).
            let client = self.connect_as(bearer).await.map_err(|e| (None, true, e))?;
            let mut params = CallToolRequestParams::new(tool.upstream_name.clone());
            params.arguments = arguments;
            client.peer().call_tool(params).await.map_err(|e| {
                let code = match &e {
                    rmcp::ServiceError::McpError(error) => Some(error.code.0),
                    _ => None,
                };
                let counts = super::failure::unreachable(&e);
                (code, counts, UpstreamError(super::failure::request(&e)))
            })
        };
        match tokio::time::timeout(timeout, attempt).await {
            Ok(Ok(mut result)) => {
                if shared {
                    self.after_request(None).await;
                }
                super::extras::namespace_blocks(&self.name, &mut result.content);
                let max = self.app.config.max_result_bytes;
                let outcome = if result.is_error == Some(true) {
                    Outcome::ToolError
                } else {
                    Outcome::Success
                };
                (super::result::bound(result, max, self.name()), outcome)
            }
            Ok(Err((answered, counts, e))) => {
                if let Some(code) = answered {
                    // Its message is the upstream's text, which may repeat the arguments: not
                    // logged.
                    tracing::warn!(
                        upstream = self.name(),
                        code,
                        "upstream call failed: it answered a JSON-RPC error"
                    );
                    if shared {
                        self.after_request(None).await;
                    }
                } else {
                    self.disconnect().await;
                    tracing::warn!(upstream = self.name(), error = %e, "upstream call failed");
                    if shared {
                        self.after_request(counts.then(|| format!("a call failed: {e}")))
                            .await;
                    }
                }
                (
                    failure(format!(
                        "The upstream server {} failed this call: {e}",
                        self.name
                    )),
                    Outcome::UpstreamError,
                )
            }
            Err(_) => {
                let text = self.timed_out("call", timeout);
                if shared {
                    self.after_request(Some(format!(
                        "a call got no answer within {} ms",
                        timeout.as_millis()
                    )))
                    .await;
                }
                (failure(text), Outcome::Timeout)
            }
        }
    }
}

/// The pairs sealed as `what` for upstream `name` (a header or `--env` list), opened with the
/// server key; none when nothing is sealed.
fn open_pairs(
    app: &AppState,
    name: &UpstreamName,
    what: &str,
    sealed: Option<&str>,
) -> Result<Vec<(String, String)>, UpstreamError> {
    let Some(sealed) = sealed else {
        return Ok(Vec::new());
    };
    let keys = app
        .keyring()
        .map_err(|e| UpstreamError(format!("upstream {name}: {e}")))?;
    let plain = keys
        .open(&seal_context(name, what), sealed)
        .map_err(|e| UpstreamError(format!("upstream {name}: {what}: {e}")))?;
    serde_json::from_slice(&plain)
        .map_err(|_| UpstreamError(format!("upstream {name}: {what} unreadable")))
}

fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Why an upstream's definition is over the bounds, if it is: description over
/// [`MAX_DESCRIPTION_BYTES`], an input or output schema over [`MAX_SCHEMA_BYTES`] of JSON.
fn over_bounds(tool: &Tool) -> Option<String> {
    let description = tool.description.as_deref().map_or(0, str::len);
    if description > MAX_DESCRIPTION_BYTES {
        return Some(format!(
            "its description is {description} bytes, over {MAX_DESCRIPTION_BYTES}"
        ));
    }
    let schemas = [Some(&tool.input_schema), tool.output_schema.as_ref()];
    for schema in schemas.into_iter().flatten() {
        let size = serde_json::to_vec(schema.as_ref()).map_or(usize::MAX, |v| v.len());
        if size > MAX_SCHEMA_BYTES {
            return Some(format!(
                "a schema is {size} bytes of JSON, over {MAX_SCHEMA_BYTES}"
            ));
        }
    }
    None
}

fn failure(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}
