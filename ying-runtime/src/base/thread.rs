//! The per-thread state the allocator keeps: re-entrancy guard, sampler countdown, counter shard and scope.
//!
//! Everything here is a `const`-initialised thread-local made only of `Cell`s of plain integers, ids and handles
//! (see `base::handles`): no lazy initialisation (which could allocate inside `alloc`) and no `Drop` (so no
//! destructor is registered, which could also allocate, and the state stays readable while the thread tears down).
//! Access goes through [`LocalKey::try_with`](std::thread::LocalKey::try_with); when that fails the event is counted
//! as dropped.

use crate::base::handles::{NurseryHandle, PartHandle, PartsIndex, PendingIndex, ShardHandle};
use crate::base::ids::ScopeId;
use core::cell::Cell;

/// The state of one thread.
pub(crate) struct ThreadState {
    /// Set while the profiler itself runs on this thread; allocations made then are the profiler's own.
    busy: Cell<bool>,
    /// Whether the allocator's fast path may count this thread's heap activity: the profiler is not busy here,
    /// the thread is in no scope and it writes a counter shard of its own. One flag, kept up to date by the
    /// setters of those three, so that the fast path tests one byte instead of three fields.
    plain: Cell<bool>,
    /// Bytes left until the next sample point (Poisson countdown).
    pub(crate) countdown: Cell<i64>,
    /// The sampling interval the countdown was drawn for; a change of interval redraws it.
    pub(crate) interval: Cell<usize>,
    /// Random state for the countdown draws (xorshift64*); 0 until seeded.
    pub(crate) rng: Cell<u64>,
    /// This thread's counter shard (see `hot::counters`), and whether it writes it alone; `None` until assigned.
    shard: Cell<Option<ShardHandle>>,
    /// Live-byte changes not yet folded into the process peak (see `hot::counters`).
    pub(crate) pending_live: Cell<i64>,
    /// The scope this thread's allocations are attributed to, if any.
    scope: Cell<Option<ScopeId>>,
    /// The scope this thread was in when it entered its scope with a handle (see `Scope::enter`): where it is when
    /// that scope has closed.
    entered_from: Cell<Option<ScopeId>>,
    /// The innermost open scope this thread opened, if any: it alone closes it, so its updates of that scope need
    /// neither the close protocol nor atomic read-modify-writes (see `hot::scope`).
    home_scope: Cell<Option<ScopeId>>,
    /// Whether this is the process's main thread: 0 not known yet, 1 yes, 2 no.
    main: Cell<u8>,
    /// An address in the frame of ying's leak-test runner while it runs a body on this thread (0: none). Stacks
    /// captured on this thread stop at the first frame past it: what lies beyond is the test harness.
    pub(crate) capture_limit: Cell<usize>,
    /// This thread's nursery (see `hot::live::nursery`), if it holds one.
    nursery: Cell<Option<NurseryHandle>>,
    /// The part this thread last took to write in another thread's scope (see `hot::scope::parts`; the part says
    /// which scope it counts for), if any.
    part: Cell<Option<PartHandle>>,
    /// The block of parts this thread owns (`None`: none yet; see `hot::scope::parts`).
    pub(crate) parts: Cell<Option<PartsIndex>>,
    /// This thread's pending stack figures (`None`: none yet; see `hot::stacks`).
    pub(crate) pending: Cell<Option<PendingIndex>>,
}

impl ThreadState {
    const fn new() -> Self {
        Self {
            busy: Cell::new(false),
            plain: Cell::new(false),
            countdown: Cell::new(0),
            interval: Cell::new(usize::MAX),
            rng: Cell::new(0),
            shard: Cell::new(None),
            pending_live: Cell::new(0),
            scope: Cell::new(None),
            entered_from: Cell::new(None),
            home_scope: Cell::new(None),
            main: Cell::new(0),
            capture_limit: Cell::new(0),
            nursery: Cell::new(None),
            part: Cell::new(None),
            parts: Cell::new(None),
            pending: Cell::new(None),
        }
    }

    /// Whether the profiler itself is running on this thread.
    pub(crate) fn busy(&self) -> bool {
        self.busy.get()
    }

    /// Marks the profiler as running (or no longer running) on this thread; returns the previous setting.
    #[inline]
    pub(crate) fn replace_busy(&self, busy: bool) -> bool {
        let was = self.busy.replace(busy);
        self.refresh();
        was
    }

    /// Marks the profiler as running on this thread, for a stretch that changes nothing else [`plain`](Self::plain)
    /// depends on; returns what [`leave_profiler`](Self::leave_profiler) restores.
    #[inline]
    pub(crate) fn enter_profiler(&self) -> (bool, bool) {
        let saved = (self.busy.replace(true), self.plain.replace(false));
        debug_assert!(!saved.1 || !saved.0);
        saved
    }

