//! The slots scopes live in: a static table of [`SLOTS`] slots of atomics, claimed in turn; the ids that name a scope
//! in its slot; the links between nested scopes (each slot's parent, and the scope a closed nested scope handed its
//! blocks to); and the open process-attributed scope, with the scope each thread's activity is attributed to.

use super::parts::Figures;
use crate::base::ids::{AtomicScopeId, ScopeId};
use crate::base::thread::ThreadState;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};

const SLOT_BITS: u32 = 8;
pub(super) const SLOTS: usize = 1 << SLOT_BITS;
/// The bit of a scope's id above its slot's index: set when the scope had a parent when it opened.
const NESTED: u64 = 1 << SLOT_BITS;

pub(super) struct Slot {
    pub(super) claimed: AtomicBool,
    /// Every allocation attributed to this scope records its stack (sampled with certainty).
    pub(super) capture: AtomicBool,
    /// The open scope in this slot, if any.
    pub(super) id: AtomicScopeId,
    /// The nearest open scope enclosing it, if any: every update of this scope is applied to it too (and so on
    /// outwards). Set at open; when the parent closes first, its parent takes its place ([`adopt_children`]).
    pub(super) parent: AtomicScopeId,
    /// A scope was opened inside this one: closing it looks for children to give its parent.
    pub(super) has_children: AtomicBool,
    /// The last nested scope this slot held, once closed, and the scope it handed its blocks to
    /// (`closed_parent`): a sequence lock on `closed` (see [`forwarded`]).
    pub(super) closed: AtomicScopeId,
    pub(super) closed_parent: AtomicScopeId,
    /// The figures, in parts (see `parts`).
    pub(super) figures: Figures,
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

/// Takes a free slot, in turn from the one after the slot taken last; `None` when all are taken. Returns its index
/// and the slot.
pub(super) fn claim_slot() -> Option<(usize, &'static Slot)> {
    let start = NEXT_SLOT.load(Ordering::Relaxed);
    let index = (0..SLOTS).map(|offset| (start + offset) % SLOTS).find(|&index| {
        SLOT_TABLE[index].claimed.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok()
    })?;
    NEXT_SLOT.store((index + 1) % SLOTS, Ordering::Relaxed);
    Some((index, &SLOT_TABLE[index]))
}

/// The id of a scope opening in the slot at `index`, of the next generation; `nested`: it has a parent.
pub(super) fn new_id(index: usize, nested: bool) -> ScopeId {
    let generation = GENERATION.fetch_add(1, Ordering::Relaxed) + 1;
    let nested = if nested { NESTED } else { 0 };
    ScopeId::from_bits((generation << (SLOT_BITS + 1)) | nested | index as u64).expect("generations count from 1")
}

/// The slot of scope `id` (which holds it while it is open).
#[inline(always)]
pub(super) fn slot_of(id: ScopeId) -> &'static Slot {
    &SLOT_TABLE[(id.bits() as usize) & (SLOTS - 1)]
}

/// Whether scope `id` had a parent when it opened (and so has one until it closes: a parent that closes first
/// leaves its own parent in its place).
#[inline(always)]
pub(super) fn nested(id: ScopeId) -> bool {
    id.bits() & NESTED != 0
}

/// The generation of scope `id`: scopes opened later have higher ones.
pub(super) fn generation(id: ScopeId) -> u64 {
    id.bits() >> (SLOT_BITS + 1)
}

/// The scope closed nested scope `id` handed its blocks to, while its slot remembers it.
pub(super) fn forwarded(id: ScopeId) -> Option<ScopeId> {
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

/// `id` if it is open, else the nearest open scope enclosing it (as far as closed slots remember).
pub(super) fn nearest_open(mut id: Option<ScopeId>) -> Option<ScopeId> {
    while let Some(scope) = id {
        let slot = slot_of(scope);
        if scope == slot.id.load(Ordering::Acquire) {
            return Some(scope);
        }
        id = forwarded(scope).filter(|&parent| generation(parent) < generation(scope));
    }
    None
}

/// The innermost open scope the calling thread (`thread`) is in: the scope it is attributed to if open, else the
/// first open one of those `update::update_closed` would count in; `None` when there is none.
pub(super) fn innermost_open(thread: &ThreadState) -> Option<ScopeId> {
    let id = attributed(thread)?;
    if id == slot_of(id).id.load(Ordering::Acquire) {
        return Some(id);
    }
    nearest_open(forwarded(id))
        .or_else(|| thread.entered_from().and_then(|from| nearest_open(Some(from))))
        .or_else(|| process_scope_for(thread))
}

/// Scope `id` closes before scopes opened inside it: they take its parent (`parent`) as theirs.
#[cold]
pub(super) fn adopt_children(id: ScopeId, parent: ScopeId) {
    for slot in &SLOT_TABLE {
        let _ = slot.parent.compare_exchange(Some(id), Some(parent), Ordering::AcqRel, Ordering::Relaxed);
    }
}

/// Makes `id`, whose slot is not open yet, the open process-attributed scope, unless one is open; false when one
/// is.
pub(super) fn open_process_scope(id: ScopeId) -> bool {
    if !PROCESS_SCOPE.compare_exchange(None, Some(id), Ordering::SeqCst, Ordering::Relaxed) {
        return false;
    }
    // Before the slot opens, so no allocation is attributed under the previous setting.
    PROCESS_SKIPS_MAIN.store(!crate::base::thread::on_main_thread(), Ordering::Relaxed);
    true
}

/// Scope `id` is no longer the open process-attributed scope; false when it was not.
pub(super) fn close_process_scope(id: ScopeId) -> bool {
    PROCESS_SCOPE.compare_exchange(Some(id), None, Ordering::SeqCst, Ordering::Relaxed)
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

/// The open process-attributed scope, if it counts the calling thread (`thread`).
pub(super) fn process_scope_for(thread: &ThreadState) -> Option<ScopeId> {
    match PROCESS_SCOPE.load(Ordering::Relaxed) {
        Some(_) if PROCESS_SKIPS_MAIN.load(Ordering::Relaxed) && thread.is_main() => None,
        id => id,
    }
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
