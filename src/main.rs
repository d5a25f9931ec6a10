//! The `gatehouse` binary: parse the command line, load configuration, start telemetry, then
//! serve or run one administrative command.
//!
//! Stopping is bounded: after SIGTERM or SIGINT, in-flight requests get
//! [`gatehouse::app::SHUTDOWN_GRACE`]; then the runtime is shut down without waiting for work
//! that is still running, and a watchdog ends the process at
//! [`gatehouse::app::SHUTDOWN_BOUND`] if anything still holds it.

use gatehouse::app::Application;
use gatehouse::cli::{Command, run_admin};
use gatehouse::config::Config;
use gatehouse::mcp::upstream::stdio as working_folders;

/// How long the runtime waits, once serving has stopped, for leftover tasks (a request past
/// its grace, blocking work) before abandoning them.
const RUNTIME_SHUTDOWN: std::time::Duration = std::time::Duration::from_secs(2);

/// jemalloc instead of glibc's allocator: under load glibc's `malloc`/`free` and the locks of
/// its per-thread arenas took about a fifth of the server's CPU (memory freed on another thread
/// than the one that allocated it); with jemalloc, `tools/call` on `SQLite` costs about a fifth
/// less CPU per call (docs/benchmarks.md "Allocator"). Its settings (`.cargo/config.toml`:
/// a purging thread, freed pages returned after 1 s, two arenas) keep resident memory below
/// glibc's after load and after a sign-in flood.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => fail(&format!("cannot start the async runtime: {e}")),
    };
    match runtime.block_on(run()) {
        // Dropping a runtime waits for every task to yield and every blocking job to end; a
        // stop must not wait for those.
        Leftovers::Bounded => runtime.shutdown_timeout(RUNTIME_SHUTDOWN),
        // What is left is the reader of standard input, blocked in a read that only more input
        // or its end would finish: nothing to wait for.
        Leftovers::None => runtime.shutdown_background(),
    }
    gatehouse::telemetry::flush();
}

/// Ends the process once `bound` has passed (started when a stop signal arrives), should the
/// orderly stop not have ended it by then.
fn start_watchdog(bound: std::time::Duration) {
    std::thread::spawn(move || {
        std::thread::sleep(bound);
        eprintln!("gatehouse: the stop took longer than {bound:?}; exiting now");
        gatehouse::telemetry::flush();
        std::process::exit(1);
    });
}

/// What may still run on the runtime once [`run`] has returned.
enum Leftovers {
    /// Work that ends on its own (a request past its grace, blocking jobs): waited for up to
    /// [`RUNTIME_SHUTDOWN`].
    Bounded,
    /// Nothing that needs to end: `gatehouse stdio` has answered, audited and cleaned up, and
    /// only its blocked reader of standard input remains.
    None,
}

async fn run() -> Leftovers {
    let (cli, given) = gatehouse::cli::serve::parse();
    let given = given.unwrap_or_else(|e| fail(&e));
    if let Some(Command::Doctor(args)) = &cli.command {
        // A client of any server: needs no configuration or database of its own.
        let options: gatehouse::doctor::Options = args.into();
        let report = if args.json {
            let report = gatehouse::doctor::run(&options).await;
            println!("{}", gatehouse::doctor::render_json(&report));
            report
        } else {
            // Each line as its check ends.
            use std::io::Write;
            let style = gatehouse::doctor::TextStyle::for_stdout(args.verbose);
            let print = |text: String| {
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(text.as_bytes());
                let _ = out.flush();
            };
            print(gatehouse::doctor::render_header(&options.url));
            let report = gatehouse::doctor::run_with(&options, &mut |step| {
                print(gatehouse::doctor::render_step(step, style));
            })
            .await;
            print(gatehouse::doctor::render_footer(&report));
            report
        };
        gatehouse::telemetry::flush();
        std::process::exit(if report.passed { 0 } else { 1 });
    }
    // The client side of a remote deployment: no configuration or database of its own.
    if let Some(Command::Login(args)) = &cli.command {
        remote_login(args).await;
        return Leftovers::Bounded;
    }
    if let Some(Command::Stdio(gatehouse::remote::StdioArgs {
        url: Some(url),
        credentials,
    })) = &cli.command
    {
        remote_stdio(url, credentials.clone()).await;
        return Leftovers::None;
    }
    let config = match Config::load_with(cli.config.as_deref(), &given) {
        Ok(c) => c,
        Err(e) => fail(&e.to_string()),
    };
    if matches!(
        cli.command,
        None | Some(Command::Serve(_) | Command::Stdio(_))
    ) {
        gatehouse::telemetry::init(config.log_format);
    } else {
        gatehouse::telemetry::init_for_command(config.log_format);
    }
    if config.mcp_server_url.starts_with("http://")
        && !config
            .resource
            .url()
            .host_str()
            .is_some_and(gatehouse::domain::loopback::is_loopback_host)
    {
        tracing::warn!(
            "MCP_SERVER_URL is plain http on a non-loopback host: passwords and tokens would cross the network unencrypted; serve it over https"
        );
    }
    match cli.command.unwrap_or(Command::Serve(Default::default())) {
        Command::Serve(_) => serve(config).await,
        Command::Stdio(_) => {
            // Only protocol messages go to stdout; logs go to stderr (telemetry).
            let key = std::env::var("GATEHOUSE_API_KEY").ok();
            sweep_working_folders();
            let served = Application::run_stdio(config, key).await;
            working_folders::remove_working_folders();
            if let Err(e) = served {
                fail(&e.to_string());
            }
            return Leftovers::None;
        }
        other => match run_admin(&config, other).await {
            Ok(out) => println!("{out}"),
            Err(e) => fail(&e.to_string()),
        },
    }
    Leftovers::Bounded
}

