//! `summary.json`: every test of a `cargo ying test` run with its outcome, its gate verdict, and for leak tests
//! its figures and files.

use crate::baseline::BaselineEntry;
use crate::figures::Figures;
use crate::json::{self, Kind, ReadError};
use crate::terms::{Measured, Sites};
use crate::test_id::TestId;
use crate::totals::Totals;
use std::path::Path;

pub use crate::terms::{GateVerdict, TestOutcome};

/// The version of the summary format.
pub const SUMMARY_SCHEMA_VERSION: u32 = 3;

const KIND: Kind = Kind {
    name: "summary",
    version: SUMMARY_SCHEMA_VERSION,
    older: "it was written by an earlier cargo ying; run `cargo ying test` again to write it anew",
    newer: "it was written by a later cargo ying than this one; use that one",
};

/// The whole run.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    /// [`SUMMARY_SCHEMA_VERSION`] of the writer.
    pub schema_version: u32,
    /// Every test, in the order of the binaries and their listing.
    pub tests: Vec<SummaryTest>,
    /// What `cargo test` would have run and this run did not: doctests, targets with their own harness. Absent
    /// when there are none (and in summaries written before it was recorded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_run: Vec<NotRunTarget>,
    /// The signal that stopped the run (`SIGINT`, `SIGTERM`) before every test ran: the summary is incomplete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<String>,
    /// Which tests the run measured: `all` for a run with `--measure all` (absent for the leak tests only).
    #[serde(default, skip_serializing_if = "is_leak_tests")]
    pub measured: Measured,
    /// The root of the workspace whose tests the run ran, absolute: `cargo ying accept` refuses the run of another
    /// workspace (two workspaces sharing a target directory). Absent in summaries written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_root: Option<String>,
    /// The nextest run `cargo ying gate` judged (nextest's `NEXTEST_RUN_ID`); absent for `cargo ying test`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nextest_run_id: Option<String>,
    /// The tests nextest listed and did not run (its filter), which the gate neither measured nor compared; absent
    /// when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<TestId>,
    /// When the run's tests started, in RFC 3339 (UTC, `2026-12-04T17:22:41.123Z`); the earliest shard's, merged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// How long the run's tests took, in seconds, from the first one's start to the last one's end (the build and
    /// the gate's reruns not included); absent in a merged summary, whose shards ran side by side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<f64>,
    /// The run's totals, as the terminal's Summary line states them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub totals: Option<Totals>,
    /// The exit code of the run's verdict, as [`exit_code`](crate::exit_code) tells them (`cargo ying merge`'s,
    /// merged): 0, 3 for a memory regression, 100 for a failed test, 130 or 143 when stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<u8>,
    /// The tolerance the gate judged with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerance: Option<GateTolerance>,
}

/// The gate's tolerance: growth of retained memory within `max_growth_percent` of the baseline or
/// `min_growth_bytes`, whichever is larger, passes; lost bytes may grow by `lost_growth_bytes` at most, and held
/// bytes by `held_growth_bytes`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GateTolerance {
    /// Growth relative to the baseline, in percent.
    pub max_growth_percent: f64,
    /// Growth in bytes.
    pub min_growth_bytes: u64,
    /// The growth of lost bytes that passes whatever the relative growth.
    pub lost_growth_bytes: u64,
    /// The growth of held bytes (a static's or a thread-local's) that passes whatever the relative growth.
    #[serde(default)]
    pub held_growth_bytes: u64,
}

/// Whether a count is 0, which summaries leave out.
fn is_zero(count: &u64) -> bool {
    *count == 0
}

/// Whether a run measured the leak tests only, which summaries leave unsaid.
fn is_leak_tests(measured: &Measured) -> bool {
    *measured == Measured::LeakTests
}

impl Summary {
    /// A summary of `tests`.
    pub fn new(tests: Vec<SummaryTest>) -> Self {
        Self {
            schema_version: SUMMARY_SCHEMA_VERSION,
            tests,
            not_run: Vec::new(),
            interrupted: None,
            measured: Measured::LeakTests,
            workspace_root: None,
            nextest_run_id: None,
            skipped: Vec::new(),
            started_at: None,
            duration: None,
            totals: None,
            exit_code: None,
            tolerance: None,
        }
    }

    /// Reads the summary at `path`, of this version.
    pub fn read(path: &Path) -> Result<Self, ReadError> {
        Self::parse(&json::read_text(path)?)
    }

