//! `#[ying::leak_test]` in process: passing tests pass; failing ones are `#[ignore]`d and called by a checking
//! test, which reads the panic message a user would see.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::hint::black_box;
use std::panic::catch_unwind;
use std::rc::Rc;
use std::sync::{Mutex, OnceLock};

#[global_allocator]
static ALLOC: ying::YingProfiler = ying::YingProfiler::new();

/// The panic message of a leak test expected to fail.
fn failure_of(test: fn()) -> String {
    let panic = catch_unwind(test).expect_err("the leak test should have failed");
    match panic.downcast::<String>() {
        Ok(message) => *message,
        Err(panic) => panic.downcast_ref::<&str>().map(|s| s.to_string()).unwrap_or_default(),
    }
}

// ---- tests that pass ----

#[ying::leak_test]
fn clean_test_passes() {
    let v = black_box(vec![1u8; 4096]);
    assert_eq!(v.len(), 4096);
}

#[ying::leak_test(max_retained = "4 KiB", max_peak = "16 MiB")]
fn a_leak_within_budget_passes() {
    Box::leak(black_box(Box::new([0u8; 1000])));
    drop(black_box(vec![0u8; 1 << 20]));
}

#[ying::leak_test(max_allocated = "1 GiB", max_allocations = 10_000)]
fn allocation_budgets_pass_when_met() {
    for i in 0..100 {
        drop(black_box(vec![0u8; i + 1]));
    }
}

#[ying::leak_test]
fn returning_ok_passes() -> Result<(), String> {
    let parsed: u32 = "42".parse().map_err(|e: std::num::ParseIntError| e.to_string())?;
    assert_eq!(parsed, 42);
    Ok(())
}

#[ying::leak_test]
#[should_panic(expected = "boom")]
fn should_panic_tests_still_panic() {
    let _scratch = black_box(vec![0u8; 64]);
    panic!("boom");
}

#[ying::leak_test]
#[ignore = "an ignored leak test stays ignored"]
fn ignored_tests_stay_ignored() {
    Box::leak(Box::new(0u8));
}

#[ying::leak_test]
fn printing_a_lot_is_not_a_leak() {
    for i in 0..2000 {
        println!("line {i}: {}", "x".repeat(40));
    }
    eprintln!("and some standard error");
}

static LAZY: OnceLock<Vec<u8>> = OnceLock::new();

fn lazily_initialised() -> &'static [u8] {
    LAZY.get_or_init(|| vec![3u8; 10_000])
}

#[ying::leak_test(warmup = 1, iterations = 3)]
fn lazy_initialisation_passes_with_warmup() {
    assert_eq!(lazily_initialised().len(), 10_000);
}

/// A cache of at most 8 entries that evicts its oldest as it inserts.
struct BoundedCache {
    order: VecDeque<u64>,
    entries: HashMap<u64, Vec<u8>>,
    next: u64,
}

static BOUNDED: Mutex<Option<BoundedCache>> = Mutex::new(None);

fn bounded_insert() {
    let mut cache = BOUNDED.lock().unwrap();
    let cache = cache.get_or_insert_with(|| BoundedCache {
        order: VecDeque::with_capacity(8),
        entries: HashMap::with_capacity(16),
        next: 0,
    });
    if cache.order.len() == 8 {
        let oldest = cache.order.pop_front().unwrap();
        cache.entries.remove(&oldest);
    }
    cache.next += 1;
    cache.order.push_back(cache.next);
    cache.entries.insert(cache.next, vec![1u8; 256]);
}

#[ying::leak_test(warmup = 10, iterations = 5)]
fn a_bounded_cache_that_evicts_passes() {
    bounded_insert();
}

#[ying::leak_test]
fn a_spawned_thread_that_enters_the_scope_is_measured_and_clean() {
    let scope = ying::Scope::current();
    std::thread::spawn(move || {
        let _entered = scope.enter();
        drop(black_box(vec![0u8; 1000]));
    })
    .join()
    .unwrap();
}

fn intern(name: &str) -> &'static str {
    Box::leak(name.to_owned().into_boxed_str())
}

#[ying::leak_test(allow = ["leak_test::intern"])]
fn allowed_sites_are_excused() {
    assert_eq!(intern("ying"), "ying");
}

#[ying::leak_test]
#[tokio::test]
async fn tokio_current_thread_with_leak_test_outermost() {
    let handle = tokio::spawn(async { black_box(vec![0u8; 128]).len() });
    assert_eq!(handle.await.unwrap(), 128);
}

