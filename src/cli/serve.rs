//! `gatehouse serve`: every setting of the server as an option with its environment variable
//! and default (clap's `env`), so `gatehouse serve --help` lists them all. A setting is read,
//! last one winning, from the `--config` file, the environment, then the command line; secrets
//! are refused on the command line (other users of the machine could read it in the process
//! list) and their values never shown in the help.
//!
//! The defaults shown are the ones [`crate::config::Config::from_vars`] applies; a unit test
//! checks that every variable the configuration reads is listed here.

// The options' doc comments are the help an operator reads in a terminal, where Markdown
// backticks around variable names would show as they are.
#![allow(clippy::doc_markdown)]

use std::collections::HashMap;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory};

/// Settings of the server (README "Configuration" explains each at length).
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Settings (each also read from its environment variable)")]
pub struct ServeArgs {
    /// Canonical URL of the MCP endpoint; tokens are bound to it (RFC 8707); its path is where
    /// the MCP route is mounted.
    #[arg(long, env = "MCP_SERVER_URL", value_name = "URL", default_value = crate::config::DEFAULT_MCP_SERVER_URL)]
    pub mcp_server_url: Option<String>,
    /// OAuth issuer, no trailing slash (RFC 8414). Default: the origin of MCP_SERVER_URL.
    #[arg(long, env = "GATEHOUSE_ISSUER", value_name = "URL")]
    pub issuer: Option<String>,
    /// Where console pages live, for links handed to agents. Default: the issuer.
    #[arg(long, env = "FRONTEND_URL", value_name = "URL")]
    pub frontend_url: Option<String>,
    /// `sqlite://FILE` or `postgres://…` (environment only: it may hold a password).
    #[arg(long, env = "DATABASE_URL", value_name = "URL", default_value = crate::config::DEFAULT_DATABASE_URL, hide_env_values = true)]
    pub database_url: Option<String>,
    /// Listen address.
    #[arg(
        long,
        env = "GATEHOUSE_BIND",
        value_name = "ADDR",
        default_value = "127.0.0.1:8080"
    )]
    pub bind: Option<String>,
    /// Address of a separate listener serving GET /metrics. Default: unset (no metrics).
    #[arg(long, env = "GATEHOUSE_METRICS_BIND", value_name = "ADDR")]
    pub metrics_bind: Option<String>,
    /// Token served at /.well-known/openai-apps-challenge. Default: unset (404).
    #[arg(long, env = "OPENAI_APPS_CHALLENGE", value_name = "TOKEN")]
    pub openai_apps_challenge: Option<String>,
    /// `off` disables every OAuth route, challenge and discovery document.
    #[arg(
        long,
        env = "GATEHOUSE_OAUTH",
        value_name = "on|off",
        default_value = "on"
    )]
    pub oauth: Option<String>,
    /// `off` turns password sign-in off: people sign in only through the identity providers
    /// (`gatehouse idp add`).
    #[arg(
        long,
        env = "GATEHOUSE_PASSWORD_SIGNIN",
        value_name = "on|off",
        default_value = "on"
    )]
    pub password_signin: Option<String>,
    /// `off` turns people's own MCP servers off (the Connections page offers none and the
    /// ones added are not served).
    #[arg(
        long,
        env = "GATEHOUSE_PERSONAL_UPSTREAMS",
        value_name = "on|off",
        default_value = "on"
    )]
    pub personal_upstreams: Option<String>,
    /// Hosts (`host[:port]`, comma-separated) a person's own MCP server may name although they
    /// are plain http or resolve to a loopback, private or link-local address. Default: none.
    #[arg(
        long,
        env = "GATEHOUSE_UPSTREAM_ALLOW_HOSTS",
        value_name = "HOST[:PORT],…"
    )]
    pub upstream_allow_hosts: Option<String>,
    /// `on` keeps live credential and client lookups in memory (the validation cache).
    #[arg(
        long,
        env = "GATEHOUSE_AUTH_CACHE",
        value_name = "on|off",
        default_value = "on"
    )]
    pub auth_cache: Option<String>,
    /// PostgreSQL only: where the validation cache's LISTEN connects (environment only: it may
    /// hold a password). Default: DATABASE_URL.
    #[arg(
        long,
        env = "GATEHOUSE_LISTEN_DATABASE_URL",
        value_name = "URL",
        hide_env_values = true
    )]
    pub listen_database_url: Option<String>,
    /// Browser origins allowed to call the MCP route, comma-separated (`*`: any). Default: the
    /// issuer's origin (and loopback origins on a loopback server).
    #[arg(long, env = "GATEHOUSE_ALLOWED_ORIGINS", value_name = "ORIGINS")]
    pub allowed_origins: Option<String>,
    /// Access-token lifetime, seconds (60 to 86400).
    #[arg(
        long,
        env = "GATEHOUSE_ACCESS_TOKEN_TTL",
        value_name = "SECONDS",
        default_value = "3600"
    )]
    pub access_token_ttl: Option<String>,
    /// Window in which a retried refresh gets the same successor, seconds (0 to 600).
    #[arg(
        long,
        env = "GATEHOUSE_REFRESH_GRACE_SECONDS",
        value_name = "SECONDS",
        default_value = "60"
    )]
    pub refresh_grace_seconds: Option<String>,
    /// Largest tool result or resource read sent, bytes (1024 to 16777216).
    #[arg(
        long,
        env = "GATEHOUSE_MAX_RESULT_BYTES",
        value_name = "BYTES",
        default_value = "65536"
    )]
    pub max_result_bytes: Option<String>,
    /// MCP calls one account may make per rolling hour; 0 = unlimited.
    #[arg(
        long,
        env = "GATEHOUSE_QUOTA_CALLS_PER_HOUR",
        value_name = "N",
        default_value = "1000"
    )]
    pub quota_calls_per_hour: Option<String>,
    /// Create this first account at start. Default: unset (the setup link).
    #[arg(long, env = "GATEHOUSE_BOOTSTRAP_EMAIL", value_name = "EMAIL")]
    pub bootstrap_email: Option<String>,
    /// Its password (environment only). Default: unset.
    #[arg(
        long,
        env = "GATEHOUSE_BOOTSTRAP_PASSWORD",
        value_name = "PASSWORD",
        hide_env_values = true
    )]
    pub bootstrap_password: Option<String>,
    /// `text` or `json` log lines (filter with RUST_LOG).
    #[arg(
        long,
        env = "GATEHOUSE_LOG_FORMAT",
        value_name = "text|json",
        default_value = "text"
    )]
    pub log_format: Option<String>,
    /// Threads that hash and check passwords (1 to 256). Default: cores − 1, at least 1.
    #[arg(long, env = "GATEHOUSE_PASSWORD_WORKERS", value_name = "N")]
    pub password_workers: Option<String>,
    /// Password checks that may wait for a worker; beyond it 503 (1 to 10000).
    #[arg(
        long,
        env = "GATEHOUSE_PASSWORD_QUEUE",
        value_name = "N",
        default_value = "32"
    )]
    pub password_queue: Option<String>,
    /// Dynamic registrations accepted from one address per hour.
    #[arg(
        long,
        env = "GATEHOUSE_REGISTRATIONS_PER_HOUR",
        value_name = "N",
        default_value = "20"
    )]
    pub registrations_per_hour: Option<String>,
    /// Bytes of registration requests accepted from one address per hour (at least 16384).
    #[arg(
        long,
        env = "GATEHOUSE_REGISTRATION_BYTES_PER_HOUR",
        value_name = "BYTES",
        default_value = "65536"
    )]
    pub registration_bytes_per_hour: Option<String>,
    /// Seconds after which a client that never completed an authorization is deleted.
    #[arg(
        long,
        env = "GATEHOUSE_UNUSED_CLIENT_MAX_AGE",
        value_name = "SECONDS",
        default_value = "86400"
    )]
    pub unused_client_max_age: Option<String>,
    /// Seconds a connection may take to send a request's headers (1 to 3600).
    #[arg(
        long,
        env = "GATEHOUSE_HEADER_READ_TIMEOUT",
        value_name = "SECONDS",
        default_value = "10"
    )]
    pub header_read_timeout: Option<String>,
    /// Seconds within which a request's whole body must have arrived (1 to 3600).
    #[arg(
        long,
        env = "GATEHOUSE_BODY_READ_TIMEOUT",
        value_name = "SECONDS",
        default_value = "30"
    )]
    pub body_read_timeout: Option<String>,
    /// Client connections served at once (16 to 1000000).
    #[arg(
        long,
        env = "GATEHOUSE_MAX_CONNECTIONS",
        value_name = "N",
        default_value = "4096"
    )]
    pub max_connections: Option<String>,
    /// Open connections one TCP peer may hold (1 to 1000000).
    #[arg(
        long,
        env = "GATEHOUSE_MAX_CONNECTIONS_PER_ADDRESS",
        value_name = "N",
        default_value = "256"
    )]
    pub max_connections_per_address: Option<String>,
    /// Reverse proxies whose X-Forwarded-For is trusted, comma-separated addresses or CIDR
    /// blocks. Default: none (the TCP peer is the client).
    #[arg(long, env = "GATEHOUSE_TRUSTED_PROXIES", value_name = "CIDRS")]
    pub trusted_proxies: Option<String>,
    /// The server key sealing stored secrets (environment only). Default: unset (the key file).
    #[arg(
        long,
        env = "GATEHOUSE_SECRET_KEY",
        value_name = "KEY",
        hide_env_values = true
    )]
    pub secret_key: Option<String>,
    /// A file holding the server key. Default: on SQLite the database file's name with `.key`
    /// appended; on PostgreSQL none.
    #[arg(long, env = "GATEHOUSE_SECRET_KEY_FILE", value_name = "FILE")]
    pub secret_key_file: Option<String>,
    /// Earlier server keys, comma-separated, kept to open what they sealed (environment only).
    /// Default: none.
    #[arg(
        long,
        env = "GATEHOUSE_SECRET_KEY_PREVIOUS",
        value_name = "KEYS",
        hide_env_values = true
    )]
    pub secret_key_previous: Option<String>,
    /// `serverInfo.name` in the MCP initialization.
    #[arg(long, env = "GATEHOUSE_SERVER_NAME", value_name = "NAME", default_value = crate::config::surface::DEFAULT_SERVER_NAME)]
    pub server_name: Option<String>,
    /// `serverInfo.title`, shown to people.
    #[arg(long, env = "GATEHOUSE_SERVER_TITLE", value_name = "TITLE", default_value = crate::config::surface::DEFAULT_SERVER_TITLE)]
    pub server_title: Option<String>,
    /// Audit rows older than this many days are deleted (0 keeps them for ever).
    #[arg(
        long,
        env = "GATEHOUSE_AUDIT_RETENTION_DAYS",
        value_name = "DAYS",
        default_value = "90"
    )]
    pub audit_retention_days: Option<String>,
    /// Audit rows older than this many seconds are deleted, in place of the days (10 s and
    /// up; for staging and soak runs). Default: unset (the days apply).
    #[arg(
        long,
        env = "GATEHOUSE_AUDIT_RETENTION_SECONDS",
        value_name = "SECONDS"
    )]
    pub audit_retention_seconds: Option<String>,
    /// Seconds ended credentials are kept before they are deleted (10 s and up): expired
    /// tokens and codes, rotated refresh tokens (a replay is recognised only while the rotated
    /// token is kept) and revoked families. Default: unset (a day past expiry; 30 days after
    /// rotation or revocation).
    #[arg(
        long,
        env = "GATEHOUSE_CREDENTIAL_RETENTION_SECONDS",
        value_name = "SECONDS"
    )]
    pub credential_retention_seconds: Option<String>,
    /// Seconds between two rounds of pruning (1 to 86400).
    #[arg(
        long,
        env = "GATEHOUSE_UPKEEP_INTERVAL",
        value_name = "SECONDS",
        default_value = "600"
    )]
    pub upkeep_interval: Option<String>,
    /// Where audit events are posted as NDJSON batches. Default: unset (none sent).
    #[arg(long, env = "GATEHOUSE_EVENTS_URL", value_name = "URL")]
    pub events_url: Option<String>,
    /// Bearer token sent with every events batch (environment only). Default: unset.
    #[arg(
        long,
        env = "GATEHOUSE_EVENTS_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub events_token: Option<String>,
    /// SMTP server that mails password-reset links (smtp://host:port, `?tls=required` for
    /// STARTTLS, or smtps://; environment only, it may hold a password). Default: unset (no
    /// "Forgot your password?").
    #[arg(
        long,
        env = "GATEHOUSE_SMTP_URL",
        value_name = "URL",
        hide_env_values = true
    )]
    pub smtp_url: Option<String>,
    /// The From of those mails. Default: gatehouse@ the issuer's host.
    #[arg(long, env = "GATEHOUSE_SMTP_FROM", value_name = "MAILBOX")]
    pub smtp_from: Option<String>,
    /// `on`: every password sign-in needs a second factor (TOTP); a person without one enrols
    /// at the next sign-in.
    #[arg(
        long,
        env = "GATEHOUSE_REQUIRE_2FA",
        value_name = "on|off",
        default_value = "off"
    )]
    pub require_2fa: Option<String>,
}

