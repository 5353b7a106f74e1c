//! [`YingProfiler`]: the `GlobalAlloc` wrapper that keeps exact figures, samples stacks and attributes to scopes.
//!
//! # Which event takes which path
//!
//! The first branch that applies is taken. A "plain" thread is not busy inside the profiler, in no scope and the
//! only writer of its counters (`ThreadState::plain`), and no process-attributed scope is open; "full" paths are
//! `#[cold]` and `#[inline(never)]`. An event on a thread whose thread-local storage is gone is counted for the
//! process only (`dropped_alloc`, `dropped_free`, `dropped_resize`).
//!
//! ```text
//! alloc, alloc_zeroed
//! ├─ refused      above giant_alloc_limit: refuse_giant reports the stack, returns null, counts nothing
//! └─ on_alloc     after the provider's allocation (a null from it is counted nowhere)
//!    ├─ plain     fast_path: a plain thread, no sample point reached: counters::on_alloc_plain
//!    └─ full      on_alloc_full
//!       ├─ own       the thread is busy in the profiler: own_alloc (an internal entry: it and its free uncounted)
//!       ├─ sampled   the sampler's pick: record_alloc, the copy compiled with `sampled = true`
//!       ├─ scope's   attributed to a scope: record_alloc, the copy with `sampled = false` (nearly all of a test's)
//!       │  ├─ nursed    owned by the thread's home scope or the process scope: live::insert_nursed
//!       │  └─ tracked   else, or the nursery full: live::insert (the live table)
//!       └─ counted   neither: counters::on_alloc alone
//! dealloc          on_free, before the provider frees: its address may be handed out again at once
//! ├─ filtered     a nursery held or a process scope open (live::frees_gated), or the live table's filter bit set
//! │  │            (live::may_hold): on_free_filtered
//! │  ├─ nursed    a block of this thread's nursery (live::remove_own_nursed): on_free_nursed
//! │  ├─ tracked   an entry in another nursery or the live table (live::remove_elsewhere): on_free_tracked, which
//! │  │            skips the profiler's own blocks and updates the owning scope once when that scope frees
//! │  └─ untracked count_free: fast_path, else count_free_full
//! ├─ plain        count_plain_free: a plain thread (the closed gate already said no process scope is open)
//! └─ full         count_free_full: counted for the thread's scope too
//! realloc          the entry taken out before the provider reallocates, put back if it refuses
//! ├─ refused      above giant_alloc_limit: refuse_giant, the block untouched
//! ├─ held         a nursery is held (live::any_nursery_held): realloc_held
//! │  ├─ nursed    a block of this thread's nursery (the `Err` of live::remove_held_unless_own_nursed): the
//! │  │            provider's realloc, then on_realloc_nursed (refused: the entry goes to the live table)
//! │  └─ taken     any other block: realloc_taken, then on_realloc as below
//! └─ taken        live::remove, then realloc_taken, then on_realloc
//!    ├─ tracked   an entry was taken: on_realloc_tracked (the profiler's own block moves with its size alone)
//!    ├─ plain     fast_path: a shrink, or a growth that reaches no sample point: counters::on_resize_plain
//!    └─ full      on_realloc_full: counted, and recorded for a scope's realloc or a sampled growth
//! ```
//!
//! `on_realloc_nursed`, `on_realloc_tracked` and `on_realloc_full` each count the realloc (`count_resize`) and, if
//! the tables must know of it, record it (`record_realloc`, inlined into each with its `resized`, which settles the
//! owner's figures and the growth's stack): an owned block's entry of the thread's home scope or of the process scope
//! goes back to the nursery, if it has room, and any other to the live table.
//!
//! # The specialised copies, and the measurements behind them
//!
//! Each path above that repeats another's work in a shape of its own is kept because the shared form measured worse:
//! callgrind instructions of `ying-bench`, whole process, before -> after ("in a scope": `ying_leak_test`; W1 is 10M
//! alloc+free pairs, so 0.01 G is one instruction a pair; the commit in brackets). BENCHMARKS.md, "Instruction
//! counts", has the figures of now.
//!
//! - The plain paths: one per-thread `plain` flag instead of three checks, the full paths out of line: W1 3.662 G ->
//!   3.192 G (System 2.300 G), `__rust_alloc` 68 -> 44 and `__rust_dealloc` 52 -> 28 instructions (`3ea48d5`); one
//!   `fast_path` for alloc, realloc and free since, at no cost (W1 2.946 G before and after, `cd510e0`).
//! - `count_plain_free`, the free's fast path without the process scope's word (the gate read first covers it):
//!   ying_idle W1 unchanged at 2.931 G when the gate came with the nurseries (`aa2a9fc`).
//! - `record_alloc` called twice in `on_alloc_full`, each copy knowing `sampled`: one call cost 18 instructions more
//!   per allocation in a scope (`8af27cf`).
//! - The nursery test in `record_alloc` a `match`, not a closure passed to `Option::is_some_and`, which was compiled
//!   out of line: 59 instructions per allocation in a scope (W1 in a scope 7.673 G -> 7.084 G with a helper thread's
//!   part update inlined, `aefa218`); the nursery handed the stack alone, not a `Sample` that went through memory:
//!   6.916 G -> 6.847 G (`c80e778`).
//! - `on_free_nursed`, a copy of `on_free_tracked` written with the constants of the nursery's entry, where the
//!   entry built and passed went through memory: W1 in a scope 7.306 G -> 6.916 G, 39 instructions per pair
//!   (`a37313a`).
//! - `realloc_held`, out of line, asked before the live table: the profiler's own realloc keeps `live::remove`'s
//!   `Option<Entry>` for one more test of the same word (ying_idle W4 2.959 G -> 2.983 G), where one enum of both
//!   cases cost it a 64-byte copy (3.013 G); a realloc in a scope is out of line whole (W4 in a scope 5.851 G, from
//!   6.441 G before the nursery had a realloc path of its own) (`ab47bfe`).
//! - `on_realloc_nursed`, a copy of `on_realloc_tracked` compiled with the shape of the nursery's entry
//!   (`OwnBlock`): W4 in a scope 6.441 G -> 5.971 G, 0.80 of the time (`76e8e30`).
//! - `resized` takes one scope update for a growth its scope owns (`scope::grow_owned`) and adds the growth to the
//!   thread's pending record (`stacks::record_growth`) rather than under the stack table's lock: W4 in a scope
//!   6.917 G -> 6.591 G, 3.01x -> 2.41x System in one set (`c51e932`); a growth recorded with certainty is not
//!   divided by a probability of 1: 6.536 G -> 6.486 G (`c6a7e9c`).
//! - `record_stack` divides nothing for `Weight::Certain`, and an allocation past the fast path is recorded inside
//!   its one thread-state access: W1 in a scope 10.41 G -> 9.90 G (`f7b61ab`); `record_alloc` is
//!   `#[inline(always)]` in its out-of-line entry (the tracked free was inlined in its own then): 7.50 G -> 6.85 G
//!   (`224a39a`); `release` is inlined so that the entry of a block freed in a scope stays in registers (7.115 G ->
//!   7.085 G with the restructuring it came in, `280a625`).
//!
//! What a change must keep: every copy above, unless it measures the shared form again and shows it costs nothing.
//! `on_realloc_nursed` in particular stays a copy: one body shared with `on_realloc_tracked` shared its
//! thread-local closure, which the compiler put out of line with the entry passed through memory (W4 in a scope
//! 5.851 G -> 6.071 G, `99a7f54`). The full paths stay `#[cold]` and `#[inline(never)]`, so that the plain paths
//! inline into `__rust_alloc`, `__rust_dealloc` and `__rust_realloc`; an entry is taken out before the provider may
//! reuse its address, and put back when the provider refuses.

