//! `gatehouse url create|list|revoke`: personal MCP URLs (issue "Credentials beyond the
//! browser"), `<MCP_SERVER_URL>/<secret>` for clients that cannot send a header.

use clap::Subcommand;

use super::{
    CliError, account_filter, credential_owner, listing, revoke_credential, timestamp,
    timestamp_or_never,
};
use crate::config::Config;
use crate::credentials::{self, Actor, NewCredential};
use crate::domain::api_key::{access_label, parse_lifetime, parse_name, status_label};
use crate::domain::principal::IssuedCredential;
use crate::store::Store;
use crate::store::urls::PersonalUrlRecord;

/// Lifetime of a personal URL made without `--expires`.
pub const DEFAULT_LIFETIME: &str = "30d";

/// Name of a personal URL made without `--name`.
pub const DEFAULT_NAME: &str = crate::domain::api_key::DEFAULT_URL_NAME;

/// `gatehouse url …`
#[derive(Debug, Subcommand)]
pub enum UrlCommand {
    /// Create a personal MCP URL; prints its id and the URL once (only the SHA-256 of its
    /// secret is stored). Read-only and valid for 30 days unless told otherwise. The URL is
    /// built from `MCP_SERVER_URL`, which must be set to the server's MCP URL.
    Create {
        /// Email of the account the URL acts for.
        #[arg(long)]
        account: String,
        /// Reach only this project (the account must be a member); without it, every active
        /// project of the account.
        #[arg(long, value_name = "PROJECT_ID")]
        project: Option<String>,
        /// Allow writes (mcp:write); the member's role in a project still limits them.
        #[arg(long)]
        write: bool,
        /// Lifetime: days or hours, e.g. 30d or 12h.
        #[arg(long, value_name = "DURATION", default_value = DEFAULT_LIFETIME)]
        expires: String,
        /// A name to recognise the URL by.
        #[arg(long)]
        name: Option<String>,
        /// Only these tools may be listed and called with it (comma-separated names as
        /// tools/list shows them).
        #[arg(long, value_name = "TOOLS")]
        tools: Option<String>,
        /// These tools are neither listed nor callable with it (comma-separated).
        #[arg(long, value_name = "TOOLS")]
        deny_tools: Option<String>,
    },
    /// List personal URLs (never the secrets) with their last use, all or one account's.
    List {
        /// Only this account's URLs.
        #[arg(long)]
        account: Option<String>,
    },
    /// Revoke a personal URL at once.
    Revoke {
        /// The URL id, as printed by `url create` and `url list`.
        url_id: String,
    },
}

/// Runs one `gatehouse url` command.
pub(super) async fn run(
    config: &Config,
    store: &Store,
    command: UrlCommand,
    now: i64,
) -> Result<String, CliError> {
    match command {
        UrlCommand::Create {
            account,
            project,
            write,
            expires,
            name,
            tools,
            deny_tools,
        } => {
            let tools = crate::domain::principal::ToolFilter::parse(
                tools.as_deref(),
                deny_tools.as_deref(),
            )
            .map_err(CliError)?;
            // The URL is printed under MCP_SERVER_URL: left at its default it would name
            // whatever listens on 127.0.0.1:8080, not the server, and a person pasting it would
            // hand the secret there.
            if !config.mcp_server_url_given {
                return Err(CliError(format!(
                    "MCP_SERVER_URL is not set, so the URL would name {} (the default), not your server: set MCP_SERVER_URL (environment or --config) to the server's MCP URL and run again; nothing was created",
                    config.mcp_server_url
                )));
            }
            let name = parse_name(name.as_deref().unwrap_or(DEFAULT_NAME))
                .map_err(|e| CliError(e.to_string()))?;
            let lifetime = parse_lifetime(&expires).map_err(|e| CliError(e.to_string()))?;
            let account_id = credential_owner(store, &account, project.as_deref()).await?;
            if let Some(full) =
                credentials::room_for(store, IssuedCredential::PersonalUrl, &account_id, now)
                    .await?
            {
                return Err(CliError(full));
            }
            let issued = credentials::issue(
                store,
                &NewCredential {
                    kind: IssuedCredential::PersonalUrl,
                    account_id: &account_id,
                    project_id: project.as_deref(),
                    name: &name,
                    write,
                    allowed_ips: &[],
                    expires_at: Some(now + lifetime),
                    tools: &tools,
                },
                Actor::Cli,
                now,
            )
            .await?;
            let (id, secret) = (issued.id, issued.secret);
            Ok(format!(
                "url_id: {id}\nurl: {}\n(the URL is a credential, shown once; it is stored hashed. Give it to an MCP client as its server URL; anyone who has it can act as {account} until {})",
                crate::domain::api_key::personal_url(&config.mcp_server_url, secret.expose()),
                timestamp(now + lifetime)
            ))
        }
        UrlCommand::List { account } => {
            let account_id = account_filter(store, account.as_deref()).await?;
            let urls = store.personal_urls(account_id.as_deref()).await?;
            Ok(listing(
                "ID\tACCOUNT\tPROJECT\tACCESS\tNAME\tCREATED\tEXPIRES\tLAST_USED\tSTATUS\tTOOLS",
                urls.iter().map(|url| line(url, now)),
                "no personal URLs",
            ))
        }
        UrlCommand::Revoke { url_id } => {
            revoke_credential(store, IssuedCredential::PersonalUrl, &url_id, now).await
        }
    }
}

/// One tab-separated line of `gatehouse url list`.
fn line(url: &PersonalUrlRecord, now: i64) -> String {
    let status = status_label(url.revoked_at, url.expires_at, now);
    let access = access_label(&url.scope);
    [
        url.id.clone(),
        url.account_email.clone(),
        url.project_id.clone().unwrap_or_else(|| "-".into()),
        access.to_string(),
        url.name.clone(),
        timestamp(url.created_at),
        timestamp_or_never(url.expires_at),
        timestamp_or_never(url.last_used_at),
        status.to_string(),
        crate::domain::principal::ToolFilter::from_stored(url.tool_filter.as_deref()).describe(),
    ]
    .join("\t")
}
