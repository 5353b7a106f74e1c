//! `_Unwind_Backtrace`, through which the standard library walks the stack for a backtrace: what a walk allocates is
//! the unwinder's, in no figure.
//!
//! A panic's hook prints the backtrace `RUST_BACKTRACE` asks for by naming each frame as the walk reaches it, inside
//! this call: the standard library reads the executable's debug information there, tens of thousands of blocks and
//! tens of megabytes, which it keeps. A leak test runs its panic hook as the profiler (the runtime wraps it); a test
//! measured from outside has its hook in its own copy of the standard library, which this library cannot reach, so
//! the walk is where it is told apart. The blocks allocated inside a walk are marked unmeasured (`blocks`): they
//! never go through the profiler, nor do their frees and resizes, and the reachability scan does not read them. A
//! test's figures are then the same whatever `RUST_BACKTRACE` says, and printing its panic's backtrace costs about
//! what it costs without ying. The frames a `Backtrace` the test captures keeps are gathered in a walk too (only
//! when the environment asks for them, as `Backtrace::capture` reads it); naming them later, outside a walk, is
//! counted, and what the standard library keeps of it excused.

use crate::next::Next;
use core::cell::Cell;
use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicUsize, Ordering};

/// `_Unwind_Trace_Fn`: called for each frame, with the unwinder's context and the caller's argument.
type TraceFn = unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int;
type Backtrace = unsafe extern "C" fn(TraceFn, *mut c_void) -> c_int;

/// `_URC_FATAL_PHASE1_ERROR`: what the walk returns when there is no unwinder.
const FATAL_PHASE1_ERROR: c_int = 3;

/// The unwinder's `_Unwind_Backtrace`.
static NEXT: Next = Next::new(c"_Unwind_Backtrace");

/// How many threads are inside a walk: while none is, an allocation asks nothing more (no thread-local read).
static WALKS: AtomicUsize = AtomicUsize::new(0);

std::thread_local! {
    /// Whether this thread is inside a walk.
    static WALKING: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread is inside a walk: its allocations are unmeasured.
#[inline]
pub(crate) fn walking() -> bool {
    WALKS.load(Ordering::Relaxed) != 0 && WALKING.try_with(Cell::get).unwrap_or(false)
}

/// The definition of `_Unwind_Backtrace` next after this library's.
fn next_backtrace() -> Option<Backtrace> {
    // SAFETY: the address of `_Unwind_Backtrace`, whose C signature `Backtrace` is.
    NEXT.address().map(|address| unsafe { core::mem::transmute::<usize, Backtrace>(address) })
}

/// `_Unwind_Backtrace`: the unwinder's, what it allocates unmeasured.
///
/// # Safety
///
/// As the unwinder's: `trace` may be called with `argument` for every frame of the calling thread's stack.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn _Unwind_Backtrace(trace: TraceFn, argument: *mut c_void) -> c_int {
    let Some(next) = next_backtrace() else { return FATAL_PHASE1_ERROR };
    // Before the first unmeasured block: the runtime keeps the first it is told.
    ying::__private::interposer::leave_unread_where(crate::blocks::unmeasured_chunk);
    let Ok(was_walking) = WALKING.try_with(|walking| walking.replace(true)) else {
        // SAFETY: the caller's arguments, passed on to the unwinder's definition.
        return unsafe { next(trace, argument) };
    };
    WALKS.fetch_add(1, Ordering::Relaxed);
    // SAFETY: the caller's arguments, passed on to the unwinder's definition.
    let reason = unsafe { next(trace, argument) };
    WALKS.fetch_sub(1, Ordering::Relaxed);
    let _ = WALKING.try_with(|walking| walking.set(was_walking));
    reason
}
