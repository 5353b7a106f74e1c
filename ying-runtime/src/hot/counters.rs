//! Exact process-wide figures, kept off any single shared cache line.
//!
//! Each of the first [`OWNED_SHARDS`] threads that allocate gets a cache-line-aligned counter block of its own, and
//! [`snapshot`] sums the blocks on read. With one writer per block, an update is a plain load and store, not a
//! locked read-modify-write, and no two threads ever write the same cache line (a counting allocator that bumps
//! one global atomic per allocation makes every core fight over that line). A block stays with its thread for the
//! life of the process (its counts are still summed after the thread exits, there being no destructor to hand it
//! back); threads beyond the first [`OWNED_SHARDS`] share [`SHARED_SHARDS`] blocks with atomic adds.
//!
//! The process peak needs a global maximum of a global sum. Rather than a shared atomic per allocation, each thread
//! batches its live-byte changes and folds them into a global live figure (and its maximum) once they reach
//! [`PEAK_BATCH`] bytes either way. The process peak is therefore approximate: with one thread it is a lower bound,
//! short of the true peak by less than `PEAK_BATCH`; with several, each other thread's unfolded changes (less than
//! `PEAK_BATCH` bytes, either way) can put it off by as much, above or below. Scopes keep their own peak exactly.

use crate::base::handles::ShardHandle;
use crate::base::thread::ThreadState;
use core::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Counter blocks owned by one thread each.
const OWNED_SHARDS: usize = 256;
/// Counter blocks shared, with atomic adds, by the threads that came after the owned blocks ran out.
const SHARED_SHARDS: usize = 16;

/// Live-byte change a thread accumulates before it updates the process peak.
pub(crate) const PEAK_BATCH: i64 = 64 * 1024;

/// Event counters: allocations, frees and their bytes. Their only writer updates them with plain loads and stores
/// (`exclusive`), several writers with atomic adds. The process keeps them in per-thread blocks ([`Shard`]), a
/// scope in per-thread parts (`hot::scope::parts`).
pub(crate) struct Events {
    allocated_bytes: AtomicU64,
    allocations: AtomicU64,
    freed_bytes: AtomicU64,
    frees: AtomicU64,
}

/// A cache-line-aligned block of event counters: the process keeps one per thread (and a few shared ones).
#[repr(align(128))]
pub(crate) struct Shard(Events);

impl Events {
    pub(crate) const fn new() -> Self {
        Self {
            allocated_bytes: AtomicU64::new(0),
            allocations: AtomicU64::new(0),
            freed_bytes: AtomicU64::new(0),
            frees: AtomicU64::new(0),
        }
    }

    /// Sets every counter to 0 (while nobody writes them).
    pub(crate) fn reset(&self) {
        for counter in [&self.allocated_bytes, &self.allocations, &self.freed_bytes, &self.frees] {
            counter.store(0, Relaxed);
        }
    }

    /// `[allocated_bytes, allocations, freed_bytes, frees]`.
    pub(crate) fn read(&self) -> [u64; 4] {
        [&self.allocated_bytes, &self.allocations, &self.freed_bytes, &self.frees].map(|counter| counter.load(Relaxed))
    }
}

impl Shard {
    const fn new() -> Self {
        Self(Events::new())
    }
}

impl core::ops::Deref for Shard {
    type Target = Events;

    fn deref(&self) -> &Events {
        &self.0
    }
}

static OWNED: [Shard; OWNED_SHARDS] = [const { Shard::new() }; OWNED_SHARDS];
static SHARED: [Shard; SHARED_SHARDS] = [const { Shard::new() }; SHARED_SHARDS];
static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);
static LIVE_FOLDED: AtomicI64 = AtomicI64::new(0);
static PEAK_FOLDED: AtomicI64 = AtomicI64::new(0);
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// Set when the first thread counts through the ying allocator: it is installed.
static OBSERVED: AtomicBool = AtomicBool::new(false);

/// Whether the ying allocator has counted an allocation or a free: it is the global allocator.
pub(crate) fn observed() -> bool {
    OBSERVED.load(Relaxed)
}

/// Where an event is counted: a counter block, whether the caller is its only writer, and the thread whose
/// live-byte changes are batched (`None`: its local storage is gone, and they are folded at once).
#[derive(Clone, Copy)]
pub(crate) struct Counter<'a> {
    shard: &'static Shard,
    exclusive: bool,
    thread: Option<&'a ThreadState>,
}

