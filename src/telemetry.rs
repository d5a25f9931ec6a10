//! Structured logs through `tracing`: `RUST_LOG` filters, `GATEHOUSE_LOG_FORMAT=json` writes JSON
//! lines, text lines carry colour codes only when standard error is a terminal. Request spans
//! carry the request id only (the request's one line, [`crate::metrics::RequestMetrics::finish`],
//! gives its method, route, status, latency and client) — never a path, query string, header,
//! cookie, body, token or password.
//!
//! Lines are written to standard error by a writer thread of their own ([`line_writer`]), not
//! by the thread that logs them: a serving thread formats its line and appends it to a batch;
//! the writer thread, woken by a batch's first line, lingers a few milliseconds and writes the
//! whole batch at once, so under load tens of request lines cost one wake and one system call,
//! and a slow reader of standard error never stalls a request before
//! [`line_writer::LIMIT`] bytes wait. Nothing is dropped: past that a logging thread waits.
//! [`flush`] writes out what waits; the process calls it before it exits.

mod line_writer;

use std::sync::Mutex;

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;
use line_writer::WriterGuard;

/// The writer thread's guard: finishing it writes out the waiting lines and ends the thread.
static WRITER: Mutex<Option<WriterGuard>> = Mutex::new(None);

/// Installs the global subscriber (once; later calls are ignored).
///
/// Two kinds of rmcp's lines are left out, because Gatehouse logs the same event itself:
/// - its client transports log their end as an error (`worker quit with fatal: …`) without
///   naming the upstream, when an upstream cannot be reached or goes away; Gatehouse logs
///   `upstream left out of tools/list` or `upstream call failed` with the upstream's name;
/// - its service logs every JSON-RPC error answered to a client (an unknown tool, invalid
///   params) as a warning with the error's Rust debug form, `data` included, which may echo
///   what the client sent; Gatehouse logs each request with its status, never its content.
pub fn init(format: LogFormat) {
    init_at(
        format,
        "info,sqlx=warn,tower_sessions=warn",
        &["rmcp=warn", QUIET_TRANSPORT_WORKERS, QUIET_SERVICE],
    );
}

/// The directive that silences rmcp's transport workers ([`init`]).
const QUIET_TRANSPORT_WORKERS: &str = "rmcp::transport::worker=off";

/// The directive that leaves a failed upstream listing out of a command's log
/// ([`init_for_command`]): `upstream add` says why in its answer.
const QUIET_LISTING: &str = "gatehouse::upstream::listing=off";

/// The directive that keeps only the errors of rmcp's service loop ([`init`]).
const QUIET_SERVICE: &str = "rmcp::service=error";

/// As [`init`], for a one-off command (`gatehouse account …`, `upstream …`, `key …`): without
/// `RUST_LOG` only warnings and errors are logged, so what the command prints is all a person
/// sees; the audit lines an administrative change also writes at `info` (target
/// `gatehouse::audit`) show with `RUST_LOG=info`. rmcp's own lines and Gatehouse's line for a
/// failed upstream listing (an upstream that `upstream add` could not reach: the command says
/// why in its answer) only with `RUST_LOG`.
pub fn init_for_command(format: LogFormat) {
    let quiet: &[&'static str] = if std::env::var_os("RUST_LOG").is_some() {
        &["rmcp=warn"]
    } else {
        &["rmcp=off", QUIET_LISTING]
    };
    init_at(format, "warn", quiet);
}

/// Installs the subscriber with `default` as the filter when `RUST_LOG` is not set, and
/// the directives of `rmcp` (for rmcp's targets) whatever it says.
fn init_at(format: LogFormat, default: &str, rmcp: &[&'static str]) {
    // rmcp logs request and result payloads at debug level: it stays at warn (or below)
    // whatever RUST_LOG says, so tool arguments and results never reach a log.
    #[allow(
        clippy::expect_used,
        reason = "a constant directive, parsed in the tests"
    )]
    let filter = rmcp.iter().fold(
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default)),
        |filter, directive| filter.add_directive(directive.parse().expect("valid directive")),
    );
    // Colour codes only for a person at a terminal, never into a file or a log collector.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let (writer, guard) = line_writer::spawn(
        std::io::stderr(),
        "gatehouse-log",
        line_writer::LINGER,
        line_writer::LIMIT,
    );
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(writer);
    let installed = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
    if installed.is_ok() {
        *WRITER
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(guard);
    }
}

/// Writes out every line logged so far and stops the writer thread (waiting at most
/// [`line_writer::FINISH_WAIT`]); lines logged afterwards are written by the threads that log
/// them. Called before the process exits (a line still waiting would be lost).
pub fn flush() {
    // Finished under the lock: a second caller (the stop watchdog while `main` flushes)
    // returns only once the first has written everything out, or given up.
    let mut writer = WRITER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(guard) = writer.as_mut() {
        guard.finish();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_constant_filters_parse() {
        for directive in [
            "rmcp=warn",
            "rmcp=off",
            super::QUIET_TRANSPORT_WORKERS,
            super::QUIET_SERVICE,
            super::QUIET_LISTING,
        ] {
            assert!(
                directive
                    .parse::<tracing_subscriber::filter::Directive>()
                    .is_ok(),
                "{directive}"
            );
        }
        for default in ["info,sqlx=warn,tower_sessions=warn", "warn"] {
            assert!(
                tracing_subscriber::EnvFilter::try_new(default).is_ok(),
                "{default}"
            );
        }
    }
}
