//! The signals cargo ying speaks of and catches: a signal's name, as a crashed test's result and an interrupted
//! run's summary give it, and SIGINT and SIGTERM to cargo ying, which stop a run instead of killing it outright.
//! (The exit code of a run a signal stopped is the contract's: `ying_report::exit_code::stopped_by`.)

use std::sync::atomic::{AtomicI32, Ordering};

/// The signal that asked cargo ying to stop, 0 while none has.
static INTERRUPTED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(signal: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    INTERRUPTED.store(signal, Ordering::SeqCst);
}

/// From now on, SIGINT and SIGTERM to cargo ying stop the run: [`interrupted`] says which came (and the wait for a
/// test process ends, the test killed).
pub(crate) fn catch() {
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
pub(crate) fn interrupted() -> Option<i32> {
    match INTERRUPTED.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

/// The name of a signal (`SIGABRT`), as results and summaries give it.
pub(crate) fn name(signal: i32) -> String {
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

#[cfg(all(test, unix))]
mod tests {
    use super::name;

    #[test]
    fn signals_are_named_as_the_system_names_them() {
        assert_eq!(name(libc::SIGABRT), "SIGABRT");
        assert_eq!(name(libc::SIGKILL), "SIGKILL");
        assert_eq!(name(64), "signal 64");
    }
}
