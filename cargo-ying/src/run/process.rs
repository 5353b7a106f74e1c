//! The child processes cargo ying starts to list and run tests: each in a process group of its own, killed as a
//! group (what a test started dies with it), and with cargo ying however it ends (a watchdog process kills the
//! groups still running when cargo ying is gone), and waited for with a deadline or until cargo ying is asked to
//! stop (`signals`).
//!
//! A test process is started with `posix_spawn` (the standard library's choice when nothing runs between fork
//! and exec): copying cargo ying's address space for each test, as `fork` does, costs milliseconds once cargo ying
//! holds the tests' debug information.

use crate::signals;
use std::io::{BufRead, Write as _};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How often a child is polled while waiting for it, where its exit cannot be waited for (see [`ExitNotice`]).
const POLL: Duration = Duration::from_millis(2);

/// The longest a wait for a child's exit goes without looking at interrupts.
const CHECK: Duration = Duration::from_millis(50);

/// Starts `command` in a process group of its own, watched: if cargo ying ends before the group is killed (see
/// [`kill_group`]), the watchdog kills it.
pub(crate) fn spawn(command: &mut Command) -> std::io::Result<Child> {
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(command, 0);
    let child = command.spawn()?;
    tell_watchdog('+', child.id());
    Ok(child)
}

/// The argument that makes `cargo-ying` the watchdog of the cargo ying that starts it (see [`watchdog`]): not a
/// command of the command line.
pub(crate) const WATCHDOG_ARG: &str = "__ying-watchdog";

/// The watchdog's input, once it is started (with the first process cargo ying watches); `None` when it could not
/// be.
static WATCHDOG: OnceLock<Option<Mutex<ChildStdin>>> = OnceLock::new();

/// The watchdog's process id, once it is started: a child of cargo ying that [`end_adopted`] leaves.
static WATCHDOG_PID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Tells the watchdog that process group `group` started (`+`) or is gone (`-`).
fn tell_watchdog(change: char, group: u32) {
    if !cfg!(unix) {
        return;
    }
    let watchdog = WATCHDOG.get_or_init(|| {
        let mut command = Command::new(std::env::current_exe().ok()?);
        command.arg(WATCHDOG_ARG).stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null());
        // A group of its own: a signal to cargo ying's group (the terminal's Ctrl-C) leaves it to do its work.
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command.spawn().ok()?;
        WATCHDOG_PID.store(child.id(), Ordering::Relaxed);
        child.stdin.take().map(Mutex::new)
    });
    if let Some(input) = watchdog {
        // One short line is written whole. A watchdog that is gone makes the write fail: nothing more to do.
        let mut input = input.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = input.write_all(format!("{change}{group}\n").as_bytes());
    }
}

/// Makes this process the one that takes what its tests leave running when they end (Linux's child subreaper): a
/// process a test moved into a session of its own (`setsid`) is out of the test's group, and would otherwise go to
/// init and outlive the run. [`end_adopted`] ends them.
pub(crate) fn adopt_orphans() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(2) with PR_SET_CHILD_SUBREAPER takes integers and touches no memory.
    unsafe {
        libc::prctl(
            libc::PR_SET_CHILD_SUBREAPER,
            1 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        );
    }
}

/// Kills and reaps every child of this process but the watchdog, with the process groups they lead: once every test
/// process it started has ended and been waited for, those are what tests left running, adopted ([`adopt_orphans`]),
/// and what they started in turn (adopted as they are killed). Returns how many were ended.
pub(crate) fn end_adopted() -> usize {
    let mut ended = 0;
    #[cfg(target_os = "linux")]
    {
        // The groups killed so far: a process of one, adopted as it dies, is reaped and not counted again.
        let mut killed = std::collections::BTreeSet::new();
        for _ in 0..100 {
            let watchdog = WATCHDOG_PID.load(Ordering::Relaxed);
            let adopted: Vec<u32> = children().into_iter().filter(|&pid| pid != watchdog).collect();
            if adopted.is_empty() {
                break;
            }
            for pid in adopted {
                let stat = Stat::of(pid);
                let running = stat.as_ref().is_some_and(Stat::running);
                let group = stat.and_then(|stat| libc::pid_t::try_from(stat.group).ok());
                let Ok(pid) = libc::pid_t::try_from(pid) else { continue };
                // SAFETY: kill(2) and waitpid(2) take integers (the status pointer may be null). `pid` is a child of
                // this process that nothing here waits for, not reaped, so it and the group it leads (if it leads
                // one: a group's id is its leader's pid, never reused while the group lives) are still the ones it
                // names.
                unsafe {
                    libc::kill(-pid, libc::SIGKILL);
                    libc::kill(pid, libc::SIGKILL);
                    libc::waitpid(pid, std::ptr::null_mut(), 0);
                }
                ended += usize::from(running && !group.is_some_and(|group| killed.contains(&group)));
                killed.insert(pid);
            }
        }
    }
    ended
}

