//! Runs the leak-test fixture workspace (`fixtures/leak-tests`) under plain `cargo test` and checks every test's
//! outcome, and the key lines of every failure, against a model of what each fixture does; the failure messages
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

/// What a fixture test must do.
enum Expect {
    Pass,
    /// Fails, and its failure output contains each of these lines (or line beginnings).
    Fail(&'static [&'static str]),
}

use Expect::{Fail, Pass};

/// The model: every test of `tests/leaks.rs` and what it must do under plain `cargo test`.
const LEAKS: &[(&str, Expect)] = &[
    ("clean", Pass),
    (
        "box_leak",
        Fail(&[
            "ying: leak test `box_leak` exceeded its budget",
            "  max_retained = 0 B: retained 1000 B in 1 block, 1000 B over",
            "      leaks::box_leak at tests/leaks.rs:22",
        ]),
    ),
    (
        "mem_forget",
        Fail(&[
            "  max_retained = 0 B: retained 2.0 KiB (2048 bytes) in 1 block, 2.0 KiB (2048 bytes) over",
            "      leaks::mem_forget at tests/leaks.rs:27",
        ]),
    ),
    (
        "rc_cycle",
        Fail(&[
            "  max_retained = 0 B: retained 64 B in 2 blocks, 64 B over",
            "      leaks::rc_cycle at tests/leaks.rs:",
        ]),
    ),
    (
        "session_leak",
        Fail(&[
            "  max_retained = 0 B: retained 9 B in 1 block, 9 B over",
            "      leak_fixtures::open_session at src/lib.rs:",
            "      leaks::session_leak at tests/leaks.rs:",
        ]),
    ),
    (
        "static_cache_growth",
        Fail(&[
            "  max_growth_per_iteration = 0 B: the heap grew in each of 5 measured runs, by at least 16 B",
            "      leak_fixtures::remember_forever at src/lib.rs:",
        ]),
    ),
    ("lazy_init_with_warmup", Pass),
    ("bounded_cache_in_steady_state", Pass),
    ("budget_passes", Pass),
    ("budget_fails", Fail(&["  max_retained = 512 B: retained 1000 B in 1 block, 488 B over"])),
    (
        "peak_fails",
        Fail(&[
            "  max_peak = 1.0 MiB (1048576 bytes): peaked at 2.0 MiB (2097152 bytes), 1.0 MiB (1048576 bytes) over",
        ]),
    ),
    ("allocations_fail", Fail(&["  max_allocations = 10: made 100 allocations, 90 over"])),
    ("printing", Pass),
    ("should_panic", Pass),
    ("result_ok", Pass),
    ("result_err", Fail(&["Error: ParseIntError { kind: InvalidDigit }"])),
    ("tokio_outermost", Pass),
    ("tokio_innermost", Pass),
    ("tokio_multi_thread", Pass),
    (
        "tokio_leak",
        Fail(&[
            "  max_retained = 0 B: retained 100 B in 1 block, 100 B over",
            "      leaks::tokio_leak at tests/leaks.rs:",
        ]),
    ),
    // Thread attribution counts the test's own thread: a leak on a helper thread it did not hand its scope to is
    // caught only by process attribution (below).
    ("helper_thread_leak", Pass),
    ("allowed_leak", Pass),
    ("thread_local_value", Pass),
    (
        "leak_in_thread_local_access",
        Fail(&[
            "  max_retained = 0 B: retained 8 B in 1 block, 8 B over",
            "  (not counted: ",
            "      leaks::leak_in_thread_local_access at tests/leaks.rs:169",
        ]),
    ),
    (
        "two_sites_in_one_function",
        Fail(&[
            "  max_retained = 0 B: retained 300 B in 2 blocks, 300 B over",
            "      leaks::two_sites_in_one_function at tests/leaks.rs:175",
            "      leaks::two_sites_in_one_function at tests/leaks.rs:176",
        ]),
    ),
];

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

/// The model of `tests/nested.rs`: leak tests whose bodies call `ying::measure`.
const NESTED: &[(&str, Expect)] = &[
    (
        "nested_measure_leak",
        Fail(&[
            "ying: leak test `nested_measure_leak` exceeded its budget",
            "  max_retained = 0 B: retained 4.0 KiB (4096 bytes) in 1 block, 4.0 KiB (4096 bytes) over",
            "      nested::nested_measure_leak",
        ]),
    ),
    ("nested_measure_clean", Pass),
];

/// The process-attributed tests of `tests/nested.rs` (ignored; run one at a time): each leaks 4 KiB.
const NESTED_PROCESS: &[(&str, &str)] = &[
    ("nested_measure_leak_process", "      nested::nested_measure_leak_process"),
    ("stale_handle_leak_process", "      nested::stale_handle_leak_process"),
];

