//! `gatehouse upstream add|list|approve|allow-destructive|disable|enable|remove`: the registry of upstream MCP
//! servers whose tools Gatehouse serves behind its own authorization (README "Put your MCP
//! servers behind Gatehouse"). Every change raises the registry's version, which running
//! instances poll, so it reaches them without a restart. Header and `--env` values are sealed
//! with the server key and never printed.

use clap::{Args, Subcommand};

use super::secret_key::keyring;
use super::{CliError, cli_audit};
use crate::config::Config;
use crate::domain::audit::Event;
use crate::domain::server_key::Keyring;
use crate::domain::upstream::{
    DEFAULT_MAX_CONCURRENCY, UpstreamName, check_max_concurrency, parse_command, parse_env,
    parse_headers, parse_timeout, parse_url, seal_context,
};
use crate::store::upstreams::{NewUpstream, Transport, UpstreamRecord};
use crate::store::{Store, StoreError};

/// `gatehouse upstream …`
#[derive(Debug, Subcommand)]
pub enum UpstreamCommand {
    /// Register an upstream MCP server: Streamable HTTP with --url, or a local stdio server
    /// run as a child process with --command. Its tools are listed as `NAME__TOOL` once their
    /// definitions are approved (`upstream approve NAME`).
    Add(Box<AddArgs>),
    /// List the upstreams: transport, target, status, tool counts, pending definitions and the
    /// last error (never a header or --env value).
    List,
    /// Approve the upstream's tool definitions as last seen (new and changed ones).
    Approve {
        /// The upstream's name.
        name: String,
    },
    /// Allow one destructive tool of an upstream (annotated `destructiveHint: true`, or not
    /// annotated): it is listed once approved, and each call asks the person to confirm through
    /// MCP elicitation; a client without elicitation gets an error result instead.
    AllowDestructive {
        /// The upstream's name.
        name: String,
        /// The upstream's own name for the tool (without `NAME__`).
        tool: String,
        /// Stop allowing it (hidden again).
        #[arg(long)]
        revoke: bool,
    },
    /// Stop serving an upstream (its tools leave the catalog on every instance).
    Disable {
        /// The upstream's name.
        name: String,
    },
    /// Serve a disabled upstream again.
    Enable {
        /// The upstream's name.
        name: String,
    },
    /// Remove an upstream and the definitions seen on it.
    Remove {
        /// The upstream's name.
        name: String,
    },
}

/// `gatehouse upstream add`.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// The upstream's name, `[a-z0-9-]{1,20}`: its tools are listed as `NAME__TOOL`.
    pub name: String,
    /// The upstream's Streamable HTTP endpoint (http:// or https://).
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// A header sent with every request to the upstream, e.g. 'Authorization: Bearer …'
    /// (repeatable); the value is sealed with the server key and never shown.
    #[arg(long = "header", value_name = "'NAME: VALUE'")]
    pub header: Vec<String>,
    /// A local stdio MCP server to run, e.g. 'npx -y @modelcontextprotocol/server-memory'
    /// (split like a shell's words, run without a shell).
    #[arg(long, value_name = "'PROGRAM ARGS…'")]
    pub command: Option<String>,
    /// A variable of the child's environment, which otherwise holds only PATH (repeatable);
    /// the value is sealed with the server key and never shown.
    #[arg(long = "env", value_name = "NAME=VALUE")]
    pub env: Vec<String>,
    /// Per-call timeout: ms, s or m, from 1s to 600s.
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub timeout: String,
    /// Calls in flight to this upstream per instance; more are answered "busy, retry".
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONCURRENCY)]
    pub max_concurrency: u32,
    /// List the upstream's tool definitions without approval (for development: a changed
    /// definition is then served at once).
    #[arg(long)]
    pub trust_definitions: bool,
    /// Only these accounts may use the upstream (comma-separated emails); with neither this
    /// nor --projects, every account may.
    #[arg(long, value_name = "EMAILS")]
    pub accounts: Option<String>,
    /// Members of these projects may use the upstream (comma-separated project ids), through
    /// credentials that reach the project.
    #[arg(long, value_name = "PROJECT_IDS")]
    pub projects: Option<String>,
    /// Each person connects their own account at the upstream (its OAuth authorization
    /// server, found from its 401 challenge and metadata); Gatehouse keeps their tokens and
    /// calls the upstream with them. Needs --url, no --header.
    #[arg(long)]
    pub per_person_oauth: bool,
    /// With --per-person-oauth: a client registered beforehand at the upstream's
    /// authorization server (otherwise Gatehouse registers itself there).
    #[arg(long, value_name = "ID")]
    pub client_id: Option<String>,
    /// With --client-id: read its client secret from the first line of standard input.
    #[arg(long)]
    pub client_secret_stdin: bool,
    /// With --per-person-oauth: the scope to ask people for (default: what the upstream's
    /// challenge names, with `offline_access` when offered).
    #[arg(long, value_name = "SCOPE")]
    pub scope: Option<String>,
}

