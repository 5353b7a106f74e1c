//! `cargo ying merge`: joins the summaries of partitioned runs into one run, judged and written as `cargo ying test`
//! writes one (summary.json, index.html, flamegraphs, JUnit, GitHub's annotations and job summary), so that a
//! matrix of CI runners gates as one run and the job that holds the verdict shows what a run shows. The shards may have run anywhere (each runner its own checkout path), so
//! a summary is this workspace's when every package it has tests of is one of this workspace's: another
//! workspace's summary is refused, naming its packages.

use crate::baseline::BaselineFile;
use crate::cli::MergeArgs;
use crate::ending::{self, Ending};
use crate::error::{Error, MergeHint, Result};
use crate::model::{FailedAttempt, Leak, Outcome, Run, TestRecord};
use crate::outputs::artifacts;
use crate::outputs::libtest_json::MessageFormat;
use crate::outputs::terminal::{self, Reporter};
use crate::run::exec::run_lock::RunLock;
use crate::saved;
use crate::settings;
use crate::workspace::Workspace;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};
use ying_report::{GateVerdict, LeakReport, Measured, NotRunTarget, SummaryTest, TestId, TestOutcome};

/// Runs `cargo ying merge`; returns the exit code.
pub(crate) fn run(args: &MergeArgs) -> Result<u8> {
    settings::refuse_reruns(&args.gating, "merge")?;
    let workspace = Workspace::open(args.manifest_path.as_deref(), &[])?;
    let baseline = BaselineFile::open(workspace.baseline_path(args.baseline.as_deref()))?;
    let gating = settings::gating(&args.gating, &workspace.place.config);
    let summary_path = args.output.clone().unwrap_or_else(|| workspace.out_dir(None).join("summary.json"));
    // The merged run's files go where its summary does, as a run's beside its summary.json.
    let out_dir = match summary_path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        Some(dir) => dir.to_owned(),
        None => PathBuf::from("."),
    };

    // Every summary is read and checked before anything is written.
    let mut shards = Vec::with_capacity(args.summaries.len());
    // Which summary each test came from: a test in two of them (the same shard twice) would be counted twice.
    let mut sources: BTreeMap<TestId, &Path> = BTreeMap::new();
    let packages: BTreeSet<&str> = workspace.metadata.packages.iter().map(|package| package.name.as_str()).collect();
    for path in &args.summaries {
        let summary = saved::read_summary(path, "")?;
        let foreign: BTreeSet<&str> = summary
            .tests
            .iter()
            .map(|test| test.id.package.as_str())
            .filter(|package| !packages.contains(package))
            .collect();
        if !foreign.is_empty() {
            return Err(Error::ForeignSummary {
                summary: path.clone(),
                packages: foreign.into_iter().map(|package| format!("`{package}`")).collect::<Vec<_>>().join(", "),
                root: workspace.place.root.clone(),
            });
        }
        for test in &summary.tests {
            if let Some(first) = sources.insert(test.id.clone(), path) {
                let same = first == path.as_path() || same_file(first, path);
                return Err(Error::MergeOverlap {
                    first: first.to_owned(),
                    second: path.clone(),
                    test: test.id.to_string(),
                    hint: if same { MergeHint::SameFile } else { MergeHint::Overlap },
                });
            }
        }
        shards.push((path, summary));
    }

    std::fs::create_dir_all(&out_dir).map_err(Error::io("create", &out_dir))?;
    let _lock = RunLock::acquire(&out_dir)?;
    artifacts::prepare(&out_dir)?;
    let package_dirs = workspace.package_dirs();
    let mut tests = Vec::new();
    let mut not_run = BTreeSet::new();
    let mut measured = Measured::LeakTests;
    let mut started_at: Option<SystemTime> = None;
    let mut elapsed = Duration::ZERO;
    // What each shard's reruns showed of a test: the merged verdict keeps it.
    let mut reruns = Vec::new();
    for (path, summary) in shards {
        if summary.measured == Measured::All {
            measured = Measured::All;
        }
        if let Some(start) = summary.started_at.as_deref().and_then(|start| humantime::parse_rfc3339(start).ok()) {
            started_at = Some(started_at.map_or(start, |earliest| earliest.min(start)));
        }
        // Shards run side by side: the longest is the run's.
        elapsed = elapsed.max(Duration::from_secs_f64(summary.duration.unwrap_or(0.0).max(0.0)));
        let dir = path.parent().unwrap_or(Path::new("."));
        for test in summary.tests {
            if let Some(shown) = test.reruns.clone() {
                reruns.push((test.id.clone(), shown));
            }
            let mut record = record_of(test, dir, &out_dir)?;
            record.package_dir = package_dirs.get(&record.id.package).cloned();
            tests.push(record);
        }
        // Every shard names the same doctests and custom-harness targets: once each.
        not_run.extend(summary.not_run);
    }
    tests.sort_by(|a, b| a.id.cmp(&b.id));
    let shown = tests.len();
    let failed = tests.iter().filter(|test| test.outcome.is_failure()).count();
    let mut run = Run { tests, elapsed, max_fail: None, gate: None, interrupted: None };
    if baseline.baseline.is_some() {
        run.judge(
            baseline.path.clone(),
            baseline.entries(),
            [baseline.measured(), measured],
            gating.clone(),
            true,
            args.gating.check,
        );
        // A shard's reruns found some regressions not to reproduce: the merged verdict keeps what they showed.
        for (id, shown) in reruns {
            if run.tests.iter().any(|test| test.id == id && test.verdict() == Some(GateVerdict::Regressed)) {
                run.settle(&id, shown);
            }
        }
    }
    eprintln!(
        "{:>12} {} summaries: {shown} tests, {failed} failed -> {}",
        "Merged",
        args.summaries.len(),
        summary_path.display()
    );
    let reporter = Reporter::new(terminal::use_color(args.report.color), true, false, false);
    let not_run: Vec<NotRunTarget> = not_run.into_iter().collect();
    let ending = Ending {
        command: "cargo ying merge",
        out_dir,
        summary_path,
        jobs: crate::config::cores(),
        measured,
        started_at: started_at.unwrap_or_else(SystemTime::now),
        gating: &gating,
        save_baseline: false,
        junit: args.report.junit.as_deref(),
        message_format: MessageFormat::Human,
        workspace_root: &workspace.place.root,
        not_run: &not_run,
        replaced: None,
        nextest: None,
    };
    ending::write(&mut run, &ending, &reporter, &baseline)?;
    ending::close(&run, &ending, &reporter, baseline)
}

