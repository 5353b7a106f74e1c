//! `cargo ying gate`: judges what a `cargo nextest run --profile ying` left (the wrapper's records, finished here for
//! the tests it ran in its own place, and the reports, see `nextest::record` and `run::exec::finish`) as `cargo ying
//! test --measure all` judges its own run: the reports stored, the flamegraphs drawn, summary.json and index.html
//! written, the baseline compared and, when asked, saved; the closing words and
//! the exit code are the same.
//!
//! nextest chose and ran the tests; the wrapper saw what it listed of each binary, so the gate tells the tests
//! nextest's filter skipped (named, not compared, their entries kept) and those it ignored from those that ran. A
//! test of the baseline in a binary nextest listed (or, with `--archive-file`, in a binary of the archive) that the
//! run has no record of is missing, as `cargo ying test` says; one in a binary the run never saw is not compared.
//! A test that started and did not end (killed without a word) is a failure, never a pass. A regression is not run
//! again (nextest's retries are for failures): its first measure is its verdict.

use crate::baseline::BaselineFile;
use crate::cli::GateArgs;
use crate::ending::{self, Ending};
use crate::error::{Error, Result};
use crate::model::{FailedAttempt, Leak, Outcome, Run, TestRecord};
use crate::nextest::archive::{self, ArchivedBinary};
use crate::nextest::record::{self, Listing, Record};
use crate::outputs::artifacts;
use crate::outputs::libtest_json::MessageFormat;
use crate::outputs::terminal::{self, Reporter};
use crate::run::exec::run_lock::RunLock;
use crate::run::names::symbols::Symbolizer;
use crate::settings;
use crate::workspace::{Place, Workspace};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, SystemTime};
use ying_report::{BaselineEntry, LeakReport, Measured, TargetKind, TestId, TestOutcome};

