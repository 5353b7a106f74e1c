//! `YingProfiler<A>` over another provider: every operation reaches the provider, and a realloc the provider
//! refuses leaves every table and figure exactly as it was. Runs without the test harness, so that nothing else
//! allocates between the readings of process-wide figures.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A provider that counts its calls (in `PROVIDER_CALLS`) and refuses reallocations to exactly `REFUSED_SIZE` bytes.
struct Provider;

static PROVIDER_CALLS: AtomicUsize = AtomicUsize::new(0);

const REFUSED_SIZE: usize = 777_777;

// SAFETY: every call is forwarded to `System` with the caller's arguments, except refused reallocations, which
// return null and leave the block untouched, as `GlobalAlloc::realloc` permits.
unsafe impl GlobalAlloc for Provider {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        PROVIDER_CALLS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded from our caller.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        PROVIDER_CALLS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded from our caller.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        PROVIDER_CALLS.fetch_add(1, Ordering::Relaxed);
        if new_size == REFUSED_SIZE {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded from our caller.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: ying::YingProfiler<Provider> = ying::YingProfiler::with_allocator(Provider).sample_interval(0);

#[inline(never)]
fn refused_realloc_site() -> Vec<u8> {
    black_box(vec![1u8; 100])
}

fn allocations_are_served_by_the_provider() {
    let before = PROVIDER_CALLS.load(Ordering::Relaxed);
    let mut block = black_box(vec![0u8; 10]);
    block.reserve_exact(100);
    drop(block);
    // alloc, realloc, dealloc: each reached the provider, once.
    assert_eq!(PROVIDER_CALLS.load(Ordering::Relaxed), before + 3);
}

fn a_refused_realloc_changes_nothing() {
    let ((), stats) = ying::measure(|| {
        let mut block = refused_realloc_site();
        let process_before = ALLOC.stats();
        let census_before = ying::__private::live_table_census();
        assert!(block.try_reserve_exact(REFUSED_SIZE - 100).is_err());
        assert_eq!(block.capacity(), 100);
        assert_eq!(ALLOC.stats(), process_before);
        assert_eq!(ying::__private::live_table_census(), census_before);
        let stack = ALLOC
            .top_k_stacks_by_retained(usize::MAX)
            .into_iter()
            .find(|s| s.frames().iter().any(|f| f.function.ends_with("refused_realloc_site")))
            .expect("the block is still sampled");
        assert_eq!(stack.retained_bytes(), 100.0);
        // The block still belongs to this scope and can still grow.
        block.reserve_exact(1000);
        std::mem::forget(block);
    });
    assert_eq!(stats.allocations, 1);
    assert_eq!(stats.retained_bytes, 1100);
    assert_eq!(stats.allocated_bytes, 1100);
}

/// As [`a_refused_realloc_changes_nothing`], for a block its scope keeps in the thread's nursery (an allocation no
/// sample point reached): it is put back where a later realloc finds it.
fn a_refused_realloc_of_a_nursed_block_changes_nothing() {
    ALLOC.set_sample_interval(usize::MAX);
    let ((), stats) = ying::measure(|| {
        let mut block = black_box(vec![1u8; 100]);
        let process_before = ALLOC.stats();
        assert!(block.try_reserve_exact(REFUSED_SIZE - 100).is_err());
        assert_eq!(block.capacity(), 100);
        assert_eq!(ALLOC.stats(), process_before);
        // Still the scope's block, all of it: had its entry been lost, the scope would own only the growth, and
        // the free would leave the first 100 bytes and the block counted as retained.
        block.reserve_exact(1000);
        drop(block);
    });
    ALLOC.set_sample_interval(0);
    assert_eq!(stats.allocations, 1);
    assert_eq!(stats.allocated_bytes, 1100);
    assert_eq!(stats.retained_bytes, 0);
    assert_eq!(stats.retained_blocks, 0);
}

fn main() {
    let checks: [(&str, fn()); 3] = [
        ("allocations_are_served_by_the_provider", allocations_are_served_by_the_provider),
        ("a_refused_realloc_changes_nothing", a_refused_realloc_changes_nothing),
        ("a_refused_realloc_of_a_nursed_block_changes_nothing", a_refused_realloc_of_a_nursed_block_changes_nothing),
    ];
    for (name, check) in checks {
        check();
        println!("test {name} ... ok");
    }
    println!("\n{} passed, 0 failed", checks.len());
}