/// The non-empty items of a comma-separated list.
fn items(list: &str) -> Vec<&str> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// Runs one `gatehouse upstream` command; returns what to print.
pub(super) async fn run(
    config: &Config,
    store: &Store,
    command: UpstreamCommand,
    now: i64,
) -> Result<String, CliError> {
    match command {
        UpstreamCommand::Add(args) => add(config, store, *args, now).await,
        UpstreamCommand::List => Ok(list(
            &store.upstreams().await?,
            &store.upstream_oauths().await?,
        )),
        UpstreamCommand::Approve { name } => {
            let name = parse_name(&name)?;
            let approved = store
                .approve_upstream_tools(name.as_str(), now)
                .await
                .map_err(|e| not_found(e, &name))?;
            cli_audit(
                store,
                Event::UpstreamApproved,
                None,
                Some(name.as_str()),
                Some(&format!("tools={approved}")),
                now,
            )
            .await;
            Ok(match approved {
                0 => format!("upstream {name}: no definition was waiting for approval"),
                1 => format!("upstream {name}: 1 tool definition approved"),
                n => format!("upstream {name}: {n} tool definitions approved"),
            })
        }
        UpstreamCommand::AllowDestructive { name, tool, revoke } => {
            allow_destructive(store, &name, &tool, !revoke, now).await
        }
        UpstreamCommand::Disable { name } => set_enabled(store, &name, false, now).await,
        UpstreamCommand::Enable { name } => set_enabled(store, &name, true, now).await,
        UpstreamCommand::Remove { name } => {
            let name = parse_name(&name)?;
            store
                .remove_upstream(name.as_str())
                .await
                .map_err(|e| not_found(e, &name))?;
            cli_audit(
                store,
                Event::UpstreamRemoved,
                None,
                Some(name.as_str()),
                None,
                now,
            )
            .await;
            Ok(format!("removed upstream {name}"))
        }
    }
}

fn parse_name(text: &str) -> Result<UpstreamName, CliError> {
    UpstreamName::parse(text).map_err(|e| CliError(e.0))
}

fn not_found(e: StoreError, name: &UpstreamName) -> CliError {
    match e {
        StoreError::NotFound(_) => CliError(format!("no upstream named {name}")),
        other => other.into(),
    }
}

/// How long `upstream add` waits for the new upstream's listing before leaving it to the
/// running servers.
const ADD_LISTING_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Connects to the upstream just added, as a running server would, lists its tools and
/// records each definition as pending ([`crate::store::Store::record_upstream_tools`]), so
/// that `upstream approve` has them at once. A stdio upstream's child is started for the
/// listing and stopped after it. Returns how many definitions were recorded, and how many of
/// them are destructive (listed only once allowed by name).
///
/// Errors: the upstream's failure in plain words (not reachable, no answer in time, an HTTP
/// status, its own error); the upstream stays added.
async fn record_definitions(
    config: &Config,
    store: &Store,
    name: &UpstreamName,
) -> Result<(usize, usize), String> {
    let record = match store.upstream(name.as_str()).await {
        Ok(Some(record)) => record,
        Ok(None) => return Err("it was removed meanwhile".into()),
        Err(e) => return Err(e.to_string()),
    };
    let server_keys = config
        .server_key
        .load()
        .ok()
        .flatten()
        .map(std::sync::Arc::new);
    let app = crate::app::command_state(config.clone(), store.clone(), server_keys);
    let record_is_stdio = record.transport == Transport::Stdio;
    let server = std::sync::Arc::new(
        crate::mcp::upstream::server::UpstreamServer::new(app, record).map_err(|e| e.0)?,
    );
    let listed = match tokio::time::timeout(ADD_LISTING_TIMEOUT, server.tools()).await {
        Ok(listed) => listed.map_err(|e| e.0),
        Err(_) => Err(format!(
            "no answer within {} s",
            ADD_LISTING_TIMEOUT.as_secs()
        )),
    };
    server.stop().await;
    drop(server);
    if record_is_stdio {
        // The child of this listing is gone (killed with its handle); its folder, made for
        // this command alone, goes too.
        let _ = std::fs::remove_dir_all(crate::mcp::upstream::stdio::working_folder(name.as_str()));
    }
    let listed = listed?;
    Ok((
        listed.len(),
        listed.iter().filter(|t| t.destructive).count(),
    ))
}

