//! The baseline: a committed, reviewable record of every leak test's memory, compared with each run.
//!
//! JSON with the tests sorted by id, each with its exact figures and its retained stacks as sorted folded stacks
//! (function names only). Nothing churns between identical runs (no timestamps, addresses or absolute paths), so
//! an unchanged run rewrites it byte for byte and a review diff shows only real changes. It is only ever replaced
//! by an atomic rename.

use crate::figures::Figures;
use crate::folded::FoldedStack;
use crate::json::{self, Kind, ReadError};
use crate::report::LeakReport;
use crate::summary::SummaryTest;
use crate::test_id::TestId;
use std::collections::BTreeMap;
use std::path::Path;

/// The version of the baseline format.
pub const BASELINE_SCHEMA_VERSION: u32 = 2;

/// The default baseline file, at the workspace root.
pub const DEFAULT_BASELINE: &str = "ying-baseline.json";

const KIND: Kind = Kind {
    name: "baseline",
    version: BASELINE_SCHEMA_VERSION,
    older: "it was written by an earlier cargo ying, whose test ids did not tell a library's tests from a \
            binary's; write it anew with `cargo ying test --save-baseline` (its old entries cannot be carried over)",
    newer: "it was written by a later cargo ying than this one; use that one",
};

/// The whole baseline.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Baseline {
    /// [`BASELINE_SCHEMA_VERSION`] of the writer.
    pub schema_version: u32,
    /// Leak tests by id, written in their display form (`my-crate::cache tests::evicts`).
    #[serde(with = "keyed_by_display")]
    pub tests: BTreeMap<TestId, BaselineEntry>,
}

impl Default for Baseline {
    fn default() -> Self {
        Self { schema_version: BASELINE_SCHEMA_VERSION, tests: BTreeMap::new() }
    }
}

/// One leak test's recorded memory.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineEntry {
    /// Retained bytes as the budget judges them (excused memory left out); for a steady state, the smallest growth
    /// of one measured run.
    pub retained_bytes: u64,
    /// Of the retained bytes, those nothing reaches any more (lost, or in a cycle of lost blocks), which the gate
    /// judges without the relative tolerance; `None` in an entry written before reports told them, which the gate
    /// does not judge by them until it is saved again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_bytes: Option<u64>,
    /// Peak bytes.
    pub peak_bytes: u64,
    /// Bytes allocated; for a steady state, the fewest of one measured run.
    pub allocated_bytes: u64,
    /// Allocations; for a steady state, the fewest of one measured run.
    pub allocations: u64,
    /// The figures are the steady state of several measured runs ([`Figures::steady_state`]), not the runs'
    /// totals: what the gate compares for a test with `iterations`.
    #[serde(default, skip_serializing_if = "core::ops::Not::not")]
    pub steady_state: bool,
    /// Where the retained memory was allocated, sorted.
    pub retained_stacks: Vec<FoldedStack>,
}

impl BaselineEntry {
    /// The entry of a test with `figures` (its totals) whose retained memory was allocated at `retained_stacks`.
    pub fn new(figures: Figures, mut retained_stacks: Vec<FoldedStack>) -> Self {
        retained_stacks.sort();
        Self {
            retained_bytes: figures.retained_bytes,
            lost_bytes: Some(figures.lost_bytes),
            peak_bytes: figures.peak_bytes,
            allocated_bytes: figures.allocated_bytes,
            allocations: figures.allocations,
            steady_state: false,
            retained_stacks,
        }
    }

    /// What the gate compares of a leak test's report, and the baseline keeps: its steady state when it has
    /// several measured runs, else its figures; and `retained_stacks`, the folded stacks of its retained memory (as
    /// the frame rules fold its retained sites).
    pub fn of(report: &LeakReport, retained_stacks: Vec<FoldedStack>) -> Self {
        let steady = Figures::steady_state(report);
        let mut entry = Self::new(steady.unwrap_or_else(|| Figures::of(report)), retained_stacks);
        entry.steady_state = steady.is_some();
        entry
    }

    /// What the gate compares of a test in a summary (without stacks), when it is a leak test with figures.
    pub fn of_summary(test: &SummaryTest) -> Option<Self> {
        let mut entry = Self::new(test.steady_state.or(test.figures)?, Vec::new());
        entry.steady_state = test.steady_state.is_some();
        Some(entry)
    }

    /// Its figures.
    pub fn figures(&self) -> Figures {
        Figures {
            retained_bytes: self.retained_bytes,
            peak_bytes: self.peak_bytes,
            allocated_bytes: self.allocated_bytes,
            allocations: self.allocations,
            lost_bytes: self.lost_bytes.unwrap_or_default(),
        }
    }
}

impl Baseline {
    /// Reads the baseline at `path`; `Ok(None)` when there is none. A file that is not a baseline of this version
    /// is an error that names its line and column.
    pub fn read(path: &Path) -> Result<Option<Self>, ReadError> {
        json::read_optional(path, &KIND)
    }

    /// Reads a baseline from its text.
    pub fn parse(text: &str) -> Result<Self, ReadError> {
        json::parse(text, &KIND)
    }

    /// Writes the baseline to `path` through a temporary file in the same directory and an atomic rename, so an
    /// interrupted write never leaves a truncated baseline.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        json::write_atomic(path, self)
    }
}

/// A map keyed by test ids, written with the ids in their display form.
mod keyed_by_display {
    use crate::test_id::TestId;
    use std::collections::BTreeMap;

    struct Key(TestId);

