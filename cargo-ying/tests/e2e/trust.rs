//! The gate's verdict can be trusted: figures that do not depend on the environment, regressions that reproduce,
//! leaks that cannot hide.

use super::{Fixture, SHARED_TARGET, entry, entry_of, stderr, summary, target_dir};

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

#[test]
fn files_a_test_writes_where_its_report_goes_are_refused_and_its_real_figures_kept() {
    let _shared = SHARED_TARGET.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let fixture = Fixture::new();
    let output = fixture.cargo_ying(&["--test", "foreign_reports"], &[("YING_FIXTURE_FOREIGN_REPORTS", "1")]);
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let out = target_dir().join("ying");
    let refused = out.join("refused/leak-fixtures/test/foreign_reports/writes_foreign_reports");
    let expected = [
        ("a-forged.json", "it does not carry this run's token"),
        ("a-forged.started", "it is not the mark of a leak test started in this run"),
        ("a-garbage.json", "expected ident at line 1 column 2"),
        ("notes.txt", "it is not a report"),
        ("old.json", "schema_version 1 at line 1 column 2 is not 3"),
        ("other.json", "it is the report of `leak-fixtures (crate leaks) box_leak`"),
    ];
    for (file, why) in expected {
        let warning = format!("refused {}: {why}", refused.join(file).display());
        assert!(stderr.contains(&warning), "{warning}\nin\n{stderr}");
        assert!(refused.join(file).is_file(), "the refused file is kept");
    }
    let summary = summary(&target_dir());
    let test = entry_of(&summary, "test", "foreign_reports", "writes_foreign_reports");
    assert_eq!(test["retained_bytes"], 1000, "the test's own figures: {test}");
    assert_eq!(test["warnings"].as_array().unwrap().len(), expected.len(), "{test}");
    let id = ying_report::TestId::new(
        "leak-fixtures",
        ying_report::TargetKind::Test,
        "foreign_reports",
        "writes_foreign_reports",
    );
    let report = ying_report::LeakReport::read(&out.join(test["report"].as_str().unwrap()), &id).unwrap();
    assert_eq!(report.figures.retained_bytes, 1000);
}

#[test]
fn a_leak_test_whose_process_exits_before_it_reports_fails() {
    let _shared = SHARED_TARGET.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let fixture = Fixture::new();
    let output = fixture.cargo_ying(&["--test", "exits"], &[]);
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("FAIL ["), "{stderr}");
    let reason = "exited with code 0 before the leak test reported what it retained";
    assert!(stderr.contains(reason), "{stderr}");
    let summary = summary(&target_dir());
    let test = entry(&summary, "exits", "exits_after_leaking");
    assert_eq!(test["outcome"], "failed", "{test}");
    assert_eq!(test["reason"], reason, "{test}");
    assert!(test["retained_bytes"].is_null(), "{test}");
}
