//! The gate: a run's leak tests against the baseline, as a pure function of both. A leak test regresses when a
//! gated figure (retained and lost bytes always) grows past the tolerance; each test gets one verdict.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use ying_report::report::RetainedSite;
use ying_report::{BaselineEntry, ByteSize, Figure, GateVerdict, LeakReport, Measured, TestId};

pub(crate) use ying_report::Reruns;

/// The default relative tolerance: retained memory may grow by 10% before the gate fails.
pub(crate) const DEFAULT_MAX_GROWTH: Growth = Growth(0.10);
/// The default absolute tolerance: growth of up to 1 KiB never fails the gate.
pub(crate) const DEFAULT_MIN_GROWTH: ByteSize = ByteSize::new(1024);
/// The most lost bytes may grow by without regressing (less when the absolute tolerance is less): memory nothing
/// reaches any more is a leak whatever else the test keeps, so it has no relative tolerance.
pub(crate) const LOST_FLOOR: ByteSize = ByteSize::new(256);
/// The default most held bytes (what statics and thread-locals hold) may grow by without regressing (less when the
/// absolute tolerance is less): a static cache that keeps one more entry is as much a leak as a forgotten one, and
/// a large static floor's 10% would hide it.
pub(crate) const DEFAULT_HELD_GROWTH: ByteSize = ByteSize::new(512);
/// The default number of reruns a regression must survive: two, so that a test regresses only when three runs of
/// it in a row cross the tolerance.
pub(crate) const DEFAULT_RERUNS: u32 = 2;

/// A relative growth: `10%` (or the fraction `0.1`).
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub(crate) struct Growth(f64);

impl Growth {
    /// The growth as a fraction (0.1 for 10%).
    pub(crate) fn fraction(self) -> f64 {
        self.0
    }
}

impl FromStr for Growth {
    type Err = String;

    /// Parses `10%` (or `0.1`).
    fn from_str(text: &str) -> Result<Self, String> {
        let trimmed = text.trim();
        let value = match trimmed.strip_suffix('%') {
            Some(percent) => percent.trim().parse::<f64>().map(|p| p / 100.0),
            None => trimmed.parse::<f64>(),
        }
        .map_err(|_| format!("`{text}` is not a percentage; write e.g. 10%"))?;
        if value.is_finite() && value >= 0.0 {
            Ok(Self(value))
        } else {
            Err(format!("`{text}` is not a percentage of 0 or more"))
        }
    }
}

impl fmt::Display for Growth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.0}%", self.0 * 100.0)
    }
}

/// How much a figure may grow: the larger of `relative` of the baseline and `absolute` bytes; lost bytes, only
/// [`LOST_FLOOR`] (or `absolute`, when it is smaller); held bytes, only `held` (or `absolute`, when it is smaller).
///
/// Retained bytes are exact, but they legitimately move a little when a dependency or the standard library changes
/// its allocation sizes (a hash map's capacity, a buffer's growth policy). 10% or 1 KiB, whichever is larger, lets
/// such churn through and still catches a leak, which grows with what the test does. Churn of that kind stays
/// reachable, though: a block nothing points to any more is lost whatever the size of the statics beside it, so a
/// 512 B `mem::forget` next to a 24 KiB static floor (whose 10% would hide it) regresses on its own figure.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Tolerance {
    /// Growth relative to the baseline.
    pub relative: Growth,
    /// Growth in bytes that never fails (for byte figures).
    pub absolute: ByteSize,
    /// Growth of held bytes that never fails.
    pub held: ByteSize,
}

impl Default for Tolerance {
    fn default() -> Self {
        Self { relative: DEFAULT_MAX_GROWTH, absolute: DEFAULT_MIN_GROWTH, held: DEFAULT_HELD_GROWTH }
    }
}

impl Tolerance {
    /// The most `figure` may grow to from `baseline` without regressing: a count of allocations has only the
    /// relative tolerance (the absolute one is bytes); lost bytes only the absolute one, at most [`LOST_FLOOR`]; a
    /// count of tasks none: one more task left behind is one more than the baseline knows of.
    pub(crate) fn limit(&self, figure: Figure, baseline: u64) -> u64 {
        match figure {
            Figure::Lost => return baseline.saturating_add(self.lost_floor()),
            Figure::Held => return baseline.saturating_add(self.held_floor()),
            figure if figure.is_tasks() => return baseline,
            _ => {}
        }
        let relative = (baseline as f64 * self.relative.fraction()).floor() as u64;
        let absolute = if figure.is_bytes() { self.absolute.bytes() } else { 0 };
        baseline.saturating_add(relative.max(absolute))
    }

