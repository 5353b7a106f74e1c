//! Stack capture on the hot path and the stack table that aggregates samples per stack.
//!
//! A sampled allocation captures its stack as raw instruction pointers only (no symbol lookup, no allocation) and
//! interns it in the stack table, which also accumulates the per-stack allocation estimates and the lifetime
//! histogram of freed samples. Symbols are resolved later, outside the allocator, by [`crate::read::symbolize`].

use crate::base::handles::PendingIndex;
use crate::base::ids::StackId;
use crate::base::raw::{RawSystem, RawVec};
use crate::base::sync::{SeqCount, SpinLock};
use crate::base::thread::{THREAD, ThreadState};
use crate::hot::histogram::LifetimeHistogram;
use crate::hot::sampler::Weight;
use crate::hot::unwind::{Cached, WalkTree};
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// Deepest stack kept, counted from the allocation site; deeper (outer) frames are cut.
pub(crate) const MAX_FRAMES: usize = 64;

/// Most `tracing` spans recorded with a stack (`profile-spans`).
#[cfg(feature = "profile-spans")]
const MAX_SPANS: usize = crate::base::span_stack::MAX_SPANS;
#[cfg(not(feature = "profile-spans"))]
const MAX_SPANS: usize = 0;

/// A captured stack: instruction pointers, innermost first, and (with `profile-spans`) the `tracing` spans the
/// thread was in, innermost first.
#[derive(Clone, Copy)]
pub(crate) struct Ips {
    len: usize,
    /// The first `len` are written; the rest is never read (left unwritten: zeroing 512 bytes per capture showed in
    /// profiles).
    ips: [MaybeUninit<usize>; MAX_FRAMES],
    spans_len: usize,
    spans: [usize; MAX_SPANS],
}

impl Ips {
    /// An empty stack, with the spans the thread is in when `profile-spans` records them.
    fn new() -> Self {
        #[cfg_attr(not(feature = "profile-spans"), expect(unused_mut, reason = "spans are written with the feature"))]
        let mut stack = Self { len: 0, ips: [MaybeUninit::uninit(); MAX_FRAMES], spans_len: 0, spans: [0; MAX_SPANS] };
        #[cfg(feature = "profile-spans")]
        {
            stack.spans_len = crate::base::span_stack::current(&mut stack.spans);
        }
        stack
    }

    pub(crate) fn as_slice(&self) -> &[usize] {
        // SAFETY: the first `len` addresses are initialised (every writer writes `ips[..len]` before setting `len`),
        // and `MaybeUninit<usize>` has the layout of `usize`.
        unsafe { core::slice::from_raw_parts(self.ips.as_ptr().cast::<usize>(), self.len) }
    }

    /// The spans the thread was in (see `base::span_stack`), innermost first; empty without `profile-spans`.
    pub(crate) fn spans(&self) -> &[usize] {
        &self.spans[..self.spans_len]
    }

    /// A multiply-rotate hash of the addresses (the stack table's key; no need to resist chosen input).
    fn hash(&self) -> u64 {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let words = self.as_slice().iter().chain([&usize::MAX]).chain(self.spans());
        let hash = words.fold(0u64, |hash, &word| (hash.rotate_left(5) ^ word as u64).wrapping_mul(K));
        // Fold the well-mixed high bits down: the table uses both ends of the hash.
        hash ^ (hash >> 32)
    }

    fn same(&self, other: &Ips) -> bool {
        self.as_slice() == other.as_slice() && self.spans() == other.spans()
    }
}

/// Captures the calling thread's stack and adds a sampled allocation event standing for `objects` allocations and
/// `bytes` bytes to it (see [`record_alloc`]); returns the stack, or `None` when the table is full. A stack this
/// thread met just before is recognised without walking it ([`crate::hot::unwind::capture_cached`]), by the index it
/// was given; `tree` is the thread's tree of walks, if it holds a nursery.
#[inline]
pub(crate) fn record_sample(objects: f64, bytes: f64, tree: Option<&'static WalkTree>) -> Option<StackId> {
    let mut stack = Ips::new();
    match crate::hot::unwind::capture_cached(&mut stack.ips, capture_limit(), tree) {
        Cached::Hit(index) => record_again(StackId::new(index), &stack, objects, bytes),
        Cached::Walked { len, ticket } => {
            stack.len = len as usize;
            let id = record_alloc(&stack, objects, bytes)?;
            if let Some(ticket) = ticket {
                crate::hot::unwind::remember(ticket, id.get());
            }
            Some(id)
        }
        Cached::Unsupported => {
            let system = capture_with(false);
            record_alloc(&system, objects, bytes)
        }
    }
}

