//! Scopes: exact figures of what one piece of code did to the heap.
//!
//! A scope lives in one of [`SLOTS`] fixed slots of atomics, so opening, updating and closing one never allocates.
//! Its id combines a generation with the slot index: blocks remember the id of the scope that owns them, and a free
//! that arrives after the scope closed (or after the slot was reused) finds a different id and changes nothing.
//! Updaters announce themselves in `users` before they check the id, and closing waits for them, so a closed
//! scope's figures are final and a reused slot never receives a late update meant for its previous scope.
//!
//! The thread that opened a scope (its home thread) closes it, and makes almost all of its updates: those skip the
//! announcement and write counters of their own with plain loads and stores. Only the live-byte count, whose peak
//! must be exact across threads, is one atomic counter for everyone.

use crate::base::ids::{AtomicScopeId, ScopeId};
use crate::base::thread::{THREAD, ThreadState};
use crate::hot::counters::{self, Shard};
use core::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
pub use ying_report::report::{Attribution, ScopeStats};

const SLOT_BITS: u32 = 8;
const SLOTS: usize = 1 << SLOT_BITS;

struct Slot {
    claimed: AtomicBool,
    /// Every allocation attributed to this scope records its stack (sampled with certainty).
    capture: AtomicBool,
    /// The open scope in this slot, if any.
    id: AtomicScopeId,
    users: AtomicU32,
    /// Live bytes, one counter for all threads: its read-modify-writes order every change, so the peak is exact.
    live_bytes: AtomicI64,
    peak_bytes: AtomicI64,
    /// Live blocks, the home thread's count and the others' (signed, as two's complement).
    live_blocks: [AtomicU64; 2],
    /// Event counters written by the home thread only (plain loads and stores, no locked instruction).
    home: Shard,
    /// Event counters of every other thread (atomic adds).
    shared: Shard,
}

impl Slot {
    const fn new() -> Self {
        Self {
            claimed: AtomicBool::new(false),
            capture: AtomicBool::new(false),
            id: AtomicScopeId::none(),
            users: AtomicU32::new(0),
            live_bytes: AtomicI64::new(0),
            peak_bytes: AtomicI64::new(0),
            live_blocks: [AtomicU64::new(0), AtomicU64::new(0)],
            home: Shard::new(),
            shared: Shard::new(),
        }
    }

    /// The event counters and live-block count of the home thread (`home`) or of the others.
    fn counters(&self, home: bool) -> (&Shard, &AtomicU64) {
        if home { (&self.home, &self.live_blocks[0]) } else { (&self.shared, &self.live_blocks[1]) }
    }

    fn add_live(&self, home: bool, bytes: usize, blocks: i64) {
        let live = self.live_bytes.fetch_add(bytes as i64, Ordering::Relaxed) + bytes as i64;
        counters::add(self.counters(home).1, blocks as u64, home);
        // Most allocations set no new peak: read before writing.
        if live > self.peak_bytes.load(Ordering::Relaxed) {
            self.peak_bytes.fetch_max(live, Ordering::Relaxed);
        }
    }

    fn sub_live(&self, home: bool, bytes: usize, blocks: i64) {
        self.live_bytes.fetch_sub(bytes as i64, Ordering::Relaxed);
        counters::add(self.counters(home).1, blocks.wrapping_neg() as u64, home);
    }
}

static SLOT_TABLE: [Slot; SLOTS] = [const { Slot::new() }; SLOTS];
static GENERATION: AtomicU64 = AtomicU64::new(0);
/// The open process-attributed scope, if any: it receives every allocation not attributed to a thread's scope.
static PROCESS_SCOPE: AtomicScopeId = AtomicScopeId::none();
/// The process scope was opened on a thread other than the main thread, so the main thread is a test harness's
/// scheduler (libtest's, waiting for the test's result): its bookkeeping is not the measured code's.
static PROCESS_SKIPS_MAIN: AtomicBool = AtomicBool::new(false);