use crate::base::ids::{ScopeId, StackId};
use crate::base::stderr::Stderr;
use crate::base::thread::{THREAD, ThreadState};
use crate::hot::counters::{self, HeapStats};
use crate::hot::first_event;
use crate::hot::live::{self, Entry, OwnBlock, Sample};
use crate::hot::sampler::{self, DEFAULT_SAMPLE_INTERVAL, Weight};
use crate::hot::unwind::WalkTree;
use crate::hot::{scope, stacks};
use core::alloc::{GlobalAlloc, Layout};
use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::alloc::System;
use std::time::Instant;

/// The default [`giant_alloc_limit`](YingProfiler::giant_alloc_limit): 64 GiB on 64-bit targets, no limit on
/// smaller ones.
pub const DEFAULT_GIANT_ALLOC_LIMIT: usize = if usize::BITS >= 64 { 1 << 36 } else { usize::MAX };

/// Whether the process's global allocator is a [`YingProfiler`].
///
/// Makes one small allocation if the allocator has not been seen at work yet.
pub fn is_installed() -> bool {
    if !counters::observed() {
        drop(core::hint::black_box(Box::new(0u64)));
    }
    counters::observed()
}

/// A memory-profiling global allocator: exact heap figures, Poisson-sampled allocation stacks, and the scopes
/// [`measure`](crate::measure) and `#[ying::leak_test]` use.
///
/// It wraps a provider allocator `A` ([`System`] by default) held as a plain field: every allocation is served by
/// the provider, statically dispatched, and the profiler only watches.
///
/// ```
/// #[global_allocator]
/// static ALLOC: ying::YingProfiler = ying::YingProfiler::new();
///
/// let retained = ALLOC.total_retained_bytes();
/// assert!(retained > 0);
/// ```
///
/// Configure it with the `const` builder methods, for instance to sample densely or wrap another allocator:
///
/// ```
/// # struct Provider;
/// # unsafe impl core::alloc::GlobalAlloc for Provider {
/// #     unsafe fn alloc(&self, l: core::alloc::Layout) -> *mut u8 { unsafe { std::alloc::System.alloc(l) } }
/// #     unsafe fn dealloc(&self, p: *mut u8, l: core::alloc::Layout) { unsafe { std::alloc::System.dealloc(p, l) } }
/// # }
/// static DENSE: ying::YingProfiler = ying::YingProfiler::new().sample_interval(4096);
/// static WRAPPED: ying::YingProfiler<Provider> =
///     ying::YingProfiler::with_allocator(Provider).giant_alloc_limit(1 << 40);
/// ```
///
/// The figures ([`stats`](Self::stats)) and the sampled stacks are process-wide: install one `YingProfiler` as
/// the global allocator and ask it.
#[derive(Debug)]
pub struct YingProfiler<A: GlobalAlloc = System> {
    inner: A,
    sample_interval: AtomicUsize,
    giant_alloc_limit: usize,
}

