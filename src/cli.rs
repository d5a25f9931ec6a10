//! The command line: `serve` (default), `migrate`, `backup`, `restore` ([`backup`]),
//! `account add|disable|enable|list|set-password|reset-link|quota`,
//! `project add|list|add-member|remove-member`, `client add|list|revoke`, `key create|list|revoke`,
//! `url create|list|revoke` ([`url`]), `resource add|list|remove` ([`resource`]), `upstream …`
//! ([`upstream`]). Every command works on both
//! databases and exits non-zero with one clear message on bad input.

use std::io::BufRead;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::app::open_store;
use crate::config::Config;
use crate::credentials::{self, Actor, NewCredential, Revocation};
use crate::domain::account::{AccountStatus, Email, Role, validate_password};
use crate::domain::api_key::{
    DEFAULT_NAME, access_label, parse_allow_list, parse_lifetime, parse_name, status_label,
};
use crate::domain::audit::{Event, Outcome};
use crate::domain::client_assertion::{PRIVATE_KEY_JWT, validate_jwks_uri};
use crate::domain::principal::IssuedCredential;
use crate::domain::principal::key_scopes;
use crate::domain::secret::{Secret, TokenKind, random_urlsafe};
use crate::domain::text::check_line;
use crate::store::audit::AuditEvent;
use crate::store::keys::ApiKeyRecord;
use crate::store::oauth::ClientRecord;
use crate::store::services::NewService;
use crate::store::workloads::WorkloadIdentity;
use crate::store::{Store, StoreError, now};

pub mod audit;
pub mod backup;
pub mod idp;
pub mod resource;
pub mod secret_key;
pub mod serve;
pub mod upstream;
mod upstream_per_person;
pub mod url;

/// Gatehouse: an OAuth 2.1 authorization server and MCP resource server.
#[derive(Debug, Parser)]
#[command(name = "gatehouse", version, about)]
pub struct Cli {
    /// A TOML file of settings (keys are the environment variable names); the environment wins.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// What to do (default: serve).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start the server (the default). Every setting is an option here and an environment
    /// variable; `gatehouse serve --help` lists them with their defaults.
    Serve(Box<serve::ServeArgs>),
    /// Speak MCP over stdin/stdout for a local client that launches this process (Claude
    /// Desktop, Cursor), as the holder of the API key in `GATEHOUSE_API_KEY`, on this
    /// machine's database; or, with `--url`, bridged to a remote deployment (no database).
    /// Logs go to stderr.
    Stdio(crate::remote::StdioArgs),
    /// Sign in to a remote Gatehouse MCP endpoint in the browser (OAuth with PKCE) and keep
    /// the tokens for `gatehouse stdio --url` in a file only you can read.
    Login(crate::remote::LoginArgs),
    /// Apply database migrations and exit.
    Migrate,
    /// Copy the `SQLite` database to FILE while the server serves (a consistent snapshot);
    /// on `PostgreSQL`, says to use `pg_dump -Fc` and exits 1.
    Backup {
        /// Where to write the copy.
        file: PathBuf,
        /// Replace FILE if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Replace the `SQLite` database with the backup FILE and migrate it to this release's
    /// schema; refused while a server has the database open. On `PostgreSQL`, says to use
    /// `pg_restore` and exits 1.
    Restore {
        /// A file written by `gatehouse backup`.
        file: PathBuf,
    },
    /// Manage accounts.
    #[command(subcommand)]
    Account(AccountCommand),
    /// Manage projects.
    #[command(subcommand)]
    Project(ProjectCommand),
    /// Manage OAuth clients.
    #[command(subcommand)]
    Client(ClientCommand),
    /// Manage API keys for the MCP route.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Walk an MCP server's discovery chain as the real clients do and name what breaks.
    Doctor(crate::doctor::DoctorArgs),
    /// Manage personal MCP URLs (for clients that cannot send a header).
    #[command(subcommand)]
    Url(url::UrlCommand),
    /// Read the audit log: who did what, through which client, in which project, when and
    /// how it ended (never arguments, results or secrets).
    Audit(audit::AuditArgs),
    /// The server key that seals stored secrets: status, a new key, rotating the key file.
    #[command(subcommand)]
    SecretKey(secret_key::SecretKeyCommand),
    /// Upstream MCP servers whose tools Gatehouse serves behind its own authorization.
    #[command(subcommand)]
    Upstream(upstream::UpstreamCommand),
    /// Other MCP servers that use Gatehouse as their authorization server.
    #[command(subcommand)]
    Resource(resource::ResourceCommand),
    /// Trusted identity providers: sign-in with OpenID Connect, identity assertions.
    #[command(subcommand)]
    Idp(idp::IdpCommand),
    /// The key JWT access tokens (RFC 9068) are signed with.
    #[command(subcommand)]
    SigningKey(resource::SigningKeyCommand),
}

/// `gatehouse key …` (product spec "API keys").
#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Create an API key; prints its id and the key once (only its SHA-256 is stored).
    Create {
        /// Email of the account the key acts for.
        #[arg(long)]
        account: String,
        /// Make a project key reaching only this project (the account must be a member);
        /// without it, an account key reaching all of the account's active projects.
        #[arg(long, value_name = "PROJECT_ID")]
        project: Option<String>,
        /// Allow writes (mcp:write); the member's role in a project still limits them.
        #[arg(long)]
        write: bool,
        /// An address or CIDR block the project key may be used from (repeatable); without
        /// it, any address.
        #[arg(long = "allow-ip", value_name = "CIDR")]
        allow_ip: Vec<String>,
        /// Lifetime: days or hours, e.g. 90d or 12h; without it the key does not expire.
        #[arg(long, value_name = "DURATION")]
        expires: Option<String>,
        /// A name to recognise the key by.
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
    /// List keys (never the secrets), all or one account's.
    List {
        /// Only this account's keys.
        #[arg(long)]
        account: Option<String>,
    },
    /// Revoke a key at once.
    Revoke {
        /// The key id, as printed by `key create` and `key list`.
        key_id: String,
    },
}

/// The arguments of `gatehouse client add`.
#[derive(Debug, Args)]
pub struct ClientAddArgs {
    /// A name for the service.
    pub name: String,
    /// Allow it to call the introspection endpoint (RFC 7662).
    #[arg(long)]
    pub introspect: bool,
    /// Make a service client that gets access tokens with `client_credentials` (RFC 6749
    /// §4.4), acting for the --owner account.
    #[arg(long, requires = "owner")]
    pub service: bool,
    /// Email of the account a service client acts for.
    #[arg(long, requires = "service")]
    pub owner: Option<String>,
    /// Limit a service client to this project (the owner must be a member).
    #[arg(long, value_name = "PROJECT_ID", requires = "service")]
    pub project: Option<String>,
    /// Let a service client write (mcp:write); the owner's role still limits it.
    #[arg(long, requires = "service")]
    pub write: bool,
    /// The https URL of the service's public keys (a JWK Set): it authenticates with
    /// `private_key_jwt` assertions it signs (RFC 7523 §2.2) instead of a secret.
    #[arg(long, value_name = "URL", requires = "service")]
    pub jwks_uri: Option<String>,
    /// A file holding the service's public keys (a JWK Set, JSON), kept with the client
    /// instead of fetched from a URL: it authenticates with `private_key_jwt` assertions
    /// as with --jwks-uri. Private key members are refused.
    #[arg(long, value_name = "FILE", requires = "service", conflicts_with_all = ["jwks_uri", "workload_issuer"])]
    pub jwks_file: Option<PathBuf>,
    /// Workload identity (MCP's draft workload identity federation extension): the issuer
    /// of the JWTs the workload presents with the JWT-bearer grant (RFC 7523 §2.1) instead
    /// of a secret, e.g. a Kubernetes cluster's service-account issuer or a SPIFFE trust
    /// domain's OIDC discovery URL (https; plain http only on a loopback host).
    #[arg(long, value_name = "URL", requires_all = ["service", "workload_subject"], conflicts_with = "jwks_uri")]
    pub workload_issuer: Option<String>,
    /// The workload's `sub`, e.g. `system:serviceaccount:NAMESPACE:NAME` or
    /// `spiffe://TRUST_DOMAIN/PATH`.
    #[arg(long, value_name = "SUB", requires = "workload_issuer")]
    pub workload_subject: Option<String>,
    /// The issuer's key set, when it publishes no OpenID Connect discovery document
    /// (default: the `jwks_uri` of `ISSUER/.well-known/openid-configuration`).
    #[arg(long, value_name = "URL", requires = "workload_issuer")]
    pub workload_jwks_uri: Option<String>,
}

/// `gatehouse client …`
#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// Create a confidential client (`client_secret_basic`) for a service; prints its id and
    /// secret once.
    Add(ClientAddArgs),
    /// List registered clients, newest first (never a secret): id, name, kind, authentication
    /// method, live grants, when created, status.
    List,
    /// Revoke a client for good: it is refused from now on (unknown to the authorization,
    /// token and introspection endpoints), and every grant and token it held ends at once.
    Revoke {
        /// The `client_id`, as printed by `client add` and `client list`.
        client_id: String,
    },
}

