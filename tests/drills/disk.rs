//! `SQLite` on a full disk and on a read-only file system: the real binary's database lives on
//! a small tmpfs mounted for the drill (unmounted at the end, always). Write requests must be
//! answered `503` with `Retry-After` in each protocol's shape, with a log line naming the
//! cause; reads keep working where they can; nothing is corrupted; and the server recovers by
//! itself once space is freed or the file system is writable again.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::binary::{self, Server, client, send};

/// Unmounts the drill's tmpfs when dropped (lazily, so that a failed drill never leaves it).
struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn mount(dir: &Path, options: &str) -> Result<Mount, String> {
    let out = Command::new("mount")
        .args(["-t", "tmpfs", "-o", options, "tmpfs"])
        .arg(dir)
        .output()
        .map_err(|e| format!("mount: {e}"))?;
    if out.status.success() {
        Ok(Mount(dir.to_path_buf()))
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

fn remount(dir: &Path, mode: &str) {
    let status = Command::new("mount")
        .args(["-o", &format!("remount,{mode}")])
        .arg(dir)
        .status()
        .expect("mount");
    assert!(status.success(), "remount {mode}");
}

/// Fills the file system of `dir` with one file until it is full; returns the bytes written.
fn fill(dir: &Path) -> (PathBuf, u64) {
    use std::io::Write;
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let chunk = vec![0u8; 4096];
    let mut written = 0;
    while f.write_all(&chunk).is_ok() {
        written += chunk.len() as u64;
    }
    // The last partial chunk, byte by byte would take long: a few small writes finish it.
    while f.write_all(&chunk[..64]).is_ok() {
        written += 64;
    }
    let _ = f.sync_all();
    (path, written)
}

/// One write request's answer, judged.
struct Judged {
    what: &'static str,
    status: Option<StatusCode>,
    retry_after: Option<String>,
    shape: bool,
}

impl std::fmt::Display for Judged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} (Retry-After {:?}, in shape {})",
            self.what,
            self.status.map_or("no answer".into(), |s| s.to_string()),
            self.retry_after,
            self.shape
        )
    }
}

fn judge(what: &'static str, a: &binary::Answer, shape: impl Fn(&Value, &str) -> bool) -> Judged {
    match a {
        Some((s, h, b)) => Judged {
            what,
            status: Some(*s),
            retry_after: h
                .get("retry-after")
                .map(|v| v.to_str().unwrap_or("").to_string()),
            shape: shape(
                b,
                h.get("content-type")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or(""),
            ),
        },
        None => Judged {
            what,
            status: None,
            retry_after: None,
            shape: false,
        },
    }
}

fn oauth_shape(b: &Value, ct: &str) -> bool {
    ct.starts_with("application/json") && b["error"] == "temporarily_unavailable"
}

fn json_rpc_shape(b: &Value, ct: &str) -> bool {
    ct.starts_with("application/json") && b["jsonrpc"] == "2.0" && b["error"]["code"].is_i64()
}

fn html_shape(b: &Value, ct: &str) -> bool {
    ct.starts_with("text/html") && b.as_str().is_some_and(|t| t.contains("<html"))
}

/// The first log line containing `needle`, without terminal colours.
fn line_with(log: &str, needle: &str) -> Option<String> {
    let line = log.lines().find(|l| l.contains(needle))?;
    let mut plain = String::new();
    let mut escape = false;
    for ch in line.chars() {
        match (escape, ch) {
            (false, '\u{1b}') => escape = true,
            (true, 'm') => escape = false,
            (true, _) => {}
            (false, c) => plain.push(c),
        }
    }
    Some(plain)
}

/// What the drill holds to try writes with: a grant, a code not yet redeemed, a note.
struct Fixture {
    client_id: String,
    access: String,
    refresh: String,
    code: String,
    verifier: String,
    note: String,
}

