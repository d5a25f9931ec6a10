//! The server key (README "Server key"): created on first start beside the `SQLite` file with
//! mode 0600, reused afterwards, refused when others may read it, rotated by
//! `gatehouse secret-key rotate`.

use std::os::unix::fs::PermissionsExt as _;
use std::process::Command;

use crate::config_startup::{run, start_server, wait_ready};

fn stop(mut child: std::process::Child) {
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    child.wait().unwrap();
}

/// The `current key id:` line of `secret-key status`.
fn current_id(env: &[(&str, &str)]) -> String {
    let r = run(&["secret-key", "status"], env, None);
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.stdout
        .lines()
        .find_map(|l| l.strip_prefix("current key id: "))
        .unwrap_or_else(|| panic!("no current key id in {}", r.stdout))
        .to_string()
}

#[test]
fn first_start_creates_a_private_key_file_beside_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}?mode=rwc", dir.path().join("g.db").display());
    let key_file = dir.path().join("g.db.key");
    let env = [("DATABASE_URL", db.as_str())];
    let (child, port) = start_server(&env);
    wait_ready(port);
    stop(child);
    let mode = std::fs::metadata(&key_file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "owner read and write only");
    let text = std::fs::read_to_string(&key_file).unwrap();
    let keys: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    assert_eq!(keys.len(), 1, "{text}");
    assert_eq!(keys[0].len(), 44, "base64 of 32 bytes: {text}");

    // The next start (and the command line) reads the same key.
    let first = current_id(&env);
    let (child, port) = start_server(&env);
    wait_ready(port);
    stop(child);
    assert_eq!(current_id(&env), first);
    assert_eq!(std::fs::read_to_string(&key_file).unwrap(), text);

    // Rotation: a new current key, the old one kept for opening, still mode 0600.
    let r = run(&["secret-key", "rotate"], &env, None);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let second = current_id(&env);
    assert_ne!(second, first);
    let status = run(&["secret-key", "status"], &env, None).stdout;
    assert!(
        status.contains(&format!("previous key ids: {first}")),
        "{status}"
    );
    let mode = std::fs::metadata(&key_file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    // A key file others may read stops the start with one line naming the variable.
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let r = run(&["serve"], &env, None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("GATEHOUSE_SECRET_KEY_FILE") && r.stderr.contains("chmod 600"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_bad_key_stops_the_start_and_a_given_key_is_used() {
    let r = run(
        &["serve"],
        &[
            ("DATABASE_URL", "sqlite::memory:"),
            ("GATEHOUSE_SECRET_KEY", "too-short"),
        ],
        None,
    );
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .starts_with("gatehouse: GATEHOUSE_SECRET_KEY: must be 32 bytes"),
        "{}",
        r.stderr
    );
    let key = "0101010101010101010101010101010101010101010101010101010101010101";
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}?mode=rwc", dir.path().join("g.db").display());
    let env = [("DATABASE_URL", db.as_str()), ("GATEHOUSE_SECRET_KEY", key)];
    let r = run(&["secret-key", "status"], &env, None);
    assert!(
        r.stdout.starts_with("source: GATEHOUSE_SECRET_KEY\n"),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains(key));
    // No key file is made when the key is given.
    assert!(!dir.path().join("g.db.key").exists());
    // PostgreSQL has no default: the status says what to set.
    let r = run(
        &["secret-key", "status"],
        &[("DATABASE_URL", "postgres://127.0.0.1:1/none")],
        None,
    );
    assert!(r.stdout.contains("GATEHOUSE_SECRET_KEY"), "{}", r.stdout);
}
