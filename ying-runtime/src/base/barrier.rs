//! An asymmetric fence: a cheap side that many threads run often, and an expensive side that one thread runs
//! rarely, which together order a store before a load as a full fence on both sides would.
//!
//! On Linux the expensive side is `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`: every running thread of the
//! process executes a full memory barrier before it returns (a thread not running has passed one when it was
//! switched out), so the cheap side needs only to keep the compiler from reordering. Elsewhere, or when the kernel
//! refuses to register the process, the cheap side is a full fence. Registering never allocates.

use core::sync::atomic::{AtomicBool, Ordering, compiler_fence, fence};

/// The process is registered for private expedited membarriers: the cheap side is a compiler fence.
static ASYMMETRIC: AtomicBool = AtomicBool::new(false);
/// [`register`] ran.
static TRIED: AtomicBool = AtomicBool::new(false);

#[cfg(target_os = "linux")]
const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 8;
#[cfg(target_os = "linux")]
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 16;

/// Registers the process, once: when the first thread first allocates (`hot::first_event`). A thread that read
/// `false` before runs full fences, which are always enough.
pub(crate) fn register_once() {
    if !TRIED.swap(true, Ordering::AcqRel) {
        register();
    }
}

/// In a child process, just after the fork: registers it again if the parent was (registration belongs to the
/// address space).
#[cfg(unix)]
pub(crate) fn register_child() {
    if ASYMMETRIC.load(Ordering::Relaxed) {
        register();
    }
}

fn register() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `membarrier` takes two integer arguments here and touches no memory of ours.
        let registered = unsafe {
            libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0 as libc::c_long)
        } == 0;
        ASYMMETRIC.store(registered, Ordering::SeqCst);
    }
}

/// The cheap side: orders the caller's earlier stores before its later loads, as far as a thread running
/// [`heavy`] is concerned.
#[inline(always)]
pub(crate) fn light() {
    if ASYMMETRIC.load(Ordering::Relaxed) {
        compiler_fence(Ordering::SeqCst);
    } else {
        fence(Ordering::SeqCst);
    }
}

/// The expensive side: after it, every store another thread made before its last [`light`] is visible, and every
/// load another thread makes after its next [`light`] sees this thread's earlier stores.
pub(crate) fn heavy() {
    #[cfg(target_os = "linux")]
    if ASYMMETRIC.load(Ordering::SeqCst) {
        // SAFETY: as in `register`.
        let done =
            unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0 as libc::c_long) } == 0;
        if done {
            return;
        }
    }
    fence(Ordering::SeqCst);
}
