//! The run model: each test's result decided once (outcome, figures, gate verdict, reason, files), so that every
//! output (terminal, summary.json, baseline, JUnit, GitHub annotations and step summary, index.html, flamegraphs)
//! shows the same thing. Outputs read a [`Run`]; none decides anything of its own.

use crate::gate::{self, Comparison, Gating, Reruns, TestGate};
use crate::signals;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;
use ying_report::report::{TaskGroup, TaskKind, task_groups};
use ying_report::{
    BaselineEntry, Figure, Figures, Frame, GateVerdict, LeakReport, Measured, Summary, SummaryTest, TestId,
    TestOutcome, Totals,
};

/// How many grown sites a regressed test lists ([`TestRecord::grown_sites`]); a line says how many more there are.
pub(crate) const SHOWN_SITES: usize = 5;

/// A duration as `1.234s`, as results show durations.
pub(crate) fn seconds(duration: Duration) -> String {
    format!("{:.3}s", duration.as_secs_f64())
}

/// How a test ended, with what is known of why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The test passed.
    Passed,
    /// The test failed (a failed assertion, a budget, an error returned).
    Failed,
    /// Killed by a signal (abort, segmentation fault, stack overflow, the OOM killer): its name.
    Crashed(String),
    /// Ran past the timeout and was killed.
    TimedOut(Duration),
    /// A leak test, or a test measured from outside, that started but whose process exited (with `code`) before it
    /// reported its figures, as `std::process::exit` in its body does, or an `exec` of another program: a failure,
    /// since what it retained is unknown.
    Unreported {
        /// The code the process exited with.
        code: i32,
        /// The test was measured from outside (`--measure all`, nextest's wrapper): not necessarily a leak test.
        from_outside: bool,
    },
    /// A test measured from outside that passed in a process that showed no sign of the allocation interposer (no
    /// start, no report): `LD_PRELOAD` dropped or replaced, or the library gone. Nothing measured it, so it cannot
    /// pass: a failure.
    Unmeasured,
    /// Marked `#[ignore]` and not asked for.
    Ignored,
    /// Not started: an earlier test failed and fail-fast stopped the run.
    NotRun,
    /// Stopped, or never started, because cargo ying was asked to stop (by this signal).
    Interrupted(i32),
    /// Stopped while it ran, when the run's failures reached `--max-fail N:immediate` (N): a failure, as nextest
    /// counts the tests it terminates then.
    Cancelled(usize),
    /// Stopped by nextest before it ended and not at its timeout: the signal nextest sent (SIGTERM, SIGINT when the
    /// run stopped), or `None` when the test's wrapper was killed with it and said nothing (nextest's SIGKILL). A
    /// failure: what it retained is unknown.
    Stopped(Option<String>),
}

impl Outcome {
    /// The outcome as summaries name it.
    pub(crate) fn kind(&self) -> TestOutcome {
        match self {
            Self::Passed => TestOutcome::Passed,
            Self::Failed | Self::Unreported { .. } | Self::Unmeasured | Self::Cancelled(_) => TestOutcome::Failed,
            Self::Crashed(_) | Self::Stopped(_) => TestOutcome::Crashed,
            Self::TimedOut(_) => TestOutcome::TimedOut,
            Self::Ignored => TestOutcome::Ignored,
            Self::NotRun | Self::Interrupted(_) => TestOutcome::NotRun,
        }
    }

    /// The outcome of a test whose process ended with `ended` (exiting with `exit_code`), told by what it left in
    /// its report directory: whether a leak test `started` in it (its mark, or a report cut short) and whether its
    /// report was taken; `from_outside`, whether the allocation interposer was to measure it. A test that started
    /// and whose process exited without a report never reported: what it retained is unknown, so it fails
    /// ([`Self::Unreported`]) whatever code it exited with. A test measured from outside that passed with neither
    /// is unmeasured ([`Self::Unmeasured`]): the interposer marks every test it measures as the test starts.
    /// Decided here once, for `cargo ying test`'s runner and nextest's wrapper alike.
    pub(crate) fn of_process(
        ended: Self,
        exit_code: Option<i32>,
        started: bool,
        reported: bool,
        from_outside: bool,
    ) -> Self {
        match (ended, exit_code) {
            (Self::Passed | Self::Failed, Some(code)) if started && !reported => {
                Self::Unreported { code, from_outside }
            }
            (Self::Passed, _) if from_outside && !started && !reported => Self::Unmeasured,
            (ended, _) => ended,
        }
    }

    /// Whether the outcome fails the run.
    pub(crate) fn is_failure(&self) -> bool {
        self.kind().is_failure()
    }

    /// Whether the outcome is a failure of the test's own: not a test the run cancelled (`--max-fail N:immediate`),
    /// which is neither retried, counted towards `--max-fail`, nor shown again.
    pub(crate) fn is_own_failure(&self) -> bool {
        self.is_failure() && !matches!(self, Self::Cancelled(_))
    }

    /// Whether the test ran to an end of its own (or its timeout): not ignored, not left unstarted or stopped.
    pub(crate) fn ran(&self) -> bool {
        matches!(
            self,
            Self::Passed
                | Self::Failed
                | Self::Unreported { .. }
                | Self::Unmeasured
                | Self::Crashed(_)
                | Self::TimedOut(_)
        )
    }