/// Removes, off the runtime, the empty working folders of stdio upstreams left by a Gatehouse
/// that was killed ([`working_folders::sweep_working_folders`]).
fn sweep_working_folders() {
    tokio::task::spawn_blocking(|| {
        let removed = working_folders::sweep_working_folders(&std::env::temp_dir());
        if removed > 0 {
            tracing::info!(
                removed,
                "removed empty upstream working folders of servers no longer running"
            );
        }
    });
}

/// `gatehouse serve` (also with no command): serves until SIGTERM or SIGINT.
async fn serve(config: Config) {
    let signal = gatehouse::app::shutdown_signal();
    let stop = async move {
        signal.await;
        start_watchdog(gatehouse::app::SHUTDOWN_BOUND);
    };
    let app = match Application::build(config.clone()).await {
        Ok(app) => app,
        Err(e) => fail(&e.to_string()),
    };
    sweep_working_folders();
    tracing::info!(
        port = app.port(),
        issuer = %config.issuer,
        mcp = %config.mcp_server_url,
        "gatehouse listening"
    );
    let served = app.run_until(stop).await;
    working_folders::remove_working_folders();
    if let Err(e) = served {
        fail(&format!("server error: {e}"));
    }
}

/// `gatehouse login URL`.
async fn remote_login(args: &gatehouse::remote::LoginArgs) {
    use gatehouse::doctor::interactive::BrowserOpener;
    use gatehouse::remote::{credentials::CredentialsFile, login, parse_mcp_url};
    gatehouse::telemetry::init(gatehouse::config::LogFormat::Text);
    let url = parse_mcp_url(&args.url).unwrap_or_else(|e| fail(&e.to_string()));
    let file =
        CredentialsFile::locate(args.credentials.clone()).unwrap_or_else(|e| fail(&e.to_string()));
    let opener = if args.no_browser {
        BrowserOpener(std::sync::Arc::new(|url: &str| {
            eprintln!("Open this URL in a browser to sign in:\n{url}");
            Ok(())
        }))
    } else {
        BrowserOpener::desktop()
    };
    let wait = std::time::Duration::from_secs(args.wait);
    match login::login(&url, args.scope.as_deref(), &opener, wait, &file).await {
        Ok(saved) => println!(
            "Signed in to {url} ({}); tokens kept in {}",
            saved.scope.as_deref().unwrap_or("no scope named"),
            file.path().display()
        ),
        Err(e) => fail(&e.to_string()),
    }
}

/// `gatehouse stdio --url URL`.
async fn remote_stdio(url: &str, credentials: Option<std::path::PathBuf>) {
    use gatehouse::remote::bridge::{self, Credential};
    use gatehouse::remote::{credentials::CredentialsFile, parse_mcp_url};
    gatehouse::telemetry::init(gatehouse::config::LogFormat::Text);
    let url = parse_mcp_url(url).unwrap_or_else(|e| fail(&e.to_string()));
    let file = CredentialsFile::locate(credentials).unwrap_or_else(|e| fail(&e.to_string()));
    let key = std::env::var("GATEHOUSE_API_KEY").ok();
    let credential = Credential::choose(&url, key, file).unwrap_or_else(|e| fail(&e.to_string()));
    if let Err(e) = bridge::run(url, credential).await {
        fail(&e.to_string());
    }
}

fn fail(message: &str) -> ! {
    // The lines logged before this one come first.
    gatehouse::telemetry::flush();
    eprintln!("gatehouse: {message}");
    std::process::exit(1);
}
