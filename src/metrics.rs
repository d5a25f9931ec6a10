//! Prometheus metrics for operators, served as text at `GET /metrics` on a listener of its own
//! (`GATEHOUSE_METRICS_BIND`, off by default), never on the public port.
//!
//! Labels carry only values from fixed sets: route templates (axum's [`MatchedPath`], never the
//! raw path), methods, status classes, tool names from the catalog and outcomes. No label holds
//! an id, an email, a query string or a secret.
//!
//! Every series has its `# HELP` and `# TYPE` lines ([`describe`]); the counters of fixed label
//! sets are present from zero, before their first event; `gatehouse_build_info` carries the
//! version; the `process_*` series (CPU seconds, resident and virtual memory, open and allowed
//! files, read from `/proc/self` on Linux) are read at each scrape.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::net::TcpListener;

use crate::domain::audit::{Outcome, ResourceTokenEvent, TokenEvent};
use crate::password::PasswordPool;
use crate::store::Store;

/// Name of the request counter (labels `method`, `route`, `status`).
pub const HTTP_REQUESTS: &str = "gatehouse_http_requests_total";
/// Name of the request latency histogram, in seconds (labels `method`, `route`).
pub const HTTP_DURATION: &str = "gatehouse_http_request_duration_seconds";
/// Token events (label `event`: `issued`, `refreshed`, `reused`, `revoked`).
pub const TOKENS: &str = "gatehouse_tokens_total";
/// Tokens per resource (labels `resource`: the resource URL, Gatehouse's own `MCP_SERVER_URL`
/// or a registered resource's; `event`: `issued`, `refreshed`, `introspected`). The label values
/// are bounded by the registry, which only an administrator changes.
pub const RESOURCE_TOKENS: &str = "gatehouse_resource_tokens_total";
/// Dynamic registrations (label `outcome`: `success`, `throttled`).
pub const REGISTRATIONS: &str = "gatehouse_registrations_total";
/// Sign-in attempts (label `outcome`: `success`, `failure`, `throttled`, `busy`).
pub const SIGNINS: &str = "gatehouse_signins_total";
/// Tool calls (labels `tool`, `outcome`).
pub const TOOL_CALLS: &str = "gatehouse_tool_calls_total";
/// Calls and reads forwarded to upstream MCP servers (labels `upstream`, `outcome`:
/// `success`, `tool_error`, `upstream_error`, `timeout`, `busy`, `cooling_down`, …).
pub const UPSTREAM_CALLS: &str = "gatehouse_upstream_calls_total";
/// Seconds a forwarded call or read took (label `upstream`); those refused as `busy` or
/// `cooling_down` were never sent and are not in it.
pub const UPSTREAM_CALL_SECONDS: &str = "gatehouse_upstream_call_seconds";
/// Listings of an upstream that failed, leaving it out of `tools/list` (label `upstream`).
pub const UPSTREAM_LIST_FAILURES: &str = "gatehouse_upstream_list_failures_total";
/// Connections closed on arrival because their source address already held
/// `GATEHOUSE_MAX_CONNECTIONS_PER_ADDRESS` open ones (no labels).
pub const CONNECTIONS_REFUSED: &str = "gatehouse_connections_refused_total";

/// 503 answers by cause (label `cause`: `database` — busy, unreachable, ended by a failover, full
/// or read-only —, `password_workers` — every password worker busy —, or `other`).
pub const UNAVAILABLE: &str = "gatehouse_unavailable_total";
/// Build information: always 1, the version in the label `version`.
pub const BUILD_INFO: &str = "gatehouse_build_info";
/// Password jobs waiting for a worker (gauge).
pub const PASSWORD_QUEUE_DEPTH: &str = "gatehouse_password_queue_depth";
/// The database pool's connections (gauge, label `state`: `idle`, `in_use`).
pub const DB_POOL_CONNECTIONS: &str = "gatehouse_db_pool_connections";
/// Hot lookups answered, by lookup and by where they ran (counter, labels `lookup`:
/// [`crate::store::hot::HotLookup::name`], `path`: `in_place`, `batched`, `pool`;
/// [`crate::store::hot`]).
pub const HOT_READS: &str = "gatehouse_hot_reads_total";
/// Rows deleted by retention (label `what`, e.g. `audit_events`).
pub const PRUNED_ROWS: &str = "gatehouse_pruned_rows_total";