    /// Why the test failed, beyond its output: the signal, or the timeout.
    pub(crate) fn reason(&self) -> Option<String> {
        match self {
            Self::Crashed(signal) => Some(format!("killed by {signal}")),
            Self::TimedOut(after) => Some(format!("timed out after {}", seconds(*after))),
            Self::Unreported { code, from_outside: false } => {
                Some(format!("exited with code {code} before the leak test reported what it retained"))
            }
            Self::Unreported { code, from_outside: true } => Some(format!(
                "exited with code {code} before its figures were reported: its process ended, or ran another \
                 program (exec), while the test ran"
            )),
            Self::Unmeasured => Some(
                "nothing measured it: its process showed no sign of the allocation interposer (LD_PRELOAD dropped \
                 or replaced, or the library gone), so what it retained is unknown"
                    .to_owned(),
            ),
            Self::Interrupted(signal) => Some(format!("the run was stopped by {}", signals::name(*signal))),
            Self::Cancelled(count) => Some(format!(
                "stopped before it ended: {count} test{} failed, and --max-fail {count}:immediate stops the tests \
                 running",
                if *count == 1 { "" } else { "s" }
            )),
            Self::Stopped(Some(signal)) => Some(format!(
                "stopped by nextest with {signal} before it ended, before its timeout: the run was stopped (an \
                 interrupt, or nextest's --max-fail with terminate), so what it retained is unknown"
            )),
            Self::Stopped(None) => Some(
                "killed before it ended, without a word (nextest's SIGKILL after a timeout's grace period, the run \
                 killed, or a crash the interposer could not see: SIGSEGV, SIGBUS), so how it ended and what it \
                 retained are unknown"
                    .to_owned(),
            ),
            _ => None,
        }
    }
}

/// The first panic in `output`, as the standard library's hook writes it (`thread 'main' panicked at src/a.rs:9:5:`
/// then the message's lines): `panicked at src/a.rs:9:5: <the message's first line>`.
pub(crate) fn panic_message(output: &str) -> Option<String> {
    let mut lines = output.lines();
    let at = lines.by_ref().find_map(|line| {
        let at = &line[line.find("' panicked at ").or_else(|| line.find(") panicked at "))? + 2..];
        Some(at.strip_suffix(':').unwrap_or(at).to_owned())
    })?;
    match lines.next().map(str::trim).filter(|message| !message.is_empty()) {
        Some(message) => Some(format!("{at}: {message}")),
        None => Some(at),
    }
}

/// The error a test returned, as libtest's `Termination` for `Result` prints it (`Error: <the error, debug-printed>`):
/// `returned Error: ...`, its first line.
fn returned_error(output: &str) -> Option<String> {
    let error = output.lines().find(|line| line.starts_with("Error: "))?;
    Some(format!("returned {}", error.trim_end()))
}

/// A leak test's report, as the run uses it.
#[derive(Clone, Debug)]
pub(crate) struct Leak {
    /// The report, its stacks symbolised.
    pub report: LeakReport,
    /// Where it is stored, relative to the output directory.
    pub path: String,
}

impl Leak {
    /// The report's figures, as judged.
    pub(crate) fn figures(&self) -> Figures {
        Figures::of(&self.report)
    }
}

/// The files of a test, relative to the output directory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Files {
    /// Flamegraph of retained memory.
    pub retained_flamegraph: Option<String>,
    /// Flamegraph of allocated memory.
    pub allocated_flamegraph: Option<String>,
    /// Differential flamegraph of retained memory, baseline against now.
    pub retained_diff_flamegraph: Option<String>,
    /// The whole output of a failed test.
    pub output: Option<String>,
}

/// A failed attempt of a test that was run again (`--retries`).
#[derive(Clone, Debug)]
pub(crate) struct FailedAttempt {
    /// How it ended.
    pub outcome: Outcome,
    /// How long it ran.
    pub duration: Duration,
}

impl FailedAttempt {
    /// The attempt `record` was.
    pub(crate) fn of(record: &TestRecord) -> Self {
        Self { outcome: record.outcome.clone(), duration: record.duration }
    }
}

/// One test of the run, decided once.
#[derive(Clone, Debug)]
pub(crate) struct TestRecord {
    /// Which test.
    pub id: TestId,
    /// How its process ended.
    pub outcome: Outcome,
    /// How long its process ran.
    pub duration: Duration,
    /// Its standard output and error, interleaved as written (of a test nextest ran, the last lines the wrapper
    /// kept).
    pub output: String,
    /// The first panic's message in its output, when the output kept is not whole (nextest's wrapper keeps only
    /// the last lines).
    pub panic: Option<String>,
    /// Why it failed, as a saved summary gave it (`cargo ying merge`): said as it was.
    pub reason: Option<String>,
    /// Its report, for a leak test whose report could be used.
    pub leak: Option<Leak>,
    /// The gate's judgement, when there is a baseline and the test has figures.
    pub gate: Option<TestGate>,
    /// The test's baseline entry, when the baseline has one.
    pub baseline: Option<BaselineEntry>,
    /// Its flamegraphs.
    pub files: Files,
    /// What went wrong around the test without failing it (a report refused, say).
    pub warnings: Vec<String>,
    /// The directory of the test's package, which its report's source paths are relative to (known for the tests
    /// of a run, not for those read back from a summary).
    pub package_dir: Option<PathBuf>,
    /// The attempts that failed before this one, when the test was retried (`--retries`).
    pub failed_attempts: Vec<FailedAttempt>,
}

impl TestRecord {
    /// A test that ended with `outcome`, nothing else known yet.
    pub(crate) fn new(id: TestId, outcome: Outcome, duration: Duration, output: String) -> Self {
        Self {
            id,
            outcome,
            duration,
            output,
            panic: None,
            reason: None,
            leak: None,
            gate: None,
            baseline: None,
            files: Files::default(),
            warnings: Vec::new(),
            package_dir: None,
            failed_attempts: Vec::new(),
        }
    }

    /// How many times the test ran in the run (its retries and the last attempt).
    pub(crate) fn attempts(&self) -> u32 {
        u32::try_from(self.failed_attempts.len()).unwrap_or(u32::MAX).saturating_add(1)
    }

    /// Passed after failing: flaky, as cargo-nextest calls it.
    pub(crate) fn is_flaky(&self) -> bool {
        self.outcome == Outcome::Passed && !self.failed_attempts.is_empty()
    }

