//! The entries of the blocks a scope's own thread allocates, which stay in that thread's nursery while the scope
//! is open: frees on any thread find them, closing the scope moves them to the live table (frees racing the move
//! included), a scope that owns more blocks than a nursery holds stays exact, and the readers of live entries see
//! them.

use std::hint::black_box;
use std::sync::{Mutex, MutexGuard, PoisonError, mpsc};

#[global_allocator]
static ALLOC: ying::YingProfiler = ying::YingProfiler::new();

/// The tests count the process's scope-owned entries: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Live blocks owned by some scope, wherever their entries are.
fn owned_entries() -> usize {
    ying::__private::live_table_census().1
}

#[test]
fn a_block_kept_past_its_scope_is_recognised_when_freed() {
    let _serial = serial();
    let before = owned_entries();
    let (kept, stats) = ying::measure(|| black_box(vec![5u8; 300]));
    assert_eq!((stats.retained_blocks, stats.retained_bytes), (1, 300));
    // The scope has closed and its thread's nursery is back in the pool: the entry is in the live table.
    assert_eq!(owned_entries(), before + 1);
    drop(kept);
    assert_eq!(owned_entries(), before);

    // The same, freed on another thread.
    let (kept, _) = ying::measure(|| black_box(vec![6u8; 200]));
    assert_eq!(owned_entries(), before + 1);
    std::thread::spawn(move || drop(kept)).join().unwrap();
    assert_eq!(owned_entries(), before);
}

#[test]
fn nested_scopes_keep_their_entries() {
    let _serial = serial();
    let before = owned_entries();
    let (kept, outer) = ying::measure(|| {
        let outer_first = black_box(Box::new([3u8; 56]));
        let (inner_block, inner) = ying::measure(|| {
            let inner_block = black_box(Box::new([1u8; 40]));
            // A block of the outer scope, freed inside the inner one: the outer scope loses it, not the inner.
            drop(outer_first);
            inner_block
        });
        assert_eq!((inner.retained_blocks, inner.retained_bytes), (1, 40));
        assert_eq!((inner.frees, inner.freed_bytes), (1, 56));
        let outer_block = black_box(Box::new([2u8; 24]));
        (inner_block, outer_block)
    });
    // The inner scope's block counts in the outer one too, and was handed to it when the inner scope closed.
    assert_eq!((outer.retained_blocks, outer.retained_bytes), (2, 64));
    assert_eq!(outer.peak_bytes, 96);
    assert_eq!(owned_entries(), before + 2);
    drop(kept);
    assert_eq!(owned_entries(), before);
}

#[test]
fn frees_on_another_thread_racing_the_close_lose_no_entry() {
    let _serial = serial();
    let (to_freer, inbox) = mpsc::channel::<Vec<Box<u64>>>();
    let freer = std::thread::spawn(move || {
        for batch in inbox {
            for block in batch {
                drop(black_box(block));
            }
        }
    });
    // The channel's first message allocates its first slot block: before counting.
    to_freer.send(Vec::new()).unwrap();
    let before = owned_entries();
    for round in 0..100u64 {
        let ((), stats) = ying::measure(|| {
            for batch in 0..20 {
                to_freer.send((0..100).map(|i| Box::new(round * 10_000 + batch * 100 + i)).collect()).unwrap();
            }
        });
        // Each batch is a vector and its 100 boxes. The freer frees them while (and after) the scope closes.
        assert!(stats.allocations >= 20 * 101, "{stats:?}");
    }
    drop(to_freer);
    freer.join().unwrap();
    // Every block was freed: no entry is left, none was moved back after its free, none was missed.
    assert_eq!(owned_entries(), before);
}

#[test]
fn a_scope_owning_more_blocks_than_a_nursery_holds_stays_exact() {
    let _serial = serial();
    let before = owned_entries();
    let (kept, stats) = ying::measure(|| {
        // More blocks than a nursery's 65 536 slots: the rest go to the live table.
        let mut blocks: Vec<Box<u64>> = (0..200_000u64).map(Box::new).collect();
        blocks.retain(|block| **block % 2 == 0);
        blocks
    });
    // 100 000 boxes of 8 bytes, and the vector's buffer of 200 000 pointers.
    assert_eq!(stats.retained_blocks, 100_001);
    assert_eq!(stats.retained_bytes, 100_000 * 8 + 200_000 * 8);
    assert_eq!((stats.allocations, stats.frees), (200_001, 100_000));
    assert_eq!(owned_entries(), before + 100_001);
    drop(kept);
    assert_eq!(owned_entries(), before);
}

#[ying::leak_test]
fn a_running_leak_tests_blocks_are_in_the_retained_profile() {
    let _serial = serial();
    let block = black_box(vec![9u8; 54_321]);
    let retained: f64 = ALLOC
        .top_k_stacks_by_retained(usize::MAX)
        .iter()
        .filter(|stack| stack.frames().iter().any(|frame| frame.function.contains("a_running_leak_tests_blocks")))
        .map(|stack| stack.retained_bytes())
        .sum();
    drop(block);
    assert!(retained >= 54_321.0, "retained {retained}");
}

#[test]
fn a_block_its_scope_allocated_stays_in_the_nursery_as_it_grows() {
    let _serial = serial();
    let ((), stats) = ying::measure(|| {
        let mut grown: Vec<u64> = black_box(Vec::with_capacity(1));
        let nursed = ying::__private::nursed_entries();
        for value in 0..4096 {
            grown.push(black_box(value));
        }
        // Twelve reallocs later the vector's entry is still its thread's, not the live table's.
        assert_eq!(ying::__private::nursed_entries(), nursed);
        drop(grown);
        assert_eq!(ying::__private::nursed_entries(), nursed - 1);
    });
    assert_eq!(stats.retained_blocks, 0);
}

/// Grows a vector from one call site, from 8 bytes to 32 KiB (twelve reallocs).
#[inline(never)]
fn grow_from_one_site() -> Vec<u64> {
    let mut grown: Vec<u64> = black_box(Vec::with_capacity(1));
    for value in 0..4096 {
        grown.push(black_box(value));
    }
    grown
}

/// The bytes allocated at the stacks through [`grow_from_one_site`].
fn allocated_growing() -> f64 {
    ALLOC
        .top_k_stacks_by_allocated(usize::MAX)
        .iter()
        .filter(|stack| stack.frames().iter().any(|frame| frame.function.ends_with("grow_from_one_site")))
        .map(|stack| stack.allocated_bytes())
        .sum()
}

#[ying::leak_test]
fn every_growth_of_a_vector_in_a_leak_test_is_allocated_at_its_stack() {
    let _serial = serial();
    let before = allocated_growing();
    let grown = grow_from_one_site();
    // The first 8 bytes and each realloc's growth, recorded with certainty: 32 KiB in all.
    assert_eq!(allocated_growing() - before, 32_768.0);
    drop(grown);
}