    /// The tolerance as summary.json states it.
    pub(crate) fn stated(&self) -> ying_report::GateTolerance {
        ying_report::GateTolerance {
            max_growth_percent: self.relative.fraction() * 100.0,
            min_growth_bytes: self.absolute.bytes(),
            lost_growth_bytes: self.lost_floor(),
            held_growth_bytes: self.held_floor(),
        }
    }

    /// How many bytes held bytes may grow by: `held`, or the absolute tolerance when it is smaller.
    pub(crate) fn held_floor(&self) -> u64 {
        self.absolute.bytes().min(self.held.bytes())
    }

    /// How many bytes lost bytes may grow by: [`LOST_FLOOR`], or the absolute tolerance when it is smaller.
    pub(crate) fn lost_floor(&self) -> u64 {
        self.absolute.bytes().min(LOST_FLOOR.bytes())
    }
}

/// How the gate judges: the tolerance, the figures gated (retained and lost bytes always, first), and how many
/// reruns a regression must survive.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Gating {
    /// How much a figure may grow.
    pub tolerance: Tolerance,
    /// The gated figures.
    figures: Vec<Figure>,
    /// Runs again of a test that crossed the tolerance; it regresses unless one of them measures it within the
    /// tolerance (one that fails measures nothing).
    pub reruns: u32,
}

impl Gating {
    /// The gated figures: retained and lost bytes, then those asked for.
    pub(crate) fn figures(&self) -> &[Figure] {
        &self.figures
    }

    /// Gating of retained, lost and held bytes, the counts of tasks by kind, and `also`, with `tolerance`.
    pub(crate) fn new(tolerance: Tolerance, also: &[Figure]) -> Self {
        let mut figures = vec![Figure::Retained, Figure::Lost, Figure::Held];
        figures.extend(Figure::TASKS);
        figures.extend(also.iter().copied());
        figures.sort_unstable();
        figures.dedup();
        Self { tolerance, figures, reruns: DEFAULT_RERUNS }
    }
}

/// One figure of one leak test, in both the baseline and this run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Row {
    /// Which figure.
    pub figure: Figure,
    /// The figure in the baseline.
    pub baseline: u64,
    /// The figure now.
    pub now: u64,
}

impl Row {
    /// The change, signed.
    pub(crate) fn delta(&self) -> i128 {
        i128::from(self.now) - i128::from(self.baseline)
    }

    /// The change relative to the baseline, `+200.0%`; `None` from a baseline of 0.
    pub(crate) fn percent(&self) -> Option<String> {
        (self.baseline != 0).then(|| format!("{:+.1}%", self.delta() as f64 * 100.0 / self.baseline as f64))
    }

    /// The change in bytes and relative to the baseline: `+2000, +200.0%` (`+2000` from a baseline of 0).
    pub(crate) fn growth(&self) -> String {
        let delta = format!("{:+}", self.delta());
        match self.percent() {
            Some(percent) => format!("{delta}, {percent}"),
            None => delta,
        }
    }

    /// The row in words, as every output shows it: `retained bytes grew from 1000 to 3000 (+2000, +200.0%), past
    /// the tolerance`.
    pub(crate) fn describe(&self) -> String {
        let (moved, past) = if self.now >= self.baseline { ("grew", "past") } else { ("shrank", "beyond") };
        let figure = self.figure.name();
        format!("{figure} {moved} from {} to {} ({}), {past} {}", self.baseline, self.now, self.growth(), self.rule())
    }

    /// The rule its figure is judged by: `the lost floor` (lost bytes grow by a few hundred bytes at most, whatever
    /// else the test keeps), `the held floor` (what statics and thread-locals hold, likewise), `the tolerance`
    /// (relative, or absolute where that is larger).
    pub(crate) fn rule(&self) -> &'static str {
        match self.figure {
            Figure::Lost => "the lost floor",
            Figure::Held => "the held floor",
            figure if figure.is_tasks() => "the baseline's count",
            _ => "the tolerance",
        }
    }
}

