//! Typed configuration from environment variables and an optional TOML file.
//!
//! Every variable of the product specification is read here, once, at start. Each bad value is
//! reported as one [`ConfigError`] line that names the variable and what is wrong; the server
//! never starts half-configured.
//!
//! The optional file given by `--config` is a flat TOML table whose keys are the variable names
//! (`MCP_SERVER_URL = "https://mcp.example.com/mcp"`). Environment variables override the file.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;

use url::Url;

use crate::domain::resource::ResourceIndicator;

pub mod identity;
pub mod server_key;

pub use server_key::ServerKeySettings;
pub mod surface;

/// Default canonical URL of the MCP endpoint.
pub const DEFAULT_MCP_SERVER_URL: &str = "http://127.0.0.1:8080/mcp";
/// Default `SQLite` database: a file in the working directory, created when missing.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://gatehouse.db?mode=rwc";

/// Default of `GATEHOUSE_REGISTRATIONS_PER_HOUR`: registrations per source address per hour.
pub const DEFAULT_REGISTRATIONS_PER_HOUR: i64 = 20;
/// Default of `GATEHOUSE_REGISTRATION_BYTES_PER_HOUR`: bytes of registration requests per
/// source address per hour (64 KiB).
pub const DEFAULT_REGISTRATION_BYTES_PER_HOUR: i64 = 64 * 1024;
/// Default of `GATEHOUSE_UNUSED_CLIENT_MAX_AGE`: one day, in seconds.
pub const DEFAULT_UNUSED_CLIENT_MAX_AGE_SECS: i64 = 24 * 3600;
/// Default of `GATEHOUSE_HEADER_READ_TIMEOUT`, seconds.
pub const DEFAULT_HEADER_READ_TIMEOUT_SECS: i64 = 10;
/// Default of `GATEHOUSE_BODY_READ_TIMEOUT`, seconds.
pub const DEFAULT_BODY_READ_TIMEOUT_SECS: i64 = 30;
/// Default of `GATEHOUSE_MAX_CONNECTIONS`.
pub const DEFAULT_MAX_CONNECTIONS: i64 = 4096;
/// Default of `GATEHOUSE_MAX_CONNECTIONS_PER_ADDRESS`: one address may hold a sixteenth of the
/// default `GATEHOUSE_MAX_CONNECTIONS`, far more than a browser (6) or an office behind one NAT
/// address needs, too few to crowd out everyone else.
pub const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS: i64 = 256;

/// One bad configuration value: `VARIABLE: what is wrong`.
#[derive(Debug, thiserror::Error)]
#[error("{variable}: {message}")]
pub struct ConfigError {
    /// The environment variable (or file key) at fault.
    pub variable: &'static str,
    /// What is wrong with its value.
    pub message: String,
}

impl ConfigError {
    /// Builds an error for `variable`.
    pub fn new(variable: &'static str, message: impl Into<String>) -> Self {
        Self {
            variable,
            message: message.into(),
        }
    }
}

/// Which browser origins may call the MCP route (`GATEHOUSE_ALLOWED_ORIGINS`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedOrigins {
    /// `*`: any origin.
    Any,
    /// Exact origins (`scheme://host[:port]`, no trailing slash).
    List(Vec<String>),
}

impl AllowedOrigins {
    /// Whether a present `Origin` header value is allowed.
    pub fn allows(&self, origin: &str) -> bool {
        match self {
            AllowedOrigins::Any => true,
            AllowedOrigins::List(list) => list.iter().any(|o| o == origin),
        }
    }
}

/// Log line format (`GATEHOUSE_LOG_FORMAT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines (default).
    Text,
    /// One JSON object per line.
    Json,
}

/// A URL of this server from the configuration, parsed once at load: [`PublicUrl::url`] for
/// its parts (scheme, host, path), and the text it is published and joined with, exactly as
/// configured without trailing slashes ([`PublicUrl::as_str`], also its `Display`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicUrl {
    url: Url,
    text: String,
}

impl PublicUrl {
    /// The parsed URL.
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The published text (no trailing slash).
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl std::fmt::Display for PublicUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl PartialEq<&str> for PublicUrl {
    fn eq(&self, other: &&str) -> bool {
        self.text == *other
    }
}

/// One entry of `GATEHOUSE_UPSTREAM_ALLOW_HOSTS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedHost {
    /// The host, lowercase (an IPv6 address without brackets).
    pub host: String,
    /// The port; `None`: every port.
    pub port: Option<u16>,
}

