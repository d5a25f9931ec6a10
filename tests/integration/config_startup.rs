//! Start-up refusals (one line naming the variable) and the administrative commands, run through
//! the real binary.

use std::io::Write;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_gatehouse");

/// What a run of the binary gave: exit code and output.
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// Runs the real binary with only `env` (and `RUST_LOG=error`) set, feeding `stdin`.
pub(crate) fn run(args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> Run {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env_clear()
        .env("RUST_LOG", "error")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("run gatehouse");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    } else {
        drop(child.stdin.take());
    }
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn assert_refused(env: &[(&str, &str)], variable: &str, what: &str) {
    let r = run(&["serve"], env, None);
    assert_eq!(r.code, 1, "stderr: {}", r.stderr);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one line: {:?}", r.stderr);
    assert!(
        lines[0].contains(variable),
        "names {variable}: {}",
        lines[0]
    );
    assert!(lines[0].contains(what), "says {what}: {}", lines[0]);
}

#[test]
fn relative_mcp_server_url_stops_the_start() {
    assert_refused(&[("MCP_SERVER_URL", "/mcp")], "MCP_SERVER_URL", "absolute");
}

#[test]
fn issuer_with_trailing_slash_stops_the_start() {
    assert_refused(
        &[("GATEHOUSE_ISSUER", "http://127.0.0.1:8080/")],
        "GATEHOUSE_ISSUER",
        "slash",
    );
}

#[test]
fn unknown_database_scheme_stops_the_start() {
    assert_refused(
        &[("DATABASE_URL", "mysql://localhost/x")],
        "DATABASE_URL",
        "unsupported scheme",
    );
}

#[test]
fn unreachable_database_stops_the_start() {
    assert_refused(
        &[
            ("DATABASE_URL", "postgres://postgres@127.0.0.1:1/nothing"),
            ("GATEHOUSE_BIND", "127.0.0.1:0"),
        ],
        "DATABASE_URL",
        "cannot connect",
    );
}

#[test]
fn port_in_use_stops_the_start() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("g.db").display());
    assert_refused(
        &[("GATEHOUSE_BIND", &addr), ("DATABASE_URL", &db)],
        "GATEHOUSE_BIND",
        "cannot listen",
    );
}

#[test]
fn bad_number_stops_the_start() {
    assert_refused(
        &[("GATEHOUSE_ACCESS_TOKEN_TTL", "soon")],
        "GATEHOUSE_ACCESS_TOKEN_TTL",
        "whole number",
    );
}

#[test]
fn account_and_project_commands_work_and_refuse_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("g.db").display());
    let env = [("DATABASE_URL", db.as_str())];

    let r = run(
        &["account", "add", "alice@example.com", "--password-stdin"],
        &env,
        Some("a-long-password\n"),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("created account alice@example.com"));

    let r = run(
        &["account", "add", "ALICE@example.com", "--password-stdin"],
        &env,
        Some("a-long-password\n"),
    );
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("already exists"), "{}", r.stderr);

    let r = run(
        &["account", "add", "not-an-email", "--password-stdin"],
        &env,
        Some("a-long-password\n"),
    );
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("invalid email"), "{}", r.stderr);

    let r = run(
        &["account", "add", "bob@example.com", "--password-stdin"],
        &env,
        Some("\n"),
    );
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("at least 8"), "{}", r.stderr);

    let long = "x".repeat(2000) + "\n";
    let r = run(
        &["account", "add", "bob@example.com", "--password-stdin"],
        &env,
        Some(&long),
    );
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("at most"), "{}", r.stderr);

    let r = run(&["account", "disable", "nobody@example.com"], &env, None);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("no account"), "{}", r.stderr);

    let r = run(
        &["project", "add", "Research", "--owner", "alice@example.com"],
        &env,
        None,
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let project_id = r.stdout.trim().to_string();
    assert_eq!(
        project_id.len(),
        36,
        "prints the new project id: {project_id}"
    );

    let r = run(
        &["project", "add", "X", "--owner", "nobody@example.com"],
        &env,
        None,
    );
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("no account"), "{}", r.stderr);

    let r = run(
        &["account", "add", "bob@example.com", "--password-stdin"],
        &env,
        Some("another-password\n"),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = run(
        &[
            "project",
            "add-member",
            &project_id,
            "bob@example.com",
            "--role",
            "admin",
        ],
        &env,
        None,
    );
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("read or write"), "{}", r.stderr);
    let r = run(
        &[
            "project",
            "add-member",
            &project_id,
            "bob@example.com",
            "--role",
            "read",
        ],
        &env,
        None,
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = run(
        &[
            "project",
            "add-member",
            "no-such-project",
            "bob@example.com",
            "--role",
            "read",
        ],
        &env,
        None,
    );
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("no project"), "{}", r.stderr);

    let r = run(&["account", "disable", "bob@example.com"], &env, None);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = run(&["migrate"], &env, None);
    assert_eq!(r.code, 0, "{}", r.stderr);
}

