//! Giant allocations above the limit are refused: null to the caller, nothing recorded, and the allocating stack
//! on standard error.

use std::hint::black_box;
use std::process::Command;

const LIMIT: usize = 1 << 30;

#[global_allocator]
static ALLOC: ying::YingProfiler = ying::YingProfiler::new().giant_alloc_limit(LIMIT);

#[test]
fn a_giant_allocation_fails_and_leaves_no_trace() {
    let ((), stats) = ying::measure(|| {
        let mut giant = Vec::<u8>::new();
        assert!(giant.try_reserve_exact(2 * LIMIT).is_err());
        let mut small = black_box(Vec::<u8>::with_capacity(100));
        // A realloc past the limit fails too, and leaves the block as it was.
        assert!(small.try_reserve_exact(2 * LIMIT).is_err());
        assert_eq!(small.capacity(), 100);
        drop(small);
    });
    assert_eq!(stats.allocations, 1);
    assert_eq!(stats.allocated_bytes, 100);
    assert_eq!(stats.retained_bytes, 0);
    assert_eq!(stats.peak_bytes, 100);
}

#[test]
fn the_limit_itself_is_allowed() {
    let ((), stats) = ying::measure(|| {
        let mut at_limit = Vec::<u8>::new();
        // Reserving address space only: the pages are never touched.
        assert!(at_limit.try_reserve_exact(LIMIT).is_ok());
    });
    assert_eq!(stats.allocated_bytes, LIMIT as u64);
}

#[inline(never)]
fn allocate_a_giant() {
    let _ = black_box(Vec::<u8>::new().try_reserve_exact(3 * LIMIT));
}

#[test]
fn the_refusal_names_the_allocating_stack() {
    // The test runs itself in a child process, whose standard error it reads.
    if std::env::var_os("YING_GIANT_CHILD").is_some() {
        allocate_a_giant();
        return;
    }
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "the_refusal_names_the_allocating_stack", "--nocapture", "--test-threads=1"])
        .env("YING_GIANT_CHILD", "1")
        .output()
        .unwrap();
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let expected =
        format!("ying: refused an allocation of {} bytes, above the giant_alloc_limit of {LIMIT} bytes", 3 * LIMIT);
    assert!(stderr.contains(&expected), "{stderr}");
    assert!(stderr.contains("giant::allocate_a_giant at "), "{stderr}");
    assert!(stderr.contains("tests/giant.rs:"), "{stderr}");
}