impl AllowedHost {
    /// Parses `host`, `host:port`, `[v6]` or `[v6]:port`; `None` when it is none of those.
    pub fn parse(text: &str) -> Option<AllowedHost> {
        let url = Url::parse(&format!("https://{text}/")).ok()?;
        if url.path() != "/" || !url.username().is_empty() || url.query().is_some() {
            return None;
        }
        let host = url
            .host_str()?
            .trim_start_matches('[')
            .trim_end_matches(']');
        let port = url.port();
        // `host:443` reads as no port (the scheme's default) once parsed.
        let port = port.or_else(|| text.ends_with(":443").then_some(443));
        Some(AllowedHost {
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    /// Whether this entry allows `host` (as in a URL, IPv6 in brackets or not) at `port`.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        self.host.eq_ignore_ascii_case(host) && self.port.is_none_or(|p| p == port)
    }
}

/// The whole configuration of a Gatehouse process.
#[derive(Debug, Clone)]
pub struct Config {
    /// `MCP_SERVER_URL`: canonical URL of the MCP endpoint, no trailing slash; tokens are bound
    /// to it (RFC 8707). The text of [`Config::resource`] (the same normalised serialisation),
    /// for pages, documents and storage; nothing parses it again.
    pub mcp_server_url: String,
    /// The same URL as the RFC 8707 resource indicator every resource and audience is compared
    /// with ([`ResourceIndicator::matches`]), parsed once at load.
    pub resource: ResourceIndicator,
    /// The path of `MCP_SERVER_URL`, where the MCP route is mounted (e.g. `/mcp`).
    pub mcp_path: String,
    /// `GATEHOUSE_ISSUER`: OAuth issuer exactly as published and compared (RFC 8414 §2, §3.3:
    /// a string, no trailing slash added); nothing parses it again.
    pub issuer: String,
    /// The same issuer, parsed once at load: its parts (origin, path) are read from here.
    pub issuer_url: Url,
    /// `FRONTEND_URL`: where console pages live, no trailing slash.
    pub frontend_url: PublicUrl,
    /// `DATABASE_URL`: `sqlite://…` or `postgres://…`.
    pub database_url: String,
    /// `GATEHOUSE_BIND`: listen address.
    pub bind: SocketAddr,
    /// `GATEHOUSE_METRICS_BIND`: where `GET /metrics` (Prometheus text) is served; `None`
    /// (unset or empty): no metrics listener.
    pub metrics_bind: Option<SocketAddr>,
    /// `OPENAI_APPS_CHALLENGE`: served at `/.well-known/openai-apps-challenge` when set.
    pub openai_apps_challenge: Option<String>,
    /// `GATEHOUSE_OAUTH`: `false` when set to `off` (API keys only; no OAuth routes).
    pub oauth_enabled: bool,
    /// `GATEHOUSE_PERSONAL_UPSTREAMS`: whether people may add MCP servers of their own on the
    /// Connections page (on by default; `off` also stops serving the ones already added).
    pub personal_upstreams: bool,
    /// `GATEHOUSE_UPSTREAM_ALLOW_HOSTS`: `host[:port]` entries (comma-separated) a person's own
    /// upstream may name although they are not https or resolve to a loopback, private or
    /// link-local address (an entry without a port allows every port). Default: none.
    pub upstream_allow_hosts: Vec<AllowedHost>,
    /// `GATEHOUSE_PASSWORD_SIGNIN`: `false` when set to `off`: the sign-in page offers only the
    /// identity providers (`gatehouse idp add`), and `POST /signin` is refused.
    pub password_signin: bool,
    /// `GATEHOUSE_AUTH_CACHE`: whether the validation cache of credential lookups is used
    /// (docs/design-notes.md "Validation cache"); `on` (the default, with either database: a
    /// hit saves the lookup's joins, and on `PostgreSQL` its round trip) or `off` (every lookup
    /// reads the database).
    pub auth_cache: bool,
    /// `GATEHOUSE_LISTEN_DATABASE_URL`: where the validation cache's `PostgreSQL` listener
    /// connects, when it must reach the same database another way than `DATABASE_URL` (past a
    /// transaction-mode pooler, which cannot hold a `LISTEN`); `None`: `DATABASE_URL`.
    pub listen_database_url: Option<String>,
    /// Whether `MCP_SERVER_URL` was set (environment or config file) rather than left at its
    /// default: the command line prints a personal URL only under a URL that was set.
    pub mcp_server_url_given: bool,
    /// `GATEHOUSE_ALLOWED_ORIGINS`: origins allowed to call the MCP route.
    pub allowed_origins: AllowedOrigins,
    /// `GATEHOUSE_ACCESS_TOKEN_TTL`: access-token lifetime in seconds.
    pub access_token_ttl_secs: i64,
    /// `GATEHOUSE_REFRESH_GRACE_SECONDS`: window for retried/concurrent refreshes (0 disables).
    pub refresh_grace_secs: i64,
    /// `GATEHOUSE_MAX_RESULT_BYTES`: largest tool result sent, in bytes.
    pub max_result_bytes: usize,
    /// `GATEHOUSE_QUOTA_CALLS_PER_HOUR`: tool calls an account may make per rolling hour
    /// unless it has its own budget (`gatehouse account quota`); 0 = unlimited. Default 1000.
    pub quota_calls_per_hour: u64,
    /// `GATEHOUSE_BOOTSTRAP_EMAIL` + `GATEHOUSE_BOOTSTRAP_PASSWORD`: first account, created headlessly.
    pub bootstrap_account: Option<(String, String)>,
    /// `GATEHOUSE_LOG_FORMAT`: `text` (default) or `json`.
    pub log_format: LogFormat,
    /// `GATEHOUSE_PASSWORD_WORKERS`: threads that hash and verify passwords (default: cores − 1,
    /// at least 1).
    pub password_workers: usize,
    /// `GATEHOUSE_PASSWORD_QUEUE`: password jobs that may wait for a worker; beyond it the
    /// sign-in and setup pages answer 503 with `Retry-After`.
    pub password_queue: usize,
    /// `GATEHOUSE_REGISTRATIONS_PER_HOUR`: dynamic registrations accepted from one source
    /// address per hour (RFC 7591 §3); further ones get 429 with `Retry-After`.
    pub registrations_per_hour: i64,
    /// `GATEHOUSE_REGISTRATION_BYTES_PER_HOUR`: total size in bytes of the registration
    /// requests accepted from one source address per hour.
    pub registration_bytes_per_hour: i64,
    /// `GATEHOUSE_UNUSED_CLIENT_MAX_AGE`: seconds after which a registered client that never
    /// completed an authorization is deleted by housekeeping.
    pub unused_client_max_age_secs: i64,
    /// `GATEHOUSE_TRUSTED_PROXIES`: comma-separated addresses or CIDR blocks of reverse
    /// proxies whose `X-Forwarded-For` is believed (empty: the header is ignored); see
    /// [`crate::domain::forwarded::client_address`].
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// `GATEHOUSE_HEADER_READ_TIMEOUT`: seconds a connection may take to send a request's
    /// head (request line and headers), counted from the moment the server waits for it, so it
    /// also bounds how long an idle keep-alive connection stays open (slowloris defence, hyper's
    /// `header_read_timeout`). Past it the connection is closed.
    pub header_read_timeout_secs: i64,
    /// `GATEHOUSE_BODY_READ_TIMEOUT`: seconds within which a request's whole body must have
    /// arrived, counted from its head ([`crate::request_body`]); past it the body read fails,
    /// the request is answered 4xx in its protocol's shape and the connection closed.
    pub body_read_timeout_secs: i64,
    /// `GATEHOUSE_MAX_CONNECTIONS`: open client connections served at once; further ones wait
    /// in the listen backlog until one closes.
    pub max_connections: usize,
    /// `GATEHOUSE_MAX_CONNECTIONS_PER_ADDRESS`: open connections one TCP peer address (an IPv6
    /// /64) may hold; a further one is closed as soon as it is accepted. Peers inside
    /// `GATEHOUSE_TRUSTED_PROXIES` are not counted ([`crate::connections`]).
    pub max_connections_per_address: usize,
    /// `GATEHOUSE_SECRET_KEY`, `GATEHOUSE_SECRET_KEY_FILE`, `GATEHOUSE_SECRET_KEY_PREVIOUS`:
    /// where the server key that seals stored secrets comes from ([`server_key`]); loaded once
    /// at start with [`ServerKeySettings::load`].
    pub server_key: ServerKeySettings,
    /// The MCP surface's name and title, the audit's retention and the events sent out
    /// ([`surface::SurfaceConfig`]).
    pub surface: surface::SurfaceConfig,
    /// The mail server of password resets ([`identity::IdentityConfig`]).
    pub identity: identity::IdentityConfig,
}

impl Config {
    /// Reads the process environment, layered over the optional TOML file.
    ///
    /// Errors: [`ConfigError`] naming the first bad variable (or `--config` for an unreadable file).
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        Config::load_with(file, &HashMap::new())
    }

    /// [`Config::load`], then `given` (settings given as `gatehouse serve` options, by variable
    /// name) over both.
    pub fn load_with(
        file: Option<&Path>,
        given: &HashMap<String, String>,
    ) -> Result<Config, ConfigError> {
        let mut vars = match file {
            Some(path) => read_file(path)?,
            None => HashMap::new(),
        };
        for (k, v) in std::env::vars() {
            vars.insert(k, v);
        }
        for (k, v) in given {
            vars.insert(k.clone(), v.clone());
        }
        Config::from_vars(&vars)
    }

    /// Builds the configuration from a map of variable names to values (missing = default).
    ///
    /// The settings are read area by area, in a fixed order, so that the error returned is
    /// always the one of the first bad variable in that order.
    pub fn from_vars(map: &HashMap<String, String>) -> Result<Config, ConfigError> {
        let vars = Vars(map);
        let endpoints = endpoints(vars)?;
        let database_url = database_url(vars)?;
        let (bind, metrics_bind) = listen_addresses(vars)?;
        let features = features(vars)?;
        let (auth_cache, listen_database_url) = validation_cache(vars, &database_url)?;
        let allowed_origins =
            allowed_origins(vars.get("GATEHOUSE_ALLOWED_ORIGINS"), &endpoints.issuer_url)?;
        let tokens = token_limits(vars)?;
        let bootstrap_account = bootstrap_account(
            vars.get("GATEHOUSE_BOOTSTRAP_EMAIL"),
            map.get("GATEHOUSE_BOOTSTRAP_PASSWORD"),
        )?;
        let log_format = log_format(vars.get("GATEHOUSE_LOG_FORMAT"))?;
        let admission = admission_limits(vars)?;
        let connections = connection_limits(vars)?;
        let trusted_proxies = trusted_proxies(vars.get("GATEHOUSE_TRUSTED_PROXIES"))?;
        let server_key = ServerKeySettings::from_vars(
            vars.get("GATEHOUSE_SECRET_KEY"),
            vars.get("GATEHOUSE_SECRET_KEY_FILE"),
            vars.get("GATEHOUSE_SECRET_KEY_PREVIOUS"),
            &database_url,
        )?;

        let resource = ResourceIndicator::parse(&endpoints.mcp_server_url)
            .map_err(|e| ConfigError::new("MCP_SERVER_URL", e.to_string()))?;
        Ok(Config {
            mcp_server_url: endpoints.mcp_server_url,
            resource,
            issuer_url: endpoints.issuer_url,
            mcp_path: endpoints.mcp_path,
            issuer: endpoints.issuer,
            frontend_url: endpoints.frontend_url,
            database_url,
            bind,
            metrics_bind,
            openai_apps_challenge: vars.get("OPENAI_APPS_CHALLENGE").map(str::to_string),
            oauth_enabled: features.oauth_enabled,
            personal_upstreams: features.personal_upstreams,
            upstream_allow_hosts: features.upstream_allow_hosts,
            password_signin: features.password_signin,
            auth_cache,
            listen_database_url,
            mcp_server_url_given: vars.get("MCP_SERVER_URL").is_some(),
            allowed_origins,
            access_token_ttl_secs: tokens.access_token_ttl_secs,
            refresh_grace_secs: tokens.refresh_grace_secs,
            max_result_bytes: tokens.max_result_bytes,
            quota_calls_per_hour: tokens.quota_calls_per_hour,
            bootstrap_account,
            log_format,
            password_workers: admission.password_workers,
            password_queue: admission.password_queue,
            registrations_per_hour: admission.registrations_per_hour,
            registration_bytes_per_hour: admission.registration_bytes_per_hour,
            unused_client_max_age_secs: admission.unused_client_max_age_secs,
            trusted_proxies,
            header_read_timeout_secs: connections.header_read_timeout_secs,
            body_read_timeout_secs: connections.body_read_timeout_secs,
            max_connections: connections.max_connections,
            max_connections_per_address: connections.max_connections_per_address,
            server_key,
            surface: surface::SurfaceConfig::from_vars(map)?,
            identity: identity::IdentityConfig::from_vars(map)?,
        })
    }

    /// Whether session cookies must carry `Secure` (the issuer is https).
    pub fn secure_cookies(&self) -> bool {
        self.issuer.starts_with("https://")
    }

    /// URL of this server's page or endpoint at `path` (which starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.issuer, path)
    }

