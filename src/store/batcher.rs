//! The store's one batcher: requests of one kind (refresh rotations to commit, lookups to read)
//! queue here; whichever waiting request gets a turn takes every request waiting (at most the
//! batcher's maximum, oldest first) and runs them together in a task of its own, which
//! answers each. Used by the group commits of refresh rotations ([`super::rotations`]) and the
//! batched lookups on `PostgreSQL` ([`super::read_batches`]).
//!
//! - Fresh: a request is run only by a batch taken after it was queued.
//! - The batch runs in a task of its own: a leader whose request is cancelled does not leave
//!   the others of its batch unanswered.
//! - Bounded: a request waits at most [`super::WRITE_TURN_WAIT`] for a turn and as long again
//!   for its answer, then is answered like a busy database ([`StoreError::Unavailable`]).
//! - Withdrawn: a request cancelled, or out of time, while it still waits in the queue is
//!   taken out, so no later batch runs it (a rotation run long after its request was given up
//!   would mark the client's token rotated behind its back).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use super::{StoreError, Unavailable};

/// A request waiting in a [`Batcher`], with where its answer goes.
pub(crate) struct Waiting<I, A> {
    id: u64,
    /// What was asked.
    pub(crate) item: I,
    reply: oneshot::Sender<Result<A, StoreError>>,
}

impl<I, A> Waiting<I, A> {
    /// A request outside any queue, and where its answer arrives (tests of what a batch
    /// answers).
    #[cfg(test)]
    pub(crate) fn detached(item: I) -> (Self, oneshot::Receiver<Result<A, StoreError>>) {
        let (reply, answer) = oneshot::channel();
        (Waiting { id: 0, item, reply }, answer)
    }

    /// Answers this request (an answer nobody waits for any more is dropped).
    pub(crate) fn answer(self, answer: Result<A, StoreError>) {
        let _ = self.reply.send(answer);
    }
}

/// The queue of one kind of request.
pub(crate) struct Batcher<I, A> {
    waiting: Mutex<Vec<Waiting<I, A>>>,
    next_id: AtomicU64,
    max: usize,
}

