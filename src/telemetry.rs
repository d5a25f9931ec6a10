//! Structured logs through `tracing`: `RUST_LOG` filters, `GATEHOUSE_LOG_FORMAT=json` writes JSON
//! lines, text lines carry colour codes only when standard error is a terminal. Request spans
//! carry the method, path (secrets shown as `…`) and request id only — never a query string,
//! header, cookie, body, token or password; the one line per request is
//! [`crate::metrics::RequestMetrics::finish`]'s.

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

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
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