async fn fixture(s: &Server, project: &str) -> Fixture {
    let c = client();
    let browser = client();
    let reg = send(binary::register(s, &c)).await.expect("register");
    let client_id = reg.2["client_id"].as_str().unwrap().to_string();
    let (verifier, challenge) = binary::pkce();
    let code = binary::authorize(s, &browser, &client_id, &challenge)
        .await
        .unwrap();
    let t = send(binary::redeem(s, &c, &client_id, &code, &verifier))
        .await
        .unwrap();
    assert_eq!(t.0, StatusCode::OK, "{}", t.2);
    let access = t.2["access_token"].as_str().unwrap().to_string();
    let refresh = t.2["refresh_token"].as_str().unwrap().to_string();
    let (note, _) = create_note(s, &access, project).await;
    let note = note.expect("a note");
    let (verifier, challenge) = binary::pkce();
    let code = binary::authorize(s, &browser, &client_id, &challenge)
        .await
        .unwrap();
    Fixture {
        client_id,
        access,
        refresh,
        code,
        verifier,
        note,
    }
}

async fn create_note(s: &Server, access: &str, project: &str) -> (Option<String>, binary::Answer) {
    let a = send(binary::mcp(
        s,
        &client(),
        access,
        "tools/call",
        json!({"name": "create_note", "arguments": {
            "project_id": project, "title": "on a small disk", "body": "b"}}),
    ))
    .await;
    let id = a.as_ref().and_then(|(s, _, b)| {
        (*s == StatusCode::OK && b["result"]["isError"] == false)
            .then(|| {
                b["result"]["structuredContent"]["id"]
                    .as_str()
                    .map(str::to_string)
            })
            .flatten()
    });
    (id, a)
}

/// The write requests of every kind: redeeming a code, refreshing, registering, an MCP tool
/// that writes, a sign-in (HTML). Returns each judged against the `503` it should be.
async fn writes(s: &Server, f: &Fixture, project: &str) -> Vec<Judged> {
    let c = client();
    let mut out = vec![];
    let a = send(binary::redeem(s, &c, &f.client_id, &f.code, &f.verifier)).await;
    out.push(judge("code redemption", &a, oauth_shape));
    let form = [
        ("grant_type", "refresh_token"),
        ("refresh_token", f.refresh.as_str()),
        ("client_id", f.client_id.as_str()),
    ];
    let a = send(binary::token(s, &c, &form)).await;
    out.push(judge("refresh", &a, oauth_shape));
    let a = send(binary::register(s, &c)).await;
    out.push(judge("registration", &a, oauth_shape));
    let (_, a) = create_note(s, &f.access, project).await;
    out.push(judge("create_note", &a, json_rpc_shape));
    let browser = client();
    let page = browser
        .get(s.url("/signin"))
        .send()
        .await
        .ok()
        .map(|r| async { r.text().await.unwrap_or_default() });
    let page = match page {
        Some(p) => p.await,
        None => String::new(),
    };
    let csrf = binary::hidden(&page, "csrf_token").unwrap_or_default();
    let a = send(browser.post(s.url("/signin")).form(&[
        ("csrf_token", csrf.as_str()),
        ("next", "/"),
        ("email", binary::EMAIL),
        ("password", binary::PASSWORD),
    ]))
    .await;
    out.push(judge("sign-in", &a, html_shape));
    out
}

/// Reads that need no write: `tools/list` and `get_note` with the grant's access token.
async fn reads(s: &Server, f: &Fixture, project: &str) -> Vec<Option<StatusCode>> {
    let c = client();
    let list = send(binary::mcp(s, &c, &f.access, "tools/list", json!({}))).await;
    let note = send(binary::mcp(
        s,
        &c,
        &f.access,
        "tools/call",
        json!({"name": "get_note", "arguments": {"project_id": project, "note_id": f.note}}),
    ))
    .await;
    let ok = |a: &binary::Answer| {
        a.as_ref().map(|(s, _, b)| {
            if *s == StatusCode::OK && b["result"]["isError"] == true {
                StatusCode::INTERNAL_SERVER_ERROR
            } else {
                *s
            }
        })
    };
    vec![ok(&list), ok(&note)]
}

fn unavailable(j: &Judged) -> bool {
    j.status == Some(StatusCode::SERVICE_UNAVAILABLE) && j.retry_after.is_some() && j.shape
}

async fn integrity(url: &str) -> String {
    crate::kill::consistency(url).await.1.unwrap_or_default()
}

