//! The panic hook's work is not the test's: what it allocates while a scope measures (std's message, and with
//! `RUST_BACKTRACE` set the capture and symbolisation of a backtrace, tens of megabytes kept in std's caches) is
//! the profiler's own, so that a panicking test's figures do not depend on the environment.

use crate::base::thread::{THREAD, as_profiler};
use crate::hot::scope;
use std::panic::{self, PanicHookInfo};
use std::sync::Once;

static INSTALLED: Once = Once::new();

/// Wraps the panic hook in place (std's default, or one the program set) once per process: while the panicking
/// thread's heap activity is attributed to a scope, the hook runs as the profiler. A hook set later replaces the
/// wrapper, as it would replace std's.
pub(super) fn install() {
    INSTALLED.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info: &PanicHookInfo<'_>| {
            if THREAD.try_with(|thread| scope::attributed(thread).is_some()).unwrap_or(false) {
                as_profiler(|| previous(info));
            } else {
                previous(info);
            }
        }));
    });
}
