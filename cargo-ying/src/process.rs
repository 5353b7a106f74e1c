//! The child processes cargo ying starts to list and run tests: each in a process group of its own, killed as a
//! group (what a test started dies with it), dying with cargo ying on Linux (a parent-death signal), waited for
//! with a deadline; and SIGINT/SIGTERM to cargo ying, which stop the run instead of killing it outright.

use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// How often a child is polled while waiting for it.
const POLL: Duration = Duration::from_millis(2);

/// Makes `command` start a process group of its own, and (on Linux) die when cargo ying's thread that started it
/// does.
pub fn isolate(command: &mut Command) {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt as _;
        command.process_group(0);
    }
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt as _;
        // SAFETY: getpid is async-signal-safe.
        let parent = unsafe { libc::getpid() };
        let die_with_parent = move || {
            // SAFETY: prctl, getppid and _exit are async-signal-safe and touch no memory of the parent's; the
            // closure allocates nothing, as code between fork and exec must not.
            unsafe {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent died before the signal was armed: nobody is left to wait for this child.
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
            }
            Ok(())
        };
        // SAFETY: the closure is async-signal-safe (see above).
        unsafe {
            command.pre_exec(die_with_parent);
        }
    }
}

/// Kills the process group `child` leads (the child and whatever it started that stayed in its group).
pub fn kill_group(child: &mut Child) {
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
}

/// How waiting for a child ended.
#[derive(Debug)]
pub enum Waited {
    /// It exited.
    Exited(ExitStatus),
    /// It ran past the deadline and was killed with its group.
    TimedOut,
    /// cargo ying was asked to stop (`signal`); the child was killed with its group.
    Interrupted(i32),
    /// Waiting failed.
    Failed(std::io::Error),
}

/// Waits for `child` until `timeout` has passed since `started`, or cargo ying is interrupted; kills its group
/// when it is not waited for to the end, and in any case once it exited (what it left running in its group goes
/// with it).
pub fn wait(child: &mut Child, started: Instant, timeout: Duration) -> Waited {
    let waited = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Waited::Exited(status),
            Ok(None) => {
                if let Some(signal) = interrupted() {
                    break Waited::Interrupted(signal);
                }
                if started.elapsed() >= timeout {
                    break Waited::TimedOut;
                }
                std::thread::sleep(POLL);
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

/// The signal that asked cargo ying to stop, 0 while none has.
static INTERRUPTED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(signal: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    INTERRUPTED.store(signal, Ordering::SeqCst);
}

/// From now on, SIGINT and SIGTERM to cargo ying stop the run: [`interrupted`] says which came, and [`wait`] kills
/// the test it waits for.
pub fn catch_interrupts() {
    #[cfg(unix)]
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let handler: extern "C" fn(libc::c_int) = on_signal;
        // SAFETY: the handler only stores to an atomic; sigaction is given a zeroed, then filled, struct.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = handler as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// The signal that asked cargo ying to stop, if one has.
pub fn interrupted() -> Option<i32> {
    match INTERRUPTED.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

/// The exit code of a run stopped by `signal`, as a shell reports a process it killed: 128 + the signal (130 for
/// SIGINT, 143 for SIGTERM).
pub fn exit_code(signal: i32) -> u8 {
    u8::try_from(128 + signal).unwrap_or(u8::MAX)
}

/// The name of a signal.
pub fn signal_name(signal: i32) -> String {
    #[cfg(unix)]
    {
        let name = match signal {
            libc::SIGABRT => "SIGABRT",
            libc::SIGSEGV => "SIGSEGV",
            libc::SIGBUS => "SIGBUS",
            libc::SIGILL => "SIGILL",
            libc::SIGFPE => "SIGFPE",
            libc::SIGKILL => "SIGKILL",
            libc::SIGTERM => "SIGTERM",
            libc::SIGINT => "SIGINT",
            libc::SIGTRAP => "SIGTRAP",
            _ => return format!("signal {signal}"),
        };
        name.to_owned()
    }
    #[cfg(not(unix))]
    format!("signal {signal}")
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::{Waited, isolate, wait};
    use std::process::Command;
    use std::time::{Duration, Instant};

    /// Whether `pid` still runs (a zombie that no one reaped yet does not).
    fn alive(pid: i32) -> bool {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
        // `pid (comm) S ...`: the state follows the last `)`.
        stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']))
    }

    #[test]
    fn a_timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("grandchild");
        let mut command = Command::new("sh");
        command.arg("-c").arg(format!("sleep 600 & echo $! > {}; wait", pid_file.display()));
        isolate(&mut command);
        let mut child = command.spawn().unwrap();
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
        isolate(&mut command);
        let mut child = command.spawn().unwrap();
        assert!(matches!(wait(&mut child, Instant::now(), Duration::from_secs(600)), Waited::Exited(_)));
        let grandchild: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while alive(grandchild) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!alive(grandchild), "the background process {grandchild} a test left died with its group");
    }
}
