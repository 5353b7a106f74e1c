//! The run's files under `<target-dir>/ying/`: each leak test's report and flamegraphs (retained and allocated
//! memory, and for a regression retained memory baseline against now), summary.json and index.html. Every file of
//! a test is named after its [`TestId`](ying_report::TestId), so no two tests share one.

use super::html::Regression;
use crate::error::{Error, Result};
use crate::gate::Row;
use crate::model::{Files, Run, TestRecord};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use ying_report::{FoldedStack, GateVerdict, NotRunTarget, Summary, TestId};

/// The flamegraphs a test can have, by the name in their file names.
const FLAMEGRAPHS: [&str; 3] = ["retained", "allocated", "retained-diff"];

/// The directories of the tests' own files, under the output directory.
const TEST_FILES: [&str; 3] = ["reports", "flamegraphs", "output"];

/// Clears what an earlier run left under `out_dir` that no run reads again: refused reports and scratch space.
/// The tests' reports, flamegraphs and kept outputs stay until [`sweep`]: a test's files are written over its
/// earlier ones, as creating and deleting a file for every test costs some file systems more than a short test.
pub(crate) fn prepare(out_dir: &Path) -> Result<()> {
    if std::fs::metadata(out_dir).is_ok_and(|metadata| !metadata.is_dir()) {
        let why = "a file is there, not a directory: move it away (cargo ying writes its outputs there)";
        return Err(Error::io("create", out_dir)(std::io::Error::new(std::io::ErrorKind::AlreadyExists, why)));
    }
    for dir in ["refused", "tmp"] {
        let path = out_dir.join(dir);
        if path.exists() {
            std::fs::remove_dir_all(&path).map_err(Error::io("clear", &path))?;
        }
    }
    std::fs::create_dir_all(out_dir).map_err(Error::io("create", out_dir))
}