/// `gatehouse account …`
#[derive(Debug, Subcommand)]
pub enum AccountCommand {
    /// Create an account; the password is read from the first line of standard input.
    Add {
        /// Email address (unique, case-insensitive).
        email: String,
        /// Read the password from standard input (required: passwords never go on the command line).
        #[arg(long, required = true)]
        password_stdin: bool,
    },
    /// Disable an account: its sessions, tokens and keys stop working at once.
    Disable {
        /// Email address.
        email: String,
    },
    /// Enable a disabled account again: it may sign in, and its keys and connected apps work
    /// again (authorization codes pending when it was disabled stay void).
    Enable {
        /// Email address.
        email: String,
    },
    /// List accounts, oldest first: email, id, status, when created, and `operator` for an
    /// account with the admin flag.
    List,
    /// Make an account an operator (the admin flag): it may use the console's upstream page
    /// (`/upstreams`) to approve, disable and enable upstream MCP servers. `--revoke` clears
    /// the flag.
    Admin {
        /// Email address.
        email: String,
        /// Clear the flag: the account is no longer an operator.
        #[arg(long)]
        revoke: bool,
    },
    /// Set an account's password; it is read from the first line of standard input. Every
    /// browser session of the account ends; its connected apps and API keys keep working.
    SetPassword {
        /// Email address.
        email: String,
        /// Read the password from standard input (required: passwords never go on the command line).
        #[arg(long, required = true)]
        password_stdin: bool,
    },
    /// Print a one-time link that lets the account's owner choose a new password (valid for
    /// one hour; hand it over privately). Setting the password with it ends every browser
    /// session of the account.
    ResetLink {
        /// Email address.
        email: String,
    },
    /// Set the account's budget of MCP tool calls per rolling hour, or put it back on the
    /// server's default (`GATEHOUSE_QUOTA_CALLS_PER_HOUR`). Applies to the next call.
    Quota {
        /// Email address.
        email: String,
        /// Tool calls per rolling hour; 0 = unlimited.
        #[arg(
            long,
            value_name = "N",
            required_unless_present = "default",
            conflicts_with = "default"
        )]
        calls_per_hour: Option<u64>,
        /// Use the server's default budget again.
        #[arg(long)]
        default: bool,
    },
}