impl YingProfiler<System> {
    /// A profiler over the [`System`] allocator with the default sampling interval (512 KiB).
    pub const fn new() -> Self {
        Self::with_allocator(System)
    }
}

impl Default for YingProfiler<System> {
    fn default() -> Self {
        Self::new()
    }
}

impl<A: GlobalAlloc> YingProfiler<A> {
    /// A profiler over the provider `inner`, for instance `mimalloc::MiMalloc`.
    pub const fn with_allocator(inner: A) -> Self {
        Self {
            inner,
            sample_interval: AtomicUsize::new(DEFAULT_SAMPLE_INTERVAL),
            giant_alloc_limit: DEFAULT_GIANT_ALLOC_LIMIT,
        }
    }

    /// Sets the mean number of bytes between two samples (Poisson sampling). `0` records every allocation.
    /// The default, 512 KiB, costs little enough for production; smaller intervals give finer stacks.
    #[must_use]
    pub const fn sample_interval(mut self, bytes: usize) -> Self {
        self.sample_interval = AtomicUsize::new(bytes);
        self
    }

    /// Refuses single allocations (and reallocations) larger than `bytes`: the allocator returns null, so the
    /// program sees an allocation failure instead of exhausting memory (`try_reserve` fails,
    /// [`handle_alloc_error`](std::alloc::handle_alloc_error) aborts), and the allocating stack is written to standard
    /// error as addresses (with the object each lies in, for `addr2line`): the refusal allocates nothing, so any
    /// limit works, a few KiB included.
    #[must_use]
    pub const fn giant_alloc_limit(mut self, bytes: usize) -> Self {
        self.giant_alloc_limit = bytes;
        self
    }

    /// Changes the mean sampling interval at run time (`0`: record every allocation). Each thread starts a fresh
    /// countdown for the new interval at its next allocation.
    pub fn set_sample_interval(&self, bytes: usize) {
        self.sample_interval.store(bytes, Relaxed);
    }

    /// The mean sampling interval in force, in bytes.
    pub fn current_sample_interval(&self) -> usize {
        self.sample_interval.load(Relaxed)
    }

    /// Exact heap figures of the whole process.
    pub fn stats(&self) -> HeapStats {
        counters::snapshot()
    }

    /// Exact number of bytes live in the process now.
    pub fn total_retained_bytes(&self) -> u64 {
        counters::snapshot().live_bytes
    }

    /// Refuses an allocation of `size` bytes: reports it (see [`report_refusal`]) and returns null.
    #[cold]
    #[inline(never)]
    fn refuse_giant(&self, size: usize) -> *mut u8 {
        report_refusal(size, self.giant_alloc_limit);
        core::ptr::null_mut()
    }

    /// Samples an allocation event of `bytes` bytes, which stands for what `weight` says: captures and interns the
    /// stack. `timed`: the block's lifetime is measured (see [`Sample::born`]).
    #[inline]
    fn sample(
        &self,
        tree: Option<&'static WalkTree>,
        bytes: usize,
        weight: Weight,
        objects: f64,
        timed: bool,
    ) -> Option<Sample> {
        let stack = record_stack(tree, bytes, weight, objects)?;
        Some(Sample { stack, weight, born: timed.then(Instant::now) })
    }

    #[inline(always)]
    fn on_alloc(&self, ptr: *mut u8, size: usize) {
        let interval = self.sample_interval.load(Relaxed);
        // No sample point reached: counted. Anything else goes the full way, out of line.
        let counted = fast_path(
            |thread| sampler::passes(thread, size, interval),
            |thread| counters::on_alloc_plain(thread, size),
        );
        if !counted {
            self.on_alloc_full(ptr, size, interval);
        }
    }

