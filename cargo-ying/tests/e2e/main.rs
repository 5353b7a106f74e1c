//! End to end: the built `cargo-ying` on a copy of a fixture workspace (`fixtures/leak-tests`, or
//! `fixtures/plain-tests` for `--measure all`) with a cleaned environment, each test with a copy and a target
//! directory of its own (made from the fixture's seed, built once: see [`seed`]), so that the tests run side by side
//! and none reads what another left. Checks outcomes, exit codes, summary.json, reports and SVGs, and the full run's
//! result lines against the fixture's model of outcomes (`fixtures/leak-tests/outcomes.rs`); output is snapshotted
//! after redacting durations.
//!
//! One test binary: its modules share the harness below and the seeds.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod ci;
mod cycles;
mod files;
mod frames;
mod hostile;
mod html;
mod junit;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod measure_all;
mod nextest;
mod not_run;
mod options;
#[path = "../../../fixtures/leak-tests/outcomes.rs"]
#[expect(dead_code, reason = "these tests read the model's `cargo ying test` side; the runtime's read the other")]
mod outcomes;
mod profiles;
mod readme;
mod seed;
#[cfg(unix)]
mod setup;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod site_types;
mod tasks;
mod trust;
mod xsd;

/// The exit code of a run in which a test failed.
const TEST_FAILED: Option<i32> = Some(ying_report::exit_code::TEST_FAILED as i32);
/// The exit code of a run whose tests all passed and whose memory regressed against the baseline.
const REGRESSED: Option<i32> = Some(ying_report::exit_code::MEMORY_REGRESSED as i32);

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// A fixture workspace for one test, with a target directory of its own holding the fixture's build (see [`seed`]):
/// a copy of its own, which the test may change (its package built anew in it), or the seed's workspace itself,
/// shared with the other tests that only read it (nothing built).
struct Fixture {
    place: Place,
}

/// Where a [`Fixture`] is.
enum Place {
    /// A copy of the test's own: the workspace at its root, the target directory `target/` in it.
    Copy(tempfile::TempDir),
    /// The seed's workspace, shared.
    Shared(seed::Shared),
}

impl Fixture {
    /// A copy of `fixtures/plain-tests`, a suite with no ying dependency.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn plain() -> Self {
        Self { place: Place::Copy(seed::copy(seed::Workspace::Plain)) }
    }

    /// `fixtures/plain-tests`, shared with the other tests that only read it.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn plain_shared() -> Self {
        Self { place: Place::Shared(seed::shared(seed::Workspace::Plain)) }
    }

    /// A copy of `fixtures/leak-tests`.
    fn new() -> Self {
        Self { place: Place::Copy(seed::copy(seed::Workspace::Leaks)) }
    }

    /// `fixtures/leak-tests`, shared with the other tests that only read it: the test writes nothing into
    /// [`path`](Self::path) (no baseline saved there, no source changed), else it fails as it ends.
    fn shared() -> Self {
        Self { place: Place::Shared(seed::shared(seed::Workspace::Leaks)) }
    }

    /// The workspace.
    fn path(&self) -> &Path {
        match &self.place {
            Place::Copy(dir) => dir.path(),
            Place::Shared(shared) => &shared.workspace,
        }
    }

    /// A path for a file of the test's own beside the workspace (a log, a pid file, a step summary): in a shared
    /// workspace it would be written into the seed the other tests read.
    fn scratch(&self, name: &str) -> PathBuf {
        match &self.place {
            Place::Copy(dir) => dir.path().join(name),
            Place::Shared(shared) => shared.dir.path().join(name),
        }
    }

    /// The test's own target directory, which its runs build into and write `ying/` under.
    fn target_dir(&self) -> PathBuf {
        match &self.place {
            Place::Copy(dir) => dir.path().join("target"),
            Place::Shared(shared) => shared.dir.path().join("target"),
        }
    }

    /// Makes `leaks::budget_passes` retain 3000 bytes instead of 1000, still within its own budget of 4 KiB: it
    /// passes, and regresses against a baseline saved before. Returns `tests/leaks.rs` as it was.
    fn grow_budget_passes(&self) -> String {
        let leaks = self.path().join("tests/leaks.rs");
        let original = std::fs::read_to_string(&leaks).unwrap();
        let grown = original.replacen(
            "fn budget_passes() {\n    Box::leak(black_box(Box::new([0u8; 1000])));",
            "fn budget_passes() {\n    Box::leak(black_box(Box::new([0u8; 3000])));",
            1,
        );
        assert_ne!(grown, original);
        std::fs::write(&leaks, grown).unwrap();
        original
    }

    /// Runs `cargo-ying ying test --manifest-path <copy> <args>` with a cleaned environment.
    fn cargo_ying(&self, args: &[&str], envs: &[(&str, &str)]) -> Output {
        self.command(args, envs).output().unwrap()
    }

    /// The command [`cargo_ying`](Self::cargo_ying) runs, to change further before running it.
    fn command(&self, args: &[&str], envs: &[(&str, &str)]) -> Command {
        self.subcommand("test", args, envs)
    }

    /// `cargo-ying ying <subcommand> --manifest-path <copy> <args>` with a cleaned environment.
    fn subcommand(&self, subcommand: &str, args: &[&str], envs: &[(&str, &str)]) -> Command {
        let mut command = cleaned(env!("CARGO_BIN_EXE_cargo-ying"), &self.target_dir());
        command.arg("ying").arg(subcommand).arg("--manifest-path").arg(self.path().join("Cargo.toml")).args(args);
        command.envs(envs.iter().copied());
        command
    }

    /// `cargo nextest <args> --manifest-path <copy>`, with the environment and target directory of cargo ying's
    /// runs: the same build, for comparing with the runner cargo ying follows.
    fn nextest(&self, args: &[&str]) -> Output {
        let mut command = cleaned("cargo", &self.target_dir());
        command.arg("nextest").args(args).arg("--manifest-path").arg(self.path().join("Cargo.toml"));
        command.output().unwrap()
    }
}