/// Starts `gatehouse serve` on a free port with `env`; returns the child (stdout and stderr piped).
pub(crate) fn start_server(env: &[(&str, &str)]) -> (std::process::Child, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let bind = format!("127.0.0.1:{port}");
    let mcp = format!("http://127.0.0.1:{port}/mcp");
    let mut cmd = Command::new(BIN);
    cmd.arg("serve")
        .env_clear()
        .env("GATEHOUSE_BIND", &bind)
        .env("MCP_SERVER_URL", &mcp)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    (cmd.spawn().unwrap(), port)
}

pub(crate) fn wait_ready(port: u16) {
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("server did not start");
}

#[test]
fn first_start_prints_a_one_time_setup_link_and_sigterm_stops_cleanly_with_json_logs() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("g.db").display());
    let (mut child, port) = start_server(&[
        ("DATABASE_URL", &db),
        ("GATEHOUSE_LOG_FORMAT", "json"),
        ("RUST_LOG", "info"),
    ]);
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let marker = format!("http://127.0.0.1:{port}/setup?token=gate_setup_");
    assert!(
        line.contains(&marker),
        "one line with the setup link: {line}"
    );
    wait_ready(port);
    // Graceful shutdown on SIGTERM: exit status 0.
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "clean exit on SIGTERM");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty());
    for l in lines {
        let v: serde_json::Value =
            serde_json::from_str(l).unwrap_or_else(|_| panic!("JSON log line: {l}"));
        assert!(v.get("level").is_some(), "{l}");
        assert!(
            !l.contains("gate_setup_"),
            "the setup token never reaches the log: {l}"
        );
    }
}

#[test]
fn bootstrap_account_is_created_headlessly_and_no_link_is_printed() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("g.db").display());
    let (mut child, port) = start_server(&[
        ("DATABASE_URL", &db),
        ("GATEHOUSE_BOOTSTRAP_EMAIL", "root@example.com"),
        ("GATEHOUSE_BOOTSTRAP_PASSWORD", "a-long-password"),
    ]);
    wait_ready(port);
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    child.wait().unwrap();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(!out.contains("/setup?token="), "{out}");
    // The account exists: adding it again is a duplicate.
    let r = run(
        &["account", "add", "root@example.com", "--password-stdin"],
        &[("DATABASE_URL", &db)],
        Some("a-long-password\n"),
    );
    assert!(r.stderr.contains("already exists"), "{}", r.stderr);
}

#[test]
fn settings_can_come_from_a_toml_file_and_the_environment_wins() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gatehouse.toml");
    std::fs::write(&file, "GATEHOUSE_ISSUER = \"https://auth.example.com/\"\n").unwrap();
    let r = run(&["--config", file.to_str().unwrap(), "serve"], &[], None);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("GATEHOUSE_ISSUER") && r.stderr.contains("slash"),
        "file value read: {}",
        r.stderr
    );
    let r = run(
        &["--config", file.to_str().unwrap(), "serve"],
        &[
            ("GATEHOUSE_ISSUER", "https://auth.example.com"),
            ("GATEHOUSE_ACCESS_TOKEN_TTL", "0"),
        ],
        None,
    );
    assert!(
        r.stderr.contains("GATEHOUSE_ACCESS_TOKEN_TTL"),
        "environment overrides the file: {}",
        r.stderr
    );
}

#[test]
fn bad_metrics_address_stops_the_start() {
    assert_refused(
        &[("GATEHOUSE_METRICS_BIND", "9090")],
        "GATEHOUSE_METRICS_BIND",
        "address and port",
    );
}

