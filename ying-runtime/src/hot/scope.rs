//! Scopes: exact figures of what one piece of code did to the heap.
//!
//! A scope lives in one of [`SLOTS`] fixed slots of atomics, so opening, updating and closing one never allocates.
//! Its id combines a generation with the slot index (and a bit, see below): blocks remember the id of the scope
//! that owns them, and a free that arrives after the scope closed (or after the slot was reused) finds a different
//! id and changes nothing.
//! Updaters announce themselves in `users` before they check the id, and closing waits for them, so a closed
//! scope's figures are final and a reused slot never receives a late update meant for its previous scope.
//!
//! The thread that opened a scope (its home thread) closes it, and makes almost all of its updates: those skip the
//! announcement and write counters of their own with plain loads and stores. Only the live-byte count, whose peak
//! must be exact across threads, is one atomic counter for everyone. A nested scope (below) has no home thread.
//!
//! Scopes nest. A scope opened where its thread is in another scope (a `measure` inside a leak test) records that
//! scope as its parent, and every update of the inner scope is applied to each open scope enclosing it, outwards
//! (out of line): a block allocated in the inner scope counts in all of them, and so do its free and its peak. The
//! inner scope is no thread's home scope, so its updates take the shared path, where that is done, and the home
//! path (the scope its thread opened, nearly every update of a leak test) has nothing to check. When the inner scope closes, the blocks it owns are handed to its nearest open
//! ancestor (`live::on_scope_close`), which counted them all along; a scope whose parent closes
//! first takes its grandparent as parent. Until a closed nested scope's slot is reused, the slot remembers which
//! scope it was handed to, so that an update that raced with the close (or arrives through a stale handle) still
//! reaches the enclosing scopes. Whether a scope has a parent is a bit of its id, which the shared path tests.

use crate::base::ids::{AtomicScopeId, ScopeId};
use crate::base::thread::{THREAD, ThreadState};
use crate::hot::counters::{self, Shard};
use core::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};
pub use ying_report::report::{Attribution, ScopeStats};

const SLOT_BITS: u32 = 8;
const SLOTS: usize = 1 << SLOT_BITS;
/// The bit of a scope's id above its slot's index: set when the scope had a parent when it opened.
const NESTED: u64 = 1 << SLOT_BITS;

struct Slot {
    claimed: AtomicBool,
    /// Every allocation attributed to this scope records its stack (sampled with certainty).
    capture: AtomicBool,
    /// The open scope in this slot, if any.
    id: AtomicScopeId,
    /// The nearest open scope enclosing it, if any: every update of this scope is applied to it too (and so on
    /// outwards). Set at open; when the parent closes first, its parent takes its place ([`adopt_children`]).
    parent: AtomicScopeId,
    /// A scope was opened inside this one: closing it looks for children to give its parent.
    has_children: AtomicBool,
    /// The last nested scope this slot held, once closed, and the scope it handed its blocks to
    /// (`closed_parent`): a sequence lock on `closed` (see [`forwarded`]).
    closed: AtomicScopeId,
    closed_parent: AtomicScopeId,
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
            parent: AtomicScopeId::none(),
            has_children: AtomicBool::new(false),
            closed: AtomicScopeId::none(),
            closed_parent: AtomicScopeId::none(),
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
/// Where the search for a free slot starts: slots are taken in turn, so that a closed nested scope's slot keeps its
/// record (`closed`, `closed_parent`) for as long as possible.
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);
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

/// An update of a scope's figures, as the allocator makes them; applied to a scope and to every open scope
/// enclosing it.
#[derive(Clone, Copy)]
enum Op {
    /// An allocation of this many bytes, which the scope now owns.
    Alloc(usize),
    /// A free of this many bytes, of a block of any owner.
    Free(usize),
    /// A realloc from the first to the second size.
    Resize(usize, usize),
    /// The scope owns this many more bytes (and, with the flag, one more block).
    Own(usize, bool),
    /// The scope no longer owns this many bytes (and, with the flag, one block).
    Disown(usize, bool),
    /// A free of the first many bytes of a block the scope owned the second many bytes of (and, with the flag, the
    /// block).
    FreeOwned(usize, usize, bool),
}