    /// [`on_alloc`](Self::on_alloc) past the fast path: counts, and records what the tables must know of.
    #[cold]
    #[inline(never)]
    fn on_alloc_full(&self, ptr: *mut u8, size: usize, interval: usize) {
        let ptr = ptr as usize;
        let counted = THREAD.try_with(|thread| {
            if thread.busy() {
                own_alloc(ptr, size);
                return;
            }
            counters::on_alloc(first_event::counter(thread), size);
            let scope = scope::attributed(thread);
            // The recording path, inlined once for the sampler's picks and once for a scope's other allocations (nearly
            // every allocation of a leak test): each copy is compiled knowing whether the allocation was sampled.
            if sampler::should_sample(thread, size, interval) {
                self.record_alloc(thread, ptr, size, scope, true, interval);
            } else if scope.is_some() {
                self.record_alloc(thread, ptr, size, scope, false, interval);
            }
        });
        if counted.is_err() {
            dropped_alloc(size);
        }
    }

    #[inline(always)]
    fn record_alloc(
        &self,
        thread: &ThreadState,
        ptr: usize,
        size: usize,
        scope: Option<ScopeId>,
        sampled: bool,
        interval: usize,
    ) {
        let saved = thread.enter_profiler();
        let mut owner = scope;
        let capture = scope.and_then(|scope| {
            scope::on_alloc(thread, scope, size).or_else(|| {
                // The thread's scope has closed: the scopes it is still in own the block.
                let (heir, capture) = scope::on_alloc_closed(thread, scope, size)?;
                owner = Some(heir);
                Some(capture)
            })
        });
        let owner = owner.filter(|_| capture.is_some());
        if sampled {
            sampler::note_interval(interval);
        }
        // A scope that records every stack samples its allocations with certainty (p = 1); lifetimes are measured
        // for the allocations the sampler picked, as everywhere else.
        let weight = match (capture, sampled) {
            (Some(true), _) => Some(Weight::Certain),
            (_, true) => Some(Weight::of_interval(interval)),
            _ => None,
        };
        let stack = weight.and_then(|weight| record_stack(live::walk_tree(thread), size, weight, 1.0));
        // A block that only a scope records (no lifetime, no process sample), of the thread's own scope or of the
        // process-attributed scope: kept in the thread's nursery when it has room. A `match`, not a closure passed to
        // `Option::is_some_and`: the closure was compiled out of line (59 instructions per allocation of a leak test).
        // The nursery takes the stack alone: a `Sample` built before it went through memory.
        let nursed = match owner {
            Some(owner) if !sampled && (owner == thread.home_scope() || scope::is_process_scope(owner)) => {
                live::insert_nursed(thread, ptr, size, owner, stack)
            }
            _ => false,
        };
        if !nursed && (owner.is_some() || stack.is_some()) {
            let sample =
                stack.zip(weight).map(|(stack, weight)| Sample { stack, weight, born: sampled.then(Instant::now) });
            let owned = if owner.is_some() { size } else { 0 };
            live::insert(
                ptr,
                Entry { scope: owner, owned, sample, owns_block: owner.is_some(), ..Entry::untracked(size) },
            );
        }
        thread.leave_profiler(saved);
    }

    #[inline(always)]
    fn on_free(&self, ptr: *mut u8, size: usize) {
        // The gate first (see `live::remove`): the filter has no bits for nurseries' blocks. A closed gate also
        // says that no process-attributed scope is open.
        if live::frees_gated() || live::may_hold(ptr as usize) {
            on_free_filtered(ptr as usize, size);
        } else if !count_plain_free(size) {
            count_free_full(size);
        }
    }

    #[inline]
    fn on_realloc(&self, taken: Option<Entry>, new_ptr: *mut u8, old: usize, new: usize) {
        let new_ptr = new_ptr as usize;
        if taken.is_some() {
            return self.on_realloc_tracked(taken, new_ptr, old, new);
        }
        let interval = self.sample_interval.load(Relaxed);
        // A shrink, or a growth that reaches no sample point: counted.
        let counted = fast_path(
            |thread| new <= old || sampler::passes(thread, new - old, interval),
            |thread| counters::on_resize_plain(thread, old, new),
        );
        if !counted {
            self.on_realloc_full(new_ptr, old, new);
        }
    }

    /// [`on_realloc`](Self::on_realloc) of an untracked block past the fast path.
    #[cold]
    #[inline(never)]
    fn on_realloc_full(&self, new_ptr: usize, old: usize, new: usize) {
        let recorded = THREAD.try_with(|thread| {
            if let Some((current, sampled_interval)) = self.count_resize(thread, false, old, new) {
                self.record_realloc(thread, None, new_ptr, current, old, new, sampled_interval);
            }
        });
        if recorded.is_err() {
            dropped_resize(old, new);
        }
    }

