//! Password hashing with argon2id (RFC 9106) on a fixed pool of worker threads.
//!
//! Parameters follow the OWASP Password Storage Cheat Sheet's first argon2id configuration:
//! 19 MiB of memory, 2 iterations, 1 degree of parallelism. Verification of an unknown email runs
//! against a dummy hash so that timing does not reveal which emails exist.
//!
//! Every hash and verification runs on a [`PasswordPool`]: a fixed number of threads, each
//! reusing one argon2 memory block (19 MiB) while jobs keep coming, behind a bounded queue. A
//! worker that finds the queue empty after a job gives its block back to the system, so an idle
//! server holds none. Resident memory for password work is therefore at most `workers × 19 MiB`
//! whatever the load, the async runtime never runs argon2, and a burst beyond the queue is
//! refused at once ([`PoolBusy`]) instead of waiting or allocating.
//!
//! The workers run at the lowest scheduling priority the system gives without privileges (on
//! Linux, the `SCHED_IDLE` policy and a nice value of [`WORKER_NICE`] for each worker thread):
//! a flood of sign-ins uses the
//! CPU that MCP, token and introspection requests leave over, never theirs. Under full load a
//! sign-in waits longer, and the bounded queue turns the excess away with 503.
//!
//! After each job a worker rests [`REST_FACTOR`] times as long as the job took ([`MAX_REST`]
//! at most), so that it is busy at most a quarter of the time.
//!
//! A job's requester waits at most [`MAX_WAIT`] for its answer (a saturated CPU can starve
//! `SCHED_IDLE` threads for as long as it stays saturated) and is then answered
//! [`PasswordError::TimedOut`], which the pages turn into 503 with `Retry-After`. A worker skips a
//! job whose requester is gone (timed out, or its request cancelled by a closed connection)
//! instead of hashing for nobody: a flood whose clients give up costs no argon2 work.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use argon2::password_hash::{PasswordHash, SaltString};
use argon2::{Algorithm, Argon2, Block, Params, Version};
use rand::rngs::OsRng;
use tokio::sync::{mpsc, oneshot};

use crate::domain::secret::constant_time_eq;

/// Memory cost in KiB (19 MiB).
pub const MEMORY_KIB: u32 = 19 * 1024;
/// Iterations.
pub const ITERATIONS: u32 = 2;
/// Lanes.
pub const PARALLELISM: u32 = 1;
/// Length of the stored hash, in bytes.
pub const OUTPUT_LEN: usize = 32;
/// Default length of the queue in front of the workers (`GATEHOUSE_PASSWORD_QUEUE`).
pub const DEFAULT_QUEUE: usize = 32;
/// A worker rests after each job [`REST_FACTOR`] times as long as the job took it, at most
/// this long: a password worker is busy at most a quarter of the time. On a machine whose
/// cores MCP and token requests keep busy, argon2 (19 MiB streamed through the caches per
/// check) slows them even at the lowest priority; resting cuts that for a sign-in flood's whole
/// length, at the price of at most a quarter of the sign-in checks per second per worker
/// (docs/benchmarks.md).
pub const MAX_REST: Duration = Duration::from_secs(1);
/// How many times as long as a job took a worker rests after it ([`MAX_REST`]): resting as
/// long as the job left `tools/call`'s p99 16–30 % higher during a flood, three times as long
/// 8–17 % (medians of five pairs, docs/benchmarks.md).
pub const REST_FACTOR: u32 = 3;
/// How long a requester waits for a password job's answer (queue wait and hashing) before
/// it is answered [`PasswordError::TimedOut`].
pub const MAX_WAIT: Duration = Duration::from_secs(20);
/// The nice value of every password worker thread on Linux (19: the lowest priority,
/// `setpriority(2)` on the thread's id).
pub const WORKER_NICE: i32 = 19;

