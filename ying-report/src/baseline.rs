//! The baseline: a committed record of every measured test's memory, compared with each run, that a reviewer reads
//! in one screen.
//!
//! JSON with one line a test, sorted by id: its gated figures and, for a test that retains memory, its few largest
//! retained sites, each keyed by the path of the package's functions that allocated it, without lines
//! (`ying_frames::site_key`). A line holds at most [`MAX_LINE`] characters. Nothing in it churns between identical
//! runs or when lines of the sources move (no timestamps, addresses, absolute paths or line numbers), so an
//! unchanged run rewrites it byte for byte and a review diff shows one line per test that changed. It is only ever
//! replaced by an atomic rename.
//!
//! ```text
//! {
//!   "schema_version": 4,
//!   "measured": "leak-tests",
//!   "tests": {
//!     "app::cache evicts": {"retained": 0, "lost": 0},
//!     "app::cache keeps_4_kib": {"retained": 4096, "lost": 0, "sites": {"cache::keeps_4_kib;app::Cache::fill": 4096}}
//!   }
//! }
//! ```
//!
//! A baseline of schema 2 (every retained stack, folded with its leak site's line) is read too, its figures kept and
//! its stacks left behind; one of schema 3 (which did not record the async tasks a test left) is read with its
//! tests not judged by their tasks. The next save writes either whole in this form.

use crate::figures::{Figure, Figures};
use crate::json::{self, Kind, ReadError};
use crate::report::LeakReport;
use crate::terms::sort_sites;
use crate::test_id::TestId;
use std::collections::BTreeMap;

pub use crate::terms::{Measured, Sites};
use std::path::Path;

/// The version of the baseline format.
pub const BASELINE_SCHEMA_VERSION: u32 = 4;

/// The schema before the baseline recorded tasks: read, its entries not judged by their tasks
/// ([`BaselineEntry::tasks_unknown`]).
const TASKLESS_VERSION: u32 = 3;

/// The default baseline file, at the workspace root.
pub const DEFAULT_BASELINE: &str = "ying-baseline.json";

/// The most characters a test's line holds: sites that do not fit are counted in its `other` bytes.
pub const MAX_LINE: usize = 400;

/// The most retained sites a test's line names: its largest; the others are counted in its `other` bytes.
pub const MAX_SITES: usize = 3;

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
    /// Which tests the runs that saved it measured: `all` once a run with `--measure all` saved into it.
    #[serde(default)]
    pub measured: Measured,
    /// Measured tests by id, written in their display form (`my-crate::cache tests::evicts`).
    #[serde(with = "keyed_by_display")]
    pub tests: BTreeMap<TestId, BaselineEntry>,
    /// The schema version of the file it was read from, when that is an earlier one: the next save writes it whole
    /// in this form.
    #[serde(skip)]
    pub read_from: Option<u32>,
}

impl Default for Baseline {
    fn default() -> Self {
        Self {
            schema_version: BASELINE_SCHEMA_VERSION,
            measured: Measured::default(),
            tests: BTreeMap::new(),
            read_from: None,
        }
    }
}

