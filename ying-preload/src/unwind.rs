//! `_Unwind_Backtrace`, through which the standard library walks the stack for a backtrace: what a walk allocates is
//! the unwinder's, in no figure.
//!
//! A panic's hook prints the backtrace `RUST_BACKTRACE` asks for by naming each frame as the walk reaches it, inside
//! this call: the standard library reads the executable's debug information there, tens of thousands of blocks and
//! tens of megabytes, which it keeps. A leak test runs its panic hook as the profiler (the runtime wraps it); a test
//! measured from outside has its hook in its own copy of the standard library, which this library cannot reach, so
//! the walk is where it is told apart. A test's figures are then the same whatever `RUST_BACKTRACE` says, and
//! printing its panic's backtrace costs what it costs without ying. The frames a `Backtrace` the test captures
//! keeps are gathered in a walk too (only when the environment asks for them, as `Backtrace::capture` reads it);
//! naming them later, outside a walk, is counted, and what the standard library keeps of it excused.

use crate::next::Next;
use core::ffi::{c_int, c_void};

/// `_Unwind_Trace_Fn`: called for each frame, with the unwinder's context and the caller's argument.
type TraceFn = unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int;
type Backtrace = unsafe extern "C" fn(TraceFn, *mut c_void) -> c_int;

/// `_URC_FATAL_PHASE1_ERROR`: what the walk returns when there is no unwinder.
const FATAL_PHASE1_ERROR: c_int = 3;

/// The unwinder's `_Unwind_Backtrace`.
static NEXT: Next = Next::new(c"_Unwind_Backtrace");

/// The definition of `_Unwind_Backtrace` next after this library's.
fn next_backtrace() -> Option<Backtrace> {
    // SAFETY: the address of `_Unwind_Backtrace`, whose C signature `Backtrace` is.
    NEXT.address().map(|address| unsafe { core::mem::transmute::<usize, Backtrace>(address) })
}

/// `_Unwind_Backtrace`: the unwinder's, run outside every figure.
///
/// # Safety
///
/// As the unwinder's: `trace` may be called with `argument` for every frame of the calling thread's stack.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn _Unwind_Backtrace(trace: TraceFn, argument: *mut c_void) -> c_int {
    let Some(next) = next_backtrace() else { return FATAL_PHASE1_ERROR };
    // SAFETY: the caller's arguments, passed on to the unwinder's definition.
    ying::__private::interposer::outside_figures(|| unsafe { next(trace, argument) })
}