/// Runs `cargo ying gate`; returns the exit code.
pub(crate) fn run(args: &GateArgs) -> Result<u8> {
    settings::refuse_reruns(&args.gating, "gate")?;
    // Where each package is, for the paths of GitHub's annotations: unknown for an archive's run, whose sources
    // need not be there.
    let mut package_dirs = BTreeMap::new();
    let place = match (&args.workspace_remap, &args.archive_file) {
        (Some(root), _) => Place::read(root)?,
        (None, Some(_)) => match args.manifest_path.as_deref().and_then(Path::parent) {
            Some(root) if !root.as_os_str().is_empty() => Place::read(root)?,
            _ => Place::read(&std::env::current_dir().map_err(Error::io("read", "the current directory"))?)?,
        },
        (None, None) => {
            let workspace = Workspace::open(args.manifest_path.as_deref(), &[])?;
            package_dirs = workspace.package_dirs();
            workspace.place
        }
    };
    let archived = match &args.archive_file {
        Some(archive) => {
            archive::binaries(archive).map_err(|reason| Error::Archive { path: archive.clone(), reason })?
        }
        None => Vec::new(),
    };
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
    let mut records = record::read_all(&run_dir)?;
    if records.is_empty() {
        return Err(Error::NoNextestRun(out_dir));
    }
    let run_id = run_dir.file_name().unwrap_or_default().to_string_lossy().into_owned();
    let run_name = format!("nextest run {run_id}");
    for record in &records {
        place.check_own(&run_name, record.workspace_root.as_deref())?;
    }
    // The tests the wrapper ran in its own place, finished from what their processes left, and rewritten finished:
    // a second gate of the run reads them as the first did.
    crate::run::exec::finish::finish_all(&mut records, &run_dir);
    let rewritten = records
        .iter()
        .filter(|record| record.exec.is_some())
        .map(|record| record::write(record, &run_dir))
        .fold(true, |all, written| all & written.is_ok());
    // What the tests' processes left that was not taken (a test killed before it ended), and the end marks: the
    // run is over, and nothing reads them again once every record is rewritten.
    if rewritten {
        let _ = std::fs::remove_dir_all(run_dir.join(record::TMP));
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
    let attempts_allowed = records.iter().filter_map(|record| record.attempts_allowed).max().unwrap_or(1);
    // The stacks the wrapper left as addresses, named here once per binary, with the frames kept between runs.
    let symbolizer =
        Symbolizer::keeping_frames_in(out_dir.join("symbols")).excusing(place.config.allow.clone().unwrap_or_default());
    let mut tests = Vec::with_capacity(records.len());
    for record in records {
        let mut test = test_record(record, &run_dir, &out_dir, &symbolizer)?;
        test.package_dir = package_dirs.get(&test.id.package).cloned();
        tests.push(test);
    }
    symbolizer.save();
    // The tests nextest ran, whose files this run replaces.
    let replaced: Vec<TestId> = tests.iter().map(|test| test.id.clone()).collect();
    // What nextest listed and did not run: ignored, or skipped by its filter.
    let seen = Seen::of(&Listing::read_all(&run_dir)?, &archived, &tests)?;
    tests.extend(
        seen.ignored.iter().map(|id| TestRecord::new(id.clone(), Outcome::Ignored, Duration::ZERO, String::new())),
    );
    tests.sort_by(|a, b| a.id.cmp(&b.id));
    let elapsed = ended.duration_since(started_at).unwrap_or_default();
    let mut run = Run { tests, elapsed, max_fail: None, gate: None, interrupted: None };

    let gating = settings::gating(&args.gating, &place.config);
    let mut reporter = Reporter::new(terminal::use_color(args.report.color), !args.verbose, args.verbose, false);
    reporter.attempts_allowed(attempts_allowed);
    // Which run, and how long ago: a gate after a nextest run without the profile would judge an older run.
    let age = SystemTime::now().duration_since(started_at).unwrap_or_default();
    eprintln!(
        "{:>12} {} tests nextest ran in run {}, which started {} ago",
        "Gating",
        replaced.len(),
        run_id,
        humantime::format_duration(Duration::from_secs(age.as_secs()))
    );
    for test in &run.tests {
        for (number, attempt) in test.failed_attempts.iter().enumerate() {
            reporter.attempt(&test.id, number + 1, attempt);
        }
        reporter.result(test);
    }
    if !seen.skipped.is_empty() {
        eprintln!(
            "{:>12} {} test{} nextest listed and did not run (its filter): not measured, not compared; their baseline \
             entries stay",
            "SKIPPED",
            seen.skipped.len(),
            if seen.skipped.len() == 1 { "" } else { "s" }
        );
    }
    let skipped: Vec<TestId> = seen.skipped.iter().cloned().collect();
    if baseline.baseline.is_some() {
        // The entries this run can speak for: its tests', and those of a binary it saw that it neither ran, skipped
        // nor ignored (missing). Without a listing or an archive, only its tests'.
        let entries: BTreeMap<TestId, BaselineEntry> = baseline
            .entries()
            .iter()
            .filter(|(id, _)| {
                replaced.binary_search(id).is_ok()
                    || (seen.binary_seen(id) && !seen.skipped.contains(*id) && !seen.ignored.contains(*id))
            })
            .map(|(id, entry)| (id.clone(), entry.clone()))
            .collect();
        run.judge(
            baseline.path.clone(),
            &entries,
            [baseline.measured(), Measured::All],
            gating.clone(),
            !seen.binaries.is_empty(),
            args.gating.check,
        );
    }
    let ending = Ending {
        command: "cargo ying gate",
        summary_path: out_dir.join("summary.json"),
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
        nextest: Some((&run_id, &skipped)),
    };
    ending::write(&mut run, &ending, &reporter, &baseline)?;
    // nextest's runs pile up under the target directory (24 MB after 8 runs of a 60-test suite): the newest few stay.
    record::prune(&ending.out_dir, &run_dir);
    ending::close(&run, &ending, &reporter, baseline)
}

/// The run model's record of a test from the wrapper's, its report read from `run_dir` (the stacks the wrapper left
/// as addresses named by `symbolizer`) and stored in `out_dir` as `cargo ying test` stores one.
fn test_record(record: Record, run_dir: &Path, out_dir: &Path, symbolizer: &Symbolizer) -> Result<TestRecord> {
    let duration = Duration::from_secs_f64(record.duration.max(0.0));
    let output = record.output_tail.clone().unwrap_or_default();
    let mut test = TestRecord::new(record.id.clone(), outcome_of(&record), duration, output);
    test.panic = record.panic.clone();
    test.warnings = record.warnings;
    // The attempts before the last (nextest retries a failure only).
    test.failed_attempts = record
        .earlier
        .iter()
        .map(|earlier| FailedAttempt {
            outcome: outcome_of(earlier),
            duration: Duration::from_secs_f64(earlier.duration.max(0.0)),
        })
        .collect();
    if let Some(path) = record.report {
        let from = run_dir.join(&path);
        let mut report =
            LeakReport::read(&from, &record.id).map_err(|source| Error::ReadReport { path: from.clone(), source })?;
        let to = out_dir.join(&path);
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir).map_err(Error::io("create", dir))?;
        }
        let named = match &record.unnamed {
            Some(unnamed) if unnamed.is_there() => {
                symbolizer.complete(&mut report, &unnamed.binary, &[unnamed.package_dir.as_path()])
            }
            Some(unnamed) => {
                test.warnings.push(format!(
                    "its stacks are not named: its binary {} was removed or built anew since it ran",
                    unnamed.binary.display()
                ));
                false
            }
            None => false,
        };
        if named {
            report.write(&to).map_err(Error::io("write", &to))?;
        } else {
            std::fs::copy(&from, &to).map_err(Error::io("write", &to))?;
        }
        test.leak = Some(Leak { report, path });
    }
    Ok(test)
}