/// One measured test's recorded memory: the figures the gate judges, and where its largest retained sites are.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineEntry {
    /// Retained bytes as the budget judges them (excused memory left out); for a steady state, the smallest growth
    /// of one measured run.
    #[serde(rename = "retained")]
    pub retained_bytes: u64,
    /// Of the retained bytes, those nothing reaches any more (lost, or in a cycle of lost blocks), which the gate
    /// judges without the relative tolerance; `None` in an entry written before reports told them, which the gate
    /// does not judge by them until it is saved again.
    #[serde(rename = "lost", default, skip_serializing_if = "Option::is_none")]
    pub lost_bytes: Option<u64>,
    /// Of the retained bytes, those a static or a thread-local holds, which the gate judges by a floor of their own
    /// rather than the relative tolerance; `None` in a steady state's entry (its smallest growth of one run judges
    /// them) and in an entry written before the baseline kept them, which the gate does not judge by them until it
    /// is saved again.
    #[serde(rename = "held", default, skip_serializing_if = "Option::is_none")]
    pub held_bytes: Option<u64>,
    /// Peak bytes, kept when the gate judges them (`gate = ["peak"]`).
    #[serde(rename = "peak", default, skip_serializing_if = "Option::is_none")]
    pub peak_bytes: Option<u64>,
    /// Bytes allocated, kept when the gate judges them; for a steady state, the fewest of one measured run.
    #[serde(rename = "allocated", default, skip_serializing_if = "Option::is_none")]
    pub allocated_bytes: Option<u64>,
    /// Allocations, kept when the gate judges them; for a steady state, the fewest of one measured run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocations: Option<u64>,
    /// Async tasks the body left, by kind: 0 (and left out) for a test that left none, or whose entry was written
    /// before reports told them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub leaked_tasks: u64,
    /// Async tasks the body left lingering (see `leaked_tasks`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lingering_tasks: u64,
    /// Async tasks the body left unclaimed (see `leaked_tasks`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unclaimed_tasks: u64,
    /// The entry was read from a baseline of an earlier schema, which did not record tasks: its test is not judged
    /// by them until it is saved again.
    #[serde(skip)]
    pub tasks_unknown: bool,
    /// The figures are the steady state of several measured runs ([`Figures::steady_state`]), not the runs'
    /// totals: what the gate compares for a test with `iterations`.
    #[serde(default, skip_serializing_if = "core::ops::Not::not")]
    pub steady_state: bool,
    /// The largest retained sites, the largest first (at most [`MAX_SITES`], as many as fit in [`MAX_LINE`]), each
    /// keyed by the functions of the package that allocated it, root first, without lines: a site whose line
    /// moves keeps its key. Excused memory is not among them.
    #[serde(default, skip_serializing_if = "Vec::is_empty", with = "crate::terms::sites")]
    pub sites: Sites,
    /// The retained bytes of the sites not named in `sites`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub other: u64,
}

/// Whether a count is 0, which the baseline leaves out.
fn is_zero(count: &u64) -> bool {
    *count == 0
}

impl BaselineEntry {
    /// The entry of a test with `figures` (its totals, every one kept) whose retained memory was allocated at
    /// `sites` (keys, in any order; a key given twice is one site): the largest [`MAX_SITES`] named, the others
    /// counted in `other`.
    pub fn new(figures: Figures, sites: impl IntoIterator<Item = (String, u64)>) -> Self {
        let mut by_key: BTreeMap<String, u64> = BTreeMap::new();
        for (key, bytes) in sites {
            *by_key.entry(key).or_default() += bytes;
        }
        let mut sites: Sites = by_key.into_iter().filter(|(_, bytes)| *bytes > 0).collect();
        sort_sites(&mut sites);
        let other = sites.iter().skip(MAX_SITES).map(|(_, bytes)| bytes).sum();
        sites.truncate(MAX_SITES);
        Self {
            retained_bytes: figures.retained_bytes,
            lost_bytes: Some(figures.lost_bytes),
            held_bytes: Some(figures.held_bytes),
            peak_bytes: Some(figures.peak_bytes),
            allocated_bytes: Some(figures.allocated_bytes),
            allocations: Some(figures.allocations),
            leaked_tasks: figures.leaked_tasks,
            lingering_tasks: figures.lingering_tasks,
            unclaimed_tasks: figures.unclaimed_tasks,
            tasks_unknown: false,
            steady_state: false,
            sites,
            other,
        }
    }

    /// What the gate compares of a leak test's report, and the baseline keeps: its steady state when it has
    /// several measured runs, else its figures; and `sites`, its retained memory's sites by key (as the frame rules
    /// key the report's retained sites).
    pub fn of(report: &LeakReport, sites: impl IntoIterator<Item = (String, u64)>) -> Self {
        let steady = Figures::steady_state(report);
        let mut entry = Self::new(steady.unwrap_or_else(|| Figures::of(report)), sites);
        entry.steady_state = steady.is_some();
        if entry.steady_state {
            // What statics keep is judged by the steady state's smallest growth of one run: a table filled once
            // lands in a warm-up run or in a measured one, and the runs' total would move with it.
            entry.held_bytes = None;
        }
        entry
    }

