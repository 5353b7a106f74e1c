//! The update protocol: how an update of a scope's figures (an [`Op`]) reaches the part its thread writes, on the
//! scope's home thread, on another thread, through a nested scope to those enclosing it, and after the scope
//! closed (drawn at the head of `hot::scope`); and the updates the allocator makes, one function each.

use super::parts::{self, Figures, Part};
use super::slots::{Slot, forwarded, generation, nested, process_scope_for, slot_of};
use crate::base::handles::PartHandle;
use crate::base::ids::ScopeId;
use crate::base::thread::{THREAD, ThreadState};
use core::sync::atomic::Ordering;

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

/// Runs `f` on the slot of scope `id` with the part the calling thread writes, if that scope is still open;
/// reports whether it was.
///
/// On the scope's home thread (the one that opened it and will close it) the scope is open: no check, and `f`
/// writes the home part. Other threads check the id, and write a part of their own (see `parts`).
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
    let part = thread.part()?;
    // SAFETY: every part handle is made by `take_part`, from a part of the static pool.
    let part = unsafe { part.get::<Part>() };
    part.counts_for(id).then_some(part)
}

/// Takes (or finds) the calling thread's part for scope `id`, in slot `slot`; `None` when the scope closed.
#[cold]
#[inline(never)]
fn take_part(thread: &ThreadState, slot: &Slot, id: ScopeId) -> Option<Writer> {
    match parts::take(&thread.parts, id, &slot.figures, || id == slot.id.load(Ordering::SeqCst))? {
        Some(part) => {
            thread.set_part(PartHandle::new(part));
            Some(Writer::Own(part))
        }
        None => Some(Writer::Shared),
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
    /// A realloc from the first to the second, larger size of a block the scope owns, which owns the growth too.
    GrowOwned(usize, usize),
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
            Self::GrowOwned(old, new) => {
                part.events.count_resize(old, new, exclusive);
                part.add_live(figures, id, new - old, 0, exclusive);
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

/// An allocation of `size` bytes made in scope `id` on the calling thread (`thread`). `None` when the scope has
/// closed; otherwise the scope now owns the block, and the flag says whether the scope records the stack of every
/// allocation. The enclosing scopes count the allocation and the block too.
#[inline(always)]
pub(crate) fn on_alloc(thread: &ThreadState, id: ScopeId, size: usize) -> Option<bool> {
    update(Some(thread), id, Op::Alloc(size)).then(|| slot_of(id).capture.load(Ordering::Relaxed))
}

/// [`on_alloc`] for a thread whose scope `id` has closed: counted in the scopes the thread is still in (see
/// [`Scope::enter`](super::Scope::enter)). Returns the innermost of them, which owns the block, and whether it
/// records every stack.
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

/// A realloc from `old` to `new` (larger) bytes made in scope `id` by the calling thread (`thread`) of a block `id`
/// owns: [`on_resize`] and [`own`] of the growth at once. Returns what [`own`] returns.
#[inline]
pub(crate) fn grow_owned(thread: &ThreadState, id: ScopeId, old: usize, new: usize) -> Option<(ScopeId, bool)> {
    if update(Some(thread), id, Op::GrowOwned(old, new)) {
        return Some((id, slot_of(id).capture.load(Ordering::Relaxed)));
    }
    on_resize(thread, id, old, new);
    own(id, new - old, false)
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