/// The process ids of this process's children, alive or not yet reaped: from each of its threads' `children`
/// in `/proc` (a child is its parent thread's), else, on a kernel without those files, by looking at the parent of
/// every process.
#[cfg(target_os = "linux")]
fn children() -> Vec<u32> {
    let parse = |text: &str| text.split_whitespace().filter_map(|pid| pid.parse::<u32>().ok()).collect::<Vec<_>>();
    let listed: Option<Vec<u32>> = std::fs::read_dir("/proc/self/task").ok().and_then(|tasks| {
        let mut children = Vec::new();
        for task in tasks.flatten() {
            children.extend(parse(&std::fs::read_to_string(task.path().join("children")).ok()?));
        }
        Some(children)
    });
    if let Some(children) = listed {
        return children;
    }
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| Stat::of(pid).is_some_and(|stat| stat.parent == me))
        .collect()
}

/// What `/proc/<pid>/stat` says of a process: its state, parent and process group.
#[cfg(target_os = "linux")]
struct Stat {
    /// `R`, `S`, ..., `Z` for a zombie, `X` for one being reaped.
    state: char,
    parent: u32,
    group: u32,
}

#[cfg(target_os = "linux")]
impl Stat {
    /// The process `pid`'s, if it is there.
    fn of(pid: u32) -> Option<Self> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // `pid (comm) S ppid pgrp ...`: the command may hold anything; the fields follow its last `)`.
        let mut fields = text.rsplit_once(')')?.1.split_whitespace();
        let state = fields.next()?.chars().next()?;
        Some(Self { state, parent: fields.next()?.parse().ok()?, group: fields.next()?.parse().ok()? })
    }

    /// Whether it still runs (a zombie that no one reaped yet does not).
    fn running(&self) -> bool {
        !matches!(self.state, 'Z' | 'X')
    }
}

/// The watchdog (`cargo-ying __ying-watchdog`): `outlive` the cargo ying that started it, whose input it
/// reads. Interrupts are ignored: it ends with its input.
pub(crate) fn watchdog(input: impl BufRead) {
    #[cfg(unix)]
    // SAFETY: ignoring signals changes no memory; the watchdog runs no code on SIGINT or SIGTERM.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
    }
    outlive(input);
}

/// Reads `+GROUP` and `-GROUP` lines from `input` until it ends (the cargo ying that wrote them is gone, however
/// it ended), then kills the groups that started and are not gone.
fn outlive(input: impl BufRead) {
    let mut running = std::collections::BTreeSet::new();
    for line in input.lines() {
        let Ok(line) = line else { break };
        let (change, group) = line.split_at(line.len().min(1));
        let Ok(group) = group.parse::<i32>() else { continue };
        match change {
            "+" => running.insert(group),
            "-" => running.remove(&group),
            _ => continue,
        };
    }
    #[cfg(unix)]
    for group in running {
        // SAFETY: kill has no memory effects; a group that is already gone gives ESRCH, which is fine.
        unsafe {
            libc::kill(-group, libc::SIGKILL);
        }
    }
}