/// The gate's judgement of one leak test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TestGate {
    /// The verdict.
    pub verdict: GateVerdict,
    /// The figures that grew past the tolerance (regressed, unstable) or, for retained and lost bytes, shrank
    /// (improved).
    pub rows: Vec<Row>,
    /// The rows are of a steady state (the smallest figures of one measured run), not of totals.
    pub steady_state: bool,
    /// For a test that crossed the tolerance and was run again: what its reruns showed.
    pub reruns: Option<Reruns>,
}

impl TestGate {
    /// A judgement with no reruns (yet).
    pub(crate) fn new(verdict: GateVerdict, rows: Vec<Row>, steady_state: bool) -> Self {
        Self { verdict, rows, steady_state, reruns: None }
    }

    /// Settles the verdict of a test that crossed the tolerance with what its reruns showed.
    pub(crate) fn settle(&mut self, reruns: Reruns) {
        self.verdict = reruns.verdict();
        self.reruns = Some(reruns);
    }

    /// The rows of the figures that regressed: none unless the verdict is that the test regressed (an unstable
    /// test's rows crossed the tolerance, but not in every run).
    pub(crate) fn regressions(&self) -> impl Iterator<Item = &Row> {
        let regressed = self.verdict == GateVerdict::Regressed;
        self.rows.iter().filter(move |row| regressed && row.now > row.baseline)
    }
}

/// The comparison of a run with the baseline.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Comparison {
    /// Every leak test of the run, judged.
    pub tests: BTreeMap<TestId, TestGate>,
    /// Baseline tests the run should have run but did not report (only known when no filter narrowed the run).
    pub missing: Vec<TestId>,
    /// The baseline was saved with `--measure all` and this run measured the leak tests only: its other tests
    /// could not be compared, and are not listed as missing. How many of its tests the run did not measure (0 when
    /// a filter narrowed the run).
    pub measured_all_only: Option<usize>,
}

impl Comparison {
    /// Every regressed figure, by test.
    pub(crate) fn regressions(&self) -> impl Iterator<Item = (&TestId, &Row)> {
        self.tests.iter().flat_map(|(id, gate)| gate.regressions().map(move |row| (id, row)))
    }

    /// The tests with `verdict`.
    pub(crate) fn with(&self, verdict: GateVerdict) -> impl Iterator<Item = &TestId> {
        self.tests.iter().filter(move |(_, gate)| gate.verdict == verdict).map(|(id, _)| id)
    }

    /// Whether the gate fails: a regression, or with `check`, a new or missing test, or a baseline measured in
    /// a way this run did not.
    pub(crate) fn fails(&self, check: bool) -> bool {
        self.with(GateVerdict::Regressed).next().is_some()
            || (check
                && (self.with(GateVerdict::New).next().is_some()
                    || !self.missing.is_empty()
                    || self.measured_all_only.is_some()))
    }

    /// Takes into account how the baseline's tests and this run's were measured: when the baseline was saved with
    /// `--measure all` and the run measured the leak tests only, the tests it did not measure are one fact (the
    /// baseline's measure), not each a missing test.
    pub(crate) fn measured(&mut self, baseline: Measured, run: Measured) {
        if baseline == Measured::All && run == Measured::LeakTests {
            self.measured_all_only = Some(std::mem::take(&mut self.missing).len());
        }
    }
}

/// What the gate compares of a leak test's `report`, and the baseline keeps: its figures (or steady state) and its
/// retained memory's sites, keyed by the frame rules ([`ying_frames::retained_sites`]).
pub(crate) fn entry(report: &LeakReport) -> BaselineEntry {
    BaselineEntry::of(report, ying_frames::retained_sites(report))
}

/// Whether saving a test leaves its `recorded` baseline entry as it is: its `verdict` keeps it
/// ([`GateVerdict::keeps_baseline_entry`]: within the tolerance, or unstable), so that an unchanged run rewrites the
/// baseline byte for byte, and the entry keeps every `gated` figure.
pub(crate) fn keeps_recorded(verdict: Option<GateVerdict>, recorded: Option<&BaselineEntry>, gated: &[Figure]) -> bool {
    verdict.is_some_and(GateVerdict::keeps_baseline_entry)
        && recorded.is_some_and(|entry| {
            // A steady state's entry keeps no held bytes (`BaselineEntry::of`): none is missing there.
            let kept = |figure: Figure| entry.get(figure).is_some() || (figure == Figure::Held && entry.steady_state);
            gated.iter().all(|&figure| kept(figure))
        })
}

