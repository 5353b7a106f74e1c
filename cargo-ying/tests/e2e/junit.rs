//! `--junit`: the JUnit file shows each test's verdict as the run's exit code and summary.json do (a leak test whose
//! memory regressed is a failure, with its figures and diff flamegraph), and is valid against both JUnit schemas
//! under `schemas/` (Jenkins' junit-10 and Ant's junit-4), checked by libxml2's validator (`xsd.rs`).

use super::xsd::assert_valid_junit;
use super::{Fixture, TEST_FAILED, entry, stderr, summary};
use roxmltree::{Document, Node};

fn count(node: Node, attribute: &str) -> usize {
    node.attribute(attribute).unwrap_or_else(|| panic!("{attribute} on <{}>", node.tag_name().name())).parse().unwrap()
}

fn seconds(node: Node) -> f64 {
    node.attribute("time").unwrap_or_else(|| panic!("time on <{}>", node.tag_name().name())).parse().unwrap()
}

fn child<'a>(node: Node<'a, 'a>, name: &str) -> Option<Node<'a, 'a>> {
    node.children().find(|child| child.has_tag_name(name))
}

#[test]
fn a_regressed_passing_test_is_a_junit_failure_with_its_figures_and_the_file_is_valid_against_junit_10() {
    let fixture = Fixture::new();
    let subset = [
        "--test",
        "leaks",
        "--test",
        "crashes",
        "--no-fail-fast",
        "budget_passes",
        "clean",
        "box_leak",
        "helper_thread_leak_process",
        "aborts",
        "survives_beside_them",
        "--",
        "--exact",
    ];
    let saved = fixture.cargo_ying(&[&["--save-baseline"], &subset[..]].concat(), &[]);
    assert_eq!(saved.status.code(), TEST_FAILED, "box_leak and aborts fail: {}", stderr(&saved));
    // budget_passes retains 3000 bytes instead of 1000, still within its own budget: it passes, and regresses.
    fixture.grow_budget_passes();

    let outputs = tempfile::tempdir().unwrap();
    let junit = outputs.path().join("junit.xml");
    let junit_arg = junit.display().to_string();
    let output = fixture.cargo_ying(&[&["--junit", &junit_arg], &subset[..]].concat(), &[]);
    assert_eq!(output.status.code(), TEST_FAILED, "{}", stderr(&output));
    let xml = std::fs::read_to_string(&junit).unwrap();
    let document = Document::parse(&xml).unwrap_or_else(|error| panic!("{error}: {xml}"));
    let root = document.root_element();
    assert!(root.has_tag_name("testsuites"), "{xml}");
    assert_valid_junit(&junit);
    assert!(!xml.contains('\u{1b}'), "no ANSI escape codes: {xml}");

    // Each test case shows the verdict summary.json has: a failure for a failed, crashed or timed-out test and
    // for a regressed one, skipped for an ignored one.
    let summary = summary(&fixture.target_dir());
    let suites: Vec<Node> = root.children().filter(|node| node.has_tag_name("testsuite")).collect();
    let mut names: Vec<&str> = suites.iter().map(|suite| suite.attribute("name").unwrap()).collect();
    names.sort_unstable();
    assert_eq!(names, ["leak-fixtures::crashes", "leak-fixtures::leaks"], "one suite per binary, by its id");
    let suite = |name: &str| *suites.iter().find(|suite| suite.attribute("name") == Some(name)).unwrap();
    let mut cases = 0;
    for suite in &suites {
        let suite_name = suite.attribute("name").unwrap();
        let binary = suite_name.rsplit("::").next().unwrap();
        let members: Vec<Node> = suite.children().filter(|node| node.has_tag_name("testcase")).collect();
        let with = |element: &str| members.iter().filter(|case| child(**case, element).is_some()).count();
        assert_eq!(count(*suite, "tests"), members.len(), "{suite_name}");
        assert_eq!(count(*suite, "failures"), with("failure"), "{suite_name}");
        assert_eq!(count(*suite, "errors"), with("error"), "{suite_name}");
        assert_eq!(count(*suite, "skipped"), with("skipped"), "{suite_name}");
        let time: f64 = members.iter().map(|case| seconds(*case)).sum();
        assert!((seconds(*suite) - time).abs() < 0.01 && time > 0.0, "{suite_name}: the time of its tests");
        for case in members {
            let name = case.attribute("name").unwrap();
            assert_eq!(case.attribute("classname"), Some(suite_name));
            let test = entry(&summary, binary, name);
            let outcome = test["outcome"].as_str().unwrap();
            let fails = ["failed", "crashed", "timed-out"].contains(&outcome) || test["gate"] == "regressed";
            assert_eq!(child(case, "failure").is_some(), fails, "{name}: {outcome}, {}", test["gate"]);
            assert_eq!(child(case, "skipped").is_some(), ["ignored", "not-run"].contains(&outcome), "{name}");
            cases += 1;
        }
    }
    let totals = ["tests", "failures", "errors"].map(|attribute| count(root, attribute));
    assert_eq!(totals, [6, 3, 0], "box_leak, aborts and the regressed budget_passes fail; nothing errs: {xml}");
    assert_eq!(cases, 6);
    assert!(seconds(root) > 0.0);

    // The regression: its figures, the site it grew at, and where its diff flamegraph is under <target>/ying/.
    let leaks_suite = suite("leak-fixtures::leaks");
    let case = |name: &str| {
        leaks_suite.children().find(|node| node.attribute("name") == Some(name)).unwrap_or_else(|| panic!("{name}"))
    };
    let regressed = entry(&summary, "leaks", "budget_passes");
    assert_eq!((regressed["outcome"].as_str(), regressed["gate"].as_str()), (Some("passed"), Some("regressed")));
    let diff = regressed["retained_diff_flamegraph"].as_str().expect("a diff flamegraph");
    assert!(fixture.target_dir().join("ying").join(diff).is_file(), "{diff}");
    let failure = child(case("budget_passes"), "failure").unwrap();
    assert_eq!(failure.attribute("type"), Some("memory regression"));
    let message = failure.attribute("message").unwrap();
    assert!(message.contains("retained bytes grew from 1000 to 3000 (+2000, +200.0%)"), "{message}");
    assert!(message.contains("; grown at: 2.9 KiB (3000 bytes) in 1 block"), "{message}");
    assert!(message.contains(", at tests/leaks.rs:69 in leaks::budget_passes; "), "{message}");
    assert!(message.contains(diff), "{message}");
    let text = failure.text().unwrap();
    assert!(text.contains("\ngrown at:\n  2.9 KiB (3000 bytes) in 1 block"), "{text}");

    // A failed leak test: its reason, and the whole message with its figures; its output apart.
    let failure = child(case("box_leak"), "failure").unwrap();
    assert_eq!(failure.attribute("type"), Some("failed"));
    assert_eq!(failure.attribute("message"), Some("ying: leak test `box_leak` exceeded its budget"));
    let text = failure.text().unwrap();
    assert!(text.contains("max_retained = 0 B: retained 1000 B in 1 block, 1000 B over"), "{text}");
    assert!(text.contains("leaks::box_leak at tests/leaks.rs:22"), "{text}");
    let out = child(case("box_leak"), "system-out").and_then(|node| node.text()).unwrap_or_default();
    assert!(out.contains("panicked at"), "the test's output: {out}");

    let crashes = suite("leak-fixtures::crashes");
    let aborts = crashes.children().find(|node| node.attribute("name") == Some("aborts")).unwrap();
    let failure = child(aborts, "failure").unwrap();
    assert_eq!((failure.attribute("type"), failure.attribute("message")), (Some("crashed"), Some("killed by SIGABRT")));
    assert!(child(case("clean"), "failure").is_none() && child(case("clean"), "skipped").is_none());
}
