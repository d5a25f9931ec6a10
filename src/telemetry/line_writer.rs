//! The writer thread that puts log lines on their output (standard error), one wake per batch.
//!
//! A logging thread appends its formatted line to a shared batch; only the line that finds the
//! batch empty wakes the writer thread. The writer then lingers [`LINGER`] so the lines of the
//! next few milliseconds join that batch, takes the whole batch and writes it with one
//! `write_all` and one flush. Under load one wake and one system call serve tens of lines,
//! where a queue of lines wakes its writer once per line.
//!
//! Nothing is dropped and nothing is reordered: lines leave in the order they were appended,
//! each whole (a line is appended under the lock). While [`LIMIT`] bytes or more wait, a
//! logging thread waits for the writer to take them, so memory stays bounded however slow the
//! output's reader is: the batch and the buffer being written hold at most [`LIMIT`] and one
//! line each (their capacity twice that), and a buffer grown past [`KEEP`] is freed once
//! written. [`WriterGuard::finish`] (or the guard's drop) waits up to [`FINISH_WAIT`] for the
//! writer to write everything and hand the output back; a line logged later is written straight
//! through to the output by the thread that logs it, as every line is when the thread cannot
//! be started. An output that panics loses the batch it was writing, not the writer.

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the writer thread waits after a batch's first line before it writes the batch.
/// A line reaches the output this much later than it would be written at once, plus the time
/// the output takes for the batch before it.
pub(crate) const LINGER: Duration = Duration::from_millis(5);

/// Bytes that may wait for the writer thread before a logging thread waits for room (8 MiB,
/// some 20,000 request lines). The batch grows to this only when lines come faster than the
/// output takes them.
pub(crate) const LIMIT: usize = 8 << 20;

/// Capacity the writer keeps in its buffer between batches (256 KiB); one grown larger by a
/// burst is freed once written.
const KEEP: usize = 256 << 10;

/// Longest [`WriterGuard::finish`] waits for the writer thread (an output that takes nothing,
/// or loggers that keep logging, must not keep a stopping process alive).
pub(crate) const FINISH_WAIT: Duration = Duration::from_secs(2);

/// What the output is: anything written from the writer thread, and then from logging threads.
type Output = Box<dyn Write + Send>;

/// The batch waiting for the writer thread, and the output once the thread has ended.
struct Batch {
    /// Whole lines, in the order they were logged.
    bytes: Vec<u8>,
    /// Set by [`WriterGuard::finish`]: the writer thread writes what is left and ends.
    closing: bool,
    /// The output when no writer thread holds it: when the thread could not be started, and
    /// after it has ended. Lines are then written to it by the threads that log them.
    direct: Option<Output>,
}