/// The `PATH` with the built cargo-ying's directory first, as an installed cargo-ying is on it: nextest's profile
/// `ying` runs `cargo-ying` as its wrapper script.
fn path_with_cargo_ying() -> std::ffi::OsString {
    let dir = Path::new(env!("CARGO_BIN_EXE_cargo-ying")).parent().unwrap().to_path_buf();
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(std::iter::once(dir).chain(std::env::split_paths(&path))).unwrap()
}

/// `program` with a cleaned environment: none of cargo's variables but its home and toolchain, none of ying's, of
/// libtest's, of nextest's or of GitHub's; the target directory `target`, no colour, no backtraces, and `CI=true`.
/// git looks for no repository above the fixtures' workspaces: a copy or a seed is in none, as in the system's
/// temporary directory (cargo ying names annotated files from the repository's root).
fn cleaned(program: impl AsRef<std::ffi::OsStr>, target: &Path) -> Command {
    let mut command = Command::new(program);
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        let keep = ["CARGO_HOME", "RUSTUP_HOME", "RUSTUP_TOOLCHAIN"].contains(&key.as_str());
        let ours = key.starts_with("YING_")
            || key.starts_with("RUST_TEST_")
            || key.starts_with("GITHUB_")
            || key.starts_with("NEXTEST_");
        if (key.starts_with("CARGO") && !keep) || ours {
            command.env_remove(&key);
        }
    }
    command
        .env("CARGO_TARGET_DIR", target)
        .env("CARGO_TERM_COLOR", "never")
        .env("RUST_BACKTRACE", "0")
        .env("CI", "true")
        .env("GIT_CEILING_DIRECTORIES", seed::git_ceiling())
        .env("PATH", path_with_cargo_ying());
    command
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The per-test result lines (`PASS [ 0.123s] package::binary test`), durations redacted, sorted: tests run in
/// parallel, so they finish in any order.
fn result_lines(stderr: &str) -> String {
    // Up to the Summary line: the failures listed again after it are not more results.
    let mut reached_summary = false;
    let mut lines: Vec<String> = stderr
        .lines()
        .take_while(|line| !std::mem::replace(&mut reached_summary, line.trim_start().starts_with("Summary [")))
        .filter(|line| {
            let first = line.split_whitespace().next().unwrap_or_default();
            ["PASS", "FAIL", "CRASH", "TIMEOUT", "Starting", "Summary"].contains(&first)
        })
        .map(|line| match (line.find('['), line.find(']')) {
            (Some(open), Some(close)) if open < close => format!("{}[duration]{}", &line[..open], &line[close + 1..]),
            _ => line.to_owned(),
        })
        .collect();
    lines.sort();
    lines.join("\n")
}

/// The result lines [`result_lines`] takes from a full run of the leak fixture (`--no-fail-fast`, with
/// `YING_FIXTURE_HANG` set and a timeout of `timeout`, as cargo ying writes it: `4.000s`), as the fixture's model
/// says: every test's line with its outcome and reason, the Starting line and the Summary line.
fn modelled_result_lines(timeout: &str) -> String {
    use outcomes::CargoYing;
    let mut lines = Vec::new();
    let (mut passed, mut failed, mut crashed, mut timed_out, mut ignored) = (0, 0, 0, 0, 0);
    let mut binaries = std::collections::BTreeSet::new();
    let timed_out_after = format!("timed out after {timeout}");
    for test in outcomes::TESTS {
        let (count, word, reason) = match test.cargo_ying {
            CargoYing::Pass => (&mut passed, "PASS", None),
            CargoYing::Fail(reason) => (&mut failed, "FAIL", reason),
            CargoYing::Crash(reason) => (&mut crashed, "CRASH", Some(reason)),
            CargoYing::Timeout => (&mut timed_out, "TIMEOUT", Some(timed_out_after.as_str())),
            CargoYing::Ignored => {
                ignored += 1;
                continue;
            }
        };
        *count += 1;
        binaries.insert(test.binary);
        let reason = reason.map(|reason| format!(" ({reason})")).unwrap_or_default();
        lines.push(format!("{word:>12} [duration] {} {}{reason}", test.binary, test.name));
    }
    let run = passed + failed + crashed + timed_out;
    lines.push(format!("{:>12} {run} tests across {} binaries ({ignored} ignored)", "Starting", binaries.len()));
    lines.push(format!(
        "{:>12} [duration] {run} tests run: {passed} passed, {failed} failed, {crashed} crashed, {timed_out} timed \
         out, {ignored} ignored",
        "Summary"
    ));
    lines.sort();
    lines.join("\n")
}

/// The tests of `stderr`'s result lines (`PASS [ 0.123s] package::binary test`), in the order they ended.
fn ended(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|line| ["PASS", "FAIL"].contains(&line.split_whitespace().next().unwrap_or_default()))
        .filter_map(|line| line.rsplit_once(' ').map(|(_, name)| name.to_owned()))
        .collect()
}

fn summary(fixture_target: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(fixture_target.join("ying/summary.json")).unwrap()).unwrap()
}

fn entry<'a>(summary: &'a serde_json::Value, binary: &str, name: &str) -> &'a serde_json::Value {
    summary["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|test| test["target"] == binary && test["name"] == name)
        .unwrap_or_else(|| panic!("{binary} {name} is in summary.json"))
}

