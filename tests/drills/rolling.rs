//! Rolling upgrade on `PostgreSQL` (issue 39, item 3): the previous release and this one serve
//! one database during the switch. The previous release's binary is named by
//! `GATEHOUSE_PREVIOUS_BIN` (build it from the release's tag); without it, or without
//! `GATEHOUSE_TEST_POSTGRES`, the drill says so and ends (building an older release takes longer
//! than a CI run has).
//!
//! The previous release starts first on a fresh database (migrating it to its level), an
//! account and a project are made with its command line, and a grant is made through it.
//! Then this release starts on the same database (migrating it to the newest) while the
//! previous one keeps serving; the token is used on both, its refresh token rotated on the new
//! one and the result rotated again on the old one, each new token used on the other; last,
//! the previous release is stopped and started again on the migrated database (an instance
//! that restarts in the middle of a rolling upgrade): reported, and asserted to serve the
//! newest token when `GATEHOUSE_PREVIOUS_RESTARTS` is set (a previous release that already
//! starts on a newer schema).

use std::path::PathBuf;
use std::process::{Command, Stdio};

use reqwest::StatusCode;
use serde_json::Value;

use crate::binary::{
    EMAIL, PASSWORD, Server, authorize, client, free_port, list_projects, pkce, redeem, register,
    send, token,
};
use crate::helpers::TestDb;

/// `PROGRAM ARGS…` with `vars`, `stdin` as its input; must succeed.
fn command(program: &PathBuf, vars: &[(&str, &str)], args: &[&str], stdin: Option<&str>) -> String {
    use std::io::Write;
    let mut child = Command::new(program)
        .args(args)
        .envs(vars.iter().copied())
        .env("RUST_LOG", "error")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).unwrap();
    }
    drop(input);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

async fn rotate(s: &Server, client_id: &str, refresh: &str) -> (String, String) {
    let c = client();
    let answer = send(token(
        s,
        &c,
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh),
            ("client_id", client_id),
        ],
    ))
    .await
    .expect("an answer");
    assert_eq!(
        answer.0,
        StatusCode::OK,
        "refresh at {}: {}",
        s.base,
        answer.2
    );
    (
        answer.2["access_token"].as_str().unwrap().to_string(),
        answer.2["refresh_token"].as_str().unwrap().to_string(),
    )
}

async fn calls(s: &Server, access: &str) -> StatusCode {
    let c = client();
    let (status, _, body) = send(list_projects(s, &c, access)).await.expect("an answer");
    if status == StatusCode::OK {
        assert_eq!(body["result"]["isError"], Value::Bool(false), "{body}");
    }
    status
}

pub(crate) async fn drill() {
    let Some(previous) = std::env::var_os("GATEHOUSE_PREVIOUS_BIN").map(PathBuf::from) else {
        println!(
            "rolling upgrade: skipped: set GATEHOUSE_PREVIOUS_BIN to the previous release's \
             gatehouse binary (built from its tag) to run it"
        );
        return;
    };
    let Some(db) = TestDb::postgres().await else {
        println!("rolling upgrade: skipped: needs GATEHOUSE_TEST_POSTGRES");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (old_port, new_port) = (free_port(), free_port());
    // One deployment: both instances publish the same issuer and resource, and hold the same
    // server key.
    let issuer = format!("http://127.0.0.1:{old_port}");
    let resource = format!("{issuer}/mcp");
    let key = gatehouse::domain::server_key::ServerKey::generate().to_base64();
    let shared = [
        ("GATEHOUSE_ISSUER", issuer.as_str()),
        ("MCP_SERVER_URL", resource.as_str()),
        ("GATEHOUSE_SECRET_KEY", key.as_str()),
    ];
    let cli_vars = [
        ("DATABASE_URL", db.url.as_str()),
        ("MCP_SERVER_URL", resource.as_str()),
        ("GATEHOUSE_SECRET_KEY", key.as_str()),
    ];

    let old = Server::start_program(
        &previous,
        &db.url,
        old_port,
        &dir.path().join("old.log"),
        &shared,
    )
    .await;
    command(
        &previous,
        &cli_vars,
        &["account", "add", EMAIL, "--password-stdin"],
        Some(&format!("{PASSWORD}\n")),
    );
    command(
        &previous,
        &cli_vars,
        &["project", "add", "Drill", "--owner", EMAIL],
        None,
    );
    let c = client();
    let (_, _, registered) = send(register(&old, &c)).await.expect("registration");
    let client_id = registered["client_id"].as_str().unwrap().to_string();
    let (verifier, challenge) = pkce();
    let code = authorize(&old, &client(), &client_id, &challenge)
        .await
        .expect("a code from the previous release");
    let (status, _, grant) = send(redeem(&old, &c, &client_id, &code, &verifier))
        .await
        .expect("redeemed");
    assert_eq!(status, StatusCode::OK, "{grant}");
    let first_access = grant["access_token"].as_str().unwrap().to_string();
    let first_refresh = grant["refresh_token"].as_str().unwrap().to_string();
    assert_eq!(calls(&old, &first_access).await, StatusCode::OK);

    // This release joins, migrating the database while the previous one serves.
    let new = Server::start(&db.url, new_port, &dir.path().join("new.log"), &shared).await;
    let mut figures = Vec::new();
    figures.push((
        "old token on the previous release",
        calls(&old, &first_access).await,
    ));
    figures.push((
        "old token on this release",
        calls(&new, &first_access).await,
    ));
    let (second_access, second_refresh) = rotate(&new, &client_id, &first_refresh).await;
    figures.push((
        "token rotated on this release, used on the previous",
        calls(&old, &second_access).await,
    ));
    let (third_access, _third_refresh) = rotate(&old, &client_id, &second_refresh).await;
    figures.push((
        "token rotated on the previous release, used on this",
        calls(&new, &third_access).await,
    ));
    figures.push((
        "token rotated on the previous release, used on it",
        calls(&old, &third_access).await,
    ));

    // The previous release restarts on the migrated database.
    old.stop();
    let restarted = match old.try_restart(std::time::Duration::from_secs(20)).await {
        Ok(()) => "ready".to_string(),
        Err(e) => e,
    };
    let after_restart = if restarted == "ready" {
        calls(&old, &third_access).await
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    println!(
        "rolling upgrade ({}): {figures:?}; previous release restarted on the migrated \
         database: {restarted}, newest token there: {after_restart}",
        previous.display()
    );
    assert!(
        figures.iter().all(|(_, s)| *s == StatusCode::OK),
        "{figures:?}"
    );
    // Releases before the one that starts on a newer schema (`Store::migrate` ignoring
    // migrations it does not know) refuse to restart mid-upgrade; that is reported above,
    // asserted only when the previous release is one of those after it.
    if std::env::var_os("GATEHOUSE_PREVIOUS_RESTARTS").is_some() {
        assert_eq!(after_restart, StatusCode::OK, "{restarted}");
    }
    drop(new);
}
