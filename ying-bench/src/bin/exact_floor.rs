//! The floor the idle wrapper is measured against: the cheapest `GlobalAlloc` wrapper over System that keeps what
//! ying's idle wrapper keeps, and nothing more, written for speed alone.
//!
//! - exact process figures readable from any thread at any time: each thread counts allocations, frees and their
//!   bytes in a counter block of its own (a static block, its address in a `const` thread-local: a thread-local's
//!   memory cannot be read once its thread is gone), with plain adds;
//! - the process peak, from live-byte changes each thread batches up to 64 KiB before it folds them into one
//!   atomic figure;
//! - Poisson sampling at 512 KiB: a countdown of bytes per thread, and a free that must recognise a sampled block,
//!   here by one bit of a 4 KiB filter (what the sampled blocks' table costs a free that finds nothing).
//!
//! and the checks the wrapper's features put on every allocation and free, each the cheapest it can be: the giant
//! allocation limit (a compare), the interval changed at run time (a compare), one thread-local flag for "the
//! profiler is busy on this thread or the thread is in a scope", and one global word a free reads first for "a
//! scope may own this block". What happens past those checks (recording a sample, a scope's bookkeeping) is left
//! out: at a sample point it only sets the filter bit. Its instruction count, against ying_idle's, is the floor
//! BENCHMARKS.md measures the idle wrapper against ("Instruction counts").

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering::Relaxed};

const INTERVAL: i64 = 512 * 1024;
const BATCH: i64 = 64 * 1024;
const THREADS: usize = 256;

#[repr(align(128))]
struct Block {
    allocated_bytes: AtomicU64,
    allocations: AtomicU64,
    freed_bytes: AtomicU64,
    frees: AtomicU64,
}

static BLOCKS: [Block; THREADS] = [const {
    Block {
        allocated_bytes: AtomicU64::new(0),
        allocations: AtomicU64::new(0),
        freed_bytes: AtomicU64::new(0),
        frees: AtomicU64::new(0),
    }
}; THREADS];
static NEXT: AtomicUsize = AtomicUsize::new(0);
static LIVE: AtomicI64 = AtomicI64::new(0);
static PEAK: AtomicI64 = AtomicI64::new(0);
static FILTER: [AtomicU64; 512] = [const { AtomicU64::new(0) }; 512];
/// The run-time sampling interval.
static SAMPLE_INTERVAL: AtomicI64 = AtomicI64::new(INTERVAL);
/// Frees must look further (a scope may own blocks): never set here.
static GATE: AtomicU64 = AtomicU64::new(0);
const GIANT: usize = 1 << 36;

struct Local {
    /// Not busy and in no scope: the fast path may count (never cleared here).
    plain: Cell<bool>,
    /// The interval the countdown was drawn for.
    interval: Cell<i64>,
    block: Cell<*const Block>,
    pending: Cell<i64>,
    countdown: Cell<i64>,
    rng: Cell<u64>,
}

std::thread_local! {
    static LOCAL: Local = const {
        Local {
            plain: Cell::new(true),
            interval: Cell::new(0),
            block: Cell::new(core::ptr::null()),
            pending: Cell::new(0),
            countdown: Cell::new(0),
            rng: Cell::new(0x9e37_79b9_7f4a_7c15),
        }
    };
}

/// Adds `value` to a counter only this thread writes: a plain load and store.
#[inline(always)]
fn add(counter: &AtomicU64, value: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(value), Relaxed);
}

#[inline(always)]
fn block(local: &Local) -> &'static Block {
    let block = local.block.get();
    if block.is_null() {
        return assign(local);
    }
    // SAFETY: a non-null `block` is the address of one of the static blocks, as `assign` stored it.
    unsafe { &*block }
}

#[cold]
fn assign(local: &Local) -> &'static Block {
    let block = &BLOCKS[NEXT.fetch_add(1, Relaxed) % THREADS];
    local.block.set(block);
    block
}