/// Why a request was answered `503` on purpose, for [`UNAVAILABLE`]: put in the answer's
/// extensions ([`Unavailable::mark`]) where the 503 is decided, read when the request is
/// counted ([`RequestMetrics::finish`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unavailable {
    /// The database is busy, out of reach, ended the connection, or (`SQLite`) full or
    /// read-only.
    Database,
    /// Every password worker is busy.
    PasswordWorkers,
}

impl Unavailable {
    /// The `cause` label.
    pub fn label(self) -> &'static str {
        match self {
            Unavailable::Database => "database",
            Unavailable::PasswordWorkers => "password_workers",
        }
    }

    /// `response` marked as a 503 of this cause.
    pub fn mark(self, mut response: Response) -> Response {
        response.extensions_mut().insert(self);
        response
    }
}

/// Latency buckets, in seconds.
const DURATION_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// How often the recorder's histograms are drained into their buckets (seconds).
pub const UPKEEP: Duration = Duration::from_secs(5);

/// The process-wide Prometheus recorder, installed on first use (metrics are global to the
/// process, so every server in it shares it), only when metrics are served
/// (`GATEHOUSE_METRICS_BIND`): without a recorder the metric macros record nothing. `None` if
/// it could not be installed.
///
/// Once installed, a thread of its own drains the histograms every [`UPKEEP`] for as long as
/// the process lives: the recorder keeps every latency sample until a drain folds it into the
/// buckets, so without one its memory grew by every request served (about 20 bytes each).
pub fn recorder() -> Option<PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let built = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Full(HTTP_DURATION.into()), DURATION_BUCKETS)
                .and_then(PrometheusBuilder::install_recorder);
            match built {
                Ok(handle) => {
                    let upkeep = handle.clone();
                    let started = std::thread::Builder::new()
                        .name("metrics-upkeep".into())
                        .spawn(move || {
                            loop {
                                std::thread::sleep(UPKEEP);
                                upkeep.run_upkeep();
                            }
                        });
                    if let Err(e) = started {
                        tracing::error!(error = %e, "could not start the metrics upkeep");
                    }
                    describe();
                    Some(handle)
                }
                Err(e) => {
                    tracing::error!(error = %e, "could not install the metrics recorder");
                    None
                }
            }
        })
        .clone()
}

/// Gives every series its `# HELP` text (the exporter writes `# TYPE` for each), sets
/// [`BUILD_INFO`], and makes the counters of fixed label sets present at zero, so a rate or an
/// alert on them works before their first event. Called once, when the recorder is installed.
fn describe() {
    describe_http_and_oauth();
    describe_mcp_and_upstreams();
    describe_serving();
    describe_store_and_events();
    present_from_start();
}

/// Describes the HTTP series ([`HTTP_REQUESTS`], [`HTTP_DURATION`]) and the OAuth ones:
/// [`TOKENS`], [`REGISTRATIONS`], [`SIGNINS`].
fn describe_http_and_oauth() {
    use metrics::{describe_counter, describe_histogram};
    describe_counter!(
        HTTP_REQUESTS,
        "HTTP requests answered, by method, route template and status class."
    );
    describe_histogram!(
        HTTP_DURATION,
        metrics::Unit::Seconds,
        "Time to answer an HTTP request, by method and route template."
    );
    describe_counter!(
        TOKENS,
        "Token events: issued (code redeemed), refreshed, reused (a rotated refresh token replayed), revoked."
    );
    describe_counter!(
        REGISTRATIONS,
        "Dynamic client registrations (RFC 7591), by outcome."
    );
    describe_counter!(SIGNINS, "Sign-in attempts, by outcome.");
}

/// Describes the MCP series: [`TOOL_CALLS`], [`RESOURCE_TOKENS`] and the upstream ones
/// ([`UPSTREAM_CALLS`], [`UPSTREAM_CALL_SECONDS`], [`UPSTREAM_LIST_FAILURES`]).
fn describe_mcp_and_upstreams() {
    use metrics::{describe_counter, describe_histogram};
    describe_counter!(TOOL_CALLS, "MCP tool calls, by tool and outcome.");
    describe_counter!(
        RESOURCE_TOKENS,
        "Tokens for registered resources, by resource URL and event (issued, refreshed, introspected)."
    );
    describe_counter!(
        UPSTREAM_CALLS,
        "Tool calls forwarded to upstream MCP servers, by upstream and outcome."
    );
    describe_histogram!(
        UPSTREAM_CALL_SECONDS,
        metrics::Unit::Seconds,
        "Time a forwarded tool call, prompt get or resource read took, by upstream; refusals (busy, cooling down) are not counted."
    );
    describe_counter!(
        UPSTREAM_LIST_FAILURES,
        "Listings of an upstream that failed, leaving its tools out of tools/list, by upstream."
    );
}

