//! `cargo ying test --release`: the fixture built optimised, without debug information, gives the outcomes of the
//! full run in a debug build (the result lines the fixture's model gives), thread-local values and `allow` included,
//! and the stacks `cargo ying` symbolises name the test. The release build is made in the test's own copy.

use super::{Fixture, TEST_FAILED, entry, modelled_result_lines, result_lines, stderr, summary};

#[test]
fn a_release_build_gives_the_outcomes_of_a_debug_build() {
    let fixture = Fixture::new();
    let target = fixture.target_dir();
    let output = fixture
        .cargo_ying(&["--no-fail-fast", "--timeout", "4s", "-j", "2", "--release"], &[("YING_FIXTURE_HANG", "1")]);
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), TEST_FAILED, "{stderr}");
    assert_eq!(result_lines(&stderr), modelled_result_lines("4.000s"), "{stderr}");

    // Without debug information the body is inlined into the runner and has no frame: the stacks still name it.
    let summary = summary(&target);
    let box_leak = entry(&summary, "leaks", "box_leak");
    let id = ying_report::TestId::new("leak-fixtures", ying_report::TargetKind::Test, "leaks", "box_leak");
    let report =
        ying_report::LeakReport::read(&target.join("ying").join(box_leak["report"].as_str().unwrap()), &id).unwrap();
    let names = |frames: &[ying_report::Frame]| frames.iter().any(|frame| frame.function == "leaks::box_leak");
    assert!(report.retained_sites.iter().any(|site| names(&site.frames)), "{:#?}", report.retained_sites);
    assert!(report.sampled_stacks.iter().any(|stack| names(&stack.frames)), "{:#?}", report.sampled_stacks);
}
