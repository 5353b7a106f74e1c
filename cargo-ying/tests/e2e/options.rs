//! nextest's run options, with nextest's meaning: `--no-run`, `--run-ignored`, `--fail-fast`/`--no-fail-fast`/
//! `--max-fail` (`N:immediate` too), `--bench`/`--benches`, `-P` taking retries, the timeout and fail-fast from a
//! nextest profile, and `cargo ying list`'s formats.

use super::{Fixture, TEST_FAILED, entry, stderr, stdout, summary};

/// The names of the tests a run reported as run, with their outcome (`PASS`, `FAIL`, ...), from its result lines.
fn ran(stderr: &str) -> Vec<String> {
    let mut lines: Vec<String> = stderr
        .lines()
        .take_while(|line| !line.trim_start().starts_with("Summary ["))
        .filter(|line| ["PASS", "FAIL", "CRASH", "TIMEOUT"].contains(&line.split_whitespace().next().unwrap_or("")))
        .map(|line| line[line.find(']').unwrap() + 2..].to_owned())
        .collect();
    lines.sort();
    lines
}

/// Every file and directory under `dir`, with its size and when it was last changed, sorted.
fn tree(dir: &std::path::Path) -> Vec<(std::path::PathBuf, u64, std::time::SystemTime)> {
    let mut entries = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let (path, metadata) = (entry.path(), entry.metadata().unwrap());
            if metadata.is_dir() {
                dirs.push(path.clone());
            }
            entries.push((path, metadata.len(), metadata.modified().unwrap()));
        }
    }
    entries.sort();
    entries
}

#[test]
fn no_run_builds_and_runs_nothing() {
    let fixture = Fixture::new();
    let out_dir = fixture.target_dir().join("ying");
    // A run first, so that there are a summary, reports and kept files that --no-run must leave as they are.
    let first = fixture.cargo_ying(&["--test", "leaks", "clean", "box_leak"], &[]);
    assert_eq!(first.status.code(), TEST_FAILED, "{}", stderr(&first));
    // A change to a test's source: --no-run builds it anew.
    let leaks = fixture.path().join("tests/leaks.rs");
    let source = std::fs::read_to_string(&leaks).unwrap();
    std::fs::write(&leaks, format!("{source}\n#[test]\nfn added_after_the_first_run() {{}}\n")).unwrap();
    let before = tree(&out_dir);
    assert!(before.iter().any(|(path, ..)| path.ends_with("summary.json")), "{before:?}");

    let output = fixture.cargo_ying(&["--no-run", "--retries", "2"], &[]);
    let said = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{said}");
    assert!(said.contains("Compiling leak-fixtures"), "the tests are built: {said}");
    assert!(said.contains("ran none (--no-run)") && !said.contains("Starting") && ran(&said).is_empty(), "{said}");
    assert!(said.contains("warning: ignoring --retries because --no-run is specified"), "{said}");
    assert_eq!(tree(&out_dir), before, "nothing under <target>/ying written, swept or removed");
    // The build is the one a run takes: the added test is listed without building again.
    let list = fixture.subcommand("list", &["--test", "leaks", "added_after"], &[]).output().unwrap();
    assert!(!stderr(&list).contains("Compiling"), "{}", stderr(&list));
    assert_eq!(stdout(&list), "leak-fixtures::leaks:\n    added_after_the_first_run\n");

    // As nextest's: --no-run with an option only a run has is a usage error.
    for conflicting in ["--fail-fast", "--no-fail-fast", "--max-fail=2"] {
        let output = fixture.cargo_ying(&["--no-run", conflicting], &[]);
        assert_eq!(output.status.code(), Some(2), "{conflicting}: {}", stderr(&output));
        assert!(stderr(&output).contains("cannot be used with"), "{}", stderr(&output));
    }
}