#[test]
fn a_full_run_reports_every_outcome_and_writes_the_artifacts() {
    let fixture = Fixture::shared();
    let output = fixture.cargo_ying(&["--no-fail-fast", "--timeout", "4s", "-j", "2"], &[("YING_FIXTURE_HANG", "1")]);
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), TEST_FAILED, "{stderr}");
    // Every test of the fixture, with the outcome and reason its model gives, and nothing else.
    assert_eq!(result_lines(&stderr), modelled_result_lines("4.000s"), "{stderr}");

    // As nextest ends a run: the tables first, then what was not run, the Summary and what failed the run, on one
    // screen.
    let lines: Vec<&str> = stderr.lines().collect();
    let summary_at = lines.iter().rposition(|line| line.trim_start().starts_with("Summary [")).unwrap();
    assert!(lines.len() - summary_at <= 15, "the Summary is within the last 15 lines:\n{stderr}");
    assert!(lines[summary_at - 1].trim_start().starts_with("NOT RUN"), "{stderr}");
    let table_at = lines.iter().position(|line| line.starts_with("test ") && line.ends_with("outcome")).unwrap();
    assert!(table_at < summary_at, "{stderr}");
    // The table's rows: the failed tests and the five that retained the most; the others counted in a line.
    let rows: Vec<&str> = lines[table_at + 1..].iter().take_while(|line| !line.is_empty()).copied().collect();
    let (last, rows) = rows.split_last().unwrap();
    let passed: Vec<&&str> = rows.iter().filter(|row| row.ends_with("passed")).collect();
    assert!(passed.len() <= 5 && rows.iter().all(|row| row.ends_with("passed") || row.ends_with("failed")));

    let summary = summary(&fixture.target_dir());
    assert_eq!(summary["schema_version"], ying_report::SUMMARY_SCHEMA_VERSION);
    let measured = summary["tests"].as_array().unwrap().iter().filter(|test| !test["retained_bytes"].is_null());
    let left_out = measured.count() - rows.len();
    assert!(left_out > 0, "{stderr}");
    assert_eq!(*last, format!("... and {left_out} more measured tests that passed (-v shows every one)"));
    let outcome = |binary: &str, name: &str| entry(&summary, binary, name)["outcome"].as_str().unwrap().to_owned();
    assert_eq!(outcome("crashes", "aborts"), "crashed");
    assert_eq!(entry(&summary, "crashes", "aborts")["reason"], "killed by SIGABRT");
    assert_eq!(outcome("crashes", "overflows_its_stack"), "crashed");
    assert_eq!(outcome("crashes", "hangs"), "timed-out");
    assert_eq!(entry(&summary, "crashes", "hangs")["reason"], "timed out after 4.000s");
    assert_eq!(outcome("crashes", "survives_beside_them"), "passed");
    assert_eq!(outcome("leaks", "box_leak"), "failed");
    assert_eq!(outcome("leaks", "clean"), "passed");
    // Alone in its process with process attribution, the helper thread's leak is caught.
    assert_eq!(outcome("leaks", "helper_thread_leak"), "failed");
    assert_eq!(outcome("leaks", "helper_thread_leak_process"), "ignored");
    assert_eq!(outcome("no_allocator", "without_the_allocator"), "failed");
    assert_eq!(outcome("exits", "exits_after_leaking"), "failed");
    // Every failure says why: its signal or timeout, its budgets, its panic's message, the error it returned.
    let failed: Vec<&serde_json::Value> = summary["tests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|test| ["failed", "crashed", "timed-out"].contains(&test["outcome"].as_str().unwrap()))
        .collect();
    assert!(failed.len() >= 10, "{summary}");
    for test in &failed {
        let reason = test["reason"].as_str().unwrap_or_default();
        assert!(!reason.is_empty() && reason != "the test failed", "a failure with no reason: {test}");
    }
    assert!(
        entry(&summary, "leaks", "box_leak")["reason"].as_str().unwrap().contains("exceeded its budget"),
        "{summary}"
    );

    let box_leak = entry(&summary, "leaks", "box_leak");
    assert_eq!(box_leak["retained_bytes"], 1000);
    assert_eq!(box_leak["allocated_bytes"], 1000);
    assert_eq!(box_leak["allocations"], 1);
    let aborts = entry(&summary, "crashes", "aborts");
    assert!(aborts["retained_bytes"].is_null() && aborts["report"].is_null(), "ordinary tests have no figures");

    let out = fixture.target_dir().join("ying");
    let id = ying_report::TestId::new("leak-fixtures", ying_report::TargetKind::Test, "leaks", "box_leak");
    let report = ying_report::LeakReport::read(&out.join(box_leak["report"].as_str().unwrap()), &id).unwrap();
    assert_eq!(report.test.name, "box_leak");
    assert_eq!(report.outcome, ying_report::report::Outcome::Failed);
    assert_eq!(report.attribution, ying_report::report::Attribution::Process);
    assert!(report.deferred.is_none(), "no path of the runtime's source is left in a stored report");
    // The stacks the test deferred were symbolised here, once per executable, and stored with their frames, the
    // body's named after the test.
    assert!(!report.sampled_stacks.is_empty());
    for stack in &report.sampled_stacks {
        assert!(stack.addresses.is_empty() && !stack.frames.is_empty(), "{stack:?}");
    }
    assert!(
        report.sampled_stacks.iter().any(|stack| stack
            .frames
            .iter()
            .any(|f| f.function == "leaks::box_leak" && f.file.as_deref() == Some("tests/leaks.rs"))),
        "{:#?}",
        report.sampled_stacks
    );
    for key in ["retained_flamegraph", "allocated_flamegraph"] {
        let svg = std::fs::read_to_string(out.join(box_leak[key].as_str().unwrap())).unwrap();
        assert!(svg.starts_with("<?xml") && svg.contains("</svg>"), "{key}");
        assert!(svg.contains("leaks::box_leak"), "{key} shows the leaking function");
        assert!(svg.contains("bytes"), "{key} counts bytes");
    }
    let index = std::fs::read_to_string(out.join("index.html")).unwrap();
    for name in ["box_leak", "aborts", "hangs", "clean", "flamegraphs/leak-fixtures/test/leaks/box_leak.retained.svg"] {
        assert!(index.contains(name), "index.html lists {name}");
    }
    assert!(!out.join("tmp").exists(), "no scratch files left");
    assert!(stderr.contains("--- leak-fixtures::leaks box_leak: output ---"), "a failure's output is shown");
    assert!(stderr.contains("ying: leak test `box_leak` exceeded its budget"), "{stderr}");
}

