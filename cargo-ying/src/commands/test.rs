//! `cargo ying test`: build, discover, run, decide each test's result once (the run model), then show and write it.

use crate::baseline::BaselineFile;
use crate::build::TestBinary;
use crate::cli::{Measure, NoTests, TestArgs};
use crate::discover::{Selection, TestCase};
use crate::error::{Error, Result};
use crate::interposer;
use crate::model::Run;
use crate::outputs::{artifacts, github, junit, listing, terminal};
use crate::plan::Plan;
use crate::process;
use crate::rerun;
use crate::run_lock::RunLock;
use crate::runner::{self, RunOptions};
use crate::symbols::Symbolizer;
use crate::workspace::Workspace;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use ying_report::TestId;
use ying_report::exit_code;

/// The timeout when neither `--timeout` nor the configuration sets one: generous, for slow debug builds.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// Starts a thread that parses, in `binaries` order, the parts of each binary's debug information its first
/// report needs ([`Symbolizer::prepare`]). Nothing waits for it: a report of a binary not yet prepared waits for its
/// turn (it would do the same work), and the run's end stops it.
fn prepare_symbols(symbolizer: &Arc<Symbolizer>, binaries: &[Arc<TestBinary>]) {
    let symbolizer = Arc::clone(symbolizer);
    let paths: Vec<PathBuf> = binaries.iter().map(|binary| binary.path.clone()).collect();
    // Without the thread, each binary's first report does it.
    let _ = std::thread::Builder::new().name("ying-symbols".into()).spawn(move || {
        for path in paths {
            symbolizer.prepare(&path);
        }
    });
}

