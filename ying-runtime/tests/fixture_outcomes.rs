//! Runs the leak-test fixture workspace (`fixtures/leak-tests`) under plain `cargo test` and checks every test's
//! outcome, and the key lines of every failure, against the model of what each fixture test does
//! (`fixtures/leak-tests/outcomes.rs`, whose `cargo ying test` side the end-to-end tests check); the failure messages
//! as a user sees them are snapshotted (paths and thread ids redacted). The same model is checked under the other
//! profiles a project runs its tests with: `debug = "line-tables-only"`, `cargo test --release` (no debug
//! information) and a release build with line tables.
//!
//! Each profile builds the fixture into its own directory under `target/` of this workspace (`fixtures`,
//! `fixtures-lines`, `fixtures-release`, `fixtures-release-lines`), shared between runs, with a cleaned
//! environment.

mod fixture_cargo;

use std::collections::BTreeMap;
use std::process::Command;

#[path = "../../fixtures/leak-tests/outcomes.rs"]
#[expect(dead_code, reason = "this suite reads the model's `cargo test` side; the end-to-end tests read the other")]
mod outcomes;

use outcomes::CargoTest;

/// The binaries of the fixture this suite runs under `cargo test`, by their ids in the model.
const LEAKS: &str = "leak-fixtures::leaks";
const NESTED: &str = "leak-fixtures::nested";

/// A profile the fixture is built with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Profile {
    /// Plain `cargo test`: full debug information, unoptimised.
    Debug,
    /// `debug = "line-tables-only"`: bare names, files and lines.
    LineTables,
    /// `cargo test --release`: optimised, no debug information.
    Release,
    /// `--release` with `debug = "line-tables-only"`.
    ReleaseLineTables,
}

impl Profile {
    /// The directory under `target/` the fixture builds into.
    fn target(self) -> &'static str {
        match self {
            Profile::Debug => "fixtures",
            Profile::LineTables => "fixtures-lines",
            Profile::Release => "fixtures-release",
            Profile::ReleaseLineTables => "fixtures-release-lines",
        }
    }

    fn cargo_args(self) -> &'static [&'static str] {
        match self {
            Profile::Debug | Profile::LineTables => &[],
            Profile::Release | Profile::ReleaseLineTables => &["--release"],
        }
    }

    fn envs(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Profile::Debug | Profile::Release => &[],
            Profile::LineTables => &[("CARGO_PROFILE_DEV_DEBUG", "line-tables-only")],
            Profile::ReleaseLineTables => &[("CARGO_PROFILE_RELEASE_DEBUG", "line-tables-only")],
        }
    }

    /// A line of the model as this profile must show it. Outcomes, figures and the functions a site names are
    /// the same under every profile; where sites are located differs: without debug information a site has no
    /// file and line (`leaks::box_leak`), and in an optimised build the line may be another function's of
    /// identical code, which the optimiser merged (`box_leak` and `budget_fails` leak alike), so only the file is
    /// required.
    fn shows(self, line: &str) -> String {
        let is_site = line.starts_with("      ");
        match (self, line.find(" at ")) {
            (Profile::Release, Some(at)) if is_site => line[..at].to_owned(),
            (Profile::ReleaseLineTables, Some(_)) if is_site => {
                line[..=line.rfind(':').unwrap_or(line.len() - 1)].to_owned()
            }
            _ => line.to_owned(),
        }
    }
}

/// The result of one `cargo test` run of a fixture test binary.
struct Run {
    outcomes: BTreeMap<String, String>,
    failures: BTreeMap<String, String>,
    stdout: String,
}

/// Runs `cargo test --test <binary> -- <args>` in the fixture workspace with a cleaned environment.
fn cargo_test(binary: &str, args: &[&str], envs: &[(&str, &str)]) -> Run {
    cargo_test_with(Profile::Debug, binary, args, envs)
}