impl Op {
    #[inline(always)]
    fn apply(self, slot: &Slot, home: bool) {
        match self {
            Self::Alloc(size) => {
                slot.counters(home).0.count_alloc(size, home);
                slot.add_live(home, size, 1);
            }
            Self::Free(size) => slot.counters(home).0.count_free(size, home),
            Self::Resize(old, new) => slot.counters(home).0.count_resize(old, new, home),
            Self::Own(bytes, block) => slot.add_live(home, bytes, i64::from(block)),
            Self::Disown(bytes, block) => slot.sub_live(home, bytes, i64::from(block)),
            Self::FreeOwned(size, owned, block) => {
                slot.counters(home).0.count_free(size, home);
                slot.sub_live(home, owned, i64::from(block));
            }
        }
    }
}

/// Applies `op` to scope `id` if it is open (on its home thread when `home`), and to the open scopes enclosing
/// it; returns whether `id` was open. A nested scope is no thread's home scope: the home path, the common one, has
/// nothing to do for nesting.
#[inline(always)]
fn update(home: bool, id: ScopeId, op: Op) -> bool {
    let open = with_open_as(home, id, |slot, home| op.apply(slot, home));
    if !home && open && nested(id) {
        update_beyond(id, true, op);
    }
    open
}

/// Whether scope `id` had a parent when it opened (and so has one until it closes: a parent that closes first
/// leaves its own parent in its place).
#[inline(always)]
fn nested(id: ScopeId) -> bool {
    id.bits() & NESTED != 0
}

/// Applies `op` to scope `next` and each scope enclosing it, outwards, skipping closed ones (whose slots still say
/// which scope they were handed to, see [`forwarded`]); `inner` is the scope whose ancestors these are (`None`:
/// `next` is where the walk starts). Returns the innermost scope that was open.
#[cold]
#[inline(never)]
fn update_enclosing(mut next: ScopeId, inner: Option<ScopeId>, op: Op) -> Option<ScopeId> {
    let mut first = None;
    // Ancestors are older than their descendants: a link that does not go back in time is a stale read, and ends
    // the walk.
    let mut limit = inner.map_or(u64::MAX, generation);
    while generation(next) < limit {
        let mut parent = None;
        let open = with_open(next, |slot, home| {
            op.apply(slot, home);
            parent = slot.parent.load(Ordering::Relaxed);
        });
        if open {
            first = first.or(Some(next));
        } else {
            parent = forwarded(next);
        }
        let Some(parent) = parent else { break };
        (limit, next) = (generation(next), parent);
    }
    first
}

/// After an update of nested scope `id` (which found it `open`, or closed): `op` applied to the scopes enclosing
/// it or, when it has closed, to those it handed its blocks to. Returns the innermost open scope `op` reached
/// beyond `id`.
#[cold]
#[inline(never)]
fn update_beyond(id: ScopeId, open: bool, op: Op) -> Option<ScopeId> {
    let mut parent = None;
    if !open || !with_open(id, |slot, _| parent = slot.parent.load(Ordering::Relaxed)) {
        parent = forwarded(id);
    }
    update_enclosing(parent?, Some(id), op)
}

/// The generation of scope `id`: scopes opened later have higher ones.
fn generation(id: ScopeId) -> u64 {
    id.bits() >> (SLOT_BITS + 1)
}

/// The scope closed nested scope `id` handed its blocks to, while its slot remembers it.
fn forwarded(id: ScopeId) -> Option<ScopeId> {
    let slot = slot_of(id);
    if id != slot.closed.load(Ordering::Acquire) {
        return None;
    }
    let parent = slot.closed_parent.load(Ordering::Relaxed);
    // A sequence lock: the parent read belongs to `id` only if `closed` did not change meanwhile (a reuse clears it
    // before it writes another parent).
    fence(Ordering::Acquire);
    if id == slot.closed.load(Ordering::Relaxed) { parent } else { None }
}

/// `op` applied for a thread whose scope `id` has closed (a handle entered after its scope closed, or a guard that
/// outlived it): to the open scopes enclosing `id`; when none is, to the scope the thread entered it from and those
/// enclosing it, if open; when none is, to the process scope if one is open and counts this thread. Returns the
/// innermost scope reached, which owns what `op` adds.
#[cold]
#[inline(never)]
fn update_closed(thread: &ThreadState, id: ScopeId, op: Op) -> Option<ScopeId> {
    let mut first = forwarded(id).and_then(|parent| update_enclosing(parent, Some(id), op));
    if first.is_none()
        && let Some(from) = thread.entered_from().filter(|&from| from != id)
    {
        first = update_enclosing(from, None, op);
    }
    // The process scope, when none of those is open: it counts every thread. (When some is, the process scope
    // encloses it if it was open when that scope opened.)
    if first.is_none()
        && let Some(scope) = process_scope_for(thread)
        && with_open(scope, |slot, home| op.apply(slot, home))
    {
        first = Some(scope);
    }
    first
}