/// Blocks (1 KiB each) of address space reserved for a worker's memory: 33 MiB, more than the
/// 19 MiB our parameters use, so that the worker's memory is one allocation of its own whatever
/// the allocator. The `gatehouse` binary allocates with jemalloc (`src/main.rs`), where it is an
/// extent of its own whose pages, once freed, go back to the system as jemalloc's dirty-page
/// decay purges them (seconds), not kept for other sizes. Where the library runs on glibc's
/// allocator (its tests, another program embedding it), anything over 32 MiB is a mapping of its
/// own, unmapped at once when freed, and it does not raise glibc's mapping threshold as freeing a
/// 19 MiB mapping would (which would make glibc serve later allocations up to that size from
/// heaps it rarely shrinks). Only the blocks a hash uses are ever written, so only they are
/// resident.
const RESERVED_BLOCKS: usize = 33 * 1024;

/// A PHC string of our parameters for a password nobody knows: unknown emails are verified
/// against it so that they cost the same as known ones.
const DUMMY_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRmb3JkdW1teQ$Cnp/5SPPyhvAFuvcsnw/XoqIi3Ss0iqU44W34nuEM8Q";

#[allow(
    clippy::expect_used,
    reason = "constant parameters inside argon2's bounds (a unit test builds them)"
)]
fn params() -> Params {
    Params::new(MEMORY_KIB, ITERATIONS, PARALLELISM, Some(OUTPUT_LEN))
        .expect("argon2 parameters are valid constants")
}

/// The default number of workers: one less than the machine's cores, at least one.
pub fn default_workers() -> usize {
    std::thread::available_parallelism()
        .map(std::num::NonZero::get)
        .unwrap_or(2)
        .saturating_sub(1)
        .max(1)
}

/// Errors from hashing.
#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    /// argon2 refused the input.
    #[error("password hashing failed: {0}")]
    Hash(String),
    /// The worker was lost before answering.
    #[error("password hashing task failed")]
    Join,
    /// The queue is full; try again later.
    #[error(transparent)]
    Busy(#[from] PoolBusy),
    /// No answer within the pool's longest wait ([`MAX_WAIT`] by default); nothing was decided
    /// (the job is skipped if no worker has taken it yet).
    #[error("the password check did not finish in time")]
    TimedOut,
}

/// Every worker is busy and the queue is full: the caller should answer 503 with `Retry-After`.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the password queue is full")]
pub struct PoolBusy;

enum Job {
    Hash {
        password: String,
        reply: oneshot::Sender<Result<String, PasswordError>>,
    },
    Verify {
        password: String,
        stored: Option<String>,
        reply: oneshot::Sender<bool>,
    },
}

impl Job {
    /// Whether nobody waits for this job's answer any more (timed out or cancelled).
    fn requester_gone(&self) -> bool {
        match self {
            Job::Hash { reply, .. } => reply.is_closed(),
            Job::Verify { reply, .. } => reply.is_closed(),
        }
    }
}

/// A job's answer, waited for at most `max_wait`. Errors: [`PasswordError::TimedOut`] after
/// `max_wait`, [`PasswordError::Join`] when the worker was lost.
async fn answer<T>(rx: oneshot::Receiver<T>, max_wait: Duration) -> Result<T, PasswordError> {
    match tokio::time::timeout(max_wait, rx).await {
        Ok(answer) => answer.map_err(|_| PasswordError::Join),
        Err(_) => Err(PasswordError::TimedOut),
    }
}

/// A fixed pool of password workers behind a bounded queue. Cheap to clone; the workers stop
/// when the last clone is dropped.
#[derive(Clone)]
pub struct PasswordPool {
    tx: mpsc::Sender<Job>,
    workers: usize,
    /// Bytes of argon2 memory the workers hold now.
    held: Arc<AtomicUsize>,
    /// Jobs skipped because their requester was gone before a worker took them.
    abandoned: Arc<AtomicU64>,
    /// How long a requester waits for its answer.
    max_wait: Duration,
}

impl std::fmt::Debug for PasswordPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PasswordPool")
            .field("workers", &self.workers)
            .field("free_slots", &self.tx.capacity())
            .finish()
    }
}