/// Removes the files of tests an earlier run left under `out_dir` that this run did not write: for a run of every
/// test (`only` is `None`), every one of the packages the run is of (its tests' and those of `not_run`), so that
/// every file of theirs is this run's and another workspace's sharing the target directory stay; for a filtered
/// run, only those of the tests in `only`, so the other tests' reports stay.
pub(crate) fn sweep(run: &Run, out_dir: &Path, only: Option<&[TestId]>, not_run: &[NotRunTarget]) -> Result<()> {
    let written: HashSet<PathBuf> = run
        .tests
        .iter()
        .flat_map(|test| {
            let files = &test.files;
            [&files.retained_flamegraph, &files.allocated_flamegraph, &files.retained_diff_flamegraph, &files.output]
                .into_iter()
                .flatten()
                .chain(test.leak.as_ref().map(|leak| &leak.path))
        })
        .map(|file| out_dir.join(file))
        .collect();
    let remove = |path: &Path| match std::fs::remove_file(path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(Error::io("remove", path)(error)),
        _ => Ok(()),
    };
    match only {
        None => {
            let packages: std::collections::BTreeSet<&str> = run
                .tests
                .iter()
                .map(|test| test.id.package.as_str())
                .chain(not_run.iter().map(|target| target.package.as_str()))
                .collect();
            for dir in TEST_FILES {
                for package in &packages {
                    let dir = out_dir.join(dir).join(ying_report::file_name_component(package));
                    sweep_dir(&dir, &written, &remove)?;
                    let _ = std::fs::remove_dir(&dir);
                }
            }
        }
        Some(tests) => {
            for id in tests {
                let files = FLAMEGRAPHS.map(|what| id.flamegraph_path(what));
                for file in files.iter().chain([&id.report_path(), &id.output_path()]) {
                    let path = out_dir.join(file);
                    if !written.contains(&path) {
                        remove(&path)?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// Removes every file under `dir` that is not `kept`, and the directories left empty.
fn sweep_dir(dir: &Path, kept: &HashSet<PathBuf>, remove: &impl Fn(&Path) -> Result<()>) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(()) };
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            sweep_dir(&path, kept, remove)?;
            // Only an empty directory goes.
            let _ = std::fs::remove_dir(&path);
        } else if !kept.contains(&path) {
            remove(&path)?;
        }
    }
    Ok(())
}

/// Writes every leak test's flamegraphs (retained memory with why it is still there), and a differential one for
/// each regressed or unstable test (by stack alone, as the baseline keeps it), on `threads` threads, and records
/// them.
pub(crate) fn flamegraphs(run: &mut Run, out_dir: &Path, threads: usize) -> Result<()> {
    let tests = &run.tests;
    let next = AtomicUsize::new(0);
    let written: Vec<(usize, Files)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.clamp(1, tests.len().max(1)))
            .map(|_| {
                scope.spawn(|| {
                    let mut written = Vec::new();
                    loop {
                        let index = next.fetch_add(1, Ordering::Relaxed);
                        let Some(test) = tests.get(index) else { return Ok(written) };
                        if let Some(files) = test_flamegraphs(test, out_dir)? {
                            written.push((index, files));
                        }
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect::<Result<Vec<Vec<_>>>>()
    })?
    .into_iter()
    .flatten()
    .collect();
    for (index, files) in written {
        let recorded = &mut run.tests[index].files;
        recorded.retained_flamegraph = files.retained_flamegraph;
        recorded.allocated_flamegraph = files.allocated_flamegraph;
        recorded.retained_diff_flamegraph = files.retained_diff_flamegraph;
    }
    Ok(())
}

/// Writes the allocated-memory flamegraph of `test`, if it is a leak test, as soon as its report is in, and lets go
/// of the report's sampled stacks, which nothing else reads: a run keeps every test's report until its end, and the
/// symbolised frames of those stacks were most of what a run of hundreds of tests held (tens of megabytes). When
/// the file cannot be written, the stacks stay, and the run's end tries again and says why it failed.
pub(crate) fn allocated_flamegraph_now(test: &mut TestRecord, out_dir: &Path) {
    let Some(leak) = &mut test.leak else { return };
    if test.files.allocated_flamegraph.is_some() {
        return;
    }
    let path = test.id.flamegraph_path(FLAMEGRAPHS[1]);
    let stacks = ying_frames::allocated_stacks(&leak.report);
    if write_flamegraph(&stacks, "allocated bytes", &test.id, &path, out_dir).is_ok() {
        test.files.allocated_flamegraph = Some(path);
        leak.report.sampled_stacks = Vec::new();
    }
}

/// Writes the flamegraph of `stacks` (`what` they weigh) of test `id` at `path` under `out_dir`.
fn write_flamegraph(stacks: &[FoldedStack], what: &str, id: &TestId, path: &str, out_dir: &Path) -> Result<()> {
    let file = out_dir.join(path);
    super::flamegraph::write(stacks, &format!("{what}: {id}"), &file).map_err(Error::io("write", &file))
}

/// Writes the flamegraphs of `test`, if it is a leak test (it has a report), and returns them; the allocated-memory
/// one only if [`allocated_flamegraph_now`] did not write it.
fn test_flamegraphs(test: &TestRecord, out_dir: &Path) -> Result<Option<Files>> {
    let Some(leak) = &test.leak else { return Ok(None) };
    let [retained_name, allocated_name, diff_name] = FLAMEGRAPHS;
    let retained_path = test.id.flamegraph_path(retained_name);
    let retained = super::flamegraph::retained_stacks_by_kind(&leak.report);
    write_flamegraph(&retained, "retained bytes", &test.id, &retained_path, out_dir)?;
    let allocated_path = match &test.files.allocated_flamegraph {
        Some(written) => written.clone(),
        None => {
            let path = test.id.flamegraph_path(allocated_name);
            let allocated = ying_frames::allocated_stacks(&leak.report);
            write_flamegraph(&allocated, "allocated bytes", &test.id, &path, out_dir)?;
            path
        }
    };
    let mut files = Files {
        retained_flamegraph: Some(retained_path),
        allocated_flamegraph: Some(allocated_path),
        ..Files::default()
    };
    if let (Some(before), Some(GateVerdict::Regressed | GateVerdict::Unstable)) = (&test.baseline, test.verdict()) {
        let path = test.id.flamegraph_path(diff_name);
        let file = out_dir.join(&path);
        let title = format!("retained bytes, baseline to now: {}", test.id);
        super::flamegraph::write_differential(before, &leak.report, &title, &file)
            .map_err(Error::io("write", &file))?;
        files.retained_diff_flamegraph = Some(path);
    }
    Ok(Some(files))
}

/// Writes `summary` (of `run`) to `path` and index.html to `out_dir`; index.html gives each failed test its reason,
/// each regressed test the figures that regressed and the sites they grew at, and the run's causes first.
pub(crate) fn summary(run: &Run, summary: &Summary, out_dir: &Path, path: &Path) -> Result<()> {
    summary.write(path).map_err(Error::io("write", path))?;
    let regressions: BTreeMap<TestId, Regression> = run
        .tests
        .iter()
        .filter_map(|test| {
            let gate = test.gate.as_ref().filter(|gate| gate.verdict == GateVerdict::Regressed)?;
            let figures = gate.regressions().map(Row::describe).collect();
            Some((test.id.clone(), Regression { figures, sites: test.grown_sites() }))
        })
        .collect();
    let index = out_dir.join("index.html");
    let causes: Vec<super::html::Cause> = run
        .causes()
        .into_iter()
        .map(|cause| super::html::Cause {
            line: cause.line,
            bytes: cause.bytes,
            tests: cause.tests.iter().map(|test| test.id.to_string()).collect(),
        })
        .collect();
    let html = super::html::index_html(summary, &regressions, &run.retained_statics(), &causes);
    ying_report::write_own_bytes(&index, html.as_bytes(), false).map_err(Error::io("write", &index))
}

#[cfg(test)]
mod tests {
    use super::{allocated_flamegraph_now, flamegraphs, prepare, sweep};
    use crate::model::{Leak, Outcome, Run, TestRecord};
    use std::path::Path;
    use std::time::Duration;
    use ying_report::report::{Attribution, Budgets, SampledStack, TestIdentity};
    use ying_report::{Frame, LeakReport, TargetKind, TestId};

    #[test]
    fn an_output_directory_that_is_a_file_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("ying");
        std::fs::write(&out, "").unwrap();
        let error = prepare(&out).unwrap_err();
        assert_eq!(error.to_string(), format!("failed to create {}", out.display()));
        let why = std::error::Error::source(&error).unwrap().to_string();
        assert_eq!(why, "a file is there, not a directory: move it away (cargo ying writes its outputs there)");
        std::fs::remove_file(&out).unwrap();
        prepare(&out).unwrap();
        assert!(out.is_dir());
    }

    fn id(name: &str) -> TestId {
        TestId::new("p", TargetKind::Test, "leaks", name)
    }

    /// A run of `ran`, whose only files are its output log and its allocated-bytes flamegraph.
    fn run(ran: &TestId) -> Run {
        let mut record = TestRecord::new(ran.clone(), Outcome::Failed, Duration::ZERO, String::new());
        record.files.output = Some(ran.output_path());
        record.files.allocated_flamegraph = Some(ran.flamegraph_path("allocated"));
        run_of(record)
    }

    /// A run of the one test `record`.
    fn run_of(record: TestRecord) -> Run {
        Run { tests: vec![record], elapsed: Duration::ZERO, max_fail: None, gate: None, interrupted: None }
    }

    /// A leak test `name` whose report has one sampled stack, through `function`.
    fn leak_test(name: &str, function: &str) -> TestRecord {
        let id = id(name);
        let mut record = TestRecord::new(id.clone(), Outcome::Passed, Duration::ZERO, String::new());
        let identity = TestIdentity::new("p", None, "leaks", name, "tests/leaks.rs", 3);
        let mut report = LeakReport::new(identity, Attribution::Process, Budgets::default());
        let mut stack = SampledStack::default();
        stack.allocated_bytes = 4096.0;
        stack.frames = vec![Frame::new(function, None, None), Frame::new(format!("leaks::{name}"), None, None)];
        report.sampled_stacks.push(stack);
        record.leak = Some(Leak { report, path: id.report_path() });
        record
    }

    #[test]
    fn a_tests_allocated_flamegraph_is_written_as_its_report_comes_in_and_its_sampled_stacks_let_go() {
        let out = tempfile::tempdir().unwrap();
        let mut record = leak_test("grows", "app::fill_the_cache");
        allocated_flamegraph_now(&mut record, out.path());
        let path = record.id.flamegraph_path("allocated");
        assert_eq!(record.files.allocated_flamegraph.as_ref(), Some(&path));
        let svg = std::fs::read_to_string(out.path().join(&path)).unwrap();
        assert!(svg.contains("app::fill_the_cache"), "{svg}");
        assert!(record.leak.as_ref().unwrap().report.sampled_stacks.is_empty());

        // The run's end writes the retained flamegraph and keeps the allocated one as it is.
        std::fs::write(out.path().join(&path), "kept").unwrap();
        let mut run = run_of(record);
        flamegraphs(&mut run, out.path(), 1).unwrap();
        let files = &run.tests[0].files;
        assert_eq!(files.allocated_flamegraph.as_ref(), Some(&path));
        assert_eq!(std::fs::read_to_string(out.path().join(&path)).unwrap(), "kept");
        assert!(out.path().join(files.retained_flamegraph.as_ref().unwrap()).exists());
    }

    #[test]
    fn an_allocated_flamegraph_that_cannot_be_written_yet_keeps_its_stacks_for_the_runs_end() {
        let out = tempfile::tempdir().unwrap();
        // A file where the flamegraphs' directory would be.
        std::fs::write(out.path().join("flamegraphs"), "").unwrap();
        let mut record = leak_test("grows", "app::fill_the_cache");
        allocated_flamegraph_now(&mut record, out.path());
        assert_eq!(record.files.allocated_flamegraph, None);
        assert_eq!(record.leak.as_ref().unwrap().report.sampled_stacks.len(), 1);

        // The run's end writes it once it can, from the stacks kept.
        std::fs::remove_file(out.path().join("flamegraphs")).unwrap();
        let mut run = run_of(record);
        flamegraphs(&mut run, out.path(), 1).unwrap();
        let path = run.tests[0].files.allocated_flamegraph.clone().unwrap();
        assert!(std::fs::read_to_string(out.path().join(path)).unwrap().contains("app::fill_the_cache"));
    }

    fn touch(out: &Path, files: &[String]) {
        for file in files {
            let path = out.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "x").unwrap();
        }
    }

    #[test]
    fn a_run_of_every_test_leaves_only_the_files_it_wrote() {
        let out = tempfile::tempdir().unwrap();
        let (ran, gone) = (id("ran"), id("gone"));
        let written = [ran.output_path(), ran.flamegraph_path("allocated")];
        let stale = [
            gone.report_path(),
            gone.flamegraph_path("retained"),
            ran.report_path(),
            ran.flamegraph_path("retained-diff"),
        ];
        touch(out.path(), &written);
        touch(out.path(), &stale);
        sweep(&run(&ran), out.path(), None, &[]).unwrap();
        for file in &written {
            assert!(out.path().join(file).exists(), "{file} is this run's");
        }
        for file in &stale {
            assert!(!out.path().join(file).exists(), "{file} is an earlier run's");
        }
        assert!(!out.path().join("reports").join("p").exists(), "a directory left empty goes");
    }

    #[test]
    fn a_run_of_every_test_leaves_another_workspaces_files_in_a_shared_target_directory() {
        let out = tempfile::tempdir().unwrap();
        let ran = id("ran");
        let theirs = TestId::new("their-package", TargetKind::Test, "t", "kept");
        let files = [theirs.report_path(), theirs.flamegraph_path("retained"), theirs.output_path()];
        touch(out.path(), &files);
        let stale = TestId::new("not-run-package", TargetKind::Test, "t", "gone");
        touch(out.path(), &[stale.report_path()]);
        let not_run = ying_report::NotRunTarget {
            package: "not-run-package".to_owned(),
            kind: "test".to_owned(),
            target: "t".to_owned(),
            reason: "its own harness".to_owned(),
            command: "cargo test -p not-run-package --test t".to_owned(),
        };
        sweep(&run(&ran), out.path(), None, &[not_run]).unwrap();
        for file in &files {
            assert!(out.path().join(file).exists(), "{file} is another workspace's");
        }
        assert!(!out.path().join(stale.report_path()).exists(), "a package of this run's is swept whole");
    }

    #[test]
    fn a_filtered_run_removes_the_earlier_files_of_its_own_tests_only() {
        let out = tempfile::tempdir().unwrap();
        let (ran, other) = (id("ran"), id("other"));
        let kept = [other.report_path(), other.flamegraph_path("retained"), ran.output_path()];
        touch(out.path(), &kept);
        touch(out.path(), &[ran.report_path()]);
        sweep(&run(&ran), out.path(), Some(std::slice::from_ref(&ran)), &[]).unwrap();
        for file in &kept {
            assert!(out.path().join(file).exists(), "{file} stays");
        }
        assert!(!out.path().join(ran.report_path()).exists(), "the run test's earlier report goes");
    }
}
