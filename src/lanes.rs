//! Serving lanes: the HTTP connections are served on one single-threaded Tokio runtime per
//! core (a lane), each connection on one lane for its whole life, handed out in turn by the
//! accepting loop ([`crate::server`]).
//!
//! Why: on one multi-threaded runtime every task a request spawns (rmcp's stateless service
//! spawns its serve loop and a handler task per request) and every wake-up woke the other
//! worker thread to look for work, and the requests' tasks moved between the cores; those
//! futex wake-ups and thread switches took about a third of the server's CPU per MCP call
//! (docs/benchmarks.md). On a lane a request's tasks, timers and I/O stay on its thread.
//!
//! What stays as it was: CPU-heavy work never runs on a lane (password hashing has its own
//! workers, [`crate::password`]; large results and blocking `SQLite` writes go to the lane's
//! blocking pool), so a lane only ever runs short steps; the background work of a server (the
//! audit writer, the validation cache's listener, upkeep) runs on the runtime that started it.
//! Each lane serves with a store of its own, made at start ([`crate::store::Store::for_lane`]):
//! on `PostgreSQL` with its own connection pool, so the sockets a lane reads are driven by its
//! own runtime; no thread-local decides which pool a statement uses.
//!
//! "Only short steps" is checked, not only stated: in a debug build every step of a connection
//! served on a lane is timed ([`watched`]), and one that runs longer than [`BUSY_WARNING`]
//! without yielding is logged (`warn`, with the lane's thread and the milliseconds), so work
//! that belongs elsewhere shows up in the test runs. A release build does not time anything.
//!
//! A lane ends when its [`Lanes`] is dropped and it has served what it was given; what its
//! runtime still runs then (a background export, a request past its grace) is abandoned, as a
//! stopping process abandons it.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use crate::store::Store;

/// Longest a debug build lets one step (one poll) of a connection's work run on a lane
/// without yielding before it logs it ([`watched`]).
pub const BUSY_WARNING: Duration = Duration::from_millis(10);

/// Steps that ran longer than their limit without yielding, in this process ([`watched`];
/// always 0 in a release build).
static LONG_STEPS: AtomicU64 = AtomicU64::new(0);

/// How many steps ran longer than their limit without yielding in this process so far.
pub fn long_steps() -> u64 {
    LONG_STEPS.load(Ordering::Relaxed)
}

/// `future` with each of its polls timed in a debug build: a poll that takes longer than
/// `limit` (a lane busy that long without yielding) is counted ([`long_steps`]) and logged at
/// `warn` with the thread's name and the milliseconds. Time spent waiting between polls is
/// not counted. A release build returns `future` itself, untouched.
pub fn watched<F: Future>(future: F, limit: Duration) -> impl Future<Output = F::Output> {
    #[cfg(debug_assertions)]
    {
        async move {
            let mut future = std::pin::pin!(future);
            std::future::poll_fn(|cx| {
                let started = std::time::Instant::now();
                let polled = future.as_mut().poll(cx);
                let took = started.elapsed();
                if took > limit {
                    LONG_STEPS.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        thread = std::thread::current().name().unwrap_or("?"),
                        busy_ms = took.as_millis() as u64,
                        "a lane ran one step longer than its limit without yielding"
                    );
                }
                polled
            })
            .await
        }
    }
    #[cfg(not(debug_assertions))]
    {
        let _ = limit;
        future
    }
}

/// Work handed to a lane: run on the lane's thread, inside its runtime (so that what it
/// spawns runs on that lane), with what the lane serves (`S`, made of the lane's own store).
pub type Job<S> = Box<dyn FnOnce(&S) + Send>;

/// How long a lane's runtime waits, once its lane has ended, for work it still runs.
const LANE_SHUTDOWN: Duration = Duration::from_secs(1);

/// The serving lanes of one server, each serving an `S` of its own.
pub struct Lanes<S> {
    lanes: Vec<tokio::sync::mpsc::UnboundedSender<Job<S>>>,
    next: usize,
}

impl<S: 'static> Lanes<S> {
    /// Starts `count` lanes (at least one), threads named `gh-lane-N` (their blocking pools'
    /// threads `gh-lane-pool`). Each makes, on its own thread and runtime, its store
    /// ([`Store::for_lane`] of `store`, with `per_lane` connections on `PostgreSQL`) and what
    /// it serves, `serve` of that store; the jobs handed to it get that.
    ///
    /// Errors: a thread or runtime that could not be started.
    pub fn start(
        count: usize,
        store: &Store,
        per_lane: u32,
        serve: impl Fn(Store) -> S + Send + Sync + 'static,
    ) -> std::io::Result<Lanes<S>> {
        let serve = std::sync::Arc::new(serve);
        let mut lanes = Vec::with_capacity(count.max(1));
        for n in 0..count.max(1) {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Job<S>>();
            let (ready_tx, ready_rx) = mpsc::sync_channel::<std::io::Result<()>>(1);
            let store = store.clone();
            let serve = std::sync::Arc::clone(&serve);
            std::thread::Builder::new()
                .name(format!("gh-lane-{n}"))
                .spawn(move || run_lane(rx, &store, per_lane, &*serve, ready_tx))?;
            ready_rx
                .recv()
                .unwrap_or_else(|_| Err(std::io::Error::other("a serving lane did not start")))?;
            lanes.push(tx);
        }
        Ok(Lanes { lanes, next: 0 })
    }

    /// How many lanes there are.
    pub fn len(&self) -> usize {
        self.lanes.len()
    }

    /// Always `false`: there is at least one lane.
    pub fn is_empty(&self) -> bool {
        self.lanes.is_empty()
    }

    /// Hands `job` to the next lane in turn. A lane that has ended (its thread panicked)
    /// is skipped; `false` when every lane has ended.
    pub fn run(&mut self, job: Job<S>) -> bool {
        let mut job = job;
        for _ in 0..self.lanes.len() {
            let lane = &self.lanes[self.next % self.lanes.len()];
            self.next = self.next.wrapping_add(1);
            match lane.send(job) {
                Ok(()) => return true,
                Err(tokio::sync::mpsc::error::SendError(back)) => job = back,
            }
        }
        false
    }
}