#[test]
fn flamegraphs_are_deterministic() {
    let fixture = Fixture::new();
    let path = fixture.target_dir().join("ying/flamegraphs/leak-fixtures/test/leaks/rc_cycle.retained.svg");
    let svg = || {
        // Drawn anew each time: a run leaves a flamegraph drawn from the same stacks as it was.
        let _ = std::fs::remove_file(&path);
        let output = fixture.cargo_ying(&["--test", "leaks", "rc_cycle", "--", "--exact"], &[]);
        assert_eq!(output.status.code(), TEST_FAILED, "{}", stderr(&output));
        std::fs::read(&path).unwrap()
    };
    assert_eq!(svg(), svg());
}

#[test]
fn fail_fast_stops_scheduling_after_the_first_failure() {
    let fixture = Fixture::shared();
    // In the listing's order, the copy having no last run's durations to order by: `aborts` first.
    assert!(!fixture.target_dir().join("ying/summary.json").exists());
    let output = fixture.cargo_ying(&["--test", "crashes", "-j", "1"], &[]);
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), TEST_FAILED, "{stderr}");
    let summary = summary(&fixture.target_dir());
    assert_eq!(entry(&summary, "crashes", "aborts")["outcome"], "crashed");
    for name in ["hangs", "overflows_its_stack", "survives_beside_them"] {
        assert_eq!(entry(&summary, "crashes", name)["outcome"], "not-run", "{name}");
    }
    assert!(stderr.contains("stopped after the first failure; --no-fail-fast runs every test"), "{stderr}");
}

#[test]
fn the_tests_the_last_run_took_longest_over_start_first() {
    let fixture = Fixture::new();
    let args =
        ["-j", "1", "-E", "binary(leaks) & (test(=budget_passes) | test(=clean) | test(=lazy_init_with_warmup))"];
    assert!(!fixture.target_dir().join("ying/summary.json").exists(), "no last run: the listing's order");
    let first = fixture.cargo_ying(&args, &[]);
    assert_eq!(
        ended(&stderr(&first)),
        ["budget_passes", "clean", "lazy_init_with_warmup"],
        "the listing's order first"
    );
    // As if the last run had found `lazy_init_with_warmup` the longest and `clean` the shortest.
    let path = fixture.target_dir().join("ying/summary.json");
    let mut last = summary(&fixture.target_dir());
    for test in last["tests"].as_array_mut().unwrap() {
        let seconds = match test["name"].as_str().unwrap() {
            "lazy_init_with_warmup" => 3.0,
            "budget_passes" => 2.0,
            _ => 1.0,
        };
        test["duration"] = serde_json::json!(seconds);
    }
    std::fs::write(&path, serde_json::to_vec_pretty(&last).unwrap()).unwrap();
    let second = fixture.cargo_ying(&args, &[]);
    assert_eq!(ended(&stderr(&second)), ["lazy_init_with_warmup", "budget_passes", "clean"], "{}", stderr(&second));
    // The run wrote its own summary, with its own durations, over the last one.
    let written = summary(&fixture.target_dir());
    let planted = [1.0, 2.0, 3.0];
    assert!(
        written["tests"].as_array().unwrap().iter().all(|test| !planted.contains(&test["duration"].as_f64().unwrap())),
        "{written}"
    );
}

#[test]
fn filters_select_tests_and_a_passing_run_exits_zero() {
    let fixture = Fixture::shared();
    let output = fixture.cargo_ying(&["--test", "leaks", "clean", "budget_passes", "--", "--exact"], &[]);
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let summary = summary(&fixture.target_dir());
    let names: Vec<&str> = summary["tests"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["budget_passes", "clean"]);
    assert!(stderr.contains("2 tests run: 2 passed"), "{stderr}");
}

#[test]
fn configuration_is_read_and_unknown_keys_are_usage_errors() {
    let fixture = Fixture::new();
    let manifest = fixture.path().join("Cargo.toml");
    let original = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        original.replace("[workspace]\n", "[workspace]\n\n[workspace.metadata.ying]\njbos = 2\n"),
    )
    .unwrap();
    let output = fixture.cargo_ying(&["clean"], &[]);
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("error: failed to read [workspace.metadata.ying] in"), "{stderr}");
    assert!(stderr.contains("unknown field `jbos`"), "{stderr}");

    std::fs::write(
        &manifest,
        original.replace("[workspace]\n", "[workspace]\n\n[workspace.metadata.ying]\ntimeout = \"3s\"\n"),
    )
    .unwrap();
    let output = fixture.cargo_ying(&["--test", "crashes", "hangs"], &[("YING_FIXTURE_HANG", "1")]);
    assert_eq!(output.status.code(), TEST_FAILED);
    let stderr = self::stderr(&output);
    assert!(stderr.contains("(timed out after 3.000s)"), "{stderr}");
}

#[test]
fn build_errors_and_bad_usage_exit_two() {
    let fixture = Fixture::new();
    let output = fixture.cargo_ying(&["--bogus-flag"], &[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("unexpected argument '--bogus-flag'"), "{}", stderr(&output));

    std::fs::write(fixture.path().join("tests/broken.rs"), "fn broken( {}\n").unwrap();
    let output = fixture.cargo_ying(&["--test", "broken"], &[]);
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(101), "nextest's code for a failed build: {stderr}");
    assert!(stderr.contains("error: failed to build the tests"), "{stderr}");
    assert!(stderr.contains("tests/broken.rs"), "cargo's rendered diagnostic reaches the user: {stderr}");
}

#[test]
fn help_documents_the_exit_codes() {
    let output = Command::new(env!("CARGO_BIN_EXE_cargo-ying")).args(["ying", "test", "--help"]).output().unwrap();
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(
        help.contains(
            "Exit codes (cargo-nextest's, and 3):\n    0  every test passed, and no test's memory regressed\n    2  \
             usage or configuration error, or a corrupt baseline or summary\n    3  every test passed, and memory \
             regressed against the baseline (ying's own code)\n    4  no tests to run"
        ),
        "{help}"
    );
    assert!(help.contains("\n   96  the nextest profile of -P is not found"), "{help}");
    assert!(
        help.contains(
            "\n  100  a test failed, crashed or timed out, or the run was stopped (SIGINT, SIGTERM)\n  101  the build \
             failed\n"
        ),
        "{help}"
    );
}