/// The sites of `report` its retained memory grew at against `before`: those of the keys
/// ([`ying_frames::site_key`]) that hold more bytes now than the baseline recorded for them (a key it does not name
/// held nothing), the most grown key first, each key's sites by their bytes. Of a grown key's sites, those the
/// baseline's bytes account for are left out, the largest first: a new leak in a function that already retained
/// is named alone. Excused sites are never among them.
pub(crate) fn grown_sites<'a>(before: &BaselineEntry, report: &'a LeakReport) -> Vec<&'a RetainedSite> {
    let was = before.site_bytes();
    let mut by_key: BTreeMap<String, Vec<&RetainedSite>> = BTreeMap::new();
    for site in report.retained_sites.iter().filter(|site| !site.excused && site.bytes > 0) {
        by_key.entry(ying_frames::site_key(&site.frames)).or_default().push(site);
    }
    let mut grown: Vec<(u64, Vec<&RetainedSite>)> = by_key
        .into_iter()
        .filter_map(|(key, mut sites)| {
            let recorded = was.get(key.as_str()).copied().unwrap_or_default();
            let growth = sites.iter().map(|site| site.bytes).sum::<u64>().checked_sub(recorded)?;
            if growth == 0 {
                return None;
            }
            sites.sort_by_key(|site| std::cmp::Reverse(site.bytes));
            let mut unaccounted = recorded;
            sites.retain(|site| {
                let accounted = site.bytes <= unaccounted;
                if accounted {
                    unaccounted -= site.bytes;
                }
                !accounted
            });
            Some((growth, sites))
        })
        .collect();
    grown.sort_by(|(a, a_sites), (b, b_sites)| {
        b.cmp(a).then_with(|| b_sites.first().map(|site| site.bytes).cmp(&a_sites.first().map(|site| site.bytes)))
    });
    grown.into_iter().flat_map(|(_, sites)| sites).collect()
}

/// Judges `current` (this run's leak tests, as the baseline would record them) against `baseline`. `complete`: the
/// run covered every test, so baseline entries without a counterpart are missing rather than filtered out.
pub(crate) fn compare(
    baseline: &BTreeMap<TestId, BaselineEntry>,
    current: &BTreeMap<TestId, BaselineEntry>,
    gating: &Gating,
    complete: bool,
) -> Comparison {
    let mut comparison = Comparison::default();
    for (id, now) in current {
        let gate = match baseline.get(id) {
            None => TestGate::new(GateVerdict::New, Vec::new(), now.steady_state),
            Some(entry) => judge(entry, now, gating),
        };
        comparison.tests.insert(id.clone(), gate);
    }
    if complete {
        comparison.missing = baseline.keys().filter(|id| !current.contains_key(*id)).cloned().collect();
    }
    comparison
}

/// The verdict on one test as it is now (`now`) against its baseline entry (`before`). Figures measured another
/// way (totals against a steady state) are not compared: the test is new to the baseline.
pub(crate) fn judge(before: &BaselineEntry, now: &BaselineEntry, gating: &Gating) -> TestGate {
    if before.steady_state != now.steady_state {
        return TestGate::new(GateVerdict::New, Vec::new(), now.steady_state);
    }
    let steady_state = now.steady_state;
    // A figure the entry does not keep is not judged: lost bytes in an entry written before reports told them,
    // another figure gated only since the baseline was saved.
    let judged = |figure: &Figure| before.get(*figure).is_some();
    let (before, now) = (before.figures(), now.figures());
    let row = |figure| Row { figure, baseline: before.get(figure), now: now.get(figure) };
    let regressed: Vec<Row> = gating
        .figures
        .iter()
        .filter(|figure| judged(figure))
        .map(|&figure| row(figure))
        .filter(|row| row.now > gating.tolerance.limit(row.figure, row.baseline))
        .collect();
    if !regressed.is_empty() {
        return TestGate::new(GateVerdict::Regressed, regressed, steady_state);
    }
    // Shrinking is judged as growth is, from now back to the baseline: within the tolerance, it is churn. A leak
    // mended improves the test even when the statics beside it hide it in the retained bytes, so that saving
    // records it gone and its return regresses.
    let improved: Vec<Row> = [Figure::Retained, Figure::Lost, Figure::Held]
        .into_iter()
        .chain(Figure::TASKS)
        .filter(judged)
        .map(row)
        .filter(|row| row.baseline > gating.tolerance.limit(row.figure, row.now))
        .collect();
    if improved.is_empty() {
        TestGate::new(GateVerdict::Unchanged, Vec::new(), steady_state)
    } else {
        TestGate::new(GateVerdict::Improved, improved, steady_state)
    }
}