const HELPER_THREAD_LEAK: &[&str] =
    &["  max_retained = 0 B: retained 512 B in 1 block, 512 B over", "      leaks::helper_thread_leak"];

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

/// Runs the fixture's leak tests built with `profile` and checks each against the model.
fn check_the_model(profile: Profile) -> Run {
    let run = cargo_test_with(profile, "leaks", &["--test-threads=4"], &[]);
    let mut modelled: Vec<&str> = LEAKS.iter().map(|(name, _)| *name).collect();
    modelled.push("helper_thread_leak_process");
    let mut listed: Vec<&str> = run.outcomes.keys().map(String::as_str).collect();
    modelled.sort_unstable();
    listed.sort_unstable();
    assert_eq!(listed, modelled, "every fixture test is modelled, and nothing else ran\n{}", run.stdout);

    for (name, expect) in LEAKS {
        let outcome = &run.outcomes[*name];
        match expect {
            Pass => assert_eq!(
                outcome,
                "ok",
                "`{name}` should pass ({profile:?}):\n{}",
                run.failures.get(*name).map_or("", |s| s)
            ),
            Fail(lines) => {
                assert_eq!(outcome, "FAILED", "`{name}` should fail ({profile:?})");
                check_failure_with(profile, name, &run.failures[*name], lines);
            }
        }
    }
    assert!(run.outcomes["helper_thread_leak_process"].starts_with("ignored"));
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
    let mut listed: Vec<&str> = run.outcomes.keys().map(String::as_str).collect();
    let mut modelled: Vec<&str> = NESTED.iter().map(|(name, _)| *name).collect();
    modelled.extend(NESTED_PROCESS.iter().map(|(name, _)| *name));
    listed.sort_unstable();
    modelled.sort_unstable();
    assert_eq!(listed, modelled, "every fixture test is modelled, and nothing else ran\n{}", run.stdout);
    for (name, expect) in NESTED {
        let outcome = &run.outcomes[*name];
        match expect {
            Pass => assert_eq!(outcome, "ok", "`{name}` should pass:\n{}", run.failures.get(*name).map_or("", |s| s)),
            Fail(lines) => {
                assert_eq!(outcome, "FAILED", "`{name}` should fail");
                check_failure(name, &run.failures[*name], lines);
            }
        }
    }
    for (name, site) in NESTED_PROCESS {
        let run = cargo_test("nested", &["--ignored", "--exact", name], &[]);
        assert_eq!(run.outcomes[*name], "FAILED", "`{name}` should fail:\n{}", run.stdout);
        let retained = "  max_retained = 0 B: retained 4.0 KiB (4096 bytes) in 1 block, 4.0 KiB (4096 bytes) over";
        check_failure(name, &run.failures[*name], &[retained, site]);
    }
}

#[test]
fn process_attribution_catches_the_helper_thread_leak() {
    let run = cargo_test("leaks", &["--ignored", "--exact", "helper_thread_leak_process"], &[]);
    assert_eq!(run.outcomes["helper_thread_leak_process"], "FAILED");
    check_failure("helper_thread_leak_process", &run.failures["helper_thread_leak_process"], &HELPER_THREAD_LEAK[..1]);
}

#[test]
fn the_environment_switches_the_default_to_process_attribution() {
    let run = cargo_test("leaks", &["--exact", "helper_thread_leak"], &[("YING_ATTRIBUTION", "process")]);
    assert_eq!(run.outcomes["helper_thread_leak"], "FAILED");
    check_failure("helper_thread_leak", &run.failures["helper_thread_leak"], HELPER_THREAD_LEAK);
}

#[test]
fn a_binary_without_the_allocator_fails_with_the_lines_to_add() {
    let run = cargo_test("no_allocator", &[], &[]);
    assert_eq!(run.outcomes["without_the_allocator"], "FAILED");
    check_failure(
        "without_the_allocator",
        &run.failures["without_the_allocator"],
        &[
            "ying: leak test `without_the_allocator` cannot measure anything: the global allocator of this test binary is not ying's.",
            "#[global_allocator]",
            "static ALLOC: ying::YingProfiler = ying::YingProfiler::new();",
        ],
    );
}

#[test]
fn a_process_that_exits_inside_a_leak_test_fails() {
    let root = fixture_cargo::repository();
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command
        .args(["test", "--test", "exits", "--manifest-path"])
        .arg(root.join("fixtures/leak-tests/Cargo.toml"))
        .env("CARGO_TARGET_DIR", root.join("target/fixtures"))
        .env("CARGO_TERM_COLOR", "never")
        .env_remove("YING_REPORT_DIR")
        .env_remove("YING_RUN_TOKEN");
    let output = command.output().expect("cargo runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "std::process::exit(0) in the body passed:\n{stderr}");
    assert!(
        stderr.contains(
            "ying: the process exited while leak test `exits_after_leaking` was running, so it could not report \
             what it retained"
        ),
        "{stderr}"
    );
}