#[inline(always)]
fn track(local: &Local, delta: i64) {
    let pending = local.pending.get() + delta;
    if ((pending + BATCH - 1) as u64) < (2 * BATCH - 1) as u64 {
        local.pending.set(pending);
    } else {
        local.pending.set(0);
        fold(pending);
    }
}

#[cold]
fn fold(pending: i64) {
    let live = LIVE.fetch_add(pending, Relaxed) + pending;
    PEAK.fetch_max(live, Relaxed);
}

#[inline(always)]
fn bit(ptr: *mut u8) -> (usize, u64) {
    let slot = ((ptr as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - 15)) as usize;
    (slot / 64, 1 << (slot % 64))
}

/// A sample point: a fresh countdown, and the block marked for its free.
#[cold]
#[inline(never)]
fn sample(local: &Local, ptr: *mut u8) {
    local.interval.set(SAMPLE_INTERVAL.load(Relaxed));
    let mut x = local.rng.get();
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    local.rng.set(x);
    let uniform = ((x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    local.countdown.set((-(local.interval.get() as f64) * uniform.ln()) as i64 + 1);
    let (word, bit) = bit(ptr);
    FILTER[word].fetch_or(bit, Relaxed);
}

#[cold]
#[inline(never)]
fn sampled_free(ptr: *mut u8) {
    let (word, bit) = bit(ptr);
    FILTER[word].fetch_and(!bit, Relaxed);
}

struct Floor;

// SAFETY: every method forwards to System with the caller's pointer and layout unchanged and returns its result;
// the bookkeeping never allocates and never touches the block.
unsafe impl GlobalAlloc for Floor {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > GIANT {
            return core::ptr::null_mut();
        }
        // SAFETY: the caller upholds `alloc`'s contract, passed on unchanged.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            let size = layout.size();
            let _ = LOCAL.try_with(|local| {
                if !local.plain.get() {
                    return;
                }
                let block = block(local);
                add(&block.allocated_bytes, size as u64);
                add(&block.allocations, 1);
                track(local, size as i64);
                let left = local.countdown.get() - size as i64;
                local.countdown.set(left);
                if left <= 0 || local.interval.get() != SAMPLE_INTERVAL.load(Relaxed) {
                    sample(local, ptr);
                }
            });
        }
        ptr
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let (word, bit) = bit(ptr);
        if GATE.load(Relaxed) != 0 || FILTER[word].load(Relaxed) & bit != 0 {
            sampled_free(ptr);
        }
        let size = layout.size();
        let _ = LOCAL.try_with(|local| {
            if !local.plain.get() {
                return;
            }
            let block = block(local);
            add(&block.freed_bytes, size as u64);
            add(&block.frees, 1);
            track(local, -(size as i64));
        });
        // SAFETY: the caller guarantees `ptr` was allocated by this allocator (hence by System) with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > GIANT {
            return core::ptr::null_mut();
        }
        let (word, bit) = bit(ptr);
        if FILTER[word].load(Relaxed) & bit != 0 {
            sampled_free(ptr);
        }
        // SAFETY: the caller upholds `realloc`'s contract, passed on unchanged.
        let new_ptr = unsafe { System.realloc(ptr, layout, new_size) };
        if !new_ptr.is_null() {
            let old = layout.size();
            let _ = LOCAL.try_with(|local| {
                if !local.plain.get() {
                    return;
                }
                let block = block(local);
                if new_size >= old {
                    add(&block.allocated_bytes, (new_size - old) as u64);
                    let left = local.countdown.get() - (new_size - old) as i64;
                    local.countdown.set(left);
                    if left <= 0 {
                        sample(local, new_ptr);
                    }
                } else {
                    add(&block.freed_bytes, (old - new_size) as u64);
                }
                track(local, new_size as i64 - old as i64);
            });
        }
        new_ptr
    }
}

#[global_allocator]
static ALLOC: Floor = Floor;

fn main() {
    ying_bench::main("exact_floor", |workload| workload());
    // The figures are kept to be read: read them, so that none is optimised away.
    let allocations: u64 = BLOCKS.iter().map(|block| block.allocations.load(Relaxed)).sum();
    std::hint::black_box((allocations, PEAK.load(Relaxed)));
}
