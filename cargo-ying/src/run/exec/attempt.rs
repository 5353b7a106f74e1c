//! One test's process, measured: the command with the environment that asks the test for its report, started and
//! waited for, how it ended, and its report taken with its stacks named. `cargo ying test`'s runner and nextest's
//! wrapper both run a test through [`Attempting::run`]: what differs between them is said in the fields they fill
//! (where the output goes, which process group the test runs in, where its report is kept), and what the
//! [`Attempt`] tells is the same for both, down to a test that never reported ([`Outcome::of_process`]).

use crate::model::{Leak, Outcome};
use crate::run::exec::collect::take_report;
use crate::run::exec::interposer::{PRELOAD_ENV, preload_value};
use crate::run::exec::known_code::KNOWN_CODE_ENV;
use crate::run::exec::relay::{Kept, Relay};
use crate::run::names::symbols::Symbolizer;
use crate::run::process::{self, Waited};
use crate::signals;
use std::fs::File;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant, SystemTime};
use ying_report::report::{
    ALLOW_ENV, ATTRIBUTION_ENV, DEFER_SYMBOLS_ENV, MEASURE_TEST_ENV, REPORT_DIR_ENV, RUN_TOKEN_ENV, TASK_BUDGETS_ENV,
    TestIdentity,
};
use ying_report::{RULES_DIR_ENV, TestId};

/// How much sooner than nextest's clock the wrapper's starts a test: a test nextest stops that much short of its
/// timeout timed out.
pub(crate) const TIMEOUT_SLACK: Duration = Duration::from_millis(500);

pub(crate) use ying_report::report::run_token;

/// [`ALLOW_ENV`]'s value for the workspace's `allow` patterns: JSON, `None` when there are none.
pub(crate) fn allow_value(patterns: &[String], dir: &Path) -> Option<Arc<str>> {
    if patterns.is_empty() {
        return None;
    }
    let json = serde_json::to_string(patterns).unwrap_or_default();
    // One variable of a process's environment holds at most 128 KiB (Linux's MAX_ARG_STRLEN), and the whole
    // environment shares one limit with the arguments: a long list goes in a file, the variable naming it.
    if json.len() > ALLOW_INLINE_MAX {
        let path = dir.join(ALLOW_FILE);
        if ying_report::write_own_bytes(&path, json.as_bytes(), false).is_ok() {
            return Some(format!("@{}", path.display()).into());
        }
    }
    Some(json.into())
}

/// The longest `allow` list passed in the environment itself (see [`allow_value`]).
const ALLOW_INLINE_MAX: usize = 16 * 1024;

/// The file a longer `allow` list is passed in, in the run's directory.
const ALLOW_FILE: &str = "allow.json";

/// What a test process is told to be measured: the report directory, the run's token, process attribution and
/// deferred symbols; the code it knows by address and the workspace's `allow` patterns when there are any; and,
/// under `--measure all` (and nextest's wrapper), the interposer preloaded with the test's identity.
pub(crate) struct Measuring<'a> {
    /// Where its report goes.
    pub report_dir: &'a Path,
    /// The run's token, which its report must carry.
    pub token: &'a str,
    /// [`KNOWN_CODE_ENV`]'s value for its binary.
    pub known_code: Option<Arc<str>>,
    /// [`ALLOW_ENV`]'s value, JSON.
    pub allow: Option<&'a str>,
    /// [`TASK_BUDGETS_ENV`]'s value: the workspace's budgets of async tasks.
    pub task_budgets: Option<&'a str>,
    /// Where the run's test processes keep the stack walker's rules for each other ([`RULES_DIR_ENV`]).
    pub rules_dir: Option<&'a Path>,
    /// The interposer to preload, and the identity of the test it measures.
    pub interposer: Option<(&'a Path, TestIdentity)>,
}

