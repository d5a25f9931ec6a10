//! Prometheus metrics for operators, served as text at `GET /metrics` on a listener of its own
//! (`GATEHOUSE_METRICS_BIND`, off by default), never on the public port.
//!
//! Labels carry only values from fixed sets: route templates (axum's [`MatchedPath`], never the
//! raw path), methods, status classes, tool names from the catalog and outcomes. No label holds
//! an id, an email, a query string or a secret.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::net::TcpListener;

use crate::state::AppState;

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
/// Connections closed on arrival because their source address already held
/// `GATEHOUSE_MAX_CONNECTIONS_PER_ADDRESS` open ones (no labels).
pub const CONNECTIONS_REFUSED: &str = "gatehouse_connections_refused_total";

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

/// Counts one connection of [`CONNECTIONS_REFUSED`].
pub fn connection_refused() {
    metrics::counter!(CONNECTIONS_REFUSED).increment(1);
}

/// Counts `event` of [`TOKENS`].
pub fn token_event(event: &'static str) {
    metrics::counter!(TOKENS, "event" => event).increment(1);
}

/// Counts `event` (`issued`, `refreshed`, `introspected`) of [`RESOURCE_TOKENS`] for the
/// resource URL `resource`.
pub fn resource_token_event(event: &'static str, resource: &str) {
    metrics::counter!(RESOURCE_TOKENS, "resource" => resource.to_string(), "event" => event)
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
        }
    }

    /// Counts the request as answered with `status`, and records how long it took.
    pub fn finish(self, status: StatusCode) {
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
async fn render(State((state, handle)): State<(AppState, PrometheusHandle)>) -> Response {
    metrics::gauge!("gatehouse_password_queue_depth").set(state.passwords.queue_depth() as f64);
    let pool = state.store.pool();
    let (size, idle) = (pool.size() as f64, pool.num_idle() as f64);
    metrics::gauge!("gatehouse_db_pool_connections", "state" => "idle").set(idle);
    metrics::gauge!("gatehouse_db_pool_connections", "state" => "in_use").set(size - idle);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        handle.render(),
    )
        .into_response()
}

/// Serves `GET /metrics` on `listener` until the task is aborted.
pub async fn serve(listener: TcpListener, state: AppState, handle: PrometheusHandle) {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "metrics listening");
    }
    let app = Router::new()
        .route("/metrics", get(render))
        .with_state((state, handle));
    if let Err(e) = axum::serve(listener, app).await {
        tracing::error!(error = %e, "metrics listener stopped");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
