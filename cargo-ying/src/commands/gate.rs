//! `cargo ying gate`: judges what a `cargo nextest run --profile ying` left (the wrapper's records and reports, see
//! `nextest::record`) as `cargo ying test --measure all` judges its own run: the reports stored, the flamegraphs
//! drawn, summary.json and index.html written, the baseline compared and, when asked, saved; the closing words and
//! the exit code are the same.
//!
//! nextest chose and ran the tests, so the gate does not know which tests were left out on purpose: a test of the
//! baseline that the run did not measure is not compared, never "missing", and its entry stays when the baseline is
//! saved. A regression is not run again (nextest's retries are for failures): its first measure is its verdict.

use crate::baseline::BaselineFile;
use crate::cli::GateArgs;
use crate::ending::{self, Ending};
use crate::error::{Error, Result};
use crate::model::{FailedAttempt, Leak, Outcome, Run, TestRecord};
use crate::nextest::record::{self, Record};
use crate::outputs::artifacts;
use crate::outputs::libtest_json::MessageFormat;
use crate::outputs::terminal::{self, Reporter};
use crate::run::exec::run_lock::RunLock;
use crate::settings;
use crate::workspace::{Place, Workspace};
use std::path::Path;
use std::time::{Duration, SystemTime};
use ying_report::{LeakReport, Measured, TestId, TestOutcome};

/// Runs `cargo ying gate`; returns the exit code.
pub(crate) fn run(args: &GateArgs) -> Result<u8> {
    settings::refuse_reruns(&args.gating, "gate")?;
    let place = match (&args.workspace_remap, &args.archive_file) {
        (Some(root), _) => Place::read(root)?,
        (None, Some(_)) => Place::read(&std::env::current_dir().map_err(Error::io("read", "the current directory"))?)?,
        (None, None) => Workspace::open(args.manifest_path.as_deref(), &[])?.place,
    };
    if let Some(archive) = &args.archive_file {
        std::fs::metadata(archive).map_err(Error::io("read", archive))?;
    }
    let out_dir = place.out_dir(args.target_dir.as_deref());
    let _lock = RunLock::acquire(&out_dir)?;
    let baseline_path = place.baseline_path(args.saving.baseline.as_deref());
    let baseline = if args.saving.save_baseline {
        BaselineFile::open_to_save(baseline_path)?
    } else {
        BaselineFile::open(baseline_path)?
    };
    let run_dir = match &args.run_id {
        Some(id) => record::run_dir(&out_dir, id),
        None => record::last_run(&out_dir).ok_or_else(|| Error::NoNextestRun(out_dir.clone()))?,
    };
    let records = Record::read_all(&run_dir).map_err(|_| Error::NoNextestRun(out_dir.clone()))?;
    if records.is_empty() {
        return Err(Error::NoNextestRun(out_dir));
    }
    let run_name = format!("nextest run {}", run_dir.file_name().unwrap_or_default().to_string_lossy());
    for record in &records {
        place.check_own(&run_name, record.workspace_root.as_deref())?;
    }

    artifacts::prepare(&out_dir)?;
    // Each test's start and end, its start read once.
    let spans: Vec<(SystemTime, SystemTime)> = records
        .iter()
        .filter_map(|record| {
            let start = humantime::parse_rfc3339(&record.started_at).ok()?;
            Some((start, start + Duration::from_secs_f64(record.duration.max(0.0))))
        })
        .collect();
    let started_at = spans.iter().map(|(start, _)| *start).min().unwrap_or_else(SystemTime::now);
    let ended = spans.iter().map(|(_, end)| *end).max().unwrap_or(started_at);
    let mut tests = Vec::with_capacity(records.len());
    for record in records {
        tests.push(test_record(record, &run_dir, &out_dir)?);
    }
    let replaced: Vec<TestId> = tests.iter().map(|test| test.id.clone()).collect();
    let elapsed = ended.duration_since(started_at).unwrap_or_default();
    let mut run = Run { tests, elapsed, max_fail: None, gate: None, interrupted: None };

    let gating = settings::gating(&args.gating, &place.config);
    let mut reporter = Reporter::new(terminal::use_color(args.report.color), !args.verbose, args.verbose, false);
    // Which run, and how long ago: a gate after a nextest run without the profile would judge an older run.
    let age = SystemTime::now().duration_since(started_at).unwrap_or_default();
    eprintln!(
        "{:>12} {} tests nextest ran in run {}, which started {} ago",
        "Gating",
        run.tests.len(),
        run_dir.file_name().unwrap_or_default().to_string_lossy(),
        humantime::format_duration(Duration::from_secs(age.as_secs()))
    );
    for test in &run.tests {
        reporter.result(test);
    }
    if baseline.baseline.is_some() {
        run.judge(
            baseline.path.clone(),
            baseline.entries(),
            [baseline.measured(), Measured::All],
            gating.clone(),
            false,
            args.gating.check,
        );
    }
    let ending = Ending {
        out_dir,
        jobs: crate::config::cores(),
        measured: Measured::All,
        started_at,
        gating: &gating,
        save_baseline: args.saving.save_baseline,
        junit: args.report.junit.as_deref(),
        message_format: MessageFormat::Human,
        workspace_root: &place.root,
        not_run: &[],
        replaced: Some(&replaced),
    };
    ending::write(&mut run, &ending, &reporter, &baseline)?;
    ending::close(&run, &ending, &reporter, baseline)
}

/// The run model's record of a test from the wrapper's, its report read from `run_dir` and stored in `out_dir` as
/// `cargo ying test` stores one.
fn test_record(record: Record, run_dir: &Path, out_dir: &Path) -> Result<TestRecord> {
    let duration = Duration::from_secs_f64(record.duration.max(0.0));
    let outcome = match (record.outcome, record.exit_code) {
        (_, Some(code)) if record.unreported => Outcome::Unreported { code, from_outside: true },
        _ if record.unmeasured => Outcome::Unmeasured,
        (TestOutcome::Passed, _) => Outcome::Passed,
        (TestOutcome::Crashed, _) => Outcome::Crashed(record.signal.clone().unwrap_or_default()),
        (TestOutcome::TimedOut, _) => Outcome::TimedOut(duration),
        (TestOutcome::Ignored, _) => Outcome::Ignored,
        (TestOutcome::NotRun, _) => Outcome::NotRun,
        (TestOutcome::Failed, _) => Outcome::Failed,
    };
    let mut test = TestRecord::new(record.id.clone(), outcome, duration, String::new());
    test.warnings = record.warnings;
    // The attempts before the last failed (nextest retries a failure only).
    test.failed_attempts =
        (1..record.attempt).map(|_| FailedAttempt { outcome: Outcome::Failed, duration: Duration::ZERO }).collect();
    if let Some(path) = record.report {
        let from = run_dir.join(&path);
        let report =
            LeakReport::read(&from, &record.id).map_err(|source| Error::ReadReport { path: from.clone(), source })?;
        let to = out_dir.join(&path);
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir).map_err(Error::io("create", dir))?;
        }
        std::fs::copy(&from, &to).map_err(Error::io("write", &to))?;
        test.leak = Some(Leak { report, path });
    }
    Ok(test)
}