    /// URL of the protected-resource metadata for the MCP endpoint (RFC 9728 §3.1): the
    /// well-known segment inserted between the origin and the MCP path.
    pub fn protected_resource_metadata_url(&self) -> String {
        let origin = self.resource.url().origin().ascii_serialization();
        format!(
            "{origin}/.well-known/oauth-protected-resource{}",
            self.mcp_path
        )
    }
}

/// The map of settings [`Config::from_vars`] reads, by variable name.
#[derive(Clone, Copy)]
struct Vars<'a>(&'a HashMap<String, String>);

impl<'a> Vars<'a> {
    /// The value of `name`, trimmed; `None` when it is unset or blank.
    fn get(self, name: &str) -> Option<&'a str> {
        self.0.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())
    }

    /// The integer setting `name`: `default` when unset, else a whole number within `range`
    /// (inclusive).
    ///
    /// Errors: as [`parse_int`].
    fn int(self, name: &'static str, default: i64, range: (i64, i64)) -> Result<i64, ConfigError> {
        parse_int(name, self.get(name), default, range)
    }
}

/// Where this server is reached: `MCP_SERVER_URL`, `GATEHOUSE_ISSUER` and `FRONTEND_URL`, as
/// [`Config`] holds them.
struct Endpoints {
    mcp_server_url: String,
    mcp_path: String,
    issuer: String,
    issuer_url: Url,
    frontend_url: PublicUrl,
}