#[test]
fn run_ignored_only_runs_the_ignored_tests_and_all_runs_both() {
    let fixture = Fixture::shared();
    let only = fixture.cargo_ying(&["--no-fail-fast", "--run-ignored", "only", "-E", "binary(leaks)"], &[]);
    assert_eq!(ran(&stderr(&only)), ["leak-fixtures::leaks helper_thread_leak_process"], "{}", stderr(&only));
    let all = fixture.cargo_ying(&["--run-ignored", "all", "-E", "binary(leaks) & test(helper_thread)"], &[]);
    let names: Vec<String> = ran(&stderr(&all));
    assert_eq!(names.len(), 2, "{}", stderr(&all));
    assert!(names.iter().all(|name| name.starts_with("leak-fixtures::leaks helper_thread_leak")), "{names:?}");
}

#[test]
fn max_fail_stops_starting_tests_after_that_many_failures() {
    let fixture = Fixture::shared();
    // Four failing leak tests and a passing one, one at a time.
    let tests = "binary(leaks) & (test(=box_leak) | test(=mem_forget) | test(=rc_cycle) | test(=budget_fails))";
    for (args, failed) in [
        (&["--max-fail", "1"][..], 1),
        (&["--max-fail", "2"], 2),
        (&["--no-fail-fast", "--fail-fast"], 1),
        (&["--max-fail=all"], 4),
        (&["--fail-fast", "--no-fail-fast"], 4),
    ] {
        let output = fixture.cargo_ying(&[&["-j", "1", "-E", tests][..], args].concat(), &[]);
        let said = stderr(&output);
        assert_eq!(output.status.code(), TEST_FAILED, "{args:?}: {said}");
        assert_eq!(ran(&said).len(), failed, "{args:?}: {said}");
        let summary = summary(&fixture.target_dir());
        let not_run = summary["tests"].as_array().unwrap().iter().filter(|test| test["outcome"] == "not-run").count();
        assert_eq!(not_run, 4 - failed, "{args:?}: {said}");
    }
    let zero = fixture.cargo_ying(&["--max-fail", "0"], &[]);
    assert_eq!(zero.status.code(), Some(2));
    assert!(stderr(&zero).contains("--max-fail 0 would stop before the first test"), "{}", stderr(&zero));
    // As nextest's: --max-fail beside --fail-fast or --no-fail-fast is a usage error, not the last one winning.
    let both = fixture.cargo_ying(&["--fail-fast", "--max-fail=all"], &[]);
    assert_eq!(both.status.code(), Some(2), "{}", stderr(&both));
    assert!(stderr(&both).contains("cannot be used with"), "{}", stderr(&both));
}

#[test]
fn max_fail_immediate_stops_the_tests_running_too() {
    let fixture = Fixture::shared();
    // The test that hangs starts beside one that fails a second later: that failure stops it, long before its
    // timeout.
    let tests = "binary(crashes) & test(=hangs) | binary(hostile) & test(=prints_a_lot)";
    let args = ["-E", tests, "-j", "2", "--timeout", "120s", "--max-fail", "1:immediate"];
    let envs = [("YING_FIXTURE_HANG", "1"), ("FIXTURE_PRINT_PAUSE_MS", "1000"), ("FIXTURE_PRINT_FAIL", "1")];
    let output = fixture.cargo_ying(&args, &envs);
    let said = stderr(&output);
    assert_eq!(output.status.code(), TEST_FAILED, "{said}");
    let summary = summary(&fixture.target_dir());
    assert_eq!(entry(&summary, "hostile", "prints_a_lot")["outcome"], "failed", "{said}");
    let hangs = entry(&summary, "crashes", "hangs");
    assert_eq!(hangs["outcome"], "failed", "a test the run stopped fails, as nextest counts it: {said}");
    let reason = hangs["reason"].as_str().unwrap();
    assert!(reason.contains("--max-fail 1:immediate stops the tests running"), "{reason}");
    assert!(said.contains("CANCEL [") && said.contains("crashes hangs (stopped before it ended"), "{said}");
    assert!(!said.contains("--- leak-fixtures::crashes hangs: output ---"), "its output is left out: {said}");
    assert!(said.contains("--- leak-fixtures::hostile prints_a_lot: output ---"), "{said}");
}

