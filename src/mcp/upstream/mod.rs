//! Upstream MCP servers behind Gatehouse: the registry the operator keeps with
//! `gatehouse upstream …` ([`crate::store::upstreams`]), loaded into every instance and
//! reloaded within a second of a change ([`Upstreams::start`] polls the registry's version),
//! and one MCP client per upstream ([`server::UpstreamServer`]) that lists its tools and
//! forwards calls to it: over Streamable HTTP ([`http`]) or to a local child process
//! ([`stdio`]).
//!
//! Their tools join Gatehouse's catalog as `NAME__TOOL` ([`crate::domain::upstream`]), after
//! the built-in tools, by upstream name then tool name (a stable order). A tool is listed only
//! while the definition the upstream shows is the one the operator approved (or the upstream
//! is registered with `--trust-definitions`); every definition seen is stored with its hash,
//! new or changed ones as pending ([`crate::store::upstreams`]).

pub mod confirm;
pub mod extras;
pub mod failure;
pub mod http;
mod per_person;
pub mod personal;
pub mod result;
pub mod server;
pub mod stdio;

use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use rmcp::model::Tool;

use crate::domain::scope::{Scope, ScopeSet};
use crate::domain::upstream::split_namespaced;
use crate::state::AppState;
use crate::store::StoreError;
use server::{UpstreamServer, UpstreamTool};

tokio::task_local! {
    /// The account the MCP request being served acts for (`None` before authentication), for
    /// the lookups rmcp makes without a caller ([`Upstreams::cached_tool`]). Set around rmcp's
    /// handling of one request by [`serving_as`].
    static CALLER: Option<String>;
}

/// Runs `serve` (rmcp's handling of one MCP request) with `account` as the caller that
/// [`Upstreams::cached_tool`] sees, so that the SEP-2243 `Mcp-Param-*` checks rmcp runs
/// before dispatch find a person's own tools for that person alone.
pub async fn serving_as<F: Future>(account: Option<String>, serve: F) -> F::Output {
    CALLER.scope(account, serve).await
}

/// How often each instance looks at the registry's version (a change reaches it within this).
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// What this instance serves: the registry at one version.
struct Snapshot {
    /// The registry's version this was read at; `None` before the first read.
    version: Option<i64>,
    /// Enabled upstreams by name.
    servers: Vec<Arc<UpstreamServer>>,
    /// The approved definitions and allowed destructive tools.
    approved: Arc<server::Approvals>,
}

/// Every upstream this instance serves. One per process, shared by the MCP handlers.
pub struct Upstreams {
    app: AppState,
    snapshot: RwLock<Arc<Snapshot>>,
    /// One reload at a time.
    reloading: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Upstreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstreams").finish_non_exhaustive()
    }
}

impl Upstreams {
    /// An empty registry over `app`; [`Upstreams::refresh`] or [`Upstreams::start`] loads it.
    pub fn new(app: AppState) -> Arc<Upstreams> {
        Arc::new(Upstreams {
            app,
            snapshot: RwLock::new(Arc::new(Snapshot {
                version: None,
                servers: Vec::new(),
                approved: Arc::default(),
            })),
            reloading: tokio::sync::Mutex::new(()),
        })
    }

    /// Polls the registry's version every [`POLL_INTERVAL`] on the current runtime and reloads
    /// what changed, until `self` is dropped. Does nothing outside a runtime.
    pub fn start(self: &Arc<Self>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let weak: Weak<Upstreams> = Arc::downgrade(self);
        runtime.spawn(async move {
            let mut tick = tokio::time::interval(POLL_INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(upstreams) = weak.upgrade() else {
                    return;
                };
                if let Err(e) = upstreams.refresh().await {
                    tracing::warn!(error = %e, "could not read the upstream registry");
                }
            }
        });
    }