/// State shared by the logging threads and the writer thread.
struct Shared {
    batch: Mutex<Batch>,
    /// Signalled when a line lands in an empty batch, and on closing.
    filled: Condvar,
    /// Signalled when the writer thread has taken a batch (room for waiting loggers), and
    /// when it has handed the output back (for [`WriterGuard::finish`]).
    taken: Condvar,
    /// [`LIMIT`], or a smaller bound in tests.
    limit: usize,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Batch> {
        // A panic while holding the lock leaves whole lines behind (appends are single
        // `extend_from_slice` calls), so the batch is still good to write.
        self.batch.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The logging side: a [`tracing_subscriber::fmt::MakeWriter`] whose writer appends each
/// `write` (the fmt layer writes one whole line per call) to the batch.
#[derive(Clone)]
pub(crate) struct LineWriter {
    shared: Arc<Shared>,
}

/// Owns the writer thread; [`WriterGuard::finish`] (or dropping the guard) writes out every
/// waiting line and ends the thread.
pub(crate) struct WriterGuard {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// Starts the writer thread (named `thread_name`) over `output`, lingering `linger` after a
/// batch's first line, with at most `limit` bytes waiting. When the operating system refuses
/// the thread, every line is written by the thread that logs it.
pub(crate) fn spawn(
    output: impl Write + Send + 'static,
    thread_name: &str,
    linger: Duration,
    limit: usize,
) -> (LineWriter, WriterGuard) {
    let shared = Arc::new(Shared {
        batch: Mutex::new(Batch {
            bytes: Vec::new(),
            closing: false,
            direct: None,
        }),
        filled: Condvar::new(),
        taken: Condvar::new(),
        limit,
    });
    let output: Output = Box::new(output);
    // The output reaches the thread once it runs, or stays here if it cannot be started;
    // lines logged meanwhile wait in the batch.
    let (hand_over, handed) = std::sync::mpsc::sync_channel::<Output>(1);
    let started = {
        let shared = shared.clone();
        std::thread::Builder::new()
            .name(thread_name.to_owned())
            .spawn(move || {
                if let Ok(output) = handed.recv() {
                    write_batches(&shared, output, linger);
                }
            })
    };
    let thread = match started {
        Ok(thread) => {
            // The receiver lives until the thread has it: the send cannot fail.
            let _ = hand_over.send(output);
            Some(thread)
        }
        Err(_) => {
            shared.lock().direct = Some(output);
            None
        }
    };
    (
        LineWriter {
            shared: shared.clone(),
        },
        WriterGuard { shared, thread },
    )
}

/// The writer thread: waits for a first line, lingers, writes the whole batch; on closing,
/// writes what is left and hands the output back. Ends only on closing, once it finds the
/// batch empty (loggers that never stop logging keep it writing; [`WriterGuard::finish`] does
/// not wait for that longer than [`FINISH_WAIT`]).
fn write_batches(shared: &Shared, mut output: Output, linger: Duration) {
    let mut taken = Vec::new();
    loop {
        let mut batch = shared.lock();
        while batch.bytes.is_empty() && !batch.closing {
            batch = shared
                .filled
                .wait(batch)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if batch.bytes.is_empty() {
            // Closing, and every line is out: later lines go straight to the output.
            batch.direct = Some(output);
            drop(batch);
            shared.taken.notify_all();
            return;
        }
        if !batch.closing && batch.bytes.len() < shared.limit / 2 {
            drop(batch);
            std::thread::sleep(linger);
            batch = shared.lock();
        }
        std::mem::swap(&mut batch.bytes, &mut taken);
        drop(batch);
        shared.taken.notify_all();
        // A log line that cannot be written has nowhere else to go; the next batch tries again.
        // An output that panics loses this batch, and the writer goes on with the next.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            output.write_all(&taken).and_then(|()| output.flush())
        }));
        taken.clear();
        if taken.capacity() > KEEP {
            taken = Vec::new();
        }
    }
}

impl Write for &LineWriter {
    fn write(&mut self, line: &[u8]) -> std::io::Result<usize> {
        let shared = &self.shared;
        let mut batch = shared.lock();
        // Waits while the batch is full and a writer thread is there to take it (a line
        // longer than the limit goes in as soon as the batch has room at all).
        while batch.bytes.len() >= shared.limit && batch.direct.is_none() {
            batch = shared
                .taken
                .wait(batch)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if let Some(direct) = batch.direct.as_mut() {
            direct.write_all(line)?;
            direct.flush()?;
            return Ok(line.len());
        }
        let wake = batch.bytes.is_empty();
        batch.bytes.extend_from_slice(line);
        drop(batch);
        if wake {
            shared.filled.notify_one();
        }
        Ok(line.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        // Lines reach the output within `LINGER`; `WriterGuard::finish` writes them all out.
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LineWriter {
    type Writer = &'a LineWriter;

    fn make_writer(&'a self) -> Self::Writer {
        self
    }
}

impl WriterGuard {
    /// Writes out every waiting line and ends the writer thread: returns once the thread has
    /// handed the output back, or after [`FINISH_WAIT`] (the thread then goes on alone, and
    /// lines still waiting may be lost when the process exits). Later lines are written by
    /// their logging threads directly. A second call returns at once.
    pub(crate) fn finish(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        let deadline = std::time::Instant::now() + FINISH_WAIT;
        let mut batch = self.shared.lock();
        batch.closing = true;
        self.shared.filled.notify_one();
        while batch.direct.is_none() {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return;
            }
            batch = self
                .shared
                .taken
                .wait_timeout(batch, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        drop(batch);
        let _ = thread.join();
    }
}

impl Drop for WriterGuard {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Instant;

    use super::*;

    /// An output that keeps what it is given and counts the `write_all` calls that reach it.
    #[derive(Clone, Default)]
    struct Kept {
        bytes: Arc<Mutex<Vec<u8>>>,
        writes: Arc<AtomicUsize>,
    }

    impl Write for Kept {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.bytes.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
            self.writes.fetch_add(1, Ordering::SeqCst);
            self.write(buf).map(drop)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn lines_of(kept: &Kept) -> Vec<String> {
        String::from_utf8(kept.bytes.lock().unwrap().clone())
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn every_line_of_every_thread_arrives_whole_and_in_its_threads_order() {
        let kept = Kept::default();
        let (writer, mut guard) = spawn(kept.clone(), "test-log", LINGER, LIMIT);
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let writer = writer.clone();
                std::thread::spawn(move || {
                    for i in 0..2_000 {
                        let line = format!("thread={t} line={i} {}\n", "x".repeat(i % 300));
                        (&writer).write_all(line.as_bytes()).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        guard.finish();
        let lines = lines_of(&kept);
        assert_eq!(lines.len(), 8_000);
        let mut next = [0_usize; 4];
        for line in &lines {
            let mut words = line.split(' ');
            let t: usize = words.next().unwrap()["thread=".len()..].parse().unwrap();
            let i: usize = words.next().unwrap()["line=".len()..].parse().unwrap();
            assert_eq!(i, next[t], "thread {t}'s lines out of order");
            assert_eq!(words.next().unwrap_or("").len(), i % 300, "a line was cut");
            next[t] += 1;
        }
    }

    #[test]
    fn lines_logged_a_little_apart_share_a_write() {
        let kept = Kept::default();
        let (writer, mut guard) = spawn(kept.clone(), "test-log", LINGER, LIMIT);
        // 100 lines at least 200 µs apart, some 20 ms or more in all: a writer woken per line
        // would write each on its own (writing one takes far less than the gap); lingering
        // 5 ms, lines close in time leave together, some 25 at a time.
        for i in 0..100 {
            (&writer)
                .write_all(format!("line {i}\n").as_bytes())
                .unwrap();
            std::thread::sleep(Duration::from_micros(200));
        }
        guard.finish();
        assert_eq!(lines_of(&kept).len(), 100);
        let writes = kept.writes.load(Ordering::SeqCst);
        assert!(writes <= 34, "{writes} writes for 100 lines");
    }

    #[test]
    fn a_line_is_written_within_the_linger_without_a_finish() {
        let kept = Kept::default();
        let (writer, _guard) = spawn(kept.clone(), "test-log", LINGER, LIMIT);
        (&writer).write_all(b"one line\n").unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while lines_of(&kept).is_empty() {
            assert!(Instant::now() < deadline, "the line never left");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(lines_of(&kept), ["one line"]);
    }

    /// An output that takes nothing until it is released, a write at a time.
    struct Held {
        release: mpsc::Receiver<()>,
        kept: Kept,
    }

    impl Write for Held {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let _ = self.release.recv();
            self.kept.write(buf)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_stuck_output_makes_loggers_wait_at_the_limit_and_loses_nothing() {
        let kept = Kept::default();
        // A rendezvous: each release hands over one write, and the releaser waits for it.
        let (release, held) = mpsc::sync_channel(0);
        let output = Held {
            release: held,
            kept: kept.clone(),
        };
        let (writer, mut guard) = spawn(output, "test-log", LINGER, 1_000);
        let logged = Arc::new(AtomicUsize::new(0));
        let logger = {
            let (writer, logged) = (writer.clone(), logged.clone());
            std::thread::spawn(move || {
                for i in 0..100 {
                    (&writer)
                        .write_all(format!("{i:099}\n").as_bytes())
                        .unwrap();
                    logged.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        // The output takes nothing: the first batch is stuck in it, the next 1,000 bytes (ten
        // lines) fill the batch, and the logger waits with most of its 100 lines unlogged.
        std::thread::sleep(Duration::from_millis(300));
        let so_far = logged.load(Ordering::SeqCst);
        assert!(so_far <= 30, "{so_far} of 100 lines went in past the limit");
        assert!(writer.shared.lock().bytes.len() <= 1_000);
        // Released, the output takes every batch and the logger finishes.
        let releaser = std::thread::spawn(move || while release.send(()).is_ok() {});
        logger.join().unwrap();
        guard.finish();
        drop(guard);
        drop(writer);
        releaser.join().unwrap();
        let lines = lines_of(&kept);
        assert_eq!(lines.len(), 100);
        for (i, line) in lines.iter().enumerate() {
            assert_eq!(line, &format!("{i:099}"));
        }
    }

    #[test]
    fn a_line_longer_than_the_limit_goes_through_whole() {
        let kept = Kept::default();
        let (writer, mut guard) = spawn(kept.clone(), "test-log", LINGER, 64);
        let long = format!("{}\n", "y".repeat(1_000));
        for _ in 0..3 {
            (&writer).write_all(b"short\n").unwrap();
            (&writer).write_all(long.as_bytes()).unwrap();
        }
        guard.finish();
        let lines = lines_of(&kept);
        assert_eq!(lines.len(), 6);
        assert!(lines.iter().skip(1).step_by(2).all(|l| l.len() == 1_000));
    }

    #[test]
    fn after_finish_a_line_is_written_straight_through() {
        let kept = Kept::default();
        let (writer, mut guard) = spawn(kept.clone(), "test-log", LINGER, LIMIT);
        (&writer).write_all(b"before\n").unwrap();
        guard.finish();
        (&writer).write_all(b"after\n").unwrap();
        assert_eq!(lines_of(&kept), ["before", "after"]);
    }

    #[test]
    fn lines_logged_while_finishing_are_all_written() {
        let kept = Kept::default();
        let (writer, mut guard) = spawn(kept.clone(), "test-log", LINGER, LIMIT);
        let logger = {
            let writer = writer.clone();
            std::thread::spawn(move || {
                for n in 0..20_000 {
                    (&writer).write_all(format!("{n}\n").as_bytes()).unwrap();
                }
            })
        };
        std::thread::sleep(Duration::from_millis(2));
        guard.finish();
        logger.join().unwrap();
        // Lines logged before the writer handed the output back went through it, the rest
        // straight to the output: all of them arrive, in order.
        let deadline = Instant::now() + Duration::from_secs(10);
        while lines_of(&kept).len() < 20_000 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let lines = lines_of(&kept);
        assert_eq!(lines.len(), 20_000, "lines lost across the finish");
        assert!(lines.iter().enumerate().all(|(i, l)| l == &i.to_string()));
    }

    /// An output whose first write panics; it keeps what it is given afterwards.
    struct PanicsOnce {
        panicked: bool,
        kept: Kept,
    }

    impl Write for PanicsOnce {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if !self.panicked {
                self.panicked = true;
                panic!("the output broke");
            }
            self.kept.write(buf)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn an_output_that_panics_loses_its_batch_and_not_the_writer() {
        let kept = Kept::default();
        let output = PanicsOnce {
            panicked: false,
            kept: kept.clone(),
        };
        let (writer, mut guard) = spawn(output, "test-log", LINGER, LIMIT);
        (&writer).write_all(b"lost\n").unwrap();
        std::thread::sleep(LINGER * 10);
        (&writer).write_all(b"kept\n").unwrap();
        guard.finish();
        (&writer).write_all(b"after\n").unwrap();
        assert_eq!(lines_of(&kept), ["kept", "after"]);
    }

    #[test]
    fn finish_gives_up_on_an_output_that_takes_nothing() {
        let kept = Kept::default();
        let (_release, held) = mpsc::sync_channel::<()>(0);
        let output = Held {
            release: held,
            kept: kept.clone(),
        };
        let (writer, mut guard) = spawn(output, "test-log", LINGER, LIMIT);
        (&writer).write_all(b"stuck\n").unwrap();
        std::thread::sleep(LINGER * 4);
        let started = Instant::now();
        guard.finish();
        let took = started.elapsed();
        assert!(took >= FINISH_WAIT, "finish returned after {took:?}");
        assert!(took < FINISH_WAIT * 3, "finish took {took:?}");
    }
}
