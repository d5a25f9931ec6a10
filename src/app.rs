//! Application wiring: [`router`] and [`Application`] (bind, run, shut down).
//! This is the only place where features are put together.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use tokio::net::TcpListener;

use crate::clients::{ClientResolver, HttpsFetcher, MetadataFetcher};
use crate::config::Config;
use crate::domain::account::{Email, validate_password};
use crate::domain::secret::{Secret, TokenKind};
use crate::password::PasswordPool;
use crate::state::{AppParts, AppState};
use crate::store::Store;

pub use crate::server::{MAX_HEADER_BYTES, MAX_HEADERS, SHUTDOWN_GRACE};

/// Content-Security-Policy of every response: nothing may frame our pages, no scripts run.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'";

/// The whole HTTP surface over `state` (one router, as tests and `run_until`'s lanes use it:
/// [`Routes::router`]).
pub fn router(state: &AppState) -> Router {
    Routes::new(state).router(state)
}

/// What every serving lane's router shares, made once per server: the MCP catalog, trackers
/// and upstreams ([`crate::mcp::mcp_state`]).
#[derive(Clone)]
pub struct Routes {
    mcp: crate::mcp::McpState,
}

impl Routes {
    /// The shared parts of a server over `state`.
    ///
    /// Panics when the built-in tool catalog breaks its rules (e.g. a destructive tool): the
    /// server refuses to start with such a catalog.
    pub fn new(state: &AppState) -> Routes {
        Routes {
            mcp: crate::mcp::mcp_state(state.clone()),
        }
    }

    /// The whole HTTP surface over `state` (the server's, or a serving lane's with its own
    /// store, [`AppState::with_store`]), with these shared parts.
    pub fn router(&self, state: &AppState) -> Router {
        surface(state, &self.mcp.on(state.clone()))
    }
}

/// The routes and the layers of every route, over `state` and its MCP state `mcp`.
fn surface(state: &AppState, mcp: &crate::mcp::McpState) -> Router {
    let mut app = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(state.clone())
        .merge(crate::web::router(state.clone()))
        .merge(crate::mcp::router(mcp));
    if state.config.oauth_enabled {
        app = app.merge(crate::oauth::router(state.clone()));
    }
    // A path no route serves: Gatehouse's 404 page with links to the console.
    let app = app.fallback(crate::web::not_found);
    // Per route, so the metrics see the route template (`MatchedPath`).
    app.layer(axum::middleware::from_fn_with_state(
        state.clone(),
        every_route,
    ))
    // A panicking handler answers 500 (and is logged) instead of leaving the request hanging.
    .layer(tower_http::catch_panic::CatchPanicLayer::new())
}

/// `X-Request-Id`: the id of the request's log line, sent back so an operator can find the line
/// a user reports. Always our own (a client's header is not trusted into the log).
const REQUEST_ID: header::HeaderName = header::HeaderName::from_static("x-request-id");

