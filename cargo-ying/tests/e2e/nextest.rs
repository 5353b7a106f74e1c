//! cargo ying speaks nextest: listing runs nothing, no test to run is exit code 4, libtest's `--nocapture`,
//! `--test-threads` and `--list` are understood (never passed on twice), `-E` filtersets, `--retries` and flaky
//! tests, target selection, `-q`/`-v`, and a filtered run keeps the other tests' reports. Checked against nextest
//! itself: a partition holds the tests nextest runs in it, and the exit codes are nextest's where it gives one.

use crate::{Fixture, REGRESSED, TEST_FAILED, entry, stderr, stdout, summary};
use std::path::PathBuf;

/// What `<target>/ying/` of `fixture` holds now: summary.json's text and the report files, to tell whether a
/// command wrote there.
fn out_dir_state(fixture: &Fixture) -> (Option<String>, Vec<PathBuf>) {
    let out = fixture.target_dir().join("ying");
    let summary = std::fs::read_to_string(out.join("summary.json")).ok();
    let mut reports = Vec::new();
    let mut dirs = vec![out.join("reports")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() { dirs.push(path) } else { reports.push(path) }
        }
    }
    reports.sort();
    (summary, reports)
}

#[test]
fn listing_runs_no_test_and_claims_no_pass() {
    let fixture = Fixture::shared();
    // A run first, so that there is a summary and reports a listing must leave alone.
    let first = fixture.cargo_ying(&["clean"], &[]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let before = out_dir_state(&fixture);
    assert!(before.0.is_some() && !before.1.is_empty());

    let list = fixture.subcommand("list", &["-E", "binary(leaks)", "clean"], &[]).output().unwrap();
    let listed = stdout(&list);
    assert_eq!(list.status.code(), Some(0), "{}", stderr(&list));
    assert_eq!(listed, "leak-fixtures::leaks:\n    clean\n");
    assert!(stderr(&list).contains("Listed 1 test across 1 binary"), "{}", stderr(&list));

    for args in [&["--", "--list"][..], &["--", "--list", "--format", "terse"]] {
        let output = fixture.cargo_ying(args, &[]);
        let (out, err) = (stdout(&output), stderr(&output));
        assert_eq!(output.status.code(), Some(0), "{err}");
        assert!(out.contains("leak-fixtures::crashes:\n    aborts\n") && out.contains("    box_leak\n"), "{out}");
        assert!(!err.contains("PASS") && !err.contains("Summary") && !err.contains("passed"), "{args:?}: {err}");
    }
    let full = fixture.subcommand("list", &[], &[]).output().unwrap();
    let count = stdout(&full).lines().filter(|line| line.starts_with("    ")).count();
    assert!(stderr(&full).contains(&format!("Listed {count} tests across")), "{}", stderr(&full));
    assert!(stderr(&full).contains("(3 ignored, not listed)"), "{}", stderr(&full));
    assert_eq!(out_dir_state(&fixture), before, "listing wrote nothing under <target>/ying");
}

#[test]
fn no_test_to_run_is_exit_code_4_unless_told_otherwise() {
    let fixture = Fixture::shared();
    let none = fixture.cargo_ying(&["no_test_has_this_name"], &[]);
    assert_eq!(none.status.code(), Some(4), "{}", stderr(&none));
    assert!(stderr(&none).contains("error: no tests to run"), "{}", stderr(&none));
    let empty_set = fixture.cargo_ying(&["-E", "none()"], &[]);
    assert_eq!(empty_set.status.code(), Some(4), "{}", stderr(&empty_set));
    let warn = fixture.cargo_ying(&["no_test_has_this_name", "--no-tests=warn"], &[]);
    assert_eq!(warn.status.code(), Some(0));
    assert!(stderr(&warn).contains("warning: no tests to run"), "{}", stderr(&warn));
    let pass = fixture.cargo_ying(&["no_test_has_this_name", "--no-tests", "pass"], &[]);
    assert_eq!(pass.status.code(), Some(0));
    let said = stderr(&pass);
    assert!(
        said.contains("note: no tests to run (--no-tests=pass): the run passes, and nothing was measured"),
        "{said}"
    );
    // A shard that the partition left empty is not a selection that matched nothing.
    let shard = fixture.cargo_ying(&["--partition", "count:2/2", "--", "--exact", "clean"], &[]);
    assert_eq!(shard.status.code(), Some(0), "{}", stderr(&shard));
    assert!(stderr(&shard).contains("this shard has none of the 1 selected tests"), "{}", stderr(&shard));
}

#[test]
fn a_filtered_run_keeps_the_other_tests_reports() {
    let fixture = Fixture::shared();
    let first = fixture.cargo_ying(&["-E", "test(=box_leak)"], &[]);
    assert_eq!(first.status.code(), TEST_FAILED, "{}", stderr(&first));
    let box_leak = entry(&summary(&fixture.target_dir()), "leaks", "box_leak").clone();
    let out = fixture.target_dir().join("ying");
    let files: Vec<PathBuf> = ["report", "retained_flamegraph", "allocated_flamegraph"]
        .map(|key| out.join(box_leak[key].as_str().unwrap()))
        .to_vec();

    let second = fixture.cargo_ying(&["-E", "test(=clean)"], &[]);
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    for file in &files {
        assert!(file.exists(), "{} is kept by a run of other tests", file.display());
    }
    let summary = summary(&fixture.target_dir());
    assert_eq!(summary["tests"].as_array().unwrap().len(), 1, "summary.json is this run's");
    assert!(out.join(entry(&summary, "leaks", "clean")["report"].as_str().unwrap()).exists());
}

#[test]
fn libtest_arguments_cargo_ying_honours_are_never_passed_on_twice() {
    let fixture = Fixture::shared();
    for args in [
        &["--", "--nocapture", "--exact", "clean"][..],
        &["--no-capture", "--", "--exact", "clean"],
        &["--", "--test-threads", "2", "--exact", "clean"],
        &["--", "--test-threads=2", "--exact", "clean", "--nocapture"],
    ] {
        let output = fixture.cargo_ying(args, &[]);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {err}");
        assert!(err.contains("Starting 1 test across 1 binary"), "{args:?}: {err}");
        assert!(!err.contains("given more than once"), "{args:?}: {err}");
    }
    // Not captured: the test's own output goes to the terminal as it runs.
    let output = fixture.cargo_ying(&["--no-capture", "--", "--exact", "clean"], &[]);
    assert!(stdout(&output).contains("test clean ... ok"), "{}", stdout(&output));
}

#[test]
fn filtersets_select_by_binary_package_kind_and_name() {
    let fixture = Fixture::shared();
    let output = fixture.cargo_ying(&["-E", "kind(bin) | binary(steady) - test(random)"], &[]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    let ran: Vec<&str> = err.lines().filter(|line| line.trim_start().starts_with("PASS")).collect();
    assert_eq!(ran.len(), 2, "{err}");
    assert!(err.contains("leak-fixtures::bin/leak-fixtures tests::same_unit"), "{err}");
    assert!(err.contains("leak-fixtures::steady leaks_once"), "{err}");

    let bad = fixture.cargo_ying(&["-E", "test(clean) & deps(x)"], &[]);
    assert_eq!(bad.status.code(), Some(94), "nextest's code for an invalid filterset");
    assert!(stderr(&bad).contains("`deps()` needs the package graph"), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("at column 15"), "{}", stderr(&bad));
}

#[test]
fn a_test_that_passes_when_retried_is_flaky() {
    let fixture = Fixture::new();
    let marks = tempfile::tempdir().unwrap();
    let dir = marks.path().to_str().unwrap();
    let junit = fixture.path().join("junit.xml");
    let args = ["-E", "binary(flaky)", "--junit", junit.to_str().unwrap()];

    let once = fixture.cargo_ying(&args, &[("FIXTURE_FLAKY_DIR", dir)]);
    assert_eq!(once.status.code(), TEST_FAILED, "without retries the first attempt is the result");
    std::fs::remove_file(marks.path().join("attempted")).unwrap();

    let retried = fixture.cargo_ying(&[&args[..], &["--retries", "2"]].concat(), &[("FIXTURE_FLAKY_DIR", dir)]);
    let err = stderr(&retried);
    assert_eq!(retried.status.code(), Some(0), "{err}");
    assert!(err.contains("TRY 1 FAIL [") && err.contains("FLAKY 2/3 ["), "{err}");
    assert!(err.contains("1 test run: 1 passed (1 flaky)"), "{err}");
    let summary = summary(&fixture.target_dir());
    let test = entry(&summary, "flaky", "fails_on_first_attempt_when_asked");
    assert_eq!((test["outcome"].as_str(), test["attempts"].as_u64()), (Some("passed"), Some(2)));
    assert_eq!(test["retained_bytes"], 0, "the passing attempt's report is the test's");
    let junit = std::fs::read_to_string(&junit).unwrap();
    assert!(junit.contains("flaky: failed 1 time before passing"), "{junit}");
}

#[test]
fn target_selection_and_verbosity_follow_cargo_and_nextest() {
    let fixture = Fixture::shared();
    let bins = fixture.cargo_ying(&["--bins", "-v"], &[]);
    let err = stderr(&bins);
    assert_eq!(bins.status.code(), Some(0), "{err}");
    assert!(err.contains("Starting 1 test across 1 binary") && err.contains("bin/leak-fixtures tests::same_unit"));
    assert!(err.contains("each test runs alone: <binary> --exact <name>"), "-v says how tests run: {err}");

    let quiet = fixture.cargo_ying(&["-q", "--", "--exact", "clean"], &[]);
    let err = stderr(&quiet);
    assert_eq!(quiet.status.code(), Some(0), "{err}");
    assert!(!err.contains("PASS") && !err.contains("Compiling") && !err.contains("Finished"), "{err}");
    assert!(err.contains("1 test run: 1 passed"), "{err}");
}

/// The tests a listing names, as `binary-id test-name` lines, sorted: `cargo ying list`'s (a binary's id on a line
/// of its own, its tests indented below) or `cargo nextest list --message-format json`'s (those that match).
fn listed_tests(ying: Option<&str>, nextest: Option<&str>) -> Vec<String> {
    let mut tests = Vec::new();
    if let Some(listing) = ying {
        let mut binary = "";
        for line in listing.lines() {
            match line.strip_prefix("    ") {
                Some(test) => tests.push(format!("{binary} {test}")),
                None => binary = line.trim_end_matches(':'),
            }
        }
    }
    if let Some(json) = nextest {
        let list: serde_json::Value = serde_json::from_str(json).unwrap();
        for (binary, suite) in list["rust-suites"].as_object().unwrap() {
            for (test, case) in suite["testcases"].as_object().unwrap() {
                if case["filter-match"]["status"] == "matches" {
                    tests.push(format!("{binary} {test}"));
                }
            }
        }
    }
    tests.sort();
    tests
}

#[test]
fn a_partition_holds_the_tests_nextest_runs_in_it() {
    let fixture = Fixture::shared();
    // The custom harness cannot list its tests: nextest is kept from asking, as cargo ying never does.
    let not_custom = "not binary(custom_harness)";
    let every = fixture.subcommand("list", &["-E", not_custom], &[]).output().unwrap();
    assert_eq!(every.status.code(), Some(0), "{}", stderr(&every));
    let every = listed_tests(Some(&stdout(&every)), None);
    for partition in ["hash:1/3", "hash:3/3", "count:2/3", "slice:1/4"] {
        let nextest =
            fixture.nextest(&["list", "-E", not_custom, "--partition", partition, "--message-format", "json"]);
        assert_eq!(nextest.status.code(), Some(0), "{}", stderr(&nextest));
        let ying = fixture.subcommand("list", &["-E", not_custom, "--partition", partition], &[]).output().unwrap();
        assert_eq!(ying.status.code(), Some(0), "{}", stderr(&ying));
        let (ours, theirs) = (listed_tests(Some(&stdout(&ying)), None), listed_tests(None, Some(&stdout(&nextest))));
        assert_eq!(ours, theirs, "--partition {partition}");
        assert!(!ours.is_empty() && ours.len() < every.len(), "--partition {partition} holds some tests: {ours:?}");
    }
}

/// nextest's exit codes where nextest gives them: 100 for a failed test, 94 for a filterset that does not parse, 101
/// for a build that fails; and ying's own 3 for a regression alone, which nextest has no word for.
#[test]
fn exit_codes_are_nextests_where_nextest_gives_them() {
    let fixture = Fixture::new();
    let cases: [(&str, &[&str]); 3] = [
        ("a failed test", &["-E", "binary(leaks) & test(=box_leak)"]),
        ("an invalid filterset", &["-E", "test(box_leak) &"]),
        ("a passing test", &["-E", "binary(leaks) & test(=clean)"]),
    ];
    for (case, args) in cases {
        let nextest = fixture.nextest(&[&["run", "--no-fail-fast"][..], args].concat());
        let ying = fixture.cargo_ying(&[&["--no-fail-fast"][..], args].concat(), &[]);
        assert_eq!(ying.status.code(), nextest.status.code(), "{case}: {}\n{}", stderr(&ying), stderr(&nextest));
    }
    let failed = fixture.cargo_ying(&["-E", "binary(leaks) & test(=box_leak)"], &[]);
    assert_eq!(failed.status.code(), TEST_FAILED);

    std::fs::write(fixture.path().join("tests/broken.rs"), "fn broken( {}\n").unwrap();
    let nextest = fixture.nextest(&["run", "--test", "broken"]);
    let ying = fixture.cargo_ying(&["--test", "broken"], &[]);
    assert_eq!(nextest.status.code(), Some(101), "{}", stderr(&nextest));
    assert_eq!(ying.status.code(), Some(101), "{}", stderr(&ying));
    std::fs::remove_file(fixture.path().join("tests/broken.rs")).unwrap();

    // Every test passes and one regresses: ying's own code.
    let saved = fixture.cargo_ying(&["--test", "leaks", "budget_passes", "--save-baseline"], &[]);
    assert_eq!(saved.status.code(), Some(0), "{}", stderr(&saved));
    fixture.grow_budget_passes();
    let grown = fixture.cargo_ying(&["--test", "leaks", "budget_passes"], &[]);
    assert_eq!(grown.status.code(), REGRESSED, "{}", stderr(&grown));
}

/// `--message-format libtest-json`: standard output is libtest's JSON events as nextest writes them, a line each
/// (GitHub's annotations go to standard error then), and summary.json states the run's figures.
#[test]
fn libtest_json_events_go_to_stdout_and_summary_json_has_the_runs_figures() {
    let fixture = Fixture::shared();
    let step_summary = fixture.scratch("step-summary.md");
    let tests = "binary(leaks) & (test(=box_leak) | test(=clean) | test(=budget_passes))";
    let mut args = vec!["--no-fail-fast", "-E", tests, "--message-format", "libtest-json"];
    let envs = [("GITHUB_ACTIONS", "true"), ("GITHUB_STEP_SUMMARY", step_summary.to_str().unwrap())];
    let output = fixture.cargo_ying(&args, &envs);
    assert_eq!(output.status.code(), TEST_FAILED, "{}", stderr(&output));
    let events: Vec<serde_json::Value> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|error| panic!("{error}: {line}")))
        .collect();
    let of = |kind: &str, event: &str| -> Vec<&serde_json::Value> {
        events.iter().filter(|e| e["type"] == kind && e["event"] == event).collect()
    };
    assert_eq!((of("suite", "started").len(), of("test", "started").len()), (1, 3), "{events:#?}");
    let ok: Vec<&str> = of("test", "ok").iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(ok.len(), 2, "{events:#?}");
    assert!(ok.contains(&"leak-fixtures::leaks$clean") && ok.contains(&"leak-fixtures::leaks$budget_passes"));
    let failed = of("test", "failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["name"], "leak-fixtures::leaks$box_leak");
    assert!(failed[0]["stdout"].as_str().unwrap().contains("exceeded its budget"), "{}", failed[0]);
    assert!(failed[0]["exec_time"].as_f64().unwrap() > 0.0);
    let end = events.last().unwrap();
    // The binary's other tests, as libtest counts them: listed, not run (`helper_thread_leak_process` is ignored
    // and filtered out too).
    let listed = fixture.subcommand("list", &["-T", "json", "-E", "binary(leaks)"], &[]).output().unwrap();
    let listed: serde_json::Value = serde_json::from_str(&stdout(&listed)).unwrap();
    let in_binary = listed["rust-suites"]["leak-fixtures::leaks"]["testcases"].as_object().unwrap().len();
    assert_eq!(end["filtered_out"], in_binary - 3, "{end}");
    assert_eq!(
        (&end["type"], &end["event"], &end["passed"], &end["failed"]),
        (&"suite".into(), &"failed".into(), &2.into(), &1.into())
    );
    assert!(stderr(&output).contains("::error "), "the annotations went to standard error");

    let summary = summary(&fixture.target_dir());
    let totals = &summary["totals"];
    assert_eq!((&totals["run"], &totals["passed"], &totals["failed"]), (&3.into(), &2.into(), &1.into()), "{summary}");
    assert_eq!(summary["exit_code"], 100);
    assert!(summary["duration"].as_f64().unwrap() > 0.0);
    let started = summary["started_at"].as_str().unwrap();
    assert!(started.len() == 24 && started.ends_with('Z') && started.as_bytes()[10] == b'T', "{started}");
    assert_eq!(summary["tolerance"]["max_growth_percent"], 10.0);
    for name in ["box_leak", "clean", "budget_passes"] {
        assert!(entry(&summary, "leaks", name)["duration"].as_f64().unwrap() > 0.0, "{name}");
    }

    // `libtest-json-plus` names the binary on its suite's events, as nextest does.
    args[4] = "libtest-json-plus";
    let output = fixture.cargo_ying(&args, &[]);
    let first: serde_json::Value = serde_json::from_str(stdout(&output).lines().next().unwrap()).unwrap();
    assert_eq!(first["nextest"], serde_json::json!({"crate": "leak-fixtures", "test_binary": "leaks", "kind": "test"}));
}

/// The commands that run no test refuse `--reruns` rather than accept it and do nothing: nextest ran the tests
/// `gate` judges, and `merge` and `diff` judge files.
#[test]
fn commands_that_run_no_test_refuse_reruns() {
    let fixture = Fixture::shared();
    for (command, args) in [("gate", &[][..]), ("merge", &["summary.json"][..]), ("diff", &["a.json", "b.json"][..])] {
        let mut run = crate::cleaned(env!("CARGO_BIN_EXE_cargo-ying"), &fixture.target_dir());
        run.current_dir(fixture.path()).args(["ying", command, "--reruns", "5"]).args(args);
        let output = run.output().unwrap();
        let said = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{command}: {said}");
        let words = format!("error: failed to rerun regressions in `cargo ying {command}`: it runs no test");
        assert!(said.contains(&words), "{command}: {said}");
    }
}
