//! `gatehouse upstream add|list|approve|disable|enable|remove`: stored on both engines, header
//! and `--env` values sealed with the server key and never printed, every change raising the
//! registry's version and audited, bad input one line and exit status 1.

use gatehouse::domain::server_key::{Keyring, ServerKey};
use sqlx::Row;

use super::{TEST_KEY, cli, cli_ok, spawn_with_key};
use crate::helpers::TestApp;

async fn version(app: &TestApp) -> i64 {
    app.store.upstream_registry_version().await.unwrap()
}

/// Whether the server's store sees the registry version above `before` within 5 s. A change
/// made by the command line (another process) can reach a pooled `SQLite` connection a moment
/// late: one still inside the read snapshot of an earlier statement sees it once that ends.
async fn raised_above(app: &TestApp, before: i64) -> bool {
    for _ in 0..50 {
        if version(app).await > before {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    false
}

async fn column(app: &TestApp, name: &str, column: &str) -> Option<String> {
    sqlx::query(&format!(
        "SELECT {column} AS v FROM upstreams WHERE name = $1"
    ))
    .bind(name)
    .fetch_one(app.db.pool().await)
    .await
    .unwrap()
    .try_get("v")
    .unwrap()
}

#[tokio::test]
async fn the_registry_is_administered_from_the_command_line_without_showing_secrets() {
    let app = spawn_with_key().await;
    assert_eq!(
        cli_ok(&app, &["upstream", "list"]).await.trim(),
        "no upstreams (add one with: gatehouse upstream add NAME --url URL)"
    );
    let v0 = version(&app).await;

    // An HTTP upstream with an API key; down at add time, it is added all the same.
    let out = cli_ok(
        &app,
        &[
            "upstream",
            "add",
            "everything",
            "--url",
            "http://127.0.0.1:9/mcp",
            "--header",
            "Authorization: Bearer s3cret-upstream-key",
            "--header",
            "X-Team: blue",
            "--timeout",
            "5s",
            "--max-concurrency",
            "4",
        ],
    )
    .await;
    assert_eq!(
        out.trim(),
        "added upstream everything (http http://127.0.0.1:9/mcp); it could not be listed now (upstream everything failed the handshake: could not connect to it: Connection refused); its definitions are recorded when a running server first lists it, and approved then with gatehouse upstream approve everything"
    );
    assert!(
        raised_above(&app, v0).await,
        "every change raises the version"
    );

    // Sealed at rest with the server key, bound to the upstream's name.
    let sealed = column(&app, "everything", "headers_sealed").await.unwrap();
    assert!(sealed.starts_with("gh1."), "{sealed}");
    assert!(!sealed.contains("s3cret"));
    let keys = Keyring::new(ServerKey::parse(TEST_KEY).unwrap(), Vec::new());
    let plain = keys
        .open(b"upstream\0everything\0headers", &sealed)
        .unwrap();
    let pairs: Vec<(String, String)> = serde_json::from_slice(&plain).unwrap();
    assert_eq!(
        pairs,
        [
            ("authorization".into(), "Bearer s3cret-upstream-key".into()),
            ("x-team".into(), "blue".into())
        ]
    );
    assert!(
        keys.open(b"upstream\0other\0headers", &sealed).is_err(),
        "a sealed value opens only for its own upstream"
    );

    // A stdio upstream with its own environment.
    let out = cli_ok(
        &app,
        &[
            "upstream",
            "add",
            "memory",
            "--command",
            "npx -y '@modelcontextprotocol/server-memory'",
            "--env",
            "MEMORY_FILE_PATH=/var/tmp/secret-memory.json",
            "--trust-definitions",
        ],
    )
    .await;
    assert!(
        // Listed at once: server-memory's nine tools, three of them destructive (the deletes).
        out.starts_with("added upstream memory (stdio npx -y @modelcontextprotocol/server-memory); its tool definitions are trusted without approval; it lists 9 tools, "),
        "{out}"
    );
    assert_eq!(
        column(&app, "memory", "command").await.unwrap(),
        r#"["npx","-y","@modelcontextprotocol/server-memory"]"#
    );

    // The attempt to list it at add time is its last error.
    let list = cli_ok(&app, &["upstream", "list"]).await;
    let lines: Vec<&str> = list.lines().collect();
    assert!(
        lines[1].starts_with("    last error (since ")
            && lines[1].ends_with(": upstream everything failed the handshake: could not connect to it: Connection refused"),
        "{list}"
    );
    assert_eq!(
        [lines[0], lines[2]],
        [
            "everything  http  http://127.0.0.1:9/mcp  unreachable  tools=0 pending=0  timeout=5000ms max-concurrency=4  headers=authorization,x-team",
            "memory  stdio  npx -y @modelcontextprotocol/server-memory  enabled  tools=9 pending=0  timeout=30000ms max-concurrency=16  env=MEMORY_FILE_PATH  trust-definitions",
        ],
        "{list}"
    );
    assert!(!list.contains("s3cret") && !list.contains("secret-memory"));

    // The name is taken.
    let run = cli(
        &app,
        &[
            "upstream",
            "add",
            "everything",
            "--url",
            "https://x.example/mcp",
        ],
    )
    .await;
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr.trim(),
        "gatehouse: an upstream named everything exists; remove it first to change it"
    );

    // Disable and enable.
    let v1 = version(&app).await;
    assert_eq!(
        cli_ok(&app, &["upstream", "disable", "everything"])
            .await
            .trim(),
        "upstream everything disabled"
    );
    assert!(raised_above(&app, v1).await);
    assert!(
        cli_ok(&app, &["upstream", "list"])
            .await
            .starts_with("everything  http  http://127.0.0.1:9/mcp  disabled  ")
    );
    assert_eq!(
        cli_ok(&app, &["upstream", "disable", "everything"])
            .await
            .trim(),
        "upstream everything was already disabled"
    );
    assert_eq!(
        cli_ok(&app, &["upstream", "enable", "everything"])
            .await
            .trim(),
        "upstream everything enabled"
    );

    // Approval of what was seen: nothing yet; then one pending definition.
    assert_eq!(
        cli_ok(&app, &["upstream", "approve", "everything"])
            .await
            .trim(),
        "upstream everything: no definition was waiting for approval"
    );
    sqlx::query(
        "INSERT INTO upstream_tools (upstream, tool, definition, hash, first_seen_at, changed_at) \
         VALUES ('everything', 'echo', '{\"name\":\"echo\"}', 'h1', 1, 1)",
    )
    .execute(app.db.pool().await)
    .await
    .unwrap();
    // Enabled; "unreachable" once a running server has tried the address (nothing listens).
    let listed = cli_ok(&app, &["upstream", "list"]).await;
    assert!(
        listed.contains("  enabled  tools=0 pending=1  ")
            || listed.contains("  unreachable  tools=0 pending=1  "),
        "{listed}"
    );
    let v2 = version(&app).await;
    assert_eq!(
        cli_ok(&app, &["upstream", "approve", "everything"])
            .await
            .trim(),
        "upstream everything: 1 tool definition approved"
    );
    assert!(raised_above(&app, v2).await);
    let listed = cli_ok(&app, &["upstream", "list"]).await;
    assert!(
        listed.contains("  enabled  tools=1 pending=0  ")
            || listed.contains("  unreachable  tools=1 pending=0  "),
        "{listed}"
    );

    // Removal takes the definitions with it.
    assert_eq!(
        cli_ok(&app, &["upstream", "remove", "everything"])
            .await
            .trim(),
        "removed upstream everything"
    );
    // Read on a connection of its own: on SQLite a pooled connection can keep reading the
    // snapshot of an earlier statement (WAL) for as long as that statement is not reset.
    let mut left: i64 = -1;
    for _ in 0..50 {
        use sqlx::Connection;
        let mut fresh = sqlx::AnyConnection::connect(&app.db.url).await.unwrap();
        left =
            sqlx::query("SELECT COUNT(*) AS n FROM upstream_tools WHERE upstream = 'everything'")
                .fetch_one(&mut fresh)
                .await
                .unwrap()
                .try_get("n")
                .unwrap();
        let _ = fresh.close().await;
        if left == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(left, 0, "the removed upstream's definitions are gone");
    assert!(
        !cli_ok(&app, &["upstream", "list"])
            .await
            .contains("everything")
    );
    for command in ["remove", "disable", "enable", "approve"] {
        let run = cli(&app, &["upstream", command, "everything"]).await;
        assert_eq!(run.code, 1, "{command}");
        assert_eq!(run.stderr.trim(), "gatehouse: no upstream named everything");
    }

    // Every change is audited with actor cli and the upstream's name, never a secret.
    app.store.flush_audit().await;
    let rows = sqlx::query(
        "SELECT event, subject, detail FROM audit_events WHERE event LIKE 'upstream_%' ORDER BY id",
    )
    .fetch_all(app.db.pool().await)
    .await
    .unwrap();
    let rows: Vec<(String, String, String)> = rows
        .iter()
        .map(|r| {
            (
                r.try_get("event").unwrap(),
                r.try_get("subject").unwrap(),
                r.try_get("detail").unwrap(),
            )
        })
        .collect();
    let events: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(
        events,
        [
            "upstream_added",
            "upstream_added",
            "upstream_disabled",
            "upstream_enabled",
            "upstream_approved",
            "upstream_approved",
            "upstream_removed"
        ]
    );
    assert_eq!(rows[0].1, "everything");
    assert_eq!(rows[0].2, "actor=cli transport=http");
    assert!(rows.iter().all(|r| !r.2.contains("s3cret")));
}

#[tokio::test]
async fn bad_input_at_upstream_add_is_one_line_and_exit_status_1() {
    let app = spawn_with_key().await;
    let cases: &[(&[&str], &str)] = &[
        (
            &["Bad_Name", "--url", "https://x.example/mcp"],
            "invalid upstream name \"Bad_Name\": use only a-z, 0-9 and -",
        ),
        (
            &[
                "a-very-long-upstream-name",
                "--url",
                "https://x.example/mcp",
            ],
            "invalid upstream name \"a-very-long-upstream-name\": 1 to 20 characters of a-z, 0-9 and -",
        ),
        (
            &["x", "--url", "not a url"],
            "invalid upstream URL \"not a url\": relative URL without a base",
        ),
        (
            &["x", "--url", "ftp://x.example/mcp"],
            "invalid upstream URL \"ftp://x.example/mcp\": use http:// or https://",
        ),
        (
            &["x", "--url", "https://me:s3cret@x.example/mcp"],
            "invalid upstream URL: no user or password in the URL; give the upstream's credential with --header 'Authorization: …'",
        ),
        (
            &["x"],
            "give either --url (Streamable HTTP) or --command (stdio)",
        ),
        (
            &["x", "--url", "https://x.example/mcp", "--command", "npx y"],
            "give either --url (Streamable HTTP) or --command (stdio)",
        ),
        (
            &[
                "x",
                "--url",
                "https://x.example/mcp",
                "--header",
                "Authorization s3cret",
            ],
            "invalid --header: write it as 'Name: value'",
        ),
        (
            &[
                "x",
                "--url",
                "https://x.example/mcp",
                "--header",
                "Mcp-Session-Id: s3cret",
            ],
            "--header mcp-session-id: set by Gatehouse itself, it cannot be configured",
        ),
        (
            &["x", "--url", "https://x.example/mcp", "--timeout", "0s"],
            "invalid --timeout \"0s\": a whole number of ms, s or m from 1s to 600s, e.g. 30s",
        ),
        (
            &[
                "x",
                "--url",
                "https://x.example/mcp",
                "--max-concurrency",
                "0",
            ],
            "invalid --max-concurrency 0: from 1 to 1024",
        ),
        (
            &["x", "--command", "npx 'unbalanced"],
            "invalid --command: unbalanced quotes",
        ),
        (
            &["x", "--command", "npx y", "--env", "1BAD=s3cret"],
            "invalid --env name \"1BAD\": use A-Z, a-z, 0-9 and _, not starting with a digit",
        ),
        (
            &["x", "--command", "npx y", "--header", "X-Key: s3cret"],
            "--header goes with --url",
        ),
    ];
    for (args, message) in cases {
        let mut all = vec!["upstream", "add"];
        all.extend_from_slice(args);
        let run = cli(&app, &all).await;
        assert_eq!(run.code, 1, "{all:?}: {}", run.stderr);
        assert_eq!(run.stderr, format!("gatehouse: {message}\n"), "{all:?}");
        assert!(run.stdout.is_empty());
    }
    assert_eq!(version(&app).await, 0, "nothing was written");
    assert!(app.store.upstreams().await.unwrap().is_empty());
}