/// A reserved place in the queue: the job sent through it is never refused.
pub struct PasswordSlot<'a> {
    permit: mpsc::Permit<'a, Job>,
    max_wait: Duration,
}

impl PasswordPool {
    /// Starts `workers` threads (at least one) and a queue of `queue` jobs (at least one).
    /// Each worker allocates its argon2 memory for a job and keeps it while more jobs wait; it
    /// gives it back when it finds the queue empty.
    pub fn new(workers: usize, queue: usize) -> PasswordPool {
        let workers = workers.max(1);
        let (tx, rx) = mpsc::channel(queue.max(1));
        let rx = Arc::new(Mutex::new(rx));
        let held = Arc::new(AtomicUsize::new(0));
        let abandoned = Arc::new(AtomicU64::new(0));
        for n in 0..workers {
            let rx = Arc::clone(&rx);
            let held = Arc::clone(&held);
            let abandoned = Arc::clone(&abandoned);
            #[allow(
                clippy::expect_used,
                reason = "at startup: a server that cannot start a thread cannot serve"
            )]
            std::thread::Builder::new()
                .name(format!("gatehouse-password-{n}"))
                .spawn(move || {
                    lower_priority();
                    worker(&rx, &held, &abandoned);
                })
                .expect("cannot start a password worker thread");
        }
        PasswordPool {
            tx,
            workers,
            held,
            abandoned,
            max_wait: MAX_WAIT,
        }
    }

    /// This pool with requesters waiting at most `max_wait` for an answer instead of
    /// [`MAX_WAIT`].
    #[must_use]
    pub fn with_max_wait(mut self, max_wait: Duration) -> PasswordPool {
        self.max_wait = max_wait;
        self
    }

    /// Jobs the workers skipped because their requester was gone (timed out or cancelled)
    /// before a worker took them, since the pool started.
    pub fn abandoned(&self) -> u64 {
        self.abandoned.load(Ordering::SeqCst)
    }

    /// Bytes of argon2 memory the workers hold now: `19 MiB` per worker busy with a job or
    /// about to take a waiting one, `0` once the queue has been found empty.
    pub fn memory_held(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }

    /// Reserves a place in the queue without waiting.
    ///
    /// Errors: [`PoolBusy`] when every place is taken.
    pub fn try_reserve(&self) -> Result<PasswordSlot<'_>, PoolBusy> {
        self.tx
            .try_reserve()
            .map(|permit| PasswordSlot {
                permit,
                max_wait: self.max_wait,
            })
            .map_err(|_| PoolBusy)
    }

    /// Whether every place in the queue is taken now ([`PasswordPool::try_reserve`] would
    /// fail): lets a page refuse before it reads a request body.
    pub fn is_full(&self) -> bool {
        self.tx.capacity() == 0
    }

    /// Password jobs waiting or reserved in the queue now (for the metrics).
    pub fn queue_depth(&self) -> usize {
        self.tx.max_capacity() - self.tx.capacity()
    }

    /// Hashes `password` into an argon2id PHC string, waiting for a place in the queue (for the
    /// command line and start-up, where nobody else is waiting).
    pub async fn hash_waiting(&self, password: String) -> Result<String, PasswordError> {
        let permit = self.tx.reserve().await.map_err(|_| PasswordError::Join)?;
        PasswordSlot {
            permit,
            max_wait: self.max_wait,
        }
        .hash(password)
        .await
    }
}

