//! Stdio upstreams (`gatehouse upstream add NAME --command 'PROGRAM ARGS…' [--env K=V]…`): a
//! local MCP server run as a child process and spoken to over its stdin and stdout with rmcp's
//! child-process transport ([`rmcp::transport::TokioChildProcess`], MCP `basic/transports`
//! §stdio).
//!
//! How the child is run:
//! - **Environment**: empty but for `PATH` (Gatehouse's own) and the variables `--env` names,
//!   opened from their sealed form only here. Nothing else of Gatehouse's environment reaches
//!   it (`DATABASE_URL`, `GATEHOUSE_SECRET_KEY`, …): a tool that prints its environment shows
//!   only what the operator gave it.
//! - **Working folder**: its own, `gatehouse-upstream-NAME-PID` in the system's temporary
//!   folder, created with mode 0700 when a child starts and removed, if the child left it
//!   empty, once no child of this process runs in it ([`FolderLease`], held by the child's
//!   transport, [`ChildTransport`], until the child has exited); the folders still held
//!   when Gatehouse stops are removed likewise ([`remove_working_folders`]), and empty ones
//!   left by a process that no longer runs (one that was killed) when a server starts
//!   ([`sweep_working_folders`]). A folder the child wrote files into is kept.
//! - **Process group**: the child leads a new process group, so a terminal's Ctrl-C reaches
//!   Gatehouse only, and it is killed when its handle is dropped.
//! - **Pool**: one child per upstream per instance; calls share it, each a JSON-RPC request
//!   of its own, at most `--max-concurrency` in flight.
//! - **Output**: each line the child writes on stdout is bounded by rmcp's line limit
//!   ([`rmcp::transport::async_rw`], 16 MiB; a longer line is dropped); results are then cut
//!   like any upstream's ([`super::result`]). What it writes on stderr is read in chunks, never
//!   kept beyond one line of [`STDERR_LINE_MAX`] bytes, and logged at `debug` level under the
//!   target `gatehouse::upstream::stderr`.
//! - **Restarts**: a child that exited (or failed its handshake) is started again on the next
//!   use, after a back-off ([`Restarts`]): at once the first time, then 1 s, 2 s, 4 s, … up to
//!   [`RESTART_BACKOFF_MAX`]; the back-off starts over once a child has run for
//!   [`STABLE_AFTER`].
//! - **Stop**: on `upstream disable` or `remove`, on a change of its settings, and when
//!   Gatehouse stops, its stdin is closed, then it gets SIGTERM after 3 s and SIGKILL after 3 s
//!   more (rmcp's graceful shutdown, the MCP stdio shutdown sequence).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use process_wrap::tokio::{CommandWrap, KillOnDrop, ProcessGroup};
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::{TokioChildProcess, Transport};
use tokio::io::AsyncReadExt as _;

/// The longest wait before a child that keeps exiting is started again.
pub const RESTART_BACKOFF_MAX: Duration = Duration::from_secs(60);
/// A child that ran this long before it exited is restarted at once (the back-off starts over).
pub const STABLE_AFTER: Duration = Duration::from_secs(60);
/// The most bytes of one stderr line kept and logged; the rest of the line is dropped.
pub const STDERR_LINE_MAX: usize = 512;

/// What a stdio upstream runs: the program, its arguments, the variables given with `--env`
/// (opened: secrets) and its working folder.
#[derive(Clone)]
pub struct StdioCommand {
    /// The program (looked up in `PATH` when it has no `/`).
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// `--env` names and values.
    pub env: Vec<(String, String)>,
    /// Its own working folder.
    pub dir: PathBuf,
}

impl std::fmt::Debug for StdioCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioCommand")
            .field("program", &self.program)
            .field("args", &self.args)
            .field(
                "env",
                &self.env.iter().map(|(name, _)| name).collect::<Vec<_>>(),
            )
            .field("dir", &self.dir)
            .finish()
    }
}

/// The working folder of upstream `upstream`'s child in this process:
/// `gatehouse-upstream-NAME-PID` in the system's temporary folder.
pub fn working_folder(upstream: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "gatehouse-upstream-{upstream}-{}",
        std::process::id()
    ))
}