/// `gatehouse project …`
#[derive(Debug, Subcommand)]
pub enum ProjectCommand {
    /// Create a project owned by an account (who becomes a write member); prints its id.
    Add {
        /// Project name.
        name: String,
        /// Email of the owner.
        #[arg(long)]
        owner: String,
    },
    /// Add an account to a project with a role.
    AddMember {
        /// Project id, as printed by `project add`.
        project_id: String,
        /// Email of the member.
        email: String,
        /// `read` or `write`.
        #[arg(long)]
        role: String,
    },
    /// List projects, oldest first: id, name, owner, status, members, when created.
    List {
        /// Only the projects this account belongs to.
        #[arg(long)]
        account: Option<String>,
    },
    /// Remove an account from a project (never its owner); the project keys, personal URLs
    /// and project-bound service clients it held for the project end at once.
    RemoveMember {
        /// Project id, as printed by `project add` and `project list`.
        project_id: String,
        /// Email of the member.
        email: String,
    },
}

/// A command's failure: printed as one line, exit status 1.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CliError(pub String);

impl From<StoreError> for CliError {
    fn from(e: StoreError) -> Self {
        CliError(e.to_string())
    }
}

/// Runs a non-serve command; returns what to print on success.
pub async fn run_admin(config: &Config, command: Command) -> Result<String, CliError> {
    if let Command::Account(AccountCommand::Add { email, .. }) = &command {
        // Validate before touching the database, so bad input fails fast and clearly.
        Email::parse(email).map_err(|e| CliError(format!("invalid email: {e}")))?;
    }
    if let Command::SecretKey(command) = command {
        // Needs the key settings only, not the database.
        return secret_key::run(config, command);
    }
    // Both work on the file, not through a store: a backup must not migrate the database it
    // copies, and a restore needs it closed.
    let command = match command {
        Command::Backup { file, force } => return backup::backup(config, file, force).await,
        Command::Restore { file } => return backup::restore(config, file).await,
        other => other,
    };
    let store = open_store(&config.database_url)
        .await
        .map_err(|e| CliError(e.to_string()))?;
    let now = now();
    let out = match command {
        Command::Serve(_)
        | Command::Stdio(_)
        | Command::Doctor(_)
        | Command::Login(_)
        | Command::SecretKey(_)
        | Command::Backup { .. }
        | Command::Restore { .. } => {
            unreachable!("handled before")
        }
        Command::Migrate => "migrations applied".to_string(),
        Command::Account(command) => run_account(config, &store, command, now).await?,
        Command::Project(command) => run_project(&store, command, now).await?,
        Command::Client(command) => run_client(config, &store, command, now).await?,
        Command::Key(command) => run_key(&store, command, now).await?,
        Command::Url(command) => url::run(config, &store, command, now).await?,
        Command::Audit(args) => audit::run(&store, args, now).await?,
        Command::Upstream(command) => upstream::run(config, &store, command, now).await?,
        Command::Resource(command) => resource::run(config, &store, command, now).await?,
        Command::Idp(command) => idp::run(config, &store, command, now).await?,
        Command::SigningKey(command) => resource::run_signing_key(&store, command, now).await?,
    };
    store.close().await;
    Ok(out)
}

/// `gatehouse account add`; returns what to print.
async fn account_add(store: &Store, email: String, now: i64) -> Result<String, CliError> {
    Ok({
        let email = Email::parse(&email).map_err(|e| CliError(format!("invalid email: {e}")))?;
        let hash = password_from_stdin().await?;
        let account = store
            .create_account(&email, &hash, now)
            .await
            .map_err(|e| match e {
                StoreError::Conflict(_) => CliError(format!(
                    "an account with email {} already exists",
                    email.as_str()
                )),
                other => other.into(),
            })?;
        cli_audit(
            store,
            Event::AccountCreated,
            Some(&account.id),
            Some(email.as_str()),
            None,
            now,
        )
        .await;
        format!("created account {} ({})", account.email, account.id)
    })
}

/// `gatehouse account disable`; returns what to print.
async fn account_disable(store: &Store, email: String, now: i64) -> Result<String, CliError> {
    Ok({
        let email = Email::parse(&email).map_err(|e| CliError(format!("invalid email: {e}")))?;
        let account = find_account(store, email.as_str()).await?;
        store
            .set_account_status(&email, AccountStatus::Disabled)
            .await
            .map_err(|e| match e {
                StoreError::NotFound(_) => {
                    CliError(format!("no account with email {}", email.as_str()))
                }
                other => other.into(),
            })?;
        // Its tokens stop at once (every use checks the account); its pending codes are
        // used up so that none is redeemed later, even if the account is enabled again.
        store.use_up_codes_of_account(&account, now).await?;
        cli_audit(
            store,
            Event::AccountDisabled,
            Some(&account),
            Some(email.as_str()),
            None,
            now,
        )
        .await;
        format!("disabled account {}", email.as_str())
    })
}

/// `gatehouse account enable`; returns what to print.
async fn account_enable(store: &Store, email: String, now: i64) -> Result<String, CliError> {
    Ok({
        let email = Email::parse(&email).map_err(|e| CliError(format!("invalid email: {e}")))?;
        let account = find_account(store, email.as_str()).await?;
        store
            .set_account_status(&email, AccountStatus::Active)
            .await?;
        cli_audit(
            store,
            Event::AccountEnabled,
            Some(&account),
            Some(email.as_str()),
            None,
            now,
        )
        .await;
        format!("enabled account {}", email.as_str())
    })
}