    /// Reads a summary from its text; a number out of its field's range, or a file named elsewhere than where a run
    /// writes it, is an error naming the test and field.
    pub fn parse(text: &str) -> Result<Self, ReadError> {
        let summary: Self = json::parse(text, &KIND)?;
        for test in &summary.tests {
            test.check()?;
        }
        if let Some(duration) = summary.duration {
            check_seconds("duration", duration)?;
        }
        Ok(summary)
    }

    /// Writes the summary to `path`, whole or not at all, and on the disk before it replaces the last; a link at
    /// `path` is replaced, never written through ([`json::write_own_bytes`]).
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        json::write_own_bytes(path, &json::to_bytes(self)?, true)
    }
}

/// One test. Paths are relative to the summary's directory.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SummaryTest {
    /// Which test: `package`, `kind`, `target` and `name`.
    #[serde(flatten)]
    pub id: TestId,
    /// How it ended.
    pub outcome: TestOutcome,
    /// Why it failed beyond its output: the signal, the timeout.
    #[serde(default)]
    pub reason: Option<String>,
    /// The gate's verdict on its figures against the baseline; `None` without a baseline or figures.
    #[serde(default)]
    pub gate: Option<GateVerdict>,
    /// A leak test's figures (`retained_bytes`, `peak_bytes`, `allocated_bytes`, `allocations`, and `lost_bytes`
    /// when there are some); absent for other tests and for leak tests whose report could not be used.
    #[serde(flatten)]
    pub figures: Option<Figures>,
    /// For a leak test of several measured runs, their steady state ([`Figures::steady_state`]): what the gate
    /// compares instead of the totals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_state: Option<Figures>,
    /// Retained bytes its excuses left out of `retained_bytes` (captured output, thread-locals' values, the standard
    /// library's caches, `allow` patterns, the workspace's included); absent when none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub excused_bytes: u64,
    /// Every site of its judged retained memory, keyed as the baseline keys the few largest
    /// ([`BaselineEntry::sites`](crate::BaselineEntry::sites)), the largest first: what a differential flamegraph of
    /// two runs compares.
    #[serde(default, skip_serializing_if = "Vec::is_empty", with = "crate::terms::sites")]
    pub sites: Sites,
    /// The async tasks its body left ([`LeakReport::tasks`](crate::LeakReport::tasks)); absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<crate::report::TaskEntry>,
    /// The reference cycles among its lost memory ([`LeakReport::cycles`](crate::LeakReport::cycles)); absent when
    /// none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cycles: Vec<crate::report::CycleEntry>,
    /// Retained bytes in the baseline, when the baseline has this test: the figure the gate compares (for a
    /// steady state, the smallest growth of one measured run).
    #[serde(default)]
    pub baseline_retained_bytes: Option<u64>,
    /// The leak test's JSON report.
    #[serde(default)]
    pub report: Option<String>,
    /// Flamegraph of retained memory.
    #[serde(default)]
    pub retained_flamegraph: Option<String>,
    /// Flamegraph of allocated memory.
    #[serde(default)]
    pub allocated_flamegraph: Option<String>,
    /// Differential flamegraph of retained memory, baseline against now, for a test that regressed.
    #[serde(default)]
    pub retained_diff_flamegraph: Option<String>,
    /// What went wrong around the test without failing it (a report that could not be used, say).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// For a passing test that crossed the gate's tolerance and was run again: what its reruns showed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reruns: Option<Reruns>,
    /// How many times the test ran, when it failed and was retried (`--retries`); absent for one attempt. A test
    /// that passed in a later attempt is flaky.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// How long its process ran, in seconds (its last attempt's); absent for a test that did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<f64>,
    /// The whole output of a failed test (what is shown of it is its end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

/// What the reruns of a test that crossed the gate's tolerance showed. A rerun that measured the test either
/// crossed the tolerance too or did not; a rerun that measured nothing (it failed, crashed or timed out) confirms
/// nothing either way. The test regressed unless a rerun measured it within the tolerance: reruns that all fail
/// leave the regression standing.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reruns {
    /// Reruns made.
    pub runs: u32,
    /// Reruns that measured the test and crossed the tolerance too.
    pub crossed: u32,
    /// The reruns that measured nothing, each as it ended.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unmeasured: Vec<UnmeasuredRerun>,
    /// What the test's run crossed, which the reruns crossed again or not: `the tolerance` (the default), `the lost
    /// floor`, `the held floor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

