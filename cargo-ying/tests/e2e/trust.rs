//! The gate's verdict can be trusted: figures that do not depend on the environment, regressions that reproduce,
//! leaks that cannot hide.

use super::{Fixture, REGRESSED, TEST_FAILED, entry, entry_of, stderr, summary};

#[test]
fn a_panicking_leak_tests_figures_do_not_depend_on_rust_backtrace() {
    let fixture = Fixture::shared();
    let figures = |backtrace: Option<&str>| {
        let mut command = fixture.command(&["should_panic", "--", "--exact"], &[]);
        match backtrace {
            Some(value) => command.env("RUST_BACKTRACE", value),
            None => command.env_remove("RUST_BACKTRACE"),
        };
        let output = command.output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
        let summary = summary(&fixture.target_dir());
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
    let fixture = Fixture::shared();
    let output = fixture.cargo_ying(&["--test", "foreign_reports"], &[("YING_FIXTURE_FOREIGN_REPORTS", "1")]);
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let out = fixture.target_dir().join("ying");
    let refused = out.join("refused/leak-fixtures/test/foreign_reports/writes_foreign_reports");
    let old = format!("schema_version 1 at line 1 column 2 is not {}", ying_report::report::REPORT_SCHEMA_VERSION);
    let expected = [
        ("a-forged.json", "it does not carry this run's token"),
        ("a-forged.started", "it is not the mark of a leak test started in this run"),
        ("a-garbage.json", "expected ident at line 1 column 2"),
        ("notes.txt", "it is not a report"),
        ("old.json", old.as_str()),
        ("other.json", "it is the report of `leak-fixtures (crate leaks) box_leak`"),
    ];
    for (file, why) in expected {
        let warning = format!("refused {}: {why}", refused.join(file).display());
        assert!(stderr.contains(&warning), "{warning}\nin\n{stderr}");
        assert!(refused.join(file).is_file(), "the refused file is kept");
    }
    let summary = summary(&fixture.target_dir());
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
    let fixture = Fixture::shared();
    let output = fixture.cargo_ying(&["--test", "exits"], &[]);
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), TEST_FAILED, "{stderr}");
    assert!(stderr.contains("FAIL ["), "{stderr}");
    // The runtime's exit handler ends the process with 101 and says why; the missing report says the rest.
    let reason = "exited with code 101 before the leak test reported what it retained";
    assert!(stderr.contains(reason), "{stderr}");
    let summary = summary(&fixture.target_dir());
    let test = entry(&summary, "exits", "exits_after_leaking");
    assert_eq!(test["outcome"], "failed", "{test}");
    assert_eq!(test["reason"], reason, "{test}");
    assert!(test["retained_bytes"].is_null(), "{test}");
    assert!(stderr.contains("ying: the process exited while leak test `exits_after_leaking` was running"), "{stderr}");
}

/// Saves a baseline of the steady fixture's tests; returns where it is and what it holds.
fn save_steady_baseline(fixture: &Fixture) -> (std::path::PathBuf, Vec<u8>) {
    let baseline = fixture.path().join("ying-baseline.json");
    let saved = fixture.cargo_ying(&["--test", "steady", "--save-baseline"], &[]);
    assert_eq!(saved.status.code(), Some(0), "{}", stderr(&saved));
    let recorded = std::fs::read(&baseline).unwrap();
    (baseline, recorded)
}

/// The verdict of test `name` of the steady fixture in the summary of the last run in `fixture`.
fn steady_verdict(fixture: &Fixture, name: &str) -> serde_json::Value {
    entry(&summary(&fixture.target_dir()), "steady", name)["gate"].clone()
}

