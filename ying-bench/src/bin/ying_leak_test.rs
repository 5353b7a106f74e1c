//! `YingProfiler` over System with the workload inside a leak-test scope, as `#[ying::leak_test]` runs a test body.

use ying::__private::LeakTest;

#[global_allocator]
static ALLOC: ying::YingProfiler = ying::YingProfiler::new();

/// What `#[ying::leak_test]` with no arguments would generate for the workload as a test.
static TEST: LeakTest = LeakTest::unconfigured(
    env!("CARGO_PKG_NAME"),
    module_path!(),
    "workload",
    file!(),
    line!(),
    env!("CARGO_MANIFEST_DIR"),
);

fn main() {
    ying_bench::main("ying_leak_test", |workload| {
        let mut checksum = 0;
        ying::__private::run(&TEST, || checksum = workload());
        checksum
    });
}
