//! The live entries, as one store: the only way in for the allocator, the scopes and the readers.
//!
//! An entry lives in one of two places: the shared live table (`table`), or, for a block a thread allocated in a
//! scope it opened, that thread's nursery (`nursery`), which needs no lock. The two know nothing of each other;
//! what ties them together is here:
//!
//! - a removal looks in the held nurseries first, then in the table: an entry moving out of a nursery is in the
//!   table before its slot is cleared, so it is never missed;
//! - a nursery empties into the table ([`move_to_table`], the function it is handed), when its scope closes or
//!   its thread allocates for another scope;
//! - the readers of every entry read both.

use super::entry::Entry;
use super::nursery::{self, MovingSlot};
use super::table;
use crate::base::ids::{ScopeId, StackId};
use crate::base::raw::{RawSystem, RawVec};
use crate::base::thread::ThreadState;
use crate::hot::sampler::Weight;

pub(crate) use super::nursery::{frees_gated, set_process_scope_open};
pub(crate) use super::table::{insert, may_hold};

/// Records the entry of `ptr`, a block of `size` bytes the calling thread allocated in `scope`, its home scope or
/// the process-attributed scope (which records `stack` for it, if any, and nothing else), in the thread's nursery.
/// Returns false when the nursery cannot take it: the caller [`insert`]s it.
#[inline]
pub(crate) fn insert_nursed(
    thread: &ThreadState,
    ptr: usize,
    size: usize,
    scope: ScopeId,
    stack: Option<StackId>,
) -> bool {
    nursery::insert(thread, ptr, size, scope, stack, move_to_table)
}

pub(crate) use nursery::{OwnBlock, walk_tree};

/// Moves an entry out of a nursery into the live table: inserted under its shard's lock, which the slot is cleared
/// under (see [`table::insert_moved`]).
fn move_to_table(ptr: usize, entry: Entry, slot: MovingSlot<'_>) {
    table::insert_moved(ptr, entry, || slot.clear());
}

/// At the opening of scope `id`: no entry of the live table is known to be its yet.
pub(crate) fn on_scope_open(id: ScopeId) {
    table::forget_owner(id);
}

/// At the close of scope `closing`, one of the calling thread's: the blocks it owns now belong to `heir` (the
/// nearest open scope enclosing it, if any). The entries its thread's nursery kept stay there when the thread's
/// scope from now on (`home`) is the nursery's; otherwise they move to the live table, where they stay recognisable
/// after the scope, and with no `home` the nursery goes back to the pool.
pub(crate) fn on_scope_close(closing: ScopeId, heir: Option<ScopeId>, home: Option<ScopeId>) {
    nursery::on_scope_close(home, move_to_table);
    if let Some(heir) = heir {
        table::hand_over(closing, heir);
    }
}

/// Removes and returns the entry for `ptr`, if it has one (in the live table or a nursery).
#[inline]
pub(crate) fn remove(ptr: usize) -> Option<Entry> {
    if nursery::any_held() {
        return remove_held(ptr);
    }
    table::remove(ptr)
}

/// [`remove`] while a nursery is held, out of line: `remove` is inlined into the allocator's realloc.
#[cold]
#[inline(never)]
fn remove_held(ptr: usize) -> Option<Entry> {
    remove_held_unless_own_nursed(ptr).unwrap_or_else(|block| Some(block.entry()))
}

/// Whether some thread holds a nursery: then a realloc takes [`remove_held_unless_own_nursed`] (out of line) rather
/// than [`remove`].
#[inline(always)]
pub(crate) fn any_nursery_held() -> bool {
    nursery::any_held()
}

/// [`remove`] for a realloc while a nursery is held, which settles a block of the calling thread's nursery apart,
/// as a free does: that block as `Err`, else the entry of `ptr`, if it has one.
#[cold]
#[inline(never)]
pub(crate) fn remove_held_unless_own_nursed(ptr: usize) -> Result<Option<Entry>, OwnBlock> {
    match remove_own_nursed(ptr) {
        Some(block) => Err(block),
        None => Ok(remove_elsewhere(ptr)),
    }
}