#[cfg(test)]
mod tests {
    use super::{Gating, Growth, Tolerance, compare};
    use std::collections::BTreeMap;
    use ying_report::{BaselineEntry, ByteSize, Figure, Figures, GateVerdict, TargetKind, TestId};

    fn id(name: &str) -> TestId {
        TestId::new("p", TargetKind::Test, "leaks", name)
    }

    fn figures(retained_bytes: u64) -> Figures {
        Figures { retained_bytes, ..Figures::default() }
    }

    fn baseline(entries: &[(&str, u64)]) -> BTreeMap<TestId, BaselineEntry> {
        entries.iter().map(|&(name, retained)| (id(name), BaselineEntry::new(figures(retained), Vec::new()))).collect()
    }

    fn current(entries: &[(&str, u64)]) -> BTreeMap<TestId, BaselineEntry> {
        baseline(entries)
    }

    #[test]
    fn the_tolerance_is_the_larger_of_its_two_parts() {
        let tolerance = Tolerance::default();
        assert_eq!(tolerance.limit(Figure::Retained, 0), 1024);
        assert_eq!(tolerance.limit(Figure::Retained, 100_000), 110_000);
        assert_eq!(tolerance.limit(Figure::Allocations, 50), 55);
        let strict = Tolerance { relative: Growth(0.0), absolute: ByteSize::new(0), ..Tolerance::default() };
        assert_eq!(strict.limit(Figure::Retained, 500), 500);
    }

    #[test]
    fn every_test_gets_one_verdict() {
        let before = baseline(&[("a", 1000), ("b", 50_000), ("c", 10_000), ("d", 10_000), ("gone", 1)]);
        let now = current(&[("a", 1900), ("b", 60_000), ("c", 8_000), ("d", 9_000), ("fresh", 5)]);
        let comparison = compare(&before, &now, &Gating::new(Tolerance::default(), &[]), true);
        let verdict = |name: &str| comparison.tests[&id(name)].verdict;
        assert_eq!(
            [verdict("a"), verdict("b"), verdict("c"), verdict("d"), verdict("fresh")],
            [
                GateVerdict::Unchanged,
                GateVerdict::Regressed,
                GateVerdict::Improved,
                // 10% less, within what 9,000 B may grow by: churn, as the same growth would be.
                GateVerdict::Unchanged,
                GateVerdict::New
            ]
        );
        assert_eq!(comparison.missing, [id("gone")]);
        assert!(comparison.fails(false));
        let filtered = compare(&before, &current(&[("a", 1000)]), &Gating::new(Tolerance::default(), &[]), false);
        assert!(filtered.missing.is_empty() && !filtered.fails(true));
        let new_only = compare(&before, &current(&[("fresh", 1)]), &Gating::new(Tolerance::default(), &[]), false);
        assert!(!new_only.fails(false) && new_only.fails(true), "--check fails on a new test");
    }

    #[test]
    fn other_figures_are_gated_only_when_asked() {
        let entry = |retained_bytes, peak_bytes, allocations| Figures {
            retained_bytes,
            peak_bytes,
            allocations,
            ..Figures::default()
        };
        let before: BTreeMap<TestId, BaselineEntry> =
            [(id("t"), BaselineEntry::new(entry(100, 10_000, 50), Vec::new()))].into();
        let now: BTreeMap<TestId, BaselineEntry> =
            [(id("t"), BaselineEntry::new(entry(100, 90_000, 56), Vec::new()))].into();
        let plain = compare(&before, &now, &Gating::new(Tolerance::default(), &[]), true);
        assert_eq!(plain.tests[&id("t")].verdict, GateVerdict::Unchanged);
        let gated =
            compare(&before, &now, &Gating::new(Tolerance::default(), &[Figure::Peak, Figure::Allocations]), true);
        let figures: Vec<_> = gated.regressions().map(|(_, row)| row.figure).collect();
        // Allocations grew 12%, past the 10% tolerance (the 1 KiB floor is for bytes only).
        assert_eq!(figures, [Figure::Peak, Figure::Allocations]);
    }