/// The run model's record of a shard's test, as its summary (in `dir`) tells it; its report and kept output copied
/// from `dir` into `out_dir`.
fn record_of(test: SummaryTest, dir: &Path, out_dir: &Path) -> Result<TestRecord> {
    let duration = Duration::from_secs_f64(test.duration.unwrap_or(0.0).max(0.0));
    let outcome = match test.outcome {
        TestOutcome::Passed => Outcome::Passed,
        TestOutcome::Failed => Outcome::Failed,
        // The signal is in the reason the shard gave, which the record keeps.
        TestOutcome::Crashed => Outcome::Crashed(String::new()),
        TestOutcome::TimedOut => Outcome::TimedOut(duration),
        TestOutcome::Ignored => Outcome::Ignored,
        TestOutcome::NotRun => Outcome::NotRun,
    };
    let mut record = TestRecord::new(test.id.clone(), outcome, duration, String::new());
    record.reason = test.reason;
    record.warnings = test.warnings;
    let earlier = test.attempts.unwrap_or(1).saturating_sub(1);
    record.failed_attempts =
        (0..earlier).map(|_| FailedAttempt { outcome: Outcome::Failed, duration: Duration::ZERO }).collect();
    if let Some(path) = test.report {
        let from = dir.join(&path);
        let report =
            LeakReport::read(&from, &test.id).map_err(|source| Error::ReadReport { path: from.clone(), source })?;
        copy_into(&from, &out_dir.join(&path))?;
        record.leak = Some(Leak { report, path });
    }
    if let Some(path) = test.output {
        let from = dir.join(&path);
        if from.is_file() {
            copy_into(&from, &out_dir.join(&path))?;
            record.files.output = Some(path);
        }
    }
    Ok(record)
}

/// Copies `from` to `to` (its directory made), unless they are one file.
fn copy_into(from: &Path, to: &Path) -> Result<()> {
    if same_file(from, to) {
        return Ok(());
    }
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir).map_err(Error::io("create", dir))?;
    }
    std::fs::copy(from, to).map_err(Error::io("write", to))?;
    Ok(())
}

/// Whether two paths name one file (through links or `..`).
fn same_file(a: &Path, b: &Path) -> bool {
    matches!((std::fs::canonicalize(a), std::fs::canonicalize(b)), (Ok(a), Ok(b)) if a == b)
}
