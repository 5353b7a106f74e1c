//! Exact scope figures: forgotten blocks, peak, realloc, older blocks, cross-thread frees, isolation from other
//! threads, and the profiler's own allocations kept out.

use std::hint::black_box;
use std::sync::mpsc;

#[global_allocator]
static ALLOC: ying::YingProfiler = ying::YingProfiler::new();

#[test]
fn forgotten_vec_is_retained_exactly() {
    let ((), stats) = ying::measure(|| std::mem::forget(black_box(Vec::<u8>::with_capacity(1000))));
    assert_eq!(stats.retained_bytes, 1000);
    assert_eq!(stats.retained_blocks, 1);
    assert_eq!(stats.allocations, 1);
    assert_eq!(stats.allocated_bytes, 1000);
    assert_eq!(stats.frees, 0);
}

#[test]
fn freed_memory_is_not_retained() {
    let ((), stats) = ying::measure(|| drop(black_box(vec![7u8; 4096])));
    assert_eq!(stats.retained_bytes, 0);
    assert_eq!(stats.retained_blocks, 0);
    assert_eq!(stats.allocations, 1);
    assert_eq!((stats.frees, stats.freed_bytes), (1, 4096));
    assert_eq!(stats.growth(), 0);
}

#[test]
fn peak_is_the_true_maximum_of_live_bytes() {
    let ((), stats) = ying::measure(|| {
        let a = black_box(Vec::<u8>::with_capacity(3000));
        let b = black_box(Vec::<u8>::with_capacity(5000));
        drop(a);
        let c = black_box(Vec::<u8>::with_capacity(2000));
        drop((b, c));
        let d = black_box(Vec::<u8>::with_capacity(7999));
        drop(d);
    });
    assert_eq!(stats.peak_bytes, 8000);
    assert_eq!(stats.retained_bytes, 0);
    assert_eq!(stats.allocations, 4);
}

#[test]
fn realloc_is_one_allocation_whose_size_changes() {
    let ((), stats) = ying::measure(|| {
        let mut v = black_box(Vec::<u8>::with_capacity(10));
        v.reserve_exact(1000);
        v.reserve_exact(5000);
        v.shrink_to(2000);
        std::mem::forget(v);
    });
    assert_eq!(stats.allocations, 1);
    assert_eq!(stats.retained_blocks, 1);
    assert_eq!(stats.retained_bytes, 2000);
    assert_eq!(stats.allocated_bytes, 5000);
    assert_eq!(stats.freed_bytes, 3000);
    assert_eq!(stats.frees, 0);
    assert_eq!(stats.peak_bytes, 5000);
}

#[test]
fn alloc_zeroed_counts_like_alloc() {
    let (v, stats) = ying::measure(|| black_box(vec![0u8; 1000]));
    assert_eq!((stats.allocations, stats.allocated_bytes, stats.retained_bytes), (1, 1000, 1000));
    drop(v);
}

#[test]
fn an_older_block_freed_inside_changes_nothing_it_owns() {
    let older = black_box(vec![1u8; 1500]);
    let ((), stats) = ying::measure(move || drop(older));
    assert_eq!(stats.retained_bytes, 0);
    assert_eq!(stats.peak_bytes, 0);
    assert_eq!(stats.allocations, 0);
    // The free itself is the scope's: its net change of the live heap is negative.
    assert_eq!((stats.frees, stats.freed_bytes), (1, 1500));
    assert_eq!(stats.growth(), -1500);
}

#[test]
fn growth_of_an_older_block_is_owned_by_the_scope() {
    let mut older = black_box(Vec::<u8>::with_capacity(100));
    let ((), stats) = ying::measure(|| older.reserve_exact(300));
    assert_eq!(older.capacity(), 300);
    assert_eq!(stats.retained_bytes, 200);
    assert_eq!(stats.retained_blocks, 0);
    assert_eq!(stats.allocations, 0);
    assert_eq!(stats.allocated_bytes, 200);
    drop(older);
}

#[test]
fn a_free_on_another_thread_reduces_the_owner() {
    let (to_freer, freer_inbox) = mpsc::channel::<Vec<u8>>();
    let (done, wait_done) = mpsc::channel::<()>();
    let freer = std::thread::spawn(move || {
        for block in freer_inbox {
            drop(block);
            done.send(()).unwrap();
        }
    });
    // Warm both channels up: their first message allocates the channel's slot block.
    to_freer.send(Vec::new()).unwrap();
    wait_done.recv().unwrap();
    let ((), stats) = ying::measure(|| {
        let kept = black_box(vec![3u8; 640]);
        to_freer.send(black_box(vec![2u8; 2048])).unwrap();
        wait_done.recv().unwrap();
        std::mem::forget(kept);
    });
    drop(to_freer);
    freer.join().unwrap();
    assert_eq!(stats.retained_bytes, 640);
    assert_eq!(stats.retained_blocks, 1);
    assert_eq!(stats.peak_bytes, 640 + 2048);
    // The free happened on a thread outside the scope: it is not one of the scope's frees.
    assert_eq!(stats.frees, 0);
}