impl PasswordSlot<'_> {
    /// Hashes `password` into an argon2id PHC string with our parameters (RFC 9106, 16-byte
    /// random salt, 32-byte output).
    ///
    /// Errors: [`PasswordError::TimedOut`] after the pool's longest wait, [`PasswordError::Join`]
    /// when the worker was lost, [`PasswordError::Hash`] from argon2.
    pub async fn hash(self, password: String) -> Result<String, PasswordError> {
        let (reply, rx) = oneshot::channel();
        self.permit.send(Job::Hash { password, reply });
        answer(rx, self.max_wait).await?
    }

    /// Verifies `password` against `stored` (a PHC string): whether it matches. With `stored =
    /// None` (unknown account) it verifies against a dummy hash and answers `false`, so both
    /// cost the same; a stored hash that cannot be checked answers `false` (logged).
    ///
    /// Errors: [`PasswordError::TimedOut`] after the pool's longest wait (nothing was decided),
    /// [`PasswordError::Join`] when the worker was lost.
    pub async fn verify(
        self,
        password: String,
        stored: Option<String>,
    ) -> Result<bool, PasswordError> {
        let (reply, rx) = oneshot::channel();
        self.permit.send(Job::Verify {
            password,
            stored,
            reply,
        });
        answer(rx, self.max_wait).await
    }
}

/// Lowers the calling thread's scheduling priority as far as the system allows without
/// privileges. On Linux: the `SCHED_IDLE` policy (`sched_setscheduler(2)`; under contention the
/// thread gets a small share of the CPU, about a fifth of a nice-19 thread's, and any thread
/// that wakes up takes the core from it at once), and a nice value of [`WORKER_NICE`] (`setpriority(2)` on the thread's id), which
/// is what remains if the policy is refused. Elsewhere, or when the system refuses both, the
/// thread keeps the process's priority and a warning says so.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        use thread_priority::{NormalThreadSchedulePolicy, ThreadPriority, ThreadSchedulePolicy};
        if let Err(e) = thread_priority::set_thread_priority_and_policy(
            thread_priority::thread_native_id(),
            ThreadPriority::Min,
            ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle),
        ) {
            tracing::warn!(error = ?e, "password worker keeps the normal scheduling policy");
        }
        let tid = rustix::thread::gettid();
        if let Err(e) = rustix::process::setpriority_process(Some(tid), WORKER_NICE) {
            tracing::warn!(error = %e, "password worker keeps the normal priority");
        }
    }
}

/// One worker: takes jobs until every sender is gone. Its memory block is allocated for a job,
/// reused while jobs are waiting, and freed when the queue is found empty after a job (or
/// another worker is already waiting on it, which means the same).
fn worker(rx: &Mutex<mpsc::Receiver<Job>>, held: &AtomicUsize, abandoned: &AtomicU64) {
    let mut memory: Vec<Block> = Vec::new();
    loop {
        let queue_empty = match rx.try_lock() {
            Ok(rx) => rx.is_empty(),
            Err(_) => true,
        };
        if queue_empty && memory.capacity() > 0 {
            held.fetch_sub(size_of_val(memory.as_slice()), Ordering::SeqCst);
            memory = Vec::new();
        }
        // Only one idle worker waits on the queue; the others wait for the lock.
        let job = match rx.lock() {
            Ok(mut rx) => rx.blocking_recv(),
            Err(_) => None,
        };
        let Some(job) = job else { return };
        if job.requester_gone() {
            // Nobody waits for this answer any more: no argon2 work for it.
            abandoned.fetch_add(1, Ordering::SeqCst);
            continue;
        }
        let started = std::time::Instant::now();
        match job {
            Job::Hash { password, reply } => {
                let _ = reply.send(hash_with(&mut memory, &password, held));
            }
            Job::Verify {
                password,
                stored,
                reply,
            } => {
                let known = stored.is_some();
                let phc = stored.as_deref().unwrap_or(DUMMY_HASH);
                let ok = match verify_with(&mut memory, &password, phc, held) {
                    Ok(ok) => ok,
                    Err(e) => {
                        tracing::error!(error = %e, "stored password hash cannot be checked");
                        false
                    }
                };
                let _ = reply.send(ok && known);
            }
        }
        // The answer is sent: its requester does not wait for this rest, only the next job.
        std::thread::sleep((started.elapsed() * REST_FACTOR).min(MAX_REST));
    }
}