    /// Why the test failed, when that is known: the reason a saved summary gave, the signal or the timeout
    /// ([`Outcome::reason`]), else the leak test's message of its exceeded budgets, else the message of the panic
    /// its output shows (`panicked at tests/a.rs:9:5: assertion failed`), else the leak test's message of its body's
    /// failure, else the error a test returned (libtest's `Error: ...`).
    /// `None` for a test that did not fail.
    pub(crate) fn why_it_failed(&self) -> Option<String> {
        if let Some(reason) = self.reason.clone().or_else(|| self.outcome.reason()) {
            return Some(reason);
        }
        if !self.outcome.is_failure() {
            return None;
        }
        let leak_message = self.leak.as_ref().and_then(|leak| leak.report.message.clone());
        let panicked = || self.panic.clone().or_else(|| panic_message(&self.output));
        match &self.leak {
            // Its budgets: the leak test's own words.
            Some(leak) if leak.report.outcome == ying_report::report::Outcome::Failed => leak_message.or_else(panicked),
            // Its body panicked: the panic, with where, when the output shows it.
            _ => panicked().or(leak_message),
        }
        .or_else(|| returned_error(&self.output))
    }

    /// The gate's verdict, when it judged the test.
    pub(crate) fn verdict(&self) -> Option<GateVerdict> {
        self.gate.as_ref().map(|gate| gate.verdict)
    }

    /// Where the test's source is, when its report says (leak tests' do; a test measured from outside does not):
    /// file relative to its package, line.
    pub(crate) fn source(&self) -> Option<(String, u32)> {
        let test = &self.leak.as_ref()?.report.test;
        (!test.file.is_empty()).then(|| (test.file.replace('\\', "/"), test.line))
    }

    /// Why the test failed, in a few words or the leak test's message: [`Self::why_it_failed`], or that it failed
    /// when nothing says why.
    pub(crate) fn failure_message(&self) -> String {
        self.why_it_failed().unwrap_or_else(|| "the test failed".to_owned())
    }

    /// The leak test's message (why it failed) when its captured output does not hold it: a test that closed its
    /// standard error, or whose harness lost it. What the terminal adds under the output.
    pub(crate) fn message_not_in_output(&self) -> Option<&str> {
        let message = self.leak.as_ref()?.report.message.as_deref()?;
        let first = message.lines().next()?;
        (!self.output.contains(first)).then_some(message)
    }

    /// The sites a regressed test's memory grew at ([`gate::grown_sites`]), by their index in its report's
    /// retained sites, lost memory as valgrind groups it (a grown site another's lost blocks own is named by that
    /// one). Empty unless the gate's verdict is that the test regressed.
    pub(crate) fn grown_site_indices(&self) -> Vec<usize> {
        let (Some(leak), Some(before), Some(GateVerdict::Regressed)) = (&self.leak, &self.baseline, self.verdict())
        else {
            return Vec::new();
        };
        let all = &leak.report.retained_sites;
        let grown = gate::grown_sites(before, &leak.report)
            .into_iter()
            .filter_map(|site| all.iter().position(|other| std::ptr::eq(other, site)));
        ying_frames::why::grouped(all, grown)
    }

    /// The line of the retained site at `index` of the test's report, as every output words it
    /// ([`ying_frames::why::site_line`], and the lost blocks it owns).
    fn site_line(&self, index: usize) -> Option<String> {
        let all = &self.leak.as_ref()?.report.retained_sites;
        let site = all.get(index)?;
        let line = ying_frames::why::site_line(site);
        Some(match ying_frames::why::owning(all, site) {
            Some(owning) => format!("{line}; {owning}"),
            None => line,
        })
    }

    /// Where a regressed test's memory grew ([`Self::grown_site_indices`]), as every output lists it: a line per
    /// site in the words of [`ying_frames::why::site_line`] (size, blocks, type, why it is still there, file:line),
    /// at most [`SHOWN_SITES`], then `... and 3 more`. Empty unless the gate's verdict is that the test regressed.
    ///
    /// The async tasks of each kind whose count regressed come first, a line each ([`TaskEntry`]'s words: kind,
    /// future, spawn line, bytes).
    pub(crate) fn grown_sites(&self) -> Vec<String> {
        let sites = self.grown_site_indices();
        let mut lines = self.grown_tasks();
        lines.extend(sites.iter().take(SHOWN_SITES).filter_map(|&index| self.site_line(index)));
        if sites.len() > SHOWN_SITES {
            lines.push(format!("... and {} more", sites.len() - SHOWN_SITES));
        }
        lines
    }

    /// The tasks of the kinds whose count regressed, in their words, at most [`SHOWN_SITES`] lines.
    fn grown_tasks(&self) -> Vec<String> {
        let groups = self.grown_task_groups();
        let mut lines: Vec<String> = groups.iter().take(SHOWN_SITES).map(|group| group.line.clone()).collect();
        if groups.len() > SHOWN_SITES {
            lines.push(format!("... and {} more lines of tasks", groups.len() - SHOWN_SITES));
        }
        lines
    }