/// Every setting of [`ServeArgs`]: (argument id, environment variable, secret).
pub fn settings() -> Vec<(String, String, bool)> {
    let command = ServeArgs::augment_args(clap::Command::new("serve"));
    command
        .get_arguments()
        .filter_map(|arg| {
            let env = arg.get_env()?.to_str()?.to_string();
            Some((arg.get_id().to_string(), env, arg.is_hide_env_values_set()))
        })
        .collect()
}

/// The settings given as options on the command line of `serve` (not those from the
/// environment or defaults, which [`crate::config::Config::load`] reads itself), by
/// environment variable name. Errors: a secret given on the command line.
pub fn command_line_settings(serve: &ArgMatches) -> Result<HashMap<String, String>, String> {
    let mut given = HashMap::new();
    for (id, env, secret) in settings() {
        if serve.value_source(&id) != Some(ValueSource::CommandLine) {
            continue;
        }
        if secret {
            return Err(format!(
                "--{} is refused on the command line (other users can read it in the process list): set {env} in the environment or the --config file",
                id.replace('_', "-")
            ));
        }
        if let Some(value) = serve.get_one::<String>(&id) {
            given.insert(env, value.clone());
        }
    }
    Ok(given)
}

/// Parses the process's command line: the [`super::Cli`] and the `serve` settings given on
/// it ([`command_line_settings`]). Exits with clap's message on a bad command line.
pub fn parse() -> (super::Cli, Result<HashMap<String, String>, String>) {
    use clap::FromArgMatches;
    let matches = super::Cli::command().get_matches();
    let cli = super::Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let settings = match matches.subcommand_matches("serve") {
        Some(serve) => command_line_settings(serve),
        None => Ok(HashMap::new()),
    };
    (cli, settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variable the configuration reads (a quoted upper-case name in its sources) has its
    /// option here, with the variable as its `env`, so `serve --help` lists them all.
    #[test]
    fn every_configuration_variable_is_a_serve_setting() {
        let sources = [
            include_str!("../config.rs"),
            include_str!("../config/surface.rs"),
            include_str!("../config/identity.rs"),
            include_str!("../config/server_key.rs"),
        ];
        let listed: Vec<String> = settings().into_iter().map(|(_, env, _)| env).collect();
        let mut read = Vec::new();
        for source in sources {
            for piece in source.split('"').skip(1).step_by(2) {
                let is_variable = [
                    "GATEHOUSE_",
                    "DATABASE_URL",
                    "MCP_SERVER_URL",
                    "FRONTEND_URL",
                    "OPENAI_",
                ]
                .iter()
                .any(|p| piece.starts_with(p))
                    && piece.chars().all(|c| c.is_ascii_uppercase() || c == '_');
                if is_variable && !read.contains(&piece.to_string()) {
                    read.push(piece.to_string());
                }
            }
        }
        assert!(read.len() >= 30, "found {read:?}");
        let missing: Vec<_> = read.iter().filter(|v| !listed.contains(v)).collect();
        assert!(missing.is_empty(), "not in `serve --help`: {missing:?}");
    }

    /// The defaults shown are the configuration's: a configuration built from the shown
    /// defaults is the one built from nothing.
    #[test]
    fn the_defaults_shown_are_the_configurations() {
        let command = ServeArgs::augment_args(clap::Command::new("serve"));
        let mut shown = HashMap::new();
        for arg in command.get_arguments() {
            if let (Some(env), Some(default)) = (arg.get_env(), arg.get_default_values().first()) {
                shown.insert(
                    env.to_string_lossy().into_owned(),
                    default.to_string_lossy().into_owned(),
                );
            }
        }
        assert!(shown.len() >= 20, "{shown:?}");
        let from_nothing = crate::config::Config::from_vars(&HashMap::new()).unwrap();
        let from_shown = crate::config::Config::from_vars(&shown).unwrap();
        let normalise = |c: &crate::config::Config| {
            format!("{c:?}").replace("mcp_server_url_given: true", "mcp_server_url_given: false")
        };
        assert_eq!(normalise(&from_nothing), normalise(&from_shown));
    }

    /// Options on the command line are taken, environment and defaults are left to the
    /// configuration, and a secret on the command line is refused.
    #[test]
    fn command_line_options_are_taken_and_secrets_refused() {
        let command = ServeArgs::augment_args(clap::Command::new("serve"));
        let m = command
            .clone()
            .try_get_matches_from([
                "serve",
                "--bind",
                "0.0.0.0:9000",
                "--access-token-ttl",
                "600",
            ])
            .unwrap();
        let given = command_line_settings(&m).unwrap();
        assert_eq!(
            given.get("GATEHOUSE_BIND").map(String::as_str),
            Some("0.0.0.0:9000")
        );
        assert_eq!(
            given.get("GATEHOUSE_ACCESS_TOKEN_TTL").map(String::as_str),
            Some("600")
        );
        assert_eq!(given.len(), 2, "{given:?}");
        let m = command
            .try_get_matches_from(["serve", "--secret-key", "abc"])
            .unwrap();
        let e = command_line_settings(&m).unwrap_err();
        assert!(
            e.contains("GATEHOUSE_SECRET_KEY") && !e.contains("abc"),
            "{e}"
        );
    }
}
