//! Running the tests: each in a process of its own (`<bin> --exact NAME --nocapture`), several at once, with
//! process attribution and a report directory; crashes and timeouts are test results, not errors of the run. A
//! failing test runs again up to `--retries` times; the last attempt is its result.

use crate::model::{FailedAttempt, Outcome, TestRecord};
use crate::run::exec::attempt::{self, Attempting, Measuring, Output, Watch};
use crate::run::exec::interposer::PRELOAD_ENV;
use crate::run::exec::known_code::{KNOWN_CODE_ENV, KnownCodes};
use crate::run::names::symbols::Symbolizer;
use crate::run::select::discover::TestCase;
use crate::signals;
use std::collections::VecDeque;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};
use ying_report::report::{
    ATTRIBUTION_ENV, DEFER_SYMBOLS_ENV, MEASURE_TEST_ENV, REPORT_DIR_ENV, RUN_TOKEN_ENV, TestIdentity,
};

/// How to run the tests.
pub(crate) struct RunOptions {
    /// Tests run at once.
    pub jobs: usize,
    /// Longest a test may run.
    pub timeout: Duration,
    /// Stop starting tests after this many failures (1: fail-fast); `None`: never.
    pub max_fail: Option<usize>,
    /// Reaching `max_fail` stops the tests running too (`--max-fail N:immediate`): they end cancelled.
    pub stop_running: bool,
    /// `<target-dir>/ying`.
    pub out_dir: PathBuf,
    /// Extra arguments for every test process.
    pub passthrough: Vec<String>,
    /// Runs of a failing test after its first (`--retries`).
    pub retries: u32,
    /// Tests print straight to the terminal (`--no-capture`): their output is not kept.
    pub no_capture: bool,
    /// The allocation interposer every test process loads (`--measure all`), if any.
    pub interposer: Option<PathBuf>,
    /// Names the stacks the tests' reports leave as addresses; the run's and its reruns'.
    pub symbolizer: Arc<Symbolizer>,
    /// The code each test binary's processes know by address, read once per binary; the run's and its reruns'.
    pub known_code: Arc<KnownCodes>,
    /// The workspace's `allow` patterns, passed to every test process as JSON ([`attempt::allow_value`]).
    pub allow: Option<Arc<str>>,
    /// The workspace's budgets of async tasks, passed to every test process (`TASK_BUDGETS_ENV`).
    pub task_budgets: Option<Arc<str>>,
}

impl RunOptions {
    /// The options for running tests again outside the run (the gate's reruns): into `out_dir`, never stopping
    /// early, never retrying, output captured.
    pub(crate) fn again(&self, out_dir: PathBuf) -> Self {
        Self {
            jobs: self.jobs,
            timeout: self.timeout,
            max_fail: None,
            stop_running: false,
            out_dir,
            passthrough: self.passthrough.clone(),
            retries: 0,
            no_capture: false,
            interposer: self.interposer.clone(),
            symbolizer: Arc::clone(&self.symbolizer),
            known_code: Arc::clone(&self.known_code),
            allow: self.allow.clone(),
            task_budgets: self.task_budgets.clone(),
        }
    }
}

/// The most of a test's output kept in memory: its end. The whole of it stays in a file for a failed test.
const OUTPUT_TAIL: u64 = 1 << 20;

/// The run's scratch directory under `<target-dir>/ying`: the workers' directories and the stack walker's rules the
/// test processes keep for each other (`RULES_DIR_ENV`), removed after the run.
const SCRATCH: &str = "tmp";

/// The end of the output in `path` (at most [`OUTPUT_TAIL`] bytes, from a line's start), and whether some was
/// cut.
fn output_tail(path: &Path) -> std::io::Result<(String, bool)> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let mut file = File::open(path)?;
    let length = file.metadata()?.len();
    let cut = length > OUTPUT_TAIL;
    if cut {
        file.seek(SeekFrom::Start(length - OUTPUT_TAIL))?;
    }
    let mut bytes = Vec::with_capacity(usize::try_from(length.min(OUTPUT_TAIL)).unwrap_or(0));
    file.take(OUTPUT_TAIL).read_to_end(&mut bytes)?;
    let start = if cut { bytes.iter().position(|&byte| byte == b'\n').map_or(0, |at| at + 1) } else { 0 };
    Ok((String::from_utf8_lossy(&bytes[start..]).into_owned(), cut))
}

/// What every test process gets after `--exact NAME`: its output uncaptured (cargo ying captures it), one thread.
const HARNESS_ARGS: [&str; 2] = ["--nocapture", "--test-threads=1"];

