//! `#[ying::leak_test]` end to end, in process: passing tests pass; failing ones, called from a checking test,
//! panic with the message a user sees.

use std::hint::black_box;
use std::panic::catch_unwind;

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

#[ying::leak_test]
fn clean_test_passes() {
    let v = black_box(vec![1u8; 4096]);
    assert_eq!(v.len(), 4096);
}

#[ying::leak_test]
#[ignore = "called by box_leak_fails_naming_its_site"]
fn box_leak() {
    Box::leak(black_box(Box::new([7u8; 1000])));
}

#[test]
fn box_leak_fails_naming_its_site() {
    let message = failure_of(box_leak);
    eprintln!("{message}");
    assert!(message.starts_with("ying: leak test `box_leak` exceeded its budget"), "{message}");
    assert!(message.contains("max_retained = 0 B: retained 1000 B in 1 block, 1000 B over"), "{message}");
    assert!(message.contains("leak_test::box_leak"), "{message}");
}