#[tokio::test]
#[ying::leak_test]
async fn tokio_current_thread_with_leak_test_innermost() {
    tokio::task::yield_now().await;
    drop(black_box(vec![0u8; 128]));
}

#[ying::leak_test]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_multi_thread_with_leak_test_outermost() {
    let handle = tokio::spawn(async { black_box(vec![0u8; 128]).len() });
    assert_eq!(handle.await.unwrap(), 128);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ying::leak_test]
async fn tokio_multi_thread_with_leak_test_innermost() {
    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
}

// ---- tests that fail, called by the checks below ----

#[ying::leak_test]
#[ignore = "called by box_leak_fails_naming_its_site"]
fn box_leak() {
    Box::leak(black_box(Box::new([7u8; 1000])));
}

#[test]
fn box_leak_fails_naming_its_site() {
    let message = failure_of(box_leak);
    assert!(message.starts_with("ying: leak test `box_leak` exceeded its budget\n"), "{message}");
    assert!(message.contains("\n  max_retained = 0 B: retained 1000 B in 1 block, 1000 B over"), "{message}");
    let site = "\n  1000 B in 1 block of [u8; 1000], lost (nothing points to it)\n      leak_test::box_leak at tests/leak_test.rs:";
    assert!(message.contains(site), "{message}");
}

#[ying::leak_test]
#[ignore = "called by forgotten_memory_fails"]
fn mem_forget() {
    std::mem::forget(black_box(vec![0u64; 512]));
}

#[test]
fn forgotten_memory_fails() {
    let message = failure_of(mem_forget);
    assert!(message.contains("retained 4.0 KiB (4096 bytes) in 1 block, 4.0 KiB (4096 bytes) over"), "{message}");
    assert!(message.contains("leak_test::mem_forget at tests/leak_test.rs:"), "{message}");
}

struct Node {
    _payload: Vec<u8>,
    next: RefCell<Option<Rc<Node>>>,
}

#[inline(never)]
fn make_cycle() {
    let a = Rc::new(Node { _payload: vec![0u8; 100], next: RefCell::new(None) });
    let b = Rc::new(Node { _payload: vec![0u8; 100], next: RefCell::new(Some(Rc::clone(&a))) });
    *a.next.borrow_mut() = Some(b);
}

#[ying::leak_test]
#[ignore = "called by an_rc_cycle_fails"]
fn rc_cycle() {
    make_cycle();
}

#[test]
fn an_rc_cycle_fails() {
    let message = failure_of(rc_cycle);
    assert!(message.contains("in 4 blocks"), "two Rc allocations and two payloads: {message}");
    assert!(message.contains("leak_test::make_cycle at tests/leak_test.rs:"), "{message}");
    assert!(message.contains("leak_test::rc_cycle at tests/leak_test.rs:"), "{message}");
}

static GROWING: Mutex<Vec<String>> = Mutex::new(Vec::new());

#[ying::leak_test(warmup = 1, iterations = 4)]
#[ignore = "called by a_cache_that_grows_every_call_fails"]
fn growing_cache() {
    GROWING.lock().unwrap().push(black_box("an entry that is never evicted".repeat(10)));
}

#[test]
fn a_cache_that_grows_every_call_fails() {
    let message = failure_of(growing_cache);
    assert!(message.contains("max_growth_per_iteration = 0 B: the heap grew in each of 4 measured runs"), "{message}");
    assert!(message.contains("leak_test::growing_cache at tests/leak_test.rs:"), "{message}");
}

static LAZY_WITHOUT_WARMUP: OnceLock<Vec<u8>> = OnceLock::new();

#[ying::leak_test]
#[ignore = "called by lazy_initialisation_without_warmup_counts_as_retained"]
fn lazy_without_warmup() {
    LAZY_WITHOUT_WARMUP.get_or_init(|| vec![1u8; 300]);
}

#[test]
fn lazy_initialisation_without_warmup_counts_as_retained() {
    let message = failure_of(lazy_without_warmup);
    assert!(message.contains("retained 300 B in 1 block"), "{message}");
}

#[ying::leak_test(max_peak = "64 KiB")]
#[ignore = "called by the_peak_budget_is_checked"]
fn peaks_high() {
    drop(black_box(vec![0u8; 100_000]));
}