/// Describes the series of the serving process: [`CONNECTIONS_REFUSED`], [`UNAVAILABLE`],
/// [`BUILD_INFO`], [`PASSWORD_QUEUE_DEPTH`], [`DB_POOL_CONNECTIONS`].
fn describe_serving() {
    use metrics::{describe_counter, describe_gauge};
    describe_counter!(
        CONNECTIONS_REFUSED,
        "Connections closed on arrival: their source address already held the most open connections allowed."
    );
    describe_counter!(
        UNAVAILABLE,
        "Requests answered 503 with Retry-After, by cause (database, password_workers, other)."
    );
    describe_gauge!(
        BUILD_INFO,
        "Build information: always 1; the version in the label."
    );
    describe_gauge!(PASSWORD_QUEUE_DEPTH, "Password jobs waiting for a worker.");
    describe_gauge!(
        DB_POOL_CONNECTIONS,
        "Connections of the database pool, by state (idle, in_use)."
    );
}

/// Describes the store's series ([`HOT_READS`], [`PRUNED_ROWS`]) and the account events'
/// ([`crate::events::EVENTS_SENT`], [`crate::events::EVENTS_DROPPED`]).
fn describe_store_and_events() {
    use metrics::describe_counter;
    describe_counter!(
        HOT_READS,
        "Hot lookups answered, by lookup and path (in_place on SQLite, batched on PostgreSQL, pool)."
    );
    describe_counter!(
        PRUNED_ROWS,
        "Rows deleted by the upkeep task's retention, by table (label what)."
    );
    describe_counter!(
        crate::events::EVENTS_SENT,
        "Account events delivered to the events receiver."
    );
    describe_counter!(
        crate::events::EVENTS_DROPPED,
        "Account events dropped, by reason (queue_full, undeliverable, refused)."
    );
}

/// Makes the counter `name` present at zero for each of `values` of its `label`.
fn zero_counters(
    name: &'static str,
    label: &'static str,
    values: impl IntoIterator<Item = &'static str>,
) {
    for value in values {
        metrics::counter!(name, label => value).increment(0);
    }
}

/// Sets [`BUILD_INFO`], then makes the counters of fixed label sets present at zero
/// ([`TOKENS`], [`REGISTRATIONS`], [`SIGNINS`], [`UNAVAILABLE`], the dropped account events,
/// [`PRUNED_ROWS`] by table), and the unlabelled [`CONNECTIONS_REFUSED`] and
/// [`crate::events::EVENTS_SENT`].
///
/// Comes after the describing functions: the test `every_declared_series_is_described` reads
/// them, from [`describe`] to the [`BUILD_INFO`] gauge below.
fn present_from_start() {
    metrics::gauge!(BUILD_INFO, "version" => env!("CARGO_PKG_VERSION")).set(1.0);
    zero_counters(TOKENS, "event", TokenEvent::ALL.iter().map(|e| e.as_str()));
    zero_counters(
        REGISTRATIONS,
        "outcome",
        Outcome::REGISTRATION.map(Outcome::as_str),
    );
    zero_counters(SIGNINS, "outcome", Outcome::SIGNIN.map(Outcome::as_str));
    zero_counters(
        UNAVAILABLE,
        "cause",
        ["database", "password_workers", "other"],
    );
    zero_counters(
        crate::events::EVENTS_DROPPED,
        "reason",
        ["queue_full", "undeliverable", "refused"],
    );
    zero_counters(
        PRUNED_ROWS,
        "what",
        [
            crate::store::audit_query::AUDIT_RETENTION.name,
            "access_tokens",
            "refresh_tokens",
            "token_families",
            "authorization_codes",
            "authorization_requests",
            "setup_tokens",
            "password_reset_tokens",
            "project_invitations",
            "signin_devices",
            "client_assertion_jtis",
            "spent_confirmations",
            "dpop_proofs",
            "device_authorizations",
            "idp_signins",
            "rate_limits",
            "sessions",
        ],
    );
    metrics::counter!(CONNECTIONS_REFUSED).increment(0);
    metrics::counter!(crate::events::EVENTS_SENT).increment(0);
}

