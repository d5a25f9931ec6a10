//! The `gatehouse` binary: parse the command line, load configuration, start telemetry, then
//! serve or run one administrative command.

use clap::Parser;
use gatehouse::app::Application;
use gatehouse::cli::{Cli, Command, run_admin};
use gatehouse::config::Config;

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    if let Some(Command::Doctor(args)) = &cli.command {
        // A client of any server: needs no configuration or database of its own.
        let report = gatehouse::doctor::run(&args.into()).await;
        if args.json {
            println!("{}", gatehouse::doctor::render_json(&report));
        } else {
            print!("{}", gatehouse::doctor::render_text(&report));
        }
        std::process::exit(if report.passed { 0 } else { 1 });
    }
    let config = match Config::load(cli.config.as_deref()) {
        Ok(c) => c,
        Err(e) => fail(&e.to_string()),
    };
    gatehouse::telemetry::init(config.log_format);
    if config.mcp_server_url.starts_with("http://")
        && !url::Url::parse(&config.mcp_server_url)
            .ok()
            .and_then(|u| {
                u.host_str()
                    .map(gatehouse::domain::redirect_uri::is_loopback_host)
            })
            .unwrap_or(false)
    {
        tracing::warn!(
            "MCP_SERVER_URL is plain http on a non-loopback host: passwords and tokens would cross the network unencrypted; serve it over https"
        );
    }
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => {
            let stop = gatehouse::app::shutdown_signal();
            let app = match Application::build(config.clone()).await {
                Ok(app) => app,
                Err(e) => fail(&e.to_string()),
            };
            tracing::info!(
                port = app.port(),
                issuer = %config.issuer,
                mcp = %config.mcp_server_url,
                "gatehouse listening"
            );
            if let Err(e) = app.run_until(stop).await {
                fail(&format!("server error: {e}"));
            }
        }
        other => match run_admin(&config, other).await {
            Ok(out) => println!("{out}"),
            Err(e) => fail(&e.to_string()),
        },
    }
}

fn fail(message: &str) -> ! {
    eprintln!("gatehouse: {message}");
    std::process::exit(1);
}