/// [`record_alloc`] for the frames of stack `id`, captured again; `stack` holds only the spans the thread is in
/// now, which may differ from the recorded stack's.
///
/// Without spans to compare, the figures go to the calling thread's pending record (see [`Pending`]): no lock, and
/// no cache line another thread writes.
#[inline]
fn record_again(id: StackId, stack: &Ips, objects: f64, bytes: f64) -> Option<StackId> {
    if MAX_SPANS == 0
        && let Ok(Some(pending)) = THREAD.try_with(pending_of)
    {
        pending.add(id, objects, bytes);
        return Some(id);
    }
    record_again_locked(id, stack, objects, bytes)
}

/// [`record_again`] under the stack table's lock.
#[cold]
fn record_again_locked(id: StackId, stack: &Ips, objects: f64, bytes: f64) -> Option<StackId> {
    let mut again = {
        let mut table = STACKS.lock();
        let record = &mut table.as_mut()?.records[id.index()];
        if record.ips.spans() == stack.spans() {
            record.allocated_objects += objects;
            record.allocated_bytes += bytes;
            return Some(id);
        }
        record.ips
    };
    again.spans = stack.spans;
    again.spans_len = stack.spans_len;
    record_alloc(&again, objects, bytes)
}

/// The figures a thread added to a few stacks and has not yet added to the stack table. Only its thread writes it
/// (plain loads and stores, between two steps of a sequence number); it moves them to the table when it adds to a
/// stack it has no room for or has [`PENDING_EVENTS`] events, under the table's lock, and readers of the table
/// ([`snapshot`]) add every thread's pending figures, under the same lock, so that nothing is ever missing from
/// what they read. A thread that allocates from a few places again and again (a loop in a test) adds to the table
/// once per [`PENDING_EVENTS`] allocations instead of once each, and threads that allocate from the same place at
/// once no longer take turns at the table's lock.
#[repr(align(128))]
struct Pending {
    /// Odd while its thread writes.
    seq: SeqCount,
    events: AtomicU32,
    /// Each place's stack, packed ([`StackId::pack`]: 0 for none).
    stacks: [AtomicU32; PENDING_STACKS],
    /// `f64` bits.
    objects: [AtomicU64; PENDING_STACKS],
    bytes: [AtomicU64; PENDING_STACKS],
}

/// Events a pending record holds before it moves them to the table.
const PENDING_EVENTS: u32 = 256;
/// Stacks a pending record holds figures of.
const PENDING_STACKS: usize = 4;
/// Threads with a pending record; the threads after them add to the table directly.
const PENDING_THREADS: usize = 4096;

static PENDING: [Pending; PENDING_THREADS] = [const {
    Pending {
        seq: SeqCount::new(),
        events: AtomicU32::new(0),
        stacks: [const { AtomicU32::new(0) }; PENDING_STACKS],
        objects: [const { AtomicU64::new(0) }; PENDING_STACKS],
        bytes: [const { AtomicU64::new(0) }; PENDING_STACKS],
    }
}; PENDING_THREADS];
static NEXT_PENDING: AtomicUsize = AtomicUsize::new(0);

/// The calling thread's pending record (`thread`'s), taken from [`PENDING`] at its first use; `None` once every
/// record is taken.
#[inline]
fn pending_of(thread: &ThreadState) -> Option<&'static Pending> {
    if let Some(index) = thread.pending.get() {
        return PENDING.get(index.get());
    }
    take_pending(thread)
}

#[cold]
fn take_pending(thread: &ThreadState) -> Option<&'static Pending> {
    let index = NEXT_PENDING.fetch_add(1, Ordering::Relaxed);
    let pending = PENDING.get(index)?;
    thread.pending.set(PendingIndex::new(index));
    Some(pending)
}

