//! kill -9 under load: clients register, authorize, redeem, refresh, revoke and create notes
//! while the real binary is killed with SIGKILL at a random moment and started again on the
//! same database, `DRILL_KILLS` times (default 10). Everything the server answered 2xx for
//! before a kill is kept in a ledger and checked after every restart.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::Rng;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::binary::{self, Server, client, send};

fn kills() -> usize {
    std::env::var("DRILL_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10)
}

/// One redeemed authorization code and what became of the family it started.
struct Family {
    client_id: String,
    code: String,
    verifier: String,
    /// The newest refresh token the server handed out for the family.
    refresh: String,
    /// The newest access token, unless it was revoked on its own.
    access: Option<String>,
    /// Refresh tokens rotated away, oldest first.
    rotated: Vec<String>,
    /// Revoked (RFC 7009 on its refresh token, or a code replay): must stay refused.
    revoked: bool,
    /// A revocation was sent but its answer never came: its outcome is unknown.
    in_doubt: bool,
}

#[derive(Default)]
struct Ledger {
    clients: Vec<String>,
    families: Vec<Family>,
    revoked_access: Vec<String>,
    notes: Vec<(String, String)>,
    /// Families revoked through RFC 7009 under load (answered 200).
    revocations: usize,
    /// `429` answers: registration and sign-in counters of the one source address, shared by
    /// all workers, lost their optimistic rounds to each other (`Store::admit`).
    throttled: usize,
    acknowledged: usize,
    /// Answers that were neither the expected success nor "no answer" (the server died).
    unexpected: Vec<String>,
}

#[derive(Default, Debug)]
struct Figures {
    checked: usize,
    lost: Vec<String>,
    resurrected: Vec<String>,
    in_doubt: usize,
    codes_replayed: usize,
    rotated_replayed: usize,
}

fn status(a: &binary::Answer) -> Option<StatusCode> {
    a.as_ref().map(|(s, _, _)| *s)
}

fn describe(what: &str, a: &binary::Answer) -> String {
    match a {
        Some((s, _, b)) => format!(
            "{what}: {s} {}",
            b.to_string().chars().take(300).collect::<String>()
        ),
        None => format!("{what}: no answer"),
    }
}

/// One worker's cycles until `stop`: register, authorize, redeem, create a note, refresh,
/// sometimes revoke, read.
async fn worker(
    s: Arc<Server>,
    ledger: Arc<Mutex<Ledger>>,
    browser: reqwest::Client,
    project: String,
    stop: Arc<AtomicBool>,
    label: String,
) {
    let c = client();
    let mut n = 0;
    let unexpected = |what: &str, a: &binary::Answer| match status(a) {
        Some(StatusCode::TOO_MANY_REQUESTS) => ledger.lock().unwrap().throttled += 1,
        Some(_) => ledger.lock().unwrap().unexpected.push(describe(what, a)),
        None => {}
    };
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let reg = send(binary::register(&s, &c)).await;
        if status(&reg) != Some(StatusCode::CREATED) {
            unexpected("register", &reg);
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        let client_id = reg.unwrap().2["client_id"].as_str().unwrap().to_string();
        {
            let mut l = ledger.lock().unwrap();
            l.clients.push(client_id.clone());
            l.acknowledged += 1;
        }
        let (verifier, challenge) = binary::pkce();
        let code = match binary::authorize(&s, &browser, &client_id, &challenge).await {
            Ok(code) => code,
            Err(e) => {
                if e.contains("429") {
                    ledger.lock().unwrap().throttled += 1;
                } else if !stop.load(Ordering::SeqCst) && !e.contains("error sending request") {
                    ledger
                        .lock()
                        .unwrap()
                        .unexpected
                        .push(format!("authorize: {e}"));
                }
                continue;
            }
        };
        let redeemed = send(binary::redeem(&s, &c, &client_id, &code, &verifier)).await;
        if status(&redeemed) != Some(StatusCode::OK) {
            unexpected("redeem", &redeemed);
            continue;
        }
        let body = redeemed.unwrap().2;
        let mut refresh = body["refresh_token"].as_str().unwrap().to_string();
        let mut access = body["access_token"].as_str().unwrap().to_string();
        let index = {
            let mut l = ledger.lock().unwrap();
            l.families.push(Family {
                client_id: client_id.clone(),
                code,
                verifier,
                refresh: refresh.clone(),
                access: Some(access.clone()),
                rotated: vec![],
                revoked: false,
                in_doubt: false,
            });
            l.acknowledged += 1;
            l.families.len() - 1
        };
        for _ in 0..2 {
            let title = format!("{label} note {n}");
            let created = send(binary::mcp(
                &s,
                &c,
                &access,
                "tools/call",
                json!({"name": "create_note", "arguments": {
                    "project_id": project, "title": title, "body": "written under load"}}),
            ))
            .await;
            match &created {
                Some((StatusCode::OK, _, b)) if b["result"]["isError"] == false => {
                    let id = b["result"]["structuredContent"]["id"]
                        .as_str()
                        .unwrap_or_else(|| panic!("a note id in {b}"))
                        .to_string();
                    let mut l = ledger.lock().unwrap();
                    l.notes.push((id, title));
                    l.acknowledged += 1;
                }
                other => unexpected("create_note", other),
            }
            let form = [
                ("grant_type", "refresh_token"),
                ("refresh_token", refresh.as_str()),
                ("client_id", client_id.as_str()),
            ];
            let rotated = send(binary::token(&s, &c, &form)).await;
            if status(&rotated) != Some(StatusCode::OK) {
                unexpected("refresh", &rotated);
                break;
            }
            let body = rotated.unwrap().2;
            let old = std::mem::replace(
                &mut refresh,
                body["refresh_token"].as_str().unwrap().to_string(),
            );
            access = body["access_token"].as_str().unwrap().to_string();
            let mut l = ledger.lock().unwrap();
            let f = &mut l.families[index];
            f.rotated.push(old);
            f.refresh = refresh.clone();
            f.access = Some(access.clone());
            l.acknowledged += 1;
        }
        let choice = rand::thread_rng().gen_range(0..4);
        if choice < 2 {
            // 0: the refresh token (the whole family), 1: the access token alone.
            let token = if choice == 0 { &refresh } else { &access };
            ledger.lock().unwrap().families[index].in_doubt = true;
            let r = send(
                c.post(s.url("/oauth/revoke"))
                    .form(&[("token", token.as_str()), ("client_id", client_id.as_str())]),
            )
            .await;
            if status(&r) == Some(StatusCode::OK) {
                let mut l = ledger.lock().unwrap();
                l.families[index].in_doubt = false;
                if choice == 0 {
                    l.families[index].revoked = true;
                    l.revocations += 1;
                } else {
                    l.families[index].access = None;
                    l.revoked_access.push(access.clone());
                }
                l.acknowledged += 1;
            } else {
                unexpected("revoke", &r);
            }
        }
        let read = send(binary::list_projects(&s, &c, &access)).await;
        if choice >= 2 && status(&read) != Some(StatusCode::OK) {
            unexpected("list_projects", &read);
        }
    }
}

/// Whether an access token opens `/mcp`: `Some(true)` 200, `Some(false)` 401, `None` other.
async fn access_works(s: &Server, c: &reqwest::Client, token: &str) -> Option<bool> {
    let a = send(binary::mcp(s, c, token, "tools/list", json!({}))).await;
    match status(&a) {
        Some(StatusCode::OK) => Some(true),
        Some(StatusCode::UNAUTHORIZED) => Some(false),
        _ => None,
    }
}

async fn refresh_once(s: &Server, c: &reqwest::Client, f: &Family, token: &str) -> binary::Answer {
    let form = [
        ("grant_type", "refresh_token"),
        ("refresh_token", token),
        ("client_id", f.client_id.as_str()),
    ];
    send(binary::token(s, c, &form)).await
}

async fn replay_code(s: &Server, c: &reqwest::Client, f: &Family) -> binary::Answer {
    send(binary::redeem(s, c, &f.client_id, &f.code, &f.verifier)).await
}

fn refused(a: &binary::Answer) -> bool {
    matches!(a, Some((StatusCode::BAD_REQUEST, _, b)) if b["error"] == "invalid_grant")
}

/// Checks every ledger entry against the restarted server. `retire_all`: finally replay
/// every live family's code (which must be refused and revokes the family).
async fn check(
    s: &Server,
    ledger: &Mutex<Ledger>,
    project: &str,
    browser: &reqwest::Client,
    retire_all: bool,
    fig: &mut Figures,
) {
    let c = client();
    let mut l = std::mem::take(&mut *ledger.lock().unwrap());
    // Registered clients: a cookie-less authorization request is sent to sign in, not
    // refused as from an unknown client.
    for client_id in &l.clients {
        let (_, challenge) = binary::pkce();
        let r = send(c.get(binary::authorize_url(s, client_id, &challenge))).await;
        fig.checked += 1;
        let known = matches!(&r, Some((StatusCode::SEE_OTHER, h, _))
            if h["location"].to_str().unwrap_or("").starts_with("/signin"));
        if !known {
            fig.lost.push(describe(&format!("client {client_id}"), &r));
        }
    }
    for (i, f) in l.families.iter_mut().enumerate() {
        if f.in_doubt {
            // The revocation may or may not have happened: what the server says now is the
            // state from here on.
            fig.in_doubt += 1;
            f.in_doubt = false;
            let r = refresh_once(s, &c, f, &f.refresh.clone()).await;
            if status(&r) == Some(StatusCode::OK) {
                let b = r.unwrap().2;
                f.rotated.push(std::mem::take(&mut f.refresh));
                f.refresh = b["refresh_token"].as_str().unwrap().to_string();
                f.access = Some(b["access_token"].as_str().unwrap().to_string());
            } else if refused(&r) {
                f.revoked = true;
            } else {
                fig.lost.push(describe(&format!("family {i} in doubt"), &r));
            }
            continue;
        }
        if f.revoked {
            fig.checked += 1;
            let r = refresh_once(s, &c, f, &f.refresh.clone()).await;
            if !refused(&r) {
                fig.resurrected
                    .push(describe(&format!("revoked family {i}"), &r));
            }
            if let Some(a) = &f.access {
                fig.checked += 1;
                if access_works(s, &c, a).await != Some(false) {
                    fig.resurrected
                        .push(format!("access token of revoked family {i}"));
                }
            }
            continue;
        }
        if let Some(a) = &f.access {
            fig.checked += 1;
            if access_works(s, &c, a).await != Some(true) {
                fig.lost.push(format!("access token of live family {i}"));
            }
        }
        fig.checked += 1;
        let r = refresh_once(s, &c, f, &f.refresh.clone()).await;
        if status(&r) == Some(StatusCode::OK) {
            let b = r.unwrap().2;
            f.rotated.push(std::mem::take(&mut f.refresh));
            f.refresh = b["refresh_token"].as_str().unwrap().to_string();
            f.access = Some(b["access_token"].as_str().unwrap().to_string());
        } else {
            fig.lost
                .push(describe(&format!("refresh token of live family {i}"), &r));
            continue;
        }
        let retire =
            retire_all || (f.rotated.len() >= 3 && rand::thread_rng().gen_range(0..3) == 0);
        if retire {
            // A rotated token whose successor is unused is a retry inside the grace window:
            // the same successor again. One whose successor was used is reuse, refused (a
            // lost rotation would hand out a new pair instead either way).
            fig.checked += 1;
            fig.rotated_replayed += 1;
            let last = f.rotated.last().unwrap().clone();
            let r = refresh_once(s, &c, f, &last).await;
            let same = matches!(&r, Some((StatusCode::OK, _, b))
                if b["refresh_token"] == Value::String(f.refresh.clone()));
            if !same {
                fig.lost
                    .push(describe(&format!("grace retry of family {i}"), &r));
            }
            if f.rotated.len() >= 2 {
                fig.checked += 1;
                fig.rotated_replayed += 1;
                let r = refresh_once(s, &c, f, &f.rotated[0].clone()).await;
                if !refused(&r) {
                    fig.lost
                        .push(describe(&format!("rotation of family {i}"), &r));
                }
            }
            fig.checked += 1;
            fig.codes_replayed += 1;
            let r = replay_code(s, &c, f).await;
            if !refused(&r) {
                fig.lost
                    .push(describe(&format!("redeemed code of family {i}"), &r));
            }
            f.revoked = true;
            let r = refresh_once(s, &c, f, &f.refresh.clone()).await;
            if !refused(&r) {
                fig.resurrected
                    .push(describe(&format!("retired family {i}"), &r));
            }
        }
    }
    for (i, a) in l.revoked_access.iter().enumerate() {
        fig.checked += 1;
        if access_works(s, &c, a).await != Some(false) {
            fig.resurrected.push(format!("revoked access token {i}"));
        }
    }
    // The notes, read with a grant made now.
    let mut attempts = 0;
    let reader = loop {
        attempts += 1;
        if attempts > 1 {
            assert!(attempts <= 10, "no grant to read the notes with");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let reg = send(binary::register(s, &c)).await;
        if status(&reg) == Some(StatusCode::TOO_MANY_REQUESTS) {
            continue;
        }
        let client_id = reg.expect("register").2["client_id"]
            .as_str()
            .expect("a client id")
            .to_string();
        let (verifier, challenge) = binary::pkce();
        let code = binary::authorize(s, browser, &client_id, &challenge).await;
        let code = match code {
            Ok(code) => code,
            Err(e) if e.contains("429") => continue,
            Err(e) => panic!("a code after restart: {e}"),
        };
        let r = send(binary::redeem(s, &c, &client_id, &code, &verifier))
            .await
            .expect("redeem after restart");
        assert_eq!(r.0, StatusCode::OK, "{}", r.2);
        break r.2["access_token"].as_str().unwrap().to_string();
    };
    for (id, title) in &l.notes {
        fig.checked += 1;
        let r = send(binary::mcp(
            s,
            &c,
            &reader,
            "tools/call",
            json!({"name": "get_note", "arguments": {"project_id": project, "note_id": id}}),
        ))
        .await;
        let found = matches!(&r, Some((StatusCode::OK, _, b))
            if b["result"]["structuredContent"]["title"] == Value::String(title.clone()));
        if !found {
            fig.lost.push(describe(&format!("note {id}"), &r));
        }
    }
    let mut shared = ledger.lock().unwrap();
    l.unexpected.append(&mut shared.unexpected);
    l.acknowledged += shared.acknowledged;
    l.revocations += shared.revocations;
    l.throttled += shared.throttled;
    *shared = l;
}

/// Storage-level consistency, on both engines: every family has its code, its first tokens
/// and one head; every used code its family; every rotated token its successor.
pub(crate) const CONSISTENCY: &str = "SELECT \
    (SELECT COUNT(*) FROM token_families f WHERE NOT EXISTS (SELECT 1 FROM service_clients s WHERE s.family_id = f.id) \
        AND NOT EXISTS (SELECT 1 FROM authorization_codes c WHERE c.family_id = f.id)) AS families_without_code, \
    (SELECT COUNT(*) FROM token_families f WHERE NOT EXISTS (SELECT 1 FROM service_clients s WHERE s.family_id = f.id) \
        AND NOT EXISTS (SELECT 1 FROM refresh_tokens r WHERE r.family_id = f.id)) AS families_without_refresh_token, \
    (SELECT COUNT(*) FROM token_families f WHERE NOT EXISTS (SELECT 1 FROM access_tokens a WHERE a.family_id = f.id)) \
        AS families_without_access_token, \
    (SELECT COUNT(*) FROM authorization_codes c WHERE c.used_at IS NOT NULL \
        AND NOT EXISTS (SELECT 1 FROM token_families f WHERE f.id = c.family_id)) AS used_codes_without_family, \
    (SELECT COUNT(*) FROM refresh_tokens r WHERE r.rotated_at IS NOT NULL \
        AND NOT EXISTS (SELECT 1 FROM refresh_tokens n WHERE n.token_hash = r.successor_hash AND n.family_id = r.family_id)) \
        AS rotated_without_successor, \
    (SELECT COUNT(*) FROM (SELECT family_id FROM refresh_tokens WHERE rotated_at IS NULL GROUP BY family_id \
        HAVING COUNT(*) > 1) x) AS families_with_two_heads, \
    (SELECT COUNT(*) FROM token_families f WHERE NOT EXISTS (SELECT 1 FROM service_clients s WHERE s.family_id = f.id) \
        AND NOT EXISTS (SELECT 1 FROM refresh_tokens r WHERE r.family_id = f.id AND r.rotated_at IS NULL)) \
        AS families_without_head";

/// The consistency figures (all must be 0) and, on `SQLite`, `PRAGMA integrity_check`.
pub(crate) async fn consistency(url: &str) -> (Vec<(String, i64)>, Option<String>) {
    use sqlx::{Column, Row};
    sqlx::any::install_default_drivers();
    let pool = sqlx::any::AnyPoolOptions::new()
        .max_connections(1)
        .connect(url)
        .await
        .expect("connect for the consistency check");
    let row = sqlx::query(CONSISTENCY).fetch_one(&pool).await.unwrap();
    let counts = row
        .columns()
        .iter()
        .map(|c| (c.name().to_string(), row.get::<i64, _>(c.ordinal())))
        .collect();
    let integrity = if url.starts_with("sqlite") {
        let rows = sqlx::query("PRAGMA integrity_check")
            .fetch_all(&pool)
            .await
            .unwrap();
        Some(
            rows.iter()
                .map(|r| r.get::<String, _>(0))
                .collect::<Vec<_>>()
                .join("; "),
        )
    } else {
        None
    };
    pool.close().await;
    (counts, integrity)
}

/// The drill on one database URL.
pub(crate) async fn drill(engine: &str, url: &str) {
    const WORKERS: usize = 4;
    let project = binary::prepare(url).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("gatehouse.log");
    let port = binary::free_port();
    let s = Arc::new(
        Server::start(
            url,
            port,
            &log,
            &[("GATEHOUSE_REFRESH_GRACE_SECONDS", "600")],
        )
        .await,
    );
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let browsers: Vec<reqwest::Client> = (0..=WORKERS).map(|_| client()).collect();
    let mut fig = Figures::default();
    let n = kills();
    let started = Instant::now();
    let mut worst_restart = Duration::ZERO;
    let mut bad_consistency = vec![];
    for round in 0..n {
        let stop = Arc::new(AtomicBool::new(false));
        let tasks: Vec<_> = (0..WORKERS)
            .map(|w| {
                tokio::spawn(worker(
                    s.clone(),
                    ledger.clone(),
                    browsers[w].clone(),
                    project.clone(),
                    stop.clone(),
                    format!("round {round} worker {w}"),
                ))
            })
            .collect();
        let wait = rand::thread_rng().gen_range(1000..4000);
        tokio::time::sleep(Duration::from_millis(wait)).await;
        s.kill9();
        stop.store(true, Ordering::SeqCst);
        for t in tasks {
            t.await.unwrap();
        }
        let (counts, integrity) = consistency(url).await;
        if counts.iter().any(|(_, n)| *n != 0) || integrity.as_deref().is_some_and(|i| i != "ok") {
            bad_consistency.push(format!(
                "after kill {}: {counts:?} {integrity:?}",
                round + 1
            ));
        }
        let restarting = Instant::now();
        s.restart().await;
        worst_restart = worst_restart.max(restarting.elapsed());
        check(
            &s,
            &ledger,
            &project,
            &browsers[WORKERS],
            round + 1 == n,
            &mut fig,
        )
        .await;
    }
    s.kill9();
    let (counts, integrity) = consistency(url).await;
    let l = ledger.lock().unwrap();
    println!(
        "kill -9 drill ({engine}): {n} kills in {:.1} s; acknowledged operations {} (clients {}, \
         redeemed codes {}, notes {}, revoked access tokens {}, revoked families {}); ledger \
         checks {}; lost {}; resurrected {}; outcomes in doubt (revocation unanswered at the \
         kill) {}; codes replayed {}; rotated tokens replayed {}; slowest restart to ready \
         {:.2} s; 429 answers {}; unexpected answers {}; consistency {counts:?}; integrity_check {integrity:?}",
        started.elapsed().as_secs_f64(),
        l.acknowledged,
        l.clients.len(),
        l.families.len(),
        l.notes.len(),
        l.revoked_access.len(),
        l.revocations,
        fig.checked,
        fig.lost.len(),
        fig.resurrected.len(),
        fig.in_doubt,
        fig.codes_replayed,
        fig.rotated_replayed,
        worst_restart.as_secs_f64(),
        l.throttled,
        l.unexpected.len(),
    );
    for line in fig.lost.iter().chain(&fig.resurrected).take(10) {
        println!("  {line}");
    }
    for line in l.unexpected.iter().take(10) {
        println!("  unexpected {line}");
    }
    for line in &bad_consistency {
        println!("  {line}");
    }
    assert!(fig.lost.is_empty() && fig.resurrected.is_empty());
    assert!(bad_consistency.is_empty());
    assert!(counts.iter().all(|(_, n)| *n == 0), "{counts:?}");
    if let Some(i) = integrity {
        assert_eq!(i, "ok");
    }
    assert!(l.unexpected.is_empty());
}
