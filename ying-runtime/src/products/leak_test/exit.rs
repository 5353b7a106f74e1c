//! A process that exits while a leak test's body runs (`std::process::exit` in the body, or in code it calls) never
//! lets the test report what it retained, and a test harness that ends that way reports success. The runner
//! registers an exit handler once; while a body runs, the handler names the test on standard error and ends the
//! process with exit code 101, as a test binary with a failed test does.

use super::plan::LeakTest;
use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::Once;

static REGISTERED: Once = Once::new();
/// Bodies running now, in every thread.
static RUNNING: AtomicUsize = AtomicUsize::new(0);
/// The leak test whose body started last, for the message.
static LAST: AtomicPtr<LeakTest> = AtomicPtr::new(core::ptr::null_mut());

/// While it lives, an exit of the process fails: a leak test's body is running.
pub(super) struct Running(());

impl Running {
    pub(super) fn enter(test: &'static LeakTest) -> Self {
        REGISTERED.call_once(|| {
            // SAFETY: `on_exit` is an `extern "C" fn()` that stays valid for the life of the process.
            if unsafe { libc::atexit(on_exit) } != 0 {
                eprintln!("ying: could not register the exit handler: a leak test that exits will not be reported");
            }
        });
        LAST.store(core::ptr::from_ref(test).cast_mut(), Ordering::Release);
        RUNNING.fetch_add(1, Ordering::AcqRel);
        Self(())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, Ordering::AcqRel);
    }
}

extern "C" fn on_exit() {
    if RUNNING.load(Ordering::Acquire) == 0 {
        return;
    }
    // SAFETY: `LAST` only ever holds null or a `&'static LeakTest`.
    let name = unsafe { LAST.load(Ordering::Acquire).as_ref() }.map_or("?", |test| test.name);
    eprintln!(
        "ying: the process exited while leak test `{name}` was running, so it could not report what it retained; \
         a leak test must return (or panic) to be judged"
    );
    // SAFETY: `_exit` ends the process at once, without running the remaining exit handlers, which is what an
    // exit handler may do.
    unsafe { libc::_exit(101) }
}