/// Adds `value` to the `f64` whose bits `field` holds (its only writer).
#[inline(always)]
fn add_f64(field: &AtomicU64, value: f64) {
    field.store((f64::from_bits(field.load(Ordering::Relaxed)) + value).to_bits(), Ordering::Relaxed);
}

impl Pending {
    /// Adds an event of stack `id` (on the record's thread).
    #[inline]
    fn add(&self, id: StackId, objects: f64, bytes: f64) {
        let stack = StackId::pack(Some(id));
        let events = self.events.load(Ordering::Relaxed);
        // The stack's place, or a free one.
        let place = self.stacks.iter().position(|held| {
            let held = held.load(Ordering::Relaxed);
            held == stack || held == 0
        });
        let Some(place) = place.filter(|_| events < PENDING_EVENTS) else {
            return self.restart(stack, objects, bytes);
        };
        let seq = self.seq.begin_write();
        self.events.store(events + 1, Ordering::Relaxed);
        self.stacks[place].store(stack, Ordering::Relaxed);
        add_f64(&self.objects[place], objects);
        add_f64(&self.bytes[place], bytes);
        self.seq.end_write(seq);
    }

    /// Moves the figures held to the table and starts again with an event of stack `stack` (packed), under the
    /// table's lock.
    #[cold]
    #[inline(never)]
    fn restart(&self, stack: u32, objects: f64, bytes: f64) {
        let mut table = STACKS.lock();
        let seq = self.seq.begin_write();
        if let Some(table) = table.as_mut() {
            self.for_each_own(|index, objects, bytes| {
                if let Some(record) = table.records.get_mut(index) {
                    record.allocated_objects += objects;
                    record.allocated_bytes += bytes;
                }
            });
        }
        for place in 0..PENDING_STACKS {
            self.stacks[place].store(if place == 0 { stack } else { 0 }, Ordering::Relaxed);
            let (objects, bytes) = if place == 0 { (objects, bytes) } else { (0.0, 0.0) };
            self.objects[place].store(objects.to_bits(), Ordering::Relaxed);
            self.bytes[place].store(bytes.to_bits(), Ordering::Relaxed);
        }
        self.events.store(1, Ordering::Relaxed);
        self.seq.end_write(seq);
    }

    /// Calls `f` with each stack's index and the figures held for it, as written (on the record's thread, or
    /// between two reads of the sequence number).
    fn for_each_own(&self, mut f: impl FnMut(usize, f64, f64)) {
        for place in 0..PENDING_STACKS {
            if let Some(stack) = StackId::unpack(self.stacks[place].load(Ordering::Relaxed)) {
                let objects = f64::from_bits(self.objects[place].load(Ordering::Relaxed));
                let bytes = f64::from_bits(self.bytes[place].load(Ordering::Relaxed));
                f(stack.index(), objects, bytes);
            }
        }
    }

    /// Calls `f` with the figures held, read whole from any thread (under the table's lock, so no move is under
    /// way).
    fn read(&self, mut f: impl FnMut(usize, f64, f64)) {
        let (figures, count) = self.seq.read(|| {
            let mut figures = [(usize::MAX, 0.0, 0.0); PENDING_STACKS];
            let mut count = 0;
            self.for_each_own(|index, objects, bytes| {
                figures[count] = (index, objects, bytes);
                count += 1;
            });
            (figures, count)
        });
        figures[..count].iter().for_each(|&(index, objects, bytes)| f(index, objects, bytes));
    }
}

/// The records in use.
fn pending_records() -> &'static [Pending] {
    &PENDING[..NEXT_PENDING.load(Ordering::Acquire).min(PENDING_THREADS)]
}

/// In a child process, just after the fork: the pending records other threads were writing are whole again (their
/// writers are not in the child; the forking thread was writing none).
#[cfg(unix)]
pub(crate) fn forget_other_threads() {
    for pending in pending_records() {
        pending.seq.end_abandoned_write();
    }
}

/// Where captures on this thread stop (0: at the end of the stack). Past the leak-test runner's frame lie only the
/// test harness's: not worth unwinding on every allocation.
#[inline]
fn capture_limit() -> usize {
    THREAD.try_with(|thread| thread.capture_limit.get()).unwrap_or(0)
}