    /// The tasks of the kinds whose count regressed, grouped as every output lists them
    /// ([`ying_report::report::task_groups`]), a kind after another. Empty unless the test regressed.
    fn grown_task_groups(&self) -> Vec<TaskGroup<'_>> {
        let Some(leak) = &self.leak else { return Vec::new() };
        let grown: Vec<Figure> = self.gate.iter().flat_map(|gate| gate.regressions()).map(|row| row.figure).collect();
        let kinds = [TaskKind::Leaked, TaskKind::Lingering, TaskKind::Unclaimed];
        Figure::TASKS
            .into_iter()
            .zip(kinds)
            .filter(|(figure, _)| grown.contains(figure))
            .flat_map(|(_, kind)| task_groups(leak.report.tasks.iter().filter(move |task| task.kind == kind)))
            .collect()
    }

    /// The test's entry in summary.json.
    pub(crate) fn summary(&self) -> SummaryTest {
        let mut test = SummaryTest::new(self.id.clone(), self.outcome.kind());
        test.reason = if self.outcome.is_failure() { Some(self.failure_message()) } else { self.outcome.reason() };
        test.gate = self.verdict();
        test.figures = self.leak.as_ref().map(Leak::figures);
        test.steady_state = self.leak.as_ref().and_then(|leak| Figures::steady_state(&leak.report));
        test.sites = self.leak.as_ref().map(|leak| ying_frames::retained_sites(&leak.report)).unwrap_or_default();
        test.excused_bytes = self.leak.as_ref().map_or(0, |leak| leak.report.excused_bytes);
        test.tasks = self.leak.as_ref().map(|leak| leak.report.tasks.clone()).unwrap_or_default();
        test.cycles = self.leak.as_ref().map(|leak| leak.report.cycles.clone()).unwrap_or_default();
        test.baseline_retained_bytes = self.baseline.as_ref().map(|entry| entry.retained_bytes);
        test.report = self.leak.as_ref().map(|leak| leak.path.clone());
        test.retained_flamegraph = self.files.retained_flamegraph.clone();
        test.allocated_flamegraph = self.files.allocated_flamegraph.clone();
        test.retained_diff_flamegraph = self.files.retained_diff_flamegraph.clone();
        test.warnings = self.warnings.clone();
        test.reruns = self.gate.as_ref().and_then(|gate| gate.reruns.clone());
        test.attempts = (self.attempts() > 1).then(|| self.attempts());
        test.duration = self.outcome.ran().then_some(self.duration.as_secs_f64());
        test.output = self.files.output.clone();
        test
    }

    /// The test's baseline entry: its figures and retained sites.
    pub(crate) fn baseline_entry(&self) -> Option<BaselineEntry> {
        let leak = self.leak.as_ref()?;
        Some(gate::entry(&leak.report))
    }
}

/// What the gate found for the run as a whole.
#[derive(Clone, Debug)]
pub(crate) struct RunGate {
    /// The baseline file.
    pub baseline: PathBuf,
    /// How it judged.
    pub gating: Gating,
    /// The comparison, per test and for the tests missing from the run.
    pub comparison: Comparison,
    /// New and missing tests fail the run too (`--check`).
    pub check: bool,
}

/// A whole run: every test, decided once.
#[derive(Clone, Debug)]
pub(crate) struct Run {
    /// Every test, in the order of the binaries and their listing.
    pub tests: Vec<TestRecord>,
    /// How long the tests took.
    pub elapsed: Duration,
    /// After how many failed tests the run stops starting tests (1: fail-fast); `None`: it never does.
    pub max_fail: Option<usize>,
    /// The gate, when there is a baseline.
    pub gate: Option<RunGate>,
    /// The signal that stopped the run before every test ran (SIGINT, SIGTERM): the run is incomplete.
    pub interrupted: Option<i32>,
}

/// One cause of a run's regressions: a site where retained memory grew (its frame in the package's code, else its
/// key, [`ying_frames::site_key`]), and every regressed test it grew in. One leaking function that many tests call
/// is one cause, said once.
#[derive(Clone, Debug)]
pub(crate) struct Cause<'a> {
    /// The site's line in the first test it grew in, as every output words it, without the test
    /// ([`ying_frames::why::site_line_alone`]).
    pub line: String,
    /// The site's frame in the package's code, with its file (relative to its package) and line, when it has one;
    /// for tasks, the spawn's.
    pub frame: Option<Frame>,
    /// The tests it grew in, in the run's order.
    pub tests: Vec<&'a TestRecord>,
    /// The most bytes one of them retains there.
    pub bytes: u64,
}

/// The fewest tests that retain memory in one static for the terminal to name it once ([`Run::retained_statics`]).
pub(crate) const SHARED_BY: usize = 3;

/// A static that tests of a run retain memory in; one that several do is more often the process's own state (a
/// runtime's registry, a dependency's cache) than a leak of each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SharedStatic {
    /// The static, as the reports name it (`tokio::signal::registry::globals::GLOBALS`, `data of libc.so.6`).
    pub root: String,
    /// How many tests retain memory it holds.
    pub tests: usize,
    /// The most bytes it holds of one test.
    pub bytes: u64,
    /// The `allow` pattern that excuses it in every test: a module path of the static's
    /// (`tokio::signal::registry::`) that a frame of every site whose memory it holds reads; `None` when none does.
    pub pattern: Option<String>,
}

impl SharedStatic {
    /// The pattern for a static named `root` whose memory was allocated at each of `stacks`: the longest of its
    /// module paths (`tokio::signal::registry::globals::`, then `tokio::signal::registry::`, ...) that a frame of
    /// every stack reads, of two segments at least (never a crate's whole code).
    fn pattern(root: &str, stacks: &[&[ying_report::Frame]]) -> Option<String> {
        if root.contains(char::is_whitespace) {
            return None;
        }
        let mut module = root.rsplit_once("::")?.0;
        while module.contains("::") {
            let pattern = format!("{module}::");
            if stacks.iter().all(|frames| frames.iter().any(|frame| frame.function.contains(&pattern))) {
                return Some(pattern);
            }
            module = module.rsplit_once("::")?.0;
        }
        None
    }
}

