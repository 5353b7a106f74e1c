//! Scopes nest: a block allocated in an inner scope counts in every enclosing scope, exactly; a handle entered
//! after its scope closed, or a guard that outlived its scope, never hides a thread's allocations from the scopes
//! it is really in (thread attribution here; process attribution in `leak_test_process.rs`).

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use ying::ScopeStats;

#[global_allocator]
static ALLOC: ying::YingProfiler = ying::YingProfiler::new();

/// Held by the tests whose closed scope's handle must still find the enclosing scope, and by the one that opens a
/// thousand scopes: scopes take the runtime's 256 slots in turn, and a closed scope's slot remembers where its
/// blocks went only until it is taken again, so the loop, running beside them, could take it in between.
static SLOTS_IN_TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn slots_in_turn() -> std::sync::MutexGuard<'static, ()> {
    SLOTS_IN_TURN.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn leak(bytes: usize) {
    std::mem::forget(black_box(Vec::<u8>::with_capacity(bytes)));
}

fn figures(stats: &ScopeStats) -> [u64; 7] {
    [
        stats.retained_bytes,
        stats.retained_blocks,
        stats.peak_bytes,
        stats.allocated_bytes,
        stats.allocations,
        stats.freed_bytes,
        stats.frees,
    ]
}

#[test]
fn an_inner_scope_counts_in_the_outer() {
    let (inner, outer) = ying::measure(|| {
        leak(50);
        ying::measure(|| leak(100)).1
    });
    // retained, blocks, peak, allocated, allocations, freed, frees
    assert_eq!(figures(&inner), [100, 1, 100, 100, 1, 0, 0]);
    assert_eq!(figures(&outer), [150, 2, 150, 150, 2, 0, 0]);
}

#[test]
fn the_outer_peak_includes_the_inner_blocks() {
    let (inner, outer) = ying::measure(|| {
        let kept = black_box(vec![0u8; 1000]);
        let ((), inner) = ying::measure(|| {
            let a = black_box(vec![0u8; 3000]);
            drop(a);
            let b = black_box(vec![0u8; 2000]);
            drop(b);
        });
        drop(kept);
        inner
    });
    assert_eq!(figures(&inner), [0, 0, 3000, 5000, 2, 5000, 2]);
    assert_eq!(figures(&outer), [0, 0, 4000, 6000, 3, 6000, 3]);
}

#[test]
fn a_block_of_the_inner_freed_in_the_outer_leaves_the_outer() {
    let (inner, outer) = ying::measure(|| {
        leak(50);
        let (kept, inner) = ying::measure(|| black_box(vec![0u8; 100]));
        drop(kept);
        inner
    });
    assert_eq!(figures(&inner), [100, 1, 100, 100, 1, 0, 0]);
    assert_eq!(figures(&outer), [50, 1, 150, 150, 2, 100, 1]);
}

#[test]
fn a_block_of_the_outer_freed_in_the_inner_is_a_free_for_both() {
    let (inner, outer) = ying::measure(|| {
        leak(50);
        let older = black_box(vec![0u8; 100]);
        ying::measure(move || drop(older)).1
    });
    assert_eq!(figures(&inner), [0, 0, 0, 0, 0, 100, 1]);
    assert_eq!(figures(&outer), [50, 1, 150, 150, 2, 100, 1]);
}

#[test]
fn scopes_nest_three_levels_deep() {
    let ((middle, innermost), outer) = ying::measure(|| {
        leak(10);
        let (innermost, middle) = ying::measure(|| {
            leak(20);
            let scratch = black_box(vec![0u8; 1000]);
            let ((), innermost) = ying::measure(|| leak(30));
            drop(scratch);
            innermost
        });
        (middle, innermost)
    });
    assert_eq!(figures(&innermost), [30, 1, 30, 30, 1, 0, 0]);
    assert_eq!(figures(&middle), [50, 2, 1050, 1050, 3, 1000, 1]);
    assert_eq!(figures(&outer), [60, 3, 1060, 1060, 4, 1000, 1]);
}