/// How each test is run, in words (for `-v`).
pub(crate) fn describe(options: &RunOptions) -> String {
    let passthrough = options.passthrough.iter().map(String::as_str);
    let args: String = HARNESS_ARGS.into_iter().chain(passthrough).map(|arg| format!(" {arg}")).collect();
    let interposer = match &options.interposer {
        Some(library) => format!(
            "; every test is measured: {PRELOAD_ENV}={} and {MEASURE_TEST_ENV} (the test's identity) set",
            library.display()
        ),
        None => String::new(),
    };
    format!(
        "each test runs alone: <binary> --exact <name>{args} in its package's directory, with \
         {ATTRIBUTION_ENV}=process {DEFER_SYMBOLS_ENV}=1 and {REPORT_DIR_ENV}, {RUN_TOKEN_ENV}, {KNOWN_CODE_ENV} set{interposer}"
    )
}

/// Runs one test in its own process ([`Attempting`]), and takes its report, its stacks symbolised with the options'
/// symbolizer (which the workers share: each executable's debug information is loaded once). Its output goes to a
/// file, of which only the end is read; the file is kept (`output/<test>.log`) when the test failed, else removed (a
/// process the test left running outside its group writes to a file no one reads). `scratch` is the directory of the
/// worker that runs it, for the whole run, and its report directory the next test's (directories created and
/// deleted for every test cost more than a short test on some file systems).
fn run_one(test: &TestCase, index: usize, options: &RunOptions, scratch: &Path, cancel: &AtomicBool) -> TestRecord {
    let started = Instant::now();
    let id = test.id();
    let finish = |outcome: Outcome, output: String| TestRecord::new(id.clone(), outcome, started.elapsed(), output);
    if let Err(error) = std::fs::create_dir_all(scratch) {
        return finish(Outcome::Failed, format!("cargo ying: failed to create {}: {error}", scratch.display()));
    }
    let output_path = scratch.join("output");
    let report_dir = scratch.join("report");
    // Beside the workers' directories, removed with them after the run.
    let rules_dir = options.out_dir.join(SCRATCH).join("rules");
    let token = attempt::run_token(index);
    let binary = &test.binary;
    let attempt = Attempting {
        id: &id,
        binary: &binary.path,
        package_dir: &binary.package_dir,
        built_in: None,
        command: command(test, options),
        measuring: Measuring {
            report_dir: &report_dir,
            token: &token,
            known_code: options.known_code.env_value(&binary.path),
            allow: options.allow.as_deref(),
            task_budgets: options.task_budgets.as_deref(),
            rules_dir: Some(&rules_dir),
            interposer: options
                .interposer
                .as_deref()
                .map(|library| (library, TestIdentity::listed(&binary.package, binary.kind, &binary.name, &test.name))),
        },
        output: if options.no_capture { Output::Inherited } else { Output::File(&output_path) },
        watch: Watch::OwnGroup { timeout: options.timeout, cancel, max_fail: options.max_fail.unwrap_or(0) },
        store: &options.out_dir,
        symbolizer: Some(&options.symbolizer),
    }
    .run();
    let attempt = match attempt {
        Ok(attempt) => attempt,
        Err(error) => {
            let message = format!("cargo ying: failed to start {}: {error}", binary.path.display());
            return finish(Outcome::Failed, message);
        }
    };
    let keep = attempt.outcome.is_failure() && !options.no_capture;
    let (output, kept) = read_output(&output_path, keep.then(|| (options.out_dir.as_path(), id.output_path())));
    let mut record = finish(attempt.outcome, output);
    record.package_dir = Some(binary.package_dir.clone());
    record.leak = attempt.leak;
    record.warnings = attempt.warnings;
    record.files.output = kept;
    clear(&report_dir);
    let _ = std::fs::remove_file(&output_path);
    record
}

/// The command that runs `test` alone: its binary with libtest's arguments, in its package's directory, its input
/// closed. [`Measuring`] sets what asks it for its report.
fn command(test: &TestCase, options: &RunOptions) -> Command {
    let mut command = Command::new(&test.binary.path);
    command
        .args(["--exact", &test.name])
        .args(HARNESS_ARGS)
        .args(test.ignored.then_some("--include-ignored"))
        .args(&options.passthrough)
        .current_dir(&test.binary.package_dir)
        .stdin(Stdio::null());
    command
}

/// The end of a test's output in `path` (see [`output_tail`]) and, when `keep` gives the output directory and the
/// path under it (`output/<test>.log`), that path once the whole output is moved there; the output says where the
/// whole of it is when only its end is shown.
fn read_output(path: &Path, keep: Option<(&Path, String)>) -> (String, Option<String>) {
    let (mut output, cut) = output_tail(path).unwrap_or_default();
    let Some((out_dir, kept)) = keep else { return (output, None) };
    let log = out_dir.join(&kept);
    let moved = log.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| std::fs::rename(path, &log));
    if cut {
        let shown = match &moved {
            Ok(()) => format!("the whole of it is in {}", log.display()),
            Err(error) => format!("it could not be kept: {error}"),
        };
        output.insert_str(
            0,
            &format!(
                "[cargo ying: the start of this output is cut, only its last {OUTPUT_TAIL} bytes shown; {shown}]\n"
            ),
        );
    }
    (output, moved.is_ok().then_some(kept))
}

/// Removes what is left in `dir` (a test's start mark, what could not be moved), for the next test.
fn clear(dir: &Path) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let _ = if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
    }
}