    fn current(&self) -> Arc<Snapshot> {
        match self.snapshot.read() {
            Ok(s) => Arc::clone(&s),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// Reloads the registry when its version changed since the last read: upstreams whose
    /// settings did not change keep their connection and cached listing.
    ///
    /// Errors: the database could not be read (the previous registry is kept).
    pub async fn refresh(&self) -> Result<(), StoreError> {
        let _one = self.reloading.lock().await;
        let version = self.app.store.upstream_registry_version().await?;
        let old = self.current();
        if old.version == Some(version) {
            return Ok(());
        }
        let records = self.app.store.upstreams().await?;
        let approved = server::Approvals {
            hashes: self.app.store.approved_upstream_tools().await?,
            destructive: self.app.store.destructive_allowed_upstream_tools().await?,
        };
        let mut servers = Vec::new();
        // People's own upstreams are served only while the operator allows them
        // (`GATEHOUSE_PERSONAL_UPSTREAMS`).
        let personal = self.app.config.personal_upstreams;
        for record in records
            .into_iter()
            .filter(|r| r.enabled && (personal || r.owner.is_none()))
        {
            if let Some(same) = old.servers.iter().find(|s| s.same_settings(&record)) {
                servers.push(Arc::clone(same));
                continue;
            }
            match UpstreamServer::new(self.app.clone(), record) {
                Ok(server) => {
                    crate::metrics::upstream_served(server.name());
                    servers.push(Arc::new(server));
                }
                Err(e) => tracing::warn!(error = %e, "upstream not served"),
            }
        }
        // Upstreams disabled, removed or changed: their connection ends (a stdio child is
        // stopped) once the calls in flight are answered, each within its timeout, rather
        // than when the last call still holding them goes.
        for gone in old
            .servers
            .iter()
            .filter(|o| !servers.iter().any(|s| Arc::ptr_eq(o, s)))
        {
            let gone = Arc::clone(gone);
            tokio::spawn(async move { gone.retire().await });
        }
        let next = Arc::new(Snapshot {
            version: Some(version),
            servers,
            approved: Arc::new(approved),
        });
        match self.snapshot.write() {
            Ok(mut s) => *s = next,
            Err(poisoned) => *poisoned.into_inner() = next,
        }
        Ok(())
    }

    /// The current registry, read once if it never was.
    async fn loaded(&self) -> Arc<Snapshot> {
        let snapshot = self.current();
        if snapshot.version.is_some() {
            return snapshot;
        }
        if let Err(e) = self.refresh().await {
            tracing::warn!(error = %e, "could not read the upstream registry");
        }
        self.current()
    }

    /// The listed tools of every enabled upstream, by upstream name then tool name, that
    /// `scopes` may call. An upstream that cannot be listed now drops out (logged and counted
    /// in `gatehouse_upstream_list_failures_total`) without failing the rest.
    ///
    /// An upstream restricted with `--accounts`/`--projects` is listed only to the accounts it
    /// names and to callers reaching (`reachable`) a project it names; a person's own
    /// upstream only to its owner's credentials that reach the whole account (`account_wide`),
    /// after the operator's, in the owner's order.
    pub async fn listed(
        &self,
        scopes: &ScopeSet,
        account_id: &str,
        account_wide: bool,
        reachable: &[String],
    ) -> Vec<Tool> {
        let snapshot = self.loaded().await;
        let listings = futures::future::join_all(
            snapshot
                .servers
                .iter()
                .filter(|s| s.allows(account_id, account_wide, reachable))
                .map(|s| async move { (s, self.tools_for(s, account_id).await) }),
        )
        .await;
        let mut out = Vec::new();
        for (server, listing) in listings {
            let Some(listing) = listing else {
                continue;
            };
            match listing {
                Ok(tools) => out.extend(
                    tools
                        .iter()
                        .filter(|t| server.is_listed(t, &snapshot.approved))
                        .filter(|t| scopes.satisfies(t.scope))
                        .map(|t| t.tool.clone()),
                ),
                // Logged where the listing failed (once per attempt, not per client listing
                // that is answered without it).
                Err(_) => {
                    metrics::counter!(crate::metrics::UPSTREAM_LIST_FAILURES, "upstream" => server.name().to_string())
                        .increment(1);
                }
            }
        }
        out
    }

    /// Whether any enabled upstream is restricted with `--accounts`/`--projects` (then a
    /// listing needs the caller's projects).
    pub async fn any_restricted(&self) -> bool {
        self.loaded()
            .await
            .servers
            .iter()
            .any(|s| s.is_restricted())
    }

    /// The prompts, resources and resource templates ([`extras`]) of every enabled upstream
    /// `account_id` (reaching the projects `reachable`) may use, by upstream name. An upstream
    /// that cannot be listed now drops out (logged and counted in
    /// `gatehouse_upstream_list_failures_total`) without failing the rest.
    pub async fn listed_extras(
        &self,
        account_id: &str,
        account_wide: bool,
        reachable: &[String],
    ) -> Vec<Arc<extras::Extras>> {
        let snapshot = self.loaded().await;
        let listings = futures::future::join_all(
            snapshot
                .servers
                .iter()
                .filter(|s| s.allows(account_id, account_wide, reachable))
                .map(|s| async move { (s, s.extras().await) }),
        )
        .await;
        let mut out = Vec::new();
        for (server, listing) in listings {
            match listing {
                Ok(extras) => out.push(extras),
                Err(e) => {
                    tracing::warn!(upstream = server.name(), error = %e, "upstream left out of the prompts and resources");
                    metrics::counter!(crate::metrics::UPSTREAM_LIST_FAILURES, "upstream" => server.name().to_string())
                        .increment(1);
                }
            }
        }
        out
    }

    /// The enabled upstream named `name`, if any.
    pub async fn server(&self, name: &str) -> Option<Arc<UpstreamServer>> {
        let snapshot = self.loaded().await;
        snapshot.servers.iter().find(|s| s.name() == name).cloned()
    }

    /// The upstream and listed tool a catalog name `NAME__TOOL` stands for, if any (listing
    /// the upstream first when this instance has not yet).
    pub async fn find(&self, name: &str) -> Option<(Arc<UpstreamServer>, UpstreamTool)> {
        let (server, tools, at) = self.listed_tool(name).await?;
        Some((server, tools[at].clone()))
    }

    /// The scope a listed upstream tool needs ([`crate::mcp::tool_meta::ToolMeta::for_upstream`]).
    pub async fn scope_of(&self, name: &str) -> Option<Scope> {
        let (_, tools, at) = self.listed_tool(name).await?;
        Some(tools[at].scope)
    }

    /// [`Upstreams::find`] without copying the tool: the upstream, its listing and the index
    /// of the tool in it.
    async fn listed_tool(
        &self,
        name: &str,
    ) -> Option<(Arc<UpstreamServer>, Arc<Vec<UpstreamTool>>, usize)> {
        let (upstream, _) = split_namespaced(name)?;
        let snapshot = self.loaded().await;
        let server = snapshot
            .servers
            .iter()
            .find(|s| s.name() == upstream.as_str() && !s.is_per_person())?;
        let tools = server.tools().await.ok()?;
        let at = tools
            .iter()
            .position(|t| t.tool.name == name && server.is_listed(t, &snapshot.approved))?;
        Some((Arc::clone(server), tools, at))
    }

    /// The published definition of a listed upstream tool from this instance's cache,
    /// without waiting (rmcp's header checks ask for it synchronously); `None` when it is not
    /// cached, or belongs to a person's own server and the request being served
    /// ([`serving_as`]) is not that person's: for anyone else such a tool does not exist.
    pub fn cached_tool(&self, name: &str) -> Option<Tool> {
        let (upstream, _) = split_namespaced(name)?;
        let snapshot = self.current();
        let caller = CALLER.try_with(Clone::clone).ok().flatten();
        let server = snapshot.servers.iter().find(|s| {
            s.name() == upstream.as_str()
                && s.owner()
                    .is_none_or(|owner| caller.as_deref() == Some(owner))
        })?;
        let tools = server.cached_tools()?;
        tools
            .iter()
            .find(|t| t.tool.name == name && server.is_listed(t, &snapshot.approved))
            .map(|t| t.tool.clone())
    }
}