impl Measuring<'_> {
    /// Sets the environment of `command`.
    pub(crate) fn apply(&self, command: &mut Command) {
        command
            .env(REPORT_DIR_ENV, self.report_dir)
            .env(ATTRIBUTION_ENV, "process")
            .env(DEFER_SYMBOLS_ENV, "1")
            .env(RUN_TOKEN_ENV, self.token);
        if let Some(allow) = self.allow {
            command.env(ALLOW_ENV, allow);
        }
        if let Some(task_budgets) = self.task_budgets {
            command.env(TASK_BUDGETS_ENV, task_budgets);
        }
        if let Some(known_code) = &self.known_code {
            command.env(KNOWN_CODE_ENV, &**known_code);
        }
        if let Some(rules_dir) = self.rules_dir {
            command.env(RULES_DIR_ENV, rules_dir);
        }
        if let Some((library, identity)) = &self.interposer {
            let identity = serde_json::to_string(identity).expect("an identity is JSON");
            command.env(PRELOAD_ENV, preload_value(library)).env(MEASURE_TEST_ENV, identity);
        }
    }
}

/// Where a test process's output goes.
pub(crate) enum Output<'a> {
    /// Its standard output and error, interleaved as written, into this file (which is created).
    File(&'a Path),
    /// Where this process's go: the terminal (`--no-capture`, or nextest's).
    Inherited,
    /// Passed on to this process's as written (to nextest, which captures them), the first panic's message and the
    /// last lines kept ([`Relay`]).
    Relayed,
}

/// How a test process is started and waited for.
pub(crate) enum Watch<'a> {
    /// In a process group of its own (see [`process::spawn`]), waited for until `timeout`, until `cancel` is set
    /// (`--max-fail N:immediate`, N being `max_fail`) or until cargo ying is asked to stop; its group is killed
    /// once it ended: `cargo ying test`.
    OwnGroup {
        /// The longest it may run.
        timeout: Duration,
        /// Set when the run stops the tests running.
        cancel: &'a AtomicBool,
        /// The failures after which the run stops the tests running, as a cancelled test tells it.
        max_fail: usize,
    },
    /// In this process's group, waited for to its end: nextest's wrapper, whose group nextest ends at the test's
    /// timeout or when it is stopped. A SIGINT or SIGTERM to this process is passed on to the test; a test so
    /// stopped `timeout` (nextest's) or more after it started timed out, else it was stopped.
    CallersGroup {
        /// The timeout of nextest's profile, when it has one.
        timeout: Option<Duration>,
    },
}

/// One test's process to run, measured.
pub(crate) struct Attempting<'a> {
    /// Which test: the report taken must be this test's.
    pub id: &'a TestId,
    /// Its binary, whose stacks the report leaves as addresses.
    pub binary: &'a Path,
    /// The directory of its package, which its report's source paths are made relative to.
    pub package_dir: &'a Path,
    /// Where the package was when the binary was built, when that was elsewhere (a nextest archive's run on another
    /// machine or in another directory): the binary's debug information names its files there, and they are made
    /// relative to it as to `package_dir`.
    pub built_in: Option<&'a Path>,
    /// The binary with its arguments (and its directory and input, where the caller sets them).
    pub command: Command,
    /// The environment that asks the test for its report.
    pub measuring: Measuring<'a>,
    /// Where its output goes.
    pub output: Output<'a>,
    /// How it is started and waited for.
    pub watch: Watch<'a>,
    /// Where its report is kept, under `reports/` (see [`take_report`]).
    pub store: &'a Path,
    /// Names the stacks its report left as addresses; `None` leaves them so, for whoever reads the report next
    /// (nextest's wrapper leaves them to `cargo ying gate`, which names every test's once per binary).
    pub symbolizer: Option<&'a Symbolizer>,
}

/// How one attempt of a test ended, as the run model takes it.
#[derive(Debug)]
pub(crate) struct Attempt {
    /// How it ended, a test that never reported told apart ([`Outcome::of_process`]).
    pub outcome: Outcome,
    /// The code its process exited with, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that killed its process, when one did.
    pub killed_by: Option<i32>,
    /// The signal this process was sent and passed on to the test (nextest's wrapper), when one was.
    pub stopped_by: Option<i32>,
    /// When it started.
    pub started_at: SystemTime,
    /// How long its process ran.
    pub duration: Duration,
    /// Its report, stored, for a test that reported.
    pub leak: Option<Leak>,
    /// What went wrong around the test without failing it (a report refused, say).
    pub warnings: Vec<String>,
    /// What was kept of its output, when it was relayed ([`Output::Relayed`]).
    pub kept: Option<Kept>,
}

