//! The files cargo ying reads and writes besides its outputs: the baseline is only ever a regular file replaced by
//! a rename that keeps its mode, a link's target is written, what cannot be written stops the run before it starts,
//! two runs saving at once keep both their entries; `merge` and `diff` refuse what they cannot take.

use super::{Fixture, TEST_FAILED, stderr};
use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
use std::path::Path;
use std::time::{Duration, Instant};
use ying_report::{Baseline, Summary, SummaryTest, TargetKind, TestId, TestOutcome};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

fn leak_test(name: &str) -> TestId {
    TestId::new("leak-fixtures", TargetKind::Test, "leaks", name)
}

#[test]
fn a_read_only_baseline_to_save_stops_the_run_before_it_starts_and_stays_as_it_was() {
    let fixture = Fixture::new();
    let baseline = fixture.path().join("ying-baseline.json");
    let contents = "{\n  \"schema_version\": 2,\n  \"tests\": {}\n}\n";
    std::fs::write(&baseline, contents).unwrap();
    std::fs::set_permissions(&baseline, std::fs::Permissions::from_mode(0o444)).unwrap();

    let output = fixture.cargo_ying(&["--test", "leaks", "clean", "--save-baseline"], &[]);
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "error: failed to save the baseline {}: it is read-only (mode 444); make it writable",
            baseline.display()
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("Starting") && !stderr.contains("Compiling"), "nothing was built or run: {stderr}");
    assert_eq!(std::fs::read_to_string(&baseline).unwrap(), contents);
    assert_eq!(mode(&baseline), 0o444);

    // `accept` writes the baseline too.
    let output = fixture.subcommand("accept", &[], &[]).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", super::stderr(&output));
    assert!(super::stderr(&output).contains("is read-only"), "{}", super::stderr(&output));
    assert_eq!(std::fs::read_to_string(&baseline).unwrap(), contents);
    assert_eq!(mode(&baseline), 0o444);
}

#[test]
fn a_linked_baseline_has_its_target_written_and_the_link_kept() {
    let fixture = Fixture::new();
    let elsewhere = tempfile::tempdir().unwrap();
    let target = elsewhere.path().join("baseline.json");
    std::fs::write(&target, "{\n  \"schema_version\": 2,\n  \"tests\": {}\n}\n").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o640)).unwrap();
    let link = fixture.path().join("ying-baseline.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();

    let output = fixture.cargo_ying(&["--test", "leaks", "clean", "--save-baseline"], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link is kept");
    let saved = Baseline::read(&target).unwrap().unwrap();
    assert!(saved.tests.contains_key(&leak_test("clean")), "the target has the entry: {saved:?}");
    assert_eq!(mode(&target), 0o640, "the target keeps its mode");
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 1, "no temporary file left beside it");
}

#[test]
fn a_named_pipe_as_the_baseline_is_refused_at_once() {
    let fixture = Fixture::new();
    let baseline = fixture.path().join("ying-baseline.json");
    let made = std::process::Command::new("mkfifo").arg(&baseline).status().unwrap();
    assert!(made.success());
    for extra in [&[][..], &["--save-baseline"][..]] {
        let args: Vec<&str> = ["--test", "leaks", "clean"].iter().chain(extra).copied().collect();
        let mut child = fixture
            .command(&args, &[])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Opening the pipe for reading would wait for a writer forever.
        let deadline = Instant::now() + Duration::from_secs(120);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                child.kill().unwrap();
                child.wait().unwrap();
                panic!("cargo ying still runs after 120 s: it waits on the named pipe");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let output = child.wait_with_output().unwrap();
        let stderr = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(&format!(
                "error: failed to read the baseline {}: it is a named pipe (FIFO), not a regular file",
                baseline.display()
            )),
            "{stderr}"
        );
        assert!(std::fs::symlink_metadata(&baseline).unwrap().file_type().is_fifo(), "left as it was");
    }
}

#[test]
fn merge_refuses_a_test_in_two_summaries_and_the_same_summary_twice() {
    let fixture = Fixture::new();
    let dir = tempfile::tempdir().unwrap();
    let shard = |name: &str, tests: &[&str]| {
        let path = dir.path().join(name).join("summary.json");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let tests = tests.iter().map(|test| SummaryTest::new(leak_test(test), TestOutcome::Passed)).collect();
        Summary::new(tests).write(&path).unwrap();
        path
    };
    let one = shard("one", &["clean", "box_leak"]);
    let two = shard("two", &["rc_cycle", "box_leak"]);
    let merged = dir.path().join("merged.json");
    let merge = |summaries: &[&Path]| {
        let mut args: Vec<&str> = summaries.iter().map(|path| path.to_str().unwrap()).collect();
        args.extend(["--output", merged.to_str().unwrap()]);
        fixture.subcommand("merge", &args, &[]).output().unwrap()
    };

    let output = merge(&[&one, &one]);
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let same = format!("error: failed to merge {0} and {0}: both have the test `leak-fixtures::leaks ", one.display());
    assert!(stderr.contains(&same) && stderr.contains("the same summary is given twice"), "{stderr}");

    let output = merge(&[&one, &two]);
    let stderr = super::stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let overlap = format!(
        "error: failed to merge {} and {}: both have the test `leak-fixtures::leaks box_leak`",
        one.display(),
        two.display()
    );
    assert!(stderr.contains(&overlap), "{stderr}");
    assert!(!merged.exists(), "nothing merged");
}