    #[test]
    fn a_steady_state_is_compared_only_with_a_steady_state() {
        let steady = |retained| {
            let mut entry = BaselineEntry::new(figures(retained), Vec::new());
            entry.steady_state = true;
            entry
        };
        let before: BTreeMap<TestId, BaselineEntry> =
            [(id("totals"), BaselineEntry::new(figures(50_000), Vec::new())), (id("steady"), steady(0))].into();
        let now: BTreeMap<TestId, BaselineEntry> = [(id("totals"), steady(0)), (id("steady"), steady(4096))].into();
        let comparison = compare(&before, &now, &Gating::new(Tolerance::default(), &[]), true);
        assert_eq!(comparison.tests[&id("totals")].verdict, GateVerdict::New, "not an improvement of 50,000 B");
        assert_eq!(comparison.tests[&id("steady")].verdict, GateVerdict::Regressed);
    }

    /// A test's entry with `retained` bytes, `lost` of them lost.
    fn with_lost(retained_bytes: u64, lost_bytes: u64) -> BaselineEntry {
        BaselineEntry::new(Figures { retained_bytes, lost_bytes, ..Figures::default() }, Vec::new())
    }

    /// The judgement of one test from `before` to `now`, with the default tolerance.
    fn judged(before: BaselineEntry, now: BaselineEntry) -> super::TestGate {
        super::judge(&before, &now, &Gating::new(Tolerance::default(), &[]))
    }

    #[test]
    fn lost_bytes_regress_past_an_absolute_floor_whatever_the_statics_beside_them() {
        // A 512 B `mem::forget` beside a 24 KiB static floor: 2% more retained, well within 10%.
        let forgotten = judged(with_lost(24_576, 0), with_lost(25_088, 512));
        assert_eq!(forgotten.verdict, GateVerdict::Regressed);
        assert_eq!(forgotten.rows, [super::Row { figure: Figure::Lost, baseline: 0, now: 512 }]);
        // Retained memory that grows by 2 KiB, within 10% of 24 KiB, none of it lost (nor held: a test not scanned).
        assert_eq!(judged(with_lost(24_576, 0), with_lost(26_624, 0)).verdict, GateVerdict::Unchanged);
        // Lost bytes that grow by less than the floor: churn of a conservative scan, not a leak.
        assert_eq!(judged(with_lost(24_576, 0), with_lost(24_776, 200)).verdict, GateVerdict::Unchanged);
        assert_eq!(judged(with_lost(24_576, 300), with_lost(24_576, 556)).verdict, GateVerdict::Unchanged);
        assert_eq!(judged(with_lost(24_576, 300), with_lost(24_576, 557)).verdict, GateVerdict::Regressed);
        // Retained growth past the tolerance still regresses on its own figure, beside the lost one.
        let both = judged(with_lost(1000, 0), with_lost(9000, 8000));
        let figures: Vec<Figure> = both.rows.iter().map(|row| row.figure).collect();
        assert_eq!((both.verdict, figures), (GateVerdict::Regressed, vec![Figure::Retained, Figure::Lost]));
    }

    #[test]
    fn an_entry_written_before_lost_bytes_were_told_is_not_judged_by_them() {
        let mut earlier = with_lost(24_576, 0);
        earlier.lost_bytes = None;
        assert_eq!(judged(earlier.clone(), with_lost(25_088, 512)).verdict, GateVerdict::Unchanged);
        assert_eq!(judged(earlier, with_lost(40_000, 512)).verdict, GateVerdict::Regressed, "retained bytes still are");
    }

    #[test]
    fn the_lost_floor_is_never_more_than_the_absolute_tolerance_and_a_mended_leak_is_an_improvement() {
        let strict = Tolerance { relative: Growth(0.5), absolute: ByteSize::new(64), ..Tolerance::default() };
        assert_eq!(strict.limit(Figure::Lost, 1000), 1064, "no relative tolerance for lost bytes");
        assert_eq!(Tolerance::default().limit(Figure::Lost, 1000), 1256);
        // The leak mended: 512 B fewer beside the static floor, within its tolerance, yet past the lost floor.
        let mended = judged(with_lost(25_088, 512), with_lost(24_576, 0));
        assert_eq!(mended.verdict, GateVerdict::Improved);
        assert_eq!(mended.rows, [super::Row { figure: Figure::Lost, baseline: 512, now: 0 }]);
    }