/// Makes the [`TOOL_CALLS`] series of every tool in `tools` (the built-in catalog's names)
/// present at zero for every outcome of [`Outcome::TOOL_CALL`]: called when metrics start being
/// served, so a rate or alert on a tool works before its first call.
pub fn tools_served(tools: impl IntoIterator<Item = &'static str>) {
    for tool in tools {
        for outcome in Outcome::TOOL_CALL {
            metrics::counter!(TOOL_CALLS, "tool" => tool, "outcome" => outcome.as_str())
                .increment(0);
        }
    }
}

/// Makes the [`UPSTREAM_CALLS`] series of the upstream `name` present at zero for every
/// outcome: called when the upstream starts being served, so a rate or alert on it works
/// before its first call.
pub fn upstream_served(name: &str) {
    for outcome in Outcome::UPSTREAM_CALL {
        metrics::counter!(UPSTREAM_CALLS, "upstream" => name.to_string(), "outcome" => outcome.as_str())
            .increment(0);
    }
    metrics::counter!(UPSTREAM_LIST_FAILURES, "upstream" => name.to_string()).increment(0);
}

/// The `process_*` series of the Prometheus client conventions, read now from `/proc/self`
/// (Linux; elsewhere nothing): `process_cpu_seconds_total` (user and system CPU, seconds),
/// `process_resident_memory_bytes`, `process_virtual_memory_bytes`, `process_open_fds`,
/// `process_max_fds` (the soft limit), each with its `# HELP` and `# TYPE`.
pub fn process_metrics() -> String {
    let mut out = String::new();
    let mut series = |name: &str, kind: &str, help: &str, value: f64| {
        out.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n\n"
        ));
    };
    if let Some(cpu) = cpu_seconds() {
        series(
            "process_cpu_seconds_total",
            "counter",
            "User and system CPU time spent, in seconds.",
            cpu,
        );
    }
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        if let Some(kib) = status_kib(&status, "VmRSS:") {
            series(
                "process_resident_memory_bytes",
                "gauge",
                "Resident memory size, in bytes.",
                (kib * 1024) as f64,
            );
        }
        if let Some(kib) = status_kib(&status, "VmSize:") {
            series(
                "process_virtual_memory_bytes",
                "gauge",
                "Virtual memory size, in bytes.",
                (kib * 1024) as f64,
            );
        }
    }
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        series(
            "process_open_fds",
            "gauge",
            "Open file descriptors.",
            fds.count() as f64,
        );
        if let Some(max) = rustix::process::getrlimit(rustix::process::Resource::Nofile).current {
            series(
                "process_max_fds",
                "gauge",
                "The most file descriptors the process may open (soft limit).",
                max as f64,
            );
        }
    }
    out
}

/// User plus system CPU time of the whole process, in seconds: fields 14 and 15 of
/// `/proc/self/stat` (proc(5)), in clock ticks. The command name (field 2) may hold spaces and
/// parentheses, so fields are counted after its last `)`.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    let ticks = rustix::param::clock_ticks_per_second();
    (ticks > 0).then(|| (utime + stime) as f64 / ticks as f64)
}

/// The value in KiB of a `/proc/self/status` line such as `VmRSS:    1234 kB`.
fn status_kib(status: &str, key: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// Counts one connection of [`CONNECTIONS_REFUSED`].
pub fn connection_refused() {
    metrics::counter!(CONNECTIONS_REFUSED).increment(1);
}

/// Counts `event` of [`TOKENS`].
pub fn token_event(event: TokenEvent) {
    metrics::counter!(TOKENS, "event" => event.as_str()).increment(1);
}

/// Counts `event` of [`RESOURCE_TOKENS`] for the resource URL `resource`.
pub fn resource_token_event(event: ResourceTokenEvent, resource: &str) {
    metrics::counter!(RESOURCE_TOKENS, "resource" => resource.to_string(), "event" => event.as_str())
        .increment(1);
}

/// A method label from a fixed set (anything else is `other`).
fn method_label(m: &Method) -> &'static str {
    match *m {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        _ => "other",
    }
}

/// One request being counted: by method, route template and status class, with its latency
/// ([`RequestMetrics::start`], then [`RequestMetrics::finish`] with the answer's status); done
/// for every route by [`crate::app::router`]. A request that matched no route is labelled
/// `unmatched`.
pub struct RequestMetrics {
    method: &'static str,
    route: String,
    started: Instant,
    client: Option<std::net::IpAddr>,
    request_id: String,
}