/// The counter of the calling thread (`thread`), which writes the block `shard` names: the thread's own (see
/// [`ThreadState::shard`], and `hot::first_event`, which gives a thread its block with [`assign`]).
#[inline(always)]
pub(crate) fn of_thread(thread: &ThreadState, shard: ShardHandle) -> Counter<'_> {
    Counter { shard: block(shard), exclusive: shard.exclusive(), thread: Some(thread) }
}

/// The counter of a thread whose local storage is gone: a shared block.
#[inline]
pub(crate) fn without_thread() -> Counter<'static> {
    Counter { shard: &SHARED[0], exclusive: false, thread: None }
}

/// Gives the calling thread (`thread`) its counter block, on its first allocation or free through the ying
/// allocator (see `hot::first_event`); returns the block's handle.
#[cold]
pub(crate) fn assign(thread: &ThreadState) -> ShardHandle {
    let index = NEXT_SHARD.fetch_add(1, Relaxed);
    OBSERVED.store(true, Relaxed);
    let (shard, exclusive) = match OWNED.get(index) {
        Some(owned) => (owned, true),
        None => (&SHARED[index % SHARED_SHARDS], false),
    };
    let handle = ShardHandle::new(shard, exclusive);
    thread.set_shard(handle);
    handle
}

/// The block `shard` names.
#[inline(always)]
fn block(shard: ShardHandle) -> &'static Shard {
    // SAFETY: every shard handle is made by `assign`, from one of the `static` blocks.
    unsafe { shard.block::<Shard>() }
}

/// Adds `value` to `counter`: a plain load and store for the block's only writer, an atomic add otherwise.
#[inline]
pub(crate) fn add(counter: &AtomicU64, value: u64, exclusive: bool) {
    if exclusive {
        counter.store(counter.load(Relaxed).wrapping_add(value), Relaxed);
    } else {
        counter.fetch_add(value, Relaxed);
    }
}

/// Folds a live-byte change into the batched process live figure and its peak.
#[inline]
fn track_live(thread: Option<&ThreadState>, delta: i64) {
    match thread {
        Some(thread) => track_pending(thread, delta),
        None => fold_live(delta),
    }
}

/// Adds a live-byte change to the thread's pending batch, folding the batch once it reaches [`PEAK_BATCH`] bytes
/// either way.
#[inline(always)]
fn track_pending(thread: &ThreadState, delta: i64) {
    let pending = thread.pending_live.get() + delta;
    // `-PEAK_BATCH < pending < PEAK_BATCH`, as one unsigned comparison.
    if ((pending + PEAK_BATCH - 1) as u64) < (2 * PEAK_BATCH - 1) as u64 {
        thread.pending_live.set(pending);
    } else {
        thread.pending_live.set(0);
        fold_live(pending);
    }
}

/// Adds a batch of live-byte changes to the process live figure and raises its peak.
#[cold]
fn fold_live(pending: i64) {
    let live = LIVE_FOLDED.fetch_add(pending, Relaxed) + pending;
    PEAK_FOLDED.fetch_max(live, Relaxed);
}

impl Events {
    /// Counts one allocation of `size` bytes; `exclusive`: the caller is the counters' only writer.
    #[inline(always)]
    pub(crate) fn count_alloc(&self, size: usize, exclusive: bool) {
        add(&self.allocated_bytes, size as u64, exclusive);
        add(&self.allocations, 1, exclusive);
    }

    /// Counts one free of `size` bytes.
    #[inline(always)]
    pub(crate) fn count_free(&self, size: usize, exclusive: bool) {
        add(&self.freed_bytes, size as u64, exclusive);
        add(&self.frees, 1, exclusive);
    }

    /// Counts a realloc from `old` to `new` bytes: the same block, so only bytes move.
    #[inline(always)]
    pub(crate) fn count_resize(&self, old: usize, new: usize, exclusive: bool) {
        if new >= old {
            add(&self.allocated_bytes, (new - old) as u64, exclusive);
        } else {
            add(&self.freed_bytes, (old - new) as u64, exclusive);
        }
    }
}

/// Counts one allocation of `size` bytes with `counter`.
#[inline]
pub(crate) fn on_alloc(counter: Counter<'_>, size: usize) {
    counter.shard.count_alloc(size, counter.exclusive);
    track_live(counter.thread, size as i64);
}

