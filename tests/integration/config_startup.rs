//! Start-up refusals (one line naming the variable) and the administrative commands, run through
//! the real binary.

use std::io::Write;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_gatehouse");

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> Run {
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