    /// An entry of 1 KiB retained, with (leaked, lingering, unclaimed) tasks.
    fn with_tasks((leaked_tasks, lingering_tasks, unclaimed_tasks): (u64, u64, u64)) -> BaselineEntry {
        let figures =
            Figures { retained_bytes: 1024, leaked_tasks, lingering_tasks, unclaimed_tasks, ..Figures::default() };
        BaselineEntry::new(figures, Vec::new())
    }

    #[test]
    fn one_more_task_of_a_kind_regresses_and_one_fewer_improves_whatever_the_tolerance() {
        let row = |figure, baseline, now| super::Row { figure, baseline, now };
        let leaked = judged(with_tasks((0, 0, 0)), with_tasks((1, 0, 0)));
        assert_eq!((leaked.verdict, leaked.rows), (GateVerdict::Regressed, vec![row(Figure::LeakedTasks, 0, 1)]));
        // Ten percent of 20 lingering tasks would be two: a count of tasks has no tolerance.
        let lingering = judged(with_tasks((0, 20, 0)), with_tasks((0, 21, 0)));
        assert_eq!(lingering.rows, [row(Figure::LingeringTasks, 20, 21)]);
        assert_eq!(
            lingering.rows[0].describe(),
            "lingering tasks grew from 20 to 21 (+1, +5.0%), past the baseline's count"
        );
        assert_eq!(judged(with_tasks((0, 0, 2)), with_tasks((0, 0, 3))).verdict, GateVerdict::Regressed);
        assert_eq!(judged(with_tasks((1, 2, 3)), with_tasks((1, 2, 3))).verdict, GateVerdict::Unchanged);
        let mended = judged(with_tasks((1, 0, 0)), with_tasks((0, 0, 0)));
        assert_eq!((mended.verdict, mended.rows), (GateVerdict::Improved, vec![row(Figure::LeakedTasks, 1, 0)]));
        // A task that moved from one kind to another is a regression of the kind it moved to.
        let moved = judged(with_tasks((0, 1, 0)), with_tasks((1, 0, 0)));
        assert_eq!((moved.verdict, moved.rows), (GateVerdict::Regressed, vec![row(Figure::LeakedTasks, 0, 1)]));
    }

    /// An entry of `retained_bytes`, `held_bytes` of them held by statics and thread-locals.
    fn with_held(retained_bytes: u64, held_bytes: u64) -> BaselineEntry {
        BaselineEntry::new(Figures { retained_bytes, held_bytes, ..Figures::default() }, Vec::new())
    }

    #[test]
    fn held_bytes_regress_past_a_floor_of_their_own_and_each_row_names_its_rule() {
        // A static cache that keeps one more entry of 600 B: within the tolerance of the retained bytes (1 KiB).
        let cached = judged(with_held(728, 728), with_held(1328, 1328));
        assert_eq!(cached.verdict, GateVerdict::Regressed);
        assert_eq!(cached.rows, [super::Row { figure: Figure::Held, baseline: 728, now: 1328 }]);
        assert_eq!(cached.rows[0].describe(), "held bytes grew from 728 to 1328 (+600, +82.4%), past the held floor");
        // Within the floor: a hash table's capacity that moved a little.
        assert_eq!(judged(with_held(24_576, 24_576), with_held(25_088, 25_088)).verdict, GateVerdict::Unchanged);
        // An entry written before the baseline kept held bytes is not judged by them.
        let mut earlier = with_held(728, 728);
        earlier.held_bytes = None;
        assert_eq!(judged(earlier, with_held(1328, 1328)).verdict, GateVerdict::Unchanged);
        // Configurable, and never more than the absolute tolerance.
        let lenient = Tolerance { held: ByteSize::new(4096), ..Tolerance::default() };
        assert_eq!(lenient.limit(Figure::Held, 728), 728 + 1024);
        let gating = Gating::new(Tolerance { held: ByteSize::new(700), ..Tolerance::default() }, &[]);
        assert_eq!(super::judge(&with_held(728, 728), &with_held(1328, 1328), &gating).verdict, GateVerdict::Unchanged);
        let rules: Vec<&str> = [Figure::Retained, Figure::Lost, Figure::Held, Figure::Peak]
            .into_iter()
            .map(|figure| super::Row { figure, baseline: 0, now: 1 }.rule())
            .collect();
        assert_eq!(rules, ["the tolerance", "the lost floor", "the held floor", "the tolerance"]);
    }