/// `gatehouse account list`; returns what to print.
async fn account_list(store: &Store) -> Result<String, CliError> {
    Ok({
        let accounts = store.list_accounts().await?;
        listing(
            "EMAIL\tID\tSTATUS\tCREATED\tROLE",
            accounts.iter().map(|a| {
                [
                    a.email.clone(),
                    a.id.clone(),
                    a.status.to_string(),
                    timestamp(a.created_at),
                    if a.admin { "operator" } else { "-" }.to_string(),
                ]
                .join("\t")
            }),
            "no accounts",
        )
    })
}

/// `gatehouse account admin`; returns what to print.
async fn account_admin(
    store: &Store,
    email: String,
    revoke: bool,
    now: i64,
) -> Result<String, CliError> {
    Ok({
        let account = find_account_record(store, &email).await?;
        let email =
            Email::parse(&account.email).map_err(|e| CliError(format!("invalid email: {e}")))?;
        let changed = store.set_account_admin(&email, !revoke).await?;
        if changed {
            cli_audit(
                store,
                if revoke {
                    Event::OperatorRevoked
                } else {
                    Event::OperatorGranted
                },
                Some(&account.id),
                Some(email.as_str()),
                None,
                now,
            )
            .await;
        }
        match (revoke, changed) {
            (false, true) => format!(
                "{} is now an operator (the console's upstream page: /upstreams)",
                email.as_str()
            ),
            (false, false) => format!("{} was already an operator", email.as_str()),
            (true, true) => format!("{} is no longer an operator", email.as_str()),
            (true, false) => format!("{} was not an operator", email.as_str()),
        }
    })
}

/// `gatehouse account set-password`; returns what to print.
async fn account_set_password(store: &Store, email: String, now: i64) -> Result<String, CliError> {
    Ok({
        let account = find_account_record(store, &email).await?;
        let hash = password_from_stdin().await?;
        store.set_password_hash(&account.id, &hash, true).await?;
        store.void_reset_tokens(&account.id, now).await?;
        crate::web::recovery::after_password_reset(
            store,
            &account,
            None,
            "actor=cli set-password",
            now,
        )
        .await?;
        format!(
            "set the password of {}; its browser sessions were signed out",
            account.email
        )
    })
}

/// `gatehouse account reset-link`; returns what to print.
async fn account_reset_link(
    config: &Config,
    store: &Store,
    email: String,
    now: i64,
) -> Result<String, CliError> {
    Ok({
        let account = find_account_record(store, &email).await?;
        let link =
            crate::web::recovery::new_reset_link(store, |p| config.url(p), &account, now).await?;
        cli_audit(
            store,
            Event::PasswordResetRequested,
            Some(&account.id),
            Some(&account.email),
            Some("reset-link"),
            now,
        )
        .await;
        let mut out = format!(
            "One-time link to choose a new password for {} (valid for one hour):\n{link}",
            account.email
        );
        if account.status != AccountStatus::Active {
            out.push_str(&format!(
                "\nThe account is disabled: it cannot sign in until `gatehouse account enable {}`.",
                account.email
            ));
        }
        out
    })
}

/// `gatehouse account quota`; returns what to print.
async fn account_quota(
    config: &Config,
    store: &Store,
    email: String,
    calls_per_hour: Option<u64>,
    now: i64,
) -> Result<String, CliError> {
    Ok({
        let max = crate::config::MAX_QUOTA_CALLS_PER_HOUR;
        if calls_per_hour.is_some_and(|n| n > max) {
            return Err(CliError(format!(
                "--calls-per-hour must be from 0 (unlimited) to {max}"
            )));
        }
        let account = find_account(store, &email).await?;
        store
            .set_account_calls_per_hour(&account, calls_per_hour)
            .await?;
        let (budget, detail) = match calls_per_hour {
            Some(0) => (
                "unlimited tool calls".to_string(),
                "calls_per_hour=0".to_string(),
            ),
            Some(n) => (
                format!("{n} tool calls per rolling hour"),
                format!("calls_per_hour={n}"),
            ),
            None => (
                format!(
                    "the server's default ({} tool calls per rolling hour, 0 = unlimited)",
                    config.quota_calls_per_hour
                ),
                "calls_per_hour=default".to_string(),
            ),
        };
        cli_audit(
            store,
            Event::AccountQuotaSet,
            Some(&account),
            Some(&email),
            Some(&detail),
            now,
        )
        .await;
        format!("account {email}: {budget}")
    })
}

/// Runs one `gatehouse account …` command; returns what to print.
async fn run_account(
    config: &Config,
    store: &Store,
    command: AccountCommand,
    now: i64,
) -> Result<String, CliError> {
    let out = match command {
        AccountCommand::Add { email, .. } => account_add(store, email, now).await?,
        AccountCommand::Disable { email } => account_disable(store, email, now).await?,
        AccountCommand::Enable { email } => account_enable(store, email, now).await?,
        AccountCommand::List => account_list(store).await?,
        AccountCommand::Admin { email, revoke } => account_admin(store, email, revoke, now).await?,
        AccountCommand::SetPassword { email, .. } => {
            account_set_password(store, email, now).await?
        }
        AccountCommand::ResetLink { email } => {
            account_reset_link(config, store, email, now).await?
        }
        AccountCommand::Quota {
            email,
            calls_per_hour,
            default: _,
        } => account_quota(config, store, email, calls_per_hour, now).await?,
    };
    Ok(out)
}

