//! The run's files under `<target-dir>/ying/`: each leak test's report and flamegraphs (retained and allocated
//! memory, and for a regression retained memory baseline against now), summary.json and index.html. Every file of
//! a test is named after its [`TestId`](ying_report::TestId), so no two tests share one.

use crate::error::{Error, Result};
use crate::model::{Files, Run, TestRecord};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use ying_report::{GateVerdict, LeakReport, Summary, TestId};

/// The flamegraphs a test can have, by the name in their file names.
const FLAMEGRAPHS: [&str; 3] = ["retained", "allocated", "retained-diff"];

/// Clears what an earlier run left under `out_dir` that this run replaces: for a run of every test (`only` is
/// `None`), all reports, flamegraphs and kept outputs, so every file there is this run's; for a filtered run, only
/// the files of the tests in `only`, so the other tests' reports stay. Refused reports and scratch space always go.
pub fn prepare(out_dir: &Path, only: Option<&[TestId]>) -> Result<()> {
    let remove_dir = |dir: &str| {
        let path = out_dir.join(dir);
        if path.exists() {
            std::fs::remove_dir_all(&path).map_err(Error::io("clear", &path))?;
        }
        Ok::<_, Error>(())
    };
    for dir in ["refused", "tmp"] {
        remove_dir(dir)?;
    }
    match only {
        None => {
            for dir in ["reports", "flamegraphs", "output"] {
                remove_dir(dir)?;
            }
        }
        Some(tests) => {
            for id in tests {
                let files = FLAMEGRAPHS.map(|what| id.flamegraph_path(what));
                for file in files.iter().chain([&id.report_path(), &id.output_path()]) {
                    let path = out_dir.join(file);
                    match std::fs::remove_file(&path) {
                        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                            return Err(Error::io("remove", &path)(error));
                        }
                        _ => {}
                    }
                }
            }
        }
    }
    std::fs::create_dir_all(out_dir).map_err(Error::io("create", out_dir))
}

/// Writes every leak test's flamegraphs, and a differential one for each regressed or unstable test, on
/// `threads` threads, and records them.
pub fn flamegraphs(run: &mut Run, out_dir: &Path, threads: usize) -> Result<()> {
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
    let retained = leak.report.retained_stacks();
    let [retained_name, allocated_name, diff_name] = FLAMEGRAPHS;
    let paths = [
        (test.id.flamegraph_path(retained_name), "retained bytes", retained.clone()),
        (test.id.flamegraph_path(allocated_name), "allocated bytes", leak.report.allocated_stacks()),
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
        super::flamegraph::write_differential(&before.retained_stacks, &retained, &title, &file)
            .map_err(Error::io("write", &file))?;
        files.retained_diff_flamegraph = Some(path);
    }
    Ok(Some(files))
}

/// Writes summary.json and index.html of `summary` to `out_dir`; index.html gives each failed leak test without
/// another reason the message of its report.
pub fn summary(summary: &Summary, out_dir: &Path) -> Result<()> {
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
    let index = out_dir.join("index.html");
    std::fs::write(&index, super::html::index_html(summary, &messages)).map_err(Error::io("write", &index))
}