/// A test that did not run.
fn skipped(test: &TestCase, outcome: Outcome) -> TestRecord {
    let mut record = TestRecord::new(test.id(), outcome, Duration::ZERO, String::new());
    record.package_dir = Some(test.binary.package_dir.clone());
    record
}

/// What ended, as the run goes: what [`run`] tells its caller.
pub(crate) enum Finished {
    /// A failed attempt of a test that runs again (`--retries`): the test, the attempt's number, from 1, and how it
    /// ended.
    FailedAttempt(ying_report::TestId, usize, FailedAttempt),
    /// A test's last attempt, by its index among the tests.
    Test(usize, Box<TestRecord>),
}

/// Runs the `tests` that run (the others are ignored), `options.jobs` at once, started in the order of `start` (the
/// indices of `tests`, each once: see `order`); `on_finished` sees each failed attempt that is tried again as it
/// ends, and each test's record as it arrives (and may change it before it is kept). Returns every test's record
/// (ignored and not-run tests included), in the order of `tests`.
pub(crate) fn run(
    tests: &[(TestCase, bool)],
    start: &[usize],
    options: &RunOptions,
    mut on_finished: impl FnMut(&mut Finished),
) -> Vec<TestRecord> {
    let total = tests.len();
    debug_assert_eq!(start.len(), total, "every test starts once");
    let queue: Mutex<VecDeque<(usize, &TestCase)>> = Mutex::new(VecDeque::new());
    let mut results: Vec<Option<TestRecord>> = (0..total).map(|_| None).collect();
    for &index in start {
        let (test, runs) = &tests[index];
        if *runs {
            options.symbolizer.expect(&test.binary.path);
            queue.lock().unwrap().push_back((index, test));
        } else {
            results[index] = Some(skipped(test, Outcome::Ignored));
        }
    }
    let stop = AtomicBool::new(false);
    // Set with `stop` under `--max-fail N:immediate`: the tests running are stopped too.
    let cancel = AtomicBool::new(false);
    let failures = AtomicUsize::new(0);
    let (sender, receiver) = mpsc::channel::<Finished>();
    // No more workers than tests: `-j 1000000` starts as many threads as there are tests to run.
    let workers = options.jobs.clamp(1, queue.lock().unwrap().len().max(1));
    std::thread::scope(|scope| {
        for worker in 0..workers {
            let sender = sender.clone();
            let (queue, stop, cancel, failures) = (&queue, &stop, &cancel, &failures);
            let scratch = options.out_dir.join(SCRATCH).join(worker.to_string());
            scope.spawn(move || {
                loop {
                    if stop.load(Ordering::Relaxed) || signals::interrupted().is_some() {
                        break;
                    }
                    let Some((index, test)) = queue.lock().unwrap().pop_front() else { break };
                    let mut result = run_one(test, index, options, &scratch, cancel);
                    let mut failed_attempts = Vec::new();
                    while result.outcome.is_own_failure()
                        && failed_attempts.len() < options.retries as usize
                        && signals::interrupted().is_none()
                        && !cancel.load(Ordering::Relaxed)
                    {
                        // Each failed attempt is shown as it ends, as nextest shows them.
                        let attempt = FailedAttempt::of(&result);
                        if sender
                            .send(Finished::FailedAttempt(
                                result.id.clone(),
                                failed_attempts.len() + 1,
                                attempt.clone(),
                            ))
                            .is_err()
                        {
                            break;
                        }
                        let again = run_one(test, index, options, &scratch, cancel);
                        if matches!(again.outcome, Outcome::Interrupted(_) | Outcome::Cancelled(_)) {
                            // Stopped before it ended: the last attempt that ended is the test's result.
                            break;
                        }
                        failed_attempts.push(attempt);
                        result = again;
                    }
                    result.failed_attempts = failed_attempts;
                    options.symbolizer.done(&test.binary.path);
                    // A test the run cancelled is not one more failure that stops it.
                    if result.outcome.is_own_failure() {
                        let failed = failures.fetch_add(1, Ordering::Relaxed) + 1;
                        if options.max_fail.is_some_and(|most| failed >= most) {
                            stop.store(true, Ordering::Relaxed);
                            cancel.store(options.stop_running, Ordering::Relaxed);
                        }
                    }
                    if sender.send(Finished::Test(index, Box::new(result))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(sender);
        for mut finished in receiver {
            on_finished(&mut finished);
            if let Finished::Test(index, result) = finished {
                results[index] = Some(*result);
            }
        }
    });
    let not_run = match signals::interrupted() {
        Some(signal) => Outcome::Interrupted(signal),
        None => Outcome::NotRun,
    };
    for (index, test) in queue.into_inner().unwrap() {
        results[index] = Some(skipped(test, not_run.clone()));
    }
    let _ = std::fs::remove_dir_all(options.out_dir.join(SCRATCH));
    results.into_iter().map(|result| result.expect("every test has a result")).collect()
}