    /// Ends the stretch [`enter_profiler`](Self::enter_profiler) began.
    #[inline]
    pub(crate) fn leave_profiler(&self, (busy, plain): (bool, bool)) {
        self.busy.set(busy);
        self.plain.set(plain);
    }

    /// The scope this thread's allocations are attributed to, if any.
    pub(crate) fn scope(&self) -> Option<ScopeId> {
        self.scope.get()
    }

    /// Attributes this thread's allocations to scope `id` (`None`: to none); returns the previous scope.
    pub(crate) fn replace_scope(&self, id: Option<ScopeId>) -> Option<ScopeId> {
        let previous = self.scope.replace(id);
        self.refresh();
        previous
    }

    /// The scope this thread was in when it entered its scope with a handle, if any.
    pub(crate) fn entered_from(&self) -> Option<ScopeId> {
        self.entered_from.get()
    }

    /// Records the scope this thread entered its scope from; returns the previous record.
    pub(crate) fn replace_entered_from(&self, id: Option<ScopeId>) -> Option<ScopeId> {
        self.entered_from.replace(id)
    }

    /// The innermost open scope this thread opened, if any.
    #[inline]
    pub(crate) fn home_scope(&self) -> Option<ScopeId> {
        self.home_scope.get()
    }

    /// Makes `id` this thread's home scope (`None`: none); returns the previous one.
    pub(crate) fn replace_home_scope(&self, id: Option<ScopeId>) -> Option<ScopeId> {
        self.home_scope.replace(id)
    }

    /// This thread's nursery as `hot::live::nursery` stored it, if it holds one.
    #[inline(always)]
    pub(crate) fn nursery(&self) -> Option<NurseryHandle> {
        self.nursery.get()
    }

    /// Gives this thread a nursery (`None`: none).
    pub(crate) fn set_nursery(&self, nursery: Option<NurseryHandle>) {
        self.nursery.set(nursery);
    }

    /// The part this thread last took to write in another thread's scope, if any.
    #[inline(always)]
    pub(crate) fn part(&self) -> Option<PartHandle> {
        self.part.get()
    }

    /// Records the part this thread takes to write in another thread's scope.
    pub(crate) fn set_part(&self, part: PartHandle) {
        self.part.set(Some(part));
    }

    /// This thread's counter shard as `hot::counters` assigned it (`None` until assigned).
    #[inline(always)]
    pub(crate) fn shard(&self) -> Option<ShardHandle> {
        self.shard.get()
    }

    /// Gives this thread its counter shard.
    pub(crate) fn set_shard(&self, shard: ShardHandle) {
        self.shard.set(Some(shard));
        self.refresh();
    }

    /// Whether the fast path may count this thread's activity (see the `plain` field). When it returns true,
    /// [`shard`](Self::shard) is a shard this thread alone writes.
    #[inline(always)]
    pub(crate) fn plain(&self) -> bool {
        self.plain.get()
    }

    #[inline]
    fn refresh(&self) {
        let exclusive = self.shard.get().is_some_and(ShardHandle::exclusive);
        self.plain.set(exclusive && !self.busy.get() && self.scope.get().is_none());
    }

    /// Whether this is the process's main thread (the one `main` runs on), asked of the system once per thread.
    pub(crate) fn is_main(&self) -> bool {
        if self.main.get() == 0 {
            self.main.set(if is_main_thread() { 1 } else { 2 });
        }
        self.main.get() == 1
    }
}

/// Asks the system whether the calling thread is the process's main thread; `false` where it cannot tell.
fn is_main_thread() -> bool {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        // SAFETY: `gettid` and `getpid` take no arguments, cannot fail and touch no memory of ours.
        unsafe { libc::gettid() == libc::getpid() }
    }
    #[cfg(any(target_os = "macos", target_os = "ios", target_os = "freebsd"))]
    {
        // SAFETY: `pthread_main_np` takes no arguments and only reads the calling thread's identity.
        unsafe { libc::pthread_main_np() != 0 }
    }
    #[cfg(not(any(
        target_os = "linux",
        target_os = "android",
        target_os = "macos",
        target_os = "ios",
        target_os = "freebsd"
    )))]
    {
        false
    }
}

std::thread_local! {
    pub(crate) static THREAD: ThreadState = const { ThreadState::new() };
}

/// Whether the calling thread is the process's main thread.
pub(crate) fn on_main_thread() -> bool {
    THREAD.try_with(|t| t.is_main()).unwrap_or(false)
}

/// Runs `f` with the profiler marked busy on this thread, so that allocations `f` makes through the global
/// allocator are recorded as the profiler's own and excluded from every figure. Nested use is fine.
pub(crate) fn as_profiler<R>(f: impl FnOnce() -> R) -> R {
    /// Restores the flag even when `f` unwinds.
    struct Restore(Option<bool>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(was_busy) = self.0 {
                let _ = THREAD.try_with(|t| t.replace_busy(was_busy));
            }
        }
    }
    let _restore = Restore(THREAD.try_with(|t| t.replace_busy(true)).ok());
    f()
}