/// The open process-attributed scope, if it counts the calling thread (`thread`).
fn process_scope_for(thread: &ThreadState) -> Option<ScopeId> {
    match PROCESS_SCOPE.load(Ordering::Relaxed) {
        Some(_) if PROCESS_SKIPS_MAIN.load(Ordering::Relaxed) && thread.is_main() => None,
        id => id,
    }
}

/// An allocation of `size` bytes made in scope `id` on the calling thread (`thread`). `None` when the scope has
/// closed; otherwise the scope now owns the block, and the flag says whether the scope records the stack of every
/// allocation. The enclosing scopes count the allocation and the block too.
#[inline]
pub(crate) fn on_alloc(thread: &ThreadState, id: ScopeId, size: usize) -> Option<bool> {
    let mut capture = false;
    let home = id == thread.home_scope();
    let open = with_open_as(home, id, |slot, home| {
        Op::Alloc(size).apply(slot, home);
        capture = slot.capture.load(Ordering::Relaxed);
    });
    if !home && open && nested(id) {
        update_beyond(id, true, Op::Alloc(size));
    }
    open.then_some(capture)
}

/// [`on_alloc`] for a thread whose scope `id` has closed: counted in the scopes the thread is still in (see
/// [`Scope::enter`]). Returns the innermost of them, which owns the block, and whether it records every stack.
#[cold]
pub(crate) fn on_alloc_closed(thread: &ThreadState, id: ScopeId, size: usize) -> Option<(ScopeId, bool)> {
    let owner = update_closed(thread, id, Op::Alloc(size))?;
    Some((owner, slot_of(owner).capture.load(Ordering::Relaxed)))
}

/// A free of `size` bytes made in scope `id` by the calling thread (`thread`), of a block of any age or owner.
pub(crate) fn on_free(thread: &ThreadState, id: ScopeId, size: usize) {
    attributed_update(thread, id, Op::Free(size));
}

/// A realloc made in scope `id` by the calling thread (`thread`) from `old` to `new` bytes: growth counts as
/// allocated, shrinkage as freed.
pub(crate) fn on_resize(thread: &ThreadState, id: ScopeId, old: usize, new: usize) {
    attributed_update(thread, id, Op::Resize(old, new));
}

/// `op` made by the calling thread (`thread`) in its scope `id`: applied to the scope and those enclosing it or,
/// when `id` has closed, to the scopes the thread is still in.
#[inline(always)]
fn attributed_update(thread: &ThreadState, id: ScopeId, op: Op) {
    if !update(id == thread.home_scope(), id, op) {
        update_closed(thread, id, op);
    }
}

/// Scope `id` now owns `bytes` more bytes of a live block (`block`: a whole new block). `None` when it has closed
/// and handed its blocks to no open scope; else the scope that owns them now (`id`, or the one it handed its blocks
/// to) and whether it records every stack.
pub(crate) fn own(id: ScopeId, bytes: usize, block: bool) -> Option<(ScopeId, bool)> {
    let home = THREAD.try_with(|thread| id == thread.home_scope()) == Ok(true);
    let op = Op::Own(bytes, block);
    let owner = if update(home, id, op) { id } else { nested(id).then(|| update_beyond(id, false, op)).flatten()? };
    Some((owner, slot_of(owner).capture.load(Ordering::Relaxed)))
}

/// A free of `size` bytes made in scope `id` (on the calling thread, `thread`) of a block it owns `owned` bytes of:
/// [`on_free`] and [`disown`] at once.
#[inline]
pub(crate) fn free_owned(thread: &ThreadState, id: ScopeId, size: usize, owned: usize, block: bool) {
    if !update(id == thread.home_scope(), id, Op::FreeOwned(size, owned, block)) {
        free_owned_closed(thread, id, size, owned, block);
    }
}

/// [`free_owned`] after scope `id` closed: the free counts where the thread is, the bytes leave the scope the block
/// was handed to.
#[cold]
fn free_owned_closed(thread: &ThreadState, id: ScopeId, size: usize, owned: usize, block: bool) {
    update_closed(thread, id, Op::Free(size));
    disown(id, owned, block);
}