/// Runs `f` on the slot of scope `id` if that scope is still open; reports whether it was.
///
/// On the scope's home thread (the one that opened it and will close it) the scope is open, and no close can
/// overlap the update: no check, no announcement, and `f` writes the home counters (its second argument: `true`).
/// Other threads announce themselves in `users` (closing waits for them) and check the id.
#[inline]
fn with_open(id: ScopeId, f: impl FnOnce(&Slot, bool)) -> bool {
    with_open_as(THREAD.try_with(|thread| id == thread.home_scope()) == Ok(true), id, f)
}

/// [`with_open`] for a caller that knows whether it runs on the scope's home thread (`home`).
#[inline(always)]
fn with_open_as(home: bool, id: ScopeId, f: impl FnOnce(&Slot, bool)) -> bool {
    let slot = slot_of(id);
    if home {
        f(slot, true);
        return true;
    }
    slot.users.fetch_add(1, Ordering::SeqCst);
    let open = id == slot.id.load(Ordering::SeqCst);
    if open {
        f(slot, false);
    }
    slot.users.fetch_sub(1, Ordering::Release);
    open
}

/// The slot of scope `id` (which holds it while it is open).
#[inline(always)]
fn slot_of(id: ScopeId) -> &'static Slot {
    &SLOT_TABLE[(id.bits() as usize) & (SLOTS - 1)]
}

/// Whether a process-attributed scope is open: every thread's activity may belong to it.
#[inline(always)]
pub(crate) fn process_scope_open() -> bool {
    PROCESS_SCOPE.load(Ordering::Relaxed).is_some()
}

/// The scope the calling thread's heap activity is attributed to, if any.
#[inline]
pub(crate) fn attributed(thread: &ThreadState) -> Option<ScopeId> {
    match thread.scope() {
        None => match PROCESS_SCOPE.load(Ordering::Relaxed) {
            None => None,
            Some(_) if PROCESS_SKIPS_MAIN.load(Ordering::Relaxed) && thread.is_main() => None,
            id => id,
        },
        id => id,
    }
}

/// An allocation of `size` bytes made in scope `id` on the calling thread (`thread`). `None` when the scope has
/// closed; otherwise the scope now owns the block, and the flag says whether the scope records the stack of every
/// allocation.
#[inline]
pub(crate) fn on_alloc(thread: &ThreadState, id: ScopeId, size: usize) -> Option<bool> {
    let mut capture = false;
    with_open_as(id == thread.home_scope(), id, |slot, home| {
        slot.counters(home).0.count_alloc(size, home);
        slot.add_live(home, size, 1);
        capture = slot.capture.load(Ordering::Relaxed);
    })
    .then_some(capture)
}

/// A free of `size` bytes made in scope `id`, of a block of any age or owner.
pub(crate) fn on_free(id: ScopeId, size: usize) {
    with_open(id, |slot, home| slot.counters(home).0.count_free(size, home));
}

/// A realloc made in scope `id` from `old` to `new` bytes: growth counts as allocated, shrinkage as freed.
pub(crate) fn on_resize(id: ScopeId, old: usize, new: usize) {
    with_open(id, |slot, home| slot.counters(home).0.count_resize(old, new, home));
}

/// Scope `id` now owns `bytes` more bytes of a live block (`block`: a whole new block). As [`on_alloc`]: `None` when
/// the scope has closed, else whether it records every stack.
pub(crate) fn own(id: ScopeId, bytes: usize, block: bool) -> Option<bool> {
    let mut capture = false;
    with_open(id, |slot, home| {
        slot.add_live(home, bytes, i64::from(block));
        capture = slot.capture.load(Ordering::Relaxed);
    })
    .then_some(capture)
}

/// A free of `size` bytes made in scope `id` (on the calling thread, `thread`) of a block it owns `owned` bytes of:
/// [`on_free`] and [`disown`] at once.
#[inline]
pub(crate) fn free_owned(thread: &ThreadState, id: ScopeId, size: usize, owned: usize, block: bool) {
    with_open_as(id == thread.home_scope(), id, |slot, home| {
        slot.counters(home).0.count_free(size, home);
        slot.sub_live(home, owned, i64::from(block));
    });
}