impl Attempting<'_> {
    /// Runs the test's process, waits for it as [`Watch`] says, and takes its report. An error is a process that
    /// could not be started (or, in the caller's group, waited for).
    pub(crate) fn run(mut self) -> std::io::Result<Attempt> {
        self.measuring.apply(&mut self.command);
        if let Output::File(path) = self.output {
            let output = File::create(path)?;
            self.command.stdout(output.try_clone()?).stderr(output);
        }
        let relayed = matches!(self.output, Output::Relayed);
        if relayed {
            self.command.stdout(Stdio::piped()).stderr(Stdio::piped());
        }
        let relay =
            |child: &mut std::process::Child| relayed.then(|| Relay::start(child.stdout.take(), child.stderr.take()));
        let relaying;
        let (started, started_at) = (Instant::now(), SystemTime::now());
        let mut stopped_by = None;
        let (ended, exit_code, killed_by) = match self.watch {
            Watch::OwnGroup { timeout, cancel, max_fail } => {
                let mut child = process::spawn(&mut self.command)?;
                relaying = relay(&mut child);
                match process::wait_unless(&mut child, started, timeout, cancel) {
                    Waited::Exited(status) => exited(status),
                    Waited::TimedOut => (Outcome::TimedOut(timeout), None, None),
                    Waited::Interrupted(signal) => (Outcome::Interrupted(signal), None, None),
                    Waited::Cancelled => (Outcome::Cancelled(max_fail), None, None),
                    Waited::Failed(_) => (Outcome::Failed, None, None),
                }
            }
            Watch::CallersGroup { timeout } => {
                let mut child = self.command.spawn()?;
                relaying = relay(&mut child);
                let (status, signal) = process::wait_passing_on(&mut child)?;
                let (ended, exit_code, killed_by) = exited(status);
                stopped_by = signal;
                match (signal, timeout) {
                    (None, _) => (ended, exit_code, killed_by),
                    // nextest's clock started a moment before this one.
                    (Some(_), Some(timeout)) if started.elapsed() + TIMEOUT_SLACK >= timeout => {
                        (Outcome::TimedOut(timeout), exit_code, killed_by)
                    }
                    (Some(signal), _) => (Outcome::Stopped(Some(signals::name(signal))), exit_code, killed_by),
                }
            }
        };
        let duration = started.elapsed();
        let kept = relaying.map(Relay::finish);
        let collected = take_report(self.id, self.measuring.report_dir, self.store, self.measuring.token, |report| {
            let dirs: Vec<&Path> = std::iter::once(self.package_dir).chain(self.built_in).collect();
            self.symbolizer.is_some_and(|symbolizer| symbolizer.complete(report, self.binary, &dirs))
        });
        Ok(Attempt {
            outcome: Outcome::of_process(
                ended,
                exit_code,
                collected.started,
                collected.leak.is_some(),
                self.measuring.interposer.is_some(),
            ),
            exit_code,
            killed_by,
            stopped_by,
            started_at,
            duration,
            leak: collected.leak,
            warnings: collected.warnings,
            kept,
        })
    }
}

/// How a test process that exited ended: its outcome, the code it exited with, and the signal that killed it.
fn exited(status: ExitStatus) -> (Outcome, Option<i32>, Option<i32>) {
    #[cfg(unix)]
    let killed_by = std::os::unix::process::ExitStatusExt::signal(&status);
    #[cfg(not(unix))]
    let killed_by: Option<i32> = None;
    let outcome = match killed_by {
        Some(signal) => Outcome::Crashed(signals::name(signal)),
        None if status.success() => Outcome::Passed,
        None => Outcome::Failed,
    };
    (outcome, status.code(), killed_by)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_long_allow_list_is_passed_in_a_file_and_a_short_one_in_the_variable() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(super::allow_value(&[], dir.path()), None);
        let short = super::allow_value(&["regex::".to_owned()], dir.path()).unwrap();
        assert_eq!(&*short, r#"["regex::"]"#);
        let many: Vec<String> = (0..20_000).map(|n| format!("my_crate::module_{n}::")).collect();
        let long = super::allow_value(&many, dir.path()).unwrap();
        let path = dir.path().join("allow.json");
        assert_eq!(&*long, format!("@{}", path.display()));
        assert_eq!(serde_json::from_slice::<Vec<String>>(&std::fs::read(&path).unwrap()).unwrap(), many);
    }
}
