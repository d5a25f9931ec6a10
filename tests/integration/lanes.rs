//! Serving lanes (`gatehouse::lanes`): each connection is served on one lane's runtime; on
//! `PostgreSQL` a lane's statements run on a pool of its own.

use std::time::Duration;

use gatehouse::lanes::Lanes;
use gatehouse::store::Store;

use crate::helpers::{TestDb, spawn_app};

/// Runs `probe` with the lane's store on a task of the only lane of `lanes` and returns its
/// answer.
async fn on_lane<T: Send + 'static>(
    lanes: &mut Lanes<Store>,
    probe: impl FnOnce(Store) -> futures::future::BoxFuture<'static, T> + Send + 'static,
) -> T {
    let (tx, rx) = tokio::sync::oneshot::channel();
    assert!(lanes.run(Box::new(move |store: &Store| {
        let probed = probe(store.clone());
        tokio::spawn(async move {
            let _ = tx.send(probed.await);
        });
    })));
    tokio::time::timeout(Duration::from_secs(10), rx)
        .await
        .expect("the lane answered in time")
        .expect("the lane answered")
}

/// On `PostgreSQL`: a lane serves with a store of its own whose statements run on the lane's
/// pool (of the lane's size, not the shared pool's), and they work (the store's queries
/// answer, a search takes the lane's permits); the store it was made from keeps its shared
/// pool.
#[tokio::test]
async fn a_lane_on_postgresql_runs_statements_on_a_pool_of_its_own() {
    let Some(db) = TestDb::postgres().await else {
        eprintln!("GATEHOUSE_TEST_POSTGRES is not set: not run here");
        return;
    };
    let store = Store::connect(&db.url).await.unwrap();
    store.migrate().await.unwrap();
    let shared = store.max_connections();
    assert_ne!(shared, 2, "the shared pool is larger than the lane's");
    let mut lanes = Lanes::start(1, &store, 2, |lane: Store| lane).unwrap();
    let (size, answered, searched) = on_lane(&mut lanes, |lane| {
        Box::pin(async move {
            (
                lane.max_connections(),
                lane.ping().await,
                lane.search_notes("no-such-project", "words", 5)
                    .await
                    .is_ok(),
            )
        })
    })
    .await;
    assert_eq!(size, 2, "the lane's store runs on the lane's pool");
    assert!(answered, "a statement on the lane's pool is answered");
    assert!(searched, "a search on the lane is answered");
    assert_eq!(
        store.max_connections(),
        shared,
        "the shared pool is unchanged"
    );
    // Ended lanes leave the store usable from everywhere else.
    drop(lanes);
    assert!(store.ping().await);
    store.close().await;
}

/// On `SQLite` a lane serves with the store itself: every statement runs on the shared pool.
#[tokio::test]
async fn a_lane_on_sqlite_keeps_the_shared_pool() {
    let db = TestDb::sqlite();
    let store = Store::connect(&db.url).await.unwrap();
    store.migrate().await.unwrap();
    let mut lanes = Lanes::start(1, &store, 2, |lane: Store| lane).unwrap();
    let (size, answered) = on_lane(&mut lanes, |lane| {
        Box::pin(async move { (lane.max_connections(), lane.ping().await) })
    })
    .await;
    assert_eq!(size, store.max_connections());
    assert!(answered);
    drop(lanes);
    assert!(
        store.ping().await,
        "ending the lane left the shared pool open"
    );
    store.close().await;
}

/// A running server serves many connections at once, as many as it is given (each request
/// answered), on lane threads: one per core.
#[tokio::test]
async fn a_server_serves_its_connections_on_one_lane_per_core() {
    let app = spawn_app().await;
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let mut calls = Vec::new();
    for _ in 0..(4 * cores) {
        // A client of its own each: a connection of its own each.
        let client = crate::helpers::client_builder().build().unwrap();
        let url = format!("{}/healthz", app.address);
        calls.push(tokio::spawn(async move {
            client.get(url).send().await.map(|r| r.status().as_u16())
        }));
    }
    for call in calls {
        assert_eq!(call.await.unwrap().unwrap(), 200);
    }
    // Serving has begun, so the lanes run (this test process runs other servers too, each
    // with lanes of its own: at least this one's).
    let lanes = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| {
            name.trim()
                .strip_prefix("gh-lane-")
                .is_some_and(|n| n.parse::<usize>().is_ok())
        })
        .count();
    assert!(lanes >= cores, "{lanes} lane threads for {cores} cores");
}
