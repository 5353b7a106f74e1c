//! A crate that depends on `ying-runtime` under another name (`fixtures/renamed-runtime`, with
//! `yr = { package = "ying-runtime", .. }`) writes `#[yr::leak_test(crate = "yr", max_retained = "1 KiB")]`, sync
//! and async: `cargo test` passes, and its ignored tests, which retain more than their budget, fail when run.
//!
//! The fixture builds into `target/fixtures` of this workspace, beside `fixtures/leak-tests` (same dependencies and
//! profile, so the runtime is built once for both), with a cleaned environment.

mod fixture_cargo;

use std::collections::BTreeMap;
use std::process::Output;

/// The tests of `tests/renamed.rs` that keep 100 bytes: they pass only under the budget written (1 KiB), since by
/// default a leak test retains nothing.
const WITHIN: &[&str] =
    &["within_its_budget", "async_within_its_budget", "async_within_its_budget_below_the_test_attribute"];

/// The ignored tests of `tests/renamed.rs` that keep 4 KiB.
const OVER: &[&str] = &["over_its_budget", "async_over_its_budget"];

/// Runs `cargo test` on the fixture with `args` after `--`, with a cleaned environment; its output, and each
/// test's outcome (`ok`, `FAILED`, `ignored`) by name.
fn cargo_test(args: &[&str]) -> (Output, BTreeMap<String, String>) {
    let mut command = fixture_cargo::cargo_test("fixtures/renamed-runtime/Cargo.toml", "target/fixtures");
    command.args(["--test", "renamed", "--"]).args(args);
    let output = command.output().expect("cargo runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("test result:"), "the fixture did not run:\n{}", String::from_utf8_lossy(&output.stderr));
    let outcomes = stdout
        .lines()
        .filter_map(|line| line.strip_prefix("test ")?.split_once(" ... "))
        .map(|(name, outcome)| (name.to_owned(), outcome.to_owned()))
        .collect();
    (output, outcomes)
}

#[test]
fn a_crate_that_renames_the_runtime_names_it_to_the_attribute() {
    let (output, outcomes) = cargo_test(&[]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "`cargo test` failed:\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    for name in WITHIN {
        assert_eq!(outcomes.get(*name).map(String::as_str), Some("ok"), "`{name}` should pass:\n{stdout}");
    }
    for name in OVER {
        assert!(outcomes.get(*name).is_some_and(|outcome| outcome.starts_with("ignored")), "{name}:\n{stdout}");
    }
    assert_eq!(outcomes.len(), WITHIN.len() + OVER.len(), "every fixture test is modelled:\n{stdout}");

    let (output, outcomes) = cargo_test(&["--ignored"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success(), "the tests over their budget passed:\n{stdout}");
    for name in OVER {
        assert_eq!(outcomes.get(*name).map(String::as_str), Some("FAILED"), "`{name}` should fail:\n{stdout}");
        let exceeded = format!("ying: leak test `{name}` exceeded its budget");
        assert!(stdout.contains(&exceeded), "`{name}` should report that it exceeded its budget:\n{stdout}");
    }
    let retained = "  max_retained = 1.0 KiB (1024 bytes): retained 4.0 KiB (4096 bytes) in 1 block";
    assert_eq!(stdout.lines().filter(|line| line.starts_with(retained)).count(), OVER.len(), "{stdout}");
}
