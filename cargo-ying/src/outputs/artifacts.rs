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
use ying_report::{GateVerdict, LeakReport, Summary, TestId};

/// The flamegraphs a test can have, by the name in their file names.
const FLAMEGRAPHS: [&str; 3] = ["retained", "allocated", "retained-diff"];

/// The directories of the tests' own files, under the output directory.
const TEST_FILES: [&str; 3] = ["reports", "flamegraphs", "output"];

/// Clears what an earlier run left under `out_dir` that no run reads again: refused reports and scratch space.
/// The tests' reports, flamegraphs and kept outputs stay until [`sweep`]: a test's files are written over its
/// earlier ones, as creating and deleting a file for every test costs some file systems more than a short test.
pub(crate) fn prepare(out_dir: &Path) -> Result<()> {
    for dir in ["refused", "tmp"] {
        let path = out_dir.join(dir);
        if path.exists() {
            std::fs::remove_dir_all(&path).map_err(Error::io("clear", &path))?;
        }
    }
    std::fs::create_dir_all(out_dir).map_err(Error::io("create", out_dir))
}

/// Removes the files of tests an earlier run left under `out_dir` that this run did not write: for a run of every
/// test (`only` is `None`), every one, so that every file there is this run's; for a filtered run, only those of
/// the tests in `only`, so the other tests' reports stay.
pub(crate) fn sweep(run: &Run, out_dir: &Path, only: Option<&[TestId]>) -> Result<()> {
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
            for dir in TEST_FILES {
                sweep_dir(&out_dir.join(dir), &written, &remove)?;
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

/// Writes the flamegraphs of `test`, if it is a leak test (it has a report), and returns them.
fn test_flamegraphs(test: &TestRecord, out_dir: &Path) -> Result<Option<Files>> {
    let Some(leak) = &test.leak else { return Ok(None) };
    let [retained_name, allocated_name, diff_name] = FLAMEGRAPHS;
    let paths = [
        (
            test.id.flamegraph_path(retained_name),
            "retained bytes",
            super::flamegraph::retained_stacks_by_kind(&leak.report),
        ),
        (test.id.flamegraph_path(allocated_name), "allocated bytes", ying_frames::allocated_stacks(&leak.report)),
    ];
    for (path, what, stacks) in &paths {
        let file = out_dir.join(path);
        super::flamegraph::write(stacks, &format!("{what}: {}", test.id), &file).map_err(Error::io("write", &file))?;
    }
    let [(retained_path, ..), (allocated_path, ..)] = paths;
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

/// Writes summary.json and index.html of `summary` (of `run`) to `out_dir`; index.html gives each failed leak test
/// without another reason the message of its report, and each regressed test the figures that regressed and the
/// sites they grew at.
pub(crate) fn summary(run: &Run, summary: &Summary, out_dir: &Path) -> Result<()> {
    let path = out_dir.join("summary.json");
    summary.write(&path).map_err(Error::io("write", &path))?;
    let messages: BTreeMap<TestId, String> = summary
        .tests
        .iter()
        .filter(|test| test.outcome.is_failure() && test.reason.is_none())
        .filter_map(|test| {
            let report = LeakReport::read(&out_dir.join(test.report.as_ref()?), &test.id).ok()?;
            Some((test.id.clone(), report.message?))
        })
        .collect();
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
    std::fs::write(&index, super::html::index_html(summary, &messages, &regressions))
        .map_err(Error::io("write", &index))
}

#[cfg(test)]
mod tests {
    use super::sweep;
    use crate::model::{Outcome, Run, TestRecord};
    use std::path::Path;
    use std::time::Duration;
    use ying_report::{TargetKind, TestId};

    fn id(name: &str) -> TestId {
        TestId::new("p", TargetKind::Test, "leaks", name)
    }

    /// A run of `ran`, whose only files are its output log and its allocated-bytes flamegraph.
    fn run(ran: &TestId) -> Run {
        let mut record = TestRecord::new(ran.clone(), Outcome::Failed, Duration::ZERO, String::new());
        record.files.output = Some(ran.output_path());
        record.files.allocated_flamegraph = Some(ran.flamegraph_path("allocated"));
        Run { tests: vec![record], elapsed: Duration::ZERO, max_fail: None, gate: None, interrupted: None }
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
        sweep(&run(&ran), out.path(), None).unwrap();
        for file in &written {
            assert!(out.path().join(file).exists(), "{file} is this run's");
        }
        for file in &stale {
            assert!(!out.path().join(file).exists(), "{file} is an earlier run's");
        }
        assert!(!out.path().join("reports").join("p").exists(), "a directory left empty goes");
    }

    #[test]
    fn a_filtered_run_removes_the_earlier_files_of_its_own_tests_only() {
        let out = tempfile::tempdir().unwrap();
        let (ran, other) = (id("ran"), id("other"));
        let kept = [other.report_path(), other.flamegraph_path("retained"), ran.output_path()];
        touch(out.path(), &kept);
        touch(out.path(), &[ran.report_path()]);
        sweep(&run(&ran), out.path(), Some(std::slice::from_ref(&ran))).unwrap();
        for file in &kept {
            assert!(out.path().join(file).exists(), "{file} stays");
        }
        assert!(!out.path().join(ran.report_path()).exists(), "the run test's earlier report goes");
    }
}