/// Seals `pairs` (name, value) as a JSON array of pairs for `name`'s `what`.
fn seal_pairs(
    keys: &Keyring,
    name: &UpstreamName,
    what: &str,
    pairs: &[(String, String)],
) -> String {
    let plain = serde_json::to_vec(pairs).unwrap_or_default();
    keys.seal(&seal_context(name, what), &plain)
}

async fn add(config: &Config, store: &Store, args: AddArgs, now: i64) -> Result<String, CliError> {
    let err = |e: crate::domain::upstream::UpstreamInputError| CliError(e.0);
    let name = UpstreamName::parse(&args.name).map_err(err)?;
    check_flags(&args)?;
    let timeout = parse_timeout(&args.timeout).map_err(err)?;
    let max_concurrency = check_max_concurrency(args.max_concurrency).map_err(err)?;
    let mut new = NewUpstream {
        name: name.as_str().to_string(),
        transport: Transport::Http,
        url: None,
        header_names: Vec::new(),
        headers_sealed: None,
        command: Vec::new(),
        env_names: Vec::new(),
        env_sealed: None,
        timeout_ms: i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX),
        max_concurrency: i64::from(max_concurrency),
        trust_definitions: args.trust_definitions,
        accounts: None,
        projects: None,
    };
    (new.accounts, new.projects) = who_may_use(store, &args).await?;
    let target = match (&args.url, &args.command) {
        (Some(url), None) => {
            let url = parse_url(url).map_err(err)?;
            let headers = parse_headers(&args.header).map_err(err)?;
            if !headers.is_empty() {
                let keys = keyring(config)?;
                let pairs: Vec<(String, String)> = headers
                    .iter()
                    .map(|h| (h.name.clone(), h.value.clone()))
                    .collect();
                new.headers_sealed = Some(seal_pairs(&keys, &name, "headers", &pairs));
                new.header_names = headers.into_iter().map(|h| h.name).collect();
            }
            new.url = Some(url.to_string());
            url.to_string()
        }
        (None, Some(command)) => {
            let words = parse_command(command).map_err(err)?;
            find_program(&words[0], std::env::var_os("PATH").as_deref()).map_err(CliError)?;
            let env = parse_env(&args.env).map_err(err)?;
            if !env.is_empty() {
                let keys = keyring(config)?;
                let pairs: Vec<(String, String)> = env
                    .iter()
                    .map(|p| (p.name.clone(), p.value.clone()))
                    .collect();
                new.env_sealed = Some(seal_pairs(&keys, &name, "env", &pairs));
                new.env_names = env.into_iter().map(|p| p.name).collect();
            }
            new.transport = Transport::Stdio;
            new.command = words;
            crate::domain::upstream::command_line(&new.command)
        }
        _ => {
            return Err(CliError(
                "give either --url (Streamable HTTP) or --command (stdio)".to_string(),
            ));
        }
    };
    if args.per_person_oauth {
        let per_person = super::upstream_per_person::PerPersonArgs {
            client_id: args.client_id,
            client_secret_stdin: args.client_secret_stdin,
            scope: args.scope,
        };
        return super::upstream_per_person::add(config, store, &name, new, per_person, now).await;
    }
    store
        .create_upstream(&new, now)
        .await
        .map_err(|e| match e {
            StoreError::Conflict(_) => CliError(format!(
                "an upstream named {name} exists; remove it first to change it"
            )),
            other => other.into(),
        })?;
    cli_audit(
        store,
        Event::UpstreamAdded,
        None,
        Some(name.as_str()),
        Some(&format!("transport={}", new.transport.as_str())),
        now,
    )
    .await;
    let approval = approval(config, store, &name, new.trust_definitions).await;
    Ok(format!(
        "added upstream {name} ({} {target}); {approval}",
        new.transport.as_str()
    ))
}