impl Run {
    /// The statics the run's tests retain memory in, the most tests first, each with the `allow` line that excuses
    /// it where there is one: `index.html` lists them, and the terminal names once those [`SHARED_BY`] tests share.
    pub(crate) fn retained_statics(&self) -> Vec<SharedStatic> {
        let mut by_root: BTreeMap<&str, (usize, u64, Vec<&[ying_report::Frame]>)> = BTreeMap::new();
        for test in &self.tests {
            let Some(leak) = &test.leak else { continue };
            let mut held: BTreeMap<&str, u64> = BTreeMap::new();
            for site in leak.report.retained_sites.iter().filter(|site| !site.excused) {
                for why in site.why.iter().filter(|why| why.kind == ying_report::report::Reach::Static) {
                    let Some(root) = why.root.as_deref() else { continue };
                    *held.entry(root).or_default() += why.bytes;
                    by_root.entry(root).or_default().2.push(&site.frames);
                }
            }
            for (root, bytes) in held {
                let (tests, most, _) = by_root.entry(root).or_default();
                *tests += 1;
                *most = (*most).max(bytes);
            }
        }
        let mut shared: Vec<SharedStatic> = by_root
            .into_iter()
            .map(|(root, (tests, bytes, stacks))| SharedStatic {
                root: root.to_owned(),
                tests,
                bytes,
                pattern: SharedStatic::pattern(root, &stacks),
            })
            .collect();
        shared.sort_by(|a, b| b.tests.cmp(&a.tests).then(b.bytes.cmp(&a.bytes)).then(a.root.cmp(&b.root)));
        shared
    }

