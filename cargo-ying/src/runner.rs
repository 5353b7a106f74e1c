//! Running the tests: each in a process of its own (`<bin> --exact NAME --nocapture`), several at once, with
//! process attribution and a report directory; crashes and timeouts are test results, not errors of the run.

use crate::discover::TestCase;
use std::collections::VecDeque;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, mpsc};
use std::time::{Duration, Instant};
use ying::report::LeakReport;

/// How a test ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The test passed.
    Passed,
    /// The test failed (a failed assertion, a budget, an error returned).
    Failed,
    /// Killed by a signal (abort, segmentation fault, stack overflow, the OOM killer): its name.
    Crashed(String),
    /// Ran past the timeout and was killed.
    TimedOut(Duration),
    /// Marked `#[ignore]` and not asked for.
    Ignored,
    /// Not started: an earlier test failed and fail-fast stopped the run.
    NotRun,
}

impl Outcome {
    /// Whether the outcome fails the run.
    pub fn is_failure(&self) -> bool {
        matches!(self, Self::Failed | Self::Crashed(_) | Self::TimedOut(_))
    }

    /// The name used in summary.json.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::Failed => "failed",
            Self::Crashed(_) => "crashed",
            Self::TimedOut(_) => "timed-out",
            Self::Ignored => "ignored",
            Self::NotRun => "not-run",
        }
    }

    /// Why the test failed, beyond its output: the signal, or the timeout.
    pub fn reason(&self) -> Option<String> {
        match self {
            Self::Crashed(signal) => Some(format!("killed by {signal}")),
            Self::TimedOut(after) => Some(format!("timed out after {}", crate::output::seconds(*after))),
            _ => None,
        }
    }
}

/// The result of one test.
#[derive(Debug)]
pub struct TestResult {
    /// Which test.
    pub test: TestCase,
    /// How it ended.
    pub outcome: Outcome,
    /// How long its process ran.
    pub duration: Duration,
    /// Standard output and error, interleaved as written.
    pub output: String,
    /// The leak test's report, moved to its place under `<target>/ying/reports/`.
    pub report: Option<(PathBuf, LeakReport)>,
}

impl TestResult {
    /// The result of a test that did not run.
    fn skipped(test: TestCase, outcome: Outcome) -> Self {
        Self { test, outcome, duration: Duration::ZERO, output: String::new(), report: None }
    }
}

/// How to run the tests.
pub struct RunOptions {
    /// Tests run at once.
    pub jobs: usize,
    /// Longest a test may run.
    pub timeout: Duration,
    /// Stop starting tests after the first failure.
    pub fail_fast: bool,
    /// `<target-dir>/ying`.
    pub out_dir: PathBuf,
    /// Extra arguments for every test process.
    pub passthrough: Vec<String>,
}

/// The name of a signal that killed a process.
#[cfg(unix)]
fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGABRT => "SIGABRT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGTRAP => "SIGTRAP",
        _ => return format!("signal {signal}"),
    };
    name.to_owned()
}

#[cfg(not(unix))]
fn signal_name(signal: i32) -> String {
    format!("signal {signal}")
}

#[cfg(unix)]
fn killed_by(status: &ExitStatus) -> Option<i32> {
    std::os::unix::process::ExitStatusExt::signal(status)
}

#[cfg(not(unix))]
fn killed_by(_: &ExitStatus) -> Option<i32> {
    None
}

/// A file name for a test: its id with path separators and odd characters replaced.
pub fn file_stem(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect()
}