/// Reads `MCP_SERVER_URL`, then `GATEHOUSE_ISSUER` (default: the MCP URL's origin), then
/// `FRONTEND_URL` (default: the issuer).
///
/// Errors: the first of those that is not a valid URL of its kind.
fn endpoints(vars: Vars<'_>) -> Result<Endpoints, ConfigError> {
    let (mcp_server_url, mcp_path, origin) = mcp_endpoint(vars.get("MCP_SERVER_URL"))?;
    let (issuer, issuer_url) = issuer(vars.get("GATEHOUSE_ISSUER"), origin)?;
    let frontend_url = frontend_url(vars.get("FRONTEND_URL"), &issuer_url, &issuer)?;
    Ok(Endpoints {
        mcp_server_url,
        mcp_path,
        issuer,
        issuer_url,
        frontend_url,
    })
}

/// `DATABASE_URL` (default [`DEFAULT_DATABASE_URL`]), checked to name a supported database.
///
/// Errors: a URL of no supported backend, refused here rather than at the first connection.
fn database_url(vars: Vars<'_>) -> Result<String, ConfigError> {
    let database_url = vars
        .get("DATABASE_URL")
        .unwrap_or(DEFAULT_DATABASE_URL)
        .to_string();
    // Refused here rather than at the first connection.
    crate::store::Backend::from_url(&database_url)
        .map_err(|m| ConfigError::new("DATABASE_URL", m))?;
    Ok(database_url)
}

/// `GATEHOUSE_BIND` (default `127.0.0.1:8080`) and `GATEHOUSE_METRICS_BIND` (`None` when
/// unset): the server's and the metrics' listen addresses.
///
/// Errors: a value that is not an address and port.
fn listen_addresses(vars: Vars<'_>) -> Result<(SocketAddr, Option<SocketAddr>), ConfigError> {
    let bind = socket_addr(
        "GATEHOUSE_BIND",
        vars.get("GATEHOUSE_BIND").unwrap_or("127.0.0.1:8080"),
        "127.0.0.1:8080",
    )?;
    let metrics_bind = vars
        .get("GATEHOUSE_METRICS_BIND")
        .map(|raw| socket_addr("GATEHOUSE_METRICS_BIND", raw, "127.0.0.1:9090"))
        .transpose()?;
    Ok((bind, metrics_bind))
}

/// What the server offers, as [`Config`] holds it: OAuth, people's own upstreams (and the
/// hosts those may name), password sign-in.
struct Features {
    oauth_enabled: bool,
    personal_upstreams: bool,
    upstream_allow_hosts: Vec<AllowedHost>,
    password_signin: bool,
}

/// Reads `GATEHOUSE_OAUTH`, `GATEHOUSE_PERSONAL_UPSTREAMS`, `GATEHOUSE_UPSTREAM_ALLOW_HOSTS`
/// and `GATEHOUSE_PASSWORD_SIGNIN`, in that order (each switch on by default).
///
/// Errors: the first switch that is neither on nor off, or a bad allowed host.
fn features(vars: Vars<'_>) -> Result<Features, ConfigError> {
    let oauth_enabled = switch("GATEHOUSE_OAUTH", vars.get("GATEHOUSE_OAUTH"), true)?;
    let personal_upstreams = switch(
        "GATEHOUSE_PERSONAL_UPSTREAMS",
        vars.get("GATEHOUSE_PERSONAL_UPSTREAMS"),
        true,
    )?;
    let upstream_allow_hosts = upstream_allow_hosts(vars.get("GATEHOUSE_UPSTREAM_ALLOW_HOSTS"))?;
    let password_signin = switch(
        "GATEHOUSE_PASSWORD_SIGNIN",
        vars.get("GATEHOUSE_PASSWORD_SIGNIN"),
        true,
    )?;
    Ok(Features {
        oauth_enabled,
        personal_upstreams,
        upstream_allow_hosts,
        password_signin,
    })
}

/// The validation cache's settings: `GATEHOUSE_AUTH_CACHE` (on by default) and
/// `GATEHOUSE_LISTEN_DATABASE_URL` (checked against `database_url`).
///
/// Errors: a switch that is neither on nor off, or a listen URL that does not fit the database.
fn validation_cache(
    vars: Vars<'_>,
    database_url: &str,
) -> Result<(bool, Option<String>), ConfigError> {
    let auth_cache = switch(
        "GATEHOUSE_AUTH_CACHE",
        vars.get("GATEHOUSE_AUTH_CACHE"),
        true,
    )?;
    let listen_database_url =
        listen_database_url(vars.get("GATEHOUSE_LISTEN_DATABASE_URL"), database_url)?;
    Ok((auth_cache, listen_database_url))
}

/// Token lifetimes and what a tool call may use, as [`Config`] holds them.
struct TokenLimits {
    access_token_ttl_secs: i64,
    refresh_grace_secs: i64,
    max_result_bytes: usize,
    quota_calls_per_hour: u64,
}