/// Runs one `gatehouse project …` command; returns what to print.
async fn run_project(store: &Store, command: ProjectCommand, now: i64) -> Result<String, CliError> {
    let out = match command {
        ProjectCommand::Add { name, owner } => {
            let name = crate::domain::account::parse_project_name(&name).map_err(CliError)?;
            let account = find_account(store, &owner).await?;
            let project = store.create_project(name, &account, now).await?;
            cli_audit(
                store,
                Event::ProjectCreated,
                Some(&account),
                Some(&project),
                None,
                now,
            )
            .await;
            project
        }
        ProjectCommand::AddMember {
            project_id,
            email,
            role,
        } => {
            let role: Role = role
                .parse()
                .map_err(|_| CliError(format!("invalid role \"{role}\": use read or write")))?;
            let account = find_account(store, &email).await?;
            store
                .add_member(&project_id, &account, role, now)
                .await
                .map_err(|e| match e {
                    StoreError::NotFound(_) => CliError(format!("no project with id {project_id}")),
                    other => other.into(),
                })?;
            cli_audit(
                store,
                Event::MemberAdded,
                Some(&account),
                Some(&project_id),
                Some(&format!("role={}", role.as_str())),
                now,
            )
            .await;
            format!("{email} is now a {} member of {project_id}", role.as_str())
        }
        ProjectCommand::List { account } => {
            let member = account_filter(store, account.as_deref()).await?;
            let projects = store.project_listing(member.as_deref()).await?;
            listing(
                "ID\tNAME\tOWNER\tSTATUS\tMEMBERS\tCREATED",
                projects.iter().map(|p| {
                    [
                        p.project_id.clone(),
                        p.name.clone(),
                        p.owner_email.clone(),
                        p.status.clone(),
                        p.members.to_string(),
                        timestamp(p.created_at),
                    ]
                    .join("\t")
                }),
                "no projects",
            )
        }
        ProjectCommand::RemoveMember { project_id, email } => {
            let account = find_account(store, &email).await?;
            let Some(owner) = store.project_owner(&project_id).await? else {
                return Err(CliError(format!("no project with id {project_id}")));
            };
            if owner == account {
                return Err(CliError(format!(
                    "{email} owns project {project_id}; the owner cannot be removed"
                )));
            }
            if !store.remove_member(&project_id, &account, now).await? {
                return Err(CliError(format!(
                    "{email} is not a member of project {project_id}"
                )));
            }
            cli_audit(
                store,
                Event::MemberRemoved,
                Some(&account),
                Some(&project_id),
                None,
                now,
            )
            .await;
            format!("removed {email} from {project_id}")
        }
    };
    Ok(out)
}

/// The workload identity of `client add --workload-issuer … --workload-subject …` for
/// `client_id`: both URLs https (plain http only on a loopback host), the subject 1 to 500
/// characters on one line; `None` without an issuer and a subject.
fn workload_identity(
    client_id: &str,
    issuer: Option<&str>,
    subject: Option<&str>,
    jwks_uri: Option<&str>,
) -> Result<Option<WorkloadIdentity>, CliError> {
    let (Some(issuer), Some(subject)) = (issuer, subject) else {
        return Ok(None);
    };
    for (flag, uri) in [
        ("--workload-issuer", Some(issuer)),
        ("--workload-jwks-uri", jwks_uri),
    ] {
        if let Some(uri) = uri {
            crate::clients::validate_trusted_uri(uri)
                .map_err(|e| CliError(format!("{flag}: {e}")))?;
        }
    }
    let subject = subject.trim();
    if subject.is_empty() || subject.len() > 500 {
        return Err(CliError(
            "--workload-subject must be 1 to 500 characters".to_string(),
        ));
    }
    check_line(subject).map_err(|e| CliError(format!("--workload-subject {e}")))?;
    Ok(Some(WorkloadIdentity {
        client_id: client_id.to_string(),
        issuer: issuer.to_string(),
        subject: subject.to_string(),
        jwks_uri: jwks_uri.map(str::to_string),
    }))
}

/// Who a service client made by `client add --service` acts for.
struct ServiceArgs<'a> {
    /// The owner's email.
    owner: &'a str,
    /// The one project it is limited to, if any.
    project: Option<&'a str>,
    /// Whether it may write (`mcp:write`).
    write: bool,
}

/// Stores `record` as a service client acting for `new.owner` (a workload's when `workload`
/// is given), with its consent and token family, and audits it.
///
/// Errors: the owner is unknown or disabled, or not a member of the project named.
async fn create_service(
    config: &Config,
    store: &Store,
    record: &mut ClientRecord,
    new: &ServiceArgs<'_>,
    workload: Option<&WorkloadIdentity>,
    now: i64,
) -> Result<(), CliError> {
    let (owner, project) = (new.owner, new.project);
    let account_id = find_active_account(store, owner).await?;
    if let Some(project_id) = project
        && store.membership(&account_id, project_id).await?.is_none()
    {
        return Err(CliError(format!(
            "{owner} is not a member of an active project with id {project_id}"
        )));
    }
    let scope = key_scopes(new.write).to_string();
    record.grant_types = vec![if workload.is_some() {
        crate::domain::client_assertion::JWT_BEARER_GRANT.into()
    } else {
        crate::domain::grant::GrantType::ClientCredentials
            .as_str()
            .into()
    }];
    record.scope = Some(scope.clone());
    let service = NewService {
        account_id: &account_id,
        project_id: project,
        scope: &scope,
        resource: &config.mcp_server_url,
        issuer: &config.issuer,
    };
    match workload {
        Some(w) => {
            store
                .create_workload_client(record, &service, w, now)
                .await?;
        }
        None => store.create_service_client(record, &service, now).await?,
    }
    store
        .audit(
            AuditEvent {
                event: Event::ClientCreated,
                outcome: Outcome::Success,
                account_id: Some(&account_id),
                client_id: Some(&record.client_id),
                subject: project,
                source_ip: None,
                detail: Some(&match workload {
                    Some(w) => format!(
                        "actor=cli service scope={scope} workload_issuer={}",
                        w.issuer
                    ),
                    None => format!("actor=cli service scope={scope}"),
                }),
            },
            now,
        )
        .await;
    Ok(())
}

