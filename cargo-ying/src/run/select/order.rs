//! The order a run starts its tests in. Tests run `jobs` at once from one queue, so a test that takes much longer
//! than the rest and starts last leaves every other worker idle while it runs: the run lasts the rest's share plus
//! that test. The last run's `summary.json` says how long each test took; the binaries whose tests took longest
//! start first, and in each binary its longest tests first (the longest-processing-time rule). A binary's tests stay
//! together, as listed, so that its debug information is read while its tests run and let go when they are done
//! ([`Symbolizer::done`](crate::run::names::symbols::Symbolizer::done)). Tests the last run did not time keep their listed
//! place after those it did; with no summary (a first run) the order is the listing's.

use crate::run::select::build::TestBinary;
use crate::run::select::discover::TestCase;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use ying_report::{Summary, TestId};

/// How long each test, and each binary's tests together, took in the last run, in seconds.
#[derive(Debug, Default)]
pub(crate) struct LastRun {
    durations: HashMap<TestId, f64>,
    /// By nextest's binary id.
    binaries: HashMap<String, f64>,
}

impl LastRun {
    /// The durations of the run whose summary is `<out_dir>/summary.json`. The order is only a hint: a summary that
    /// is missing or cannot be read (of another version, cut short) orders nothing, and is left as it is.
    pub(crate) fn read(out_dir: &Path) -> Self {
        let Ok(summary) = Summary::read(&out_dir.join("summary.json")) else { return Self::default() };
        let durations: HashMap<TestId, f64> = summary
            .tests
            .into_iter()
            .filter_map(|test| test.duration.filter(|seconds| seconds.is_finite()).map(|seconds| (test.id, seconds)))
            .collect();
        let mut binaries = HashMap::new();
        for (id, seconds) in &durations {
            *binaries.entry(id.binary_id()).or_default() += seconds;
        }
        Self { durations, binaries }
    }

    /// How long the test `id` took, if the last run timed it.
    fn of(&self, id: &TestId) -> Option<f64> {
        self.durations.get(id).copied()
    }

    /// How long the tests of the binary with nextest's id `binary_id` took together.
    fn of_binary(&self, binary_id: &str) -> f64 {
        self.binaries.get(binary_id).copied().unwrap_or_default()
    }

    /// `binaries`, the ones whose tests took longest first (the others in their order).
    pub(crate) fn binaries_first(&self, binaries: &[Arc<TestBinary>]) -> Vec<Arc<TestBinary>> {
        let mut ranked: Vec<(f64, &Arc<TestBinary>)> =
            binaries.iter().map(|binary| (self.of_binary(&binary.binary_id()), binary)).collect();
        ranked.sort_by(|(a, _), (b, _)| b.total_cmp(a));
        ranked.into_iter().map(|(_, binary)| Arc::clone(binary)).collect()
    }

    /// The indices of `tests` in the order they start: by binary, the longest binaries first, and in each the
    /// longest tests first; what the last run did not time keeps its place after what it did.
    pub(crate) fn start_order(&self, tests: &[(TestCase, bool)]) -> Vec<usize> {
        let mut binary_ids: Vec<String> = Vec::new();
        let mut binary_of: Vec<usize> = Vec::with_capacity(tests.len());
        for (test, _) in tests {
            let binary_id = test.binary.binary_id();
            let rank = binary_ids.iter().position(|id| *id == binary_id).unwrap_or_else(|| {
                binary_ids.push(binary_id);
                binary_ids.len() - 1
            });
            binary_of.push(rank);
        }
        let binary_seconds: Vec<f64> = binary_ids.iter().map(|id| self.of_binary(id)).collect();
        let mut binary_order: Vec<usize> = (0..binary_ids.len()).collect();
        binary_order.sort_by(|&a, &b| binary_seconds[b].total_cmp(&binary_seconds[a]));
        let mut place = vec![0; binary_ids.len()];
        for (position, &binary) in binary_order.iter().enumerate() {
            place[binary] = position;
        }
        let seconds: Vec<f64> = tests.iter().map(|(test, _)| self.of(&test.id()).unwrap_or(-1.0)).collect();
        let mut order: Vec<usize> = (0..tests.len()).collect();
        // Stable: equal keys (the untimed tests among them) keep the listing's order.
        order.sort_by(|&a, &b| {
            place[binary_of[a]].cmp(&place[binary_of[b]]).then_with(|| seconds[b].total_cmp(&seconds[a]))
        });
        order
    }
}