#[test]
fn benches_are_built_in_test_mode_and_their_tests_run() {
    let fixture = Fixture::shared();
    let bench = "leak-fixtures::bench/tiny a_bench_targets_test";
    let named = fixture.cargo_ying(&["--bench", "tiny"], &[]);
    assert_eq!(named.status.code(), Some(0), "{}", stderr(&named));
    assert_eq!(ran(&stderr(&named)), [bench]);
    // As cargo's: every target that is benched by default, the library and the binaries with the benches.
    let all = fixture.cargo_ying(&["--benches"], &[]);
    assert_eq!(all.status.code(), Some(0), "{}", stderr(&all));
    let ran_all = ran(&stderr(&all));
    assert!(
        ran_all.iter().any(|test| test == bench) && ran_all.iter().any(|test| test.contains("bin/")),
        "{ran_all:?}"
    );
    assert!(!ran_all.iter().any(|test| test.contains("::leaks ")), "integration tests are not benched: {ran_all:?}");
    let default = fixture.cargo_ying(&["-E", "kind(bench)"], &[]);
    assert_eq!(default.status.code(), Some(4), "a plain run builds no bench: {}", stderr(&default));
}

#[test]
fn a_nextest_profile_gives_retries_the_timeout_and_fail_fast_and_flags_win_over_it() {
    let fixture = Fixture::new();
    std::fs::create_dir(fixture.path().join(".config")).unwrap();
    let config = "[profile.default]\nretries = 0\n\n[profile.ci]\nretries = { backoff = \"fixed\", count = 2 }\n\
                  slow-timeout = { period = \"1s\", terminate-after = 2 }\nfail-fast = false\n\
                  junit = { path = \"ci-junit.xml\" }\n";
    std::fs::write(fixture.path().join(".config/nextest.toml"), config).unwrap();
    let marks = tempfile::tempdir().unwrap();
    let flaky = [("FIXTURE_FLAKY_DIR", marks.path().to_str().unwrap())];

    let retried = fixture.cargo_ying(&["-P", "ci", "-E", "binary(flaky)"], &flaky);
    assert_eq!(retried.status.code(), Some(0), "the profile's retries: {}", stderr(&retried));
    assert!(stderr(&retried).contains("1 passed (1 flaky)"), "{}", stderr(&retried));
    // The profile's JUnit file, where nextest writes it: the profile's directory under the target directory.
    let junit = fixture.target_dir().join("nextest/ci/ci-junit.xml");
    let xml = std::fs::read_to_string(&junit).unwrap_or_else(|error| panic!("{}: {error}", junit.display()));
    assert!(xml.contains("<testsuites") && xml.contains("leak-fixtures::flaky"), "{xml}");
    super::xsd::assert_valid_junit(&junit);
    std::fs::remove_file(marks.path().join("attempted")).unwrap();
    let flag = fixture.cargo_ying(&["-P", "ci", "--retries", "0", "-E", "binary(flaky)"], &flaky);
    assert_eq!(flag.status.code(), TEST_FAILED, "--retries wins over the profile: {}", stderr(&flag));

    let hang = fixture
        .cargo_ying(&["-P", "ci", "--retries", "0", "--test", "crashes", "hangs"], &[("YING_FIXTURE_HANG", "1")]);
    assert_eq!(hang.status.code(), TEST_FAILED, "{}", stderr(&hang));
    let test = entry(&summary(&fixture.target_dir()), "crashes", "hangs").clone();
    assert_eq!(
        (test["outcome"].as_str(), test["reason"].as_str()),
        (Some("timed-out"), Some("timed out after 2.000s"))
    );

    let unknown = fixture.cargo_ying(&["-P", "nightly"], &[]);
    let said = stderr(&unknown);
    assert_eq!(unknown.status.code(), Some(96), "nextest's SETUP_ERROR: {said}");
    assert!(
        said.contains("failed to read the nextest profile `nightly` in")
            && said.contains(
                ".config/nextest.toml: profile `nightly` not found (known profiles: ci, default, default-miri)"
            ),
        "nextest's words, with the file: {said}"
    );
    std::fs::write(fixture.path().join(".config/nextest.toml"), "[profile.ci]\nretries = 1\n[profile.ci\n").unwrap();
    let malformed = fixture.cargo_ying(&["-P", "ci"], &[]);
    let said = stderr(&malformed);
    assert_eq!(malformed.status.code(), Some(96), "{said}");
    assert!(said.contains(".config/nextest.toml") && said.contains("line 3, column 12"), "{said}");
}