/// Where `program` (the first word of `--command`) would be run from: an absolute path to an
/// executable file, or a name found as one in `path` (`PATH`'s folders, in order), as the
/// child is started ([`crate::mcp::upstream::stdio`]: it gets the same `PATH`).
///
/// Errors, one line each: a relative path (the child runs in a working folder of its own,
/// so `./server` would not be found there), a path that is not an executable file, a name
/// found in no folder of `PATH`.
fn find_program(
    program: &str,
    path: Option<&std::ffi::OsStr>,
) -> Result<std::path::PathBuf, String> {
    use std::os::unix::fs::PermissionsExt as _;
    let executable = |candidate: &std::path::Path| {
        std::fs::metadata(candidate)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let candidate = std::path::Path::new(program);
        if !candidate.is_absolute() {
            return Err(format!(
                "invalid --command: the program {program} is a relative path, but the server runs it in a working folder of its own; give its absolute path or a name found in PATH"
            ));
        }
        return if executable(candidate) {
            Ok(candidate.to_path_buf())
        } else if candidate.exists() {
            Err(format!(
                "invalid --command: {program} is not an executable file"
            ))
        } else {
            Err(format!("invalid --command: {program} does not exist"))
        };
    }
    path.into_iter()
        .flat_map(std::env::split_paths)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| executable(candidate))
        .ok_or_else(|| {
            format!(
                "invalid --command: no program named {program} in PATH; install it, or give its absolute path"
            )
        })
}

/// The flags of `upstream add` that go together, checked here rather than by the argument
/// parser, so that every mistake is one line and exit status 1.
fn check_flags(args: &AddArgs) -> Result<(), CliError> {
    if args.url.is_some() == args.command.is_some() {
        return Err(CliError(
            "give either --url (Streamable HTTP) or --command (stdio)".to_string(),
        ));
    }
    if args.url.is_none() && !args.header.is_empty() {
        return Err(CliError("--header goes with --url".to_string()));
    }
    if args.command.is_none() && !args.env.is_empty() {
        return Err(CliError("--env goes with --command".to_string()));
    }
    if args.per_person_oauth && (args.url.is_none() || !args.header.is_empty()) {
        return Err(CliError(
            "--per-person-oauth goes with --url and without --header (each person's own token is sent)"
                .to_string(),
        ));
    }
    if !args.per_person_oauth
        && (args.client_id.is_some() || args.client_secret_stdin || args.scope.is_some())
    {
        return Err(CliError(
            "--client-id, --client-secret-stdin and --scope go with --per-person-oauth".to_string(),
        ));
    }
    Ok(())
}

/// Who may use the upstream (`--accounts`, `--projects`): the accounts' and projects' ids,
/// `None` for everyone.
async fn who_may_use(
    store: &Store,
    args: &AddArgs,
) -> Result<(Option<Vec<String>>, Option<Vec<String>>), CliError> {
    let (mut accounts, mut projects) = (None, None);
    if let Some(list) = &args.accounts {
        let mut ids = Vec::new();
        for email in items(list) {
            ids.push(super::find_account(store, email).await?);
        }
        if ids.is_empty() {
            return Err(CliError("--accounts names no account".to_string()));
        }
        accounts = Some(ids);
    }
    if let Some(list) = &args.projects {
        let mut ids = Vec::new();
        for id in items(list) {
            if store.project_owner(id).await?.is_none() {
                return Err(CliError(format!("no project with id {id}")));
            }
            ids.push(id.to_string());
        }
        if ids.is_empty() {
            return Err(CliError("--projects names no project".to_string()));
        }
        projects = Some(ids);
    }
    Ok((accounts, projects))
}

