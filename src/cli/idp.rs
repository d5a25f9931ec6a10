//! `gatehouse idp add|list|remove`: the registry of trusted identity providers (README "Sign in
//! with your organisation's identity provider"). A provider signs people in with OpenID Connect
//! (`--client-id` and `--client-secret-stdin`), is trusted for the assertions it signs
//! (`--jwks-uri` and `--assertions`), or both. Stored in the database, so a change reaches every
//! instance at once; the client secret is sealed with the server key and never printed.

use std::io::BufRead;

use clap::{Args, Subcommand};

use super::{CliError, cli_audit};
use crate::config::Config;
use crate::domain::audit::Event;
use crate::domain::idp::{
    ProviderName, callback_url, client_secret_context, parse_display_name, parse_domains,
    parse_issuer, parse_jwks_uri,
};
use crate::store::idps::IdentityProvider;
use crate::store::{Store, StoreError};

/// `gatehouse idp …`
#[derive(Debug, Subcommand)]
pub enum IdpCommand {
    /// Trust an identity provider: for sign-in (OpenID Connect, --client-id with
    /// --client-secret-stdin), for assertions it signs (--jwks-uri with --assertions), or both.
    Add(AddArgs),
    /// List the providers (never a client secret).
    List,
    /// Stop trusting a provider: its sign-in button goes, its links to accounts are removed
    /// (the accounts stay), its assertions are refused.
    Remove {
        /// The provider's name.
        name: String,
    },
}

/// `gatehouse idp add`.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// The provider's name, `[a-z0-9-]{1,20}`: sign-in starts at /signin/idp/NAME.
    pub name: String,
    /// The provider's issuer URL (https; plain http only on a loopback address).
    #[arg(long, value_name = "URL")]
    pub issuer: String,
    /// Sign-in: the client id registered at the provider, whose redirect URI is
    /// ISSUER/signin/idp/NAME/callback.
    #[arg(long, value_name = "ID")]
    pub client_id: Option<String>,
    /// Sign-in: read the client secret from the first line of standard input (sealed with the
    /// server key; never shown).
    #[arg(long)]
    pub client_secret_stdin: bool,
    /// Sign-in: the words on the sign-in button (default: the name).
    #[arg(long, value_name = "TEXT")]
    pub display_name: Option<String>,
    /// Only people whose email is in these domains (comma-separated) may sign in or be linked
    /// through this provider; without it, any domain the provider vouches for.
    #[arg(long, value_name = "DOMAINS")]
    pub domains: Option<String>,
    /// Sign-in: a first sign-in whose verified email has no account makes one (needs
    /// --domains).
    #[arg(long)]
    pub create_accounts: bool,
    /// Assertions: the provider's key set (https; plain http only on a loopback address).
    #[arg(long, value_name = "URL")]
    pub jwks_uri: Option<String>,
    /// Trust the provider's identity assertions (ID-JAG, redeemed with the JWT-bearer grant).
    #[arg(long)]
    pub assertions: bool,
}

/// Runs one `gatehouse idp` command; returns what to print.
pub(super) async fn run(
    config: &Config,
    store: &Store,
    command: IdpCommand,
    now: i64,
) -> Result<String, CliError> {
    match command {
        IdpCommand::Add(args) => add(config, store, args, now).await,
        IdpCommand::List => list(store).await,
        IdpCommand::Remove { name } => {
            let name = ProviderName::parse(&name).map_err(|e| CliError(e.0))?;
            store
                .remove_identity_provider(name.as_str())
                .await
                .map_err(|e| match e {
                    StoreError::NotFound(_) => {
                        CliError(format!("no identity provider named {name}"))
                    }
                    other => other.into(),
                })?;
            cli_audit(
                store,
                Event::IdpRemoved,
                None,
                Some(name.as_str()),
                None,
                now,
            )
            .await;
            Ok(format!("removed identity provider {name}"))
        }
    }
}

/// Reads the client secret: the first line of standard input, without its line end.
fn read_secret() -> Result<String, CliError> {
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| CliError(format!("cannot read the client secret from stdin: {e}")))?;
    let secret = line.trim_end_matches(['\r', '\n']).to_string();
    if secret.is_empty() {
        return Err(CliError(
            "--client-secret-stdin: standard input held no secret".to_string(),
        ));
    }
    Ok(secret)
}

/// `gatehouse idp add`: the provider read from `args` is stored (a name in use is refused),
/// audited as `idp_added` and described, with the redirect URI to register at the provider
/// when it signs people in.
async fn add(config: &Config, store: &Store, args: AddArgs, now: i64) -> Result<String, CliError> {
    let (name, provider) = provider_from_args(config, &args, now)?;
    store
        .create_identity_provider(&provider)
        .await
        .map_err(|e| match e {
            StoreError::Conflict(_) => CliError(format!(
                "an identity provider named {name} exists; remove it first to change it"
            )),
            other => other.into(),
        })?;
    let uses = uses(&provider);
    cli_audit(
        store,
        Event::IdpAdded,
        None,
        Some(name.as_str()),
        Some(&format!("uses={uses}")),
        now,
    )
    .await;
    let mut out = format!(
        "added identity provider {name} ({uses}, issuer {})",
        provider.issuer
    );
    if provider.signs_in() {
        out.push_str(&format!(
            "\nregister this redirect URI at the provider: {}",
            callback_url(&config.issuer, name.as_str())
        ));
    }
    Ok(out)
}