/// The suites of a JSON test list, each with its fields, and its tests (whether each is ignored, matches, and why
/// not); and its `test-count`.
fn test_list(json: &str) -> (u64, serde_json::Value) {
    let list: serde_json::Value = serde_json::from_str(json).unwrap_or_else(|error| panic!("{error}: {json}"));
    (list["test-count"].as_u64().unwrap(), list["rust-suites"].clone())
}

/// The build's fields of a JSON list, the platforms included.
fn build_meta(list: &serde_json::Value) -> serde_json::Value {
    list["rust-build-meta"].clone()
}

#[test]
fn list_message_format_json_is_nextests_test_list() {
    let fixture = Fixture::shared();
    // The custom harness cannot list its tests: nextest is kept from asking, as cargo ying never does.
    let not_custom = "not binary(custom_harness)";
    let with_leak = format!("{not_custom} & test(leak)");
    for args in [
        &["-E", not_custom][..],
        &["-E", &with_leak],
        &["-E", not_custom, "--partition", "hash:2/3"],
        &["-E", not_custom, "--run-ignored", "only", "box"],
    ] {
        let nextest = fixture.nextest(&[&["list", "--message-format", "json"][..], args].concat());
        assert_eq!(nextest.status.code(), Some(0), "{}", stderr(&nextest));
        let ours = fixture.subcommand("list", &[&["-T", "json"][..], args].concat(), &[]).output().unwrap();
        assert_eq!(ours.status.code(), Some(0), "{}", stderr(&ours));
        let (ours, theirs) = (stdout(&ours), stdout(&nextest));
        // Every suite with every field, and every test with its match and nextest's reason for a mismatch.
        assert_eq!(test_list(&ours), test_list(&theirs), "{args:?}");
        let json: serde_json::Value = serde_json::from_str(&ours).unwrap();
        assert!(json.to_string().contains("\"mismatch\"") || args.len() == 2, "{args:?}");
        let nextest: serde_json::Value = serde_json::from_str(&theirs).unwrap();
        assert_eq!(build_meta(&json), build_meta(&nextest), "{args:?}");
    }

    let binaries = fixture.subcommand("list", &["--list-type", "binaries-only", "-T", "json-pretty"], &[]).output();
    let binaries: serde_json::Value = serde_json::from_str(&stdout(&binaries.unwrap())).unwrap();
    let nextest = fixture.nextest(&["list", "--list-type", "binaries-only", "--message-format", "json"]);
    let nextest: serde_json::Value = serde_json::from_str(&stdout(&nextest)).unwrap();
    assert_eq!(binaries["rust-binaries"], nextest["rust-binaries"], "every binary, its own harness's too");
    assert_eq!(build_meta(&binaries), build_meta(&nextest));
    assert_eq!(binaries["rust-binaries"]["leak-fixtures::leaks"]["kind"], "test");

    // The listings for people, test for test and in nextest's order.
    for format in ["human", "oneline"] {
        let ours = fixture.subcommand("list", &["-T", format, "-E", not_custom], &[]).output().unwrap();
        let nextest = fixture.nextest(&["list", "-T", format, "-E", not_custom]);
        assert_eq!(stdout(&ours), stdout(&nextest), "{format}");
    }
}