#[test]
fn a_block_freed_after_the_scope_closed_changes_nothing() {
    let (kept, stats) = ying::measure(|| black_box(vec![5u8; 300]));
    let ((), later) = ying::measure(|| drop(black_box(Box::new(1u32))));
    drop(kept);
    assert_eq!(stats.retained_bytes, 300);
    assert_eq!(later.retained_bytes, 0);
}

#[test]
fn other_threads_never_pollute_a_scope() {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let running = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let noisy: Vec<_> = (0..2)
        .map(|_| {
            let (stop, running) = (stop.clone(), running.clone());
            std::thread::spawn(move || {
                let mut leaked = 0usize;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    drop(black_box(vec![0u8; 10_000]));
                    Box::leak(black_box(Box::new([1u8; 64])));
                    if leaked == 0 {
                        running.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    leaked += 1;
                }
                leaked
            })
        })
        .collect();
    // The scopes below must overlap the noise: wait until both threads allocate (an optimised build can otherwise
    // finish every scope before they are scheduled).
    while running.load(std::sync::atomic::Ordering::Relaxed) < 2 {
        std::thread::yield_now();
    }
    for _ in 0..50 {
        let ((), stats) = ying::measure(|| {
            std::mem::forget(black_box(Vec::<u8>::with_capacity(123)));
            for _ in 0..100 {
                drop(black_box(vec![0u8; 512]));
            }
        });
        assert_eq!(stats.retained_bytes, 123);
        assert_eq!(stats.allocations, 101);
        assert_eq!(stats.peak_bytes, 123 + 512);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let leaked: usize = noisy.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(leaked > 0, "the noisy threads never ran");
}

#[test]
fn a_spawned_thread_joins_the_scope_through_its_handle() {
    let ((), stats) = ying::measure(|| {
        let scope = ying::Scope::current();
        assert!(scope.is_some());
        std::thread::spawn(move || {
            let _entered = scope.enter();
            Box::leak(black_box(Box::new([0u8; 100])));
        })
        .join()
        .unwrap();
        // Without entering, a thread's allocations are its own.
        std::thread::spawn(|| Box::leak(black_box(Box::new([0u8; 50])))).join().unwrap();
    });
    assert_eq!(stats.retained_bytes, 100);
    assert_eq!(stats.retained_blocks, 1);
}

#[test]
fn the_scopes_thread_and_an_entered_thread_add_up() {
    // The scope's own thread and a thread that entered it keep separate counters: the figures are their sums.
    let (to_worker, inbox) = mpsc::channel::<(ying::Scope, Vec<u8>)>();
    let (done, wait_done) = mpsc::channel::<()>();
    let worker = std::thread::spawn(move || {
        for (scope, block) in inbox {
            {
                let _entered = scope.enter();
                drop(block);
                std::mem::forget(black_box(vec![3u8; 50]));
            }
            done.send(()).unwrap();
        }
    });
    // Warm both channels up: their first message allocates the channel's slot block.
    to_worker.send((ying::Scope::current(), Vec::new())).unwrap();
    wait_done.recv().unwrap();
    let ((), stats) = ying::measure(|| {
        let kept = black_box(vec![1u8; 200]);
        to_worker.send((ying::Scope::current(), black_box(vec![2u8; 300]))).unwrap();
        wait_done.recv().unwrap();
        std::mem::forget(kept);
    });
    drop(to_worker);
    worker.join().unwrap();
    assert_eq!(stats.allocations, 3, "{stats:?}");
    assert_eq!(stats.allocated_bytes, 200 + 300 + 50);
    assert_eq!(stats.frees, 1);
    assert_eq!(stats.freed_bytes, 300);
    assert_eq!(stats.retained_bytes, 250);
    assert_eq!(stats.retained_blocks, 2);
    assert_eq!(stats.peak_bytes, 500);
}

#[test]
fn the_profilers_own_allocations_are_not_counted() {
    let (stacks, stats) = ying::measure(|| ALLOC.top_k_stacks_by_allocated(1000));
    assert!(!stacks.is_empty());
    assert_eq!(stats.allocations, 0, "{stats:?}");
    assert_eq!(stats.retained_bytes, 0);
}

#[test]
fn nested_scopes_count_in_the_enclosing_scope_too() {
    let ((first, second, _kept), outer) = ying::measure(|| {
        let kept = black_box(vec![0u8; 10]);
        let first = ying::measure(|| std::mem::forget(black_box(vec![0u8; 20]))).1;
        let second = ying::measure(|| std::mem::forget(black_box(vec![0u8; 30]))).1;
        (first, second, kept)
    });
    assert_eq!(first.retained_bytes, 20);
    assert_eq!(second.retained_bytes, 30);
    assert_eq!((outer.retained_bytes, outer.retained_blocks), (60, 3));
}

#[test]
fn a_panicking_body_closes_its_scope() {
    let result = std::panic::catch_unwind(|| ying::measure(|| panic!("boom")));
    assert!(result.is_err());
    assert!(!ying::Scope::current().is_some());
}

#[test]
fn scope_stats_round_trip_through_json() {
    let ((), stats) = ying::measure(|| std::mem::forget(black_box(vec![1u8; 42])));
    let json = serde_json::to_string(&stats).unwrap();
    assert!(json.contains("\"retained_bytes\":42"), "{json}");
    assert_eq!(serde_json::from_str::<ying::ScopeStats>(&json).unwrap(), stats);
}

/// One step of [`the_peak_over_threads_is_exact`]: which of the three threads acts, and whether it allocates a block
/// of this many bytes (`Some`) or frees its oldest block (`None`).
type Step = (usize, Option<usize>);

/// A deterministic script of allocations and frees over three threads, and the peak of their summed live bytes.
fn script(steps: usize) -> (Vec<Step>, u64) {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut live = [Vec::new(), Vec::new(), Vec::new()];
    let (mut total, mut peak) = (0u64, 0u64);
    let mut out = Vec::with_capacity(steps);
    for _ in 0..steps {
        let actor = (next() % 3) as usize;
        // Sizes from a few bytes to 200 KiB: rises within a thread's room, past it, and new peaks.
        let size = 1 + (next() % if next() % 4 == 0 { 200 * 1024 } else { 4096 }) as usize;
        let step = if live[actor].is_empty() || next() % 5 < 3 {
            live[actor].push(size);
            total += size as u64;
            (actor, Some(size))
        } else {
            total -= live[actor].remove(0) as u64;
            (actor, None)
        };
        peak = peak.max(total);
        out.push(step);
    }
    (out, peak)
}

#[test]
fn the_peak_over_threads_is_exact() {
    // The scope's thread and two threads that entered it take turns (a barrier between steps), each writing figures
    // of its own: the peak is the true maximum of their summed live bytes at every step.
    const STEPS: usize = 400;
    let (steps, expected_peak) = script(STEPS);
    let barrier = std::sync::Barrier::new(3);
    let scope = std::sync::Mutex::new(ying::Scope::current());
    let run = |me: usize, blocks: &mut Vec<Box<[u8]>>| {
        for &(actor, op) in &steps {
            if actor == me {
                match op {
                    Some(size) => blocks.push(black_box(vec![me as u8; size].into_boxed_slice())),
                    None => drop(blocks.remove(0)),
                }
            }
            barrier.wait();
        }
    };
    std::thread::scope(|s| {
        let workers: Vec<_> = (1..3)
            .map(|me| {
                let (barrier, scope, run) = (&barrier, &scope, &run);
                s.spawn(move || {
                    let mut blocks = Vec::with_capacity(STEPS);
                    barrier.wait(); // warm
                    barrier.wait(); // the scope is open
                    let entered = scope.lock().unwrap().enter();
                    barrier.wait();
                    run(me, &mut blocks);
                    drop(entered);
                    barrier.wait(); // the scope closed
                    blocks
                })
            })
            .collect();
        let mut blocks = Vec::with_capacity(STEPS);
        barrier.wait();
        let ((), stats) = ying::measure(|| {
            *scope.lock().unwrap() = ying::Scope::current();
            barrier.wait();
            barrier.wait();
            run(0, &mut blocks);
        });
        barrier.wait();
        let kept: usize =
            workers.into_iter().map(|worker| worker.join().unwrap()).chain([blocks]).flatten().map(|b| b.len()).sum();
        assert_eq!(stats.peak_bytes, expected_peak, "{stats:?}");
        assert_eq!(stats.retained_bytes, kept as u64, "{stats:?}");
    });
}