#[test]
fn growth_of_an_outer_block_in_the_inner_stays_the_outers() {
    let (inner, outer) = ying::measure(|| {
        let mut grown = black_box(Vec::<u8>::with_capacity(100));
        let ((), inner) = ying::measure(|| grown.reserve_exact(1000));
        std::mem::forget(grown);
        inner
    });
    assert_eq!((inner.retained_bytes, inner.allocated_bytes, inner.allocations), (0, 900, 0));
    assert_eq!(figures(&outer), [1000, 1, 1000, 1000, 1, 0, 0]);
}

#[test]
fn a_thread_that_entered_the_inner_scope_counts_in_the_outer() {
    let (inner, outer) = ying::measure(|| {
        ying::measure(|| {
            let scope = ying::Scope::current();
            std::thread::spawn(move || {
                let _entered = scope.enter();
                leak(100);
            })
            .join()
            .unwrap();
        })
        .1
    });
    assert_eq!((inner.retained_bytes, inner.retained_blocks), (100, 1));
    assert_eq!((outer.retained_bytes, outer.retained_blocks), (100, 1));
    assert_eq!(
        [outer.allocations, outer.allocated_bytes, outer.peak_bytes],
        [inner.allocations, inner.allocated_bytes, inner.peak_bytes]
    );
}

#[test]
fn a_closed_inner_scopes_handle_counts_in_the_enclosing_scopes() {
    let _slots = slots_in_turn();
    let (inner, outer) = ying::measure(|| {
        let (handle, inner) = ying::measure(ying::Scope::current);
        std::thread::spawn(move || {
            let _entered = handle.enter();
            leak(4096);
        })
        .join()
        .unwrap();
        inner
    });
    assert_eq!(inner.retained_bytes, 0);
    assert_eq!((outer.retained_bytes, outer.retained_blocks), (4096, 1));
}

/// An outer scope in which a helper thread enters an inner scope, which closes before the helper leaks `bytes`
/// bytes; the outer's figures. (Barriers, not channels: a blocking receive allocates thread-local state that the
/// helper frees as it exits, which may be after the join.)
fn guard_outlives_inner_scope(bytes: usize) -> ScopeStats {
    let (entered, go) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
    let ((), outer) = ying::measure(|| {
        let (helper, _) = ying::measure(|| {
            let scope = ying::Scope::current();
            let (helper_entered, helper_go) = (Arc::clone(&entered), Arc::clone(&go));
            let helper = std::thread::spawn(move || {
                let _entered = scope.enter();
                helper_entered.wait();
                helper_go.wait();
                leak(bytes); // after the inner scope closed
            });
            entered.wait();
            helper
        });
        go.wait();
        helper.join().unwrap();
    });
    outer
}

#[test]
fn a_guard_that_outlived_its_scope_counts_in_the_enclosing_scopes() {
    let _slots = slots_in_turn();
    guard_outlives_inner_scope(0); // one-time initialisation first
    let (without, with) = (guard_outlives_inner_scope(0), guard_outlives_inner_scope(4096));
    assert_eq!(with.retained_bytes - without.retained_bytes, 4096);
    assert_eq!(with.retained_blocks - without.retained_blocks, 1);
}

#[test]
fn a_closed_handle_entered_in_a_scope_keeps_the_thread_in_it() {
    let (stale, _) = ying::measure(ying::Scope::current);
    let ((), stats) = ying::measure(|| {
        let _entered = stale.enter();
        leak(300);
    });
    assert_eq!((stats.retained_bytes, stats.allocations), (300, 1));
}

#[test]
fn an_inert_handle_entered_in_a_scope_keeps_the_thread_in_it() {
    let inert = ying::Scope::current();
    assert!(!inert.is_some());
    let ((), stats) = ying::measure(|| {
        let _entered = inert.enter();
        leak(200);
    });
    assert_eq!((stats.retained_bytes, stats.allocations), (200, 1));
}

#[test]
fn a_measure_in_a_loop_hands_every_block_to_the_outer() {
    let _slots = slots_in_turn();
    let ((), outer) = ying::measure(|| {
        for _ in 0..1000 {
            let ((), inner) = ying::measure(|| {
                leak(8);
                drop(black_box(vec![0u8; 16]));
            });
            assert_eq!(inner.retained_bytes, 8);
        }
    });
    assert_eq!((outer.retained_bytes, outer.retained_blocks, outer.allocations, outer.frees), (8000, 1000, 2000, 1000));
}
