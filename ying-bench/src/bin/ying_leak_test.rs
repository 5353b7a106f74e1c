//! `YingProfiler` over System with the workload inside a leak-test scope, as `#[ying::leak_test]` runs a test body.

use ying::__private::{Budgets, LeakTest};

#[global_allocator]
static ALLOC: ying::YingProfiler = ying::YingProfiler::new();

/// What `#[ying::leak_test]` would generate for the workload as a test.
static TEST: LeakTest = LeakTest {
    package: env!("CARGO_PKG_NAME"),
    module_path: module_path!(),
    name: "workload",
    file: file!(),
    line: line!(),
    manifest_dir: env!("CARGO_MANIFEST_DIR"),
    budgets: Budgets {
        max_retained: None,
        max_peak: None,
        max_allocated: None,
        max_allocations: None,
        max_growth_per_iteration: None,
    },
    warmup: 0,
    iterations: None,
    attribution: None,
    allow: &[],
    should_panic: false,
};

fn main() {
    ying_bench::main("ying_leak_test", |workload| {
        let mut checksum = 0;
        ying::__private::run(&TEST, || checksum = workload());
        checksum
    });
}