#[cfg(test)]
mod tests {
    use super::LastRun;
    use crate::run::select::build::TestBinary;
    use crate::run::select::discover::TestCase;
    use std::sync::Arc;
    use ying_report::{Summary, SummaryTest, TargetKind, TestOutcome};

    fn binary(target: &str) -> Arc<TestBinary> {
        Arc::new(TestBinary {
            package: "app".to_owned(),
            name: target.to_owned(),
            kind: TargetKind::Test,
            path: format!("/nowhere/{target}").into(),
            package_dir: "/nowhere".into(),
        })
    }

    fn case(binary: &Arc<TestBinary>, name: &str) -> (TestCase, bool) {
        (TestCase { binary: Arc::clone(binary), name: name.to_owned(), ignored: false }, true)
    }

    /// A summary of `timed` (test, seconds), written where `LastRun::read` looks.
    fn last_run(binary_tests: &[(&Arc<TestBinary>, &str, f64)]) -> (tempfile::TempDir, LastRun) {
        let dir = tempfile::tempdir().unwrap();
        let mut summary = Summary::new(Vec::new());
        for (binary, name, seconds) in binary_tests {
            let mut test = SummaryTest::new(binary.test_id(name), TestOutcome::Passed);
            test.duration = Some(*seconds);
            summary.tests.push(test);
        }
        summary.write(&dir.path().join("summary.json")).unwrap();
        let last = LastRun::read(dir.path());
        (dir, last)
    }

    fn names(tests: &[(TestCase, bool)], order: &[usize]) -> Vec<String> {
        order.iter().map(|&index| tests[index].0.name.clone()).collect()
    }

    #[test]
    fn the_longest_tests_of_the_last_run_start_first_each_binarys_together() {
        let (quick, slow) = (binary("quick"), binary("slow"));
        let tests =
            vec![case(&quick, "a"), case(&quick, "b"), case(&slow, "c"), case(&slow, "d"), case(&slow, "suite")];
        let (_dir, last) = last_run(&[
            (&quick, "a", 0.01),
            (&quick, "b", 0.02),
            (&slow, "c", 0.01),
            (&slow, "d", 0.03),
            (&slow, "suite", 0.60),
        ]);
        assert_eq!(names(&tests, &last.start_order(&tests)), ["suite", "d", "c", "b", "a"]);
        let binaries: Vec<String> =
            last.binaries_first(&[quick, slow]).iter().map(|binary| binary.name.clone()).collect();
        assert_eq!(binaries, ["slow", "quick"]);
    }

    #[test]
    fn tests_the_last_run_did_not_time_keep_their_place_after_those_it_did() {
        let one = binary("one");
        let tests = vec![case(&one, "new_first"), case(&one, "timed"), case(&one, "new_second")];
        let (_dir, last) = last_run(&[(&one, "timed", 0.5)]);
        assert_eq!(names(&tests, &last.start_order(&tests)), ["timed", "new_first", "new_second"]);
    }

    #[test]
    fn without_a_readable_summary_the_order_is_the_listings() {
        let (one, two) = (binary("one"), binary("two"));
        let tests = vec![case(&one, "b"), case(&one, "a"), case(&two, "c")];
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(names(&tests, &LastRun::read(dir.path()).start_order(&tests)), ["b", "a", "c"]);
        let summary = dir.path().join("summary.json");
        std::fs::write(&summary, "{ not json").unwrap();
        assert_eq!(names(&tests, &LastRun::read(dir.path()).start_order(&tests)), ["b", "a", "c"]);
        assert_eq!(std::fs::read_to_string(&summary).unwrap(), "{ not json", "left as it was");
    }
}
