//! Nothing dropped silently: the fixture's doctests and its `harness = false` test (whose main blocks forever when
//! asked to `--list`) are named as not run, with the command that runs them, in the terminal and in summary.json,
//! and the custom harness is never started.

use super::{Fixture, summary};
use std::time::{Duration, Instant};

/// Runs `cargo ying test args` on `fixture`: its exit code and standard error. A custom harness asked to `--list`
/// never returns: past a deadline (the build may take minutes) the run is killed and the test fails.
fn run_without_listing_the_custom_harness(fixture: &Fixture, args: &[&str]) -> (Option<i32>, String) {
    // To a file: a pipe nobody reads while waiting could fill and stall the run.
    let log = fixture.scratch("stderr.log");
    let mut command = fixture.command(args, &[]);
    command.stdout(std::process::Stdio::null()).stderr(std::fs::File::create(&log).unwrap());
    // A group of its own, so that a stuck run is killed with the custom harness it started.
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command.spawn().unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(600) {
            #[cfg(unix)]
            // SAFETY: kill(2) with the negated id of the group the child leads; it touches no memory.
            unsafe {
                libc::kill(-(child.id() as i32), libc::SIGKILL);
            }
            child.kill().unwrap();
            panic!("cargo ying test did not finish: it started the custom harness with --list");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    (child.wait().unwrap().code(), std::fs::read_to_string(&log).unwrap())
}

#[test]
fn doctests_and_custom_harness_targets_are_named_with_the_command_that_runs_them() {
    let fixture = Fixture::shared();
    let (code, stderr) = run_without_listing_the_custom_harness(&fixture, &["clean", "--", "--exact"]);
    assert_eq!(code, Some(0), "{stderr}");

    let doctests = "NOT RUN leak-fixtures doctests (doctests are built and run by rustdoc, not listed by a test \
                    binary): run with `cargo test --doc -p leak-fixtures`";
    let custom = "NOT RUN leak-fixtures::custom_harness (harness = false: its own main, which cannot list its \
                  tests): run with `cargo test -p leak-fixtures --test custom_harness`";
    for line in [doctests, custom] {
        // Under the Starting line, and again right above the Summary, after the tables.
        assert_eq!(stderr.lines().filter(|shown| shown.trim_start() == line).count(), 2, "{line}\n{stderr}");
    }
    let starting = stderr.find("Starting").unwrap();
    let summary_line = stderr.find("Summary [").unwrap();
    let first = stderr.find(doctests).unwrap();
    let (again, reports) = (stderr.rfind(doctests).unwrap(), stderr.find("Reports").unwrap());
    assert!(starting < first && reports < again && again < stderr.rfind(custom).unwrap(), "{stderr}");
    let after_custom = stderr.rfind(custom).unwrap() + custom.len();
    assert!(stderr[after_custom..summary_line].trim().is_empty(), "the Summary follows: {stderr}");
    assert!(stderr.contains("Starting 1 test across 1 binary"), "the custom harness is no test binary: {stderr}");

    let summary = summary(&fixture.target_dir());
    let not_run = summary["not_run"].as_array().unwrap();
    let fields = |entry: &serde_json::Value| {
        ["package", "kind", "target", "command"].map(|key| entry[key].as_str().unwrap().to_owned())
    };
    assert_eq!(
        not_run.iter().map(fields).collect::<Vec<_>>(),
        [
            ["leak-fixtures", "doctest", "leak_fixtures", "cargo test --doc -p leak-fixtures"],
            ["leak-fixtures", "test", "custom_harness", "cargo test -p leak-fixtures --test custom_harness"],
        ]
    );
    assert!(not_run.iter().all(|entry| !entry["reason"].as_str().unwrap().is_empty()));
    assert!(summary["tests"].as_array().unwrap().iter().all(|test| test["target"] != "custom_harness"));
}

#[test]
fn selecting_targets_leaves_doctests_out_as_cargo_test_does() {
    let fixture = Fixture::shared();
    let args = ["--test", "leaks", "--test", "custom_harness", "clean", "--", "--exact"];
    let (code, stderr) = run_without_listing_the_custom_harness(&fixture, &args);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("doctests"), "{stderr}");
    assert!(stderr.contains("NOT RUN leak-fixtures::custom_harness"), "{stderr}");
}

#[test]
fn a_library_without_doctests_is_not_said_to_have_doctests_not_run() {
    let fixture = Fixture::new();
    let lib = fixture.path().join("src/lib.rs");
    let source = std::fs::read_to_string(&lib).unwrap();
    // The library's one Rust block made a block of text, which rustdoc does not run.
    let without = source.replacen("/// ```\n/// assert_eq!", "/// ```text\n/// assert_eq!", 1);
    assert_ne!(without, source);
    std::fs::write(&lib, without).unwrap();
    let (code, stderr) = run_without_listing_the_custom_harness(&fixture, &["clean", "--", "--exact"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("doctests"), "{stderr}");
    assert!(stderr.contains("NOT RUN leak-fixtures::custom_harness"), "{stderr}");
    let summary = summary(&fixture.target_dir());
    assert!(summary["not_run"].as_array().unwrap().iter().all(|entry| entry["kind"] != "doctest"), "{summary}");
}

#[test]
fn selecting_only_a_custom_harness_says_why_there_is_nothing_to_run() {
    let fixture = Fixture::shared();
    let (code, stderr) = run_without_listing_the_custom_harness(&fixture, &["--test", "custom_harness"]);
    assert_eq!(code, Some(4), "{stderr}");
    let not_run = stderr.find("NOT RUN leak-fixtures::custom_harness (harness = false").expect(&stderr);
    assert!(not_run < stderr.find("error: no tests to run").unwrap(), "{stderr}");
}
