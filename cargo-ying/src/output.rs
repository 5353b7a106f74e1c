//! What the user sees: a progress bar on a terminal, one line per test like cargo's, the output of failed tests,
//! and a closing table of leak tests. In CI (`CI` set) or without a terminal, plain lines only.

use crate::cli::ColorChoice;
use crate::runner::{Outcome, TestResult};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

/// A duration as `1.234s`.
pub fn seconds(duration: Duration) -> String {
    format!("{:.3}s", duration.as_secs_f64())
}

/// Whether to color, from `--color`, `CARGO_TERM_COLOR` and `NO_COLOR`.
pub fn use_color(choice: Option<ColorChoice>) -> bool {
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
pub struct Reporter {
    color: bool,
    progress: Option<ProgressBar>,
}

const GREEN: &str = "\x1b[1;32m";
const RED: &str = "\x1b[1;31m";
const YELLOW: &str = "\x1b[1;33m";
const RESET: &str = "\x1b[0m";

impl Reporter {
    /// A reporter; the progress bar only on a terminal outside CI.
    pub fn new(color: bool) -> Self {
        let interactive = std::io::stderr().is_terminal() && std::env::var_os("CI").is_none();
        Self { color, progress: interactive.then(ProgressBar::hidden) }
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
            Some(progress) => progress.println(line),
            None => eprintln!("{line}"),
        }
    }

    /// Announces the run.
    pub fn start(&mut self, running: usize, binaries: usize, ignored: usize) {
        let ignored = if ignored > 0 { format!(" ({ignored} ignored)") } else { String::new() };
        // Before the progress bar exists: a bar that is not drawn yet would swallow the line.
        eprintln!(
            "{} {running} test{} across {binaries} binar{}{ignored}",
            self.label(GREEN, "Starting"),
            if running == 1 { "" } else { "s" },
            if binaries == 1 { "y" } else { "ies" },
        );
        if let Some(progress) = &mut self.progress {
            let bar = ProgressBar::new(running as u64).with_style(
                ProgressStyle::with_template("{prefix:>12.cyan.bold} [{elapsed_precise}] {bar:25} {pos}/{len}: {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.set_prefix("Running");
            *progress = bar;
        }
    }

    /// One test's result line.
    pub fn result(&self, result: &TestResult) {
        let (label, style) = match &result.outcome {
            Outcome::Passed => ("PASS", GREEN),
            Outcome::Failed => ("FAIL", RED),
            Outcome::Crashed(_) => ("CRASH", RED),
            Outcome::TimedOut(_) => ("TIMEOUT", RED),
            Outcome::Ignored | Outcome::NotRun => return,
        };
        let reason = result.outcome.reason().map_or_else(String::new, |reason| format!(" ({reason})"));
        self.line(&format!(
            "{} [{:>8}] {}{reason}",
            self.label(style, label),
            seconds(result.duration),
            result.test.id()
        ));
        if let Some(progress) = &self.progress {
            progress.inc(1);
            progress.set_message(result.test.name.clone());
        }
    }

    /// The output of each failed test, the totals, and the table of leak tests.
    pub fn finish(&self, results: &[TestResult], elapsed: Duration, fail_fast_hint: bool) {
        if let Some(progress) = &self.progress {
            progress.finish_and_clear();
        }
        for result in results.iter().filter(|result| result.outcome.is_failure()) {
            eprintln!("\n{}", self.paint(RED, &format!("--- {}: output ---", result.test.id())));
            eprint!("{}", result.output);
            if !result.output.ends_with('\n') && !result.output.is_empty() {
                eprintln!();
            }
        }
        let count = |wanted: fn(&Outcome) -> bool| results.iter().filter(|r| wanted(&r.outcome)).count();
        let passed = count(|o| *o == Outcome::Passed);
        let failed = count(|o| *o == Outcome::Failed);
        let crashed = count(|o| matches!(o, Outcome::Crashed(_)));
        let timed_out = count(|o| matches!(o, Outcome::TimedOut(_)));
        let ignored = count(|o| *o == Outcome::Ignored);
        let not_run = count(|o| *o == Outcome::NotRun);
        let run = passed + failed + crashed + timed_out;
        let mut totals = format!("{run} test{} run: {passed} passed", if run == 1 { "" } else { "s" });
        for (number, what) in [(failed, "failed"), (crashed, "crashed"), (timed_out, "timed out")] {
            if number > 0 {
                totals.push_str(&format!(", {number} {what}"));
            }
        }
        if ignored > 0 {
            totals.push_str(&format!(", {ignored} ignored"));
        }
        if not_run > 0 {
            totals.push_str(&format!(", {not_run} not run"));
        }
        let style = if failed + crashed + timed_out > 0 { RED } else { GREEN };
        eprintln!("\n{} [{:>8}] {totals}", self.label(style, "Summary"), seconds(elapsed));
        if not_run > 0 && fail_fast_hint {
            eprintln!("{} stopped after the first failure; --no-fail-fast runs every test", self.label(YELLOW, "note"));
        }
        self.leak_table(results);
    }

    fn leak_table(&self, results: &[TestResult]) {
        let rows: Vec<_> = results.iter().filter_map(|result| Some((result, &result.report.as_ref()?.1))).collect();
        if rows.is_empty() {
            return;
        }
        let width = rows.iter().map(|(result, _)| result.test.id().len()).max().unwrap_or(4).max(4);
        eprintln!(
            "\n{:<width$}  {:>10}  {:>10}  {:>10}  {:>11}  outcome",
            "leak test", "retained", "peak", "allocated", "allocations"
        );
        for (result, report) in rows {
            eprintln!(
                "{:<width$}  {:>10}  {:>10}  {:>10}  {:>11}  {}",
                result.test.id(),
                report.figures.retained_bytes.saturating_sub(report.excused_bytes),
                report.figures.peak_bytes,
                report.figures.allocated_bytes,
                report.figures.allocations,
                result.outcome.name()
            );
        }
    }

    /// Where the reports went.
    pub fn artifacts(&self, index: &std::path::Path) {
        eprintln!("\n{} {}", self.label(GREEN, "Reports"), index.display());
    }
}