impl RequestMetrics {
    /// Starts counting `req`.
    pub fn start(req: &Request) -> RequestMetrics {
        RequestMetrics {
            method: method_label(req.method()),
            route: req
                .extensions()
                .get::<MatchedPath>()
                .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned()),
            started: Instant::now(),
            client: req
                .extensions()
                .get::<crate::client_addr::ClientAddr>()
                .map(|c| c.0),
            // A v4 UUID from the thread's generator (ChaCha, seeded from the system once per
            // thread) rather than `Uuid::new_v4`, which asks the kernel for every id.
            request_id: uuid::Builder::from_random_bytes(rand::random())
                .into_uuid()
                .simple()
                .to_string(),
        }
    }

    /// This request's id (random, 32 hex digits): in its log line, its span and the
    /// `X-Request-Id` response header.
    pub fn request_id(&self) -> &str {
        &self.request_id
    }

    /// Counts the request as answered with `response`'s status, and records how long it took;
    /// a `503` is also counted in [`UNAVAILABLE`] by the cause marked on it ([`Unavailable`]),
    /// `other` when none was.
    ///
    /// Logs the request's one line: method, route template (never the raw path, which for a
    /// personal MCP URL holds its secret), status, latency in milliseconds, client address
    /// and request id; at INFO, a `503` (deliberate: busy or unavailable, with its cause) at
    /// WARN, any other 5xx at ERROR.
    pub fn finish(self, response: &Response) {
        let status = response.status();
        let latency_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        let client = self
            .client
            .map_or_else(|| "-".to_string(), |c| c.to_string());
        let (method, route, request_id) = (self.method, self.route.as_str(), &self.request_id);
        let code = status.as_u16();
        if status == StatusCode::SERVICE_UNAVAILABLE {
            let cause = response
                .extensions()
                .get::<Unavailable>()
                .map_or("other", |c| c.label());
            metrics::counter!(UNAVAILABLE, "cause" => cause).increment(1);
            tracing::warn!(
                method,
                route,
                status = code,
                latency_ms,
                client,
                request_id,
                cause,
                "request"
            );
        } else if status.is_server_error() {
            tracing::error!(
                method,
                route,
                status = code,
                latency_ms,
                client,
                request_id,
                "request"
            );
        } else {
            tracing::info!(
                method,
                route,
                status = code,
                latency_ms,
                client,
                request_id,
                "request"
            );
        }
        let class = match status.as_u16() / 100 {
            1 => "1xx",
            2 => "2xx",
            3 => "3xx",
            4 => "4xx",
            _ => "5xx",
        };
        metrics::counter!(HTTP_REQUESTS, "method" => self.method, "route" => self.route.clone(), "status" => class)
            .increment(1);
        metrics::histogram!(HTTP_DURATION, "method" => self.method, "route" => self.route)
            .record(self.started.elapsed().as_secs_f64());
    }
}

