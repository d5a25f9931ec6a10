//! Revocation across two `PostgreSQL` instances when the second one's listener hears late
//! (issue 30, finding 2): instance B's `LISTEN` connection passes a proxy that holds every
//! byte the database sends it for 0 s (a healthy path), 1.5 s and 5 s. Each trial makes an
//! API key, uses it on B until B answers it (from its cache where B trusts it), revokes it
//! on A as `gatehouse key revoke` does (`Store::revoke_api_key`), and from the moment that
//! returns asks B with the key for 200 ms: every answer must be `401`.

use std::time::{Duration, Instant};

use gatehouse::domain::secret::{Secret, TokenKind};
use gatehouse::store::keys::NewApiKey;
use reqwest::StatusCode;
use serde_json::json;

use crate::delay_proxy::{DelayProxy, target_of};
use crate::helpers::{TestApp, TestDb, spawn_app_with, spawn_instance};

/// `tools/list` on `app` with the API key `key`: the status.
async fn status(c: &reqwest::Client, app: &TestApp, key: &str) -> StatusCode {
    c.post(app.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/list")
        .bearer_auth(key)
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "drill", "version": "1"}
            }}}),
        )
        .send()
        .await
        .map_or(StatusCode::BAD_GATEWAY, |r| r.status())
}

/// The drill; `trials` per delay.
pub(crate) async fn drill(trials: usize) {
    let db = TestDb::postgres()
        .await
        .expect("the drill needs GATEHOUSE_TEST_POSTGRES");
    let url = db.url.clone();
    let a = spawn_app_with(move |v| {
        v.insert("DATABASE_URL".into(), url);
        v.insert("GATEHOUSE_AUTH_CACHE".into(), "on".into());
    })
    .await;
    let proxy = DelayProxy::start(target_of(&db.url), Duration::ZERO).await;
    let (issuer, resource) = (a.config.issuer.clone(), a.config.mcp_server_url.clone());
    let (shared, listen) = (db.url.clone(), proxy.url_for(&db.url));
    let b = spawn_instance(&a, move |v| {
        v.insert("DATABASE_URL".into(), shared);
        v.insert("GATEHOUSE_ISSUER".into(), issuer);
        v.insert("MCP_SERVER_URL".into(), resource);
        v.insert("GATEHOUSE_AUTH_CACHE".into(), "on".into());
        v.insert("GATEHOUSE_LISTEN_DATABASE_URL".into(), listen);
    })
    .await;
    let account = a
        .create_account("drill@example.com", "a-long-drill-password")
        .await;
    let c = reqwest::Client::new();
    let mut total_stale = 0;
    for delay_ms in [0u64, 1_500, 5_000] {
        proxy.set_delay(Duration::from_millis(delay_ms));
        // What was already on its way keeps the old delay.
        tokio::time::sleep(Duration::from_millis(delay_ms + 300)).await;
        let (mut asked, mut stale, mut cached_trials) = (0, 0, 0);
        let mut revoke_took = Duration::ZERO;
        for _ in 0..trials {
            let secret = Secret::generate(TokenKind::ApiKey);
            let now = gatehouse::store::now();
            let new = NewApiKey {
                account_id: &account,
                project_id: None,
                name: "drill",
                scope: "mcp:read",
                allowed_ips: &[],
                expires_at: None,
            };
            let id = a
                .store
                .create_api_key(&new, &secret.hash(), now)
                .await
                .unwrap();
            let key = secret.expose();
            // Used on B until B holds it in its cache (at most 1 s; with a late listener B
            // does not trust its cache and never holds it).
            let hash = gatehouse::domain::secret::TokenHash::of(key);
            let warming = Instant::now();
            while warming.elapsed() < Duration::from_secs(1) {
                assert_eq!(status(&c, &b, key).await, StatusCode::OK);
                if b.store.is_cached(hash.as_str()) {
                    cached_trials += 1;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let revoking = Instant::now();
            assert!(a.store.revoke_api_key(&id, now).await.unwrap());
            revoke_took += revoking.elapsed();
            let asking = Instant::now();
            while asking.elapsed() < Duration::from_millis(200) {
                asked += 1;
                if status(&c, &b, key).await != StatusCode::UNAUTHORIZED {
                    stale += 1;
                }
            }
        }
        println!(
            "listener delayed {:.1} s: {trials} revocations, B had the key cached in \
             {cached_trials}; revocation returned after {:.0} ms on average; {asked} requests to B \
             after it returned, {stale} stale answers",
            delay_ms as f64 / 1000.0,
            revoke_took.as_secs_f64() * 1000.0 / trials as f64,
        );
        total_stale += stale;
    }
    assert_eq!(total_stale, 0, "stale answers after a revocation returned");
}
