//! `gatehouse resource add|list|remove`: other MCP servers that use Gatehouse as their
//! authorization server ([`crate::domain::registry`]). Running servers take a change up at
//! their next request (the registry is read from the database, never cached).

use clap::Subcommand;

use super::{CliError, listing, timestamp};
use crate::config::Config;
use crate::domain::audit::{Event, Outcome};
use crate::domain::registry::{
    DEFAULT_TOKEN_TTL_SECS, ResourceName, TokenFormat, check_token_ttl, parse_resource_url,
    parse_scopes,
};
use crate::domain::secret::{Secret, TokenKind, random_urlsafe};
use crate::store::audit::AuditEvent;
use crate::store::oauth::ClientRecord;
use crate::store::resources::ResourceRecord;
use crate::store::{Store, StoreError};

/// `gatehouse signing-key …`
#[derive(Debug, Subcommand)]
pub enum SigningKeyCommand {
    /// Retire the key JWT access tokens are signed with: the server signs the next token (and
    /// publishes its JWKS) with a new key; the old one stays published until every token it
    /// signed has expired (at most a day), then is dropped.
    Rotate,
}

/// Runs one `gatehouse signing-key` command.
pub(super) async fn run_signing_key(
    store: &Store,
    command: SigningKeyCommand,
    now: i64,
) -> Result<String, CliError> {
    match command {
        SigningKeyCommand::Rotate => {
            let retired = store
                .retire_signing_key(now, now - crate::domain::registry::MAX_TOKEN_TTL_SECS)
                .await?;
            // Nothing was rotated when there was no key yet: nothing to audit.
            if retired.is_some() {
                store
                    .audit(
                        AuditEvent {
                            subject: retired.as_deref(),
                            detail: Some("actor=cli"),
                            ..AuditEvent::new(Event::SigningKeyRotated, Outcome::Success)
                        },
                        now,
                    )
                    .await;
            }
            Ok(match retired {
                Some(kid) => format!(
                    "retired signing key {kid}: the next JWT access token is signed with a new key; {kid} stays published until {} (its tokens have expired by then)",
                    timestamp(now + crate::domain::registry::MAX_TOKEN_TTL_SECS)
                ),
                None => "no signing key yet: the first JWT access token creates one".to_string(),
            })
        }
    }
}

/// `gatehouse resource …`
#[derive(Debug, Subcommand)]
pub enum ResourceCommand {
    /// Register an MCP server that uses Gatehouse as its authorization server: tokens for it
    /// are bound to its URL (RFC 8707) and carry only its scopes.
    Add {
        /// A short name: 1 to 64 of a-z, 0-9, '-' and '_'.
        name: String,
        /// The server's MCP URL (its resource indicator): https, or http on a loopback host.
        #[arg(long)]
        url: String,
        /// A scope of this server (repeatable), e.g. files:read.
        #[arg(long = "scope", value_name = "SCOPE", required = true)]
        scopes: Vec<String>,
        /// What the scope before it lets an application do, shown on the consent page, e.g.
        /// 'Read your files' (repeatable, one per --scope, in the same order).
        #[arg(long = "scope-description", value_name = "WORDS")]
        descriptions: Vec<String>,
        /// `opaque` (checked by introspection) or `jwt` (RFC 9068, checked offline).
        #[arg(long, value_name = "FORMAT", default_value = "opaque")]
        token_format: String,
        /// Lifetime of its access tokens, in seconds (60 to 86400).
        #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_TOKEN_TTL_SECS)]
        token_ttl: i64,
        /// Also create the confidential client the server introspects tokens with (RFC 7662);
        /// prints its client ID and secret once. It learns only of tokens for this resource.
        #[arg(long)]
        introspect: bool,
    },
    /// List registered resources (the built-in one first).
    List,
    /// Remove a resource: every grant for it is revoked, its tokens stop at once.
    Remove {
        /// Its name.
        name: String,
    },
}

/// Runs one `gatehouse resource` command.
pub(super) async fn run(
    config: &Config,
    store: &Store,
    command: ResourceCommand,
    now: i64,
) -> Result<String, CliError> {
    match command {
        ResourceCommand::Add {
            name,
            url,
            scopes,
            descriptions,
            token_format,
            token_ttl,
            introspect,
        } => {
            let bad = |e: crate::domain::registry::RegistryError| CliError(e.to_string());
            let name = ResourceName::parse(&name).map_err(bad)?;
            let url = parse_resource_url(&url).map_err(bad)?;
            if config.resource.matches(url.url().as_str()) {
                return Err(CliError(format!(
                    "{url} is Gatehouse's own MCP endpoint (MCP_SERVER_URL), the built-in resource; register other servers only"
                )));
            }
            let scopes = parse_scopes(&scopes, &descriptions).map_err(bad)?;
            let token_format = TokenFormat::parse(&token_format).map_err(bad)?;
            let token_ttl = check_token_ttl(token_ttl).map_err(bad)?;
            let introspector = introspect.then(|| introspection_client(&name, &url, now));
            let record = ResourceRecord {
                name: name.to_string(),
                url: url.to_string(),
                scopes,
                token_format,
                token_ttl,
                introspection_client_id: introspector.as_ref().map(|(c, _)| c.client_id.clone()),
                created_at: now,
            };
            store
                .add_resource(&record, introspector.as_ref().map(|(c, _)| c))
                .await
                .map_err(|e| match e {
                    StoreError::Conflict(_) => CliError(format!(
                        "a resource named {name} or with URL {url} is already registered"
                    )),
                    other => other.into(),
                })?;
            store
                .audit(
                    AuditEvent {
                        client_id: record.introspection_client_id.as_deref(),
                        subject: Some(&record.url),
                        detail: Some(&format!(
                            "actor=cli resource={name} format={} ttl={token_ttl}",
                            token_format.as_str()
                        )),
                        ..AuditEvent::new(Event::ResourceAdded, Outcome::Success)
                    },
                    now,
                )
                .await;
            Ok(added(
                config,
                &record,
                introspector.as_ref().map(|(c, s)| (c, s)),
            ))
        }
        ResourceCommand::List => Ok(list(config, &store.resources().await?)),
        ResourceCommand::Remove { name } => remove(store, &name, now).await,
    }
}