/// Reads `GATEHOUSE_ACCESS_TOKEN_TTL`, `GATEHOUSE_REFRESH_GRACE_SECONDS`,
/// `GATEHOUSE_MAX_RESULT_BYTES` and `GATEHOUSE_QUOTA_CALLS_PER_HOUR`, in that order.
///
/// Errors: the first that is not a whole number within its bounds.
fn token_limits(vars: Vars<'_>) -> Result<TokenLimits, ConfigError> {
    let access_token_ttl_secs = vars.int("GATEHOUSE_ACCESS_TOKEN_TTL", 3600, (60, 86_400))?;
    let refresh_grace_secs = vars.int(
        "GATEHOUSE_REFRESH_GRACE_SECONDS",
        60,
        // A long window would let a stolen, rotated refresh token keep working: bounded.
        (0, 600),
    )?;
    let max_result_bytes = vars.int(
        "GATEHOUSE_MAX_RESULT_BYTES",
        65536,
        (1024, 16 * 1024 * 1024),
    )? as usize;
    let quota_calls_per_hour = vars.int(
        "GATEHOUSE_QUOTA_CALLS_PER_HOUR",
        DEFAULT_QUOTA_CALLS_PER_HOUR as i64,
        (0, MAX_QUOTA_CALLS_PER_HOUR as i64),
    )? as u64;
    Ok(TokenLimits {
        access_token_ttl_secs,
        refresh_grace_secs,
        max_result_bytes,
        quota_calls_per_hour,
    })
}

/// How much password work and registration the server admits, and how long an unused client
/// is kept, as [`Config`] holds them.
struct AdmissionLimits {
    password_workers: usize,
    password_queue: usize,
    registrations_per_hour: i64,
    registration_bytes_per_hour: i64,
    unused_client_max_age_secs: i64,
}

/// Reads `GATEHOUSE_PASSWORD_WORKERS`, `GATEHOUSE_PASSWORD_QUEUE`,
/// `GATEHOUSE_REGISTRATIONS_PER_HOUR`, `GATEHOUSE_REGISTRATION_BYTES_PER_HOUR` and
/// `GATEHOUSE_UNUSED_CLIENT_MAX_AGE`, in that order.
///
/// Errors: the first that is not a whole number within its bounds.
fn admission_limits(vars: Vars<'_>) -> Result<AdmissionLimits, ConfigError> {
    let password_workers = vars.int(
        "GATEHOUSE_PASSWORD_WORKERS",
        crate::password::default_workers() as i64,
        (1, 256),
    )? as usize;
    let password_queue = vars.int(
        "GATEHOUSE_PASSWORD_QUEUE",
        crate::password::DEFAULT_QUEUE as i64,
        (1, 10_000),
    )? as usize;
    let registrations_per_hour = vars.int(
        "GATEHOUSE_REGISTRATIONS_PER_HOUR",
        DEFAULT_REGISTRATIONS_PER_HOUR,
        (1, 1_000_000),
    )?;
    let registration_bytes_per_hour = vars.int(
        "GATEHOUSE_REGISTRATION_BYTES_PER_HOUR",
        DEFAULT_REGISTRATION_BYTES_PER_HOUR,
        // At least one registration of the largest accepted size.
        (
            crate::domain::client::MAX_REGISTRATION_BYTES as i64,
            1024 * 1024 * 1024,
        ),
    )?;
    let unused_client_max_age_secs = vars.int(
        "GATEHOUSE_UNUSED_CLIENT_MAX_AGE",
        DEFAULT_UNUSED_CLIENT_MAX_AGE_SECS,
        // Longer than any authorization request or code takes to complete.
        (3600, 365 * 24 * 3600),
    )?;
    Ok(AdmissionLimits {
        password_workers,
        password_queue,
        registrations_per_hour,
        registration_bytes_per_hour,
        unused_client_max_age_secs,
    })
}

/// Read timeouts and connection caps of the listener, as [`Config`] holds them.
struct ConnectionLimits {
    header_read_timeout_secs: i64,
    body_read_timeout_secs: i64,
    max_connections: usize,
    max_connections_per_address: usize,
}

/// Reads `GATEHOUSE_HEADER_READ_TIMEOUT`, `GATEHOUSE_BODY_READ_TIMEOUT`,
/// `GATEHOUSE_MAX_CONNECTIONS` and `GATEHOUSE_MAX_CONNECTIONS_PER_ADDRESS`, in that order.
///
/// Errors: the first that is not a whole number within its bounds.
fn connection_limits(vars: Vars<'_>) -> Result<ConnectionLimits, ConfigError> {
    let header_read_timeout_secs = vars.int(
        "GATEHOUSE_HEADER_READ_TIMEOUT",
        DEFAULT_HEADER_READ_TIMEOUT_SECS,
        (1, 3600),
    )?;
    let body_read_timeout_secs = vars.int(
        "GATEHOUSE_BODY_READ_TIMEOUT",
        DEFAULT_BODY_READ_TIMEOUT_SECS,
        (1, 3600),
    )?;
    let max_connections = vars.int(
        "GATEHOUSE_MAX_CONNECTIONS",
        DEFAULT_MAX_CONNECTIONS,
        (16, 1_000_000),
    )? as usize;
    let max_connections_per_address = vars.int(
        "GATEHOUSE_MAX_CONNECTIONS_PER_ADDRESS",
        DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
        (1, 1_000_000),
    )? as usize;
    Ok(ConnectionLimits {
        header_read_timeout_secs,
        body_read_timeout_secs,
        max_connections,
        max_connections_per_address,
    })
}

/// The issuer's own origin; for a loopback issuer also its other loopback spellings on the same
/// scheme and port (`127.0.0.1`, `localhost`, `[::1]` name the same server).
fn self_origins(issuer: &Url) -> Vec<String> {
    let own = issuer.origin().ascii_serialization();
    let host = issuer.host_str().unwrap_or("");
    if !crate::domain::loopback::is_loopback_host(host) {
        return vec![own];
    }
    let port = issuer.port().map(|p| format!(":{p}")).unwrap_or_default();
    let mut out = vec![own];
    for alias in ["127.0.0.1", "localhost", "[::1]"] {
        let origin = format!("{}://{alias}{port}", issuer.scheme());
        if !out.contains(&origin) {
            out.push(origin);
        }
    }
    out
}