/// Captures the calling thread's stack without allocating or resolving symbols: with the caching walker
/// ([`crate::hot::unwind`]) where it can, else with the system unwinder.
#[inline(never)]
pub(crate) fn capture() -> Ips {
    capture_with(true)
}

/// [`capture`], with or without the caching walker (the system unwinder alone, for comparison).
#[inline(never)]
pub(crate) fn capture_with(walker: bool) -> Ips {
    let mut stack = Ips::new();
    let limit = capture_limit();
    if walker && let Some(len) = crate::hot::unwind::capture(&mut stack.ips, limit) {
        stack.len = len;
        return stack;
    }
    let mut push = |frame: &backtrace::Frame| {
        stack.ips[stack.len] = MaybeUninit::new(frame.ip() as usize);
        stack.len += 1;
        let past_limit = limit != 0 && frame.sp() as usize > limit;
        stack.len < MAX_FRAMES && !past_limit
    };
    #[cfg(not(windows))]
    // SAFETY: `trace_unsynchronized` is unsafe only because the unwinder may not be thread-safe on every platform;
    // on the non-Windows targets it walks the stack with the system unwinder (`_Unwind_Backtrace`), which is safe to
    // call concurrently, and the callback neither panics nor allocates.
    unsafe {
        backtrace::trace_unsynchronized(&mut push);
    }
    #[cfg(windows)]
    backtrace::trace(&mut push);
    stack
}

/// Aggregates of one stack.
pub(crate) struct StackRecord {
    pub(crate) ips: Ips,
    /// Estimated allocations made from this stack (sum of `1/p`).
    pub(crate) allocated_objects: f64,
    /// Estimated bytes allocated from this stack (sum of `S/p`), including growth by realloc.
    pub(crate) allocated_bytes: f64,
    /// Lifetimes of the freed samples, weighted by the objects each stands for.
    pub(crate) lifetimes: LifetimeHistogram,
}

struct StackTable {
    index: hashbrown::HashTable<StackId, RawSystem>,
    records: RawVec<StackRecord>,
}

static STACKS: SpinLock<Option<StackTable>> = SpinLock::new(None);

/// Stacks the table has room for when it is made.
const INITIAL_STACKS: usize = 2048;

/// Interns `ips` and adds a sampled allocation event standing for `objects` allocations and `bytes` bytes; returns
/// the stack, or `None` when the table is full.
fn record_alloc(ips: &Ips, objects: f64, bytes: f64) -> Option<StackId> {
    let hash = ips.hash();
    let mut table = STACKS.lock();
    // Room for the stacks of a short test from the start: each growth copies every record (half a kilobyte each)
    // into a new mapping and rehashes every stack. The pages are touched as records fill them.
    let table = table.get_or_insert_with(|| StackTable {
        index: hashbrown::HashTable::with_capacity_in(INITIAL_STACKS, RawSystem),
        records: RawVec::with_capacity_in(INITIAL_STACKS, RawSystem),
    });
    let records = &mut table.records;
    let id = match table.index.find(hash, |&id| records[id.index()].ips.same(ips)) {
        Some(&id) => id,
        None => {
            // The last index is refused: every stack packs in a `u32` (`StackId::pack`).
            let id = StackId::new(u32::try_from(records.len()).ok().filter(|&index| index < u32::MAX)?);
            records.push(StackRecord {
                ips: *ips,
                allocated_objects: 0.0,
                allocated_bytes: 0.0,
                lifetimes: LifetimeHistogram::default(),
            });
            table.index.insert_unique(hash, id, |&id| records[id.index()].ips.hash());
            id
        }
    };
    let record = &mut records[id.index()];
    record.allocated_objects += objects;
    record.allocated_bytes += bytes;
    Some(id)
}

/// Adds a realloc growth of `bytes` bytes, recorded as `weight` says, to stack `id`, on the calling thread
/// (`thread`): to its pending record (see [`Pending`]), as an allocation of a stack met again, so that a vector
/// that grows takes no lock at each realloc.
#[inline]
pub(crate) fn record_growth(thread: &ThreadState, id: StackId, bytes: usize, weight: Weight) {
    let bytes = weight.bytes_of(bytes);
    if let Some(pending) = pending_of(thread) {
        pending.add(id, 0.0, bytes);
    } else if let Some(table) = STACKS.lock().as_mut() {
        table.records[id.index()].allocated_bytes += bytes;
    }
}