/// Scope `id` no longer owns `bytes` bytes (and, with `block`, one block) it owned; nor do the scopes enclosing it.
pub(crate) fn disown(id: ScopeId, bytes: usize, block: bool) {
    let home = THREAD.try_with(|thread| id == thread.home_scope()) == Ok(true);
    if !update(home, id, Op::Disown(bytes, block)) && nested(id) {
        update_beyond(id, false, Op::Disown(bytes, block));
    }
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
        let index = claim_slot().unwrap_or_else(|| panic!("ying: more than {SLOTS} measured scopes are open at once"));
        let slot = &SLOT_TABLE[index];
        // The slot forgets the closed scope it held before it says anything of this one (see `forwarded`).
        slot.closed.store(None, Ordering::Relaxed);
        fence(Ordering::Release);
        slot.home.reset();
        slot.shared.reset();
        for blocks in &slot.live_blocks {
            blocks.store(0, Ordering::Relaxed);
        }
        slot.live_bytes.store(0, Ordering::Relaxed);
        slot.peak_bytes.store(0, Ordering::Relaxed);
        slot.has_children.store(false, Ordering::Relaxed);
        // The scope encloses what its thread does; it is enclosed by the innermost open scope its thread is in (a
        // process-attributed scope counts every thread, and is enclosed by none). It records every stack when that
        // scope does, so that the blocks it hands over on closing are named like the others.
        let parent = match attribution {
            Attribution::Process => None,
            _ => THREAD.try_with(innermost_open).unwrap_or(None),
        };
        let mut capture = capture;
        if let Some(parent) = parent {
            let parent = slot_of(parent);
            parent.has_children.store(true, Ordering::Relaxed);
            capture |= parent.capture.load(Ordering::Relaxed);
        }
        let generation = GENERATION.fetch_add(1, Ordering::Relaxed) + 1;
        let nested = if parent.is_some() { NESTED } else { 0 };
        let id = ScopeId::from_bits((generation << (SLOT_BITS + 1)) | nested | index as u64)
            .expect("generations count from 1");
        slot.parent.store(parent, Ordering::Relaxed);
        slot.capture.store(capture, Ordering::Relaxed);
        crate::hot::live::on_scope_open(id);
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
        // Before any allocation is attributed to the scope: this thread's updates go to the home counters. A nested
        // scope has no home thread: its updates take the shared path, which carries them outwards, so that the home
        // path of every other scope has nothing to test for nesting.
        let previous_home = THREAD
            .try_with(|t| if parent.is_none() { t.replace_home_scope(Some(id)) } else { t.home_scope() })
            .unwrap_or(None);
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
        let slot = slot_of(self.id);
        let parent = slot.parent.load(Ordering::Relaxed);
        if let Some(parent) = parent {
            // Before the scope closes: an update that finds it closed finds where its blocks went.
            slot.closed_parent.store(Some(parent), Ordering::Relaxed);
            slot.closed.store(Some(self.id), Ordering::Release);
            if slot.has_children.load(Ordering::Relaxed) {
                adopt_children(self.id, parent);
            }
        }
        if !slot.id.compare_exchange(Some(self.id), None, Ordering::SeqCst, Ordering::Relaxed) {
            return ScopeStats::default(); // already closed
        }
        while slot.users.load(Ordering::SeqCst) != 0 {
            core::hint::spin_loop();
        }
        let stats = read_figures(slot);
        // The blocks the scope owns go to the nearest open scope enclosing it, which counted them all along; the
        // blocks this thread allocated in the scope stay recognisable after it: out of the nursery, unless the heir
        // is the thread's own scope, whose nursery it becomes again.
        let heir = nearest_open(parent);
        crate::hot::live::on_scope_close(self.id, heir, previous_home);
        slot.claimed.store(false, Ordering::Release);
        stats
    }
}

/// In a child process, just after the fork: the updaters announced in `users` were other threads of the parent,
/// which the child does not have (the forking thread itself was announced nowhere: it was in `fork`), so no close
/// in the child waits for them. The scopes other threads opened stay open in the child, with no home thread: the
/// child's updates of them take the shared path.
#[cfg(unix)]
pub(crate) fn forget_other_threads() {
    for slot in &SLOT_TABLE {
        slot.users.store(0, Ordering::SeqCst);
    }
}

/// Announces an update of scope `id` by another thread than its home thread, as [`with_open`] does, until
/// [`end_update`]: for tests that need an update in flight.
#[cfg(all(test, unix))]
pub(crate) fn begin_update(id: ScopeId) {
    slot_of(id).users.fetch_add(1, Ordering::SeqCst);
}