/// Counts one free of `size` bytes with `counter`.
#[inline]
pub(crate) fn on_free(counter: Counter<'_>, size: usize) {
    counter.shard.count_free(size, counter.exclusive);
    track_live(counter.thread, -(size as i64));
}

/// Counts a successful realloc from `old` to `new` bytes with `counter`.
#[inline]
pub(crate) fn on_resize(counter: Counter<'_>, old: usize, new: usize) {
    counter.shard.count_resize(old, new, counter.exclusive);
    track_live(counter.thread, new as i64 - old as i64);
}

/// The counter block of a [`plain`](ThreadState::plain) thread.
#[inline(always)]
fn plain_shard(thread: &ThreadState) -> &'static Shard {
    debug_assert!(thread.plain());
    // SAFETY: a plain thread has its shard, which only it writes (`ThreadState::plain` is set only then).
    block(unsafe { thread.shard().unwrap_unchecked() })
}

/// [`on_alloc`] for a [`plain`](ThreadState::plain) thread: its block's only writer, no checks.
#[inline(always)]
pub(crate) fn on_alloc_plain(thread: &ThreadState, size: usize) {
    plain_shard(thread).count_alloc(size, true);
    track_pending(thread, size as i64);
}

/// [`on_free`] for a [`plain`](ThreadState::plain) thread.
#[inline(always)]
pub(crate) fn on_free_plain(thread: &ThreadState, size: usize) {
    plain_shard(thread).count_free(size, true);
    track_pending(thread, -(size as i64));
}

/// [`on_resize`] for a [`plain`](ThreadState::plain) thread.
#[inline(always)]
pub(crate) fn on_resize_plain(thread: &ThreadState, old: usize, new: usize) {
    plain_shard(thread).count_resize(old, new, true);
    track_pending(thread, new as i64 - old as i64);
}

/// Counts an event the profiler could not record (thread-local storage unavailable, a table full).
pub(crate) fn on_dropped() {
    DROPPED.fetch_add(1, Relaxed);
}

/// Exact heap figures of the whole process, as counted by the ying allocator.
///
/// Every field is exact except `peak_bytes`, whose precision is documented on the field. Allocations the profiler
/// makes for itself are not counted. A `realloc` is one allocation: growing a block adds to `allocated_bytes`,
/// shrinking it adds to `freed_bytes`, and neither changes `allocations` or `frees`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct HeapStats {
    /// Bytes allocated since the process started (including growth by `realloc`).
    pub allocated_bytes: u64,
    /// Number of allocations (`alloc` and `alloc_zeroed` calls that succeeded).
    pub allocations: u64,
    /// Bytes freed since the process started (including shrinkage by `realloc`).
    pub freed_bytes: u64,
    /// Number of frees (`dealloc` calls).
    pub frees: u64,
    /// Bytes live now: `allocated_bytes - freed_bytes`.
    pub live_bytes: u64,
    /// Blocks live now: `allocations - frees`.
    pub live_blocks: u64,
    /// The largest `live_bytes` seen. To stay off a shared cache line, each thread folds its live-byte changes
    /// into the process figure in batches of 64 KiB, so this is within 64 KiB per thread that was allocating or
    /// freeing at the time of the true peak (with one thread, a lower bound; never below the current
    /// `live_bytes`). The peak of a [`measure`](crate::measure) scope is exact.
    pub peak_bytes: u64,
    /// Events the profiler could not record in its tables (for instance an allocation made while a thread's
    /// local storage was being torn down). The exact counters above still include them.
    pub dropped_events: u64,
}

/// Sums the shards into one consistent-enough snapshot (each counter is read once; concurrent activity may land
/// between reads, never inside one).
pub(crate) fn snapshot() -> HeapStats {
    let mut stats = HeapStats::default();
    for shard in OWNED.iter().chain(&SHARED) {
        let [allocated_bytes, allocations, freed_bytes, frees] = shard.read();
        stats.allocated_bytes += allocated_bytes;
        stats.allocations += allocations;
        stats.freed_bytes += freed_bytes;
        stats.frees += frees;
    }
    stats.live_bytes = stats.allocated_bytes.saturating_sub(stats.freed_bytes);
    stats.live_blocks = stats.allocations.saturating_sub(stats.frees);
    stats.peak_bytes = (PEAK_FOLDED.load(Relaxed).max(0) as u64).max(stats.live_bytes);
    stats.dropped_events = DROPPED.load(Relaxed);
    stats
}
