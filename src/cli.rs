//! The command line: `serve` (default), `migrate`, `account add|disable`,
//! `project add|add-member`. Every command works on both databases and exits non-zero with one
//! clear message on bad input.

use std::io::BufRead;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::app::open_store;
use crate::config::Config;
use crate::domain::account::{AccountStatus, Email, Role, validate_password};
use crate::domain::secret::{Secret, TokenKind, random_urlsafe};
use crate::domain::text::check_line;
use crate::store::oauth::ClientRecord;
use crate::store::{StoreError, now};

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
    /// Start the server (the default).
    Serve,
    /// Apply database migrations and exit.
    Migrate,
    /// Manage accounts.
    #[command(subcommand)]
    Account(AccountCommand),
    /// Manage projects.
    #[command(subcommand)]
    Project(ProjectCommand),
    /// Manage OAuth clients.
    #[command(subcommand)]
    Client(ClientCommand),
    /// Walk an MCP server's discovery chain as the real clients do and name what breaks.
    Doctor(crate::doctor::DoctorArgs),
}

/// `gatehouse client …`
#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// Create a confidential client (client_secret_basic) for a service; prints its id and
    /// secret once.
    Add {
        /// A name for the service.
        name: String,
        /// Allow it to call the introspection endpoint (RFC 7662).
        #[arg(long)]
        introspect: bool,
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
    let store = open_store(&config.database_url)
        .await
        .map_err(|e| CliError(e.to_string()))?;
    let now = now();
    let out = match command {
        Command::Serve | Command::Doctor(_) => unreachable!("handled by main"),
        Command::Migrate => "migrations applied".to_string(),
        Command::Account(AccountCommand::Add { email, .. }) => {
            let email =
                Email::parse(&email).map_err(|e| CliError(format!("invalid email: {e}")))?;
            let mut line = String::new();
            std::io::stdin()
                .lock()
                .read_line(&mut line)
                .map_err(|e| CliError(format!("cannot read the password from stdin: {e}")))?;
            let password = line.trim_end_matches(['\r', '\n']).to_string();
            validate_password(&password).map_err(|e| CliError(e.to_string()))?;
            let hash = crate::password::hash_password(password)
                .await
                .map_err(|e| CliError(e.to_string()))?;
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
            format!("created account {} ({})", account.email, account.id)
        }
        Command::Account(AccountCommand::Disable { email }) => {
            let email =
                Email::parse(&email).map_err(|e| CliError(format!("invalid email: {e}")))?;
            let account = find_account(&store, email.as_str()).await?;
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
            format!("disabled account {}", email.as_str())
        }
        Command::Project(ProjectCommand::Add { name, owner }) => {
            let name = name.trim();
            if name.is_empty() || name.chars().count() > 200 {
                return Err(CliError(
                    "project name must be 1 to 200 characters".to_string(),
                ));
            }
            check_line(name).map_err(|e| CliError(format!("project name {e}")))?;
            let account = find_account(&store, &owner).await?;
            store.create_project(name, &account, now).await?
        }
        Command::Project(ProjectCommand::AddMember {
            project_id,
            email,
            role,
        }) => {
            let role: Role = role
                .parse()
                .map_err(|_| CliError(format!("invalid role \"{role}\": use read or write")))?;
            let account = find_account(&store, &email).await?;
            store
                .add_member(&project_id, &account, role, now)
                .await
                .map_err(|e| match e {
                    StoreError::NotFound(_) => CliError(format!("no project with id {project_id}")),
                    other => other.into(),
                })?;
            format!("{email} is now a {} member of {project_id}", role.as_str())
        }
        Command::Client(ClientCommand::Add { name, introspect }) => {
            let name = name.trim();
            if name.is_empty() || name.chars().count() > 200 {
                return Err(CliError(
                    "client name must be 1 to 200 characters".to_string(),
                ));
            }
            check_line(name).map_err(|e| CliError(format!("client name {e}")))?;
            let client_id = format!("gc_{}", random_urlsafe(18));
            let secret = Secret::generate(TokenKind::ClientSecret);
            store
                .create_client(&ClientRecord {
                    client_id: client_id.clone(),
                    client_secret_hash: Some(secret.hash()),
                    auth_method: "client_secret_basic".into(),
                    client_name: Some(name.to_string()),
                    redirect_uris: Vec::new(),
                    grant_types: Vec::new(),
                    scope: None,
                    metadata: serde_json::json!({"client_name": name}),
                    can_introspect: introspect,
                    created_at: now,
                })
                .await?;
            format!(
                "client_id: {client_id}\nclient_secret: {}\n(the secret is shown once; it is stored hashed)",
                secret.expose()
            )
        }
    };
    store.close().await;
    Ok(out)
}

async fn find_account(store: &crate::store::Store, email: &str) -> Result<String, CliError> {
    let email = Email::parse(email).map_err(|e| CliError(format!("invalid email: {e}")))?;
    match store.account_by_email(&email).await? {
        Some(a) => Ok(a.id),
        None => Err(CliError(format!(
            "no account with email {}",
            email.as_str()
        ))),
    }
}