/// Runs `cargo test --test <binary> -- <args>` in the fixture workspace, built with `profile`.
fn cargo_test_with(profile: Profile, binary: &str, args: &[&str], envs: &[(&str, &str)]) -> Run {
    let target_dir = format!("target/{}", profile.target());
    let mut command = fixture_cargo::cargo_test("fixtures/leak-tests/Cargo.toml", &target_dir);
    command
        .args(["--test", binary])
        .args(profile.cargo_args())
        .arg("--")
        .args(args)
        .envs(profile.envs().iter().copied())
        .envs(envs.iter().copied());
    let output = command.output().expect("cargo runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stdout.contains("test result:"), "the fixture did not run:\n{stderr}");
    Run { outcomes: outcomes(&stdout), failures: failures(&stdout), stdout }
}

/// `test NAME ... ok` lines (libtest's pretty format) by test name.
fn outcomes(stdout: &str) -> BTreeMap<String, String> {
    stdout
        .lines()
        .filter_map(|line| line.strip_prefix("test ")?.split_once(" ... "))
        .map(|(name, outcome)| (name.trim_end_matches(" - should panic").to_owned(), outcome.to_owned()))
        .collect()
}

/// The captured output of each failed test (`---- NAME stdout ----` sections).
fn failures(stdout: &str) -> BTreeMap<String, String> {
    let mut sections = BTreeMap::new();
    let mut current: Option<(String, Vec<&str>)> = None;
    for line in stdout.lines() {
        let header = line.strip_prefix("---- ").and_then(|rest| rest.strip_suffix(" stdout ----"));
        if (header.is_some() || line == "failures:")
            && let Some((name, lines)) = current.take()
        {
            sections.insert(name, lines.join("\n").trim().to_owned());
        }
        match (header, current.as_mut()) {
            (Some(name), _) => current = Some((name.to_owned(), Vec::new())),
            (None, Some((_, lines))) => lines.push(line),
            (None, None) => {}
        }
    }
    sections
}

/// Redacts what differs between machines and runs: the repository's path, the toolchain's source path, thread
/// ids.
fn redact(text: &str) -> String {
    let root = fixture_cargo::repository().display().to_string();
    let mut out = Vec::new();
    for line in text.lines() {
        let mut line = line.replace(&root, "[REPO]");
        if let Some(start) = line.find("/rustc/") {
            let end = line[start + 7..].find('/').map_or(line.len(), |i| start + 7 + i);
            line.replace_range(start..end, "[RUSTC]");
        }
        if let (Some(open), Some(close)) = (line.find("' ("), line.find(") panicked at ")) {
            line.replace_range(open + 1..close + 1, "");
        }
        out.push(line);
    }
    out.join("\n")
}

fn check_failure(name: &str, section: &str, expected: &[&str]) {
    check_failure_with(Profile::Debug, name, section, expected);
}

fn check_failure_with(profile: Profile, name: &str, section: &str, expected: &[&str]) {
    for line in expected {
        let line = profile.shows(line);
        assert!(
            section.lines().any(|actual| actual.starts_with(&line)),
            "`{name}` should report a line starting with\n{line}\nbut reported ({profile:?}):\n{section}"
        );
    }
}

/// Checks a `cargo test` run of the fixture's binary `binary` (its id in the model) built with `profile` against
/// the model: it listed every test the model has for it and nothing else, and each did what the model says.
fn check_run(profile: Profile, binary: &str, run: &Run) {
    let mut modelled: Vec<&str> = outcomes::of(binary).map(|test| test.name).collect();
    let mut listed: Vec<&str> = run.outcomes.keys().map(String::as_str).collect();
    modelled.sort_unstable();
    listed.sort_unstable();
    assert_eq!(listed, modelled, "every fixture test is modelled, and nothing else ran\n{}", run.stdout);

    for test in outcomes::of(binary) {
        let (name, outcome) = (test.name, &run.outcomes[test.name]);
        match test.cargo_test {
            CargoTest::Pass | CargoTest::PassThreadAttributed(_) => assert_eq!(
                outcome,
                "ok",
                "`{name}` should pass ({profile:?}):\n{}",
                run.failures.get(name).map_or("", |s| s)
            ),
            CargoTest::Fail(lines) => {
                assert_eq!(outcome, "FAILED", "`{name}` should fail ({profile:?})");
                check_failure_with(profile, name, &run.failures[name], lines);
            }
            CargoTest::IgnoredFailsAlone(_) => assert!(outcome.starts_with("ignored"), "`{name}`: {outcome}"),
            CargoTest::EndsTheProcess(_) | CargoTest::NotChecked => {
                panic!("`{name}` is not modelled as a test that reports under `cargo test`")
            }
        }
    }
}

/// Runs each ignored test of `binary` (the model's `IgnoredFailsAlone`) alone, and checks it fails with its lines.
fn check_ignored_alone(binary: &str) {
    let target = binary.strip_prefix("leak-fixtures::").expect("an integration test's id");
    for test in outcomes::of(binary) {
        let CargoTest::IgnoredFailsAlone(lines) = test.cargo_test else { continue };
        let name = test.name;
        let run = cargo_test(target, &["--ignored", "--exact", name], &[]);
        assert_eq!(run.outcomes[name], "FAILED", "`{name}` should fail:\n{}", run.stdout);
        check_failure(name, &run.failures[name], lines);
    }
}

/// Runs the fixture's leak tests built with `profile` and checks each against the model.
fn check_the_model(profile: Profile) -> Run {
    let run = cargo_test_with(profile, "leaks", &["--test-threads=4"], &[]);
    check_run(profile, LEAKS, &run);
    run
}

#[test]
fn every_fixture_has_its_modelled_outcome() {
    let run = check_the_model(Profile::Debug);

    let report: Vec<String> =
        run.failures.iter().map(|(name, section)| format!("---- {name}\n{}\n", redact(section))).collect();
    insta::assert_snapshot!("leak_test_failures", report.join("\n"));
}

#[test]
fn line_tables_only_gives_the_same_outcomes() {
    check_the_model(Profile::LineTables);
}

#[test]
fn a_release_build_gives_the_same_outcomes() {
    check_the_model(Profile::Release);
}

#[test]
fn a_release_build_with_line_tables_gives_the_same_outcomes() {
    check_the_model(Profile::ReleaseLineTables);
}

#[test]
fn a_leak_in_a_nested_measure_fails_its_leak_test() {
    let run = cargo_test("nested", &[], &[]);
    check_run(Profile::Debug, NESTED, &run);
    check_ignored_alone(NESTED);
}

#[test]
fn process_attribution_catches_the_helper_thread_leak() {
    let test = outcomes::find(LEAKS, "helper_thread_leak_process");
    assert!(matches!(test.cargo_test, CargoTest::IgnoredFailsAlone(_)), "modelled as ignored, failing alone");
    check_ignored_alone(LEAKS);
}

#[test]
fn the_environment_switches_the_default_to_process_attribution() {
    let CargoTest::PassThreadAttributed(lines) = outcomes::find(LEAKS, "helper_thread_leak").cargo_test else {
        panic!("helper_thread_leak is modelled as passing under thread attribution only");
    };
    let run = cargo_test("leaks", &["--exact", "helper_thread_leak"], &[("YING_ATTRIBUTION", "process")]);
    assert_eq!(run.outcomes["helper_thread_leak"], "FAILED");
    check_failure("helper_thread_leak", &run.failures["helper_thread_leak"], lines);
}

#[test]
fn a_binary_without_the_allocator_fails_with_the_lines_to_add() {
    let run = cargo_test("no_allocator", &[], &[]);
    check_run(Profile::Debug, "leak-fixtures::no_allocator", &run);
}

#[test]
fn a_process_that_exits_inside_a_leak_test_fails() {
    ends_the_process("exits", "exits_after_leaking", "std::process::exit(0) in the body passed");
}

/// A body that runs another program in its own process (`exec` of `true`, whose exit code 0 would be the test
/// binary's) fails, naming the test; the child process it spawned first ran.
#[test]
fn a_process_that_execs_inside_a_leak_test_fails() {
    ends_the_process("execs", "execs_after_leaking", "an exec of `true` in the body passed");
}

/// Runs the fixture's test binary `target` under `cargo test`: it fails, with the lines the model gives `test`.
fn ends_the_process(target: &str, test: &str, passed: &str) {
    let root = fixture_cargo::repository();
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command
        .args(["test", "--test", target, "--manifest-path"])
        .arg(root.join("fixtures/leak-tests/Cargo.toml"))
        .env("CARGO_TARGET_DIR", root.join("target/fixtures"))
        .env("CARGO_TERM_COLOR", "never")
        .env_remove("YING_REPORT_DIR")
        .env_remove("YING_RUN_TOKEN");
    let output = command.output().expect("cargo runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(101), "{passed}:\n{stderr}");
    let CargoTest::EndsTheProcess(lines) = outcomes::find(&format!("leak-fixtures::{target}"), test).cargo_test else {
        panic!("{test} is modelled as ending its process");
    };
    for line in lines {
        assert!(stderr.contains(line), "{line}\n{stderr}");
    }
}