/// What `client add` prints: the client id, then the secret (shown once), or how the
/// workload or the signing service (whose key set is `keys`) authenticates.
fn client_added(
    config: &Config,
    client_id: &str,
    workload: Option<&WorkloadIdentity>,
    secret: Option<&Secret>,
    keys: &str,
) -> String {
    if let Some(w) = workload {
        return format!(
            "client_id: {client_id}\ngrant_type: {}\nworkload_issuer: {}\nworkload_subject: {}\n(the workload presents a JWT of this issuer and subject, aud {}, as the assertion)",
            crate::domain::client_assertion::JWT_BEARER_GRANT,
            w.issuer,
            w.subject,
            config.issuer
        );
    }
    match secret {
        Some(secret) => format!(
            "client_id: {client_id}\nclient_secret: {}\n(the secret is shown once; it is stored hashed)",
            secret.expose()
        ),
        None => format!(
            "client_id: {client_id}\ntoken_endpoint_auth_method: private_key_jwt\n(assertions signed with a key of {keys})"
        ),
    }
}

/// Stores `record` as a client of its own (not a service) and audits it.
async fn create_client(store: &Store, record: &ClientRecord, now: i64) -> Result<(), CliError> {
    store.create_client(record).await?;
    let detail = if record.can_introspect {
        "actor=cli introspect"
    } else {
        "actor=cli"
    };
    store
        .audit(
            AuditEvent {
                client_id: Some(&record.client_id),
                detail: Some(detail),
                ..AuditEvent::new(Event::ClientCreated, Outcome::Success)
            },
            now,
        )
        .await;
    Ok(())
}

/// A client name given to `client add`: 1 to 200 characters (spaces around it ignored) on one
/// line.
fn check_client_name(name: &str) -> Result<(), CliError> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 200 {
        return Err(CliError(
            "client name must be 1 to 200 characters".to_string(),
        ));
    }
    check_line(name).map_err(|e| CliError(format!("client name {e}")))
}

/// `gatehouse client add`: a confidential client with a secret, an introspecting client, a
/// service client (secret, published or filed keys, or a workload identity); returns what to
/// print (the secret once).
async fn client_add(
    config: &Config,
    store: &Store,
    args: ClientAddArgs,
    now: i64,
) -> Result<String, CliError> {
    let ClientAddArgs {
        name,
        introspect,
        service,
        owner,
        project,
        write,
        jwks_uri,
        jwks_file,
        workload_issuer,
        workload_subject,
        workload_jwks_uri,
    } = args;
    check_client_name(&name)?;
    if let Some(uri) = &jwks_uri {
        validate_jwks_uri(uri).map_err(|e| CliError(format!("--jwks-uri: {e}")))?;
    }
    let jwks = jwks_file.as_deref().map(read_jwks_file).transpose()?;
    let signs_assertions = jwks_uri.is_some() || jwks.is_some();
    let client_id = format!("gc_{}", random_urlsafe(18));
    let workload = workload_identity(
        &client_id,
        workload_issuer.as_deref(),
        workload_subject.as_deref(),
        workload_jwks_uri.as_deref(),
    )?;
    // A service with published keys signs assertions, a workload presents its
    // platform's JWT; any other client gets a secret.
    let secret = (!signs_assertions && workload.is_none())
        .then(|| Secret::generate(TokenKind::ClientSecret));
    let mut metadata = serde_json::json!({"client_name": name.trim()});
    if let Some(uri) = &jwks_uri {
        metadata["jwks_uri"] = serde_json::json!(uri);
    }
    if let Some(jwks) = jwks {
        metadata["jwks"] = jwks;
    }
    let mut record = ClientRecord {
        client_id: client_id.clone(),
        client_secret_hash: secret.as_ref().map(Secret::hash),
        token_endpoint_auth_method: if signs_assertions {
            PRIVATE_KEY_JWT.into()
        } else if workload.is_some() {
            "none".into()
        } else {
            "client_secret_basic".into()
        },
        client_name: Some(name.trim().to_string()),
        redirect_uris: Vec::new(),
        grant_types: Vec::new(),
        scope: None,
        metadata,
        can_introspect: introspect,
        created_at: now,
    };
    match owner.filter(|_| service) {
        None => create_client(store, &record, now).await?,
        Some(owner) => {
            let new = ServiceArgs {
                owner: &owner,
                project: project.as_deref(),
                write,
            };
            create_service(config, store, &mut record, &new, workload.as_ref(), now).await?;
        }
    }
    let keys = match (&jwks_uri, &jwks_file) {
        (Some(uri), _) => uri.clone(),
        (None, Some(file)) => format!("the set read from {}", file.display()),
        (None, None) => String::new(),
    };
    Ok(client_added(
        config,
        &client_id,
        workload.as_ref(),
        secret.as_ref(),
        &keys,
    ))
}

