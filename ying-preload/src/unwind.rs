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
//! what it costs without ying: the walk passes the caller every frame but this library's own, so that its debug
//! information is never read to name it. The frames a `Backtrace` the test captures keeps are gathered in a walk too
//! (only when the environment asks for them, as `Backtrace::capture` reads it); naming them later, outside a walk,
//! is counted, and what the standard library keeps of it excused.

use crate::next::Next;
use core::cell::Cell;
use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicUsize, Ordering};

/// `_Unwind_Trace_Fn`: called for each frame, with the unwinder's context and the caller's argument.
type TraceFn = unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int;
type Backtrace = unsafe extern "C" fn(TraceFn, *mut c_void) -> c_int;

/// `_URC_FATAL_PHASE1_ERROR`: what the walk returns when there is no unwinder.
const FATAL_PHASE1_ERROR: c_int = 3;
/// `_URC_NO_REASON`: what a walk's function returns to go on.
const NO_REASON: c_int = 0;

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

/// `_Unwind_GetRegionStart`: the start of the function a frame of a walk is in.
type RegionStart = unsafe extern "C" fn(*mut c_void) -> usize;

/// The unwinder's `_Unwind_GetRegionStart`, beside its `_Unwind_Backtrace`.
static NEXT_REGION_START: Next = Next::new(c"_Unwind_GetRegionStart");

/// What a walk passes its frames through: the caller's function and argument, and whether the first frame, this
/// library's `_Unwind_Backtrace`, has been seen.
struct Walk {
    trace: TraceFn,
    argument: *mut c_void,
    first_seen: bool,
}

/// Passes every frame of a walk to its caller's function but the first when that is this library's
/// `_Unwind_Backtrace`: the caller would name it (a panic's full backtrace printed its file and line), and naming
/// it reads this library's own debug information, megabytes allocated and tens of milliseconds for each process
/// that prints a backtrace.
///
/// # Safety
///
/// `context` is the unwinder's for the frame, and `walk` the [`Walk`] of the call of [`_Unwind_Backtrace`] that
/// is walking.
unsafe extern "C" fn past_own_frame(context: *mut c_void, walk: *mut c_void) -> c_int {
    // SAFETY: the walk of this thread's stack that `_Unwind_Backtrace` started, which outlives the walk.
    let walk = unsafe { &mut *walk.cast::<Walk>() };
    if !walk.first_seen {
        walk.first_seen = true;
        let own = _Unwind_Backtrace as *const () as usize;
        if let Some(address) = NEXT_REGION_START.address() {
            // SAFETY: the unwinder's `_Unwind_GetRegionStart` (its C signature `RegionStart`), asked of the context
            // of a frame of its own walk.
            let start = unsafe { core::mem::transmute::<usize, RegionStart>(address)(context) };
            if start == own {
                return NO_REASON;
            }
        }
    }
    // SAFETY: the caller's function, with the unwinder's context and the caller's argument, as the unwinder calls
    // it.
    unsafe { (walk.trace)(context, walk.argument) }
}

/// `_Unwind_Backtrace`: the unwinder's, what it allocates unmeasured; the walk begins at the caller's frame, as it
/// does without this library.
///
/// # Safety
///
/// As the unwinder's: `trace` may be called with `argument` for every frame of the calling thread's stack.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn _Unwind_Backtrace(trace: TraceFn, argument: *mut c_void) -> c_int {
    let Some(next) = next_backtrace() else { return FATAL_PHASE1_ERROR };
    let mut walk = Walk { trace, argument, first_seen: false };
    let walk_argument = (&raw mut walk).cast::<c_void>();
    // Before the first unmeasured block: the runtime keeps the first it is told.
    ying::__private::interposer::leave_unread_where(crate::blocks::unmeasured_chunk);
    let Ok(was_walking) = WALKING.try_with(|walking| walking.replace(true)) else {
        // SAFETY: the unwinder's definition, walking with the caller's function behind `past_own_frame`.
        return unsafe { next(past_own_frame, walk_argument) };
    };
    WALKS.fetch_add(1, Ordering::Relaxed);
    // SAFETY: the unwinder's definition, walking with the caller's function behind `past_own_frame`.
    let reason = unsafe { next(past_own_frame, walk_argument) };
    WALKS.fetch_sub(1, Ordering::Relaxed);
    let _ = WALKING.try_with(|walking| walking.set(was_walking));
    reason
}