/// A rerun that measured nothing: how it ended, and why when that is known.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnmeasuredRerun {
    /// How it ended.
    pub outcome: TestOutcome,
    /// Why: the panic's message, the signal, the timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Reruns {
    /// The reruns that measured the test.
    pub fn measured(&self) -> u32 {
        self.runs.saturating_sub(u32::try_from(self.unmeasured.len()).unwrap_or(u32::MAX))
    }

    /// The verdict they give: regressed unless a rerun measured the test within the tolerance, else unstable.
    pub fn verdict(&self) -> GateVerdict {
        if self.crossed >= self.measured() { GateVerdict::Regressed } else { GateVerdict::Unstable }
    }

    /// What they showed, in the words every output uses: `crossed the tolerance, then again in 2 of 2 reruns`,
    /// `..., then again in only 1 of 2 reruns`; the reruns that measured nothing named with how they ended: `...,
    /// then in none of 2 reruns, which measured nothing (crashed: killed by SIGSEGV; failed): the regression
    /// stands`.
    pub fn describe(&self) -> String {
        let measured = self.measured();
        let of = if measured == self.runs {
            format!("{} reruns", self.runs)
        } else {
            format!("{measured} reruns that measured it")
        };
        let rule = self.rule.as_deref().unwrap_or("the tolerance");
        let mut text = match (measured, self.verdict()) {
            (0, _) => format!("crossed {rule}, then in none of {} reruns, which measured nothing", self.runs),
            (_, GateVerdict::Regressed) => format!("crossed {rule}, then again in {} of {of}", self.crossed),
            _ => format!("crossed {rule}, then again in only {} of {of}", self.crossed),
        };
        if !self.unmeasured.is_empty() {
            // Each way they ended once, with how many ended so when more than one did: `2 failed: panicked at ...`.
            let mut ended: Vec<(String, usize)> = Vec::new();
            for rerun in &self.unmeasured {
                let how = match &rerun.reason {
                    Some(reason) => format!("{}: {reason}", rerun.outcome.name()),
                    None => rerun.outcome.name().to_owned(),
                };
                match ended.iter_mut().find(|(said, _)| *said == how) {
                    Some((_, count)) => *count += 1,
                    None => ended.push((how, 1)),
                }
            }
            let ended: Vec<String> =
                ended.into_iter().map(|(how, count)| if count == 1 { how } else { format!("{count} {how}") }).collect();
            if measured > 0 {
                text.push_str(&format!("; {} measured nothing", self.unmeasured.len()));
            }
            text.push_str(&format!(" ({})", ended.join("; ")));
            if self.verdict() == GateVerdict::Regressed {
                text.push_str(": the regression stands");
            }
        }
        text
    }
}

impl SummaryTest {
    /// A test that ended with `outcome`, with nothing else known yet.
    pub fn new(id: TestId, outcome: TestOutcome) -> Self {
        Self {
            id,
            outcome,
            reason: None,
            gate: None,
            figures: None,
            steady_state: None,
            excused_bytes: 0,
            sites: Vec::new(),
            tasks: Vec::new(),
            cycles: Vec::new(),
            baseline_retained_bytes: None,
            report: None,
            retained_flamegraph: None,
            allocated_flamegraph: None,
            retained_diff_flamegraph: None,
            warnings: Vec::new(),
            reruns: None,
            attempts: None,
            duration: None,
            output: None,
        }
    }

    /// What the gate compares of the test, when it is a leak test with figures: its baseline entry, as a run that
    /// measured it would have recorded it.
    pub fn baseline_entry(&self) -> Option<BaselineEntry> {
        let mut entry = BaselineEntry::new(self.steady_state.or(self.figures)?, self.sites.iter().cloned());
        entry.steady_state = self.steady_state.is_some();
        Some(entry)
    }
}

/// Tests that `cargo test` runs and `cargo ying test` does not, with why and the command that runs them.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct NotRunTarget {
    /// The package.
    pub package: String,
    /// `doctest` for the library's documentation tests, else the target's kind (`test`, `lib`, `bin`, `bench`,
    /// `example`).
    pub kind: String,
    /// The target's name (the library's, for its doctests).
    pub target: String,
    /// Why it was not run.
    pub reason: String,
    /// The command that runs it: `cargo test --doc -p my-crate`, `cargo test -p my-crate --test NAME`.
    pub command: String,
}

/// The most attempts a test can be given: far beyond any retry count a run sets.
pub const MAX_ATTEMPTS: u32 = 1000;

/// The longest a test or a run can take, in seconds: a year.
pub const MAX_SECONDS: f64 = 365.0 * 24.0 * 3600.0;