    /// One figure, when the entry keeps it (retained bytes always; lost bytes from entries that told them; the
    /// others when they were gated as it was saved).
    pub fn get(&self, figure: Figure) -> Option<u64> {
        match figure {
            Figure::Retained => Some(self.retained_bytes),
            Figure::Lost => self.lost_bytes,
            Figure::Held => self.held_bytes,
            Figure::Peak => self.peak_bytes,
            Figure::Allocated => self.allocated_bytes,
            Figure::Allocations => self.allocations,
            Figure::LeakedTasks => (!self.tasks_unknown).then_some(self.leaked_tasks),
            Figure::LingeringTasks => (!self.tasks_unknown).then_some(self.lingering_tasks),
            Figure::UnclaimedTasks => (!self.tasks_unknown).then_some(self.unclaimed_tasks),
        }
    }

    /// Its figures, 0 for those it does not keep.
    pub fn figures(&self) -> Figures {
        let get = |figure| self.get(figure).unwrap_or_default();
        Figures {
            retained_bytes: self.retained_bytes,
            peak_bytes: get(Figure::Peak),
            allocated_bytes: get(Figure::Allocated),
            allocations: get(Figure::Allocations),
            lost_bytes: get(Figure::Lost),
            held_bytes: get(Figure::Held),
            leaked_tasks: self.leaked_tasks,
            lingering_tasks: self.lingering_tasks,
            unclaimed_tasks: self.unclaimed_tasks,
        }
    }

    /// The entry as a baseline keeps it when the gate judges `gated`: retained and lost bytes, and of the other
    /// figures only those gated (a figure nobody gates would churn the baseline for nothing).
    #[must_use]
    pub fn keeping(mut self, gated: &[Figure]) -> Self {
        let keep = |figure, value: Option<u64>| value.filter(|_| gated.contains(&figure));
        self.peak_bytes = keep(Figure::Peak, self.peak_bytes);
        self.allocated_bytes = keep(Figure::Allocated, self.allocated_bytes);
        self.allocations = keep(Figure::Allocations, self.allocations);
        self
    }

    /// The retained bytes of its named sites by key.
    pub fn site_bytes(&self) -> BTreeMap<&str, u64> {
        self.sites.iter().map(|(key, bytes)| (key.as_str(), *bytes)).collect()
    }
}

impl Baseline {
    /// Reads the baseline at `path`; `Ok(None)` when there is none. A file that is not a baseline of this version
    /// (or of schema 2, which is read as [`read_from`](Self::read_from) says) is an error that names its line and
    /// column.
    pub fn read(path: &Path) -> Result<Option<Self>, ReadError> {
        match json::read_text(path) {
            Ok(text) => Self::parse(&text).map(Some),
            Err(ReadError::Io(error)) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Reads a baseline from its text. A test written twice, or with more bytes lost than retained, is an error
    /// that names its lines: no line silently wins over another.
    pub fn parse(text: &str) -> Result<Self, ReadError> {
        let version = json::version_of(text);
        let baseline = if version == Some(u64::from(v2::VERSION)) {
            json::parse::<v2::Baseline>(text, &v2::KIND).map(v2::Baseline::into_current)?
        } else if version == Some(u64::from(TASKLESS_VERSION)) {
            // The same entries, without tasks: read as they are, none of them recording tasks.
            let taskless = Kind { version: TASKLESS_VERSION, ..KIND };
            let mut baseline = json::parse::<Self>(text, &taskless)?;
            baseline.schema_version = BASELINE_SCHEMA_VERSION;
            baseline.read_from = Some(TASKLESS_VERSION);
            for entry in baseline.tests.values_mut() {
                entry.tasks_unknown = true;
            }
            baseline
        } else {
            json::parse::<Self>(text, &KIND)?
        };
        check(text, &baseline)?;
        Ok(baseline)
    }

    /// Records `entry` as test `id`'s, over any it had: sites that would take its line past [`MAX_LINE`]
    /// characters are counted in its `other` bytes, the smallest first.
    pub fn record(&mut self, id: TestId, mut entry: BaselineEntry) {
        while line(&id, &entry, true).chars().count() > MAX_LINE {
            let Some((_, bytes)) = entry.sites.pop() else { break };
            entry.other += bytes;
        }
        self.tests.insert(id, entry);
    }

    /// The baseline as its file holds it: a line a test.
    pub fn render(&self) -> String {
        let mut text = format!(
            "{{\n  \"schema_version\": {},\n  \"measured\": \"{}\",\n  \"tests\": {{",
            self.schema_version,
            self.measured.key()
        );
        for (index, (id, entry)) in self.tests.iter().enumerate() {
            text.push('\n');
            text.push_str(&line(id, entry, index + 1 < self.tests.len()));
        }
        text.push_str(if self.tests.is_empty() { "}\n}\n" } else { "\n  }\n}\n" });
        text
    }

    /// Writes the baseline to `path` through a temporary file in the same directory and an atomic rename, so an
    /// interrupted write never leaves a truncated baseline.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        json::write_bytes(path, self.render().as_bytes(), true)
    }
}

/// Refuses what reading the baseline as a map lets through without a word: a test written twice, of which the last
/// would win, and an entry that has more bytes lost than retained.
fn check(text: &str, baseline: &Baseline) -> Result<(), ReadError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    // The keys as written, in their order: the map read keeps one of each.
    let written = serde_json::from_str::<WrittenKeys>(text).map(|keys| keys.tests.0).unwrap_or_default();
    // An id has one written form (its display form, which reading checked), so a test written twice is a key
    // written twice.
    let mut seen = std::collections::BTreeSet::new();
    if let Some(twice) = written.iter().find(|key| !seen.insert(key.as_str())) {
        return Err(ReadError::Duplicate { test: twice.clone(), lines: lines_of(text, twice) });
    }
    for (id, entry) in &baseline.tests {
        if let Some(lost) = entry.lost_bytes.filter(|&lost| lost > entry.retained_bytes) {
            let test = id.to_string();
            let line = lines_of(text, &test).first().copied();
            return Err(ReadError::LostOverRetained { test, line, lost, retained: entry.retained_bytes });
        }
    }
    Ok(())
}