    /// Counts a realloc from `old` to `new` bytes for the process, and draws its growth's sample. Returns the
    /// thread's scope and the sampling interval (when sampled) if the tables must record it: always for a `tracked`
    /// block, else for a scope's realloc (which [`resized`](Self::resized) counts for the scope) or a sampled growth.
    #[inline(always)]
    fn count_resize(
        &self,
        thread: &ThreadState,
        tracked: bool,
        old: usize,
        new: usize,
    ) -> Option<(Option<ScopeId>, Option<usize>)> {
        counters::on_resize(first_event::counter(thread), old, new);
        let current = scope::attributed(thread);
        let interval = self.sample_interval.load(Relaxed);
        let sampled = new > old && sampler::should_sample(thread, new - old, interval);
        (tracked || current.is_some() || sampled).then_some((current, sampled.then_some(interval)))
    }

    /// Records a realloc the tables must know of: of a tracked block, in a scope, or sampled. Inlined into each of
    /// its callers, each of them out of line: the nursery's copy is compiled knowing the entry's shape.
    #[inline(always)]
    #[expect(clippy::too_many_arguments, reason = "the pieces of one realloc event, passed once")]
    fn record_realloc(
        &self,
        thread: &ThreadState,
        taken: Option<Entry>,
        new_ptr: usize,
        current: Option<ScopeId>,
        old: usize,
        new: usize,
        sampled_interval: Option<usize>,
    ) {
        let was_busy = thread.replace_busy(true);
        if let Some(entry) = self.resized(thread, taken, current, old, new, sampled_interval) {
            // A block its thread's own scope (or the process-attributed scope) allocated and records only the stack
            // of goes back to the thread's nursery, as at its allocation: a vector that grows is reallocated many
            // times.
            let nursed = match entry.owned_block_parts() {
                Some((owner, stack)) if owner == thread.home_scope() || scope::is_process_scope(owner) => {
                    live::insert_nursed(thread, new_ptr, new, owner, stack)
                }
                _ => false,
            };
            if !nursed {
                live::insert(new_ptr, entry);
            }
        }
        thread.replace_busy(was_busy);
    }

    /// [`GlobalAlloc::realloc`] while a nursery is held, out of line. A block of the calling thread's nursery
    /// (nearly every realloc of a leak test: a vector grown by pushes) takes a copy of the realloc path compiled
    /// with its entry's constants ([`Entry::owned_block`]'s).
    ///
    /// # Safety
    ///
    /// As for [`GlobalAlloc::realloc`] with `ptr`, `layout` and `new_size`.
    #[cold]
    #[inline(never)]
    unsafe fn realloc_held(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let block = match live::remove_held_unless_own_nursed(ptr as usize) {
            // SAFETY: as for this call.
            Ok(taken) => return unsafe { self.realloc_taken(taken, ptr, layout, new_size) },
            Err(block) => block,
        };
        // SAFETY: the caller upholds `realloc`'s contract for `ptr`, `layout` and `new_size`, passed on unchanged.
        let new_ptr = unsafe { self.inner.realloc(ptr, layout, new_size) };
        if new_ptr.is_null() {
            live::insert(ptr as usize, block.entry());
        } else {
            self.on_realloc_nursed(block, new_ptr as usize, layout.size(), new_size);
        }
        new_ptr
    }

    /// [`GlobalAlloc::realloc`] of a block whose entry, if any, was `taken` out.
    ///
    /// # Safety
    ///
    /// As for [`GlobalAlloc::realloc`] with `ptr`, `layout` and `new_size`.
    #[inline(always)]
    unsafe fn realloc_taken(&self, taken: Option<Entry>, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller upholds `realloc`'s contract for `ptr`, `layout` and `new_size`, passed on unchanged.
        let new_ptr = unsafe { self.inner.realloc(ptr, layout, new_size) };
        if new_ptr.is_null() {
            if let Some(entry) = taken {
                live::insert(ptr as usize, entry);
            }
            return new_ptr;
        }
        self.on_realloc(taken, new_ptr, layout.size(), new_size);
        new_ptr
    }

    /// [`on_realloc_tracked`](Self::on_realloc_tracked) of a block from the calling thread's nursery, which is never
    /// the profiler's own. A copy, not a call of a shared body: the two callers of one body shared its thread-local
    /// closure, which the compiler put out of line with the entry passed through memory (W4 in a scope 5.851 G ->
    /// 6.071 G instructions).
    #[inline(always)]
    fn on_realloc_nursed(&self, block: OwnBlock, new_ptr: usize, old: usize, new: usize) {
        let recorded = THREAD.try_with(|thread| {
            if let Some((current, sampled_interval)) = self.count_resize(thread, true, old, new) {
                self.record_realloc(thread, Some(block.entry()), new_ptr, current, old, new, sampled_interval);
            }
        });
        if recorded.is_err() {
            dropped_resize(old, new);
            live::insert(new_ptr, Entry { size: new, ..block.entry() });
        }
    }