/// The first half of [`remove_held_unless_own_nursed`]: the block at `ptr` if the calling thread's nursery holds
/// it, whose entry is then always an [`Entry::owned_block`]'s. A free settles such blocks apart, with the entry's
/// constants.
#[inline(always)]
pub(crate) fn remove_own_nursed(ptr: usize) -> Option<OwnBlock> {
    if nursery::any_held() { nursery::take_own(ptr) } else { None }
}

/// The second half of [`remove_held_unless_own_nursed`], after [`remove_own_nursed`] found nothing.
#[inline(always)]
pub(crate) fn remove_elsewhere(ptr: usize) -> Option<Entry> {
    // The nurseries first: an entry moving out of one is in the live table before its slot is cleared.
    if nursery::any_held()
        && let Some(entry) = nursery::take_other(ptr)
    {
        return Some(entry);
    }
    table::remove(ptr)
}

/// Calls `f` with every entry, from the nurseries, then from the live table (under its shards' locks: `f` must not
/// allocate through the global allocator). An entry that moves to the table meanwhile may be seen twice.
fn for_each(mut f: impl FnMut(&Entry)) {
    for_each_at(|_, entry| f(entry));
}

/// [`for_each`] with each entry's address.
fn for_each_at(mut f: impl FnMut(usize, &Entry)) {
    nursery::for_each(|ptr, entry| f(ptr, &entry));
    table::for_each_at(f);
}

/// One sampled live block, as [`sampled`] returns it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LiveSample {
    pub(crate) stack: StackId,
    pub(crate) size: usize,
    pub(crate) weight: Weight,
}

/// A copy of every sampled live block. Only raw-system memory is used while a shard is locked, so this never
/// re-enters the allocator under a lock.
pub(crate) fn sampled() -> RawVec<LiveSample> {
    let mut out = RawVec::new_in(RawSystem);
    for_each(|entry| {
        if let Some(sample) = entry.sample.filter(|_| !entry.internal) {
            out.push(LiveSample { stack: sample.stack, size: entry.size, weight: sample.weight });
        }
    });
    out
}

/// Counts of entries by kind: (sampled, owned by a scope, internal). For tests and diagnostics.
pub(crate) fn census() -> (usize, usize, usize) {
    let (mut sampled, mut owned, mut internal) = (0, 0, 0);
    for_each(|entry| {
        sampled += usize::from(entry.sample.is_some());
        owned += usize::from(entry.scope.is_some());
        internal += usize::from(entry.internal);
    });
    (sampled, owned, internal)
}

/// Entries the nurseries hold (the rest of [`census`]'s are in the live table).
pub(crate) fn nursed() -> usize {
    let mut nursed = 0;
    nursery::for_each(|_, _| nursed += 1);
    nursed
}

/// A block a scope owns bytes of, as [`owned_by`] returns it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OwnedBlock {
    /// Its address.
    pub(crate) address: usize,
    /// Its size.
    pub(crate) size: usize,
    /// The stack the block was sampled with, if it was.
    pub(crate) stack: Option<StackId>,
    /// Bytes of the block the scope owns.
    pub(crate) owned: usize,
    /// The scope allocated the block (rather than only growing it).
    pub(crate) owns_block: bool,
}

/// The address of every live block the profiler allocated for itself (its reports and tables, a leak test's panic
/// hook's work).
pub(crate) fn internal_blocks() -> RawVec<usize> {
    let mut out = RawVec::new_in(RawSystem);
    for_each_at(|address, entry| {
        if entry.internal {
            out.push(address);
        }
    });
    out
}

/// Every live block that scope `id` owns bytes of (the scope may have closed since).
pub(crate) fn owned_by(id: ScopeId) -> RawVec<OwnedBlock> {
    let mut out = RawVec::new_in(RawSystem);
    for_each_at(|address, entry| {
        if id == entry.scope && !entry.internal {
            out.push(OwnedBlock {
                address,
                size: entry.size,
                stack: entry.sample.map(|sample| sample.stack),
                owned: entry.owned,
                owns_block: entry.owns_block,
            });
        }
    });
    out
}