/// The introspection client of the resource `name` at `url` (`--introspect`): confidential,
/// allowed to introspect, its resource in its metadata; and its secret, to show once.
fn introspection_client(
    name: &ResourceName,
    url: &crate::domain::resource::ResourceIndicator,
    now: i64,
) -> (ClientRecord, Secret) {
    let client_id = format!("gc_{}", random_urlsafe(18));
    let secret = Secret::generate(TokenKind::ClientSecret);
    let record = ClientRecord {
        client_id: client_id.clone(),
        client_secret_hash: Some(secret.hash()),
        token_endpoint_auth_method: "client_secret_basic".into(),
        client_name: Some(format!("{name} (resource server)")),
        redirect_uris: Vec::new(),
        grant_types: Vec::new(),
        scope: None,
        metadata: serde_json::json!({
            "client_name": format!("{name} (resource server)"),
            "resource": url.to_string(),
        }),
        can_introspect: true,
        created_at: now,
    };
    (record, secret)
}

/// What `resource add` prints for `record`: its settings, where its server finds the
/// authorization server, and the introspection client's credentials once.
fn added(
    config: &Config,
    record: &ResourceRecord,
    introspector: Option<(&ClientRecord, &Secret)>,
) -> String {
    let (name, url, token_format, token_ttl) = (
        &record.name,
        &record.url,
        record.token_format,
        record.token_ttl,
    );
    let scope_list = record.scope_names().collect::<Vec<_>>().join(" ");
    let mut out = format!(
        "resource: {name}\nurl: {url}\nscopes: {scope_list}\ntoken_format: {}\ntoken_ttl: {token_ttl}\nauthorization_server: {}",
        token_format.as_str(),
        config.issuer
    );
    if let Some((client, secret)) = &introspector {
        out.push_str(&format!(
            "\nintrospection_endpoint: {}\nclient_id: {}\nclient_secret: {}\n(the secret is shown once; it is stored hashed. Introspection with it answers active:false for tokens of any other resource)",
            config.url("/oauth/introspect"),
            client.client_id,
            secret.expose()
        ));
    }
    if token_format == TokenFormat::Jwt {
        out.push_str(&format!(
            "\njwks_uri: {}\n(access tokens are JWTs (RFC 9068, ES256, typ at+jwt) checked offline against the keys at jwks_uri: revoking one takes effect at its expiry, after at most {token_ttl} seconds; refresh tokens stay opaque and are revoked at once)",
            config.url("/oauth/jwks")
        ));
    }
    out.push_str(&format!(
        "\n(the server names {} in authorization_servers of its protected-resource metadata, RFC 9728)",
        config.issuer
    ));
    out
}

/// `resource list`: the built-in resource, then every registered one.
fn list(config: &Config, resources: &[ResourceRecord]) -> String {
    let builtin = [
        "built-in".to_string(),
        config.mcp_server_url.clone(),
        "mcp:read mcp:write".to_string(),
        "opaque".to_string(),
        config.access_token_ttl_secs.to_string(),
        "-".to_string(),
        "-".to_string(),
    ]
    .join("\t");
    listing(
        "NAME\tURL\tSCOPES\tFORMAT\tTOKEN_TTL\tINTROSPECTION_CLIENT\tCREATED",
        std::iter::once(builtin).chain(resources.iter().map(|r| {
            [
                r.name.clone(),
                r.url.clone(),
                r.scope_names().collect::<Vec<_>>().join(" "),
                r.token_format.as_str().to_string(),
                r.token_ttl.to_string(),
                r.introspection_client_id
                    .clone()
                    .unwrap_or_else(|| "-".into()),
                timestamp(r.created_at),
            ]
            .join("\t")
        })),
        "no resources",
    )
}

/// `resource remove NAME`: the resource and every grant for it revoked.
async fn remove(store: &Store, name: &str, now: i64) -> Result<String, CliError> {
    let Some(removed) = store.remove_resource(name, now).await? else {
        return Err(CliError(format!("no resource named {name}")));
    };
    store
        .audit(
            AuditEvent {
                subject: Some(&removed.url),
                detail: Some(&format!("actor=cli resource={name}")),
                ..AuditEvent::new(Event::ResourceRemoved, Outcome::Success)
            },
            now,
        )
        .await;
    Ok(format!(
        "removed resource {name} ({}); every grant for it is revoked",
        removed.url
    ))
}