/// The gate's table (`retained memory against ...` to the blank line after it), with the baseline's path redacted.
fn gate_lines(stderr: &str, baseline: &Path) -> String {
    let start = stderr.find("retained memory against").unwrap_or_else(|| panic!("no gate output:\n{stderr}"));
    let table = &stderr[start..];
    let table = &table[..table.find("\n\n").unwrap_or(table.len())];
    table.replace(&baseline.display().to_string(), "[BASELINE]").trim_end().to_owned()
}

#[test]
fn the_baseline_gates_retained_growth() {
    let fixture = Fixture::new();
    let baseline = fixture.path().join("ying-baseline.json");
    let subset = ["--test", "leaks", "budget_passes", "clean", "bounded_cache_in_steady_state"];
    let run = |extra: &[&str]| {
        let args: Vec<&str> = subset.iter().chain(extra).copied().collect();
        fixture.cargo_ying(&args, &[])
    };

    // No baseline yet: the run says how to make one; saving writes the three leak tests, sorted.
    let output = run(&[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stderr(&output).contains("no baseline at"), "{}", stderr(&output));
    let output = run(&["--save-baseline"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let saved = std::fs::read_to_string(&baseline).unwrap();
    let written: serde_json::Value = serde_json::from_str(&saved).unwrap();
    let ids: Vec<&String> = written["tests"].as_object().unwrap().keys().collect();
    assert_eq!(
        ids,
        [
            "leak-fixtures::leaks bounded_cache_in_steady_state",
            "leak-fixtures::leaks budget_passes",
            "leak-fixtures::leaks clean"
        ]
    );
    assert_eq!(written["tests"]["leak-fixtures::leaks budget_passes"]["retained"], 1000);

    // Saving with another filter updates only that test's entry; the others stay as they were.
    let other = fixture.cargo_ying(&["--test", "leaks", "lazy_init_with_warmup", "--save-baseline"], &[]);
    assert_eq!(other.status.code(), Some(0), "{}", stderr(&other));
    let both: serde_json::Value = serde_json::from_slice(&std::fs::read(&baseline).unwrap()).unwrap();
    assert_eq!(both["tests"].as_object().unwrap().len(), 4);
    assert_eq!(
        both["tests"]["leak-fixtures::leaks budget_passes"],
        written["tests"]["leak-fixtures::leaks budget_passes"]
    );
    std::fs::write(&baseline, &saved).unwrap();
    assert!(!saved.contains(&fixture.path().display().to_string()), "no absolute paths in the baseline");

    // Unchanged: the gate passes, and saving again rewrites the file byte for byte.
    let output = run(&[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stderr(&output).contains("no leak test's retained memory changed beyond the tolerance"));
    assert_eq!(run(&["--save-baseline"]).status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&baseline).unwrap(), saved);

    // A leak grows (still within the test's own 4 KiB budget): the gate fails, naming the test.
    let leaks = fixture.path().join("tests/leaks.rs");
    let original = fixture.grow_budget_passes();
    let output = run(&[]);
    let stderr_grown = stderr(&output);
    assert_eq!(output.status.code(), REGRESSED, "{stderr_grown}");
    insta::assert_snapshot!("gate_regression", gate_lines(&stderr_grown, &baseline));
    let summary = summary(&fixture.target_dir());
    let regressed = entry(&summary, "leaks", "budget_passes");
    assert_eq!(
        (regressed["baseline_retained_bytes"].as_u64(), regressed["retained_bytes"].as_u64()),
        (Some(1000), Some(3000))
    );
    let diff = fixture
        .target_dir()
        .join("ying")
        .join(regressed["retained_diff_flamegraph"].as_str().expect("a diff flamegraph"));
    let svg = std::fs::read_to_string(diff).unwrap();
    assert!(svg.contains("</svg>") && svg.contains("leaks::budget_passes"), "the diff shows where it grew");
    assert!(entry(&summary, "leaks", "clean")["retained_diff_flamegraph"].is_null(), "only regressions get a diff");
    let index = std::fs::read_to_string(fixture.target_dir().join("ying/index.html")).unwrap();
    assert!(index.contains("baseline retained") && index.contains("retained diff"));

    // A tighter or looser tolerance decides for the retained bytes. The growth is a `Box::leak`, lost: its lost
    // bytes regress past their floor of 256 B whatever the tolerance.
    for loose in [&["--max-growth", "300%"][..], &["--min-growth", "2500"]] {
        let output = run(loose);
        let stderr = stderr(&output);
        assert_eq!(output.status.code(), REGRESSED, "{loose:?}: {stderr}");
        let rows: Vec<&str> = stderr.lines().filter(|line| line.trim_start().starts_with("REGRESSED  ")).collect();
        assert!(!rows.is_empty() && rows.iter().all(|row| row.contains("(lost bytes)")), "{loose:?}: {stderr}");
    }
    assert_eq!(run(&["--max-growth", "0%", "--min-growth", "1999"]).status.code(), REGRESSED);

    // Recovered: passes again.
    std::fs::write(&leaks, &original).unwrap();
    assert_eq!(run(&[]).status.code(), Some(0));

    // Accepting the grown run's results without re-running makes it the new baseline.
    fixture.grow_budget_passes();
    assert_eq!(run(&[]).status.code(), REGRESSED);
    let accept = Command::new(env!("CARGO_BIN_EXE_cargo-ying"))
        .args(["ying", "accept", "--manifest-path"])
        .arg(fixture.path().join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", fixture.target_dir())
        .output()
        .unwrap();
    assert!(accept.status.success(), "{}", stderr(&accept));
    let accepted: serde_json::Value = serde_json::from_slice(&std::fs::read(&baseline).unwrap()).unwrap();
    assert_eq!(accepted["tests"]["leak-fixtures::leaks budget_passes"]["retained"], 3000);
    assert_eq!(run(&[]).status.code(), Some(0));
}

#[test]
fn a_corrupt_baseline_is_a_usage_error_and_stays_as_it_was() {
    let fixture = Fixture::new();
    let baseline = fixture.path().join("ying-baseline.json");
    let corrupt = "{\n  \"schema_version\": 2,\n  \"tests\": {\n    \"x\": [\n";
    // Written by an earlier cargo ying, whose ids did not tell a library's tests from a binary's.
    let old = "{\n  \"schema_version\": 1,\n  \"tests\": {\n    \"leak-fixtures::leak_fixtures tests::same_unit\": {}\n  }\n}\n";
    // A merge that kept both sides' lines: whichever came last would win.
    let twice = "{\n  \"schema_version\": 3,\n  \"tests\": {\n    \"leak-fixtures::leaks clean\": {\"retained\": 100},\n    \
                 \"leak-fixtures::leaks clean\": {\"retained\": 50000}\n  }\n}\n";
    let contradicts = "{\n  \"schema_version\": 3,\n  \"tests\": {\n    \
                       \"leak-fixtures::leaks clean\": {\"retained\": 100, \"lost\": 200}\n  }\n}\n";
    for (contents, why) in [
        (twice, "`leak-fixtures::leaks clean` is written twice, at lines 4 and 5"),
        (contradicts, "`leak-fixtures::leaks clean` at line 4 has 200 bytes lost, more than its 100 retained"),
        (corrupt, "line 5 column 0"),
        (
            old,
            "schema_version 1 at line 2 column 3 is not 4, the version of the baseline this ying reads: it was \
               written by an earlier cargo ying",
        ),
        (old, "write it anew with `cargo ying test --save-baseline`"),
    ] {
        std::fs::write(&baseline, contents).unwrap();
        for extra in [&[][..], &["--save-baseline"][..]] {
            let args: Vec<&str> = ["--test", "leaks", "clean"].iter().chain(extra).copied().collect();
            let output = fixture.cargo_ying(&args, &[]);
            let stderr = stderr(&output);
            assert_eq!(output.status.code(), Some(2), "{stderr}");
            assert!(stderr.contains(&format!("error: failed to read the baseline {}", baseline.display())), "{stderr}");
            assert!(stderr.contains(why), "{why}: {stderr}");
            assert!(!stderr.contains("Starting"), "nothing ran: {stderr}");
            assert_eq!(std::fs::read_to_string(&baseline).unwrap(), contents, "the file is left as it was");
        }
    }
}

#[test]
fn github_actions_get_annotations_and_a_job_summary_and_junit_is_written() {
    let fixture = Fixture::new();
    let subset = ["--test", "leaks", "--no-fail-fast", "budget_passes", "clean", "box_leak"];
    let saved = fixture.cargo_ying(&[&subset[..], &["--save-baseline"]].concat(), &[]);
    assert_eq!(saved.status.code(), TEST_FAILED, "box_leak fails its own budget: {}", stderr(&saved));
    fixture.grow_budget_passes();

    let outputs = tempfile::tempdir().unwrap();
    let step_summary = outputs.path().join("step-summary.md");
    let junit = outputs.path().join("junit.xml");
    let mut args = subset.to_vec();
    let junit_arg = junit.display().to_string();
    args.extend(["--junit", &junit_arg]);
    let output = fixture
        .cargo_ying(&args, &[("GITHUB_ACTIONS", "true"), ("GITHUB_STEP_SUMMARY", step_summary.to_str().unwrap())]);
    assert_eq!(output.status.code(), TEST_FAILED);
    let annotations: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| line.starts_with("::error"))
        .map(str::to_owned)
        .collect();
    insta::assert_snapshot!("github_annotations", annotations.join("\n"));
    insta::assert_snapshot!("github_step_summary", std::fs::read_to_string(&step_summary).unwrap());

    // The JUnit file shows the same verdicts: box_leak failed, and budget_passes regressed (junit.rs checks more).
    let xml = std::fs::read_to_string(&junit).unwrap();
    let document = roxmltree::Document::parse(&xml).unwrap_or_else(|error| panic!("{error}: {xml}"));
    let suite = document.descendants().find(|node| node.has_tag_name("testsuite")).unwrap();
    assert_eq!(suite.attribute("name"), Some("leak-fixtures::leaks"), "{xml}");
    let counts = ["tests", "failures", "errors", "skipped"].map(|name| suite.attribute(name));
    assert_eq!(counts, ["3", "2", "0", "0"].map(Some), "{xml}");
    let failed: Vec<_> = suite
        .children()
        .filter(|case| case.children().any(|node| node.has_tag_name("failure")))
        .map(|case| case.attribute("name").unwrap())
        .collect();
    assert_eq!(failed, ["box_leak", "budget_passes"], "{xml}");
}

#[test]
fn diff_compares_saved_baselines_offline() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, json: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, json).unwrap();
        path
    };
    // A baseline of the earlier form against one of the current form.
    let old = write(
        "old.json",
        "{\"schema_version\": 2, \"tests\": {\"p::leaks cache\": {\"retained_bytes\": 10000, \"peak_bytes\": 0, \
         \"allocated_bytes\": 0, \"allocations\": 0, \"retained_stacks\": []}}}"
            .to_owned(),
    );
    let new = write(
        "new.json",
        "{\n  \"schema_version\": 3,\n  \"tests\": {\n    \"p::leaks cache\": {\"retained\": 20000, \"lost\": 0}\n  }\n}\n"
            .to_owned(),
    );
    let diff = |a: &Path, b: &Path, extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_cargo-ying"))
            .args(["ying", "diff"])
            .arg(a)
            .arg(b)
            .args(extra)
            .output()
            .unwrap()
    };
    let grown = diff(&old, &new, &[]);
    assert_eq!(grown.status.code(), REGRESSED);
    let table = String::from_utf8_lossy(&grown.stdout);
    assert!(
        table.contains("REGRESSED  p::leaks cache") && table.contains("+10000") && table.contains("+100.0%"),
        "{table}"
    );
    let shrunk = diff(&new, &old, &[]);
    assert_eq!(shrunk.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&shrunk.stdout).contains("improved"));
    assert_eq!(diff(&old, &new, &["--max-growth", "150%"]).status.code(), Some(0));

    std::fs::write(dir.path().join("broken.json"), "{\"schema_version\": 2,\n \"tests\": [").unwrap();
    let broken = diff(&old, &dir.path().join("broken.json"), &[]);
    assert_eq!(broken.status.code(), Some(2));
    let stderr = stderr(&broken);
    assert!(stderr.contains("broken.json") && stderr.contains("line 2 column"), "{stderr}");
}