/// Runs one test in its own process.
fn run_one(test: TestCase, index: usize, options: &RunOptions) -> TestResult {
    let scratch = options.out_dir.join("tmp").join(index.to_string());
    let started = Instant::now();
    let finish = |outcome: Outcome, output: String, report| TestResult {
        test: test.clone(),
        outcome,
        duration: started.elapsed(),
        output,
        report,
    };
    if let Err(error) = std::fs::create_dir_all(&scratch) {
        return finish(Outcome::Failed, format!("cargo ying: failed to create {}: {error}", scratch.display()), None);
    }
    let output_path = scratch.join("output");
    let spawned = File::create(&output_path).and_then(|file| {
        let mut command = Command::new(&test.binary.path);
        command
            .args(["--exact", &test.name, "--nocapture", "--test-threads=1"])
            .args(test.ignored.then_some("--include-ignored"))
            .args(&options.passthrough)
            .current_dir(&test.binary.package_dir)
            .env(ying::report::REPORT_DIR_ENV, scratch.join("report"))
            .env(ying::ATTRIBUTION_ENV, "process")
            .env(ying::report::DEFER_SYMBOLS_ENV, "1")
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file);
        command.spawn()
    });
    let mut child = match spawned {
        Ok(child) => child,
        Err(error) => {
            let output = format!("cargo ying: failed to start {}: {error}", test.binary.path.display());
            return finish(Outcome::Failed, output, None);
        }
    };
    let outcome = loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break Outcome::Passed,
            Ok(Some(status)) => match killed_by(&status) {
                Some(signal) => break Outcome::Crashed(signal_name(signal)),
                None => break Outcome::Failed,
            },
            Ok(None) if started.elapsed() >= options.timeout => {
                let _ = child.kill();
                let _ = child.wait();
                break Outcome::TimedOut(options.timeout);
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(_) => break Outcome::Failed,
        }
    };
    let output = std::fs::read(&output_path).map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
    let report = collect_report(&scratch.join("report"), &test, &options.out_dir);
    let _ = std::fs::remove_dir_all(&scratch);
    finish(outcome, output.unwrap_or_default(), report)
}

/// Moves the report a leak test wrote to `reports/<package>/<target>/<test>.json` and reads it.
fn collect_report(dir: &Path, test: &TestCase, out_dir: &Path) -> Option<(PathBuf, LeakReport)> {
    let written = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|extension| extension == "json"))?;
    let report: LeakReport = serde_json::from_slice(&std::fs::read(&written).ok()?).ok()?;
    let relative = Path::new("reports")
        .join(file_stem(&test.binary.package))
        .join(file_stem(&test.binary.name))
        .join(format!("{}.json", file_stem(&test.name)));
    let destination = out_dir.join(&relative);
    std::fs::create_dir_all(destination.parent()?).ok()?;
    std::fs::rename(&written, &destination).or_else(|_| std::fs::copy(&written, &destination).map(drop)).ok()?;
    Some((relative, report))
}

/// Runs `tests`, `options.jobs` at once; `on_result` sees each result as it arrives. Returns every result
/// (ignored and not-run tests included), in the order of `tests`.
pub fn run(
    tests: Vec<(TestCase, bool)>,
    options: &RunOptions,
    mut on_result: impl FnMut(&TestResult),
) -> Vec<TestResult> {
    let total = tests.len();
    let queue: Mutex<VecDeque<(usize, TestCase)>> = Mutex::new(VecDeque::new());
    let mut results: Vec<Option<TestResult>> = (0..total).map(|_| None).collect();
    for (index, (test, runs)) in tests.into_iter().enumerate() {
        if runs {
            queue.lock().unwrap().push_back((index, test));
        } else {
            results[index] = Some(TestResult::skipped(test, Outcome::Ignored));
        }
    }
    let stop = AtomicBool::new(false);
    let (sender, receiver) = mpsc::channel::<(usize, TestResult)>();
    std::thread::scope(|scope| {
        for _ in 0..options.jobs.max(1) {
            let sender = sender.clone();
            let (queue, stop) = (&queue, &stop);
            scope.spawn(move || {
                loop {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let Some((index, test)) = queue.lock().unwrap().pop_front() else { break };
                    let result = run_one(test, index, options);
                    if options.fail_fast && result.outcome.is_failure() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    if sender.send((index, result)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(sender);
        for (index, result) in receiver {
            on_result(&result);
            results[index] = Some(result);
        }
    });
    for (index, test) in queue.into_inner().unwrap() {
        results[index] = Some(TestResult::skipped(test, Outcome::NotRun));
    }
    let _ = std::fs::remove_dir(options.out_dir.join("tmp"));
    results.into_iter().map(|result| result.expect("every test has a result")).collect()
}