    /// [`on_realloc`](Self::on_realloc) of a block the live table tracks.
    #[cold]
    fn on_realloc_tracked(&self, taken: Option<Entry>, new_ptr: usize, old: usize, new: usize) {
        if let Some(entry) = taken.filter(|entry| entry.internal) {
            live::insert(new_ptr, Entry { size: new, ..entry });
            return;
        }
        let recorded = THREAD.try_with(|thread| {
            if let Some((current, sampled_interval)) = self.count_resize(thread, true, old, new) {
                self.record_realloc(thread, taken, new_ptr, current, old, new, sampled_interval);
            }
        });
        if recorded.is_err() {
            dropped_resize(old, new);
            if let Some(entry) = taken {
                live::insert(new_ptr, Entry { size: new, ..entry });
            }
        }
    }

    /// The entry of a block resized from `old` to `new` bytes in scope `current` by the calling thread (`thread`),
    /// the realloc counted for that scope: the block keeps its origin (owner, stack, birth); an owner gains the
    /// growth it caused, or loses the owned bytes a shrink gave back.
    #[inline(always)]
    fn resized(
        &self,
        thread: &ThreadState,
        taken: Option<Entry>,
        current: Option<ScopeId>,
        old: usize,
        new: usize,
        sampled_interval: Option<usize>,
    ) -> Option<Entry> {
        let mut entry = taken;
        let owner = entry.and_then(|e| e.scope);
        // The realloc counted for the thread's scope; a block that scope owns and grows is owned by it in the same
        // update (what `own` would answer, `None` for a block of another scope).
        let grown_owned = match current {
            Some(current) if new > old && owner == Some(current) => Some(scope::grow_owned(thread, current, old, new)),
            Some(current) => {
                scope::on_resize(thread, current, old, new);
                None
            }
            None => None,
        };
        if new > old {
            let growth = new - old;
            let mut capture = None;
            let owned = grown_owned.unwrap_or_else(|| owner.and_then(|owner| scope::own(owner, growth, false)));
            if let Some((owner, owner_capture)) = owned {
                // Its owner (or the scope the owner handed its blocks to on closing) owns the growth too.
                let e = entry.as_mut()?;
                (e.scope, e.owned, capture) = (Some(owner), e.owned + growth, Some(owner_capture));
            } else if let Some((current, current_capture)) =
                current.and_then(|current| scope::own(current, growth, false))
            {
                // An older block (or one whose owner has closed) grown here: the growth is this scope's (or, when the
                // thread's scope has closed, the scope it handed its blocks to).
                capture = Some(current_capture);
                let e = entry.get_or_insert(Entry::untracked(old));
                *e = Entry { scope: Some(current), owned: growth, owns_block: false, ..*e };
            }
            // The growth is an allocation event: sampled with certainty in a scope recording every stack.
            let weight =
                if capture == Some(true) { Some(Weight::Certain) } else { sampled_interval.map(Weight::of_interval) };
            if let Some(weight) = weight {
                match entry.and_then(|e| e.sample) {
                    Some(sample) => stacks::record_growth(thread, sample.stack, growth, weight),
                    None => {
                        let sample = self.sample(None, growth, weight, 0.0, sampled_interval.is_some());
                        entry.get_or_insert(Entry::untracked(old)).sample = sample;
                    }
                }
            }
        } else if let Some(e) = entry.as_mut()
            && let Some(owner) = e.scope
        {
            let given_back = e.owned.min(old - new);
            scope::disown(owner, given_back, false);
            e.owned -= given_back;
        }
        let mut entry = entry?;
        entry.size = new;
        (entry.scope.is_some() || entry.sample.is_some()).then_some(entry)
    }
}

/// Writes the report of a refused allocation of `size` bytes to standard error: the limit, and the allocating stack
/// as addresses, each with the object it lies in and its address in that object's file (what `addr2line -e` takes).
///
/// It allocates nothing and takes no lock an allocation may hold, so that it works under any limit (symbolising
/// would allocate, past a small limit, and be refused in turn) and on any thread, the profiler's included.
#[cold]
#[inline(never)]
fn report_refusal(size: usize, limit: usize) {
    use core::fmt::Write as _;
    let stack = stacks::capture();
    let mut out = Stderr::new();
    let _ =
        writeln!(out, "ying: refused an allocation of {size} bytes, above the giant_alloc_limit of {limit} bytes, at:");
    for &ip in stack.as_slice() {
        let _ = write!(out, "    {ip:#x}");
        #[cfg(target_os = "linux")]
        write_object_of(&mut out, ip);
        out.bytes(b"\n");
    }
    out.line(b"ying: (addresses of return sites; name them with `addr2line -Cfipe OBJECT ADDRESS_IN_OBJECT`)");
}