/// What `upstream add` says of the approval of the new upstream `name`'s definitions, having
/// recorded them (unless `trusted`).
async fn approval(config: &Config, store: &Store, name: &UpstreamName, trusted: bool) -> String {
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    if trusted {
        let trusted = "its tool definitions are trusted without approval";
        match record_definitions(config, store, name).await {
            Ok((0, _)) => format!("{trusted}; it lists no tools now"),
            Ok((n, 0)) => format!("{trusted}; it lists {n} tool{}", plural(n)),
            Ok((n, destructive)) => format!(
                "{trusted}; it lists {n} tool{}, {destructive} of them destructive, which clients see once allowed: gatehouse upstream allow-destructive {name} TOOL",
                plural(n)
            ),
            Err(why) => format!("{trusted}; it could not be listed now ({why})"),
        }
    } else {
        match record_definitions(config, store, name).await {
            Ok((0, _)) => format!(
                "it lists no tools now; tools it lists later reach clients once approved: gatehouse upstream approve {name}"
            ),
            Ok((n, _)) => format!(
                "{n} tool definition{} recorded; clients see them once approved: gatehouse upstream approve {name} (or on the console's Upstreams page)",
                plural(n)
            ),
            Err(why) => format!(
                "it could not be listed now ({why}); its definitions are recorded when a running server first lists it, and approved then with gatehouse upstream approve {name}"
            ),
        }
    }
}

async fn allow_destructive(
    store: &Store,
    name: &str,
    tool: &str,
    allowed: bool,
    now: i64,
) -> Result<String, CliError> {
    let name = parse_name(name)?;
    let tool = tool.strip_prefix(&format!("{name}__")).unwrap_or(tool);
    if store.upstream(name.as_str()).await?.is_none() {
        return Err(CliError(format!("no upstream named {name}")));
    }
    // Only a destructive tool needs (and takes) the allowance: one annotated read-only or not
    // destructive is listed once approved, and no call of it is confirmed.
    if allowed && let Some(definition) = store.upstream_tool_definition(name.as_str(), tool).await?
    {
        let annotations = serde_json::from_str::<serde_json::Value>(&definition)
            .map(|v| v["annotations"].clone())
            .unwrap_or_default();
        let destructive = crate::domain::upstream::is_destructive(
            annotations["readOnlyHint"].as_bool(),
            annotations["destructiveHint"].as_bool(),
        );
        if !destructive {
            return Err(CliError(format!(
                "upstream {name}: tool {} is not destructive (annotated readOnlyHint: true or destructiveHint: false); it is listed once approved and its calls are not confirmed, so there is nothing to allow",
                tool.escape_debug()
            )));
        }
    }
    let changed = store
        .set_upstream_tool_destructive(name.as_str(), tool, allowed, now)
        .await
        .map_err(|e| match e {
            StoreError::NotFound(_) => CliError(format!(
                "upstream {name} has no tool named {} seen yet (its tools are recorded the first time Gatehouse lists them)",
                tool.escape_debug()
            )),
            other => other.into(),
        })?;
    if changed {
        cli_audit(
            store,
            if allowed {
                Event::UpstreamDestructiveAllowed
            } else {
                Event::UpstreamDestructiveRevoked
            },
            None,
            Some(name.as_str()),
            Some(&format!("tool={tool}")),
            now,
        )
        .await;
    }
    Ok(match (allowed, changed) {
        (true, true) => format!(
            "upstream {name}: destructive tool {tool} allowed; it is listed once approved and each call asks the person to confirm"
        ),
        (true, false) => format!("upstream {name}: destructive tool {tool} was already allowed"),
        (false, true) => format!("upstream {name}: destructive tool {tool} no longer allowed"),
        (false, false) => format!("upstream {name}: destructive tool {tool} was not allowed"),
    })
}

async fn set_enabled(
    store: &Store,
    name: &str,
    enabled: bool,
    now: i64,
) -> Result<String, CliError> {
    let name = parse_name(name)?;
    let changed = store
        .set_upstream_enabled(name.as_str(), enabled, now)
        .await
        .map_err(|e| not_found(e, &name))?;
    let word = if enabled { "enabled" } else { "disabled" };
    if changed {
        cli_audit(
            store,
            if enabled {
                Event::UpstreamEnabled
            } else {
                Event::UpstreamDisabled
            },
            None,
            Some(name.as_str()),
            None,
            now,
        )
        .await;
        Ok(format!("upstream {name} {word}"))
    } else {
        Ok(format!("upstream {name} was already {word}"))
    }
}

