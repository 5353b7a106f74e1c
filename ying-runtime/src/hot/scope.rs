//! Scopes: exact figures of what one piece of code did to the heap.
//!
//! A scope lives in one of [`SLOTS`] fixed slots of atomics, so opening, updating and closing one never allocates.
//! Its id combines a generation with the slot index (and a bit, see below): blocks remember the id of the scope
//! that owns them, and a free that arrives after the scope closed (or after the slot was reused) finds a different
//! id and changes nothing.
//! A scope's figures are kept in parts, one per thread that counts in it (`hot::parts`): the thread that opened
//! the scope (its home thread), which also closes it, writes the slot's home part; any other thread writes a part
//! of its own, registered with the scope once, which the closer reads and gives back. Every writer updates its part
//! with plain loads and stores, and the peak stays exact across threads (see `hot::parts`). An update that finds the
//! scope open just before it closes lands in a part nobody reads any more, so a closed scope's figures are final
//! and a reused slot never receives a late update meant for its previous scope. A nested scope (below) has no home
//! thread.
//!
//! Scopes nest. A scope opened where its thread is in another scope (a `measure` inside a leak test) records that
//! scope as its parent, and every update of the inner scope is applied to each open scope enclosing it, outwards
//! (out of line): a block allocated in the inner scope counts in all of them, and so do its free and its peak. The
//! inner scope is no thread's home scope, so its updates take the path of other threads (`update_other`), where
//! that is done, and the home path (the scope its thread opened, nearly every update of a leak test) has nothing to
//! check. When the inner scope closes, the blocks it owns are handed to its nearest open ancestor
//! (`live::on_scope_close`), which counted them all along; a scope whose parent closes first takes its grandparent
//! as parent. Until a closed nested scope's slot is reused, the slot remembers which scope it was handed to, so that
//! an update that raced with the close (or arrives through a stale handle) still reaches the enclosing scopes.
//! Whether a scope has a parent is a bit of its id, which the path of other threads tests.

use crate::base::ids::{AtomicScopeId, ScopeId};
use crate::base::thread::{THREAD, ThreadState};
use crate::hot::parts::{self, Figures, Part};
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};
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
    /// The figures, in parts (see `hot::parts`).
    figures: Figures,
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
            figures: Figures::new(),
        }
    }
}

