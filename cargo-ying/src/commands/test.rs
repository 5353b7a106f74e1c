//! `cargo ying test`: build, discover, run, decide each test's result once (the run model), then show and write it.

use crate::baseline::BaselineFile;
use crate::build::{self, TestBinary};
use crate::cli::TestArgs;
use crate::discover::{self, Selection, TestCase};
use crate::error::{EXIT_OK, EXIT_TEST_FAILED, Error, Result};
use crate::model::Run;
use crate::outputs::{artifacts, github, junit, terminal};
use crate::rerun;
use crate::runner::{self, RunOptions};
use crate::symbols::Symbolizer;
use crate::workspace::Workspace;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The timeout when neither `--timeout` nor the configuration sets one: generous, for slow debug builds.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// Runs `cargo ying test`; returns the exit code.
pub fn run(args: TestArgs) -> Result<u8> {
    let workspace = Workspace::open(&args.cargo)?;
    let config = &workspace.config;
    let selection = Selection::new(&args.filters, &args.test_args)?;
    // Read (and check) the baseline before anything runs: a corrupt one stops the run and stays as it was.
    let baseline = BaselineFile::open(workspace.baseline_path(args.baseline.as_deref()))?;
    let gating = config.gating(&args.gating);
    let out_dir = workspace.out_dir(args.cargo.target_dir.as_deref());

    let binaries: Vec<Arc<TestBinary>> =
        build::build(&args.cargo, &workspace.metadata)?.into_iter().map(Arc::new).collect();
    let tests = discover::discover(&binaries, &selection)?;
    let options = RunOptions {
        jobs: args
            .jobs
            .or(config.jobs.map(usize::from))
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1),
        timeout: args.timeout.or(config.timeout).unwrap_or(DEFAULT_TIMEOUT),
        fail_fast: !args.no_fail_fast && config.fail_fast.unwrap_or(true),
        out_dir: out_dir.clone(),
        passthrough: selection.passthrough.clone(),
    };
    artifacts::prepare(&out_dir)?;

    let planned: Vec<(TestCase, bool)> = tests
        .into_iter()
        .map(|test| {
            let runs = selection.runs(test.ignored);
            (test, runs)
        })
        .enumerate()
        .filter(|(index, (test, _))| {
            args.partition.is_none_or(|partition| partition.contains(*index, &test.id().to_string()))
        })
        .map(|(_, planned)| planned)
        .collect();
    let running = planned.iter().filter(|(_, runs)| *runs).count();
    let with_tests =
        binaries.iter().filter(|binary| planned.iter().any(|(test, _)| Arc::ptr_eq(&test.binary, binary))).count();
    let mut reporter = terminal::Reporter::new(terminal::use_color(args.color));
    reporter.start(running, with_tests, planned.len() - running);
    let started = Instant::now();
    let records = runner::run(&planned, &options, |record| reporter.result(record));
    let mut run = Run { tests: records, elapsed: started.elapsed(), fail_fast: options.fail_fast, gate: None };
    complete_reports(&mut run, &planned, &out_dir)?;

    // Only a run of every test can tell a test missing from one filtered out.
    let cargo = &args.cargo;
    let complete = args.partition.is_none()
        && selection.filters.is_empty()
        && selection.skip.is_empty()
        && !selection.ignored_only
        && cargo.test_targets.is_empty()
        && cargo.packages.is_empty()
        && !cargo.lib
        && !cargo.tests;
    if baseline.baseline.is_some() {
        run.judge(baseline.path.clone(), baseline.entries(), gating, complete, args.gating.check);
        rerun::confirm(&mut run, &planned, &options, |id, reruns| reporter.rerun(id, reruns));
    }
    artifacts::flamegraphs(&mut run, &out_dir)?;
    artifacts::summary(&run.summary(), &out_dir)?;

    reporter.finish(&run);
    reporter.artifacts(&out_dir.join("index.html"));
    reporter.gate(&run, &baseline.path, args.save_baseline);
    write_ci_outputs(&run, args.junit.as_deref(), workspace.root())?;
    let mut regressed = run.regressed();
    if args.save_baseline {
        let entries = run.entries_to_save();
        // Every leak test with a report has an entry: count them, rather than build each entry again.
        let all = run.tests.iter().filter(|test| test.leak.is_some()).count();
        let written = entries.len();
        baseline.save(entries)?;
        let kept = match all - written {
            0 => String::new(),
            kept => format!(": {written} written, {kept} within the tolerance kept as recorded"),
        };
        eprintln!("{:>12} {} ({all} leak tests{kept})", "Saved", baseline.path.display());
        regressed = false;
    }
    Ok(if run.failed() || regressed { EXIT_TEST_FAILED } else { EXIT_OK })
}

/// Symbolises the stacks the tests deferred, once per executable, and stores the completed reports.
fn complete_reports(run: &mut Run, planned: &[(TestCase, bool)], out_dir: &Path) -> Result<()> {
    let mut symbolizer = Symbolizer::default();
    for (record, (test, _)) in run.tests.iter_mut().zip(planned) {
        let Some(leak) = &mut record.leak else { continue };
        if symbolizer.complete(&mut leak.report, &test.binary.path, &test.binary.package_dir) {
            let path = out_dir.join(&leak.path);
            leak.report.write(&path).map_err(Error::io("write", &path))?;
        }
    }
    Ok(())
}

/// GitHub Actions annotations and job summary (when `GITHUB_ACTIONS=true`), and JUnit XML (when asked).
/// `workspace_root`: the cargo workspace's root, inside the repository.
fn write_ci_outputs(run: &Run, junit: Option<&Path>, workspace_root: &Path) -> Result<()> {
    if std::env::var("GITHUB_ACTIONS").is_ok_and(|value| value == "true") {
        for line in github::annotations(run, &github::repository_root(workspace_root)) {
            println!("{line}");
        }
        if let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY") {
            use std::io::Write;
            let path = Path::new(&path);
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut file| file.write_all(github::step_summary(run).as_bytes()))
                .map_err(Error::io("append to", path))?;
        }
    }
    if let Some(path) = junit {
        std::fs::write(path, junit::junit(run)).map_err(Error::io("write", path))?;
    }
    Ok(())
}