/// Kills the process group of `child` (started by [`spawn`]) when cargo ying is asked to stop, for as long as the
/// stopper lives: for a child whose output is read, where the reading does not look at interrupts.
pub(crate) fn stop_on_interrupt(child: &Child) -> Stopper {
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let group = i32::try_from(child.id()).ok();
    let watching = std::sync::Arc::clone(&done);
    let thread = std::thread::Builder::new().name("ying-stopper".into()).spawn(move || {
        while !watching.load(std::sync::atomic::Ordering::SeqCst) {
            if signals::interrupted().is_some() {
                #[cfg(unix)]
                if let Some(group) = group {
                    // SAFETY: kill has no memory effects; a group that is already gone gives ESRCH, which is fine.
                    unsafe {
                        libc::kill(-group, libc::SIGKILL);
                    }
                }
                return;
            }
            std::thread::sleep(CHECK);
        }
    });
    Stopper { done, thread: thread.ok() }
}

/// Watches for an interrupt until dropped (see [`stop_on_interrupt`]).
pub(crate) struct Stopper {
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Stopper {
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Kills the process group `child` leads (the child and whatever it started that stayed in its group), and tells
/// the watchdog it is gone.
pub(crate) fn kill_group(child: &mut Child) {
    #[cfg(unix)]
    {
        if let Ok(group) = i32::try_from(child.id()) {
            // SAFETY: kill has no memory effects; a group that is already gone gives ESRCH, which is fine.
            unsafe {
                libc::kill(-group, libc::SIGKILL);
            }
        }
    }
    let _ = child.kill();
    tell_watchdog('-', child.id());
}

/// How waiting for a child ended.
#[derive(Debug)]
pub(crate) enum Waited {
    /// It exited.
    Exited(ExitStatus),
    /// It ran past the deadline and was killed with its group.
    TimedOut,
    /// cargo ying was asked to stop (`signal`); the child was killed with its group.
    Interrupted(i32),
    /// The run stopped the tests running (`--max-fail N:immediate`); the child was killed with its group.
    Cancelled,
    /// Waiting failed.
    Failed(std::io::Error),
}

/// Waits for `child` until `timeout` has passed since `started`, or cargo ying is interrupted; kills its group
/// when it is not waited for to the end, and in any case once it exited (what it left running in its group goes
/// with it).
pub(crate) fn wait(child: &mut Child, started: Instant, timeout: Duration) -> Waited {
    wait_unless(child, started, timeout, &AtomicBool::new(false))
}

/// [`wait`], and stops waiting (the child killed with its group) once `cancel` is set.
pub(crate) fn wait_unless(child: &mut Child, started: Instant, timeout: Duration, cancel: &AtomicBool) -> Waited {
    let exit = ExitNotice::of(child);
    let waited = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Waited::Exited(status),
            Ok(None) => {
                if let Some(signal) = signals::interrupted() {
                    break Waited::Interrupted(signal);
                }
                if cancel.load(Ordering::Relaxed) {
                    break Waited::Cancelled;
                }
                let Some(left) = timeout.checked_sub(started.elapsed()).filter(|left| !left.is_zero()) else {
                    break Waited::TimedOut;
                };
                match &exit {
                    Some(exit) => exit.wait(left.min(CHECK)),
                    None => std::thread::sleep(POLL),
                }
            }
            Err(error) => break Waited::Failed(error),
        }
    };
    kill_group(child);
    if !matches!(waited, Waited::Exited(_)) {
        let _ = child.wait();
    }
    waited
}

/// Waits for `child`, which runs in this process's group (nextest's wrapper), to end. A SIGINT or SIGTERM to this
/// process (caught, see [`signals::catch`]) is passed on to the child once: nextest sends its wrapper SIGTERM at the
/// test's timeout or when the run stops, and the wrapper stays to record how the test then ended. Returns how it
/// ended and the signal this process was sent, if one was.
pub(crate) fn wait_passing_on(child: &mut Child) -> std::io::Result<(ExitStatus, Option<i32>)> {
    let exit = ExitNotice::of(child);
    let mut passed_on = None;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok((status, passed_on.or_else(signals::interrupted)));
        }
        if let (None, Some(signal)) = (passed_on, signals::interrupted()) {
            #[cfg(unix)]
            if let Ok(pid) = libc::pid_t::try_from(child.id()) {
                // SAFETY: kill(2) of the child this process spawned and has not reaped (try_wait said it runs), so
                // the pid is still its.
                unsafe {
                    libc::kill(pid, signal);
                }
            }
            passed_on = Some(signal);
        }
        match &exit {
            Some(exit) => exit.wait(CHECK),
            None => std::thread::sleep(POLL),
        }
    }
}

