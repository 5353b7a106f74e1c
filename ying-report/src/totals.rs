//! A run's totals: its tests by outcome and its leak tests by the gate's verdicts that matter to a reader, as the
//! terminal's Summary line, the job summary, index.html and summary.json state them.

use crate::terms::{GateVerdict, TestOutcome};

/// A run's totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Totals {
    /// Tests that ran: passed, failed, crashed or timed out.
    pub run: usize,
    /// Tests that passed.
    pub passed: usize,
    /// Tests that passed after failing (counted in `passed` too).
    pub flaky: usize,
    /// Tests that failed.
    pub failed: usize,
    /// Tests that crashed.
    pub crashed: usize,
    /// Tests that timed out.
    pub timed_out: usize,
    /// Tests ignored.
    pub ignored: usize,
    /// Tests not run (fail-fast, or an interrupt).
    pub not_run: usize,
    /// Leak tests whose memory regressed.
    pub regressed: usize,
    /// Leak tests that crossed the tolerance only in some runs.
    pub unstable: usize,
}

impl Totals {
    /// The totals of tests given by outcome, gate verdict and attempts (a run's, or a saved summary's).
    ///
    /// ```
    /// use ying_report::{GateVerdict, TestOutcome, Totals};
    /// let totals = Totals::of([
    ///     (TestOutcome::Passed, Some(GateVerdict::Regressed), 1),
    ///     (TestOutcome::Passed, None, 2),
    ///     (TestOutcome::Crashed, None, 1),
    /// ]);
    /// assert_eq!(totals.to_string(), "3 tests run: 2 passed (1 flaky), 1 crashed; memory: 1 regressed");
    /// ```
    pub fn of(tests: impl IntoIterator<Item = (TestOutcome, Option<GateVerdict>, u32)>) -> Self {
        let mut totals = Self::default();
        for (outcome, verdict, attempts) in tests {
            if outcome == TestOutcome::Passed && attempts > 1 {
                totals.flaky += 1;
            }
            *match outcome {
                TestOutcome::Passed => &mut totals.passed,
                TestOutcome::Failed => &mut totals.failed,
                TestOutcome::Crashed => &mut totals.crashed,
                TestOutcome::TimedOut => &mut totals.timed_out,
                TestOutcome::Ignored => &mut totals.ignored,
                TestOutcome::NotRun => &mut totals.not_run,
            } += 1;
            match verdict {
                Some(GateVerdict::Regressed) => totals.regressed += 1,
                Some(GateVerdict::Unstable) => totals.unstable += 1,
                _ => {}
            }
        }
        totals.run = totals.passed + totals.failed + totals.crashed + totals.timed_out;
        totals
    }
}

/// `12 tests run: 10 passed, 1 failed, 1 crashed, 2 ignored; memory: 1 regressed, 1 unstable`, the parts that are 0
/// left out (but `passed`).
impl std::fmt::Display for Totals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ran = self.run;
        write!(f, "{ran} test{} run: {} passed", if ran == 1 { "" } else { "s" }, self.passed)?;
        if self.flaky > 0 {
            write!(f, " ({} flaky)", self.flaky)?;
        }
        let parts = [
            (self.failed, "failed"),
            (self.crashed, "crashed"),
            (self.timed_out, "timed out"),
            (self.ignored, "ignored"),
            (self.not_run, "not run"),
        ];
        for (number, what) in parts {
            if number > 0 {
                write!(f, ", {number} {what}")?;
            }
        }
        let memory: Vec<String> = [(self.regressed, "regressed"), (self.unstable, "unstable")]
            .into_iter()
            .filter(|(number, _)| *number > 0)
            .map(|(number, what)| format!("{number} {what}"))
            .collect();
        if !memory.is_empty() {
            write!(f, "; memory: {}", memory.join(", "))?;
        }
        Ok(())
    }
}