/// The security headers of every response, each set unless the handler set its own.
const SECURITY_HEADERS: [(header::HeaderName, &str); 3] = [
    (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    (header::REFERRER_POLICY, "no-referrer"),
];

/// Middleware of every route, in one layer (each layer of a route costs every request a clone
/// of the inner service and a boxed future): the client address for the handlers
/// ([`crate::client_addr::attach`]), the request counted ([`crate::metrics::RequestMetrics`]),
/// the body's whole-body deadline ([`crate::request_body`]: `GATEHOUSE_BODY_READ_TIMEOUT`
/// from now) and the [`SECURITY_HEADERS`] set on the answer.
async fn every_route(
    State(state): State<AppState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let mut request = crate::request_body::apply(
        request,
        std::time::Duration::from_secs(state.config.body_read_timeout_secs as u64),
    );
    crate::client_addr::attach(&state.config.trusted_proxies, &mut request);
    let metrics = crate::metrics::RequestMetrics::start(&request);
    let request_id = metrics.request_id().to_string();
    // Every line logged while serving the request names it; the request's own line
    // ([`crate::metrics::RequestMetrics::finish`]) gives its method, route and status.
    let span = tracing::info_span!("http", request_id = request_id.as_str());
    let mut response = tracing::Instrument::instrument(next.run(request), span).await;
    metrics.finish(&response);
    let headers = response.headers_mut();
    if let Ok(id) = HeaderValue::from_str(&request_id) {
        headers.insert(REQUEST_ID, id);
    }
    for (name, value) in SECURITY_HEADERS {
        if !headers.contains_key(&name) {
            headers.insert(name, HeaderValue::from_static(value));
        }
    }
    response
}

/// `GET /healthz`: the process is up.
async fn healthz() -> impl IntoResponse {
    Json(serde_json::json!({"status": "ok"}))
}

/// `GET /readyz`: the database answers (503 otherwise).
async fn readyz(State(state): State<AppState>) -> axum::response::Response {
    if state.store.ping().await {
        (
            http::StatusCode::OK,
            Json(serde_json::json!({"status": "ready", "database": "ok"})),
        )
            .into_response()
    } else {
        crate::metrics::Unavailable::Database.mark(
            (
                http::StatusCode::SERVICE_UNAVAILABLE,
                Json(serde_json::json!({"status": "unavailable", "database": "unreachable"})),
            )
                .into_response(),
        )
    }
}

/// A start-up failure: one line naming the variable at fault.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StartupError(pub String);

/// A built server, bound to its port, ready to run.
pub struct Application {
    listener: TcpListener,
    port: u16,
    metrics_listener: Option<TcpListener>,
    routes: Routes,
    state: AppState,
}

/// The state of a command that serves no HTTP (`gatehouse stdio`, the command line's own
/// listing of an upstream): one password worker with a queue of one, the real fetcher of
/// client metadata documents, no mail.
pub fn command_state(
    config: Config,
    store: Store,
    server_keys: Option<Arc<crate::domain::server_key::Keyring>>,
) -> AppState {
    AppState::new(AppParts {
        passwords: PasswordPool::new(1, 1),
        config: Arc::new(config),
        store,
        clients: Arc::new(ClientResolver::new(Arc::new(HttpsFetcher::default()))),
        server_keys,
        mailer: None,
    })
}

impl Application {
    /// Connects and migrates the database, creates the bootstrap account or prints the first-run
    /// link, and binds `config.bind`.
    ///
    /// Errors: [`StartupError`] naming `DATABASE_URL`, `GATEHOUSE_BIND` or the bootstrap variables.
    pub async fn build(config: Config) -> Result<Application, StartupError> {
        // The database first, the port last: once the port accepts connections, the server is
        // ready (migrated, first account created).
        let store = open_store(&config.database_url).await?;
        let server_keys = load_server_keys(&config).await?;
        second_factor_needs_a_key(&config, server_keys.as_ref())?;
        let mailer = mailer(&config)?;
        let state = AppState::new(AppParts {
            passwords: PasswordPool::new(config.password_workers, config.password_queue),
            config: Arc::new(config),
            store,
            clients: Arc::new(ClientResolver::new(Arc::new(HttpsFetcher::default()))),
            server_keys,
            mailer,
        });
        first_run(&state).await?;
        let listener = TcpListener::bind(state.config.bind).await.map_err(|e| {
            StartupError(format!(
                "GATEHOUSE_BIND: cannot listen on {}: {e}",
                state.config.bind
            ))
        })?;
        Self::assemble(state, listener).await
    }

    /// Like [`Application::build`] with a listener bound by the caller (tests bind port 0 first
    /// so that `MCP_SERVER_URL` can name the real port).
    pub async fn build_with_listener(
        config: Config,
        listener: TcpListener,
    ) -> Result<Application, StartupError> {
        Self::build_with_fetcher(config, listener, Arc::new(HttpsFetcher::default())).await
    }

    /// Like [`Application::build_with_listener`] with the fetcher of client metadata documents
    /// chosen by the caller (tests serve documents without the network).
    pub async fn build_with_fetcher(
        config: Config,
        listener: TcpListener,
        fetcher: Arc<dyn MetadataFetcher>,
    ) -> Result<Application, StartupError> {
        let store = open_store(&config.database_url).await?;
        let server_keys = load_server_keys(&config).await?;
        second_factor_needs_a_key(&config, server_keys.as_ref())?;
        let mailer = mailer(&config)?;
        let state = AppState::new(AppParts {
            passwords: PasswordPool::new(config.password_workers, config.password_queue),
            config: Arc::new(config),
            store,
            clients: Arc::new(ClientResolver::new(fetcher)),
            server_keys,
            mailer,
        });
        first_run(&state).await?;
        Self::assemble(state, listener).await
    }

    /// `gatehouse stdio`: serves MCP on stdin/stdout as the holder of the API key `key` (the
    /// value of `GATEHOUSE_API_KEY`) until the client closes stdin or the process gets SIGTERM
    /// or SIGINT, with the same handler,
    /// catalog, quotas and audit as the HTTP route ([`crate::mcp::stdio`]). No port is opened;
    /// tool-call audit rows still queued are committed before it returns.
    ///
    /// Errors: a missing or refused key, a database that cannot be opened, a transport
    /// failure — each as one line for stderr.
    pub async fn run_stdio(config: Config, key: Option<String>) -> Result<(), StartupError> {
        let stop = shutdown_signal();
        let key = crate::mcp::stdio::parse_key(key).map_err(|e| StartupError(e.to_string()))?;
        let store = open_store(&config.database_url).await?;
        let server_keys = load_server_keys(&config).await?;
        let state = command_state(config, store, server_keys);
        let audit_writer = state.store.start_audit_writer();
        let served = crate::mcp::stdio::serve(crate::mcp::mcp_state(state), key, stop).await;
        if let Some(writer) = audit_writer {
            writer.drain().await;
        }
        served.map_err(|e| StartupError(e.to_string()))
    }

    async fn assemble(state: AppState, listener: TcpListener) -> Result<Application, StartupError> {
        let port = listener
            .local_addr()
            .map_err(|e| StartupError(format!("GATEHOUSE_BIND: {e}")))?
            .port();
        let metrics_listener = match state.config.metrics_bind {
            None => None,
            Some(addr) => Some(TcpListener::bind(addr).await.map_err(|e| {
                StartupError(format!(
                    "GATEHOUSE_METRICS_BIND: cannot listen on {addr}: {e}"
                ))
            })?),
        };
        let routes = Routes::new(&state);
        Ok(Application {
            listener,
            port,
            metrics_listener,
            routes,
            state,
        })
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The port of the metrics listener (`GATEHOUSE_METRICS_BIND`), when there is one.
    pub fn metrics_port(&self) -> Option<u16> {
        self.metrics_listener
            .as_ref()
            .and_then(|l| l.local_addr().ok())
            .map(|a| a.port())
    }

    /// The shared state (tests reach the database through it).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves until `stop` completes, then finishes in-flight requests and returns.
    pub async fn run_until(
        self,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let (routes, state) = (self.routes, self.state.clone());
        // Each serving lane serves the same routes over a store of its own.
        let lane_router = move |store: Store| routes.router(&state.with_store(store));
        let sweeper = tokio::spawn(maintenance(
            self.state.store.clone(),
            self.state.config.unused_client_max_age_secs,
        ));
        let audit_writer = self.state.store.start_audit_writer();
        // Audit records also sent out when GATEHOUSE_EVENTS_URL is set (crate::events).
        let events = crate::events::start(&self.state.config, &self.state.store);
        // Retention: audit rows past GATEHOUSE_AUDIT_RETENTION_DAYS (crate::upkeep).
        let upkeep = tokio::spawn(crate::upkeep::run(
            self.state.store.clone(),
            self.state.config.clone(),
        ));
        self.state
            .store
            .set_auth_cache(self.state.config.auth_cache);
        let auth_listener = if self.state.config.auth_cache {
            self.state
                .store
                .start_auth_listener(self.state.config.listen_database_url.as_deref())
        } else {
            None
        };
        // The recorder is installed only when metrics are served: installed, it keeps what
        // every request records.
        let metrics = self.metrics_listener.and_then(|listener| {
            crate::metrics::recorder().map(|handle| {
                if let Ok(catalog) = crate::mcp::tools::catalog() {
                    crate::metrics::tools_served(catalog.all().iter().map(|t| t.spec.name));
                }
                tokio::spawn(crate::metrics::serve(
                    listener,
                    self.state.passwords.clone(),
                    self.state.store.clone(),
                    handle,
                ))
            })
        });
        let served = crate::server::serve(
            self.listener,
            lane_router,
            &self.state.config,
            &self.state.store,
            stop,
        )
        .await;
        sweeper.abort();
        upkeep.abort();
        if let Some(listener) = auth_listener {
            listener.stop();
        }
        // Tool-call audit rows still queued are committed before the process may exit.
        if let Some(writer) = audit_writer {
            writer.drain().await;
        }
        if let Some(events) = events {
            events.drain().await;
        }
        if let Some(metrics) = metrics {
            metrics.abort();
        }
        served
    }
}

/// The process exits at most this long after SIGTERM or SIGINT, whatever is still running
/// (the binary abandons leftover work and, as a last resort, exits by itself at this bound).
pub const SHUTDOWN_BOUND: std::time::Duration = std::time::Duration::from_secs(30);

/// How long a background job may go untouched before another instance takes it over, seconds.
pub const STALE_JOB_SECS: i64 = 120;

/// Background upkeep of every instance: every 30 seconds, resume background jobs whose
/// instance stopped before finishing them; every 10 minutes, delete registered clients older
/// than `unused_client_max_age` seconds that never completed an authorization
/// ([`Store::expire_unused_clients`]). Ended sessions, expired credentials and counters are
/// pruned in batches by one instance at a time ([`crate::upkeep`]).
async fn maintenance(store: Store, unused_client_max_age: i64) {
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(30));
    for round in 0u64.. {
        tick.tick().await;
        let now = crate::store::now();
        if let Err(e) = store.recover_stale_jobs(now - STALE_JOB_SECS, now).await {
            tracing::error!(error = %e, "could not resume background jobs");
        }
        if round % 20 == 0 {
            match store
                .expire_unused_clients(now - unused_client_max_age, now)
                .await
            {
                Ok(n) if n > 0 => tracing::info!(deleted = n, "expired unused clients"),
                Ok(_) => {}
                Err(e) => tracing::error!(error = %e, "could not expire unused clients"),
            }
        }
    }
}

/// `GATEHOUSE_REQUIRE_2FA=on` needs a server key (authenticator secrets are sealed with it):
/// without one nobody could enrol, so nobody could sign in. Errors: one line saying so.
fn second_factor_needs_a_key(
    config: &Config,
    keys: Option<&Arc<crate::domain::server_key::Keyring>>,
) -> Result<(), StartupError> {
    if config.identity.require_2fa && keys.is_none() {
        return Err(StartupError(format!(
            "GATEHOUSE_REQUIRE_2FA: authenticator secrets are sealed with the server key: {}",
            crate::state::NO_SERVER_KEY
        )));
    }
    Ok(())
}

/// The mail sender of `GATEHOUSE_SMTP_URL`, if set. Errors: one line naming the variable.
fn mailer(config: &Config) -> Result<Option<Arc<crate::mail::Mailer>>, StartupError> {
    Ok(crate::mail::Mailer::from_config(config)
        .map_err(StartupError)?
        .map(Arc::new))
}

/// Loads the server key once (reading, or on first start creating, the key file off the async
/// workers). Errors: one line naming the variable at fault.
pub async fn load_server_keys(
    config: &Config,
) -> Result<Option<Arc<crate::domain::server_key::Keyring>>, StartupError> {
    let settings = config.server_key.clone();
    let loaded = tokio::task::spawn_blocking(move || settings.load())
        .await
        .map_err(|e| StartupError(format!("GATEHOUSE_SECRET_KEY: {e}")))?
        .map_err(|e| StartupError(e.to_string()))?;
    match &loaded {
        Some(keys) => tracing::debug!(key_id = keys.current().id(), "server key loaded"),
        None => tracing::info!(
            "no server key configured (GATEHOUSE_SECRET_KEY or GATEHOUSE_SECRET_KEY_FILE): secrets that need sealing will be refused"
        ),
    }
    Ok(loaded.map(Arc::new))
}

/// How long [`open_store`] keeps trying a database that is busy or out of reach (a
/// `PostgreSQL` server still starting, or too slow to open a connection within the pool's
/// 5 s), one try a second.
pub const CONNECT_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// Connects to `DATABASE_URL` and applies migrations; the error names the variable. A
/// database that is busy or out of reach ([`crate::store::StoreError::is_unavailable`]) is
/// tried again once a second for up to [`CONNECT_PATIENCE`]; any other error ends at once.
pub async fn open_store(url: &str) -> Result<Store, StartupError> {
    let deadline = tokio::time::Instant::now() + CONNECT_PATIENCE;
    let store = loop {
        match Store::connect(url).await {
            Ok(store) => break store,
            Err(e) if e.is_unavailable() && tokio::time::Instant::now() < deadline => {
                tracing::warn!(error = %e, "database not reachable yet; trying again in 1 s");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
            Err(e) => return Err(StartupError(format!("DATABASE_URL: cannot connect: {e}"))),
        }
    };
    store
        .migrate()
        .await
        .map_err(|e| StartupError(format!("DATABASE_URL: cannot migrate: {e}")))?;
    Ok(store)
}

async fn first_run(state: &AppState) -> Result<(), StartupError> {
    let store = &state.store;
    let now = crate::store::now();
    let count = store
        .count_accounts()
        .await
        .map_err(|e| StartupError(format!("DATABASE_URL: {e}")))?;
    if count > 0 {
        return Ok(());
    }
    if let Some((email, password)) = &state.config.bootstrap_account {
        let email = Email::parse(email)
            .map_err(|e| StartupError(format!("GATEHOUSE_BOOTSTRAP_EMAIL: {e}")))?;
        validate_password(password)
            .map_err(|e| StartupError(format!("GATEHOUSE_BOOTSTRAP_PASSWORD: {e}")))?;
        let hash = state
            .passwords
            .hash_waiting(password.clone())
            .await
            .map_err(|e| StartupError(format!("GATEHOUSE_BOOTSTRAP_PASSWORD: {e}")))?;
        store
            .create_account(&email, &hash, now)
            .await
            .map_err(|e| StartupError(format!("GATEHOUSE_BOOTSTRAP_EMAIL: {e}")))?;
        tracing::info!("created the bootstrap account");
        return Ok(());
    }
    let token = Secret::generate(TokenKind::SetupToken);
    store
        .create_setup_token(&token.hash(), now, now + 24 * 3600)
        .await
        .map_err(|e| StartupError(format!("DATABASE_URL: {e}")))?;
    // The one place a secret is printed: the operator needs this link to create the first account.
    println!(
        "No account yet. Create the first one within 24 hours at: {}",
        state
            .config
            .url(&format!("/setup?token={}", token.expose()))
    );
    Ok(())
}

/// A future that completes on SIGINT or SIGTERM. The handlers are installed when this is
/// called, so call it before the port opens: a signal that arrives early still shuts down
/// gracefully instead of killing the process.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let term = signal(SignalKind::terminate());
        let int = signal(SignalKind::interrupt());
        async move {
            match (term, int) {
                (Ok(mut term), Ok(mut int)) => {
                    tokio::select! {
                        _ = term.recv() => {},
                        _ = int.recv() => {},
                    }
                }
                _ => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
            tracing::info!("shutting down: finishing in-flight requests");
        }
    }
    #[cfg(not(unix))]
    async move {
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("shutting down: finishing in-flight requests");
    }
}