    impl<'de> serde::Deserialize<'de> for Key {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            crate::test_id::as_display::deserialize(deserializer).map(Key)
        }
    }

    impl PartialEq for Key {
        fn eq(&self, other: &Self) -> bool {
            self.0 == other.0
        }
    }
    impl Eq for Key {}
    impl PartialOrd for Key {
        fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
            Some(self.cmp(other))
        }
    }
    impl Ord for Key {
        fn cmp(&self, other: &Self) -> core::cmp::Ordering {
            self.0.cmp(&other.0)
        }
    }

    pub(super) fn serialize<S: serde::Serializer, V: serde::Serialize>(
        map: &BTreeMap<TestId, V>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_map(map.iter().map(|(id, value)| (id.to_string(), value)))
    }

    pub(super) fn deserialize<'de, D: serde::Deserializer<'de>, V: serde::Deserialize<'de>>(
        deserializer: D,
    ) -> Result<BTreeMap<TestId, V>, D::Error> {
        let map: BTreeMap<Key, V> = serde::Deserialize::deserialize(deserializer)?;
        Ok(map.into_iter().map(|(key, value)| (key.0, value)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::{Baseline, BaselineEntry};
    use crate::figures::Figures;
    use crate::test_id::{TargetKind, TestId};

    fn baseline() -> Baseline {
        let mut baseline = Baseline::default();
        let figures = Figures { retained_bytes: 1000, ..Figures::default() };
        let stacks = vec!["a;b 1000".parse().unwrap()];
        baseline
            .tests
            .insert(TestId::new("pkg", TargetKind::Test, "leaks", "box_leak"), BaselineEntry::new(figures, stacks));
        baseline.tests.insert(TestId::new("pkg", TargetKind::Lib, "pkg", "tests::same_unit"), BaselineEntry::default());
        baseline.tests.insert(TestId::new("pkg", TargetKind::Bin, "pkg", "tests::same_unit"), BaselineEntry::default());
        baseline
    }

    #[test]
    fn round_trips_byte_for_byte_with_ids_as_keys() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ying-baseline.json");
        baseline().write(&path).unwrap();
        let first = std::fs::read_to_string(&path).unwrap();
        assert!(first.contains("\"pkg tests::same_unit\"") && first.contains("\"pkg::bin/pkg tests::same_unit\""));
        assert!(first.contains("\"pkg::leaks box_leak\"") && first.contains("\"a;b 1000\""), "{first}");
        Baseline::read(&path).unwrap().unwrap().write(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), first);
        assert_eq!(Baseline::read(&path).unwrap(), Some(baseline()));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file left");
    }

    #[test]
    fn lost_bytes_are_written_for_every_entry_and_absent_from_an_entry_written_before_they_were_told() {
        let lost = Figures { retained_bytes: 1512, lost_bytes: 512, ..Figures::default() };
        let mut with_lost = baseline();
        with_lost
            .tests
            .insert(TestId::new("pkg", TargetKind::Test, "leaks", "forgotten"), BaselineEntry::new(lost, Vec::new()));
        let text = serde_json::to_string(&with_lost).unwrap();
        let told = with_lost.tests.values().filter(|entry| entry.lost_bytes.is_some()).count();
        assert_eq!((text.matches("\"lost_bytes\"").count(), told), (2, 2), "{text}");
        assert!(text.contains("\"retained_bytes\":1512,\"lost_bytes\":512,"), "{text}");
        assert_eq!(Baseline::parse(&text).unwrap(), with_lost);
        let earlier = r#"{"schema_version": 2, "tests": {"pkg::leaks box_leak": {"retained_bytes": 1000,
            "peak_bytes": 0, "allocated_bytes": 0, "allocations": 0, "retained_stacks": []}}}"#;
        let entry =
            &Baseline::parse(earlier).unwrap().tests[&TestId::new("pkg", TargetKind::Test, "leaks", "box_leak")];
        assert_eq!((entry.retained_bytes, entry.lost_bytes), (1000, None));
        assert_eq!(entry.figures().get(crate::Figure::Lost), 0);
    }

    #[test]
    fn a_missing_baseline_is_none_and_a_corrupt_one_an_error_with_its_position() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ying-baseline.json");
        assert_eq!(Baseline::read(&path).unwrap(), None);
        std::fs::write(&path, "{\n  \"schema_version\": 2,\n  \"tests\": {\n    \"x\": {\n").unwrap();
        let message = Baseline::read(&path).unwrap_err().to_string();
        assert!(message.contains("line 5 column 0"), "{message}");
        std::fs::write(&path, "{\n  \"tests\": {},\n  \"schema_version\": 7\n}").unwrap();
        let message = Baseline::read(&path).unwrap_err().to_string();
        assert!(message.contains("schema_version 7 at line 3 column 3 is not 2"), "{message}");
        std::fs::write(&path, "{\n  \"schema_version\": 1,\n  \"tests\": {}\n}").unwrap();
        let message = Baseline::read(&path).unwrap_err().to_string();
        assert!(message.contains("--save-baseline"), "an old baseline says what to do: {message}");
        std::fs::write(&path, "[1, 2]").unwrap();
        assert!(Baseline::read(&path).unwrap_err().to_string().contains("not a ying baseline"));
        std::fs::write(&path, "{\"schema_version\": 2, \"tests\": {\"nonsense\": {}}}").unwrap();
        let message = Baseline::read(&path).unwrap_err().to_string();
        assert!(message.contains("`nonsense` is not a test id") && message.contains("column"), "{message}");
    }
}