fn read_file(path: &Path) -> Result<HashMap<String, String>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ConfigError::new("--config", format!("cannot read {}: {e}", path.display()))
    })?;
    let table: toml::Table = text
        .parse()
        .map_err(|e| ConfigError::new("--config", format!("{}: {e}", path.display())))?;
    let mut vars = HashMap::new();
    for (k, v) in table {
        let value = match v {
            toml::Value::String(s) => s,
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Boolean(b) => if b { "on" } else { "off" }.to_string(),
            other => {
                return Err(ConfigError::new(
                    "--config",
                    format!("{k}: unsupported value {other}"),
                ));
            }
        };
        vars.insert(k, value);
    }
    Ok(vars)
}

fn parse_http_url(variable: &'static str, raw: &str) -> Result<Url, ConfigError> {
    let url = Url::parse(raw).map_err(|_| {
        ConfigError::new(
            variable,
            format!("must be an absolute http(s) URL (got \"{raw}\")"),
        )
    })?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(ConfigError::new(
            variable,
            format!("must be an absolute http(s) URL (got \"{raw}\")"),
        ));
    }
    if url.host_str().is_none() {
        return Err(ConfigError::new(
            variable,
            format!("must have a host (got \"{raw}\")"),
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(ConfigError::new(
            variable,
            "must not contain user information (user:password@)",
        ));
    }
    Ok(url)
}

/// Tool calls an account may make per rolling hour by default: about one every 3.6 seconds for
/// a whole hour, far beyond a person working with an assistant, low enough to stop a runaway
/// agent loop within the hour.
pub const DEFAULT_QUOTA_CALLS_PER_HOUR: u64 = 1000;
/// Largest budget that can be configured (0 = unlimited is always possible).
pub const MAX_QUOTA_CALLS_PER_HOUR: u64 = 10_000_000;

/// `MCP_SERVER_URL` (default [`DEFAULT_MCP_SERVER_URL`]): an http(s) URL with a path, no query
/// or fragment; returns it without a trailing slash, its path, and its origin.
fn mcp_endpoint(raw: Option<&str>) -> Result<(String, String, String), ConfigError> {
    let mcp_raw = raw.unwrap_or(DEFAULT_MCP_SERVER_URL);
    let mcp = parse_http_url("MCP_SERVER_URL", mcp_raw)?;
    if mcp.query().is_some() || mcp.fragment().is_some() {
        return Err(ConfigError::new(
            "MCP_SERVER_URL",
            "must not have a query or fragment",
        ));
    }
    let mut mcp_server_url = mcp.to_string();
    if mcp.path() == "/" {
        return Err(ConfigError::new(
            "MCP_SERVER_URL",
            format!("must have a path for the MCP endpoint, such as {mcp_server_url}mcp"),
        ));
    }
    if mcp_server_url.ends_with('/') {
        mcp_server_url.pop();
    }
    let mcp_path = mcp.path().trim_end_matches('/').to_string();
    let origin = mcp.origin().ascii_serialization();
    Ok((mcp_server_url, mcp_path, origin))
}

/// `GATEHOUSE_ISSUER` (RFC 8414 §2: no trailing slash, query or fragment), by default
/// `origin` (the MCP URL's): its text and its parsed URL.
fn issuer(raw: Option<&str>, origin: String) -> Result<(String, Url), ConfigError> {
    Ok(match raw {
        Some(raw) => {
            let url = parse_http_url("GATEHOUSE_ISSUER", raw)?;
            if raw.ends_with('/') {
                return Err(ConfigError::new(
                    "GATEHOUSE_ISSUER",
                    format!(
                        "must not end with a slash (got \"{raw}\"; use \"{}\")",
                        raw.trim_end_matches('/')
                    ),
                ));
            }
            if url.query().is_some() || url.fragment().is_some() {
                return Err(ConfigError::new(
                    "GATEHOUSE_ISSUER",
                    "must not have a query or fragment (RFC 8414 §2)",
                ));
            }
            (raw.to_string(), url)
        }
        None => {
            let url = parse_http_url("GATEHOUSE_ISSUER", &origin)?;
            (origin, url)
        }
    })
}

/// `GATEHOUSE_TRUSTED_PROXIES`: comma-separated IP addresses or CIDR blocks, each once.
fn trusted_proxies(raw: Option<&str>) -> Result<Vec<ipnet::IpNet>, ConfigError> {
    let mut trusted_proxies = Vec::new();
    for item in raw
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let net = crate::domain::api_key::parse_allowed(item).map_err(|_| {
            ConfigError::new(
                "GATEHOUSE_TRUSTED_PROXIES",
                format!("must be IP addresses or CIDR blocks such as 10.0.0.0/8 (got \"{item}\")"),
            )
        })?;
        if !trusted_proxies.contains(&net) {
            trusted_proxies.push(net);
        }
    }
    Ok(trusted_proxies)
}

/// `GATEHOUSE_ALLOWED_ORIGINS`: `*`, or origins allowed besides the issuer's own.
fn allowed_origins(raw: Option<&str>, issuer_url: &Url) -> Result<AllowedOrigins, ConfigError> {
    Ok(match raw {
        Some("*") => AllowedOrigins::Any,
        Some(raw) => {
            let mut list = self_origins(issuer_url);
            for item in raw.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                let url = parse_http_url("GATEHOUSE_ALLOWED_ORIGINS", item)?;
                let origin = url.origin().ascii_serialization();
                if !list.contains(&origin) {
                    list.push(origin);
                }
            }
            AllowedOrigins::List(list)
        }
        None => AllowedOrigins::List(self_origins(issuer_url)),
    })
}

/// `GATEHOUSE_LISTEN_DATABASE_URL`: a `postgres://` URL for the change notifications, only
/// with a `PostgreSQL` `database_url`.
fn listen_database_url(
    raw: Option<&str>,
    database_url: &str,
) -> Result<Option<String>, ConfigError> {
    Ok(match raw {
        None => None,
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            if !database_url.starts_with("postgres") {
                return Err(ConfigError::new(
                    "GATEHOUSE_LISTEN_DATABASE_URL",
                    "is for a PostgreSQL DATABASE_URL only",
                ));
            }
            Some(url.to_string())
        }
        Some(_) => {
            return Err(ConfigError::new(
                "GATEHOUSE_LISTEN_DATABASE_URL",
                "must be a postgres:// URL",
            ));
        }
    })
}

