//! The gate's verdict can be trusted: figures that do not depend on the environment, regressions that reproduce,
//! leaks that cannot hide.

use super::{Fixture, SHARED_TARGET, entry, summary, target_dir};

#[test]
fn a_panicking_leak_tests_figures_do_not_depend_on_rust_backtrace() {
    let _shared = SHARED_TARGET.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let fixture = Fixture::new();
    let figures = |backtrace: Option<&str>| {
        let mut command = fixture.command(&["should_panic", "--", "--exact"], &[]);
        match backtrace {
            Some(value) => command.env("RUST_BACKTRACE", value),
            None => command.env_remove("RUST_BACKTRACE"),
        };
        let output = command.output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
        let summary = summary(&target_dir());
        let test = entry(&summary, "leaks", "should_panic");
        assert_eq!(test["outcome"], "passed");
        ["retained_bytes", "peak_bytes", "allocated_bytes", "allocations"].map(|key| test[key].as_u64().unwrap())
    };
    let unset = figures(None);
    // The panic's payload, a boxed `&str`, is what the body retains when it unwinds out of the scope.
    assert_eq!(unset[0], 16, "{unset:?}");
    for value in ["0", "1", "full"] {
        assert_eq!(figures(Some(value)), unset, "RUST_BACKTRACE={value}");
    }
}
