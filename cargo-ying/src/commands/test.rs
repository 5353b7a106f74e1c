//! `cargo ying test`: build, discover, run, decide each test's result once (the run model), then show and write it.

use crate::baseline::BaselineFile;
use crate::cli::TestArgs;
use crate::config::{Measure, NoTests};
use crate::ending::{self, Ending};
use crate::error::{Error, Result};
use crate::model::Run;
use crate::outputs::libtest_json::LibtestJson;
use crate::outputs::{artifacts, listing, terminal};
use crate::run::exec::rerun;
use crate::run::exec::run_lock::RunLock;
use crate::run::exec::runner::{self, Finished, RunOptions};
use crate::run::exec::{attempt, interposer};
use crate::run::names::symbols::Symbolizer;
use crate::run::process;
use crate::run::select::build::{self, TestBinary};
use crate::run::select::discover::TestCase;
use crate::run::select::order::LastRun;
use crate::run::select::plan::Plan;
use crate::settings::Settings;
use crate::signals;
use crate::workspace::Workspace;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Instant, SystemTime};
use ying_report::{TestId, exit_code};

/// Runs `cargo ying test`; returns the exit code.
pub(crate) fn run(args: &TestArgs) -> Result<u8> {
    // From the first moment, SIGINT and SIGTERM stop the run: the build, the listing and the tests alike, each
    // child's group killed (rather than left to finish, or ignored as a background job's SIGINT is).
    signals::catch();
    let cargo = args.filter.cargo.to_args();
    let workspace = Workspace::open(cargo.manifest_path.as_deref(), &cargo.lock_flags)?;
    let settings = Settings::resolve(args, cargo, &workspace)?;
    for warning in &settings.warnings {
        eprintln!("warning: {warning}");
    }
    if settings.no_run {
        return build_only(&settings, &workspace);
    }
    let list = settings.request.selection.list;
    // Another run on this target directory finishes first: its files, and the baseline it may save, are whole.
    let _lock = if list { None } else { Some(RunLock::acquire(&settings.out_dir)?) };
    // Read (and check) the baseline before anything runs: a corrupt one, or a read-only one to save, stops the run
    // and stays as it was.
    let open = if settings.save_baseline { BaselineFile::open_to_save } else { BaselineFile::open };
    let baseline = open(settings.baseline.clone())?;
    if list {
        listing::print(&Plan::make(&settings.request, &workspace.metadata, settings.verbosity(), |_| {})?, false);
        return Ok(exit_code::OK);
    }
    let (plan, options, start) = match prepare(&settings, &workspace)? {
        Prepared::Run(prepared) => *prepared,
        Prepared::NoTests(not_run) => {
            // Why there is nothing to run, when what was selected is what cargo ying does not run.
            for target in &not_run {
                eprintln!("{:>12} {}", "NOT RUN", crate::run::select::not_run::describe(target));
            }
            return Ok(no_tests(settings.no_tests));
        }
    };
    // A filtered run replaces the files of its tests only: the other tests' reports stay (see `artifacts::sweep`).
    let replaced = (!plan.complete).then(|| plan.running().map(TestCase::id).collect::<Vec<TestId>>());
    let (mut run, reporter, started_at) = run_tests(&plan, &start, &options, &settings, &baseline)?;
    let ending = Ending {
        command: "cargo ying test",
        out_dir: options.out_dir.clone(),
        summary_path: options.out_dir.join("summary.json"),
        jobs: options.jobs,
        measured: settings.measure.recorded(),
        started_at,
        gating: &settings.gating,
        save_baseline: settings.save_baseline,
        junit: settings.junit.as_deref(),
        message_format: settings.message_format,
        workspace_root: workspace.root(),
        not_run: &plan.not_run,
        replaced: replaced.as_deref(),
        nextest: None,
    };
    ending::write(&mut run, &ending, &reporter, &baseline)?;
    ending::close(&run, &ending, &reporter, baseline)
}

/// `--no-run`: builds the test binaries (and, under `--measure all`, makes the interposer ready) as a run would, and
/// runs nothing: no test is listed, and nothing of a run's is written.
fn build_only(settings: &Settings, workspace: &Workspace) -> Result<u8> {
    if settings.measure == Measure::All {
        interposer::library()?;
    }
    let built = build::build(&settings.request.cargo, &workspace.metadata, settings.verbosity())?;
    if !settings.quiet {
        let binaries = built.binaries.len();
        eprintln!(
            "{:>12} {binaries} test binar{}; ran none (--no-run)",
            "Built",
            if binaries == 1 { "y" } else { "ies" }
        );
    }
    Ok(exit_code::OK)
}

