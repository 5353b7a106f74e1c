//! The listing of `cargo ying list` and `cargo ying test -- --list`: each binary's id, then its tests that would
//! run, indented, as cargo-nextest lists them and in its order (or, `-T oneline`, each test after its binary's id),
//! on standard output; the count on standard error.

use crate::run::select::discover::TestCase;
use crate::run::select::partition::binary_order;
use crate::run::select::plan::Plan;
use std::fmt::Write as _;

/// Prints the tests of `plan` that run to standard output, by binary (`oneline`: one a line, after its binary's id);
/// their count, and what cargo ying does not run, to standard error.
pub(crate) fn print(plan: &Plan, oneline: bool) {
    if oneline {
        let lines: String =
            in_nextests_order(plan).map(|test| format!("{} {}\n", test.binary.binary_id(), test.name)).collect();
        print!("{lines}");
    } else {
        print!("{}", listing(plan));
    }
    let running = plan.running().count();
    let ignored = plan.tests.len() - running;
    let ignored = if ignored > 0 { format!(" ({ignored} ignored, not listed)") } else { String::new() };
    eprintln!(
        "{:>12} {running} test{} across {} binar{}{ignored}",
        "Listed",
        if running == 1 { "" } else { "s" },
        plan.binaries_with_tests(),
        if plan.binaries_with_tests() == 1 { "y" } else { "ies" }
    );
    for target in &plan.not_run {
        eprintln!("{:>12} {}", "NOT RUN", crate::run::select::not_run::describe(target));
    }
}

/// The tests of `plan` that run, their binaries in the order nextest lists them (the library, then the integration
/// tests, ..., by name), each binary's tests in its own order.
fn in_nextests_order(plan: &Plan) -> impl Iterator<Item = &TestCase> {
    let mut tests: Vec<(String, &TestCase)> = plan.running().map(|test| (test.binary.binary_id(), test)).collect();
    tests.sort_by(|(a, _), (b, _)| binary_order(a).cmp(&binary_order(b)));
    tests.into_iter().map(|(_, test)| test)
}

/// Each binary's id, then its tests that run, indented.
fn listing(plan: &Plan) -> String {
    let mut text = String::new();
    let mut binary = None;
    for test in in_nextests_order(plan) {
        let id = test.id();
        let binary_id = id.binary_id();
        if binary.as_ref() != Some(&binary_id) {
            let _ = writeln!(text, "{binary_id}:");
            binary = Some(binary_id);
        }
        let _ = writeln!(text, "    {}", id.name);
    }
    text
}