/// Which part of a scope an update writes.
#[derive(Clone, Copy)]
enum Writer {
    /// The home part: the scope's home thread.
    Home,
    /// A part of the calling thread's own.
    Own(&'static Part),
    /// The shared part (atomic adds): a thread without a part.
    Shared,
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

/// Runs `f` on the slot of scope `id` with the part the calling thread writes, if that scope is still open;
/// reports whether it was.
///
/// On the scope's home thread (the one that opened it and will close it) the scope is open: no check, and `f`
/// writes the home part. Other threads check the id, and write a part of their own (see `hot::parts`).
#[inline]
fn with_open(id: ScopeId, f: impl FnOnce(&Slot, Writer)) -> bool {
    let writer = THREAD.try_with(|thread| writer(Some(thread), id)).unwrap_or_else(|_| writer(None, id));
    writer.map(|writer| f(slot_of(id), writer)).is_some()
}

/// The part the calling thread (`thread`, `None` when its local storage is gone) writes in scope `id`; `None` when
/// the scope has closed.
#[inline(always)]
fn writer(thread: Option<&ThreadState>, id: ScopeId) -> Option<Writer> {
    match thread {
        Some(thread) if id == thread.home_scope() => Some(Writer::Home),
        _ => other_writer(thread, id),
    }
}

/// [`writer`] on another thread than the scope's home thread.
#[inline]
fn other_writer(thread: Option<&ThreadState>, id: ScopeId) -> Option<Writer> {
    let slot = slot_of(id);
    if id != slot.id.load(Ordering::SeqCst) {
        return None;
    }
    let Some(thread) = thread else { return Some(Writer::Shared) };
    match held_part(thread, id) {
        Some(part) => Some(Writer::Own(part)),
        None => take_part(thread, slot, id),
    }
}

/// The part the calling thread (`thread`) holds for scope `id`, if it has taken one. The part's own scope says so:
/// only its thread sets it, and to the scope it was taken for, before `take_part` points `thread.part` at it.
#[inline(always)]
fn held_part(thread: &ThreadState, id: ScopeId) -> Option<&'static Part> {
    // SAFETY: a thread's `part` is null or was set by `take_part` to a part of the static pool.
    let part = unsafe { thread.part.get().cast::<Part>().as_ref() }?;
    part.counts_for(id).then_some(part)
}

/// Takes (or finds) the calling thread's part for scope `id`, in slot `slot`; `None` when the scope closed.
#[cold]
#[inline(never)]
fn take_part(thread: &ThreadState, slot: &Slot, id: ScopeId) -> Option<Writer> {
    match parts::take(&thread.parts, id, &slot.figures, || id == slot.id.load(Ordering::SeqCst))? {
        Some(part) => {
            thread.part.set(core::ptr::from_ref(part).cast());
            Some(Writer::Own(part))
        }
        None => Some(Writer::Shared),
    }
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

/// Whether `id` is the open process-attributed scope. Its blocks may be kept in the nurseries of every thread: it
/// encloses no other scope's blocks, and the process it measures ends soon after it closes (the nurseries of other
/// threads than its home thread keep the entries of its blocks after it, until their threads allocate for another
/// scope).
#[inline(always)]
pub(crate) fn is_process_scope(id: ScopeId) -> bool {
    id == PROCESS_SCOPE.load(Ordering::Relaxed)
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
    /// Applies the update to scope `id`'s part in `slot` that `writer` names.
    #[inline(always)]
    fn apply(self, slot: &Slot, id: ScopeId, writer: Writer) {
        let figures = &slot.figures;
        match writer {
            Writer::Home => self.apply_to(&figures.home, true, figures, id),
            Writer::Own(part) => {
                // Read whole by the closer on another thread: written between two steps of its sequence number.
                let seq = part.seq.begin_write();
                self.apply_to(part, true, figures, id);
                part.seq.end_write(seq);
            }
            Writer::Shared => self.apply_to(&figures.shared, false, figures, id),
        }
    }

    /// Applies the update to `part` of scope `id` (whose figures are `figures`); `exclusive`: the caller is the
    /// part's only writer.
    #[inline(always)]
    fn apply_to(self, part: &Part, exclusive: bool, figures: &Figures, id: ScopeId) {
        match self {
            Self::Alloc(size) => {
                part.events.count_alloc(size, exclusive);
                part.add_live(figures, id, size, 1, exclusive);
            }
            Self::Free(size) => part.events.count_free(size, exclusive),
            Self::Resize(old, new) => part.events.count_resize(old, new, exclusive),
            Self::Own(bytes, block) => part.add_live(figures, id, bytes, i64::from(block), exclusive),
            Self::Disown(bytes, block) => part.sub_live(bytes, i64::from(block), exclusive),
            Self::FreeOwned(size, owned, block) => {
                part.events.count_free(size, exclusive);
                part.sub_live(owned, i64::from(block), exclusive);
            }
        }
    }
}

/// Applies `op`, made by the calling thread (`thread`, `None` when its local storage is gone), to scope `id` if it
/// is open, and to the open scopes enclosing it; returns whether `id` was open. The two common paths are inlined,
/// each compiled for its one `op`: the home path (a scope's own thread), which has nothing else to do (a nested
/// scope is no thread's home scope), and a thread writing the part it already holds in an open scope nested in
/// none (a test's helper threads: tokio's workers, a pool's threads).
#[inline(always)]
fn update(thread: Option<&ThreadState>, id: ScopeId, op: Op) -> bool {
    if let Some(thread) = thread {
        let slot = slot_of(id);
        if id == thread.home_scope() {
            op.apply_to(&slot.figures.home, true, &slot.figures, id);
            return true;
        }
        if !nested(id)
            && id == slot.id.load(Ordering::SeqCst)
            && let Some(part) = held_part(thread, id)
        {
            op.apply(slot, id, Writer::Own(part));
            return true;
        }
    }
    update_other(thread, id, op)
}

/// [`update`] on another thread than the scope's home thread.
#[inline(never)]
fn update_other(thread: Option<&ThreadState>, id: ScopeId, op: Op) -> bool {
    let Some(writer) = other_writer(thread, id) else { return false };
    op.apply(slot_of(id), id, writer);
    if nested(id) {
        update_beyond(id, true, op);
    }
    true
}

/// [`update`] on the calling thread.
#[inline]
fn update_here(id: ScopeId, op: Op) -> bool {
    match THREAD.try_with(|thread| update(Some(thread), id, op)) {
        Ok(open) => open,
        Err(_) => update_other(None, id, op),
    }
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
        let open = with_open(next, |slot, writer| {
            op.apply(slot, next, writer);
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
        && with_open(scope, |slot, writer| op.apply(slot, scope, writer))
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
#[inline(always)]
pub(crate) fn on_alloc(thread: &ThreadState, id: ScopeId, size: usize) -> Option<bool> {
    update(Some(thread), id, Op::Alloc(size)).then(|| slot_of(id).capture.load(Ordering::Relaxed))
}

/// [`on_alloc`] for a thread whose scope `id` has closed: counted in the scopes the thread is still in (see
/// [`Scope::enter`]). Returns the innermost of them, which owns the block, and whether it records every stack.
#[cold]
pub(crate) fn on_alloc_closed(thread: &ThreadState, id: ScopeId, size: usize) -> Option<(ScopeId, bool)> {
    let owner = update_closed(thread, id, Op::Alloc(size))?;
    Some((owner, slot_of(owner).capture.load(Ordering::Relaxed)))
}

/// A free of `size` bytes made in scope `id` by the calling thread (`thread`), of a block of any age or owner.
#[inline]
pub(crate) fn on_free(thread: &ThreadState, id: ScopeId, size: usize) {
    attributed_update(thread, id, Op::Free(size));
}

/// A realloc made in scope `id` by the calling thread (`thread`) from `old` to `new` bytes: growth counts as
/// allocated, shrinkage as freed.
#[inline]
pub(crate) fn on_resize(thread: &ThreadState, id: ScopeId, old: usize, new: usize) {
    attributed_update(thread, id, Op::Resize(old, new));
}

/// `op` made by the calling thread (`thread`) in its scope `id`: applied to the scope and those enclosing it or,
/// when `id` has closed, to the scopes the thread is still in.
#[inline(always)]
fn attributed_update(thread: &ThreadState, id: ScopeId, op: Op) {
    if !update(Some(thread), id, op) {
        update_closed(thread, id, op);
    }
}

/// Scope `id` now owns `bytes` more bytes of a live block (`block`: a whole new block). `None` when it has closed
/// and handed its blocks to no open scope; else the scope that owns them now (`id`, or the one it handed its blocks
/// to) and whether it records every stack.
pub(crate) fn own(id: ScopeId, bytes: usize, block: bool) -> Option<(ScopeId, bool)> {
    let op = Op::Own(bytes, block);
    let owner = if update_here(id, op) { id } else { nested(id).then(|| update_beyond(id, false, op)).flatten()? };
    Some((owner, slot_of(owner).capture.load(Ordering::Relaxed)))
}

/// A free of `size` bytes made in scope `id` (on the calling thread, `thread`) of a block it owns `owned` bytes of:
/// [`on_free`] and [`disown`] at once.
#[inline]
pub(crate) fn free_owned(thread: &ThreadState, id: ScopeId, size: usize, owned: usize, block: bool) {
    if !update(Some(thread), id, Op::FreeOwned(size, owned, block)) {
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
    if !update_here(id, Op::Disown(bytes, block)) && nested(id) {
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
        slot.figures.reset();
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
        read_figures(slot_of(self.id), self.id)
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
        let stats = read_figures(slot, self.id);
        slot.figures.release(self.id);
        // The blocks the scope owns go to the nearest open scope enclosing it, which counted them all along; the
        // blocks this thread allocated in the scope stay recognisable after it: out of the nursery, unless the heir
        // is the thread's own scope, whose nursery it becomes again.
        let heir = nearest_open(parent);
        crate::hot::live::on_scope_close(self.id, heir, previous_home);
        slot.claimed.store(false, Ordering::Release);
        stats
    }
}

/// In a child process, just after the fork: the parts other threads of the parent were writing are whole again
/// (the forking thread itself was writing none: it was in `fork`), so no close in the child waits for them. The
/// scopes other threads opened stay open, with no home thread: the child's updates of them take its own parts.
#[cfg(unix)]
pub(crate) fn forget_other_threads() {
    parts::forget_other_threads();
}

/// Takes every scope's peak lock before the process forks (see `hot::fork`).
#[cfg(unix)]
pub(crate) fn lock_for_fork() {
    SLOT_TABLE.iter().for_each(|slot| slot.figures.lock_for_fork());
}

/// Releases the locks [`lock_for_fork`] took, in the parent and in the child.
///
/// # Safety
///
/// The calling thread took the locks with [`lock_for_fork`] (in a child: the thread that forked it did).
#[cfg(unix)]
pub(crate) unsafe fn unlock_after_fork() {
    for slot in &SLOT_TABLE {
        // SAFETY: the caller took every slot's lock with `lock_for_fork`, as this function's contract says.
        unsafe { slot.figures.unlock_after_fork() };
    }
}

/// Begins an update of scope `id` by a thread other than its home thread that does not end until [`end_update`]:
/// for tests that need an update in flight.
#[cfg(all(test, unix))]
pub(crate) fn begin_update(id: ScopeId) -> &'static Part {
    parts::begin_stuck_write(id, &slot_of(id).figures)
}

/// Ends the update [`begin_update`] began.
#[cfg(all(test, unix))]
pub(crate) fn end_update(part: &Part) {
    parts::end_stuck_write(part);
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

/// The figures of scope `id` in `slot`: each the sum of its parts. Called on the home thread, which sees its own
/// writes.
fn read_figures(slot: &Slot, id: ScopeId) -> ScopeStats {
    let sums = slot.figures.sums(id);
    let mut stats = ScopeStats::default();
    stats.retained_bytes = sums.live_bytes.max(0) as u64;
    stats.retained_blocks = sums.live_blocks.max(0) as u64;
    stats.peak_bytes = slot.figures.peak().max(0) as u64;
    stats.allocated_bytes = sums.allocated_bytes;
    stats.allocations = sums.allocations;
    stats.freed_bytes = sums.freed_bytes;
    stats.frees = sums.frees;
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