/// Writes ` in OBJECT at ADDRESS_IN_OBJECT` for the instruction pointer `ip`, when a loaded object holds it.
#[cfg(target_os = "linux")]
fn write_object_of(out: &mut Stderr, ip: usize) {
    use core::fmt::Write as _;
    use core::ops::ControlFlow;
    crate::base::loaded::find_map(|object| {
        if !object.holds(ip) {
            return ControlFlow::Continue(());
        }
        out.bytes(b" in ");
        if object.name.is_empty() {
            // The executable, which the loader does not name.
            let mut path = [0u8; 512];
            // SAFETY: the path is a C string literal; `path` is valid for writes of its length, the most `readlink`
            // writes.
            let len = unsafe { libc::readlink(c"/proc/self/exe".as_ptr(), path.as_mut_ptr().cast(), path.len()) };
            match usize::try_from(len) {
                Ok(len) if len > 0 => out.bytes(&path[..len]),
                _ => out.bytes(b"the executable"),
            }
        } else {
            out.bytes(object.name.to_bytes());
        }
        let _ = write!(out, " at {:#x}", ip.wrapping_sub(object.bias));
        ControlFlow::Break(())
    });
}

/// An allocation the profiler made for itself (its thread is busy): remembered, so that its free is not counted.
#[cold]
fn own_alloc(ptr: usize, size: usize) {
    live::insert(ptr, Entry::internal(size));
}

/// Counts an allocation made while the thread's local storage is gone.
#[cold]
fn dropped_alloc(size: usize) {
    counters::on_alloc(counters::without_thread(), size);
    counters::on_dropped();
}

/// Counts a free made while the thread's local storage is gone.
#[cold]
fn dropped_free(size: usize) {
    counters::on_free(counters::without_thread(), size);
    counters::on_dropped();
}

/// Counts a realloc made while the thread's local storage is gone.
#[cold]
fn dropped_resize(old: usize, new: usize) {
    counters::on_resize(counters::without_thread(), old, new);
    counters::on_dropped();
}

/// Counts a free of `size` bytes for the process and the calling thread's scope.
#[inline(always)]
fn count_free(size: usize) {
    if !fast_path(|_| true, |thread| counters::on_free_plain(thread, size)) {
        count_free_full(size);
    }
}

/// Counts a free on a [`plain`](ThreadState::plain) thread (no process-attributed scope may be open: the caller
/// found the gate closed); false when the thread is not plain.
#[inline(always)]
fn count_plain_free(size: usize) -> bool {
    let counted = THREAD.try_with(|thread| {
        let plain = thread.plain();
        if plain {
            counters::on_free_plain(thread, size);
        }
        plain
    });
    counted == Ok(true)
}

/// The allocator's fast path: when the calling thread is [`plain`](ThreadState::plain) (not busy, in no scope,
/// writing its own counters), no process-attributed scope is open, and `passes` agrees, `count`s the event and
/// returns true. Otherwise changes nothing and returns false: the event goes the full way.
#[inline(always)]
fn fast_path(passes: impl FnOnce(&ThreadState) -> bool, count: impl FnOnce(&ThreadState)) -> bool {
    let counted = THREAD.try_with(|thread| {
        let fast = thread.plain() && !scope::process_scope_open() && passes(thread);
        if fast {
            count(thread);
        }
        fast
    });
    counted == Ok(true)
}

/// [`count_free`] past the fast path.
#[cold]
#[inline(never)]
fn count_free_full(size: usize) {
    let recorded = THREAD.try_with(|thread| {
        counters::on_free(first_event::counter(thread), size);
        if let Some(scope) = scope::attributed(thread) {
            scope::on_free(thread, scope, size);
        }
    });
    if recorded.is_err() {
        dropped_free(size);
    }
}

/// A free of a block that may be tracked: the live table's filter lets it through, or a nursery is held.
#[cold]
#[inline(never)]
fn on_free_filtered(ptr: usize, size: usize) {
    // A block of the calling thread's nursery (nearly every free of a leak test) apart: see `on_free_nursed`.
    if let Some(block) = live::remove_own_nursed(ptr) {
        return on_free_nursed(block.scope, block.size, size);
    }
    match live::remove_elsewhere(ptr) {
        None => count_free(size),
        Some(entry) => on_free_tracked(&entry, size),
    }
}

/// [`on_free_tracked`] of a block from the calling thread's nursery, freed as `size` bytes, whose entry is
/// [`Entry::owned_block`]'s for `owner` and `owned` bytes: all of it owned, no lifetime to add. Written out with
/// those constants: the entry built and passed to `on_free_tracked` went through memory (39 instructions per
/// alloc+free pair of a leak test).
#[inline(always)]
fn on_free_nursed(owner: Option<ScopeId>, owned: usize, size: usize) {
    let counted = THREAD.try_with(|thread| {
        counters::on_free(first_event::counter(thread), size);
        match scope::attributed(thread) {
            Some(current) if current == owner => scope::free_owned(thread, current, size, owned, true),
            current => {
                if let Some(current) = current {
                    scope::on_free(thread, current, size);
                }
                if let Some(owner) = owner {
                    scope::disown(owner, owned, true);
                }
            }
        }
    });
    if counted.is_err() {
        dropped_free(size);
        if let Some(owner) = owner {
            scope::disown(owner, owned, true);
        }
    }
}

