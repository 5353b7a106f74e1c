//! The handshake with the allocation interposer (`ying-preload`), when one measures this process from outside: a
//! leak test that starts says so through the function the interposer exports, and the interposer passes it on to
//! the runtime it carries ([`leak_test_started`](super::unannotated::leak_test_started)), which stops measuring
//! the test from outside. The leak test's own scope measures it, and its allocations no longer go through a second
//! scope.

use ying_report::report::INTERPOSER_LEAK_TEST_STARTED;

/// Tells the allocation interposer, when one measures this process, that a leak test starts on this thread (see
/// [`leak_test_started`](super::unannotated::leak_test_started)): it stops measuring, and the test's allocations
/// no longer go through a second scope.
pub(super) fn hand_over_to_leak_test() {
    #[cfg(unix)]
    {
        // SAFETY: `dlsym` with the default scope and a NUL-terminated name: null, or the interposer's function.
        let address = unsafe { libc::dlsym(libc::RTLD_DEFAULT, INTERPOSER_LEAK_TEST_STARTED.as_ptr()) };
        if !address.is_null() {
            // SAFETY: the interposer exports the function under this name with this C signature (the contract in
            // `ying-report`).
            let started = unsafe { core::mem::transmute::<*mut libc::c_void, extern "C" fn()>(address) };
            started();
        }
    }
}