/// Copies a directory, leaving out build outputs (`target`).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_name() == "target" {
            continue;
        }
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The tests of a summary as (binary, name, outcome, retained bytes), sorted.
fn outcomes_of(summary: &serde_json::Value) -> Vec<(String, String, String, Option<u64>)> {
    let mut tests: Vec<_> = summary["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let text = |key: &str| t[key].as_str().unwrap().to_owned();
            (text("target"), text("name"), text("outcome"), t["retained_bytes"].as_u64())
        })
        .collect();
    tests.sort();
    tests
}

#[test]
fn partitioned_runs_merge_into_the_unsharded_result() {
    let fixture = Fixture::new();
    let saved = tempfile::tempdir().unwrap();
    // `cargo ying merge` of `summaries` into `output`, in the fixture.
    let merge = |summaries: &[std::path::PathBuf], output: &Path| {
        Command::new(env!("CARGO_BIN_EXE_cargo-ying"))
            .args(["ying", "merge"])
            .args(summaries)
            .arg("--output")
            .arg(output)
            .arg("--manifest-path")
            .arg(fixture.path().join("Cargo.toml"))
            .env("CARGO_TARGET_DIR", fixture.target_dir())
            .output()
            .unwrap()
    };
    let subset =
        ["--test", "leaks", "--no-fail-fast", "budget_passes", "clean", "box_leak", "rc_cycle", "bounded_cache"];
    let output = fixture.cargo_ying(&[&subset[..], &["--save-baseline"]].concat(), &[]);
    assert_eq!(output.status.code(), TEST_FAILED, "box_leak and rc_cycle fail: {}", stderr(&output));
    let unsharded = summary(&fixture.target_dir());
    assert_eq!(outcomes_of(&unsharded).len(), 5);

    let mut last_shards = Vec::new();
    for scheme in ["count", "hash"] {
        let mut shard_summaries = Vec::new();
        for shard in 1..=2 {
            let partition = format!("{scheme}:{shard}/2");
            let output = fixture.cargo_ying(&[&subset[..], &["--partition", &partition]].concat(), &[]);
            assert!([Some(0), TEST_FAILED].contains(&output.status.code()), "{}", stderr(&output));
            let dir = saved.path().join(format!("{scheme}-{shard}"));
            copy_dir(&fixture.target_dir().join("ying"), &dir);
            shard_summaries.push(dir.join("summary.json"));
        }
        let shard_sizes: Vec<usize> = shard_summaries
            .iter()
            .map(|path| outcomes_of(&serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()).len())
            .collect();
        assert_eq!(shard_sizes.iter().sum::<usize>(), 5, "{scheme}: every test in exactly one shard {shard_sizes:?}");

        let merged_path = saved.path().join(format!("{scheme}-merged.json"));
        let merge = merge(&shard_summaries, &merged_path);
        let merge_stderr = stderr(&merge);
        assert_eq!(merge.status.code(), TEST_FAILED, "the shards' failures fail the merge: {merge_stderr}");
        assert!(merge_stderr.contains("no leak test's retained memory changed beyond the tolerance"), "{merge_stderr}");
        let merged: serde_json::Value = serde_json::from_slice(&std::fs::read(&merged_path).unwrap()).unwrap();
        assert_eq!(outcomes_of(&merged), outcomes_of(&unsharded), "{scheme}: the merge equals the unsharded run");
        last_shards = shard_summaries;
    }

    // The merged run is written as a run is: index.html, reports and flamegraphs beside its summary, JUnit valid
    // against both schemas, GitHub's annotations and job summary.
    let outputs = tempfile::tempdir().unwrap();
    let (junit, step_summary) = (outputs.path().join("junit.xml"), outputs.path().join("step-summary.md"));
    let merged_dir = outputs.path().join("merged");
    let merged_path = merged_dir.join("summary.json");
    let path = |path: &Path| path.to_str().unwrap().to_owned();
    let mut args: Vec<String> = last_shards.iter().map(|shard| path(shard)).collect();
    args.extend(["--output".into(), path(&merged_path), "--junit".into(), path(&junit)]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let step_summary_env = path(&step_summary);
    let envs = [("GITHUB_ACTIONS", "true"), ("GITHUB_STEP_SUMMARY", step_summary_env.as_str())];
    let output = fixture.subcommand("merge", &args, &envs).output().unwrap();
    assert_eq!(output.status.code(), TEST_FAILED, "{}", stderr(&output));
    let merged: serde_json::Value = serde_json::from_slice(&std::fs::read(&merged_path).unwrap()).unwrap();
    let box_leak = entry(&merged, "leaks", "box_leak");
    assert!(box_leak["reason"].as_str().unwrap().contains("exceeded its budget"), "{box_leak}");
    for file in ["report", "retained_flamegraph"] {
        assert!(merged_dir.join(box_leak[file].as_str().unwrap()).is_file(), "{file} beside the summary: {box_leak}");
    }
    let index = std::fs::read_to_string(merged_dir.join("index.html")).unwrap();
    assert!(index.contains("box_leak") && index.contains("rc_cycle"), "{index}");
    xsd::assert_valid_junit(&junit);
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("name=\"box_leak\"") && xml.contains("exceeded its budget"), "{xml}");
    let annotations = stdout(&output);
    assert!(annotations.lines().any(|line| line.starts_with("::error ") && line.contains("box_leak")), "{annotations}");
    let job_summary = std::fs::read_to_string(&step_summary).unwrap();
    assert!(job_summary.contains("box_leak"), "{job_summary}");

    // A summary of another workspace's shard (its tests of a package this one has not) is refused, naming it.
    let mut foreign: serde_json::Value =
        serde_json::from_slice(&std::fs::read(saved.path().join("count-1/summary.json")).unwrap()).unwrap();
    for test in foreign["tests"].as_array_mut().unwrap() {
        test["package"] = "other-workspace-pkg".into();
        // Its files are where that package's run writes them.
        for (file, path) in [("report", "report_path"), ("output", "output_path")] {
            if test[file].is_string() {
                let kind: ying_report::TargetKind = serde_json::from_value(test["kind"].clone()).unwrap();
                let id = ying_report::TestId::new(
                    "other-workspace-pkg",
                    kind,
                    test["target"].as_str().unwrap(),
                    test["name"].as_str().unwrap(),
                );
                test[file] = if path == "report_path" { id.report_path() } else { id.output_path() }.into();
            }
        }
    }
    let foreign_path = saved.path().join("foreign.json");
    std::fs::write(&foreign_path, serde_json::to_vec(&foreign).unwrap()).unwrap();
    let refused =
        merge(&[saved.path().join("count-2/summary.json"), foreign_path], &saved.path().join("foreign-merged.json"));
    let said = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{said}");
    assert!(said.contains("it holds tests of `other-workspace-pkg`, which this workspace at"), "{said}");
    assert!(!saved.path().join("foreign-merged.json").exists(), "nothing merged: {said}");
}