/// The body of one lane's thread: its runtime, its store and what it serves, serving jobs
/// until its [`Lanes`] is dropped.
fn run_lane<S>(
    mut jobs: tokio::sync::mpsc::UnboundedReceiver<Job<S>>,
    store: &Store,
    per_lane: u32,
    serve: &(dyn Fn(Store) -> S + Send + Sync),
    ready: mpsc::SyncSender<std::io::Result<()>>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_name("gh-lane-pool")
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    runtime.block_on(async move {
        let lane = store.for_lane(per_lane);
        let served = serve(lane.store().clone());
        let _ = ready.send(Ok(()));
        while let Some(job) = jobs.recv().await {
            job(&served);
        }
        drop(served);
        lane.close(LANE_SHUTDOWN).await;
    });
    runtime.shutdown_timeout(LANE_SHUTDOWN);
}

/// How many lanes a server runs: one per core this process may use (at least one).
pub fn default_count() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A step that keeps its thread longer than the limit is counted (and logged); time spent
    /// waiting between steps is not.
    #[cfg(debug_assertions)]
    #[tokio::test]
    async fn a_step_that_does_not_yield_is_noticed() {
        let before = long_steps();
        watched(
            async { std::thread::sleep(Duration::from_millis(30)) },
            BUSY_WARNING,
        )
        .await;
        assert!(long_steps() > before, "a 30 ms step went unnoticed");
        // Waiting 100 ms in total, in steps that yield, under a limit no short step reaches
        // even on a loaded machine: not counted.
        let before = long_steps();
        watched(
            async {
                for _ in 0..4 {
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
            },
            Duration::from_secs(5),
        )
        .await;
        assert_eq!(long_steps(), before, "waiting was counted as a busy step");
    }

    async fn sqlite_store() -> Store {
        Store::connect("sqlite::memory:").await.unwrap()
    }

    /// Each job runs on a lane's thread, in a runtime of its own (what it spawns runs there),
    /// the lanes taken in turn.
    #[tokio::test]
    async fn jobs_run_on_the_lanes_in_turn() {
        let store = sqlite_store().await;
        let mut lanes = Lanes::start(2, &store, 1, |_store| ()).unwrap();
        assert_eq!(lanes.len(), 2);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for i in 0..4 {
            let tx = tx.clone();
            assert!(lanes.run(Box::new(move |()| {
                let name = std::thread::current().name().unwrap_or("").to_string();
                // Spawned on the lane's own runtime: would panic without one.
                tokio::spawn(async move {
                    let _ = tx.send((i, name));
                });
            })));
        }
        drop(tx);
        let mut seen = Vec::new();
        while let Some(item) = rx.recv().await {
            seen.push(item);
        }
        seen.sort();
        let names: Vec<&str> = seen.iter().map(|(_, n)| n.as_str()).collect();
        assert_eq!(names, ["gh-lane-0", "gh-lane-1", "gh-lane-0", "gh-lane-1"]);
    }

    /// A lane whose thread has ended is skipped; when none is left, the job is refused.
    #[tokio::test]
    async fn an_ended_lane_is_skipped() {
        let store = sqlite_store().await;
        let mut lanes = Lanes::start(2, &store, 1, |_store| ()).unwrap();
        let (tx, rx) = mpsc::channel();
        // Ends lane 0: a panicking job ends its thread.
        assert!(lanes.run(Box::new(|()| panic!("a job that panics"))));
        wait_until_ended(&lanes, 0);
        for _ in 0..3 {
            let tx = tx.clone();
            assert!(lanes.run(Box::new(move |()| {
                let _ = tx.send(std::thread::current().name().unwrap_or("").to_string());
            })));
        }
        for _ in 0..3 {
            assert_eq!(
                rx.recv_timeout(Duration::from_secs(5)).unwrap(),
                "gh-lane-1"
            );
        }
        assert!(lanes.run(Box::new(|()| panic!("ends lane 1"))));
        wait_until_ended(&lanes, 1);
        assert!(!lanes.run(Box::new(|()| {})));
    }

    /// Waits (at most 30 s) until lane `n`'s thread has dropped its end of the queue: a
    /// panicking thread unwinds (and may print a backtrace) for a while, during which a job
    /// handed to it would be lost.
    fn wait_until_ended(lanes: &Lanes<()>, n: usize) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !lanes.lanes[n].is_closed() {
            assert!(
                std::time::Instant::now() < deadline,
                "lane {n} did not end after its job panicked"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