/// What tells that a child exited as it does (Linux: a pidfd, readable once the process has exited), so that a
/// short test is taken as soon as it ends rather than at the next poll.
struct ExitNotice {
    #[cfg(target_os = "linux")]
    pidfd: std::os::fd::OwnedFd,
}

impl ExitNotice {
    /// The notice of `child`'s exit; `None` where the platform gives none (then the child is polled).
    fn of(child: &Child) -> Option<Self> {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::FromRawFd as _;
            let pid = libc::pid_t::try_from(child.id()).ok()?;
            // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1; it touches no memory.
            let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
            let fd = std::os::fd::RawFd::try_from(fd).ok().filter(|&fd| fd >= 0)?;
            // SAFETY: `fd` is a descriptor just opened for us alone.
            Some(Self { pidfd: unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) } })
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = child;
            None
        }
    }

    /// Waits until the child exits or `at_most` passes (or a signal comes).
    fn wait(&self, at_most: Duration) {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd as _;
            let mut ready = libc::pollfd { fd: self.pidfd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            let millis = libc::c_int::try_from(at_most.as_millis().max(1)).unwrap_or(libc::c_int::MAX);
            // SAFETY: poll reads and writes the one live `pollfd` it is given.
            unsafe {
                libc::poll(&raw mut ready, 1, millis);
            }
        }
        #[cfg(not(target_os = "linux"))]
        std::thread::sleep(at_most.min(POLL));
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::{Waited, outlive, spawn, wait};
    use std::process::Command;
    use std::time::{Duration, Instant};

    /// Whether `pid` still runs (a zombie that no one reaped yet does not).
    fn alive(pid: i32) -> bool {
        u32::try_from(pid).ok().and_then(super::Stat::of).is_some_and(|stat| stat.running())
    }

    #[test]
    fn a_timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("grandchild");
        let mut command = Command::new("sh");
        command.arg("-c").arg(format!("sleep 600 & echo $! > {}; wait", pid_file.display()));
        let mut child = spawn(&mut command).unwrap();
        let started = Instant::now();
        while !pid_file.exists() || std::fs::read_to_string(&pid_file).unwrap().trim().is_empty() {
            std::thread::sleep(Duration::from_millis(5));
        }
        let grandchild: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
        assert!(matches!(wait(&mut child, started, Duration::from_millis(200)), Waited::TimedOut));
        // The grandchild was killed with the group; reaped by init, it goes away.
        let deadline = Instant::now() + Duration::from_secs(30);
        while alive(grandchild) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!alive(grandchild), "the test's own child {grandchild} died with its group");
    }

    #[test]
    fn what_a_test_leaves_running_dies_when_it_exits() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("grandchild");
        let mut command = Command::new("sh");
        command.arg("-c").arg(format!("sleep 600 & echo $! > {}", pid_file.display()));
        let mut child = spawn(&mut command).unwrap();
        assert!(matches!(wait(&mut child, Instant::now(), Duration::from_secs(600)), Waited::Exited(_)));
        let grandchild: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while alive(grandchild) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!alive(grandchild), "the background process {grandchild} a test left died with its group");
    }

    #[test]
    fn the_watchdog_kills_the_groups_still_running_when_its_input_ends() {
        let start = || {
            let mut command = Command::new("sleep");
            command.arg("600");
            std::os::unix::process::CommandExt::process_group(&mut command, 0);
            command.spawn().unwrap()
        };
        let (mut left, mut gone) = (start(), start());
        let (left_id, gone_id) = (left.id(), gone.id());
        outlive(std::io::Cursor::new(format!("+{left_id}\n+{gone_id}\n-{gone_id}\nnoise\n")));
        let status = left.wait().unwrap();
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(libc::SIGKILL));
        assert!(alive(i32::try_from(gone_id).unwrap()), "a group said to be gone is left alone");
        gone.kill().unwrap();
        gone.wait().unwrap();
    }
}
