//! Structured logs through `tracing`: `RUST_LOG` filters, `GATEHOUSE_LOG_FORMAT=json` writes JSON
//! lines, text lines carry colour codes only when standard error is a terminal. Request spans
//! carry the request id only (the request's one line, [`crate::metrics::RequestMetrics::finish`],
//! gives its method, route, status, latency and client) — never a path, query string, header,
//! cookie, body, token or password.
//!
//! Lines are written to standard error by a writer thread of their own
//! ([`tracing_appender::non_blocking`]), not by the thread that logs them: a serving thread
//! formats its line and hands it over; the writer thread takes every line waiting, writes them
//! in one buffered write and flushes, so under load many request lines cost one system call,
//! and a slow reader of standard error never stalls a request before the queue
//! ([`LINE_QUEUE`] lines) is full. Nothing is dropped: past that queue a logging thread waits.
//! [`flush`] writes out what is queued; the process calls it before it exits.

use std::sync::Mutex;

use tracing_appender::non_blocking::{NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// How many formatted lines may wait for the writer thread before a logging thread waits.
pub const LINE_QUEUE: usize = 128 * 1024;

/// The writer thread's guard: dropping it writes out the queued lines and ends the thread.
static WRITER: Mutex<Option<WorkerGuard>> = Mutex::new(None);

/// Installs the global subscriber (once; later calls are ignored).
pub fn init(format: LogFormat) {
    // rmcp logs request and result payloads at debug level: it stays at warn whatever RUST_LOG
    // says, so tool arguments and results never reach a log.
    #[allow(
        clippy::expect_used,
        reason = "a constant directive, parsed in the tests"
    )]
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,tower_sessions=warn"))
        .add_directive("rmcp=warn".parse().expect("valid directive"));
    // Colour codes only for a person at a terminal, never into a file or a log collector.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let (writer, guard) = NonBlockingBuilder::default()
        .buffered_lines_limit(LINE_QUEUE)
        .lossy(false)
        .thread_name("gatehouse-log")
        .finish(std::io::BufWriter::new(std::io::stderr()));
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

/// Writes out every line logged so far and stops the writer thread; lines logged afterwards
/// are not written. Called before the process exits (a line still queued would be lost).
pub fn flush() {
    let guard = WRITER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    drop(guard);
}
