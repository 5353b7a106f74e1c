//! `sample_interval(0)` records every allocation: the estimates are then exact counts.

use std::hint::black_box;

#[global_allocator]
static ALLOC: ying::YingProfiler = ying::YingProfiler::new().sample_interval(0);

/// Changing the interval affects every test in this binary: the test that does holds this exclusively.
static INTERVAL_CHANGES: std::sync::RwLock<()> = std::sync::RwLock::new(());

#[inline(never)]
fn allocate_exactly(count: usize, size: usize) -> Vec<Vec<u8>> {
    (0..count).map(|_| black_box(vec![0u8; size])).collect()
}

#[test]
fn every_allocation_is_a_sample_of_weight_one() {
    let _shared = INTERVAL_CHANGES.read().unwrap_or_else(|e| e.into_inner());
    let kept = allocate_exactly(1234, 100);
    let stack = ALLOC
        .top_k_stacks_by_retained(usize::MAX)
        .into_iter()
        .find(|stack| {
            let names: Vec<_> = stack.frames().iter().map(|f| f.function.as_str()).collect();
            names.iter().any(|n| n.ends_with("every_allocation::allocate_exactly"))
                && names.iter().any(|n| n.contains("from_elem"))
        })
        .expect("the allocating stack is sampled");
    assert_eq!(stack.retained_objects(), 1234.0);
    assert_eq!(stack.retained_bytes(), 123_400.0);
    assert_eq!(stack.allocated_objects(), 1234.0);
    drop(kept);
}

#[inline(never)]
fn allocate_at_changed_interval(count: usize) -> Vec<Vec<u8>> {
    (0..count).map(|_| black_box(vec![0u8; 64])).collect()
}

/// Sampled stacks of `allocate_at_changed_interval`, in retained objects.
fn changed_interval_site_objects() -> f64 {
    ALLOC
        .top_k_stacks_by_retained(usize::MAX)
        .iter()
        .filter(|stack| {
            let names = || stack.frames().iter().map(|f| f.function.as_str());
            names().any(|n| n.ends_with("allocate_at_changed_interval")) && names().any(|n| n.contains("from_elem"))
        })
        .map(|stack| stack.retained_objects())
        .sum()
}

#[test]
fn the_interval_can_change_at_run_time() {
    let _exclusive = INTERVAL_CHANGES.write().unwrap_or_else(|e| e.into_inner());
    assert_eq!(ALLOC.current_sample_interval(), 0);
    // At a 1 TiB mean interval, 64-byte blocks are essentially never sampled (p ≈ 6e-11 each).
    ALLOC.set_sample_interval(1 << 40);
    let unsampled = allocate_at_changed_interval(1000);
    assert_eq!(changed_interval_site_objects(), 0.0);
    ALLOC.set_sample_interval(0);
    let sampled = allocate_at_changed_interval(1000);
    assert_eq!(changed_interval_site_objects(), 1000.0);
    drop((unsampled, sampled));
}
