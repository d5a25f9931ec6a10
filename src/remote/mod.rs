//! The client side of a remote Gatehouse, for a desktop machine that must not hold the
//! database (issue 38 part 4; the seeds bridge stdio clients to an HTTP endpoint with a proxy):
//!
//! - `gatehouse login URL` ([`login`]): the OAuth client flow a native MCP client runs —
//!   discovery from the `401` challenge (RFC 9728), authorization-server metadata (RFC 8414),
//!   dynamic registration (RFC 7591), a loopback redirect (RFC 8252 §7.3), PKCE S256
//!   (RFC 7636) and `resource` (RFC 8707), with the `oauth2` crate — then the tokens in a file
//!   only its owner can read ([`credentials`]);
//! - `gatehouse stdio --url URL` ([`bridge`]): MCP on stdin/stdout forwarded message by message
//!   to the remote Streamable HTTP endpoint, with `GATEHOUSE_API_KEY` or the saved tokens
//!   (refreshed before they expire and once on a `401`).
//!
//! Nothing here opens a database or reads the server's configuration: the module is an HTTP
//! client of the MCP endpoint and its authorization server only.

use std::path::PathBuf;

pub mod bridge;
pub mod credentials;
pub mod login;

/// Why a remote command failed: one sentence for stderr.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RemoteError(pub String);

impl RemoteError {
    /// An error with this sentence.
    pub fn new(message: impl Into<String>) -> RemoteError {
        RemoteError(message.into())
    }
}

/// `gatehouse stdio [--url URL]`.
#[derive(Debug, Clone, clap::Args)]
pub struct StdioArgs {
    /// Bridge to this remote MCP endpoint (e.g. `https://mcp.example.com/mcp`) instead of
    /// opening the database: with `GATEHOUSE_API_KEY` when it is set, else with the tokens
    /// `gatehouse login URL` saved.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// The credentials file (default: `GATEHOUSE_CREDENTIALS_FILE`, else
    /// `$XDG_CONFIG_HOME/gatehouse/credentials.json` or `~/.config/gatehouse/credentials.json`).
    #[arg(long, value_name = "FILE", requires = "url")]
    pub credentials: Option<PathBuf>,
}

/// `gatehouse login URL`.
#[derive(Debug, Clone, clap::Args)]
pub struct LoginArgs {
    /// The MCP endpoint to sign in to, e.g. `https://mcp.example.com/mcp`.
    pub url: String,
    /// Scopes to ask for (space-separated); default: those the server's challenge names, plus
    /// `offline_access` when the server offers it (so the session can be refreshed).
    #[arg(long)]
    pub scope: Option<String>,
    /// The credentials file (see `gatehouse stdio --credentials`).
    #[arg(long, value_name = "FILE")]
    pub credentials: Option<PathBuf>,
    /// Print the sign-in URL without starting a browser.
    #[arg(long)]
    pub no_browser: bool,
    /// Seconds to wait for the sign-in in the browser.
    #[arg(long, default_value_t = 300)]
    pub wait: u64,
}

/// The MCP URL given on the command line: absolute http(s), no fragment; https unless the host
/// is loopback (OAuth 2.1 §1.5: tokens never cross the network in the clear).
///
/// Errors: a sentence naming what is wrong.
pub fn parse_mcp_url(raw: &str) -> Result<url::Url, RemoteError> {
    let url = url::Url::parse(raw.trim())
        .map_err(|_| RemoteError::new(format!("{raw} is not an absolute URL")))?;
    let loopback = url
        .host_str()
        .is_some_and(crate::domain::loopback::is_loopback_host);
    match url.scheme() {
        "https" => {}
        "http" if loopback => {}
        "http" => {
            return Err(RemoteError::new(format!(
                "{raw}: plain http is accepted only on a loopback host; use https"
            )));
        }
        _ => return Err(RemoteError::new(format!("{raw} is not an http(s) URL"))),
    }
    if url.fragment().is_some() || !url.username().is_empty() || url.password().is_some() {
        return Err(RemoteError::new(format!(
            "{raw}: the URL must have no fragment and no user:password"
        )));
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_or_loopback_http_urls_are_taken() {
        assert!(parse_mcp_url("https://mcp.example.com/mcp").is_ok());
        assert!(parse_mcp_url("http://127.0.0.1:8080/mcp").is_ok());
        assert!(parse_mcp_url("http://localhost:8080/mcp").is_ok());
        for bad in [
            "http://mcp.example.com/mcp",
            "ftp://x/mcp",
            "mcp",
            "https://u:p@mcp.example.com/mcp",
            "https://mcp.example.com/mcp#x",
        ] {
            assert!(parse_mcp_url(bad).is_err(), "{bad}");
        }
    }
}
