//! `pthread_setname_np`, through which the runtime learns which thread runs the measured test, and the function a
//! leak test calls when it starts (the test measures itself).
//!
//! The test harness names the thread it runs a test on after the test, first thing on that thread (the standard
//! library calls `pthread_setname_np` with the name cut to what the system keeps). This definition names the
//! thread with the C library's, then tells the runtime.

use crate::next::Next;
use core::ffi::{CStr, c_char, c_int};

type SetName = unsafe extern "C" fn(libc::pthread_t, *const c_char) -> c_int;

/// The C library's `pthread_setname_np`.
static NEXT: Next = Next::new(c"pthread_setname_np");

/// The definition of `pthread_setname_np` next after this library's.
fn next_set_name() -> Option<SetName> {
    // SAFETY: the address of `pthread_setname_np`, whose C signature `SetName` is.
    NEXT.address().map(|address| unsafe { core::mem::transmute::<usize, SetName>(address) })
}

/// `pthread_setname_np(3)`.
///
/// # Safety
///
/// As the C library's: `thread` is a live thread, `name` a NUL-terminated string.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn pthread_setname_np(thread: libc::pthread_t, name: *const c_char) -> c_int {
    let Some(next) = next_set_name() else { return libc::ENOSYS };
    // SAFETY: the caller's arguments, passed on to the C library's definition.
    let result = unsafe { next(thread, name) };
    // SAFETY: `pthread_self` and `pthread_equal` only compare thread handles.
    let this_thread = unsafe { libc::pthread_equal(thread, libc::pthread_self()) } != 0;
    if result == 0 && this_thread && !name.is_null() {
        // SAFETY: a NUL-terminated string (the caller's contract), which the C library just accepted.
        ying::__private::interposer::thread_named(unsafe { CStr::from_ptr(name) }.to_bytes());
    }
    result
}

/// Called by a leak test when it starts (through `dlsym`, by the name in
/// `ying_report::report::INTERPOSER_LEAK_TEST_STARTED`): it measures itself, and the runtime stops measuring it.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ying_interposer_leak_test_started() {
    ying::__private::interposer::leak_test_started();
}