#[test]
fn a_one_time_resize_never_regresses_and_a_leak_in_every_run_always_does() {
    let fixture = Fixture::new();
    let (baseline, recorded) = save_steady_baseline(&fixture);
    let entry = &serde_json::from_slice::<serde_json::Value>(&recorded).unwrap()["tests"]["leak-fixtures::steady random_resize"];
    assert_eq!(entry["steady_state"], true, "{entry}");
    assert_eq!(entry["retained"], 0, "the smallest growth of one measured run: {entry}");

    // The table grows in a different run each time (its total retained moves by tens of KiB): no regression.
    let mut totals = Vec::new();
    for _ in 0..4 {
        let output = fixture.cargo_ying(&["--test", "steady"], &[]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        assert_eq!(steady_verdict(&fixture, "random_resize"), "unchanged");
        totals.push(
            entry_of(&summary(&fixture.target_dir()), "test", "steady", "random_resize")["retained_bytes"].clone(),
        );
    }
    // Saving again after an unchanged run rewrites the baseline byte for byte.
    let again = fixture.cargo_ying(&["--test", "steady", "--save-baseline"], &[]);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    assert_eq!(std::fs::read(&baseline).unwrap(), recorded, "totals of the runs: {totals:?}");

    // A leak of 4 KiB in every run: every run regresses, and every rerun confirms it.
    for _ in 0..2 {
        let output = fixture.cargo_ying(&["--test", "steady"], &[("YING_FIXTURE_STEADY_LEAK", "1")]);
        let stderr = stderr(&output);
        assert_eq!(output.status.code(), REGRESSED, "{stderr}");
        assert_eq!(steady_verdict(&fixture, "random_resize"), "regressed", "{stderr}");
        assert!(
            stderr.contains(
                "REGRESSED leak-fixtures::steady random_resize: crossed the tolerance, then again in 2 of 2 reruns"
            ),
            "{stderr}"
        );
        assert!(stderr.contains("leak-fixtures::steady random_resize (steady state: retained bytes)"), "{stderr}");
    }
}

#[test]
fn reruns_that_fail_or_crash_confirm_nothing_and_the_regression_stands_naming_them() {
    let fixture = Fixture::new();
    save_steady_baseline(&fixture);
    let marker = fixture.scratch("leaked-once");
    let marker = marker.to_str().unwrap();
    for (then, outcome, ended) in [
        ("panic", "failed", "2 failed: panicked at tests/steady.rs:"),
        ("abort", "crashed", "2 crashed: killed by SIGABRT"),
    ] {
        let _ = std::fs::remove_file(marker);
        let envs = [("YING_FIXTURE_ONCE", marker), ("YING_FIXTURE_ONCE_THEN", then)];
        let output = fixture.cargo_ying(&["--test", "steady", "leaks_once"], &envs);
        let stderr = stderr(&output);
        assert_eq!(output.status.code(), REGRESSED, "{stderr}");
        let words = format!(
            "REGRESSED leak-fixtures::steady leaks_once: crossed the tolerance, then in none of 2 reruns, which \
             measured nothing ({ended}"
        );
        assert!(stderr.contains(&words), "{words}\n{stderr}");
        assert!(stderr.contains("the regression stands"), "{stderr}");
        assert_eq!(steady_verdict(&fixture, "leaks_once"), "regressed");
        let summary = summary(&fixture.target_dir());
        let reruns = &entry_of(&summary, "test", "steady", "leaks_once")["reruns"];
        assert_eq!((&reruns["runs"], &reruns["crossed"]), (&serde_json::json!(2), &serde_json::json!(0)), "{reruns}");
        assert_eq!(reruns["unmeasured"][1]["outcome"], outcome, "{reruns}");
        if then == "panic" {
            let reason = reruns["unmeasured"][0]["reason"].as_str().unwrap();
            assert!(reason.starts_with("panicked at tests/steady.rs:") && reason.ends_with(": a rerun that fails"));
        }
    }
}

#[test]
fn a_regression_that_does_not_reproduce_is_unstable_and_does_not_fail_the_run() {
    let fixture = Fixture::new();
    let (baseline, recorded) = save_steady_baseline(&fixture);

    let marker = fixture.path().join("leaked-once");
    let marker = marker.to_str().unwrap();
    let output = fixture.cargo_ying(&["--test", "steady"], &[("YING_FIXTURE_ONCE", marker)]);
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "UNSTABLE leak-fixtures::steady leaks_once: crossed the tolerance, then again in only 0 of 2 reruns"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("unstable, not a failure"), "{stderr}");
    assert_eq!(steady_verdict(&fixture, "leaks_once"), "unstable");
    let summary = summary(&fixture.target_dir());
    let test = entry_of(&summary, "test", "steady", "leaks_once");
    assert_eq!(test["retained_bytes"], 8192, "the figures of the run itself: {test}");

    // With no reruns the first run's verdict stands.
    std::fs::remove_file(marker).unwrap();
    let output = fixture.cargo_ying(&["--test", "steady", "--reruns", "0"], &[("YING_FIXTURE_ONCE", marker)]);
    assert_eq!(output.status.code(), REGRESSED, "{}", self::stderr(&output));
    assert_eq!(steady_verdict(&fixture, "leaks_once"), "regressed");

    // Saving after an unstable run keeps the recorded entry.
    std::fs::remove_file(marker).unwrap();
    let output = fixture.cargo_ying(&["--test", "steady", "--save-baseline"], &[("YING_FIXTURE_ONCE", marker)]);
    assert_eq!(output.status.code(), Some(0), "{}", self::stderr(&output));
    assert_eq!(std::fs::read(&baseline).unwrap(), recorded);
}