/// Makes the interposer ready (under `--measure all`), builds the tests and plans the run, or finds that no test is
/// selected to run.
fn prepare(settings: &Settings, workspace: &Workspace) -> Result<Prepared> {
    let verbosity = settings.verbosity();
    let interposer = match settings.measure {
        Measure::All => Some(interposer::library()?),
        Measure::LeakTests => None,
    };
    let symbolizer =
        Arc::new(Symbolizer::keeping_frames_in(settings.out_dir.join("symbols")).excusing(settings.allow.clone()));
    // Read before this run's summary replaces it.
    let last_run = LastRun::read(&settings.out_dir);
    // Every test of a run of every test reports, so every binary's first report is named: the slowest part of that
    // is done while the tests are listed, one binary after another, when the other cores have little to do.
    let name_while_listing = interposer.is_some() && settings.request.selection.selects_everything();
    let planned = Plan::make(&settings.request, &workspace.metadata, verbosity, |binaries| {
        if name_while_listing {
            prepare_symbols(&symbolizer, &last_run.binaries_first(binaries));
        }
    });
    let plan = match planned {
        Ok(plan) if plan.selected > 0 => plan,
        none_or_error => return none_or_error.map(|plan| Prepared::NoTests(plan.not_run)),
    };
    // A statically linked binary never reads LD_PRELOAD: its tests would pass unmeasured.
    let statically_linked = plan
        .binaries
        .iter()
        .filter(|binary| plan.running().any(|test| Arc::ptr_eq(&test.binary, binary)))
        .find(|binary| interposer.is_some() && interposer::preloads(&binary.path) == Some(false));
    if let Some(binary) = statically_linked {
        return Err(Error::StaticBinary(binary.path.clone()));
    }
    let options = RunOptions {
        jobs: settings.jobs,
        timeout: settings.timeout,
        max_fail: settings.max_fail,
        stop_running: settings.stop_running,
        out_dir: settings.out_dir.clone(),
        passthrough: settings.request.selection.passthrough.clone(),
        retries: settings.retries,
        no_capture: settings.no_capture,
        interposer,
        symbolizer,
        known_code: Arc::default(),
        allow: attempt::allow_value(&settings.allow, &settings.out_dir),
        task_budgets: settings.task_budgets.as_deref().map(Arc::from),
    };
    let start = last_run.start_order(&plan.tests);
    Ok(Prepared::Run(Box::new((plan, options, start))))
}

/// What a run is ready to do.
enum Prepared {
    /// Run the plan's tests with the options, started in the order of the indices (`order`).
    Run(Box<(Plan, RunOptions, Vec<usize>)>),
    /// Nothing: no test is selected; what cargo ying does not run of what was selected.
    NoTests(Vec<ying_report::NotRunTarget>),
}

/// Starts a thread that parses, in `binaries` order (the order their tests start in), the parts of each binary's
/// debug information its first report needs ([`Symbolizer::prepare`]). Nothing waits for it: a report of a binary
/// not yet prepared waits for its turn (it would do the same work), and the run's end stops it.
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

/// Runs the planned tests, each test's result shown as it comes, and judges them against the baseline (the
/// regressions run again); returns the run, the terminal's reporter and when the tests started.
fn run_tests(
    plan: &Plan,
    start: &[usize],
    options: &RunOptions,
    settings: &Settings,
    baseline: &BaselineFile,
) -> Result<(Run, terminal::Reporter, SystemTime)> {
    let running = plan.running().count();
    artifacts::prepare(&options.out_dir)?;
    let mut reporter = terminal::Reporter::new(settings.color, settings.quiet, settings.verbose, settings.no_capture);
    if running == 0 {
        reporter.note(&format!(
            "this shard has none of the {} selected tests: nothing to run here (other shards run them)",
            plan.selected
        ));
    }
    let attempts = options.retries.saturating_add(1);
    reporter.start(running, plan.binaries_with_tests(), plan.tests.len() - running, options.jobs, attempts);
    reporter.not_run(&plan.not_run);
    if settings.verbose {
        reporter.note(&runner::describe(options));
    }
    let (started, started_at) = (Instant::now(), SystemTime::now());
    let mut events = LibtestJson::new(settings.message_format, &plan.tests, &plan.listed);
    // What a test leaves running outside its process group comes here when it ends, to be ended with the run.
    process::adopt_orphans();
    let records = runner::run(&plan.tests, start, options, |finished| match finished {
        Finished::FailedAttempt(id, number, attempt) => reporter.attempt(id, *number, attempt),
        Finished::Test(_, record) => {
            artifacts::allocated_flamegraph_now(record, &options.out_dir);
            reporter.result(record);
            if let Some(events) = &mut events {
                events.finished(record);
            }
        }
    });
    if let Some(events) = &mut events {
        events.finish();
    }
    let interrupted = signals::interrupted();
    let mut run =
        Run { tests: records, elapsed: started.elapsed(), max_fail: options.max_fail, gate: None, interrupted };
    if baseline.baseline.is_some() {
        // Only a run of every test can tell a test missing from one filtered out.
        let complete = plan.complete && interrupted.is_none();
        run.judge(
            baseline.path.clone(),
            baseline.entries(),
            [baseline.measured(), settings.measure.recorded()],
            settings.gating.clone(),
            complete,
            settings.check,
        );
        if interrupted.is_none() {
            rerun::confirm(&mut run, &plan.tests, options, |id, reruns| reporter.rerun(id, reruns));
        }
    }
    let left = process::end_adopted();
    if left > 0 {
        let processes = if left == 1 { "process" } else { "processes" };
        reporter.note(&format!("ended {left} {processes} that tests left running outside their process groups"));
    }
    options.symbolizer.save();
    Ok((run, reporter, started_at))
}

/// What a run with no test to run does, as cargo-nextest's `--no-tests`: the exit code. Even `pass` says what it let
/// through: a run that measured nothing.
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
        NoTests::Pass => {
            eprintln!("note: no tests to run (--no-tests=pass): the run passes, and nothing was measured");
            exit_code::OK
        }
    }
}