impl StdioCommand {
    /// The command of upstream `upstream`: `words` is the program then its arguments (at least
    /// one word, as `upstream add` stores it); the working folder is named after the upstream
    /// and this process.
    pub fn new(upstream: &str, words: &[String], env: Vec<(String, String)>) -> Option<Self> {
        let (program, args) = words.split_first()?;
        let dir = working_folder(upstream);
        Some(StdioCommand {
            program: program.clone(),
            args: args.to_vec(),
            env,
            dir,
        })
    }

    /// Starts the child (see the module documentation) and the task that drains its stderr.
    ///
    /// Errors: the working folder could not be made, or the program could not be started
    /// (not found, not executable).
    pub fn spawn(&self, upstream: &str) -> std::io::Result<ChildTransport> {
        let lease = FolderLease::take(&self.dir)?;
        let mut command = tokio::process::Command::new(&self.program);
        command.args(&self.args).env_clear().current_dir(&self.dir);
        if let Some(path) = std::env::var_os("PATH") {
            command.env("PATH", path);
        }
        command.envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let mut wrapped = CommandWrap::from(command);
        wrapped.wrap(KillOnDrop).wrap(ProcessGroup::leader());
        let (child, stderr) = TokioChildProcess::builder(wrapped)
            .stderr(Stdio::piped())
            .spawn()?;
        if let Some(stderr) = stderr {
            tokio::spawn(drain_stderr(upstream.to_string(), stderr));
        }
        let group = child
            .id()
            .and_then(|pid| i32::try_from(pid).ok())
            .and_then(rustix::process::Pid::from_raw);
        Ok(ChildTransport {
            child,
            group,
            _folder: lease,
        })
    }
}

/// A stdio upstream's transport: rmcp's child-process transport, holding the child's working
/// folder ([`FolderLease`]) for as long as it lives, that is until rmcp's client has closed
/// it (the child exited, or was stopped: stdin closed, SIGTERM, SIGKILL) or dropped it (the
/// child is killed). Sending and receiving are rmcp's own.
pub struct ChildTransport {
    child: TokioChildProcess,
    /// The process group the child leads: what is left of it (processes the child started in
    /// the background) is killed when the transport goes.
    group: Option<rustix::process::Pid>,
    // Dropped after `child`.
    _folder: FolderLease,
}

impl Drop for ChildTransport {
    fn drop(&mut self) {
        // The child itself has exited (rmcp's close waited for it) or is killed here with its
        // group; a group with no process left answers ESRCH.
        if let Some(group) = self.group {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
    }
}

impl Transport<RoleClient> for ChildTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.child.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.child.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.child.close()
    }
}

/// The working folders children of this process run in, with how many run in each.
static LIVE_FOLDERS: Mutex<Option<HashMap<PathBuf, usize>>> = Mutex::new(None);

/// One child's hold on its working folder: taking it creates the folder (mode 0700); when the
/// last hold on a folder ends, the folder is removed if it is empty (a folder the child wrote
/// into is kept). Holds are counted because a changed upstream's new child starts in the same
/// folder while the old one is still stopping.
#[derive(Debug)]
pub struct FolderLease {
    dir: PathBuf,
}

impl FolderLease {
    /// Creates `dir` with mode 0700 (its parent must exist), or takes it as it is if it is
    /// already a folder (not a link) of this process's user, setting its mode to 0700; counts
    /// one more child in it.
    ///
    /// Errors: the folder could not be made or its mode set; or something else has its name,
    /// such as a link or another user's folder made beforehand in the shared temporary folder
    /// (a child started there would run with files someone else chose: `npx` looks for
    /// programs in its working folder first).
    pub fn take(dir: &Path) -> std::io::Result<FolderLease> {
        use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, PermissionsExt as _};
        let mut live = LIVE_FOLDERS.lock().unwrap_or_else(PoisonError::into_inner);
        match std::fs::DirBuilder::new().mode(0o700).create(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                // Not followed if a link: the sticky temporary folder keeps others from
                // replacing a folder of ours once it is checked.
                let found = std::fs::symlink_metadata(dir)?;
                if !found.is_dir() || found.uid() != rustix::process::geteuid().as_raw() {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::PermissionDenied,
                        format!(
                            "its working folder {} already exists and is not a folder of this user",
                            dir.display()
                        ),
                    ));
                }
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
            }
            Err(e) => return Err(e),
        }
        *live
            .get_or_insert_with(HashMap::new)
            .entry(dir.to_path_buf())
            .or_default() += 1;
        Ok(FolderLease {
            dir: dir.to_path_buf(),
        })
    }
}

