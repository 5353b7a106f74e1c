//! Exact process-wide figures ([`ying::HeapStats`]), run without the test harness so that nothing else allocates
//! between the readings: allocation, free, realloc, alloc_zeroed, threads, the peak and its documented precision.

use std::hint::black_box;

#[global_allocator]
static ALLOC: ying::YingProfiler = ying::YingProfiler::new();

/// The change of each figure between two readings.
fn delta(before: &ying::HeapStats, after: &ying::HeapStats) -> [i128; 6] {
    let d = |a: u64, b: u64| i128::from(b) - i128::from(a);
    [
        d(before.allocated_bytes, after.allocated_bytes),
        d(before.allocations, after.allocations),
        d(before.freed_bytes, after.freed_bytes),
        d(before.frees, after.frees),
        d(before.live_bytes, after.live_bytes),
        d(before.live_blocks, after.live_blocks),
    ]
}

fn allocation_and_free_are_counted_exactly() {
    let before = ALLOC.stats();
    let block = black_box(Vec::<u8>::with_capacity(100_000));
    let during = ALLOC.stats();
    drop(block);
    let after = ALLOC.stats();
    assert_eq!(delta(&before, &during), [100_000, 1, 0, 0, 100_000, 1]);
    assert_eq!(delta(&during, &after), [0, 0, 100_000, 1, -100_000, -1]);
    assert_eq!(ALLOC.total_retained_bytes(), after.live_bytes);
}

fn realloc_moves_bytes_not_blocks() {
    let mut block = black_box(Vec::<u8>::with_capacity(1000));
    let before = ALLOC.stats();
    block.reserve_exact(5000);
    block.shrink_to(3000);
    let after = ALLOC.stats();
    assert_eq!(delta(&before, &after), [4000, 0, 2000, 0, 2000, 0]);
    drop(block);
}

fn alloc_zeroed_is_an_allocation() {
    let before = ALLOC.stats();
    let zeroed = black_box(vec![0u64; 512]);
    let after = ALLOC.stats();
    assert_eq!(delta(&before, &after), [4096, 1, 0, 0, 4096, 1]);
    drop(zeroed);
}

fn threads_sum_into_the_process_figures() {
    let before = ALLOC.stats();
    let threads: Vec<_> = (0..4)
        .map(|i| std::thread::spawn(move || Box::leak(black_box(vec![0u8; 1000 * (i + 1)]).into_boxed_slice()).len()))
        .collect();
    let leaked: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let after = ALLOC.stats();
    assert_eq!(leaked, 10_000);
    // Spawning threads allocates and frees bookkeeping of its own; what is left is the leaks.
    let [_, _, _, _, live_bytes, live_blocks] = delta(&before, &after);
    assert_eq!((live_bytes, live_blocks), (10_000, 4));
}

fn threads_beyond_the_owned_counter_blocks_are_counted_too() {
    // More threads than there are counter blocks of their own: the later ones share blocks, still exactly.
    let before = ALLOC.stats();
    for _ in 0..300 {
        std::thread::spawn(|| Box::leak(black_box(Box::new([0u8; 10])))).join().unwrap();
    }
    let after = ALLOC.stats();
    let [_, _, _, _, live_bytes, live_blocks] = delta(&before, &after);
    assert_eq!((live_bytes, live_blocks), (3000, 300));
}

fn the_peak_is_within_its_documented_precision() {
    let before = ALLOC.stats();
    // Small blocks on one thread: the peak folds in 64 KiB batches.
    let blocks: Vec<_> = (0..10_000).map(|_| black_box(vec![1u8; 100])).collect();
    let at_top = ALLOC.stats();
    drop(blocks);
    let after = ALLOC.stats();
    let top = at_top.live_bytes;
    assert!(after.peak_bytes <= top.max(before.peak_bytes), "the peak never exceeds a true live figure");
    assert!(after.peak_bytes + 64 * 1024 >= top, "peak {} more than 64 KiB below {top}", after.peak_bytes);
    assert!(after.peak_bytes >= after.live_bytes);
}

/// Allocates, frees and leaks from a thread-local destructor, while the thread tears down.
struct AllocatesOnTeardown;

impl Drop for AllocatesOnTeardown {
    fn drop(&mut self) {
        for size in 1..200 {
            drop(black_box(vec![0u8; size]));
        }
        Box::leak(black_box(Box::new([0u8; 77])));
    }
}

std::thread_local!(static TEARDOWN: AllocatesOnTeardown = const { AllocatesOnTeardown });

fn thread_teardown_is_counted_without_a_crash() {
    std::thread::spawn(|| ()).join().unwrap(); // the first spawn's lasting bookkeeping, outside the readings
    let before = ALLOC.stats();
    let threads: Vec<_> = (0..20).map(|_| std::thread::spawn(|| TEARDOWN.with(|_| ()))).collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let after = ALLOC.stats();
    let [_, _, _, _, live_bytes, live_blocks] = delta(&before, &after);
    assert_eq!((live_bytes, live_blocks), (20 * 77, 20));
}

fn main() {
    let checks: [(&str, fn()); 7] = [
        ("thread_teardown_is_counted_without_a_crash", thread_teardown_is_counted_without_a_crash),
        ("allocation_and_free_are_counted_exactly", allocation_and_free_are_counted_exactly),
        ("realloc_moves_bytes_not_blocks", realloc_moves_bytes_not_blocks),
        ("alloc_zeroed_is_an_allocation", alloc_zeroed_is_an_allocation),
        ("threads_sum_into_the_process_figures", threads_sum_into_the_process_figures),
        (
            "threads_beyond_the_owned_counter_blocks_are_counted_too",
            threads_beyond_the_owned_counter_blocks_are_counted_too,
        ),
        ("the_peak_is_within_its_documented_precision", the_peak_is_within_its_documented_precision),
    ];
    for (name, check) in checks {
        check();
        println!("test {name} ... ok");
    }
    println!("\n{} passed, 0 failed", checks.len());
}
