//! Structured logs through `tracing`: `RUST_LOG` filters, `GATEHOUSE_LOG_FORMAT=json` writes JSON
//! lines. Request spans carry the method and path only — never a query string, header, cookie,
//! body, token or password.

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Installs the global subscriber (once; later calls are ignored).
pub fn init(format: LogFormat) {
    // rmcp logs request and result payloads at debug level: it stays at warn whatever RUST_LOG
    // says, so tool arguments and results never reach a log.
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,tower_sessions=warn"))
        .add_directive("rmcp=warn".parse().expect("valid directive"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