/// Ends the update [`begin_update`] announced.
#[cfg(all(test, unix))]
pub(crate) fn end_update(id: ScopeId) {
    slot_of(id).users.fetch_sub(1, Ordering::Release);
}

/// Takes a free slot, in turn from the one after the slot taken last; `None` when all are taken.
fn claim_slot() -> Option<usize> {
    let start = NEXT_SLOT.load(Ordering::Relaxed);
    let index = (0..SLOTS).map(|offset| (start + offset) % SLOTS).find(|&index| {
        SLOT_TABLE[index].claimed.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok()
    })?;
    NEXT_SLOT.store((index + 1) % SLOTS, Ordering::Relaxed);
    Some(index)
}

/// The innermost open scope the calling thread (`thread`) is in: the scope it is attributed to if open, else the
/// first open one of those [`update_closed`] would count in; `None` when there is none.
fn innermost_open(thread: &ThreadState) -> Option<ScopeId> {
    let id = attributed(thread)?;
    if id == slot_of(id).id.load(Ordering::Acquire) {
        return Some(id);
    }
    nearest_open(forwarded(id))
        .or_else(|| thread.entered_from().and_then(|from| nearest_open(Some(from))))
        .or_else(|| process_scope_for(thread))
}

/// `id` if it is open, else the nearest open scope enclosing it (as far as closed slots remember).
fn nearest_open(mut id: Option<ScopeId>) -> Option<ScopeId> {
    while let Some(scope) = id {
        let slot = slot_of(scope);
        if scope == slot.id.load(Ordering::Acquire) {
            return Some(scope);
        }
        id = forwarded(scope).filter(|&parent| generation(parent) < generation(scope));
    }
    None
}

/// Scope `id` closes before scopes opened inside it: they take its parent (`parent`) as theirs.
#[cold]
fn adopt_children(id: ScopeId, parent: ScopeId) {
    for slot in &SLOT_TABLE {
        let _ = slot.parent.compare_exchange(Some(id), Some(parent), Ordering::AcqRel, Ordering::Relaxed);
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
/// Scopes nest: a scope opened while its thread is in another (a [`measure`](crate::measure) inside a leak test,
/// or inside another `measure`) is enclosed by it, and everything counted in the inner scope counts in the
/// enclosing ones too. A thread in a scope is in the scopes enclosing it as well.
///
/// A handle outliving its scope is harmless: a closed scope attributes nothing, and hides nothing either (see
/// [`enter`](Self::enter)).
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

    /// Attributes the calling thread's allocations to this scope, and to the scopes enclosing it, until the guard
    /// is dropped.
    ///
    /// While this scope is closed (it closed before the thread entered it, or while the guard was held), the
    /// thread is in the scopes it is really in:
    ///
    /// - the scopes that enclosed this one and are still open (the thread's work belongs to the code that
    ///   measured it), or, when none is,
    /// - the scope the thread was in when it entered this one, and the scopes enclosing that, if open;
    /// - under process attribution, the process-attributed scope in any case: it counts every thread.
    ///
    /// Entering an inert handle (of no scope) changes nothing.
    #[must_use = "the thread leaves the scope when the guard is dropped"]
    pub fn enter(&self) -> EnterGuard {
        let (previous, previous_from) = match self.id {
            None => THREAD.try_with(|t| (t.scope(), t.entered_from())).unwrap_or((None, None)),
            Some(id) => THREAD
                .try_with(|t| {
                    let previous = t.replace_scope(Some(id));
                    (previous, t.replace_entered_from(previous))
                })
                .unwrap_or((None, None)),
        };
        EnterGuard { previous, previous_from, _not_send: core::marker::PhantomData }
    }
}

/// Keeps the calling thread in a [`Scope`]; dropping it restores the thread's previous scope.
///
/// A guard may outlive its scope: the thread is then in the scopes [`Scope::enter`] describes.
#[derive(Debug)]
pub struct EnterGuard {
    previous: Option<ScopeId>,
    /// The scope the thread had entered its previous scope from.
    previous_from: Option<ScopeId>,
    /// The guard changes the state of the thread that created it, so it must be dropped on that thread.
    _not_send: core::marker::PhantomData<*const ()>,
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        let (previous, from) = (self.previous, self.previous_from);
        let _ = THREAD.try_with(|t| {
            t.replace_scope(previous);
            t.replace_entered_from(from);
        });
    }
}