/// Scope `id` no longer owns `bytes` bytes (and, with `block`, one block) it owned.
pub(crate) fn disown(id: ScopeId, bytes: usize, block: bool) {
    with_open(id, |slot, home| slot.sub_live(home, bytes, i64::from(block)));
}

/// An open scope; closes (and stops attributing) when dropped, so a panicking body never leaves it open.
pub(crate) struct OpenScope {
    id: ScopeId,
    attribution: Attribution,
    previous_thread_scope: Option<ScopeId>,
    /// The calling thread's home scope before this one (see [`ThreadState::home_scope`]).
    previous_home: Option<ScopeId>,
    /// Opened and closed on its home thread: the home thread's updates skip the close protocol.
    _not_send: core::marker::PhantomData<*const ()>,
}

impl OpenScope {
    /// Opens a scope; with `capture`, every allocation attributed to it records its stack. Panics when every slot
    /// is in use or, for [`Attribution::Process`], when a process scope is already open.
    pub(crate) fn open(attribution: Attribution, capture: bool) -> Self {
        let index = SLOT_TABLE
            .iter()
            .position(|slot| slot.claimed.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok())
            .unwrap_or_else(|| panic!("ying: more than {SLOTS} measured scopes are open at once"));
        let slot = &SLOT_TABLE[index];
        slot.home.reset();
        slot.shared.reset();
        for blocks in &slot.live_blocks {
            blocks.store(0, Ordering::Relaxed);
        }
        slot.live_bytes.store(0, Ordering::Relaxed);
        slot.peak_bytes.store(0, Ordering::Relaxed);
        slot.capture.store(capture, Ordering::Relaxed);
        let generation = GENERATION.fetch_add(1, Ordering::Relaxed) + 1;
        let id = ScopeId::from_bits((generation << SLOT_BITS) | index as u64).expect("generations count from 1");
        if attribution == Attribution::Process {
            if !PROCESS_SCOPE.compare_exchange(None, Some(id), Ordering::SeqCst, Ordering::Relaxed) {
                slot.claimed.store(false, Ordering::Release);
                panic!("ying: a process-attributed scope is already open; only one can be open at a time");
            }
            // Before the slot opens (below), so no allocation is attributed under the previous setting.
            PROCESS_SKIPS_MAIN.store(!crate::base::thread::on_main_thread(), Ordering::Relaxed);
            crate::hot::live::set_process_scope_open(true);
        }
        slot.id.store(Some(id), Ordering::SeqCst);
        // Before any allocation is attributed to the scope: this thread's updates go to the home counters.
        let previous_home = THREAD.try_with(|t| t.replace_home_scope(Some(id))).unwrap_or(None);
        let previous_thread_scope = match attribution {
            Attribution::Process => None,
            _ => THREAD.try_with(|t| t.replace_scope(Some(id))).unwrap_or(None),
        };
        Self { id, attribution, previous_thread_scope, previous_home, _not_send: core::marker::PhantomData }
    }

    /// The scope's id, which the blocks it owns carry in the live table.
    pub(crate) fn id(&self) -> ScopeId {
        self.id
    }

    /// The scope's figures so far, while it is open (`retained_*`: owned and live now).
    pub(crate) fn figures(&self) -> ScopeStats {
        read_figures(slot_of(self.id))
    }

    /// Closes the scope and returns its final figures.
    pub(crate) fn close(self) -> ScopeStats {
        let stats = self.finish();
        core::mem::forget(self);
        stats
    }