#[test]
fn the_peak_budget_is_checked() {
    let message = failure_of(peaks_high);
    assert!(message.contains("max_peak = 64.0 KiB (65536 bytes): peaked at 97.7 KiB (100000 bytes)"), "{message}");
    assert!(!message.contains("max_retained"), "nothing was retained: {message}");
}

#[ying::leak_test(max_allocated = "1 KiB", max_allocations = 3)]
#[ignore = "called by allocation_budgets_are_checked"]
fn allocates_a_lot() {
    for _ in 0..10 {
        drop(black_box(vec![0u8; 500]));
    }
}

#[test]
fn allocation_budgets_are_checked() {
    let message = failure_of(allocates_a_lot);
    assert!(message.contains("exceeded its budgets"), "{message}");
    assert!(message.contains("max_allocated = 1.0 KiB (1024 bytes): allocated 4.9 KiB (5000 bytes)"), "{message}");
    assert!(message.contains("max_allocations = 3: made 10 allocations, 7 over"), "{message}");
}

#[ying::leak_test(allow = ["some_other_crate::"])]
#[ignore = "called by a_pattern_that_does_not_match_excuses_nothing"]
fn leaks_outside_allowed() {
    Box::leak(black_box(Box::new([0u8; 48])));
}

#[test]
fn a_pattern_that_does_not_match_excuses_nothing() {
    let message = failure_of(leaks_outside_allowed);
    assert!(message.contains("retained 48 B in 1 block"), "{message}");
}

#[ying::leak_test]
#[ignore = "called by a_leak_on_a_thread_in_the_scope_fails"]
fn leaks_on_an_entered_thread() {
    let scope = ying::Scope::current();
    std::thread::spawn(move || {
        let _entered = scope.enter();
        Box::leak(black_box(Box::new([0u8; 200])));
    })
    .join()
    .unwrap();
}

#[test]
fn a_leak_on_a_thread_in_the_scope_fails() {
    let message = failure_of(leaks_on_an_entered_thread);
    assert!(message.contains("retained 200 B in 1 block"), "{message}");
}

#[ying::leak_test]
#[tokio::test]
#[ignore = "called by an_async_leak_fails"]
async fn async_leak() {
    tokio::task::yield_now().await;
    Box::leak(black_box(Box::new([0u8; 333])));
}

#[test]
fn an_async_leak_fails() {
    let message = failure_of(async_leak);
    assert!(message.contains("retained 333 B in 1 block"), "{message}");
    assert!(message.contains("leak_test::async_leak at tests/leak_test.rs:"), "{message}");
}

#[ying::leak_test]
#[ignore = "called by an_error_is_returned_not_judged"]
fn returns_an_error() -> Result<(), String> {
    Box::leak(Box::new(1u8));
    Err("the body failed".to_owned())
}

#[test]
fn an_error_is_returned_not_judged() {
    assert_eq!(returns_an_error(), Err("the body failed".to_owned()));
}

/// Tests racing beside the others: heavy allocation and leaks on other threads of the same process.
#[test]
fn noisy_neighbour() {
    for _ in 0..200 {
        drop(black_box(vec![0u8; 50_000]));
        Box::leak(black_box(Box::new([0u8; 64])));
    }
}

// ---- stacks recorded in a leak test stop at the runner ----

/// What `#[ying::leak_test]` generates, written out so that a plain test can call the runner itself.
static RUNNER_TEST: ying::__private::LeakTest = ying::__private::LeakTest::unconfigured(
    env!("CARGO_PKG_NAME"),
    module_path!(),
    "capture_depth",
    file!(),
    line!(),
    env!("CARGO_MANIFEST_DIR"),
);

/// The frames captured in the body when the runner is called `depth` frames below here.
#[inline(never)]
fn captured_in_runner_below(depth: usize) -> usize {
    if depth == 0 {
        let mut inside = 0;
        ying::__private::run(&RUNNER_TEST, || inside = ying::__private::hot_path::capture_stack());
        return inside;
    }
    black_box(captured_in_runner_below(black_box(depth - 1)))
}

#[test]
fn stacks_recorded_in_a_leak_test_stop_at_the_runner() {
    // The capture stops at the runner's frame: however deep the runner is called, the body's stack is as long.
    let shallow = captured_in_runner_below(0);
    let outside = ying::__private::hot_path::capture_stack();
    let deep = captured_in_runner_below(20);
    assert!(shallow > 0 && shallow == deep, "frames captured inside the runner: {shallow}, 20 frames deeper: {deep}");
    // The limit ends with the run.
    assert_eq!(ying::__private::hot_path::capture_stack(), outside);
}