/// Records that a sample of stack `id` standing for `objects` allocations was freed after `lifetime`.
pub(crate) fn record_free(id: StackId, objects: f64, lifetime: Duration) {
    if let Some(table) = STACKS.lock().as_mut() {
        table.records[id.index()].lifetimes.add(lifetime, objects);
    }
}

/// A copy of every stack's aggregates, with the figures threads hold pending, taken under the lock into raw-system
/// memory.
#[cfg(feature = "pprof")]
pub(crate) fn snapshot() -> RawVec<(Ips, f64, f64, LifetimeHistogram)> {
    snapshot_of(|r| (r.ips, r.allocated_objects, r.allocated_bytes, r.lifetimes), |copy| (&mut copy.1, &mut copy.2))
}

/// [`snapshot`] without the stacks' instruction pointers (half a kilobyte each): every stack's (allocated objects,
/// allocated bytes, lifetimes), by index.
pub(crate) fn figures() -> RawVec<(f64, f64, LifetimeHistogram)> {
    snapshot_of(|r| (r.allocated_objects, r.allocated_bytes, r.lifetimes), |copy| (&mut copy.0, &mut copy.1))
}

/// A copy of what `copy` takes of each stack's record, with the figures threads hold pending added to the objects
/// and bytes `counts` finds in it.
fn snapshot_of<T>(copy: impl Fn(&StackRecord) -> T, counts: impl Fn(&mut T) -> (&mut f64, &mut f64)) -> RawVec<T> {
    let mut out = RawVec::new_in(RawSystem);
    if let Some(table) = STACKS.lock().as_ref() {
        out.reserve_exact(table.records.len());
        out.extend(table.records.iter().map(copy));
        for pending in pending_records() {
            pending.read(|index, objects, bytes| {
                if let Some(record) = out.get_mut(index) {
                    let (allocated_objects, allocated_bytes) = counts(record);
                    *allocated_objects += objects;
                    *allocated_bytes += bytes;
                }
            });
        }
    }
    out
}

/// Takes the stack table's lock before the process forks (see `hot::fork`).
#[cfg(unix)]
pub(crate) fn lock_for_fork() {
    STACKS.lock_for_fork();
}

/// Releases the lock [`lock_for_fork`] took, in the parent and in the child.
///
/// # Safety
///
/// The calling thread took the lock with [`lock_for_fork`] (in a child: the thread that forked it did).
#[cfg(unix)]
pub(crate) unsafe fn unlock_after_fork() {
    // SAFETY: the caller took the lock with `lock_for_fork`, as this function's contract says.
    unsafe { STACKS.unlock_after_fork() };
}

/// The captured stack `id`, if the table has it.
pub(crate) fn ips(id: StackId) -> Option<Ips> {
    STACKS.lock().as_ref()?.records.get(id.index()).map(|record| record.ips)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_stack_table_has_room_for_a_short_tests_stacks_when_made() {
        let ips = super::capture();
        assert!(super::record_alloc(&ips, 1.0, 8.0).is_some());
        let table = super::STACKS.lock();
        let table = table.as_ref().expect("made by the first stack");
        assert!(table.records.capacity() >= super::INITIAL_STACKS, "{}", table.records.capacity());
        assert!(table.index.capacity() >= super::INITIAL_STACKS, "{}", table.index.capacity());
    }

    #[test]
    fn the_walker_and_the_system_unwinder_capture_the_same_callers() {
        let (walked, system) = (super::capture(), super::capture_with(false));
        let system: Vec<usize> = system.as_slice().iter().copied().filter(|&ip| ip != 0).collect();
        // Both start inside the profiler (the system unwinder with frames of its own) and, from the first caller
        // they share, list the same callers down to the end of the stack.
        let walked = walked.as_slice();
        let first = walked.iter().position(|ip| system.contains(ip)).expect("a caller in common");
        let at = system.iter().position(|&ip| ip == walked[first]).unwrap();
        assert_eq!(&walked[first..], &system[at..]);
        assert!(walked.len() - first > 3, "{walked:x?}");
    }
}