impl<I, A> Batcher<I, A> {
    /// A queue whose batches take at most `max` requests (at least one).
    pub(crate) fn new(max: usize) -> Self {
        Batcher {
            waiting: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(0),
            max: max.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Waiting<I, A>>> {
        match self.waiting.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Takes up to the maximum of waiting requests, oldest first.
    fn take(&self) -> Vec<Waiting<I, A>> {
        let mut waiting = self.lock();
        let n = waiting.len().min(self.max);
        waiting.drain(..n).collect()
    }

    /// How many requests wait (tests).
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        self.lock().len()
    }

    /// Takes request `id` out of the queue: `false` when a batch already took it.
    fn withdraw(&self, id: u64) -> bool {
        let mut waiting = self.lock();
        match waiting.iter().position(|w| w.id == id) {
            Some(i) => {
                waiting.remove(i);
                true
            }
            None => false,
        }
    }
}

impl<I: Send + 'static, A: Send + 'static> Batcher<I, A> {
    /// Queues `item` and returns its answer: whenever one of `turns` comes free before the
    /// answer, the waiting requests are taken and `run` is spawned with them and the turn,
    /// which it holds until it is done and must answer each of them ([`Waiting::answer`]).
    ///
    /// Errors: what `run` answered; [`Unavailable::NoTurn`] when no turn came within
    /// [`super::WRITE_TURN_WAIT`] while the request still waited, [`Unavailable::NoAnswer`] or
    /// [`Unavailable::LeaderGone`] when a batch took it and gave no answer in time,
    /// [`Unavailable::Closed`] when the turns are closed.
    pub(crate) async fn submit<Run, Done>(
        self: &Arc<Self>,
        item: I,
        turns: &Arc<Semaphore>,
        run: Run,
    ) -> Result<A, StoreError>
    where
        Run: Fn(Vec<Waiting<I, A>>, OwnedSemaphorePermit) -> Done,
        Done: Future<Output = ()> + Send + 'static,
    {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (reply, mut answer) = oneshot::channel();
        self.lock().push(Waiting { id, item, reply });
        let _withdraw_if_dropped = Withdraw { batcher: self, id };
        let deadline = tokio::time::Instant::now() + super::WRITE_TURN_WAIT;
        loop {
            let turn = tokio::select! {
                biased;
                answered = &mut answer => {
                    return answered.unwrap_or(Err(StoreError::Unavailable(Unavailable::LeaderGone)));
                }
                turn = tokio::time::timeout_at(deadline, Arc::clone(turns).acquire_owned()) => turn,
            };
            match turn {
                Ok(Ok(turn)) => {
                    let batch = self.take();
                    if batch.is_empty() {
                        // Ours was taken by a batch already running: its answer comes when
                        // that batch is done. Taking turns again meanwhile would find nothing
                        // to do, again and again, while another turn is free.
                        drop(turn);
                        return super::leader_answer(answer).await;
                    }
                    tokio::spawn(run(batch, turn));
                }
                Ok(Err(_closed)) => return Err(StoreError::Unavailable(Unavailable::Closed)),
                Err(_elapsed) => {
                    if self.withdraw(id) {
                        return Err(StoreError::Unavailable(Unavailable::NoTurn));
                    }
                    // A batch holds it.
                    return super::leader_answer(answer).await;
                }
            }
        }
    }
}

/// Takes request `id` out of its queue when dropped, if no batch has taken it yet.
struct Withdraw<'b, I, A> {
    batcher: &'b Batcher<I, A>,
    id: u64,
}

impl<I, A> Drop for Withdraw<'_, I, A> {
    fn drop(&mut self) {
        self.batcher.withdraw(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Requests that wait while a batch runs are run together by the next one, each answered
    /// with its own answer.
    #[tokio::test]
    async fn waiting_requests_run_together_and_each_gets_its_own_answer() {
        let batcher: Arc<Batcher<u32, u32>> = Arc::new(Batcher::new(64));
        let turns = Arc::new(Semaphore::new(1));
        let sizes = Arc::new(Mutex::new(Vec::new()));
        // Hold the only turn so that every request queues first.
        let held = Arc::clone(&turns).acquire_owned().await.unwrap();
        let asks = (0..10u32).map(|n| {
            let (batcher, turns, sizes) =
                (Arc::clone(&batcher), Arc::clone(&turns), Arc::clone(&sizes));
            tokio::spawn(async move {
                batcher
                    .submit(n, &turns, move |batch, turn| {
                        let sizes = Arc::clone(&sizes);
                        async move {
                            sizes.lock().unwrap().push(batch.len());
                            for w in batch {
                                let doubled = w.item * 2;
                                w.answer(Ok(doubled));
                            }
                            drop(turn);
                        }
                    })
                    .await
            })
        });
        let asks: Vec<_> = asks.collect();
        tokio::task::yield_now().await;
        while batcher.lock().len() < 10 {
            tokio::task::yield_now().await;
        }
        drop(held);
        for (n, ask) in asks.into_iter().enumerate() {
            assert_eq!(ask.await.unwrap().unwrap(), 2 * n as u32);
        }
        assert_eq!(*sizes.lock().unwrap(), [10], "one batch ran all ten");
    }

    /// A request given up while it waits is taken out of the queue: no batch runs it.
    #[tokio::test]
    async fn a_cancelled_request_is_withdrawn() {
        let batcher: Arc<Batcher<u32, u32>> = Arc::new(Batcher::new(64));
        let turns = Arc::new(Semaphore::new(1));
        let held = Arc::clone(&turns).acquire_owned().await.unwrap();
        let waiting = {
            let (batcher, turns) = (Arc::clone(&batcher), Arc::clone(&turns));
            tokio::spawn(async move {
                batcher
                    .submit(1, &turns, |batch, _turn| async move {
                        for w in batch {
                            w.answer(Ok(1));
                        }
                    })
                    .await
            })
        };
        while batcher.lock().is_empty() {
            tokio::task::yield_now().await;
        }
        waiting.abort();
        let _ = waiting.await;
        assert!(
            batcher.lock().is_empty(),
            "the cancelled request was left queued"
        );
        drop(held);
    }
}