impl Drop for FolderLease {
    fn drop(&mut self) {
        let mut live = LIVE_FOLDERS.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(folders) = live.as_mut() else {
            return;
        };
        let last = match folders.get_mut(&self.dir) {
            Some(count) if *count > 1 => {
                *count -= 1;
                false
            }
            Some(_) => true,
            // Already removed by [`remove_working_folders`].
            None => false,
        };
        if last {
            folders.remove(&self.dir);
            // Only an empty folder goes (`remove_dir` refuses any other).
            let _ = std::fs::remove_dir(&self.dir);
        }
    }
}

/// Removes, when empty, every working folder a child of this process still holds; called
/// once serving (or `gatehouse stdio`) has stopped, when the children are being killed.
pub fn remove_working_folders() {
    let mut live = LIVE_FOLDERS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(folders) = live.take() {
        for dir in folders.into_keys() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Removes the empty `gatehouse-upstream-NAME-PID` folders in `temp` whose process no longer
/// runs (no `/proc/PID`): left by a Gatehouse of this user that was killed. Folders with files
/// in them, other users' folders,
/// those of running processes, those some process still works in (a child that outlived a
/// killed Gatehouse), and anything else are left alone; nothing is done where `/proc` is not
/// mounted. Returns how many were removed. Reads `temp` once, and each process's working
/// folder once if there is a folder to remove (blocking: run it off the async runtime).
pub fn sweep_working_folders(temp: &Path) -> usize {
    use std::os::unix::fs::MetadataExt as _;
    let proc = Path::new("/proc");
    if !proc.join("self").exists() {
        return 0;
    }
    let Ok(entries) = std::fs::read_dir(temp) else {
        return 0;
    };
    let mine = std::process::id();
    let user = rustix::process::geteuid().as_raw();
    let left: Vec<PathBuf> = entries
        .flatten()
        .filter(|entry| {
            let name = entry.file_name();
            let pid = name
                .to_str()
                .and_then(|n| n.strip_prefix("gatehouse-upstream-"))
                .and_then(|rest| rest.rsplit_once('-'))
                .and_then(|(_, pid)| pid.parse::<u32>().ok());
            pid.is_some_and(|pid| pid != mine && !proc.join(pid.to_string()).exists())
                && entry.file_type().is_ok_and(|t| t.is_dir())
                && entry.metadata().is_ok_and(|m| m.uid() == user)
        })
        .map(|entry| entry.path())
        .collect();
    if left.is_empty() {
        return 0;
    }
    let in_use = working_folders_of_processes(proc);
    left.into_iter()
        .filter(|dir| {
            // `/proc/PID/cwd` names the folder without links.
            let real = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone());
            !in_use.contains(&real)
        })
        .filter(|dir| std::fs::remove_dir(dir).is_ok())
        .count()
}

/// The working folders of the processes this user may see (`/proc/PID/cwd`).
fn working_folders_of_processes(proc: &Path) -> std::collections::HashSet<PathBuf> {
    let Ok(entries) = std::fs::read_dir(proc) else {
        return std::collections::HashSet::new();
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|e| std::fs::read_link(e.path().join("cwd")).ok())
        .collect()
}

/// Reads the child's stderr until it closes, logging each line (cut to [`STDERR_LINE_MAX`]
/// bytes) at `debug` level; holds at most one line.
async fn drain_stderr(upstream: String, mut stderr: tokio::process::ChildStderr) {
    let mut chunk = [0u8; 4096];
    let mut line: Vec<u8> = Vec::with_capacity(STDERR_LINE_MAX);
    let mut cut = false;
    loop {
        let n = match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &byte in &chunk[..n] {
            if byte == b'\n' {
                log_line(&upstream, &line, cut);
                line.clear();
                cut = false;
            } else if line.len() < STDERR_LINE_MAX {
                line.push(byte);
            } else {
                cut = true;
            }
        }
    }
    if !line.is_empty() {
        log_line(&upstream, &line, cut);
    }
}

fn log_line(upstream: &str, line: &[u8], cut: bool) {
    let text = String::from_utf8_lossy(line);
    tracing::debug!(
        target: "gatehouse::upstream::stderr",
        upstream,
        cut,
        "{}",
        text.trim_end().escape_debug()
    );
}

/// When a stdio upstream's child may be started again (see the module documentation).
#[derive(Debug, Default)]
pub struct Restarts {
    /// Exits in a row, each within [`STABLE_AFTER`] of its start.
    exits: u32,
    /// When the running (or last) child was started.
    started: Option<Instant>,
    /// No start before this.
    not_before: Option<Instant>,
}

impl Restarts {
    /// How long to wait before the next start, if any.
    pub fn wait(&self, now: Instant) -> Option<Duration> {
        self.not_before
            .and_then(|t| t.checked_duration_since(now))
            .filter(|d| !d.is_zero())
    }

    /// A child was started at `now`.
    pub fn started(&mut self, now: Instant) {
        self.started = Some(now);
    }

    /// The child started last exited (or failed its handshake), seen at `now`: the next start
    /// comes 0 s, 1 s, 2 s, 4 s, … up to [`RESTART_BACKOFF_MAX`] after the start of the child
    /// that exited, for exits in a row. Counted from its start, not from when its exit was
    /// seen (the next use, which may come much later): a child found gone at a use long after
    /// it exited is started at once, and a child that keeps exiting is started at most once
    /// per wait.
    pub fn exited(&mut self, now: Instant) {
        let started = self.started.take();
        let ran = started.map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
        if ran >= STABLE_AFTER {
            self.exits = 0;
        }
        let delay = match self.exits {
            0 => Duration::ZERO,
            n => Duration::from_secs(1u64 << (n - 1).min(6)).min(RESTART_BACKOFF_MAX),
        };
        self.exits = self.exits.saturating_add(1);
        self.not_before = Some(started.unwrap_or(now) + delay);
    }

    /// Whether a child is believed running (started and not seen exiting).
    pub fn running(&self) -> bool {
        self.started.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restarts_back_off_and_start_over_after_a_stable_run() {
        let t0 = Instant::now();
        let mut r = Restarts::default();
        assert_eq!(r.wait(t0), None);
        r.started(t0);
        r.exited(t0);
        assert_eq!(r.wait(t0), None, "the first exit restarts at once");
        let mut now = t0;
        for expected in [1, 2, 4, 8, 16, 32, 60, 60] {
            r.started(now);
            r.exited(now);
            assert_eq!(r.wait(now), Some(Duration::from_secs(expected)));
            now += Duration::from_secs(expected);
            assert_eq!(r.wait(now), None);
        }
        r.started(now);
        r.exited(now + STABLE_AFTER);
        assert_eq!(r.wait(now + STABLE_AFTER), None, "a stable run starts over");
    }

    /// The wait counts from the start of the child that exited: one found gone at a use that
    /// comes later than the wait after its start is started at once; one found gone sooner
    /// waits the rest.
    #[test]
    fn the_wait_counts_from_the_start_of_the_child_that_exited() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut r = Restarts::default();
        r.started(t0);
        r.exited(t0 + s(1));
        assert_eq!(r.wait(t0 + s(1)), None, "the first exit restarts at once");
        r.started(t0 + s(1));
        r.exited(t0 + s(2));
        assert_eq!(r.wait(t0 + s(2)), None, "1 s after its start");
        // The third child exits half a second after its start; the next use comes 6 s later.
        r.started(t0 + s(2));
        r.exited(t0 + s(8));
        assert_eq!(r.wait(t0 + s(8)), None, "2 s after its start have passed");
        // The fourth is found gone at once: it waits 4 s from its start.
        r.started(t0 + s(8));
        r.exited(t0 + s(9));
        assert_eq!(r.wait(t0 + s(9)), Some(s(3)));
    }

    #[test]
    fn the_command_keeps_env_values_out_of_debug() {
        let c = StdioCommand::new(
            "memory",
            &["npx".into(), "-y".into(), "x".into()],
            vec![("API_KEY".into(), "s3cret".into())],
        )
        .unwrap();
        assert_eq!(c.program, "npx");
        assert_eq!(c.args, ["-y", "x"]);
        assert!(
            c.dir
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("gatehouse-upstream-memory-")
        );
        let debug = format!("{c:?}");
        assert!(
            debug.contains("API_KEY") && !debug.contains("s3cret"),
            "{debug}"
        );
        assert!(StdioCommand::new("x", &[], Vec::new()).is_none());
    }

    /// A process id above Linux's highest (`pid_max` is at most 2^22): never running.
    const NEVER_RUNNING: u32 = 4_194_400;

    #[test]
    fn the_sweep_removes_only_empty_folders_of_processes_that_no_longer_run() {
        let temp = tempfile::tempdir().unwrap();
        let at = |name: String| temp.path().join(name);
        let gone = at(format!("gatehouse-upstream-memory-{NEVER_RUNNING}"));
        let dashed = at(format!("gatehouse-upstream-my-tools-{}", NEVER_RUNNING + 1));
        let written = at(format!("gatehouse-upstream-notes-{}", NEVER_RUNNING + 2));
        let running = at("gatehouse-upstream-memory-1".into());
        let mine = at(format!("gatehouse-upstream-memory-{}", std::process::id()));
        let other = at(format!("something-else-{NEVER_RUNNING}"));
        for dir in [&gone, &dashed, &written, &running, &mine, &other] {
            std::fs::create_dir(dir).unwrap();
        }
        std::fs::write(written.join("memory.json"), "{}").unwrap();
        let file = at(format!("gatehouse-upstream-file-{}", NEVER_RUNNING + 3));
        std::fs::write(&file, "").unwrap();

        // A child that outlived its Gatehouse still works in this one.
        let used = at(format!("gatehouse-upstream-orphan-{}", NEVER_RUNNING + 4));
        std::fs::create_dir(&used).unwrap();
        let mut orphan = std::process::Command::new("sleep")
            .arg("30")
            .current_dir(&used)
            .spawn()
            .unwrap();

        assert_eq!(sweep_working_folders(temp.path()), 2);
        assert!(used.exists(), "a folder a process works in stays");
        orphan.kill().unwrap();
        orphan.wait().unwrap();
        assert!(!gone.exists() && !dashed.exists());
        assert!(
            written.join("memory.json").exists(),
            "a folder with files stays"
        );
        assert!(running.exists(), "process 1 runs");
        assert!(mine.exists(), "this process's own folder is in use");
        assert!(
            other.exists() && file.exists(),
            "other names are left alone"
        );
        // Once nothing works in it any more, it goes too.
        assert_eq!(sweep_working_folders(temp.path()), 1);
        assert!(!used.exists());
        assert_eq!(sweep_working_folders(temp.path()), 0);
    }

    #[test]
    fn a_working_folder_goes_with_its_last_child_if_left_empty() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("gatehouse-upstream-lease-1");
        let first = FolderLease::take(&dir).unwrap();
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
        }
        // A changed upstream's new child starts while the old one is stopping.
        let second = FolderLease::take(&dir).unwrap();
        drop(first);
        assert!(dir.exists(), "the second child still runs in it");
        drop(second);
        assert!(!dir.exists(), "the last child left it empty");

        let kept = temp.path().join("gatehouse-upstream-lease-2");
        let lease = FolderLease::take(&kept).unwrap();
        std::fs::write(kept.join("notes.txt"), "x").unwrap();
        drop(lease);
        assert!(
            kept.join("notes.txt").exists(),
            "what the child wrote is kept"
        );

        // A link (or anything but a folder of this user) in its place is refused.
        let linked = temp.path().join("gatehouse-upstream-lease-4");
        std::os::unix::fs::symlink(temp.path(), &linked).unwrap();
        let refused = FolderLease::take(&linked).unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::PermissionDenied);
        let file = temp.path().join("gatehouse-upstream-lease-5");
        std::fs::write(&file, "").unwrap();
        assert!(FolderLease::take(&file).is_err());
        // A folder of this user made before is taken, its mode set to 0700.
        let made = temp.path().join("gatehouse-upstream-lease-6");
        std::fs::create_dir(&made).unwrap();
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&made, std::fs::Permissions::from_mode(0o777)).unwrap();
            let lease = FolderLease::take(&made).unwrap();
            let mode = std::fs::metadata(&made).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
            drop(lease);
        }

        let held = temp.path().join("gatehouse-upstream-lease-3");
        let lease = FolderLease::take(&held).unwrap();
        remove_working_folders();
        assert!(!held.exists(), "removed when the process stops");
        drop(lease);
    }
}