    /// A report whose retained sites are `sites`: bytes, the function that allocated them, and whether excused.
    fn report(sites: &[(u64, &str, bool)]) -> ying_report::LeakReport {
        use ying_report::report::{Attribution, Budgets, RetainedSite, TestIdentity};
        let identity = TestIdentity::new("p", None, "leaks", "t", "tests/leaks.rs", 3);
        let mut report = ying_report::LeakReport::new(identity, Attribution::Process, Budgets::default());
        report.retained_sites = sites
            .iter()
            .map(|&(bytes, function, excused)| {
                RetainedSite::new(bytes, 1, excused, vec![ying_report::Frame::new(function, None, None)])
            })
            .collect();
        report
    }

    fn functions(sites: &[&ying_report::report::RetainedSite]) -> Vec<String> {
        sites.iter().map(|site| site.frames[0].function.clone()).collect()
    }

    #[test]
    fn grown_sites_are_those_of_the_keys_that_hold_more_than_the_baseline_recorded_the_most_grown_first() {
        let before =
            report(&[(24_576, "app::fill_cache", false), (100, "app::shrinks", false), (64, "app::twice", false)]);
        let before = super::entry(&before);
        let now = report(&[
            (24_600, "app::fill_cache", false),
            (512, "app::forgotten", false),
            (50, "app::shrinks", false),
            (40, "app::twice", false),
            (40, "app::twice", false),
            (4096, "std::io::stdio::_print", true),
        ]);
        // The forgotten buffer is new (+512); the cache grew by 24 B; two sites of one key grew together (+16), and
        // the baseline's 64 B account for one of them.
        let grown = super::grown_sites(&before, &now);
        assert_eq!(functions(&grown), ["app::forgotten", "app::fill_cache", "app::twice"]);
        // A baseline without sites for the test: every site is new, the largest key first, excused ones left out.
        let bare = BaselineEntry::new(figures(24_576), Vec::new());
        let largest = super::grown_sites(&bare, &now);
        assert_eq!(
            functions(&largest),
            ["app::fill_cache", "app::forgotten", "app::twice", "app::twice", "app::shrinks"]
        );
    }

    #[test]
    fn a_new_leak_in_a_function_that_already_retained_is_named_alone_whatever_its_line() {
        use ying_report::Frame;
        use ying_report::report::RetainedSite;
        let at = |line| {
            vec![
                Frame::new("alloc::vec::from_elem", Some("/rustc/0/library/alloc/src/vec/mod.rs".into()), Some(3000)),
                Frame::new("plain::caches", Some("tests/plain.rs".into()), Some(line)),
            ]
        };
        let mut before = report(&[]);
        before.retained_sites = vec![RetainedSite::new(4000, 1, false, at(38))];
        let before = super::entry(&before);
        assert_eq!(before.sites, [("plain::caches".to_owned(), 4000)]);
        // Lines moved down by three; a 512 B leak was added below the 4000 B one.
        let mut now = report(&[]);
        now.retained_sites = vec![RetainedSite::new(4000, 1, false, at(41)), RetainedSite::new(512, 1, false, at(42))];
        let grown = super::grown_sites(&before, &now);
        let lines: Vec<Option<u32>> = grown.iter().map(|site| site.frames[1].line).collect();
        assert_eq!(lines, [Some(42)]);
        // The one site grew: it is named.
        now.retained_sites = vec![RetainedSite::new(4512, 1, false, at(41))];
        assert_eq!(super::grown_sites(&before, &now).len(), 1);
        now.retained_sites[0].bytes = 4000;
        assert!(super::grown_sites(&before, &now).is_empty(), "moved, not grown");
    }

    #[test]
    fn growth_reads_percentages_and_fractions() {
        assert_eq!("10%".parse::<Growth>(), Ok(Growth(0.1)));
        assert_eq!("0.25".parse::<Growth>(), Ok(Growth(0.25)));
        assert!("lots".parse::<Growth>().is_err() && "-5%".parse::<Growth>().is_err());
        assert_eq!(Growth(0.1).to_string(), "10%");
    }
}