/// An on/off setting `name` (`on`, `true`, `1` / `off`, `false`, `0`, any case); `default`
/// when unset.
///
/// Errors: any other value, as `NAME: must be on or off (got "…")`.
pub(crate) fn switch(
    name: &'static str,
    raw: Option<&str>,
    default: bool,
) -> Result<bool, ConfigError> {
    match raw.map(str::to_ascii_lowercase).as_deref() {
        None => Ok(default),
        Some("on" | "true" | "1") => Ok(true),
        Some("off" | "false" | "0") => Ok(false),
        Some(v) => Err(ConfigError::new(
            name,
            format!("must be on or off (got \"{v}\")"),
        )),
    }
}

fn parse_int(
    variable: &'static str,
    raw: Option<&str>,
    default: i64,
    (min, max): (i64, i64),
) -> Result<i64, ConfigError> {
    match raw {
        None => Ok(default),
        Some(v) => match v.parse::<i64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(ConfigError::new(
                variable,
                format!("must be a whole number from {min} to {max} (got \"{v}\")"),
            )),
        },
    }
}

/// `FRONTEND_URL` (`raw`), or the issuer's URL when unset.
fn frontend_url(
    raw: Option<&str>,
    issuer_url: &Url,
    issuer: &str,
) -> Result<PublicUrl, ConfigError> {
    Ok(match raw {
        Some(raw) => PublicUrl {
            url: parse_http_url("FRONTEND_URL", raw)?,
            text: raw.trim_end_matches('/').to_string(),
        },
        None => PublicUrl {
            url: issuer_url.clone(),
            text: issuer.to_string(),
        },
    })
}

/// The address and port `raw` of the setting `name` (`example` shown in the error).
fn socket_addr(name: &'static str, raw: &str, example: &str) -> Result<SocketAddr, ConfigError> {
    raw.parse().map_err(|_| {
        ConfigError::new(
            name,
            format!("must be an address and port such as {example} (got \"{raw}\")"),
        )
    })
}

/// `GATEHOUSE_UPSTREAM_ALLOW_HOSTS`: comma-separated `host` or `host:port` entries.
fn upstream_allow_hosts(raw: Option<&str>) -> Result<Vec<AllowedHost>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(Vec::new());
    };
    raw.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|e| {
            AllowedHost::parse(e).ok_or_else(|| {
                ConfigError::new(
                    "GATEHOUSE_UPSTREAM_ALLOW_HOSTS",
                    format!("each entry must be host or host:port (got \"{e}\")"),
                )
            })
        })
        .collect()
}

/// `GATEHOUSE_BOOTSTRAP_EMAIL` and `GATEHOUSE_BOOTSTRAP_PASSWORD`: both or neither.
fn bootstrap_account(
    email: Option<&str>,
    password: Option<&String>,
) -> Result<Option<(String, String)>, ConfigError> {
    match (email, password) {
        (Some(e), Some(p)) if !p.is_empty() => Ok(Some((e.to_string(), p.clone()))),
        (None, None) => Ok(None),
        (Some(_), _) => Err(ConfigError::new(
            "GATEHOUSE_BOOTSTRAP_PASSWORD",
            "must be set together with GATEHOUSE_BOOTSTRAP_EMAIL",
        )),
        (None, Some(_)) => Err(ConfigError::new(
            "GATEHOUSE_BOOTSTRAP_EMAIL",
            "must be set together with GATEHOUSE_BOOTSTRAP_PASSWORD",
        )),
    }
}

