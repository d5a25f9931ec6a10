//! The command line's changes are audited (issue "Credentials beyond the browser", bullet 7):
//! `account add|disable`, `project add|add-member`, `client add`, `key create|revoke` and
//! `url create|revoke` each leave one row with actor `cli` and the subject, never a secret.

use crate::helpers::spawn_app;
use crate::keys::gatehouse;

/// Runs `gatehouse ARGS…` with `stdin`, which must succeed; its output.
fn run(app: &crate::helpers::TestApp, args: &[&str], stdin: Option<&str>) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .args(args)
        .env("DATABASE_URL", &app.db.url)
        .env("MCP_SERVER_URL", &app.config.mcp_server_url)
        .env("RUST_LOG", "error")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The value after `name: ` in a command's output.
fn field(out: &str, name: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
        .unwrap_or_else(|| panic!("no {name} in {out}"))
        .to_string()
}

#[tokio::test]
async fn every_change_made_on_the_command_line_is_audited_without_secrets() {
    let app = spawn_app().await;
    let password = "a-long-secret-password";
    let created = run(
        &app,
        &["account", "add", "carol@example.com", "--password-stdin"],
        Some(&format!("{password}\n")),
    );
    let carol = created
        .trim()
        .rsplit('(')
        .next()
        .unwrap()
        .trim_end_matches(')')
        .to_string();
    run(
        &app,
        &["account", "add", "dave@example.com", "--password-stdin"],
        Some(&format!("{password}\n")),
    );
    let project = run(
        &app,
        &["project", "add", "Atlas", "--owner", "carol@example.com"],
        None,
    )
    .trim()
    .to_string();
    run(
        &app,
        &[
            "project",
            "add-member",
            &project,
            "dave@example.com",
            "--role",
            "read",
        ],
        None,
    );
    let client = run(&app, &["client", "add", "Reporting", "--introspect"], None);
    let client_id = field(&client, "client_id");
    let client_secret = field(&client, "client_secret");
    let key = run(
        &app,
        &["key", "create", "--account", "carol@example.com"],
        None,
    );
    let (key_id, key_secret) = (field(&key, "key_id"), field(&key, "key"));
    run(&app, &["key", "revoke", &key_id], None);
    let url = run(
        &app,
        &["url", "create", "--account", "carol@example.com"],
        None,
    );
    let (url_id, url_secret) = (field(&url, "url_id"), field(&url, "url"));
    run(&app, &["url", "revoke", &url_id], None);
    let (success, _, err) = gatehouse(&app, &["account", "disable", "dave@example.com"]);
    assert!(success, "{err}");

    let rows = app.store.recent_audit(100).await.unwrap();
    let row = |event: &str| {
        let found: Vec<_> = rows.iter().filter(|r| r.event == event).collect();
        assert_eq!(found.len(), 1, "{event}: {rows:?}");
        let row = found[0].clone();
        assert_eq!(row.outcome, "success", "{row:?}");
        assert!(
            row.detail.as_deref().unwrap_or("").contains("actor=cli"),
            "{row:?}"
        );
        assert_eq!(row.source_ip, None, "{row:?}");
        row
    };
    let accounts: Vec<_> = rows
        .iter()
        .filter(|r| r.event == "account_created")
        .collect();
    assert_eq!(accounts.len(), 2, "{rows:?}");
    assert!(
        accounts
            .iter()
            .all(|r| r.detail.as_deref().is_some_and(|d| d.contains("actor=cli"))),
        "{accounts:?}"
    );
    assert!(
        accounts
            .iter()
            .any(|r| r.subject.as_deref() == Some("carol@example.com")
                && r.account_id.as_deref() == Some(carol.as_str())),
        "{accounts:?}"
    );
    let disabled = row("account_disabled");
    assert_eq!(disabled.subject.as_deref(), Some("dave@example.com"));
    let made = row("project_created");
    assert_eq!(made.subject.as_deref(), Some(project.as_str()));
    assert_eq!(made.account_id.as_deref(), Some(carol.as_str()));
    let member = row("member_added");
    assert_eq!(member.subject.as_deref(), Some(project.as_str()));
    assert!(member.detail.as_deref().unwrap().contains("role=read"));
    let client_row = row("client_created");
    assert_eq!(client_row.client_id.as_deref(), Some(client_id.as_str()));
    assert_eq!(row("key_created").subject.as_deref(), Some(key_id.as_str()));
    assert_eq!(row("key_revoked").subject.as_deref(), Some(key_id.as_str()));
    assert_eq!(row("url_created").subject.as_deref(), Some(url_id.as_str()));
    assert_eq!(row("url_revoked").subject.as_deref(), Some(url_id.as_str()));
    let url_secret = url_secret.rsplit('/').next().unwrap();
    for r in &rows {
        let text = format!("{r:?}");
        for secret in [password, &client_secret, &key_secret, url_secret] {
            assert!(!text.contains(secret), "{text}");
        }
    }
}