/// The listing: one line per upstream, then its last error indented, if any.
fn list(all: &[UpstreamRecord], oauths: &[crate::store::vault::UpstreamOAuth]) -> String {
    // People's own upstreams are theirs (the Connections page); only their number shows here.
    let personal = all.iter().filter(|u| u.owner.is_some()).count();
    let upstreams: Vec<&UpstreamRecord> = all.iter().filter(|u| u.owner.is_none()).collect();
    let mut out = String::new();
    if upstreams.is_empty() {
        out.push_str("no upstreams (add one with: gatehouse upstream add NAME --url URL)");
        if personal > 0 {
            out.push_str(&format!(
                "\n{personal} upstreams of people's own (Connections page)"
            ));
        }
        return out;
    }
    for u in upstreams {
        let target = u.target();
        let status = if !u.enabled {
            "disabled"
        } else if u.last_error.is_some() {
            "unreachable"
        } else {
            "enabled"
        };
        let mut line = format!(
            "{}  {}  {target}  {status}  tools={} pending={}  timeout={}ms max-concurrency={}",
            u.name,
            u.transport.as_str(),
            if u.trust_definitions {
                u.tools_seen
            } else {
                u.tools_approved
            },
            if u.trust_definitions {
                0
            } else {
                u.tools_pending()
            },
            u.timeout_ms,
            u.max_concurrency,
        );
        if !u.header_names.is_empty() {
            line.push_str(&format!("  headers={}", u.header_names.join(",")));
        }
        if !u.env_names.is_empty() {
            line.push_str(&format!("  env={}", u.env_names.join(",")));
        }
        if u.trust_definitions {
            line.push_str("  trust-definitions");
        }
        if let Some(accounts) = &u.accounts {
            line.push_str(&format!("  accounts={}", accounts.len()));
        }
        if let Some(projects) = &u.projects {
            line.push_str(&format!("  projects={}", projects.join(",")));
        }
        if let Some(oauth) = oauths.iter().find(|o| o.upstream == u.name) {
            line.push_str(&super::upstream_per_person::describe(oauth));
        }
        out.push_str(&line);
        out.push('\n');
        if let Some((error, at)) = &u.last_error {
            out.push_str(&format!(
                "    last error (since {}): {error}\n",
                super::timestamp(*at)
            ));
        }
    }
    if personal > 0 {
        out.push_str(&format!(
            "{personal} upstreams of people's own (Connections page)\n"
        ));
    }
    out.truncate(out.trim_end().len());
    out
}

#[cfg(test)]
mod tests {
    use super::find_program;

    #[test]
    fn a_stdio_program_must_be_found_as_the_server_would_run_it() {
        use std::os::unix::fs::PermissionsExt as _;
        let bin = tempfile::tempdir().unwrap();
        let server = bin.path().join("mcp-server");
        std::fs::write(&server, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&server, std::fs::Permissions::from_mode(0o755)).unwrap();
        let plain = bin.path().join("notes.txt");
        std::fs::write(&plain, "").unwrap();
        let path = std::env::join_paths(["/nonexistent", bin.path().to_str().unwrap()]).unwrap();

        assert_eq!(find_program("mcp-server", Some(&path)).unwrap(), server);
        assert_eq!(
            find_program(server.to_str().unwrap(), None).unwrap(),
            server
        );
        let missing = find_program("mcp-missing", Some(&path)).unwrap_err();
        assert!(
            missing.contains("no program named mcp-missing in PATH"),
            "{missing}"
        );
        assert!(find_program("mcp-server", None).is_err(), "no PATH at all");
        assert!(
            find_program("notes.txt", Some(&path)).is_err(),
            "not executable"
        );
        let plain = find_program(plain.to_str().unwrap(), None).unwrap_err();
        assert!(plain.ends_with("is not an executable file"), "{plain}");
        let gone = find_program("/nonexistent/mcp-server", None).unwrap_err();
        assert!(
            gone.ends_with("/nonexistent/mcp-server does not exist"),
            "{gone}"
        );
        let relative = find_program("./mcp-server", Some(&path)).unwrap_err();
        assert!(relative.contains("relative path"), "{relative}");
        // A folder of PATH given relatively is not searched: the child's folder differs.
        let relative_path = std::env::join_paths(["bin"]).unwrap();
        assert!(find_program("mcp-server", Some(&relative_path)).is_err());
    }
}
