//! What the user sees: a progress bar on a terminal, one line per test like cargo's, the output of failed tests,
//! the table of the measured tests that matter (every one with `-v`) and the gate's table; then, as cargo-nextest
//! ends a run, what was not run, the Summary line and the tests that failed the run. In CI (`CI` set) or without a
//! terminal, plain lines only.

use super::github::NAMED_TESTS;
use crate::gate::Reruns;
use crate::model::{FailedAttempt, Outcome, Run, TestRecord, seconds};
use crate::signals;
use indicatif::{ProgressBar, ProgressStyle};
use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use ying_report::{GateVerdict, TestId};

/// `eprintln!`, in one write: the message is formatted first and handed to standard error whole. Standard error is
/// unbuffered, and `eprintln!` writes each piece of its format and each character of padding with a system call of
/// its own (the table of 183 measured tests took 12,000), which also lets another process's output land inside a
/// line. A failed write is not an error of the run.
macro_rules! say {
    () => {
        write_whole("\n")
    };
    ($($arg:tt)+) => {
        write_whole(&format!("{}\n", format_args!($($arg)+)))
    };
}

/// Writes `text` to standard error in one call.
fn write_whole(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// `--color`: when to color the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ColorChoice {
    /// Color when writing to a terminal, unless NO_COLOR is set
    Auto,
    /// Always color
    Always,
    /// Never color
    Never,
}

/// Whether to color, from `--color`, `CARGO_TERM_COLOR` and `NO_COLOR`.
pub(crate) fn use_color(choice: Option<ColorChoice>) -> bool {
    let choice = choice.or_else(|| match std::env::var("CARGO_TERM_COLOR").ok()?.as_str() {
        "always" => Some(ColorChoice::Always),
        "never" => Some(ColorChoice::Never),
        _ => None,
    });
    match choice {
        Some(ColorChoice::Always) => true,
        Some(ColorChoice::Never) => false,
        Some(ColorChoice::Auto) | None => {
            std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty()) && std::io::stderr().is_terminal()
        }
    }
}

/// Writes the run's output to standard error.
pub(crate) struct Reporter {
    color: bool,
    /// `--quiet`: no line for a test that passed.
    quiet: bool,
    /// `--verbose`: every measured test in the closing table, and every failure after the Summary.
    verbose: bool,
    /// `--no-capture`: the tests' output went straight to the terminal.
    no_capture: bool,
    progress: Option<ProgressBar>,
    /// Tests that run, tests at once, tests finished, tests failed: for the progress bar.
    counts: Counts,
}

/// What the progress bar counts.
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    total: usize,
    jobs: usize,
    /// Most attempts a test gets (`--retries` + 1).
    attempts: u32,
    done: usize,
    failed: usize,
}

impl Counts {
    /// `2 running, 1 failed`: what is under way beside the bar's `(done/total)`.
    fn message(&self) -> String {
        let running = self.jobs.min(self.total - self.done);
        let mut message = format!("{running} running");
        if self.failed > 0 {
            message.push_str(&format!(", {} failed", self.failed));
        }
        message
    }
}

/// The closing table shows at most this many tests for their retained bytes alone (unless `-v`).
const LARGEST_SHOWN: usize = 5;
/// At most this many lines list the tests that failed the run under the Summary (unless `-v`), so that the Summary
/// line stays on the screen.
const FAILURES_SHOWN: usize = 12;

const GREEN: &str = "\x1b[1;32m";
const RED: &str = "\x1b[1;31m";
const YELLOW: &str = "\x1b[1;33m";
const RESET: &str = "\x1b[0m";

/// The word and color of how a test ended, as cargo-nextest writes them; `None` for a test that did not run.
fn outcome_label(outcome: &Outcome) -> Option<(&'static str, &'static str)> {
    match outcome {
        Outcome::Passed => Some(("PASS", GREEN)),
        Outcome::Failed | Outcome::Unreported { .. } | Outcome::Unmeasured => Some(("FAIL", RED)),
        Outcome::Crashed(_) => Some(("CRASH", RED)),
        Outcome::TimedOut(_) => Some(("TIMEOUT", RED)),
        Outcome::Cancelled(_) => Some(("CANCEL", RED)),
        Outcome::Stopped(_) => Some(("STOPPED", RED)),
        Outcome::Ignored | Outcome::NotRun | Outcome::Interrupted(_) => None,
    }
}