/// The provider `gatehouse idp add` describes in `args`, created at `now`: its name and
/// its record, the client secret (with `--client-secret-stdin`) read from standard input
/// and sealed with the server key. Errors: a value that does not parse, options that do
/// not go together ([`check_option_pairs`]), `--create-accounts` without `--domains`, a
/// secret that cannot be read or sealed.
fn provider_from_args(
    config: &Config,
    args: &AddArgs,
    now: i64,
) -> Result<(ProviderName, IdentityProvider), CliError> {
    let err = |e: crate::domain::idp::IdpInputError| CliError(e.0);
    let name = ProviderName::parse(&args.name).map_err(err)?;
    let issuer = parse_issuer(&args.issuer).map_err(err)?;
    check_option_pairs(args)?;
    let client_id = match &args.client_id {
        Some(id) if id.trim().is_empty() || id.chars().any(char::is_control) => {
            return Err(CliError("--client-id must be one line of text".to_string()));
        }
        other => other.clone(),
    };
    let domains = args
        .domains
        .as_deref()
        .map(parse_domains)
        .transpose()
        .map_err(err)?;
    if args.create_accounts && domains.is_none() {
        return Err(CliError(
            "--create-accounts needs --domains (the email domains whose people may get an account)"
                .to_string(),
        ));
    }
    let display_name = args
        .display_name
        .as_deref()
        .map(parse_display_name)
        .transpose()
        .map_err(err)?;
    let jwks_uri = args
        .jwks_uri
        .as_deref()
        .map(parse_jwks_uri)
        .transpose()
        .map_err(err)?;
    let client_secret_sealed = if args.client_secret_stdin {
        let secret = read_secret()?;
        let keys = super::secret_key::keyring(config)?;
        Some(keys.seal(&client_secret_context(&name), secret.as_bytes()))
    } else {
        None
    };
    let provider = IdentityProvider {
        name: name.as_str().to_string(),
        issuer: issuer.as_str().to_string(),
        display_name,
        client_id,
        client_secret_sealed,
        domains,
        create_accounts: args.create_accounts,
        jwks_uri: jwks_uri.map(String::from),
        assertions: args.assertions,
        created_at: now,
    };
    // Url keeps a lone "/" path; an issuer given without one is compared without it.
    let provider = IdentityProvider {
        issuer: if args.issuer.trim().ends_with('/') {
            provider.issuer
        } else {
            provider.issuer.trim_end_matches('/').to_string()
        },
        ..provider
    };
    Ok((name, provider))
}

/// Checks that the options of `gatehouse idp add` go together: sign-in (`--client-id`) or
/// assertions (`--assertions`) or both; `--client-secret-stdin`, `--display-name` and
/// `--create-accounts` only with `--client-id`; `--assertions` with `--jwks-uri`. Errors: the
/// first combination that does not.
fn check_option_pairs(args: &AddArgs) -> Result<(), CliError> {
    let signs_in = args.client_id.is_some();
    if !signs_in && !args.assertions {
        return Err(CliError(
            "give --client-id (sign-in) or --jwks-uri with --assertions (assertions), or both"
                .to_string(),
        ));
    }
    if args.client_secret_stdin && !signs_in {
        return Err(CliError(
            "--client-secret-stdin goes with --client-id".to_string(),
        ));
    }
    if !signs_in && (args.display_name.is_some() || args.create_accounts) {
        return Err(CliError(
            "--display-name and --create-accounts go with --client-id".to_string(),
        ));
    }
    if args.assertions != args.jwks_uri.is_some() {
        return Err(CliError(
            "--assertions and --jwks-uri go together".to_string(),
        ));
    }
    Ok(())
}

/// `signin`, `assertions` or `signin+assertions`.
fn uses(p: &IdentityProvider) -> &'static str {
    match (p.signs_in(), p.assertions) {
        (true, true) => "signin+assertions",
        (true, false) => "signin",
        _ => "assertions",
    }
}

async fn list(store: &Store) -> Result<String, CliError> {
    let providers = store.identity_providers().await?;
    if providers.is_empty() {
        return Ok(
            "no identity providers (add one with: gatehouse idp add NAME --issuer URL …)"
                .to_string(),
        );
    }
    let links = store.identity_link_counts().await?;
    let mut out = String::new();
    for p in &providers {
        let linked = links
            .iter()
            .find(|(n, _)| *n == p.name)
            .map_or(0, |(_, n)| *n);
        let mut line = format!("{}  {}  {}", p.name, uses(p), p.issuer);
        if let Some(id) = &p.client_id {
            line.push_str(&format!("  client_id={id}"));
            line.push_str(if p.client_secret_sealed.is_some() {
                "  secret=set"
            } else {
                "  secret=none"
            });
            line.push_str(&format!("  button=\"{}\"", p.label()));
        }
        match &p.domains {
            Some(d) => line.push_str(&format!("  domains={}", d.join(","))),
            None => line.push_str("  domains=any"),
        }
        if p.create_accounts {
            line.push_str("  create-accounts");
        }
        if let Some(uri) = &p.jwks_uri {
            line.push_str(&format!("  jwks_uri={uri}"));
        }
        line.push_str(&format!("  linked={linked}"));
        out.push_str(&line);
        out.push('\n');
    }
    out.truncate(out.trim_end().len());
    Ok(out)
}