    /// The causes of the run's regressions ([`Cause`]): most tests first, then most bytes. A regressed test whose
    /// memory grew at no site (its peak, its allocations) is in none.
    pub(crate) fn causes(&self) -> Vec<Cause<'_>> {
        let mut causes: Vec<Cause<'_>> = Vec::new();
        let mut by_key: BTreeMap<String, usize> = BTreeMap::new();
        for test in &self.tests {
            let Some(leak) = &test.leak else { continue };
            for index in test.grown_site_indices() {
                let all = &leak.report.retained_sites;
                let site = &all[index];
                let frame = ying_frames::leak_site(&site.frames).map(|frame| site.frames[frame].clone());
                // The site's own frame in the package's code, whichever test called it; else its whole stack.
                let key = match &frame {
                    Some(frame) => format!("{}@{:?}:{:?}", frame.function, frame.file, frame.line),
                    None => ying_frames::site_key(&site.frames),
                };
                let at = *by_key.entry(key).or_insert_with(|| {
                    let line = ying_frames::why::site_line_alone(site);
                    causes.push(Cause {
                        line: match ying_frames::why::owning(all, site) {
                            Some(owning) => format!("{line}; {owning}"),
                            None => line,
                        },
                        frame,
                        tests: Vec::new(),
                        bytes: 0,
                    });
                    causes.len() - 1
                });
                let cause = &mut causes[at];
                if !cause.tests.iter().any(|other| std::ptr::eq(*other, test)) {
                    cause.tests.push(test);
                }
                cause.bytes = cause.bytes.max(site.bytes);
            }
            // Tasks of a kind whose count regressed: one cause per kind, future and spawn line.
            for TaskGroup { first: task, bytes, line } in test.grown_task_groups() {
                let key = format!("task {:?} {:?} {:?}", task.kind, task.future, task.spawned_at);
                let at = *by_key.entry(key).or_insert_with(|| {
                    let frame = task.spawned_at.as_deref().and_then(|at| {
                        let (file, line) = at.rsplit_once(':')?;
                        let function = task.future.clone().unwrap_or_default();
                        Some(Frame::new(function, Some(file.to_owned()), line.parse().ok()))
                    });
                    causes.push(Cause { line, frame, tests: Vec::new(), bytes: 0 });
                    causes.len() - 1
                });
                let cause = &mut causes[at];
                if !cause.tests.iter().any(|other| std::ptr::eq(*other, test)) {
                    cause.tests.push(test);
                }
                cause.bytes = cause.bytes.max(bytes);
            }
        }
        causes.sort_by(|a, b| b.tests.len().cmp(&a.tests.len()).then(b.bytes.cmp(&a.bytes)));
        causes
    }

    /// Judges every leak test against the baseline's `entries`: each record gets its verdict and its baseline
    /// entry. `complete`: the run covered every test, so baseline entries without a counterpart are missing (unless
    /// the baseline `measured` every test and this run only the leak tests: [`Comparison::measured`]).
    ///
    /// [`Comparison::measured`]: crate::gate::Comparison::measured
    pub(crate) fn judge(
        &mut self,
        baseline: PathBuf,
        entries: &BTreeMap<TestId, BaselineEntry>,
        [recorded, measured]: [Measured; 2],
        gating: Gating,
        complete: bool,
        check: bool,
    ) {
        let current = self.baseline_entries();
        let mut comparison = crate::gate::compare(entries, &current, &gating, complete);
        comparison.measured(recorded, measured);
        for test in &mut self.tests {
            test.baseline = entries.get(&test.id).cloned();
            test.gate = comparison.tests.get(&test.id).cloned();
        }
        self.gate = Some(RunGate { baseline, gating, comparison, check });
    }

    /// [`judge`](Self::judge) against `entries` of a baseline of the leak tests, by the default gating, without
    /// `--check`: as unit tests judge a run.
    #[cfg(test)]
    pub(crate) fn judge_by_default(&mut self, entries: &BTreeMap<TestId, BaselineEntry>, complete: bool) {
        let gating = Gating::new(crate::gate::Tolerance::default(), &[]);
        self.judge("b.json".into(), entries, [Measured::LeakTests; 2], gating, complete, false);
    }

    /// Settles the verdict of test `id`, which crossed the tolerance, with what its reruns showed: in its record
    /// and in the run's comparison alike.
    pub(crate) fn settle(&mut self, id: &TestId, reruns: Reruns) {
        if let Some(gate) = self.tests.iter_mut().find(|test| &test.id == id).and_then(|test| test.gate.as_mut()) {
            gate.settle(reruns.clone());
        }
        if let Some(gate) = self.gate.as_mut().and_then(|gate| gate.comparison.tests.get_mut(id)) {
            gate.settle(reruns);
        }
    }

    /// How many tests were measured: those with a report of their memory (leak tests, or every test under
    /// `--measure all`).
    pub(crate) fn measured(&self) -> usize {
        self.tests.iter().filter(|test| test.leak.is_some()).count()
    }

    /// Whether a test failed, crashed or timed out.
    pub(crate) fn failed(&self) -> bool {
        self.tests.iter().any(|test| test.outcome.is_failure())
    }

    /// Whether the gate fails the run.
    pub(crate) fn regressed(&self) -> bool {
        self.gate.as_ref().is_some_and(|gate| gate.comparison.fails(gate.check))
    }

    /// The run's totals, as every output states them.
    pub(crate) fn totals(&self) -> Totals {
        Totals::of(self.tests.iter().map(|test| (test.outcome.kind(), test.verdict(), test.attempts())))
    }

    /// The tests that fail the run, failed tests first (in the run's order), then regressed ones.
    pub(crate) fn failures(&self) -> impl Iterator<Item = &TestRecord> {
        let failed = self.tests.iter().filter(|test| test.outcome.is_failure());
        let regressed = self
            .tests
            .iter()
            .filter(|test| !test.outcome.is_failure() && test.verdict() == Some(GateVerdict::Regressed));
        failed.chain(regressed)
    }

    /// The leak tests' baseline entries, as this run measured them.
    pub(crate) fn baseline_entries(&self) -> BTreeMap<TestId, BaselineEntry> {
        self.tests.iter().filter_map(|test| Some((test.id.clone(), test.baseline_entry()?))).collect()
    }

    /// The entries `--save-baseline` writes, with the `gated` figures: those of the measured tests that do not keep
    /// their recorded entry ([`gate::keeps_recorded`]); with `every`, every measured test's (the baseline is to be
    /// written anew).
    pub(crate) fn entries_to_save(&self, gated: &[Figure], every: bool) -> BTreeMap<TestId, BaselineEntry> {
        self.tests
            .iter()
            .filter(|test| every || !gate::keeps_recorded(test.verdict(), test.baseline.as_ref(), gated))
            .filter_map(|test| Some((test.id.clone(), test.baseline_entry()?.keeping(gated))))
            .collect()
    }

    /// summary.json.
    pub(crate) fn summary(&self) -> Summary {
        let mut summary = Summary::new(self.tests.iter().map(TestRecord::summary).collect());
        summary.interrupted = self.interrupted.map(signals::name);
        summary.totals = Some(self.totals());
        summary.duration = Some(self.elapsed.as_secs_f64());
        summary
    }

    /// The exit code of the run's verdict: stopped by a signal, a test failed, memory regressed (unless the run is
    /// saved as the baseline), or every test passed.
    pub(crate) fn exit_code(&self, saving: bool) -> u8 {
        match self.interrupted {
            Some(signal) => ying_report::exit_code::stopped_by(signal),
            None => ying_report::exit_code::of_run(self.failed(), self.regressed() && !saving),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Leak, Outcome, Run, TestRecord};
    use crate::gate::Reruns;
    use std::collections::BTreeMap;
    use std::time::Duration;
    use ying_report::report::{Attribution, Budgets, TestIdentity};
    use ying_report::{BaselineEntry, Figures, GateVerdict, LeakReport, TargetKind, TestId, TestOutcome};

    fn leak_test(name: &str, retained: u64, outcome: Outcome) -> TestRecord {
        let id = TestId::new("p", TargetKind::Test, "leaks", name);
        let mut record = TestRecord::new(id, outcome, Duration::from_millis(5), String::new());
        let mut report = LeakReport::new(
            TestIdentity::new("p", None, "leaks", name, "tests/leaks.rs", 3),
            Attribution::Process,
            Budgets::default(),
        );
        report.figures.retained_bytes = retained;
        record.leak = Some(Leak { report, path: format!("reports/p/test/leaks/{name}.json") });
        record
    }

    #[test]
    fn statics_many_tests_retain_are_counted_once_each_with_the_allow_line_that_excuses_them() {
        use ying_report::Frame;
        use ying_report::report::{Reach, RetainedSite, Why};
        let held_by = |root: &str, bytes: u64, function: &str| {
            let mut site = RetainedSite::new(bytes, 1, false, vec![Frame::new(function, None, None)]);
            site.why = vec![Why { kind: Reach::Static, root: Some(root.to_owned()), bytes, blocks: 1 }];
            site
        };
        let registry = "tokio::signal::registry::globals::GLOBALS";
        let mut tests: Vec<TestRecord> =
            (0..4).map(|index| leak_test(&format!("t{index}"), 24_000, Outcome::Passed)).collect();
        for (index, test) in tests.iter_mut().enumerate() {
            let report = &mut test.leak.as_mut().unwrap().report;
            // Two sites of the registry in one test are one test; the bytes grow with the test's index.
            report.retained_sites.push(held_by(
                registry,
                23_000 + index as u64,
                "tokio::signal::registry::globals::{{closure}}",
            ));
            report.retained_sites.push(held_by(registry, 100, "tokio::signal::registry::Registry::register"));
            if index < 2 {
                report.retained_sites.push(held_by("app::CACHE", 600, "app::Cache::fill"));
                report.retained_sites.push(held_by("data of libc.so.6", 4599, "getaddrinfo"));
            }
        }
        // An excused site is no one's.
        let excused = tests[0].leak.as_mut().unwrap().report.retained_sites.last_mut().unwrap();
        excused.excused = true;
        let run = Run { tests, elapsed: Duration::ZERO, max_fail: None, gate: None, interrupted: None };
        let found = run.retained_statics();
        let found: Vec<(&str, usize, u64, Option<&str>)> = found
            .iter()
            .map(|shared| (shared.root.as_str(), shared.tests, shared.bytes, shared.pattern.as_deref()))
            .collect();
        assert_eq!(
            found,
            [
                (registry, 4, 23_103, Some("tokio::signal::registry::")),
                // Its functions do not read `app::CACHE`'s module (a crate's whole code is never proposed).
                ("app::CACHE", 2, 600, None),
                ("data of libc.so.6", 1, 4599, None),
            ]
        );
    }

    #[test]
    fn a_regression_shows_the_same_in_the_summary_and_the_exit_status() {
        let mut run = Run {
            tests: vec![leak_test("grew", 5000, Outcome::Passed), leak_test("same", 10, Outcome::Passed)],
            elapsed: Duration::ZERO,
            max_fail: None,
            gate: None,
            interrupted: None,
        };
        let entry = |retained_bytes| BaselineEntry::new(Figures { retained_bytes, ..Figures::default() }, Vec::new());
        let baseline: BTreeMap<TestId, BaselineEntry> =
            [(run.tests[0].id.clone(), entry(10)), (run.tests[1].id.clone(), entry(10))].into();
        run.judge_by_default(&baseline, true);
        assert!(!run.failed() && run.regressed());
        let summary = run.summary();
        assert_eq!(summary.tests[0].gate, Some(GateVerdict::Regressed));
        assert_eq!(summary.tests[0].outcome, TestOutcome::Passed);
        assert_eq!(summary.tests[0].baseline_retained_bytes, Some(10));
        assert_eq!(summary.tests[1].gate, Some(GateVerdict::Unchanged));
    }

    #[test]
    fn a_regression_that_does_not_reproduce_is_unstable_everywhere_and_saving_keeps_what_did_not_move() {
        let mut run = Run {
            tests: vec![
                leak_test("flaky", 9000, Outcome::Passed),
                leak_test("leaky", 9000, Outcome::Passed),
                leak_test("same", 10, Outcome::Passed),
                leak_test("fresh", 10, Outcome::Passed),
            ],
            elapsed: Duration::ZERO,
            max_fail: None,
            gate: None,
            interrupted: None,
        };
        let entry = |retained_bytes| BaselineEntry::new(Figures { retained_bytes, ..Figures::default() }, Vec::new());
        let baseline: BTreeMap<TestId, BaselineEntry> = ["flaky", "leaky", "same"]
            .iter()
            .zip([entry(100), entry(100), entry(12)])
            .map(|(&name, entry)| (TestId::new("p", TargetKind::Test, "leaks", name), entry))
            .collect();
        run.judge_by_default(&baseline, true);
        assert!(run.regressed());
        let [flaky, leaky] = [0, 1].map(|index| run.tests[index].id.clone());
        run.settle(&flaky, Reruns { crossed: 1, runs: 2, ..Reruns::default() });
        run.settle(&leaky, Reruns { crossed: 2, runs: 2, ..Reruns::default() });
        let summary = run.summary();
        let verdicts: Vec<_> = summary.tests.iter().map(|test| test.gate).collect();
        let expected = [GateVerdict::Unstable, GateVerdict::Regressed, GateVerdict::Unchanged, GateVerdict::New];
        assert_eq!(verdicts, expected.map(Some));
        let gate = run.gate.as_ref().unwrap();
        assert_eq!(gate.comparison.tests[&flaky].verdict, GateVerdict::Unstable, "the table says the same");
        let regressed: Vec<_> = gate.comparison.regressions().map(|(id, _)| id.name.as_str()).collect();
        assert_eq!(regressed, ["leaky"], "an unstable test's rows are no regression");
        assert!(run.regressed(), "the reproduced regression still fails the run");
        assert_eq!(run.totals().to_string(), "4 tests run: 4 passed; memory: 1 regressed, 1 unstable");
        let failing: Vec<_> = run.failures().map(|test| test.id.name.as_str()).collect();
        assert_eq!(failing, ["leaky"], "listed again after the Summary");
        // Saving writes the tests that moved (and new ones); the unstable and unchanged keep their entries.
        let saved: Vec<_> = run.entries_to_save(&[], false).into_keys().map(|id| id.name).collect();
        assert_eq!(saved, ["fresh", "leaky"]);
    }

    #[test]
    fn a_regressed_test_lists_its_grown_sites_in_the_words_of_every_output_five_at_most() {
        use ying_report::Frame;
        use ying_report::report::{Reach, RetainedSite, Why};
        let mut record = leak_test("forgets", 0, Outcome::Passed);
        let report = &mut record.leak.as_mut().unwrap().report;
        report.figures.retained_bytes = 24_576 + 7 * 512;
        let site = |bytes, line, reach| {
            let frames = vec![
                Frame::new("alloc::raw_vec::RawVec<T>::allocate_in", None, None),
                Frame::new("leaks::forgets", Some("tests/leaks.rs".into()), Some(line)),
            ];
            let mut site = RetainedSite::new(bytes, 1, false, frames);
            site.type_name = Some("u8".into());
            site.why = vec![Why { kind: reach, root: None, bytes, blocks: 1 }];
            site
        };
        report.retained_sites = vec![site(24_576, 10, Reach::Static)];
        report.retained_sites.extend((0..7).map(|line| site(512, 20 + line, Reach::Lost)));
        let mut before = crate::gate::entry(report);
        (before.retained_bytes, before.lost_bytes) = (24_576, Some(0));
        before.sites = vec![("leaks::forgets".to_owned(), 24_576)];
        let mut run =
            Run { tests: vec![record], elapsed: Duration::ZERO, max_fail: None, gate: None, interrupted: None };
        let baseline: BTreeMap<TestId, BaselineEntry> = [(run.tests[0].id.clone(), before)].into();
        assert!(run.tests[0].grown_sites().is_empty(), "not judged yet");
        run.judge_by_default(&baseline, true);
        let lines = run.tests[0].grown_sites();
        assert_eq!(lines.len(), 6, "{lines:#?}");
        assert_eq!(
            lines[0],
            "512 B in 1 block of u8, lost (nothing points to it), at tests/leaks.rs:20 in leaks::forgets"
        );
        assert_eq!(lines[5], "... and 2 more");
        assert!(lines.iter().all(|line| !line.contains(":10 ")), "the static did not grow: {lines:#?}");
    }

    #[test]
    fn a_regressed_count_of_tasks_lists_the_tasks_of_its_kind_before_the_sites() {
        use ying_report::report::{TaskEntry, TaskKind};
        let mut record = leak_test("spawns", 0, Outcome::Passed);
        let report = &mut record.leak.as_mut().unwrap().report;
        let task = |kind, line: u32| {
            TaskEntry::new(kind, Some("leaks::serve".into()), Some(format!("tests/leaks.rs:{line}")), 256)
        };
        report.tasks = vec![task(TaskKind::Lingering, 8), task(TaskKind::Leaked, 9), task(TaskKind::Unclaimed, 10)];
        let before = BaselineEntry { lingering_tasks: 1, unclaimed_tasks: 0, ..crate::gate::entry(report) };
        let mut run =
            Run { tests: vec![record], elapsed: Duration::ZERO, max_fail: None, gate: None, interrupted: None };
        let before = BaselineEntry { leaked_tasks: 0, ..before };
        let baseline: BTreeMap<TestId, BaselineEntry> = [(run.tests[0].id.clone(), before)].into();
        run.judge_by_default(&baseline, true);
        assert_eq!(
            run.tests[0].grown_sites(),
            [
                "leaked task `leaks::serve`, spawned at tests/leaks.rs:9, 256 B",
                "unclaimed task `leaks::serve`, spawned at tests/leaks.rs:10, 256 B"
            ],
            "the lingering task was there before"
        );
    }

    #[test]
    fn outcomes_name_their_reason() {
        assert_eq!(Outcome::Crashed("SIGABRT".into()).reason().as_deref(), Some("killed by SIGABRT"));
        assert_eq!(Outcome::TimedOut(Duration::from_secs(4)).reason().as_deref(), Some("timed out after 4.000s"));
        assert_eq!(Outcome::Failed.reason(), None);
        let unreported = Outcome::Unreported { code: 0, from_outside: false };
        assert_eq!(
            unreported.reason().as_deref(),
            Some("exited with code 0 before the leak test reported what it retained")
        );
        assert!(unreported.is_failure());
        let outside = Outcome::Unreported { code: 0, from_outside: true }.reason().unwrap();
        assert!(
            outside.starts_with("exited with code 0 before its figures were reported") && !outside.contains("leak")
        );
        assert!(Outcome::Unmeasured.is_failure() && Outcome::Unmeasured.ran());
        assert!(Outcome::Unmeasured.reason().unwrap().starts_with("nothing measured it"));
        assert!(Outcome::Crashed(String::new()).is_failure() && !Outcome::Ignored.is_failure());
    }

    #[test]
    fn a_leak_test_that_started_and_exited_without_a_report_never_reported() {
        let of = |ended: Outcome, code, started, reported| Outcome::of_process(ended, code, started, reported, false);
        let unreported = |code| Outcome::Unreported { code, from_outside: false };
        // A process that exited, with or without success, after its leak test left its mark and no report.
        assert_eq!(of(Outcome::Passed, Some(0), true, false), unreported(0));
        assert_eq!(of(Outcome::Failed, Some(101), true, false), unreported(101));
        // Reported, or no leak test started: the process's own outcome.
        assert_eq!(of(Outcome::Passed, Some(0), true, true), Outcome::Passed);
        assert_eq!(of(Outcome::Failed, Some(1), false, false), Outcome::Failed);
        // A process that did not exit (killed, timed out, stopped) says so, whatever its report directory holds.
        let crashed = Outcome::Crashed("SIGABRT".into());
        assert_eq!(of(crashed.clone(), None, true, false), crashed);
        let timed_out = Outcome::TimedOut(Duration::from_secs(4));
        assert_eq!(of(timed_out.clone(), None, true, false), timed_out);
    }

    #[test]
    fn a_test_measured_from_outside_with_no_mark_and_no_report_was_not_measured() {
        let of = |ended: Outcome, code, started, reported| Outcome::of_process(ended, code, started, reported, true);
        // It passed, but the interposer left no sign: it was not measured.
        assert_eq!(of(Outcome::Passed, Some(0), false, false), Outcome::Unmeasured);
        // It started and its process ended without a report (an exec, an exit): not called a leak test.
        assert_eq!(of(Outcome::Passed, Some(0), true, false), Outcome::Unreported { code: 0, from_outside: true });
        // A failure is the test's own news; a measured test is as it ended.
        assert_eq!(of(Outcome::Failed, Some(101), false, false), Outcome::Failed);
        assert_eq!(of(Outcome::Passed, Some(0), true, true), Outcome::Passed);
    }

    #[test]
    fn a_failed_test_is_told_by_its_signal_its_timeout_or_its_panics_message() {
        let id = TestId::new("p", TargetKind::Test, "leaks", "t");
        let record =
            |outcome: Outcome, output: &str| TestRecord::new(id.clone(), outcome, Duration::ZERO, output.into());
        let panicked =
            "running 1 test\nthread 't' (4242) panicked at tests/a.rs:9:5:\nassertion failed: ok\nnote: ...\n";
        assert_eq!(
            record(Outcome::Failed, panicked).why_it_failed().as_deref(),
            Some("panicked at tests/a.rs:9:5: assertion failed: ok")
        );
        let older = "thread 'main' panicked at src/lib.rs:3:1:\n\n";
        assert_eq!(record(Outcome::Failed, older).why_it_failed().as_deref(), Some("panicked at src/lib.rs:3:1"));
        assert_eq!(record(Outcome::Failed, "error: no panic here\n").why_it_failed(), None);
        let crashed = record(Outcome::Crashed("SIGABRT".into()), panicked);
        assert_eq!(crashed.why_it_failed().as_deref(), Some("killed by SIGABRT"), "the signal says more");
    }
}