/// The lines (1-based) at which `key` is written as a key of an object.
fn lines_of(text: &str, key: &str) -> Vec<usize> {
    let quoted = serde_json::to_string(key).unwrap_or_default();
    text.match_indices(&quoted)
        .filter(|(offset, _)| text[offset + quoted.len()..].trim_start().starts_with(':'))
        .map(|(offset, _)| json::position(text, offset).0)
        .collect()
}

/// A baseline's test keys as they are written, a key written twice kept twice, everything else skipped.
#[derive(serde::Deserialize)]
struct WrittenKeys {
    tests: KeysInOrder,
}

/// The keys of a JSON object in their order.
struct KeysInOrder(Vec<String>);

impl<'de> serde::Deserialize<'de> for KeysInOrder {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> serde::de::Visitor<'de> for Keys {
            type Value = KeysInOrder;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<KeysInOrder, A::Error> {
                let mut keys = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    keys.push(key);
                }
                Ok(KeysInOrder(keys))
            }
        }
        deserializer.deserialize_map(Keys)
    }
}

/// Test `id`'s line: `    "id": {"retained": 0, "lost": 0}`, with a comma when `more` lines follow.
fn line(id: &TestId, entry: &BaselineEntry, more: bool) -> String {
    let mut line = String::from("    ");
    line.push_str(&serde_json::to_string(&id.to_string()).unwrap_or_default());
    line.push_str(": ");
    let mut bytes = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut bytes, OneLine);
    // Serialising plain numbers, strings and maps of them into memory does not fail.
    let _ = serde::Serialize::serialize(entry, &mut serializer);
    line.push_str(&String::from_utf8_lossy(&bytes));
    if more {
        line.push(',');
    }
    line
}

/// JSON on one line, a space after each `:` and `,`: `{"retained": 0, "lost": 0}`.
struct OneLine;

impl serde_json::ser::Formatter for OneLine {
    fn begin_array_value<W: ?Sized + std::io::Write>(&mut self, writer: &mut W, first: bool) -> std::io::Result<()> {
        if first { Ok(()) } else { writer.write_all(b", ") }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(&mut self, writer: &mut W, first: bool) -> std::io::Result<()> {
        if first { Ok(()) } else { writer.write_all(b", ") }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        writer.write_all(b": ")
    }
}

/// The baseline of schema 2: every retained stack, folded with its leak site's line, and every figure.
mod v2 {
    use super::{BaselineEntry, Measured};
    use crate::folded::FoldedStack;
    use crate::json::Kind;
    use crate::test_id::TestId;
    use std::collections::BTreeMap;