#[test]
fn diff_refuses_a_summary_of_another_version_naming_the_file_and_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let baseline = dir.path().join("baseline.json");
    Baseline::default().write(&baseline).unwrap();
    let summary = dir.path().join("summary.json");
    std::fs::write(&summary, "{\n  \"schema_version\": 99,\n  \"tests\": []\n}\n").unwrap();
    let textual = dir.path().join("textual.json");
    std::fs::write(&textual, "{\n  \"schema_version\": \"3\",\n  \"tests\": []\n}\n").unwrap();
    let diff = |new: &Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_cargo-ying"))
            .args(["ying", "diff"])
            .arg(&baseline)
            .arg(new)
            .output()
            .unwrap()
    };
    let output = diff(&summary);
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let expected = format!(
        "error: failed to read {}: schema_version 99 at line 2 column 3 is not {}, the version of the summary",
        summary.display(),
        ying_report::SUMMARY_SCHEMA_VERSION
    );
    assert!(stderr.contains(&expected), "{stderr}");

    let output = diff(&textual);
    let stderr = super::stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "error: failed to read {}: schema_version at line 2 column 3 is the string \"3\"; expected the number {}",
            textual.display(),
            ying_report::SUMMARY_SCHEMA_VERSION
        )),
        "{stderr}"
    );
}

#[test]
fn two_runs_saving_at_once_keep_both_entries() {
    let fixture = Fixture::new();
    // Built once before, so that the two runs start their tests together.
    let built = fixture.cargo_ying(&["--test", "leaks", "clean"], &[]);
    assert_eq!(built.status.code(), Some(0), "{}", stderr(&built));
    let baseline = fixture.path().join("ying-baseline.json");
    for round in 0..3 {
        let _ = std::fs::remove_file(&baseline);
        let runs: Vec<_> = ["clean", "budget_passes"]
            .iter()
            .map(|name| {
                let filter = format!("test(={name})");
                fixture
                    .command(&["--test", "leaks", "-E", &filter, "--save-baseline"], &[])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for run in runs {
            let output = run.wait_with_output().unwrap();
            assert!([Some(0), TEST_FAILED].contains(&output.status.code()), "round {round}: {}", stderr(&output));
        }
        let saved = Baseline::read(&baseline).unwrap().expect("a baseline was saved");
        let ids: Vec<&TestId> = saved.tests.keys().collect();
        assert_eq!(ids, [&leak_test("budget_passes"), &leak_test("clean")], "round {round}");
    }
}

#[test]
fn a_save_keeps_what_another_run_saved_while_this_one_ran() {
    use std::io::BufRead as _;
    let fixture = Fixture::new();
    let baseline = fixture.path().join("ying-baseline.json");
    // `hangs` keeps the run going until its timeout, long after the baseline was read.
    let mut run = fixture
        .command(
            &["--no-fail-fast", "-j", "2", "--timeout", "10s", "--save-baseline", "-E", "test(=clean) | test(=hangs)"],
            &[("YING_FIXTURE_HANG", "1")],
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(run.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let started = line.trim_start().starts_with("Starting");
        seen.push(line);
        if started {
            break;
        }
    }
    assert!(seen.last().is_some_and(|line| line.contains("Starting")), "{}", seen.join("\n"));
    // Another run saves its entry meanwhile.
    let mut other = Baseline::default();
    other.tests.insert(leak_test("box_leak"), ying_report::BaselineEntry::default());
    other.write(&baseline).unwrap();
    seen.extend(lines.map(Result::unwrap));
    let status = run.wait().unwrap();
    assert_eq!(status.code(), TEST_FAILED, "hangs timed out: {}", seen.join("\n"));
    let saved = Baseline::read(&baseline).unwrap().unwrap();
    let ids: Vec<&TestId> = saved.tests.keys().collect();
    assert_eq!(ids, [&leak_test("box_leak"), &leak_test("clean")], "{}", seen.join("\n"));
}