/// `gatehouse serve --help` lists every setting with its environment variable and, where it
/// is a fixed value, its default (clap's `[env: …]` and `[default: …]`); a secret's value set
/// in the environment is never shown; an option on the command line wins over the
/// environment; a secret given as an option is refused without being echoed.
#[test]
fn serve_help_lists_every_variable_with_its_default_and_options_win() {
    let r = run(
        &["serve", "--help"],
        &[
            ("GATEHOUSE_SECRET_KEY", "sekrit-value-in-env"),
            ("DATABASE_URL", "postgres://u:pw-in-env@db/x"),
        ],
        None,
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let help = r.stdout.replace('\n', " ");
    for variable in [
        "MCP_SERVER_URL",
        "GATEHOUSE_ISSUER",
        "FRONTEND_URL",
        "DATABASE_URL",
        "GATEHOUSE_BIND",
        "GATEHOUSE_METRICS_BIND",
        "OPENAI_APPS_CHALLENGE",
        "GATEHOUSE_OAUTH",
        "GATEHOUSE_AUTH_CACHE",
        "GATEHOUSE_LISTEN_DATABASE_URL",
        "GATEHOUSE_ALLOWED_ORIGINS",
        "GATEHOUSE_ACCESS_TOKEN_TTL",
        "GATEHOUSE_REFRESH_GRACE_SECONDS",
        "GATEHOUSE_MAX_RESULT_BYTES",
        "GATEHOUSE_QUOTA_CALLS_PER_HOUR",
        "GATEHOUSE_BOOTSTRAP_EMAIL",
        "GATEHOUSE_BOOTSTRAP_PASSWORD",
        "GATEHOUSE_LOG_FORMAT",
        "GATEHOUSE_PASSWORD_WORKERS",
        "GATEHOUSE_PASSWORD_QUEUE",
        "GATEHOUSE_REGISTRATIONS_PER_HOUR",
        "GATEHOUSE_REGISTRATION_BYTES_PER_HOUR",
        "GATEHOUSE_UNUSED_CLIENT_MAX_AGE",
        "GATEHOUSE_HEADER_READ_TIMEOUT",
        "GATEHOUSE_BODY_READ_TIMEOUT",
        "GATEHOUSE_MAX_CONNECTIONS",
        "GATEHOUSE_MAX_CONNECTIONS_PER_ADDRESS",
        "GATEHOUSE_TRUSTED_PROXIES",
        "GATEHOUSE_SECRET_KEY",
        "GATEHOUSE_SECRET_KEY_FILE",
        "GATEHOUSE_SECRET_KEY_PREVIOUS",
        "GATEHOUSE_SERVER_NAME",
        "GATEHOUSE_SERVER_TITLE",
        "GATEHOUSE_AUDIT_RETENTION_DAYS",
        "GATEHOUSE_EVENTS_URL",
        "GATEHOUSE_EVENTS_TOKEN",
    ] {
        assert!(
            help.contains(&format!("[env: {variable}")),
            "{variable} missing: {help}"
        );
    }
    for default in [
        "[default: http://127.0.0.1:8080/mcp]",
        "[default: sqlite://gatehouse.db?mode=rwc]",
        "[default: 127.0.0.1:8080]",
        "[default: 3600]",
        "[default: 90]",
    ] {
        assert!(help.contains(default), "{default} missing: {help}");
    }
    assert!(
        !help.contains("sekrit-value-in-env") && !help.contains("pw-in-env"),
        "{help}"
    );
    // An option wins over the environment: a bad value given as an option is the one refused.
    let r = run(
        &["serve", "--access-token-ttl", "5"],
        &[("GATEHOUSE_ACCESS_TOKEN_TTL", "600")],
        None,
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("GATEHOUSE_ACCESS_TOKEN_TTL"),
        "{}",
        r.stderr
    );
    let r = run(
        &["serve", "--bootstrap-password", "hunter2-on-argv"],
        &[],
        None,
    );
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("GATEHOUSE_BOOTSTRAP_PASSWORD") && !r.stderr.contains("hunter2"),
        "{}",
        r.stderr
    );
}