/// `seconds`, read from `key`, unless it is not a duration a run can take.
pub fn check_seconds(key: &str, seconds: f64) -> Result<(), ReadError> {
    if seconds.is_finite() && (0.0..=MAX_SECONDS).contains(&seconds) {
        return Ok(());
    }
    // `1e300` as written, not three hundred digits.
    let found = if seconds.abs() >= 1e9 { format!("{seconds:e}") } else { seconds.to_string() };
    Err(ReadError::OutOfRange {
        key: key.to_owned(),
        found,
        expected: format!("a duration from 0 to {MAX_SECONDS} seconds"),
    })
}

/// `count` attempts, read from `key`, unless there cannot be that many ([`MAX_ATTEMPTS`]) or none.
pub fn check_attempts(key: &str, count: u32) -> Result<(), ReadError> {
    if (1..=MAX_ATTEMPTS).contains(&count) {
        return Ok(());
    }
    Err(ReadError::OutOfRange {
        key: key.to_owned(),
        found: count.to_string(),
        expected: format!("a count from 1 to {MAX_ATTEMPTS}"),
    })
}

/// `path`, read from `key`, unless it is not `expected`, where a run writes that file of the test.
pub fn check_path(key: &str, path: &str, expected: &str) -> Result<(), ReadError> {
    if path == expected {
        return Ok(());
    }
    Err(ReadError::OutOfRange {
        key: key.to_owned(),
        found: format!("{path:?}"),
        expected: format!("{expected:?}, where a run writes it"),
    })
}