/// Runs one `gatehouse client …` command; returns what to print.
async fn run_client(
    config: &Config,
    store: &Store,
    command: ClientCommand,
    now: i64,
) -> Result<String, CliError> {
    let out = match command {
        ClientCommand::List => {
            let clients = store.clients().await?;
            listing(
                "CLIENT_ID\tNAME\tKIND\tAUTH\tGRANTS\tCREATED\tSTATUS",
                clients.iter().map(|c| {
                    let kind = if c.service {
                        "service"
                    } else if c.auth_method == "none" {
                        "public"
                    } else {
                        "confidential"
                    };
                    let status = c.revoked_at.map_or_else(
                        || "active".to_string(),
                        |at| format!("revoked {}", timestamp(at)),
                    );
                    [
                        c.client_id.clone(),
                        c.client_name.clone().unwrap_or_else(|| "-".into()),
                        kind.to_string(),
                        c.auth_method.clone(),
                        c.grants.to_string(),
                        timestamp(c.created_at),
                        status,
                    ]
                    .join("\t")
                }),
                "no clients",
            )
        }
        ClientCommand::Revoke { client_id } => {
            use crate::store::oauth::ClientRevocation;
            match store.revoke_client(&client_id, now).await? {
                ClientRevocation::Revoked => {}
                ClientRevocation::AlreadyRevoked => {
                    return Err(CliError(format!("client {client_id} is already revoked")));
                }
                ClientRevocation::NotFound => {
                    return Err(CliError(format!("no client with id {client_id}")));
                }
            }
            store
                .audit(
                    AuditEvent {
                        client_id: Some(&client_id),
                        detail: Some("actor=cli"),
                        ..AuditEvent::new(Event::ClientRevoked, Outcome::Success)
                    },
                    now,
                )
                .await;
            format!("revoked client {client_id} and every grant and token it held")
        }
        ClientCommand::Add(args) => client_add(config, store, args, now).await?,
    };
    Ok(out)
}

/// The id of active account `email` that a new key or URL acts for, after checking it is a
/// member of `project` (when given).
async fn credential_owner(
    store: &Store,
    email: &str,
    project: Option<&str>,
) -> Result<String, CliError> {
    let account_id = find_active_account(store, email).await?;
    if let Some(project_id) = project
        && store.membership(&account_id, project_id).await?.is_none()
    {
        return Err(CliError(format!(
            "{email} is not a member of an active project with id {project_id}"
        )));
    }
    Ok(account_id)
}

/// `gatehouse key revoke` and `gatehouse url revoke`.
async fn revoke_credential(
    store: &Store,
    kind: IssuedCredential,
    id: &str,
    now: i64,
) -> Result<String, CliError> {
    let what = match kind {
        IssuedCredential::ApiKey => "key",
        IssuedCredential::PersonalUrl => kind.label(),
    };
    match credentials::revoke(store, kind, id, None, Actor::Cli, now).await? {
        Revocation::Revoked => Ok(format!("revoked {what} {id}")),
        Revocation::AlreadyRevoked => Err(CliError(format!("{what} {id} is already revoked"))),
        Revocation::NotFound => Err(CliError(format!("no {what} with id {id}"))),
    }
}

/// `gatehouse key create|list|revoke`.
async fn run_key(store: &Store, command: KeyCommand, now: i64) -> Result<String, CliError> {
    match command {
        KeyCommand::Create {
            account,
            project,
            write,
            allow_ip,
            expires,
            name,
            tools,
            deny_tools,
        } => {
            let name = parse_name(name.as_deref().unwrap_or(DEFAULT_NAME))
                .map_err(|e| CliError(e.to_string()))?;
            let tools = crate::domain::principal::ToolFilter::parse(
                tools.as_deref(),
                deny_tools.as_deref(),
            )
            .map_err(CliError)?;
            let lifetime = expires
                .as_deref()
                .map(parse_lifetime)
                .transpose()
                .map_err(|e| CliError(e.to_string()))?;
            if !allow_ip.is_empty() && project.is_none() {
                return Err(CliError(
                    "--allow-ip applies to project keys only: add --project PROJECT_ID".into(),
                ));
            }
            let allowed: Vec<String> = parse_allow_list(&allow_ip)
                .map_err(|e| CliError(e.to_string()))?
                .iter()
                .map(ToString::to_string)
                .collect();
            let account_id = credential_owner(store, &account, project.as_deref()).await?;
            if let Some(full) =
                credentials::room_for(store, IssuedCredential::ApiKey, &account_id, now).await?
            {
                return Err(CliError(full));
            }
            let issued = credentials::issue(
                store,
                &NewCredential {
                    kind: IssuedCredential::ApiKey,
                    account_id: &account_id,
                    project_id: project.as_deref(),
                    name: &name,
                    write,
                    allowed_ips: &allowed,
                    expires_at: lifetime.map(|secs| now + secs),
                    tools: &tools,
                },
                Actor::Cli,
                now,
            )
            .await?;
            let (id, key) = (issued.id, issued.secret);
            Ok(format!(
                "key_id: {id}\nkey: {}\n(the key is shown once; it is stored hashed. Send it to the MCP endpoint as X-Api-Key: KEY or Authorization: Bearer KEY)",
                key.expose()
            ))
        }
        KeyCommand::List { account } => {
            let account_id = account_filter(store, account.as_deref()).await?;
            let keys = store.api_keys(account_id.as_deref()).await?;
            Ok(listing(
                "ID\tACCOUNT\tKIND\tPROJECT\tACCESS\tNAME\tCREATED\tEXPIRES\tLAST_USED\tSTATUS\tALLOWED_IPS\tTOOLS",
                keys.iter().map(|key| key_line(key, now)),
                "no keys",
            ))
        }
        KeyCommand::Revoke { key_id } => {
            revoke_credential(store, IssuedCredential::ApiKey, &key_id, now).await
        }
    }
}

