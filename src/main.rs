//! The `gatehouse` binary: parse the command line, load configuration, start telemetry, then
//! serve or run one administrative command.

use clap::Parser;
use gatehouse::app::Application;
use gatehouse::cli::{Cli, Command, run_admin};
use gatehouse::config::Config;

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    let config = match Config::load(cli.config.as_deref()) {
        Ok(c) => c,
        Err(e) => fail(&e.to_string()),
    };
    gatehouse::telemetry::init(config.log_format);
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