/// A free of a block the live table tracked: counted (unless the profiler allocated it), then settled.
fn on_free_tracked(entry: &Entry, size: usize) {
    if entry.internal {
        return;
    }
    let counted = THREAD.try_with(|thread| {
        counters::on_free(first_event::counter(thread), size);
        match scope::attributed(thread) {
            None => release(entry),
            // Freed by the scope that owns it: one update of the scope for both.
            Some(current) if current == entry.scope => {
                scope::free_owned(thread, current, size, entry.owned, entry.owns_block);
                release_sample(entry);
            }
            Some(current) => {
                scope::on_free(thread, current, size);
                release(entry);
            }
        }
    });
    if counted.is_err() {
        dropped_free(size);
        release(entry);
    }
}

/// Settles what a freed block's entry recorded: its owner's figures and its stack's lifetime histogram. Inlined, so
/// that the entry of a block freed in a scope stays in registers.
#[inline]
fn release(entry: &Entry) {
    if let Some(owner) = entry.scope {
        scope::disown(owner, entry.owned, entry.owns_block);
    }
    release_sample(entry);
}

/// Captures and interns the stack of an allocation event of `bytes` bytes, which stands for what `weight` says
/// (`objects` allocations at p = 1): the stack, or `None` (counted as dropped) when the table is full.
#[inline]
fn record_stack(tree: Option<&'static WalkTree>, bytes: usize, weight: Weight, objects: f64) -> Option<StackId> {
    let stack = match weight {
        Weight::Certain => stacks::record_sample(objects, bytes as f64, tree),
        Weight::Sampled(interval) => {
            let p = sampler::inclusion_probability(bytes, interval.get());
            stacks::record_sample(objects / p, bytes as f64 / p, tree)
        }
    };
    if stack.is_none() {
        counters::on_dropped();
    }
    stack
}

/// Adds a freed sampled block's lifetime to its stack's histogram, when it was measured.
fn release_sample(entry: &Entry) {
    let Some(Sample { stack, weight, born: Some(born) }) = entry.sample else { return };
    // A block sampled with certainty by a scope recording every stack was timed because the sampler picked it:
    // it stands for as many lifetimes as the sampler's other picks.
    let interval = match weight {
        Weight::Certain => sampler::interval_in_force(),
        Weight::Sampled(interval) => interval.get(),
    };
    let objects = 1.0 / sampler::inclusion_probability(entry.size, interval);
    stacks::record_free(stack, objects, born.elapsed());
}

// SAFETY: every method forwards to the provider `A` with the caller's pointer and layout unchanged and returns the
// provider's result (or null, which `GlobalAlloc` permits, for a refused giant allocation). The bookkeeping around
// the calls never allocates through the global allocator while holding a lock, never unwinds, and never touches the
// memory of the block.
unsafe impl<A: GlobalAlloc> GlobalAlloc for YingProfiler<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > self.giant_alloc_limit {
            return self.refuse_giant(layout.size());
        }
        // SAFETY: the caller upholds `alloc`'s contract for `layout`, which is passed on unchanged.
        let ptr = unsafe { self.inner.alloc(layout) };
        if !ptr.is_null() {
            self.on_alloc(ptr, layout.size());
        }
        ptr
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() > self.giant_alloc_limit {
            return self.refuse_giant(layout.size());
        }
        // SAFETY: the caller upholds `alloc_zeroed`'s contract for `layout`, which is passed on unchanged.
        let ptr = unsafe { self.inner.alloc_zeroed(layout) };
        if !ptr.is_null() {
            self.on_alloc(ptr, layout.size());
        }
        ptr
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // The entry goes before the memory does: once the provider has the block back it may hand the same
        // address to another thread, whose entry must not be the one removed.
        self.on_free(ptr, layout.size());
        // SAFETY: the caller guarantees `ptr` was allocated by this allocator (hence by `inner`) with `layout`.
        unsafe { self.inner.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > self.giant_alloc_limit {
            return self.refuse_giant(new_size);
        }
        if live::any_nursery_held() {
            // SAFETY: as for this call.
            return unsafe { self.realloc_held(ptr, layout, new_size) };
        }
        // Taken out before the provider may free the old address (see `dealloc`), put back if the realloc fails.
        let taken = live::remove(ptr as usize);
        // SAFETY: as for this call.
        unsafe { self.realloc_taken(taken, ptr, layout, new_size) }
    }
}