/// Records a change made on the command line: actor `cli` (in the detail), no source
/// address, never a secret.
async fn cli_audit(
    store: &Store,
    event: Event,
    account_id: Option<&str>,
    subject: Option<&str>,
    detail: Option<&str>,
    now: i64,
) {
    let detail = match detail {
        Some(more) => format!("actor=cli {more}"),
        None => "actor=cli".to_string(),
    };
    store
        .audit(
            AuditEvent {
                event,
                outcome: Outcome::Success,
                account_id,
                client_id: None,
                subject,
                source_ip: None,
                detail: Some(&detail),
            },
            now,
        )
        .await;
}

/// A Unix time as `2026-01-31T12:00:00Z`.
fn timestamp(at: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(at)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| at.to_string())
}

/// The text of a `list` command: the header, then one line per record, or `(empty)`.
fn listing(header: &str, lines: impl Iterator<Item = String>, empty: &str) -> String {
    let mut out = String::from(header);
    let mut any = false;
    for line in lines {
        out.push('\n');
        out.push_str(&line);
        any = true;
    }
    if !any {
        out.push_str(&format!("\n({empty})"));
    }
    out
}

/// The account a `list` command's `--account EMAIL` names (`None`: every account).
async fn account_filter(store: &Store, email: Option<&str>) -> Result<Option<String>, CliError> {
    match email {
        Some(email) => Ok(Some(find_account(store, email).await?)),
        None => Ok(None),
    }
}

/// A Unix time as [`timestamp`], or `never`.
fn timestamp_or_never(at: Option<i64>) -> String {
    at.map_or_else(|| "never".to_string(), timestamp)
}

/// One tab-separated line of `gatehouse key list`.
fn key_line(key: &ApiKeyRecord, now: i64) -> String {
    let status = status_label(key.revoked_at, key.expires_at, now);
    let access = access_label(&key.scope);
    let (kind, project) = match &key.project_id {
        Some(p) => ("project", p.as_str()),
        None => ("account", "-"),
    };
    let allowed = if key.allowed_ips.is_empty() {
        "any".to_string()
    } else {
        key.allowed_ips.join(",")
    };
    [
        key.id.clone(),
        key.account_email.clone(),
        kind.to_string(),
        project.to_string(),
        access.to_string(),
        key.name.clone(),
        timestamp(key.created_at),
        timestamp_or_never(key.expires_at),
        timestamp_or_never(key.last_used_at),
        status.to_string(),
        allowed,
        crate::domain::principal::ToolFilter::from_stored(key.tool_filter.as_deref()).describe(),
    ]
    .join("\t")
}

/// The public key set in `path` for `client add --jwks-file`: JSON, a `keys` array of public
/// keys ([`crate::domain::client_assertion::validate_public_jwks`]), at most 64 KiB.
fn read_jwks_file(path: &std::path::Path) -> Result<serde_json::Value, CliError> {
    let shown = path.display();
    let bytes = std::fs::read(path).map_err(|e| CliError(format!("--jwks-file {shown}: {e}")))?;
    if bytes.len() > crate::clients::MAX_JWKS_BYTES {
        return Err(CliError(format!(
            "--jwks-file {shown}: larger than {} bytes",
            crate::clients::MAX_JWKS_BYTES
        )));
    }
    let jwks: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| CliError(format!("--jwks-file {shown}: not JSON ({e})")))?;
    crate::domain::client_assertion::validate_public_jwks(&jwks)
        .map_err(|e| CliError(format!("--jwks-file {shown}: {e}")))?;
    Ok(jwks)
}

/// The id of the active account with this email, for credentials that act for it (a key or
/// service client of a disabled account would not work).
async fn find_active_account(store: &Store, email: &str) -> Result<String, CliError> {
    let email = Email::parse(email).map_err(|e| CliError(format!("invalid email: {e}")))?;
    let account = store
        .account_by_email(&email)
        .await?
        .ok_or_else(|| CliError(format!("no account with email {}", email.as_str())))?;
    if account.status != AccountStatus::Active {
        return Err(CliError(format!(
            "account {} is disabled: credentials acting for it would not work",
            email.as_str()
        )));
    }
    Ok(account.id)
}

/// Reads a password from the first line of standard input, checks the policy and hashes it
/// (argon2id, off the async workers). Errors: unreadable input, a password the policy refuses.
async fn password_from_stdin() -> Result<String, CliError> {
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| CliError(format!("cannot read the password from stdin: {e}")))?;
    let password = line.trim_end_matches(['\r', '\n']).to_string();
    validate_password(&password).map_err(|e| CliError(e.to_string()))?;
    crate::password::hash_password(password)
        .await
        .map_err(|e| CliError(e.to_string()))
}

/// The account with `email`. Errors: an invalid email, no such account.
async fn find_account_record(
    store: &Store,
    email: &str,
) -> Result<crate::store::accounts::Account, CliError> {
    let email = Email::parse(email).map_err(|e| CliError(format!("invalid email: {e}")))?;
    store
        .account_by_email(&email)
        .await?
        .ok_or_else(|| CliError(format!("no account with email {}", email.as_str())))
}

async fn find_account(store: &Store, email: &str) -> Result<String, CliError> {
    let email = Email::parse(email).map_err(|e| CliError(format!("invalid email: {e}")))?;
    match store.account_by_email(&email).await? {
        Some(a) => Ok(a.id),
        None => Err(CliError(format!(
            "no account with email {}",
            email.as_str()
        ))),
    }
}