/// The summary entry of a test by its kind, target and name.
fn entry_of<'a>(summary: &'a serde_json::Value, kind: &str, target: &str, name: &str) -> &'a serde_json::Value {
    summary["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|test| test["kind"] == kind && test["target"] == target && test["name"] == name)
        .unwrap_or_else(|| panic!("{kind} {target} {name} is in summary.json"))
}

#[test]
fn a_librarys_and_a_binarys_test_of_one_name_are_two_tests_to_the_baseline_and_the_gate() {
    let fixture = Fixture::new();
    let baseline = fixture.path().join("ying-baseline.json");
    let run = |extra: &[&str]| fixture.cargo_ying(&[&["same_unit"][..], extra].concat(), &[]);
    let output = run(&["--save-baseline"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stderr(&output).contains("Saved") && stderr(&output).contains("(2 measured tests)"), "{}", stderr(&output));
    let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&baseline).unwrap()).unwrap();
    let tests = saved["tests"].as_object().unwrap();
    assert_eq!(tests["leak-fixtures tests::same_unit"]["retained"], 100, "{saved}");
    assert_eq!(tests["leak-fixtures::bin/leak-fixtures tests::same_unit"]["retained"], 200, "{saved}");

    for (file, before, id) in [
        ("src/main.rs", "vec![0u8; 200]", "leak-fixtures::bin/leak-fixtures tests::same_unit"),
        ("src/lib.rs", "vec![0u8; 100]", "leak-fixtures tests::same_unit"),
    ] {
        let path = fixture.path().join(file);
        let original = std::fs::read_to_string(&path).unwrap();
        let grown = original.replacen(before, "vec![0u8; 50_000]", 1);
        assert_ne!(grown, original);
        std::fs::write(&path, grown).unwrap();
        let output = run(&[]);
        let stderr = stderr(&output);
        assert_eq!(output.status.code(), REGRESSED, "{id} grew: {stderr}");
        // One test regressed, on its retained and its lost bytes (a row each).
        let regressed: Vec<&str> = stderr.lines().filter(|line| line.trim_start().starts_with("REGRESSED  ")).collect();
        assert!(!regressed.is_empty(), "{stderr}");
        assert!(regressed.iter().all(|line| line.contains(&format!("REGRESSED  {id} "))), "{stderr}");
        let summary = summary(&fixture.target_dir());
        let kind = if file == "src/main.rs" { "bin" } else { "lib" };
        assert_eq!(entry_of(&summary, kind, "leak-fixtures", "tests::same_unit")["gate"], "regressed");
        let other = if kind == "bin" { "lib" } else { "bin" };
        assert_eq!(entry_of(&summary, other, "leak-fixtures", "tests::same_unit")["gate"], "unchanged");
        std::fs::write(&path, original).unwrap();
        assert_eq!(run(&[]).status.code(), Some(0), "recovered");
    }
}

