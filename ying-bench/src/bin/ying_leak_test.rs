//! `YingProfiler` over System with the workload inside a leak-test scope, as `#[ying::leak_test]` runs a test body
//! under `cargo ying test`: with process attribution (every thread of the process counts, as in a test process of
//! its own), unless `YING_ATTRIBUTION` says otherwise.

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
    if std::env::var_os(ying::ATTRIBUTION_ENV).is_none() {
        // SAFETY: no other thread runs yet, so none reads the environment while it changes.
        unsafe { std::env::set_var(ying::ATTRIBUTION_ENV, "process") };
    }
    ying_bench::main("ying_leak_test", |workload| {
        let mut checksum = 0;
        ying::__private::run(&TEST, || checksum = workload());
        checksum
    });
}