impl SummaryTest {
    /// The test's numbers in range, and its files where a run writes them (a merge copies them).
    fn check(&self) -> Result<(), ReadError> {
        let key = |field: &str| format!("{field}` of `{}", self.id);
        if let Some(duration) = self.duration {
            check_seconds(&key("duration"), duration)?;
        }
        if let Some(attempts) = self.attempts {
            check_attempts(&key("attempts"), attempts)?;
        }
        if let Some(report) = &self.report {
            check_path(&key("report"), report, &self.id.report_path())?;
        }
        if let Some(output) = &self.output {
            check_path(&key("output"), output, &self.id.output_path())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{GateVerdict, NotRunTarget, Reruns, Summary, SummaryTest, TestOutcome, UnmeasuredRerun};
    use crate::figures::Figures;
    use crate::test_id::{TargetKind, TestId};

    #[test]
    fn reruns_say_what_the_test_crossed() {
        let mut reruns = Reruns { runs: 2, crossed: 2, unmeasured: Vec::new(), rule: None };
        assert_eq!(reruns.describe(), "crossed the tolerance, then again in 2 of 2 reruns");
        reruns.rule = Some("the lost floor".to_owned());
        assert_eq!(reruns.describe(), "crossed the lost floor, then again in 2 of 2 reruns");
        let json = serde_json::to_value(&reruns).unwrap();
        assert_eq!(json["rule"], "the lost floor");
        let without: Reruns = serde_json::from_str(r#"{"runs": 2, "crossed": 1}"#).unwrap();
        assert_eq!(without.rule, None, "a summary written before the rule was kept still reads");
    }

    #[test]
    fn reruns_that_measured_nothing_confirm_nothing_and_are_named() {
        let crashed = UnmeasuredRerun { outcome: TestOutcome::Crashed, reason: Some("killed by SIGSEGV".to_owned()) };
        let failed = UnmeasuredRerun { outcome: TestOutcome::Failed, reason: None };
        let reruns =
            |crossed: u32, unmeasured: Vec<UnmeasuredRerun>| Reruns { runs: 2, crossed, unmeasured, rule: None };
        let cases = [
            (reruns(2, vec![]), GateVerdict::Regressed, "crossed the tolerance, then again in 2 of 2 reruns"),
            (reruns(1, vec![]), GateVerdict::Unstable, "crossed the tolerance, then again in only 1 of 2 reruns"),
            (
                reruns(0, vec![crashed.clone(), failed.clone()]),
                GateVerdict::Regressed,
                "crossed the tolerance, then in none of 2 reruns, which measured nothing (crashed: killed by \
                 SIGSEGV; failed): the regression stands",
            ),
            (
                reruns(0, vec![failed.clone(), failed.clone()]),
                GateVerdict::Regressed,
                "crossed the tolerance, then in none of 2 reruns, which measured nothing (2 failed): the regression \
                 stands",
            ),
            (
                reruns(1, vec![failed.clone()]),
                GateVerdict::Regressed,
                "crossed the tolerance, then again in 1 of 1 reruns that measured it; 1 measured nothing (failed): \
                 the regression stands",
            ),
            (
                reruns(0, vec![crashed]),
                GateVerdict::Unstable,
                "crossed the tolerance, then again in only 0 of 1 reruns that measured it; 1 measured nothing \
                 (crashed: killed by SIGSEGV)",
            ),
        ];
        for (reruns, verdict, words) in cases {
            assert_eq!((reruns.verdict(), reruns.describe().as_str()), (verdict, words), "{reruns:?}");
        }
        let mut test = SummaryTest::new(TestId::new("p", TargetKind::Test, "leaks", "t"), TestOutcome::Passed);
        test.reruns = Some(reruns(0, vec![failed]));
        let summary = Summary::new(vec![test]);
        let json = serde_json::to_value(&summary).unwrap();
        assert_eq!(
            json["tests"][0]["reruns"],
            serde_json::json!({"runs": 2, "crossed": 0, "unmeasured": [{"outcome": "failed"}]})
        );
        assert_eq!(Summary::parse(&serde_json::to_string(&summary).unwrap()).unwrap(), summary);
    }

    #[test]
    fn a_summary_with_a_number_out_of_range_or_a_file_elsewhere_is_refused_naming_the_test_and_field() {
        let id = TestId::new("p", TargetKind::Test, "leaks", "box_leak");
        type Change = fn(&mut SummaryTest);
        let cases: [(Change, &str); 4] = [
            (
                |test| test.attempts = Some(u32::MAX),
                "`attempts` of `p::leaks box_leak` is 4294967295, not a count from 1 to 1000",
            ),
            (
                |test| test.duration = Some(1e300),
                "`duration` of `p::leaks box_leak` is 1e300, not a duration from 0 to 31536000 seconds",
            ),
            (
                |test| test.report = Some("/etc/hostname".to_owned()),
                "`report` of `p::leaks box_leak` is \"/etc/hostname\", not \"reports/p/test/leaks/box_leak.json\", where a run writes it",
            ),
            (
                |test| test.output = Some("../../../x.log".to_owned()),
                "`output` of `p::leaks box_leak` is \"../../../x.log\", not \"output/p/test/leaks/box_leak.log\", where a run writes it",
            ),
        ];
        for (change, message) in cases {
            let mut test = SummaryTest::new(id.clone(), TestOutcome::Failed);
            test.report = Some(id.report_path());
            change(&mut test);
            let text = serde_json::to_string(&Summary::new(vec![test])).unwrap();
            assert_eq!(Summary::parse(&text).unwrap_err().to_string(), message);
        }
    }

    #[test]
    fn a_summary_round_trips_with_and_without_figures() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("summary.json");
        let mut leak = SummaryTest::new(TestId::new("p", TargetKind::Test, "leaks", "box_leak"), TestOutcome::Failed);
        leak.figures = Some(Figures {
            retained_bytes: 1000,
            peak_bytes: 1000,
            allocated_bytes: 1000,
            allocations: 1,
            lingering_tasks: 2,
            ..Figures::default()
        });
        leak.gate = Some(GateVerdict::New);
        let plain = SummaryTest::new(TestId::new("p", TargetKind::Lib, "p", "tests::ok"), TestOutcome::Passed);
        let summary = Summary::new(vec![leak, plain]);
        summary.write(&path).unwrap();
        assert_eq!(Summary::read(&path).unwrap(), summary);
        let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(json["tests"][0]["kind"], "test");
        assert_eq!(json["tests"][0]["retained_bytes"], 1000);
        assert_eq!(json["tests"][0]["gate"], "new");
        assert!(json["tests"][1]["retained_bytes"].is_null());
        assert!(json.get("not_run").is_none(), "nothing not run, nothing written: {json}");
    }

    #[test]
    fn targets_not_run_round_trip_and_summaries_without_them_still_read() {
        let mut summary = Summary::new(Vec::new());
        summary.not_run.push(NotRunTarget {
            package: "p".to_owned(),
            kind: "doctest".to_owned(),
            target: "p".to_owned(),
            reason: "doctests".to_owned(),
            command: "cargo test --doc -p p".to_owned(),
        });
        let text = serde_json::to_string(&summary).unwrap();
        assert!(text.contains(r#""not_run":[{"package":"p","kind":"doctest""#), "{text}");
        assert_eq!(Summary::parse(&text).unwrap(), summary);
        let without =
            Summary::parse(&format!(r#"{{"schema_version": {}, "tests": []}}"#, super::SUMMARY_SCHEMA_VERSION));
        assert_eq!(without.unwrap(), Summary::new(Vec::new()));
    }
}