#[test]
fn tests_whose_names_differ_in_separators_or_accents_get_their_own_files() {
    let fixture = Fixture::shared();
    let output = fixture.cargo_ying(&["--lib"], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let summary = summary(&fixture.target_dir());
    let out = fixture.target_dir().join("ying");
    let index = std::fs::read_to_string(out.join("index.html")).unwrap();
    let mut files = std::collections::BTreeSet::new();
    for (name, retained) in [("tests::m::t", 10), ("tests::m__t", 20), ("tests::café", 30), ("tests::cafè", 40)] {
        let test = entry_of(&summary, "lib", "leak-fixtures", name);
        assert_eq!(test["retained_bytes"], retained, "{name}: its own figures");
        let id = ying_report::TestId::new("leak-fixtures", ying_report::TargetKind::Lib, "leak-fixtures", name);
        let report = ying_report::LeakReport::read(&out.join(test["report"].as_str().unwrap()), &id)
            .unwrap_or_else(|error| panic!("{name}: its own report: {error}"));
        assert_eq!(report.figures.retained_bytes, retained);
        for key in ["report", "retained_flamegraph", "allocated_flamegraph"] {
            let path = test[key].as_str().unwrap_or_else(|| panic!("{name} has a {key}"));
            assert!(out.join(path).is_file(), "{name}: {path}");
            assert!(files.insert(path.to_owned()), "{name}: {path} is no other test's");
            assert!(index.contains(&format!("<a href=\"{path}\">")), "index.html links {path}");
        }
        let svg = std::fs::read_to_string(out.join(test["retained_flamegraph"].as_str().unwrap())).unwrap();
        assert!(svg.contains(&format!("leak-fixtures {name}")), "{name}: the flamegraph is titled with its test");
    }
}