/// `GET /metrics`: the gauges read now (password queue, database pool), then everything.
async fn render(State(sources): State<Gauged>) -> Response {
    metrics::gauge!(PASSWORD_QUEUE_DEPTH).set(sources.passwords.queue_depth() as f64);
    let pool = sources.store.pool();
    let (size, idle) = (pool.size() as f64, pool.num_idle() as f64);
    metrics::gauge!(DB_POOL_CONNECTIONS, "state" => "idle").set(idle);
    metrics::gauge!(DB_POOL_CONNECTIONS, "state" => "in_use").set(size - idle);
    for which in crate::store::hot::HotLookup::ALL {
        let reads = sources.store.hot_reads(which);
        for (path, n) in [
            ("in_place", reads.in_place),
            ("batched", reads.batched),
            ("pool", reads.pool),
        ] {
            metrics::counter!(HOT_READS, "lookup" => which.name(), "path" => path).absolute(n);
        }
    }
    let mut body = sources.handle.render();
    body.push_str(&process_metrics());
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

/// What `GET /metrics` reads when it is asked: the gauges' sources and the recorder.
#[derive(Clone)]
struct Gauged {
    passwords: PasswordPool,
    store: Store,
    handle: PrometheusHandle,
}

/// Serves `GET /metrics` on `listener` until the task is aborted: the password pool's queue
/// depth and the database pool's connections, read at each scrape, then every series that
/// `handle`'s recorder holds.
pub async fn serve(
    listener: TcpListener,
    passwords: PasswordPool,
    store: Store,
    handle: PrometheusHandle,
) {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "metrics listening");
    }
    let app = Router::new()
        .route("/metrics", get(render))
        .with_state(Gauged {
            passwords,
            store,
            handle,
        });
    if let Err(e) = axum::serve(listener, app).await {
        tracing::error!(error = %e, "metrics listener stopped");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Request ids are RFC 9562 version-4 UUIDs as 32 lowercase hex digits (version nibble 4,
    /// variant bits 10), and do not repeat.
    #[test]
    fn request_ids_are_random_v4_uuids() {
        let request = Request::new(axum::body::Body::empty());
        let ids: std::collections::HashSet<String> = (0..10_000)
            .map(|_| RequestMetrics::start(&request).request_id().to_string())
            .collect();
        assert_eq!(ids.len(), 10_000, "a request id repeated");
        for id in ids.iter().take(100) {
            assert_eq!(id.len(), 32, "{id}");
            assert!(
                id.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
                "{id}"
            );
            assert_eq!(&id[12..13], "4", "version nibble of {id}");
            assert!(
                matches!(&id[16..17], "8" | "9" | "a" | "b"),
                "variant of {id}"
            );
        }
    }

    /// Every series name declared in this file (`pub const NAME: &str = "gatehouse_…"`) gets
    /// its `# HELP` text in [`describe`]: a series added without one fails here, whichever
    /// tests happen to make it appear in a scrape.
    #[test]
    fn every_declared_series_is_described() {
        let source = include_str!("metrics.rs");
        let start = source
            .find("fn describe()")
            .expect("describe() is in this file");
        let end = start + source[start..].find("metrics::gauge!(BUILD_INFO").unwrap();
        let body: String = source[start..end]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        let names: Vec<&str> = source
            .lines()
            .filter_map(|line| line.strip_prefix("pub const "))
            .filter(|rest| rest.contains(": &str = \"gatehouse_"))
            .filter_map(|rest| rest.split(':').next())
            .collect();
        assert!(names.contains(&"HTTP_REQUESTS") && names.contains(&"UPSTREAM_CALLS"));
        let undescribed: Vec<&str> = names
            .into_iter()
            .filter(|name| !body.contains(&format!("!({name},")))
            .collect();
        assert!(
            undescribed.is_empty(),
            "series without HELP: {undescribed:?}"
        );
    }

    /// The process series read `/proc/self` as proc(5) lays it out: CPU time is counted
    /// (this test has spent some), memory is at least a megabyte, and this process has files
    /// open (its standard streams at least) under a limit above that.
    #[test]
    fn process_metrics_read_proc_self() {
        let text = process_metrics();
        let value = |name: &str| -> f64 {
            let line = text
                .lines()
                .find(|l| l.starts_with(&format!("{name} ")))
                .unwrap_or_else(|| panic!("{name} missing: {text}"));
            line.rsplit(' ').next().unwrap().parse().unwrap()
        };
        assert!(
            text.contains("# TYPE process_cpu_seconds_total counter"),
            "{text}"
        );
        assert!(
            text.contains("# HELP process_resident_memory_bytes "),
            "{text}"
        );
        // Spin until a clock tick of CPU is counted (at most 5 s on a loaded machine).
        let spin = Instant::now();
        while cpu_seconds().unwrap() == 0.0 && spin.elapsed() < Duration::from_secs(5) {
            std::hint::black_box(spin.elapsed());
        }
        assert!(cpu_seconds().unwrap() > 0.0);
        assert!(value("process_resident_memory_bytes") > 1_048_576.0);
        assert!(value("process_virtual_memory_bytes") >= value("process_resident_memory_bytes"));
        assert!(value("process_open_fds") >= 3.0);
        assert!(value("process_max_fds") >= value("process_open_fds"));
        assert_eq!(status_kib("VmRSS:\t  2048 kB\n", "VmRSS:"), Some(2048));
    }

    /// Once installed, the recorder's histograms are drained by a thread of its own, whether
    /// or not a metrics listener runs: the recorder keeps every latency sample until drained,
    /// so a process that recorded without draining grew by every request it served.
    #[test]
    fn the_installed_recorder_drains_its_histograms_by_itself() {
        assert!(recorder().is_some());
        // A new thread takes its name once it runs: look for up to a second.
        let upkeep = || {
            std::fs::read_dir("/proc/self/task")
                .unwrap()
                .filter_map(Result::ok)
                .filter_map(|task| std::fs::read_to_string(task.path().join("comm")).ok())
                .any(|name| name.trim() == "metrics-upkeep")
        };
        let deadline = Instant::now() + Duration::from_secs(1);
        while !upkeep() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(upkeep(), "no thread drains the recorder's histograms");
    }
}