    /// Its version.
    pub(super) const VERSION: u32 = 2;

    pub(super) const KIND: Kind = Kind { name: "baseline", version: VERSION, older: "", newer: "" };

    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct Baseline {
        #[expect(dead_code, reason = "checked as the file is read")]
        schema_version: u32,
        #[serde(with = "super::keyed_by_display")]
        tests: BTreeMap<TestId, Entry>,
    }

    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Entry {
        retained_bytes: u64,
        #[serde(default)]
        lost_bytes: Option<u64>,
        peak_bytes: u64,
        allocated_bytes: u64,
        allocations: u64,
        #[serde(default)]
        steady_state: bool,
        #[expect(dead_code, reason = "read for its shape: the stacks' keys cannot be told from them")]
        retained_stacks: Vec<FoldedStack>,
    }

    impl Baseline {
        /// The baseline in the current form: the figures kept, the stacks left behind (their frames carry no
        /// source files, so the package's functions cannot be told from the others'), a save away from being
        /// written whole.
        pub(super) fn into_current(self) -> super::Baseline {
            let tests = self
                .tests
                .into_iter()
                .map(|(id, entry)| {
                    let current = BaselineEntry {
                        retained_bytes: entry.retained_bytes,
                        lost_bytes: entry.lost_bytes,
                        held_bytes: None,
                        peak_bytes: Some(entry.peak_bytes),
                        allocated_bytes: Some(entry.allocated_bytes),
                        allocations: Some(entry.allocations),
                        steady_state: entry.steady_state,
                        sites: Vec::new(),
                        other: 0,
                        tasks_unknown: true,
                        ..BaselineEntry::default()
                    };
                    (id, current)
                })
                .collect();
            super::Baseline { measured: Measured::LeakTests, tests, read_from: Some(VERSION), ..Default::default() }
        }
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
    use super::{BASELINE_SCHEMA_VERSION, Baseline, BaselineEntry, MAX_LINE, Measured};
    use crate::figures::{Figure, Figures};
    use crate::test_id::{TargetKind, TestId};

    fn id(name: &str) -> TestId {
        TestId::new("pkg", TargetKind::Test, "leaks", name)
    }

    fn baseline() -> Baseline {
        let mut baseline = Baseline::default();
        let figures = Figures { retained_bytes: 1000, ..Figures::default() };
        let sites = vec![("leaks::box_leak".to_owned(), 1000)];
        baseline.record(id("box_leak"), BaselineEntry::new(figures, sites).keeping(&[]));
        baseline.record(TestId::new("pkg", TargetKind::Lib, "pkg", "tests::same_unit"), BaselineEntry::default());
        baseline.record(TestId::new("pkg", TargetKind::Bin, "pkg", "tests::same_unit"), BaselineEntry::default());
        baseline
    }