/// Runs `cargo ying test`; returns the exit code.
pub fn run(args: TestArgs) -> Result<u8> {
    let filter = &args.filter;
    let workspace = Workspace::open(&filter.cargo)?;
    let config = &workspace.config;
    let selection = Selection::new(&filter.filters, &filter.filtersets, &filter.test_args)?;
    let out_dir = workspace.out_dir(filter.cargo.target_dir.as_deref());
    // Another run on this target directory finishes first: its files, and the baseline it may save, are whole.
    let _lock = if selection.list { None } else { Some(RunLock::acquire(&out_dir)?) };
    // Read (and check) the baseline before anything runs: a corrupt one, or a read-only one to save, stops the run
    // and stays as it was.
    let open = if args.save_baseline { BaselineFile::open_to_save } else { BaselineFile::open };
    let baseline = open(workspace.baseline_path(args.baseline.as_deref()))?;
    let gating = config.gating(&args.gating);

    let verbosity = if args.quiet {
        Some("--quiet")
    } else if args.verbose {
        Some("--verbose")
    } else {
        None
    };
    // Checked while the tests are built and listed; a first build runs after theirs (a build error of the tests
    // comes first), before any test runs.
    let mut interposer = match args.measure.or(config.measure).unwrap_or_default() {
        Measure::All if !selection.list => Some(interposer::start(&out_dir, verbosity, &filter.cargo.network_flags())?),
        Measure::All | Measure::LeakTests => None,
    };
    let symbolizer = Arc::new(Symbolizer::keeping_frames_in(out_dir.join("symbols")));
    // Every test of a run of every test reports, so every binary's first report is named: the slowest part of that
    // is done while the tests are listed, one binary after another, when the other cores have little to do.
    let prepare = interposer.is_some() && selection.selects_everything();
    let plan = match Plan::make(filter, &selection, &workspace.metadata, verbosity, |binaries| {
        if prepare {
            prepare_symbols(&symbolizer, binaries);
        }
    }) {
        Ok(plan) => plan,
        Err(error) => {
            if let Some(build) = interposer.take() {
                build.abandon();
            }
            return Err(error);
        }
    };
    if selection.list {
        listing::print(&plan);
        return Ok(exit_code::OK);
    }
    if plan.selected == 0 {
        if let Some(build) = interposer.take() {
            build.abandon();
        }
        return Ok(no_tests(args.no_tests.or(config.no_tests).unwrap_or(NoTests::Fail)));
    }
    let interposer = interposer.map(|build| build.finish(args.verbose)).transpose()?;
    let no_capture = args.no_capture || selection.no_capture;
    let options = RunOptions {
        // Output straight to the terminal is readable one test at a time, as under cargo-nextest.
        jobs: if no_capture { Some(1) } else { args.jobs.or(selection.test_threads).or(config.jobs.map(usize::from)) }
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1),
        timeout: args.timeout.or(config.timeout).unwrap_or(DEFAULT_TIMEOUT),
        fail_fast: !args.no_fail_fast && config.fail_fast.unwrap_or(true),
        out_dir: out_dir.clone(),
        passthrough: selection.passthrough.clone(),
        retries: args.retries.or(config.retries).unwrap_or(0),
        no_capture,
        interposer,
        symbolizer,
        known_code: Arc::default(),
    };
    let planned = &plan.tests;
    let running = plan.running().count();
    // A filtered run replaces the files of its tests only: the other tests' reports stay (see `artifacts::sweep`).
    let replaced = (!plan.complete).then(|| plan.running().map(TestCase::id).collect::<Vec<TestId>>());
    artifacts::prepare(&out_dir)?;
    let mut reporter = terminal::Reporter::new(terminal::use_color(args.color), args.quiet, no_capture);
    if running == 0 {
        reporter.note(&format!(
            "this shard has none of the {} selected tests: nothing to run here (other shards run them)",
            plan.selected
        ));
    }
    reporter.start(running, plan.binaries_with_tests(), planned.len() - running, &options);
    reporter.not_run(&plan.not_run, false);
    if args.verbose {
        reporter.note(&runner::describe(&options));
    }
    // From here SIGINT and SIGTERM stop the tests (their process groups killed) and end the run with a summary
    // marked incomplete, rather than leave the tests running.
    process::catch_interrupts();
    let started = Instant::now();
    let records = runner::run(planned, &options, |record| reporter.result(record));
    let interrupted = process::interrupted();
    let mut run =
        Run { tests: records, elapsed: started.elapsed(), fail_fast: options.fail_fast, gate: None, interrupted };

    if baseline.baseline.is_some() {
        // Only a run of every test can tell a test missing from one filtered out.
        run.judge(
            baseline.path.clone(),
            baseline.entries(),
            gating,
            plan.complete && interrupted.is_none(),
            args.gating.check,
        );
        if interrupted.is_none() {
            rerun::confirm(&mut run, planned, &options, |id, reruns| reporter.rerun(id, reruns));
        }
    }
    options.symbolizer.save();
    artifacts::flamegraphs(&mut run, &out_dir, options.jobs)?;
    let mut summary = run.summary();
    summary.not_run.clone_from(&plan.not_run);
    artifacts::summary(&summary, &out_dir)?;
    artifacts::sweep(&run, &out_dir, replaced.as_deref())?;

    reporter.finish(&run);
    reporter.not_run(&plan.not_run, true);
    reporter.artifacts(&out_dir.join("index.html"));
    reporter.gate(&run, &baseline.path, args.save_baseline);
    write_ci_outputs(&run, args.junit.as_deref(), workspace.root())?;
    if let Some(signal) = interrupted {
        return Ok(exit_code::stopped_by(signal));
    }
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
        eprintln!("{:>12} {} ({all} measured tests{kept})", "Saved", baseline.path.display());
        regressed = false;
    }
    Ok(if run.failed() || regressed { exit_code::TEST_FAILED } else { exit_code::OK })
}

/// What a run with no test to run does, as cargo-nextest's `--no-tests`: the exit code.
fn no_tests(action: NoTests) -> u8 {
    match action {
        NoTests::Fail => {
            eprintln!(
                "error: no tests to run\n(hint: check the filters, or use `--no-tests=warn` or `--no-tests=pass`)"
            );
            exit_code::NO_TESTS
        }
        NoTests::Warn => {
            eprintln!("warning: no tests to run");
            exit_code::OK
        }
        NoTests::Pass => exit_code::OK,
    }
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