/// `GATEHOUSE_LOG_FORMAT`: `text` (default) or `json`.
fn log_format(raw: Option<&str>) -> Result<LogFormat, ConfigError> {
    match raw.map(str::to_ascii_lowercase) {
        None => Ok(LogFormat::Text),
        Some(v) if v == "text" => Ok(LogFormat::Text),
        Some(v) if v == "json" => Ok(LogFormat::Json),
        Some(v) => Err(ConfigError::new(
            "GATEHOUSE_LOG_FORMAT",
            format!("must be text or json (got \"{v}\")"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_follow_the_specification() {
        let c = Config::from_vars(&HashMap::new()).unwrap();
        assert_eq!(c.mcp_server_url, "http://127.0.0.1:8080/mcp");
        assert_eq!(c.mcp_path, "/mcp");
        assert_eq!(c.issuer, "http://127.0.0.1:8080");
        assert_eq!(c.frontend_url, "http://127.0.0.1:8080");
        assert_eq!(c.bind.to_string(), "127.0.0.1:8080");
        assert_eq!(c.access_token_ttl_secs, 3600);
        assert_eq!(c.refresh_grace_secs, 60);
        assert_eq!(c.max_result_bytes, 65536);
        assert_eq!(c.quota_calls_per_hour, 1000);
        assert!(c.password_workers >= 1);
        assert_eq!(c.password_queue, 32);
        assert_eq!(c.registrations_per_hour, 20);
        assert_eq!(c.registration_bytes_per_hour, 65536);
        assert_eq!(c.unused_client_max_age_secs, 86400);
        assert!(c.oauth_enabled);
        assert_eq!(
            c.allowed_origins,
            AllowedOrigins::List(vec![
                "http://127.0.0.1:8080".into(),
                "http://localhost:8080".into(),
                "http://[::1]:8080".into()
            ])
        );
        assert_eq!(
            c.protected_resource_metadata_url(),
            "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp"
        );
    }

    /// The validation cache is on by default with either database, and either way when set.
    #[test]
    fn the_validation_cache_defaults_to_on() {
        let pg = "postgres://u@db.example/gatehouse";
        let cache = |pairs: &[(&str, &str)]| Config::from_vars(&vars(pairs)).unwrap().auth_cache;
        assert!(cache(&[]));
        assert!(cache(&[("DATABASE_URL", "sqlite://g.db")]));
        assert!(!cache(&[
            ("DATABASE_URL", "sqlite://g.db"),
            ("GATEHOUSE_AUTH_CACHE", "off")
        ]));
        assert!(cache(&[("DATABASE_URL", pg)]));
        assert!(!cache(&[
            ("DATABASE_URL", pg),
            ("GATEHOUSE_AUTH_CACHE", "off")
        ]));
        assert!(cache(&[
            ("DATABASE_URL", "sqlite://g.db"),
            ("GATEHOUSE_AUTH_CACHE", "on")
        ]));
        assert!(Config::from_vars(&vars(&[("GATEHOUSE_AUTH_CACHE", "maybe")])).is_err());
    }

    #[test]
    fn issuer_with_trailing_slash_is_refused() {
        let e =
            Config::from_vars(&vars(&[("GATEHOUSE_ISSUER", "https://a.example/")])).unwrap_err();
        assert_eq!(e.variable, "GATEHOUSE_ISSUER");
        assert!(e.to_string().contains("must not end with a slash"), "{e}");
    }

    #[test]
    fn trusted_proxies_are_cidrs() {
        let c = Config::from_vars(&vars(&[(
            "GATEHOUSE_TRUSTED_PROXIES",
            " 10.0.0.0/8, 192.0.2.1 ,2001:db8::/32,10.0.0.0/8",
        )]))
        .unwrap();
        let shown: Vec<String> = c.trusted_proxies.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["10.0.0.0/8", "192.0.2.1/32", "2001:db8::/32"]);
        assert!(
            Config::from_vars(&vars(&[]))
                .unwrap()
                .trusted_proxies
                .is_empty()
        );
        let e =
            Config::from_vars(&vars(&[("GATEHOUSE_TRUSTED_PROXIES", "10.0.0.0/33")])).unwrap_err();
        assert_eq!(e.variable, "GATEHOUSE_TRUSTED_PROXIES");
        assert!(e.to_string().contains("10.0.0.0/33"), "{e}");
    }

    #[test]
    fn relative_mcp_url_is_refused() {
        let e = Config::from_vars(&vars(&[("MCP_SERVER_URL", "/mcp")])).unwrap_err();
        assert_eq!(e.variable, "MCP_SERVER_URL");
        assert!(e.to_string().contains("absolute"), "{e}");
    }

    #[test]
    fn user_information_and_unbounded_numbers_are_refused() {
        let e = Config::from_vars(&vars(&[(
            "MCP_SERVER_URL",
            "http://u:p@127.0.0.1:8080/mcp",
        )]))
        .unwrap_err();
        assert_eq!(e.variable, "MCP_SERVER_URL");
        let e = Config::from_vars(&vars(&[("GATEHOUSE_REFRESH_GRACE_SECONDS", "99999999999")]))
            .unwrap_err();
        assert_eq!(e.variable, "GATEHOUSE_REFRESH_GRACE_SECONDS");
        assert!(Config::from_vars(&vars(&[("GATEHOUSE_REFRESH_GRACE_SECONDS", "0")])).is_ok());
        let e = Config::from_vars(&vars(&[("GATEHOUSE_ACCESS_TOKEN_TTL", "0")])).unwrap_err();
        assert_eq!(e.variable, "GATEHOUSE_ACCESS_TOKEN_TTL");
    }

    #[test]
    fn limits_are_bounded() {
        for (name, bad) in [
            ("GATEHOUSE_PASSWORD_WORKERS", "0"),
            ("GATEHOUSE_PASSWORD_QUEUE", "0"),
            ("GATEHOUSE_REGISTRATIONS_PER_HOUR", "0"),
            ("GATEHOUSE_REGISTRATION_BYTES_PER_HOUR", "100"),
            ("GATEHOUSE_UNUSED_CLIENT_MAX_AGE", "60"),
        ] {
            let e = Config::from_vars(&vars(&[(name, bad)])).unwrap_err();
            assert_eq!(e.variable, name);
        }
        let c = Config::from_vars(&vars(&[
            ("GATEHOUSE_PASSWORD_WORKERS", "3"),
            ("GATEHOUSE_PASSWORD_QUEUE", "5"),
            ("GATEHOUSE_UNUSED_CLIENT_MAX_AGE", "7200"),
        ]))
        .unwrap();
        assert_eq!((c.password_workers, c.password_queue), (3, 5));
        assert_eq!(c.unused_client_max_age_secs, 7200);
    }

    #[test]
    fn personal_upstreams_are_on_and_allow_no_host_by_default() {
        let c = Config::from_vars(&vars(&[])).unwrap();
        assert!(c.personal_upstreams);
        assert!(c.upstream_allow_hosts.is_empty());
        let c = Config::from_vars(&vars(&[
            ("GATEHOUSE_PERSONAL_UPSTREAMS", "off"),
            (
                "GATEHOUSE_UPSTREAM_ALLOW_HOSTS",
                "127.0.0.1:8080, Mcp.Internal,[::1]:9000",
            ),
        ]))
        .unwrap();
        assert!(!c.personal_upstreams);
        let allow = &c.upstream_allow_hosts;
        assert_eq!(allow.len(), 3);
        assert!(allow[0].allows("127.0.0.1", 8080) && !allow[0].allows("127.0.0.1", 8081));
        assert!(allow[1].allows("mcp.internal", 443) && allow[1].allows("mcp.internal", 1));
        assert!(allow[2].allows("[::1]", 9000));
        for bad in [
            ("GATEHOUSE_PERSONAL_UPSTREAMS", "maybe"),
            ("GATEHOUSE_UPSTREAM_ALLOW_HOSTS", "a/b"),
        ] {
            assert_eq!(
                Config::from_vars(&vars(&[bad])).unwrap_err().variable,
                bad.0
            );
        }
    }

    #[test]
    fn unknown_database_scheme_is_refused() {
        let e = Config::from_vars(&vars(&[("DATABASE_URL", "mysql://x/y")])).unwrap_err();
        assert_eq!(e.variable, "DATABASE_URL");
    }

    #[test]
    fn issuer_path_is_kept_byte_identical() {
        let c = Config::from_vars(&vars(&[
            ("MCP_SERVER_URL", "https://mcp.example.com/tenant/mcp"),
            ("GATEHOUSE_ISSUER", "https://auth.example.com/tenant"),
        ]))
        .unwrap();
        assert_eq!(c.issuer, "https://auth.example.com/tenant");
        assert_eq!(c.mcp_path, "/tenant/mcp");
        assert!(c.secure_cookies());
    }
}