impl Reporter {
    /// A reporter; the progress bar only on a terminal outside CI, and not when the tests print to it
    /// (`no_capture`). `quiet`: no line for a test that passed.
    pub(crate) fn new(color: bool, quiet: bool, verbose: bool, no_capture: bool) -> Self {
        let interactive = std::io::stderr().is_terminal() && std::env::var_os("CI").is_none() && !no_capture;
        let progress = interactive.then(ProgressBar::hidden);
        Self { color, quiet, verbose, no_capture, progress, counts: Counts::default() }
    }

    /// A note on the run, before it starts.
    pub(crate) fn note(&self, note: &str) {
        say!("{} {note}", self.label(YELLOW, "note"));
    }

    fn paint(&self, style: &str, text: &str) -> String {
        if self.color { format!("{style}{text}{RESET}") } else { text.to_owned() }
    }

    /// A status word right-aligned in cargo's 12 columns, then colored (padding first, so escapes do not count).
    fn label(&self, style: &str, text: &str) -> String {
        self.paint(style, &format!("{text:>12}"))
    }

    fn line(&self, line: &str) {
        match &self.progress {
            Some(progress) if !progress.is_finished() => progress.println(line),
            _ => say!("{line}"),
        }
    }

    /// Announces the run: `running` tests of `binaries`, `jobs` at once, each run at most `attempts` times.
    pub(crate) fn start(&mut self, running: usize, binaries: usize, ignored: usize, jobs: usize, attempts: u32) {
        self.counts = Counts { total: running, jobs, attempts, done: 0, failed: 0 };
        let ignored = if ignored > 0 { format!(" ({ignored} ignored)") } else { String::new() };
        // Before the progress bar exists: a bar that is not drawn yet would swallow the line.
        say!(
            "{} {running} test{} across {binaries} binar{}{ignored}",
            self.label(GREEN, "Starting"),
            if running == 1 { "" } else { "s" },
            if binaries == 1 { "y" } else { "ies" },
        );
        if let Some(progress) = &mut self.progress {
            let bar = ProgressBar::new(running as u64).with_style(
                ProgressStyle::with_template("{prefix:>12.cyan.bold} [{elapsed_precise}] {bar:25} ({pos}/{len}) {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.set_prefix("Running");
            bar.set_message(self.counts.message());
            *progress = bar;
        }
    }

    /// Most attempts a test gets, for a reporter that did not [`start`](Self::start) the run (`cargo ying gate`).
    pub(crate) fn attempts_allowed(&mut self, attempts: u32) {
        self.counts.attempts = attempts;
    }

    /// `FAIL [ 0.550s] my-crate::cache evicts (reason)`: how a test ended; `None` for a test that did not run.
    fn result_line(&self, result: &TestRecord) -> Option<String> {
        let attempts = result.attempts();
        if result.is_flaky() {
            let label = format!("FLAKY {attempts}/{}", self.counts.attempts);
            return Some(format!("{} [{:>8}] {}", self.label(YELLOW, &label), seconds(result.duration), result.id));
        }
        let (label, style) = outcome_label(&result.outcome)?;
        let label = if attempts > 1 { format!("TRY {attempts} {label}") } else { label.to_owned() };
        let reason = result.outcome.reason().map_or_else(String::new, |reason| format!(" ({reason})"));
        Some(format!("{} [{:>8}] {}{reason}", self.label(style, &label), seconds(result.duration), result.id))
    }

    /// A failed attempt of a test that runs again (`--retries`), as it ends: `TRY 1 FAIL [ 0.012s] my-crate::t x`.
    pub(crate) fn attempt(&self, id: &TestId, number: usize, attempt: &FailedAttempt) {
        let Some((label, _)) = outcome_label(&attempt.outcome) else { return };
        let reason = attempt.outcome.reason().map_or_else(String::new, |reason| format!(" ({reason})"));
        let duration = seconds(attempt.duration);
        self.line(&format!("{} [{duration:>8}] {id}{reason}", self.label(RED, &format!("TRY {number} {label}"))));
    }

    /// One test's result line, and its warnings.
    pub(crate) fn result(&mut self, result: &TestRecord) {
        let Some(line) = self.result_line(result) else { return };
        self.counts.done += 1;
        if result.outcome.is_failure() {
            self.counts.failed += 1;
        }
        if !(self.quiet && result.outcome == Outcome::Passed && result.warnings.is_empty()) || result.is_flaky() {
            self.line(&line);
        }
        for warning in &result.warnings {
            self.line(&format!("{}: {}: {warning}", self.paint(YELLOW, "warning"), result.id));
        }
        if let Some(progress) = &self.progress {
            progress.inc(1);
            progress.set_message(self.counts.message());
        }
    }

    /// What the reruns of a leak test that crossed the tolerance showed.
    pub(crate) fn rerun(&self, id: &TestId, reruns: &Reruns) {
        let (style, label) = match reruns.verdict() {
            GateVerdict::Regressed => (RED, "REGRESSED"),
            _ => (YELLOW, "UNSTABLE"),
        };
        self.line(&format!("{} {id}: {}", self.label(style, label), reruns.describe()));
    }

    /// The output of each failed test, the table of measured tests, and what the reports note.
    pub(crate) fn finish(&self, run: &Run) {
        if let Some(progress) = &self.progress {
            progress.finish_and_clear();
        }
        // Not of a test the run cancelled: as nextest, what it printed until it was stopped is left out.
        // Nor of a test whose output nextest captured (`cargo ying gate`): nothing to show.
        for test in run.tests.iter().filter(|test| test.outcome.is_own_failure()) {
            if test.output.is_empty() && !self.no_capture {
                continue;
            }
            say!("\n{}", self.paint(RED, &format!("--- {}: output ---", test.id)));
            if test.output.is_empty() && self.no_capture {
                say!("(not captured: --no-capture printed it above)");
            }
            write_whole(&test.output);
            if !test.output.ends_with('\n') && !test.output.is_empty() {
                say!();
            }
            if let Some(message) = test.message_not_in_output().filter(|_| !self.no_capture) {
                say!("(the output above does not say why the test failed; its report does:)\n{message}");
            }
        }
        self.leak_table(run);
        self.notes(run);
        self.shared_statics(run);
    }

    /// The statics many tests retain memory in, each named once, with the `allow` line that excuses it.
    fn shared_statics(&self, run: &Run) {
        for shared in run.retained_statics().into_iter().filter(|shared| shared.tests >= crate::model::SHARED_BY) {
            let excuse = match &shared.pattern {
                Some(pattern) => format!(
                    "; if it is the process's own state, `allow = [\"{pattern}\"]` under [workspace.metadata.ying] \
                     excuses it in every test"
                ),
                None => String::new(),
            };
            say!(
                "{} {} tests retain memory held by static {} (at most {} in one){excuse}",
                self.label(YELLOW, "note"),
                shared.tests,
                shared.root,
                ying_report::ByteSize::new(shared.bytes).rounded()
            );
        }
    }

    /// How the run ends, as cargo-nextest ends one: what `cargo test` would run and this run did not, the Summary
    /// line, and under it the tests that failed the run (at most [`FAILURES_SHOWN`] lines of them unless `-v`).
    pub(crate) fn close(&self, run: &Run, not_run: &[ying_report::NotRunTarget]) {
        say!();
        self.not_run(not_run);
        let totals = run.totals();
        let style = if run.failed() || run.regressed() {
            RED
        } else if totals.unstable > 0 {
            YELLOW
        } else {
            GREEN
        };
        say!("{} [{:>8}] {totals}", self.label(style, "Summary"), seconds(run.elapsed));
        // What failed the run, again, where the eye lands after the run: as nextest lists failed tests.
        let (failed, regressed): (Vec<&TestRecord>, Vec<&TestRecord>) =
            run.failures().partition(|test| test.outcome.is_failure());
        // A test the run cancelled is shown as it ended, not again: as nextest, only what failed of its own.
        let failed: Vec<String> = failed
            .into_iter()
            .filter(|test| test.outcome.is_own_failure())
            .filter_map(|test| self.result_line(test))
            .map(|line| line + "\n")
            .collect();
        let regressed = self.regressions(run, regressed.into_iter().filter(|test| test.gate.is_some()).collect());
        // The regressions are kept whole where the room allows: the failed tests' lines are all above already.
        let regressed_lines = regressed.iter().map(|test| test.lines().count()).sum::<usize>().min(FAILURES_SHOWN);
        let room = FAILURES_SHOWN.saturating_sub(regressed_lines).max(FAILURES_SHOWN / 4);
        write_whole(&(self.capped(&failed, room, "failed") + &self.capped(&regressed, FAILURES_SHOWN, "regressed")));
        if let Some(signal) = run.interrupted {
            say!(
                "{} the run was stopped by {}: the tests that had not finished did not run; no baseline was written",
                self.label(RED, "interrupted"),
                signals::name(signal)
            );
        } else if let Some(count) = run.max_fail.filter(|_| {
            totals.not_run > 0 || run.tests.iter().any(|test| matches!(test.outcome, Outcome::Cancelled(_)))
        }) {
            let after = if count == 1 { "the first failure".to_owned() } else { format!("{count} failures") };
            say!("{} stopped after {after}; --no-fail-fast runs every test", self.label(YELLOW, "note"));
        }
    }

    /// `items` (each a test's lines) in at most `room` lines unless `-v`, the last saying how many more there are.
    fn capped(&self, items: &[String], room: usize, what: &str) -> String {
        let mut text = String::new();
        let mut lines = 0;
        for (shown, item) in items.iter().enumerate() {
            let more = items.len() - shown;
            let room = if more == 1 { room } else { room.saturating_sub(1) };
            if !self.verbose && lines + item.lines().count() > room {
                let all = items.len();
                let _ = writeln!(
                    text,
                    "{:>12} and {more} more {what} ({all} in all, shown above; -v lists them here)",
                    "..."
                );
                break;
            }
            lines += item.lines().count();
            text.push_str(item);
        }
        text
    }

    /// A regressed test's lines after the Summary: the figures that regressed and the rule each crossed
    /// (`lost bytes 0 -> 512 (past the lost floor)`), then under
    /// the test's id the sites its memory grew at.
    fn regressed(&self, test: &TestRecord) -> String {
        let mut lines = format!("{} {}: {}\n", self.label(RED, "REGRESSED"), test.id, regression_rows(test));
        for site in test.grown_sites() {
            let _ = writeln!(lines, "{:12} {site}", "");
        }
        lines
    }

    /// The `regressed` tests' items as [`close`](Self::close) shows them: one per cause that two or more of them
    /// grew at (the site, then the tests with their figures: [`NAMED_TESTS`] of them unless `-v`), then each other
    /// test with its grown sites. One leaking constructor that 52 tests call is one item, not 52.
    fn regressions(&self, run: &Run, regressed: Vec<&TestRecord>) -> Vec<String> {
        let mut items = Vec::new();
        let mut grouped: Vec<&TestRecord> = Vec::new();
        for cause in run.causes() {
            let tests: Vec<&TestRecord> =
                cause.tests.iter().copied().filter(|test| regressed.iter().any(|r| std::ptr::eq(*r, *test))).collect();
            if tests.len() < 2 {
                continue;
            }
            let mut lines =
                format!("{} {} tests at one site: {}\n", self.label(RED, "REGRESSED"), tests.len(), cause.line);
            let shown = if self.verbose { tests.len() } else { NAMED_TESTS };
            for test in tests.iter().take(shown) {
                let _ = writeln!(lines, "{:12} {}: {}", "", test.id, regression_rows(test));
            }
            if tests.len() > shown {
                let _ =
                    writeln!(lines, "{:>12} and {} more tests grown there (-v lists them)", "...", tests.len() - shown);
            }
            items.push(lines);
            grouped.extend(tests);
        }
        let alone = regressed.iter().filter(|test| !grouped.iter().any(|other| std::ptr::eq(*other, **test)));
        items.extend(alone.map(|test| self.regressed(test)));
        items
    }

    /// What the reports say of how their figures were taken, once per test binary.
    fn notes(&self, run: &Run) {
        let mut shown: Vec<(String, &str)> = Vec::new();
        for test in &run.tests {
            let Some(leak) = &test.leak else { continue };
            for note in &leak.report.notes {
                let binary = test.id.binary_id();
                if !shown.iter().any(|(seen, seen_note)| *seen == binary && seen_note == note) {
                    say!("{} {binary}: {note}", self.label(YELLOW, "note"));
                    shown.push((binary, note));
                }
            }
        }
    }

    /// The figures of the measured tests: with `-v` every one; otherwise those that failed or whose memory regressed
    /// or was unstable, and the [`LARGEST_SHOWN`] that retained the most, with a line saying how many are left out.
    fn leak_table(&self, run: &Run) {
        let measured: Vec<_> = run.tests.iter().filter_map(|test| Some((test, test.leak.as_ref()?))).collect();
        if measured.is_empty() {
            return;
        }
        let mut largest: Vec<(u64, &TestId)> = measured
            .iter()
            .map(|(test, leak)| (leak.figures().retained_bytes, &test.id))
            .filter(|(retained, _)| *retained > 0)
            .collect();
        largest.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        largest.truncate(LARGEST_SHOWN);
        let matters = |test: &TestRecord| {
            test.outcome.is_failure()
                || test
                    .gate
                    .as_ref()
                    .is_some_and(|gate| matches!(gate.verdict, GateVerdict::Regressed | GateVerdict::Unstable))
                || largest.iter().any(|(_, id)| *id == &test.id)
        };
        // A run of a few measured tests shows them all.
        let all = self.verbose || measured.len() <= LARGEST_SHOWN;
        let rows: Vec<_> = measured.iter().filter(|(test, _)| all || matters(test)).collect();
        let ids: Vec<String> = rows.iter().map(|(test, _)| test.id.to_string()).collect();
        let width = ids.iter().map(String::len).max().unwrap_or(4).max(4);
        // Excused memory (captured output, thread-locals, the standard library's caches, `allow` patterns) is left
        // out of the retained bytes, and shown beside them.
        // The async tasks the bodies left (`1 leaked, 2 lingering`), in a column of their own when any did.
        let tasks: Vec<String> = rows.iter().map(|(_, leak)| leak.figures().tasks_in_words()).collect();
        let tasks_width = match tasks.iter().map(String::len).max().unwrap_or(0) {
            0 => 0,
            widest => widest.max("tasks".len()),
        };
        let tasks_column =
            |words: &str| if tasks_width == 0 { String::new() } else { format!("  {words:<tasks_width$}") };
        let mut table = format!(
            "\n{:<width$}  {:>10}  {:>10}  {:>10}  {:>10}  {:>11}{}  outcome\n",
            "test",
            "retained",
            "excused",
            "peak",
            "allocated",
            "allocations",
            tasks_column("tasks")
        );
        for (((test, leak), id), tasks) in rows.iter().zip(ids).zip(&tasks) {
            let figures = leak.figures();
            let _ = writeln!(
                table,
                "{id:<width$}  {:>10}  {:>10}  {:>10}  {:>10}  {:>11}{}  {}",
                figures.retained_bytes,
                leak.report.excused_bytes,
                figures.peak_bytes,
                figures.allocated_bytes,
                figures.allocations,
                tasks_column(tasks),
                test.outcome.kind().name()
            );
        }
        let left_out = measured.len() - rows.len();
        if rows.is_empty() {
            // Nothing to show but how many: no header over no rows.
            table = format!("\n{left_out} measured tests passed, none retaining memory (-v shows their figures)\n");
        } else if left_out > 0 {
            let _ = writeln!(table, "... and {left_out} more measured tests that passed (-v shows every one)");
        }
        write_whole(&table);
    }

    /// That the run measured no test (unless the baseline is being saved, which refuses then), and the gate's table or
    /// how to make a baseline when there is none.
    pub(crate) fn gate(&self, run: &Run, baseline: &std::path::Path, saving: bool) {
        // Nothing measured passes every gate: said once, here, or by the error when the baseline is to be saved.
        let nothing_measured = run.measured() == 0 && !run.tests.is_empty() && run.interrupted.is_none();
        if nothing_measured && !saving {
            // Tests that crashed or timed out were killed before they could report: adding leak tests would not
            // help.
            let ran: Vec<&TestRecord> = run.tests.iter().filter(|test| test.outcome.ran()).collect();
            let killed = |test: &&TestRecord| matches!(test.outcome, Outcome::Crashed(_) | Outcome::TimedOut(_));
            if !ran.is_empty() && ran.iter().all(killed) {
                say!("\n0 tests measured: every test that ran was killed before it could report its figures");
            } else {
                say!("\n{}", crate::error::NOTHING_MEASURED);
            }
        }
        match &run.gate {
            Some(gate) => {
                let shown = gate.baseline.display().to_string();
                let mut table = String::from("\n");
                for line in crate::outputs::gate_table::render(&gate.comparison, &shown, gate.gating.tolerance) {
                    table.push_str(&line);
                    table.push('\n');
                }
                write_whole(&table);
            }
            None if !saving && !nothing_measured => {
                say!("\nno baseline at {} yet: --save-baseline (or cargo ying accept) writes one", baseline.display())
            }
            None => {}
        }
    }

    /// What `cargo test` would run and this run does not, each with the command that runs it: under the Starting
    /// line, and again above the Summary.
    pub(crate) fn not_run(&self, targets: &[ying_report::NotRunTarget]) {
        for target in targets {
            self.line(&format!("{} {}", self.label(YELLOW, "NOT RUN"), crate::run::select::not_run::describe(target)));
        }
    }

    /// Where the reports went.
    pub(crate) fn artifacts(&self, index: &std::path::Path) {
        say!("\n{} {}", self.label(GREEN, "Reports"), index.display());
    }
}

/// The figures a regressed test grew in, as the terminal words them (`retained bytes 0 -> 2400 (past the
/// tolerance)`).
fn regression_rows(test: &TestRecord) -> String {
    let rows = test.gate.iter().flat_map(|gate| gate.regressions());
    let rows: Vec<String> = rows
        .map(|row| format!("{} {} -> {} (past {})", row.figure.name(), row.baseline, row.now, row.rule()))
        .collect();
    rows.join(", ")
}

#[cfg(test)]
mod tests {
    use super::{Counts, Reporter};
    use crate::model::{Leak, Outcome, Run, TestRecord};
    use std::collections::BTreeMap;
    use std::time::Duration;
    use ying_report::report::{Attribution, Budgets, Reach, RetainedSite, TestIdentity, Why};
    use ying_report::{BaselineEntry, Frame, LeakReport, TargetKind, TestId};

    #[test]
    fn a_regressed_test_names_the_figure_that_grew_and_the_sites_it_grew_at() {
        let id = TestId::new("p", TargetKind::Test, "leaks", "forgets");
        let mut record = TestRecord::new(id.clone(), Outcome::Passed, Duration::ZERO, String::new());
        let identity = TestIdentity::new("p", None, "leaks", "forgets", "tests/leaks.rs", 3);
        let mut report = LeakReport::new(identity, Attribution::Process, Budgets::default());
        report.figures.retained_bytes = 512;
        let frames = vec![Frame::new("leaks::forgets", Some("tests/leaks.rs".into()), Some(12))];
        let mut site = RetainedSite::new(512, 1, false, frames);
        site.why = vec![Why { kind: Reach::Lost, root: None, bytes: 512, blocks: 1 }];
        report.retained_sites.push(site);
        record.leak = Some(Leak { report, path: String::new() });
        let mut run =
            Run { tests: vec![record], elapsed: Duration::ZERO, max_fail: None, gate: None, interrupted: None };
        let baseline: BTreeMap<TestId, BaselineEntry> =
            [(id, BaselineEntry { lost_bytes: Some(0), ..BaselineEntry::default() })].into();
        run.judge_by_default(&baseline, true);
        assert_eq!(
            Reporter::new(false, false, false, false).regressed(&run.tests[0]),
            "   REGRESSED p::leaks forgets: lost bytes 0 -> 512 (past the lost floor)\n             512 B in 1 block, lost (nothing points \
             to it), at tests/leaks.rs:12 in leaks::forgets\n"
        );
    }

    #[test]
    fn tests_grown_at_one_site_are_one_item_naming_the_site_once() {
        let record = |name: &str, caller: &str, bytes: u64| {
            let id = TestId::new("p", TargetKind::Test, "leaks", name);
            let mut record = TestRecord::new(id, Outcome::Passed, Duration::ZERO, String::new());
            let identity = TestIdentity::new("p", None, "leaks", name, "tests/leaks.rs", 3);
            let mut report = LeakReport::new(identity, Attribution::Process, Budgets::default());
            report.figures.retained_bytes = bytes;
            let frames = vec![
                Frame::new("p::Cache::new", Some("src/lib.rs".into()), Some(7)),
                Frame::new(caller, Some("tests/leaks.rs".into()), Some(12)),
            ];
            let mut site = RetainedSite::new(bytes, 1, false, frames);
            site.why = vec![Why { kind: Reach::Lost, root: None, bytes, blocks: 1 }];
            report.retained_sites.push(site);
            record.leak = Some(Leak { report, path: String::new() });
            record
        };
        let names = ["a", "b", "c", "d", "e", "f", "g"];
        let mut tests: Vec<TestRecord> =
            names.iter().map(|name| record(name, &format!("leaks::{name}"), 512)).collect();
        tests.push(record("alone", "leaks::alone", 4096));
        tests.last_mut().unwrap().leak.as_mut().unwrap().report.retained_sites[0].frames[0] =
            Frame::new("p::other", Some("src/lib.rs".into()), Some(40));
        let mut run = Run { tests, elapsed: Duration::ZERO, max_fail: None, gate: None, interrupted: None };
        let baseline: BTreeMap<TestId, BaselineEntry> = run
            .tests
            .iter()
            .map(|test| (test.id.clone(), BaselineEntry { lost_bytes: Some(0), ..BaselineEntry::default() }))
            .collect();
        run.judge_by_default(&baseline, true);
        let reporter = Reporter::new(false, false, false, false);
        let items = reporter.regressions(&run, run.tests.iter().collect());
        assert_eq!(items.len(), 2, "{items:#?}");
        let first: Vec<&str> = items[0].lines().collect();
        assert!(
            first[0].starts_with("   REGRESSED 7 tests at one site: 512 B in 1 block, lost (nothing points to it), at src/lib.rs:7 in p::Cache::new"),
            "{}",
            items[0]
        );
        assert_eq!(first[1], "             p::leaks a: lost bytes 0 -> 512 (past the lost floor)");
        assert_eq!(first.len(), 1 + 5 + 1, "five tests named, then how many more: {}", items[0]);
        assert_eq!(first[6], "         ... and 2 more tests grown there (-v lists them)");
        assert!(items[1].starts_with("   REGRESSED p::leaks alone: retained bytes 0 -> 4096"), "{}", items[1]);
        let verbose = Reporter::new(false, false, true, false).regressions(&run, run.tests.iter().collect());
        assert_eq!(verbose[0].lines().count(), 1 + 7, "-v names every test: {}", verbose[0]);
    }

    #[test]
    fn the_progress_bar_counts_running_and_failed_tests() {
        let counts = |done, failed| Counts { total: 10, jobs: 4, attempts: 1, done, failed }.message();
        assert_eq!(counts(0, 0), "4 running");
        assert_eq!(counts(7, 2), "3 running, 2 failed");
        assert_eq!(counts(10, 1), "0 running, 1 failed");
    }
}