/// The first `blocks` blocks of the worker's memory, growing it when needed (never beyond our
/// parameters' size: a stored hash asking for more is refused) inside [`RESERVED_BLOCKS`] of
/// reserved address space; `held` counts the bytes written.
fn blocks<'m>(
    memory: &'m mut Vec<Block>,
    blocks: usize,
    held: &AtomicUsize,
) -> Result<&'m mut [Block], PasswordError> {
    if blocks > params().block_count() {
        return Err(PasswordError::Hash(format!(
            "the stored hash needs {blocks} KiB of memory, more than {MEMORY_KIB}"
        )));
    }
    if memory.capacity() == 0 {
        memory.reserve_exact(RESERVED_BLOCKS.max(blocks));
    }
    if memory.len() < blocks {
        held.fetch_add(
            (blocks - memory.len()) * size_of::<Block>(),
            Ordering::SeqCst,
        );
        memory.resize(blocks, Block::default());
    }
    Ok(&mut memory[..blocks])
}

fn hash_with(
    memory: &mut Vec<Block>,
    password: &str,
    held: &AtomicUsize,
) -> Result<String, PasswordError> {
    let err = |e: &dyn std::fmt::Display| PasswordError::Hash(e.to_string());
    let params = params();
    let salt = SaltString::generate(&mut OsRng);
    let mut salt_bytes = [0u8; 64];
    let salt_raw = salt.decode_b64(&mut salt_bytes).map_err(|e| err(&e))?;
    let mut out = [0u8; OUTPUT_LEN];
    let memory = blocks(memory, params.block_count(), held)?;
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params.clone())
        .hash_password_into_with_memory(password.as_bytes(), salt_raw, &mut out, memory)
        .map_err(|e| err(&e))?;
    let hash = PasswordHash {
        algorithm: argon2::ARGON2ID_IDENT,
        version: Some(Version::V0x13.into()),
        params: (&params).try_into().map_err(|e| err(&e))?,
        salt: Some(salt.as_salt()),
        hash: Some(argon2::password_hash::Output::new(&out).map_err(|e| err(&e))?),
    };
    Ok(hash.to_string())
}

fn verify_with(
    memory: &mut Vec<Block>,
    password: &str,
    phc: &str,
    held: &AtomicUsize,
) -> Result<bool, PasswordError> {
    let err = |e: &dyn std::fmt::Display| PasswordError::Hash(e.to_string());
    let parsed = PasswordHash::new(phc).map_err(|e| err(&e))?;
    let algorithm = Algorithm::try_from(parsed.algorithm).map_err(|e| err(&e))?;
    let version = match parsed.version {
        Some(v) => Version::try_from(v).map_err(|e| err(&e))?,
        None => Version::V0x13,
    };
    let params = Params::try_from(&parsed).map_err(|e| err(&e))?;
    let (Some(salt), Some(expected)) = (parsed.salt, parsed.hash) else {
        return Err(PasswordError::Hash(
            "the stored hash has no salt or output".into(),
        ));
    };
    let mut salt_bytes = [0u8; 64];
    let salt_raw = salt.decode_b64(&mut salt_bytes).map_err(|e| err(&e))?;
    let mut out = vec![0u8; expected.len()];
    let memory = blocks(memory, params.block_count(), held)?;
    Argon2::new(algorithm, version, params)
        .hash_password_into_with_memory(password.as_bytes(), salt_raw, &mut out, memory)
        .map_err(|e| err(&e))?;
    Ok(constant_time_eq(&out, expected.as_bytes()))
}

/// A one-worker pool for the command line, start-up and tests, created at first use.
fn shared_pool() -> &'static PasswordPool {
    static POOL: OnceLock<PasswordPool> = OnceLock::new();
    POOL.get_or_init(|| PasswordPool::new(1, DEFAULT_QUEUE))
}