/// How the attempt `record` is of ended, in the run model's words.
fn outcome_of(record: &Record) -> Outcome {
    match (record.outcome, record.exit_code) {
        // Started, and killed before it ended, without a word.
        _ if record.running => Outcome::Stopped(None),
        (_, Some(code)) if record.unreported => Outcome::Unreported { code, from_outside: true },
        _ if record.unmeasured => Outcome::Unmeasured,
        (TestOutcome::TimedOut, _) => {
            Outcome::TimedOut(Duration::from_secs_f64(record.timeout.unwrap_or(record.duration).max(0.0)))
        }
        (TestOutcome::Crashed, _) if record.stopped_by.is_some() => Outcome::Stopped(record.stopped_by.clone()),
        (TestOutcome::Passed, _) => Outcome::Passed,
        (TestOutcome::Crashed, _) => Outcome::Crashed(record.signal.clone().unwrap_or_default()),
        (TestOutcome::Ignored, _) => Outcome::Ignored,
        (TestOutcome::NotRun, _) => Outcome::NotRun,
        (TestOutcome::Failed, _) => Outcome::Failed,
    }
}

/// What the run saw beyond its records: the tests nextest listed and did not run, and the binaries it (or the
/// archive) holds.
struct Seen {
    /// Listed only as ignored, and not run.
    ignored: BTreeSet<TestId>,
    /// Listed, not ignored, and not run: nextest's filter left them out.
    skipped: BTreeSet<TestId>,
    /// The binaries listed or archived, as (package, kind, target).
    binaries: BTreeSet<(String, TargetKind, String)>,
}

impl Seen {
    /// What `listings` and the `archived` binaries say beyond the run's `tests`.
    fn of(listings: &[Listing], archived: &[ArchivedBinary], tests: &[TestRecord]) -> Result<Self> {
        let binary_of = |id: &TestId| (id.package.clone(), id.kind, id.target.clone());
        let ran: BTreeSet<&TestId> = tests.iter().map(|test| &test.id).collect();
        let mut binaries = BTreeSet::new();
        let (mut listed, mut ignored) = (BTreeSet::new(), BTreeSet::new());
        for listing in listings {
            for name in &listing.tests {
                let (id, _) = record::test_of(&listing.binary_id, &listing.binary, name)?;
                binaries.insert(binary_of(&id));
                if listing.ignored {
                    ignored.insert(id)
                } else {
                    listed.insert(id)
                };
            }
        }
        for binary in archived {
            let (id, _) = record::test_of(&binary.binary_id, &binary.binary, "-")?;
            binaries.insert(binary_of(&id));
        }
        // `--list` lists the ignored tests too; `--list --ignored` only them.
        let not_run = |set: &BTreeSet<TestId>| set.iter().filter(|id| !ran.contains(id)).cloned().collect();
        let ignored: BTreeSet<TestId> = not_run(&ignored);
        let skipped: BTreeSet<TestId> =
            not_run(&listed).into_iter().filter(|id: &TestId| !ignored.contains(id)).collect();
        Ok(Self { ignored, skipped, binaries })
    }

    /// Whether the run saw the binary of test `id`.
    fn binary_seen(&self, id: &TestId) -> bool {
        self.binaries.contains(&(id.package.clone(), id.kind, id.target.clone()))
    }
}