    fn finish(&self) -> ScopeStats {
        match self.attribution {
            Attribution::Process => {
                if PROCESS_SCOPE.compare_exchange(Some(self.id), None, Ordering::SeqCst, Ordering::Relaxed) {
                    crate::hot::live::set_process_scope_open(false);
                }
            }
            _ => {
                let previous = self.previous_thread_scope;
                let _ = THREAD.try_with(|t| t.replace_scope(previous));
            }
        }
        let previous_home = self.previous_home;
        let _ = THREAD.try_with(|t| t.replace_home_scope(previous_home));
        // The blocks this thread allocated in the scope stay recognisable after it: out of the nursery.
        crate::hot::live::on_scope_close(previous_home.is_none());
        let slot = slot_of(self.id);
        if !slot.id.compare_exchange(Some(self.id), None, Ordering::SeqCst, Ordering::Relaxed) {
            return ScopeStats::default(); // already closed
        }
        while slot.users.load(Ordering::SeqCst) != 0 {
            core::hint::spin_loop();
        }
        let stats = read_figures(slot);
        slot.claimed.store(false, Ordering::Release);
        stats
    }
}

/// The slot's figures: each counter is the sum of its home and shared parts. Called on the home thread, which
/// sees its own writes.
fn read_figures(slot: &Slot) -> ScopeStats {
    let [home, shared] = [slot.home.read(), slot.shared.read()];
    let [allocated_bytes, allocations, freed_bytes, frees] =
        core::array::from_fn(|counter| home[counter].wrapping_add(shared[counter]));
    let [home_blocks, shared_blocks] = &slot.live_blocks;
    let live_blocks = home_blocks.load(Ordering::Relaxed).wrapping_add(shared_blocks.load(Ordering::Relaxed)) as i64;
    let mut stats = ScopeStats::default();
    stats.retained_bytes = slot.live_bytes.load(Ordering::Relaxed).max(0) as u64;
    stats.retained_blocks = live_blocks.max(0) as u64;
    stats.peak_bytes = slot.peak_bytes.load(Ordering::Relaxed).max(0) as u64;
    stats.allocated_bytes = allocated_bytes;
    stats.allocations = allocations;
    stats.freed_bytes = freed_bytes;
    stats.frees = frees;
    stats
}

impl Drop for OpenScope {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A handle on an open scope, to carry it into threads or tasks that the measured code spawns.
///
/// Under [`Attribution::Thread`] a scope counts only the allocations of its own thread. Work the measured code
/// hands to another thread joins the scope when that thread enters it:
///
/// ```
/// # #[global_allocator]
/// # static ALLOC: ying::YingProfiler = ying::YingProfiler::new();
/// let ((), stats) = ying::measure(|| {
///     let scope = ying::Scope::current();
///     std::thread::spawn(move || {
///         let _entered = scope.enter();
///         Box::leak(Box::new([0u8; 100])); // counted by the scope
///     })
///     .join()
///     .unwrap();
/// });
/// assert_eq!(stats.retained_bytes, 100);
/// ```
///
/// A handle outliving its scope is harmless: entering a closed scope attributes nothing to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Scope {
    id: Option<ScopeId>,
}

impl Scope {
    /// The scope the calling thread is in: the innermost [`measure`](crate::measure) on this thread, or the scope
    /// this thread entered. When there is none, the handle is inert and entering it does nothing.
    pub fn current() -> Self {
        Self { id: THREAD.try_with(|t| t.scope()).unwrap_or(None) }
    }

    /// Whether this handle names a scope (open or since closed), rather than none.
    pub fn is_some(&self) -> bool {
        self.id.is_some()
    }

    /// Attributes the calling thread's allocations to this scope until the guard is dropped.
    #[must_use = "the thread leaves the scope when the guard is dropped"]
    pub fn enter(&self) -> EnterGuard {
        let previous = THREAD.try_with(|t| t.replace_scope(self.id)).unwrap_or(None);
        EnterGuard { previous, _not_send: core::marker::PhantomData }
    }
}

/// Keeps the calling thread in a [`Scope`]; dropping it restores the thread's previous scope.
#[derive(Debug)]
pub struct EnterGuard {
    previous: Option<ScopeId>,
    /// The guard changes the state of the thread that created it, so it must be dropped on that thread.
    _not_send: core::marker::PhantomData<*const ()>,
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        let previous = self.previous;
        let _ = THREAD.try_with(|t| t.replace_scope(previous));
    }
}