/// The drill; prints why when the tmpfs cannot be mounted and returns.
pub(crate) async fn drill() {
    let dir = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let mounted = match mount(dir.path(), "size=4m") {
        Ok(m) => m,
        Err(e) => {
            println!("read-only / full disk drill skipped: cannot mount a tmpfs here ({e})");
            return;
        }
    };
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("gatehouse.db").display()
    );
    let project = binary::prepare(&url).await;
    let s = Server::start(&url, binary::free_port(), &logs.path().join("log"), &[]).await;
    let f = fixture(&s, &project).await;
    let mut failures = vec![];

    // (b) A full disk.
    let mark = s.mark("disk full");
    let (filler, filled) = fill(dir.path());
    let full = writes(&s, &f, &project).await;
    let full_reads = reads(&s, &f, &project).await;
    let log = s.log_since(mark);
    let named = line_with(&log, "database or disk is full");
    println!("  log: {}", named.as_deref().unwrap_or("(nothing)"));
    let named = named.is_some();
    std::fs::remove_file(&filler).unwrap();
    let after = writes(&s, &f, &project).await;
    let full_integrity = integrity(&url).await;
    println!("full disk (tmpfs of 4 MiB, {filled} bytes of filler):");
    for j in &full {
        println!("  {j}");
    }
    println!(
        "  reads while full: tools/list, get_note {full_reads:?}; log names the cause: {named}"
    );
    println!(
        "  after freeing the space: {}; integrity_check {full_integrity}",
        after
            .iter()
            .map(|j| format!("{} {:?}", j.what, j.status))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for j in &full {
        if !unavailable(j) {
            failures.push(format!("full disk: {j}"));
        }
    }
    if !named {
        failures.push(format!("full disk: no log line names the cause:\n{log}"));
    }
    if full_reads.iter().any(|r| *r != Some(StatusCode::OK)) {
        failures.push(format!("full disk: reads {full_reads:?}"));
    }
    if after[..3]
        .iter()
        .any(|j| !j.status.is_some_and(|s| s.is_success()))
        || after[3].status != Some(StatusCode::OK)
        || after[4].status != Some(StatusCode::SEE_OTHER)
    {
        failures.push("full disk: no recovery after freeing space".into());
    }
    if full_integrity != "ok" {
        failures.push(format!("full disk: integrity_check {full_integrity}"));
    }

    // (a) A read-only file system: the server is started on it, then it is made writable.
    let f = fixture(&s, &project).await;
    s.kill9();
    remount(dir.path(), "ro");
    let mark = s.mark("read-only file system");
    let started = s.try_restart(Duration::from_secs(20)).await;
    println!("read-only file system: server start {started:?}");
    match started {
        Ok(()) => {
            let ro = writes(&s, &f, &project).await;
            let ro_reads = reads(&s, &f, &project).await;
            let log = s.log_since(mark);
            let named = line_with(&log, "readonly database");
            println!("  log: {}", named.as_deref().unwrap_or("(nothing)"));
            let named = named.is_some();
            remount(dir.path(), "rw");
            tokio::time::sleep(Duration::from_secs(1)).await;
            let after = writes(&s, &f, &project).await;
            for j in &ro {
                println!("  {j}");
                if !unavailable(j) {
                    failures.push(format!("read-only: {j}"));
                }
            }
            println!(
                "  reads while read-only: tools/list, get_note {ro_reads:?}; log names the \
                 cause: {named}"
            );
            println!(
                "  after remounting read-write: {}",
                after
                    .iter()
                    .map(|j| format!("{} {:?}", j.what, j.status))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            if !named {
                failures.push(format!("read-only: no log line names the cause:\n{log}"));
            }
            if ro_reads.iter().any(|r| *r != Some(StatusCode::OK)) {
                failures.push(format!("read-only: reads {ro_reads:?}"));
            }
            if after[..3]
                .iter()
                .any(|j| !j.status.is_some_and(|s| s.is_success()))
                || after[3].status != Some(StatusCode::OK)
                || after[4].status != Some(StatusCode::SEE_OTHER)
            {
                failures.push("read-only: no recovery after remounting read-write".into());
            }
        }
        Err(e) => {
            let log = s.log_since(mark);
            println!("  the server refused to start: {e}\n{log}");
            failures.push(format!("read-only: the server did not start: {e}"));
            remount(dir.path(), "rw");
        }
    }
    s.kill9();
    let ro_integrity = integrity(&url).await;
    println!("  integrity_check at the end: {ro_integrity}");
    if ro_integrity != "ok" {
        failures.push(format!("read-only: integrity_check {ro_integrity}"));
    }
    drop(mounted);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