    #[test]
    fn a_test_is_one_line_and_the_file_round_trips_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ying-baseline.json");
        baseline().write(&path).unwrap();
        let first = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            first,
            "{\n  \"schema_version\": 4,\n  \"measured\": \"leak-tests\",\n  \"tests\": {\n    \
             \"pkg tests::same_unit\": {\"retained\": 0},\n    \
             \"pkg::bin/pkg tests::same_unit\": {\"retained\": 0},\n    \
             \"pkg::leaks box_leak\": {\"retained\": 1000, \"lost\": 0, \"held\": 0, \"sites\": {\"leaks::box_leak\": 1000}}\n  }\n}\n"
        );
        Baseline::read(&path).unwrap().unwrap().write(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), first);
        assert_eq!(Baseline::read(&path).unwrap(), Some(baseline()));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file left");
        let empty = Baseline { measured: Measured::All, ..Baseline::default() };
        assert_eq!(empty.render(), "{\n  \"schema_version\": 4,\n  \"measured\": \"all\",\n  \"tests\": {}\n}\n");
        assert_eq!(Baseline::parse(&empty.render()).unwrap(), empty);
    }

    #[test]
    fn the_largest_sites_are_named_and_the_rest_counted_within_the_line() {
        let sites = (1..=5).map(|n| (format!("app::site_{n}"), n * 100)).chain([("app::site_5".to_owned(), 1)]);
        let entry = BaselineEntry::new(Figures { retained_bytes: 1501, ..Figures::default() }, sites);
        let named: Vec<(&str, u64)> = entry.sites.iter().map(|(key, bytes)| (key.as_str(), *bytes)).collect();
        assert_eq!(named, [("app::site_5", 501), ("app::site_4", 400), ("app::site_3", 300)]);
        assert_eq!(entry.other, 300, "sites 1 and 2");
        // Keys so long that two of them take the line past its limit: the smaller is counted with the rest.
        let long = |n: u64| (format!("app::{}", format!("{n}").repeat(120)), 1000 - n);
        let mut baseline = Baseline::default();
        baseline.record(id("long"), BaselineEntry::new(Figures::default(), [long(1), long(2), long(3)]));
        let text = baseline.render();
        let entry = &baseline.tests[&id("long")];
        assert_eq!((entry.sites.len(), entry.other), (2, 997), "{text}");
        assert!(text.lines().all(|line| line.chars().count() <= MAX_LINE), "{text}");
    }

    #[test]
    fn only_the_gated_figures_are_kept_and_a_figure_not_kept_is_not_there_to_judge() {
        let figures = Figures {
            retained_bytes: 10,
            peak_bytes: 20,
            allocated_bytes: 30,
            allocations: 4,
            lost_bytes: 5,
            held_bytes: 3,
            leaked_tasks: 1,
            lingering_tasks: 0,
            unclaimed_tasks: 2,
        };
        let entry = BaselineEntry::new(figures, Vec::new());
        let kept = entry.clone().keeping(&[Figure::Retained, Figure::Lost, Figure::Peak]);
        let found: Vec<Option<u64>> = Figure::ALL.iter().map(|&figure| kept.get(figure)).collect();
        assert_eq!(found, [Some(10), Some(5), Some(3), Some(20), None, None, Some(1), Some(0), Some(2)]);
        let mut baseline = Baseline::default();
        baseline.record(id("t"), kept);
        assert!(
            baseline.render().contains(
                "{\"retained\": 10, \"lost\": 5, \"held\": 3, \"peak\": 20, \"leaked_tasks\": 1, \"unclaimed_tasks\": 2}"
            ),
            "{}",
            baseline.render()
        );
        assert_eq!(entry.figures(), figures, "a run's own entry keeps every figure");
    }

    #[test]
    fn a_baseline_of_schema_2_is_read_with_its_figures_and_marked_to_be_written_anew() {
        let earlier = r#"{"schema_version": 2, "tests": {"pkg::leaks box_leak": {"retained_bytes": 1000,
            "peak_bytes": 2000, "allocated_bytes": 3000, "allocations": 4,
            "retained_stacks": ["leaks::box_leak at tests/leaks.rs:9;alloc::boxed::Box<T>::new 1000"]},
            "pkg::leaks told": {"retained_bytes": 0, "lost_bytes": 0, "peak_bytes": 0, "allocated_bytes": 0,
            "allocations": 0, "steady_state": true, "retained_stacks": []}}}"#;
        let read = Baseline::parse(earlier).unwrap();
        assert_eq!(read.read_from, Some(2));
        let entry = &read.tests[&id("box_leak")];
        assert_eq!((entry.retained_bytes, entry.lost_bytes, entry.peak_bytes), (1000, None, Some(2000)));
        assert!(entry.sites.is_empty() && read.tests[&id("told")].steady_state);
        assert!(!read.render().contains("tests/leaks.rs"), "no stack is carried over");
    }

    #[test]
    fn a_test_written_twice_is_refused_naming_both_lines_whichever_comes_first() {
        let small = r#""pkg::leaks a": {"retained": 100, "lost": 0}"#;
        let large = r#""pkg::leaks a": {"retained": 50000, "lost": 0}"#;
        let other = r#""pkg::leaks b": {"retained": 0}"#;
        for (first, second) in [(small, large), (large, small)] {
            let text = format!(
                "{{\n  \"schema_version\": 4,\n  \"measured\": \"leak-tests\",\n  \"tests\": {{\n    {first},\n    \
                 {other},\n    {second}\n  }}\n}}\n"
            );
            let message = Baseline::parse(&text).unwrap_err().to_string();
            assert_eq!(
                message,
                "`pkg::leaks a` is written twice, at lines 5 and 7 (a merge that kept both sides' lines?): keep the \
                 one that is right"
            );
        }
        // Written twice in a schema-2 file too.
        let earlier = r#"{"schema_version": 2, "tests": {
            "pkg::leaks a": {"retained_bytes": 1, "peak_bytes": 1, "allocated_bytes": 1, "allocations": 1, "retained_stacks": []},
            "pkg::leaks a": {"retained_bytes": 2, "peak_bytes": 2, "allocated_bytes": 2, "allocations": 2, "retained_stacks": []}}}"#;
        assert!(Baseline::parse(earlier).unwrap_err().to_string().contains("at lines 2 and 3"));
    }

    #[test]
    fn an_entry_with_more_lost_than_retained_is_refused_naming_its_line() {
        let text = "{\"schema_version\": 3, \"tests\": {\n\"pkg::leaks a\": {\"retained\": 100, \"lost\": 100},\n\
                    \"pkg::leaks b\": {\"retained\": 100, \"lost\": 3000}}}";
        assert_eq!(
            Baseline::parse(text).unwrap_err().to_string(),
            "`pkg::leaks b` at line 3 has 3000 bytes lost, more than its 100 retained, among which the lost are \
             counted: correct or remove the line (`--save-baseline` then records the test anew)"
        );
        assert!(Baseline::parse(&text.replace("3000", "100")).is_ok(), "lost as large as retained is no contradiction");
    }

    #[test]
    fn a_baseline_of_schema_3_is_read_with_its_tests_not_judged_by_tasks_until_saved_again() {
        let text = "{\n  \"schema_version\": 3,\n  \"measured\": \"leak-tests\",\n  \"tests\": {\n    \
                    \"pkg::leaks t\": {\"retained\": 64, \"lost\": 0, \"held\": 0}\n  }\n}\n";
        let earlier = Baseline::parse(text).unwrap();
        assert_eq!((earlier.read_from, earlier.schema_version), (Some(3), BASELINE_SCHEMA_VERSION));
        let entry = &earlier.tests[&id("t")];
        assert_eq!((entry.get(Figure::Retained), entry.get(Figure::LeakedTasks)), (Some(64), None));
        let current = Baseline::parse(&text.replace("\": 3,", "\": 4,")).unwrap();
        assert_eq!(current.read_from, None);
        let entry = &current.tests[&id("t")];
        assert_eq!((entry.get(Figure::LeakedTasks), entry.get(Figure::UnclaimedTasks)), (Some(0), Some(0)));
    }

    #[test]
    fn a_missing_baseline_is_none_and_a_corrupt_one_an_error_with_its_position() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ying-baseline.json");
        assert_eq!(Baseline::read(&path).unwrap(), None);
        std::fs::write(&path, "{\n  \"schema_version\": 3,\n  \"tests\": {\n    \"x\": {\n").unwrap();
        let message = Baseline::read(&path).unwrap_err().to_string();
        assert!(message.contains("line 5 column 0"), "{message}");
        std::fs::write(&path, "{\n  \"tests\": {},\n  \"schema_version\": 7\n}").unwrap();
        let message = Baseline::read(&path).unwrap_err().to_string();
        assert!(message.contains("schema_version 7 at line 3 column 3 is not 4"), "{message}");
        std::fs::write(&path, "{\n  \"schema_version\": 1,\n  \"tests\": {}\n}").unwrap();
        let message = Baseline::read(&path).unwrap_err().to_string();
        assert!(message.contains("--save-baseline"), "an old baseline says what to do: {message}");
        std::fs::write(&path, "[1, 2]").unwrap();
        assert!(Baseline::read(&path).unwrap_err().to_string().contains("not a ying baseline"));
        std::fs::write(&path, "{\"schema_version\": 3, \"tests\": {\"nonsense\": {}}}").unwrap();
        let message = Baseline::read(&path).unwrap_err().to_string();
        assert!(message.contains("`nonsense` is not a test id") && message.contains("column"), "{message}");
        std::fs::write(&path, "{\"schema_version\": 2, \"tests\": {\"pkg::leaks a\": {\"retained_bytes\": 1}}}")
            .unwrap();
        let message = Baseline::read(&path).unwrap_err().to_string();
        assert!(message.contains("missing field") && message.contains("column"), "{message}");
    }
}