/// Hashes a password into an argon2id PHC string on a shared one-worker pool, waiting for a
/// place in its queue (the command line's `account add`).
pub async fn hash_password(password: String) -> Result<String, PasswordError> {
    shared_pool().hash_waiting(password).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use argon2::password_hash::{PasswordHasher, PasswordVerifier};

    #[tokio::test]
    async fn hashes_are_argon2id_with_owasp_parameters_and_verify() {
        let pool = PasswordPool::new(1, 4);
        let h = pool
            .try_reserve()
            .unwrap()
            .hash("a-long-password".into())
            .await
            .unwrap();
        assert!(h.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{h}");
        let verify = |p: &str, s: Option<String>| {
            let pool = pool.clone();
            let p = p.to_string();
            async move { pool.try_reserve().unwrap().verify(p, s).await.unwrap() }
        };
        assert!(verify("a-long-password", Some(h.clone())).await);
        assert!(!verify("wrong-password", Some(h.clone())).await);
        assert!(!verify("a-long-password", None).await);
        // Our hashes are standard PHC strings, and standard ones verify here.
        let parsed = PasswordHash::new(&h).unwrap();
        assert!(
            Argon2::default()
                .verify_password(b"a-long-password", &parsed)
                .is_ok()
        );
        let salt = SaltString::generate(&mut OsRng);
        let theirs = Argon2::new(Algorithm::Argon2id, Version::V0x13, params())
            .hash_password(b"another-password", &salt)
            .unwrap()
            .to_string();
        assert!(verify("another-password", Some(theirs)).await);
        assert!(!verify("x", Some("not a hash".into())).await);
    }

    #[test]
    fn the_dummy_hash_has_our_parameters() {
        let parsed = PasswordHash::new(DUMMY_HASH).unwrap();
        let p = Params::try_from(&parsed).unwrap();
        assert_eq!(
            (p.m_cost(), p.t_cost(), p.p_cost(), p.output_len()),
            (MEMORY_KIB, ITERATIONS, PARALLELISM, Some(OUTPUT_LEN))
        );
        assert_eq!(parsed.algorithm, argon2::ARGON2ID_IDENT);
    }

    /// The nice value and scheduling policy of each of this process's password worker threads
    /// (Linux `/proc`; the thread name is cut to 15 bytes there).
    #[cfg(target_os = "linux")]
    fn worker_priorities() -> Vec<(i32, u32)> {
        let mut seen = Vec::new();
        for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            if !comm.starts_with("gatehouse-passw") {
                continue;
            }
            let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
            // After the command's closing parenthesis: field 3 (state) … field 19 (nice) …
            // field 41 (policy).
            let fields: Vec<&str> = stat
                .rsplit_once(')')
                .map_or("", |(_, rest)| rest)
                .split_whitespace()
                .collect();
            if let (Some(nice), Some(policy)) = (fields.get(16), fields.get(38)) {
                seen.push((nice.parse().unwrap(), policy.parse().unwrap()));
            }
        }
        seen
    }

    /// `SCHED_IDLE` in `sched(7)`.
    #[cfg(target_os = "linux")]
    const SCHED_IDLE: u32 = 5;

    // A sign-in flood must only use the CPU that MCP and token work leave over: every password
    // worker runs under SCHED_IDLE at nice 19 (issue 9: a flood "never touching MCP or token
    // work").
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn workers_run_at_the_lowest_priority() {
        let pool = PasswordPool::new(2, 4);
        let h = pool.try_reserve().unwrap().hash("x".repeat(12)).await;
        assert!(h.is_ok());
        let mut seen = Vec::new();
        for _ in 0..100 {
            seen = worker_priorities();
            if seen.len() >= 2 && seen.iter().all(|&p| p == (WORKER_NICE, SCHED_IDLE)) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!(
            "password worker threads' (nice, policy): {seen:?}, want all ({WORKER_NICE}, {SCHED_IDLE})"
        );
    }

    // Idle RSS (issue 9: under 30 MB): a worker gives its 19 MiB block back once it finds the
    // queue empty, after every job that had no other waiting behind it.
    #[tokio::test]
    async fn an_idle_worker_holds_no_memory() {
        let pool = PasswordPool::new(1, 4);
        assert_eq!(pool.memory_held(), 0, "nothing before the first job");
        for password in ["first password", "second password"] {
            let hash = pool.try_reserve().unwrap().hash(password.into()).await;
            let verified = pool
                .try_reserve()
                .unwrap()
                .verify(password.into(), Some(hash.unwrap()))
                .await
                .unwrap();
            assert!(
                verified,
                "the block given back and taken again still hashes right"
            );
            let mut held = pool.memory_held();
            for _ in 0..200 {
                if held == 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
                held = pool.memory_held();
            }
            assert_eq!(held, 0, "an idle worker still holds {held} bytes");
        }
    }

    #[tokio::test]
    async fn a_full_queue_refuses_at_once() {
        let pool = PasswordPool::new(1, 1);
        // A reserved place is held until its job is sent or the reservation dropped.
        let first = pool.try_reserve().unwrap();
        assert!(pool.try_reserve().is_err(), "queue of one is full");
        drop(first);
        assert!(pool.try_reserve().is_ok(), "a released place is free again");
    }

    // A requester waits at most the pool's longest wait and is answered `TimedOut` (the pages
    // answer 503), and the worker skips the jobs of requesters that are gone instead of
    // hashing for nobody.
    #[tokio::test]
    async fn a_requester_waits_at_most_the_longest_wait_and_its_job_is_then_skipped() {
        // One worker; a verification takes tens of milliseconds, far more than the 1 ms wait.
        let pool = PasswordPool::new(1, 8).with_max_wait(Duration::from_millis(1));
        let jobs = (0..6).map(|i| {
            let pool = pool.clone();
            async move {
                pool.try_reserve()
                    .unwrap()
                    .verify(format!("password {i}"), None)
                    .await
            }
        });
        for answer in futures::future::join_all(jobs).await {
            assert!(matches!(answer, Err(PasswordError::TimedOut)), "{answer:?}");
        }
        // Every requester gave up within about a millisecond, while the one worker was busy
        // with the first job at most: the other five (or all six) are skipped unhashed.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while pool.abandoned() < 5 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let abandoned = pool.abandoned();
        assert!(
            (5..=6).contains(&abandoned),
            "{abandoned} of 6 abandoned jobs skipped"
        );
        // The pool still answers those who wait long enough.
        let pool = pool.with_max_wait(MAX_WAIT);
        let hash = pool.try_reserve().unwrap().hash("still works".into()).await;
        assert!(
            pool.try_reserve()
                .unwrap()
                .verify("still works".into(), Some(hash.unwrap()))
                .await
                .unwrap()
        );
    }

    // After a job a worker rests three times as long as the job took, before it takes the
    // next one; the requester of the first job does not wait for that rest.
    #[tokio::test]
    async fn a_worker_rests_three_times_as_long_as_each_job_took() {
        let pool = PasswordPool::new(1, 4);
        let hash = pool
            .try_reserve()
            .unwrap()
            .hash("warm".into())
            .await
            .unwrap();
        // Let the worker's rest after that first hash pass.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let start = std::time::Instant::now();
        let verify = |password: &'static str| {
            let (pool, hash) = (pool.clone(), hash.clone());
            async move {
                let answer = pool
                    .try_reserve()
                    .unwrap()
                    .verify(password.into(), Some(hash))
                    .await
                    .unwrap();
                (answer, start.elapsed())
            }
        };
        let first = tokio::spawn(verify("warm"));
        let second = tokio::spawn(verify("cold"));
        let (first, second) = (first.await.unwrap(), second.await.unwrap());
        assert!(first.0 && !second.0);
        // Without the rest the second answer comes after about two jobs; with it, after
        // about five (job, a rest three times as long, job).
        assert!(
            second.1 > first.1.mul_f64(3.5),
            "first answered after {:?}, second after {:?}",
            first.1,
            second.1
        );
    }
}
