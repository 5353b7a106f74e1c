//! The gate: this run's leak tests against the baseline. A leak test regresses when its retained bytes grow past
//! the tolerance; the comparison is shown as a table and decides the exit code.

use crate::baseline::{Baseline, BaselineEntry};
use crate::error::{Error, Result};
use crate::render;
use crate::summary::{Summary, SummaryTest};
use std::collections::BTreeMap;
use std::path::Path;

/// The default relative tolerance: retained memory may grow by 10% before the gate fails.
pub const DEFAULT_MAX_GROWTH: f64 = 0.10;
/// The default absolute tolerance: growth of up to 1 KiB never fails the gate.
pub const DEFAULT_MIN_GROWTH: u64 = 1024;

/// How much retained memory may grow: the larger of `relative` of the baseline and `absolute` bytes.
///
/// Retained bytes are exact, but they legitimately move a little when a dependency or the standard library changes
/// its allocation sizes (a hash map's capacity, a buffer's growth policy). 10% or 1 KiB, whichever is larger, lets
/// such churn through and still catches a leak, which grows with what the test does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    /// Fraction of the baseline (0.1 for 10%).
    pub relative: f64,
    /// Bytes.
    pub absolute: u64,
}

impl Default for Tolerance {
    fn default() -> Self {
        Self { relative: DEFAULT_MAX_GROWTH, absolute: DEFAULT_MIN_GROWTH }
    }
}

impl Tolerance {
    /// The most `baseline` retained bytes may grow to without regressing.
    pub fn limit(&self, baseline: u64) -> u64 {
        let relative = (baseline as f64 * self.relative).floor() as u64;
        baseline.saturating_add(relative.max(self.absolute))
    }

    /// The limit for `figure`: a count of allocations has only the relative tolerance (the absolute one is bytes).
    pub fn limit_of(&self, figure: Figure, baseline: u64) -> u64 {
        match figure {
            Figure::Allocations => Tolerance { absolute: 0, ..*self }.limit(baseline),
            _ => self.limit(baseline),
        }
    }
}

/// Parses `10%` (or `0.1`) into a fraction.
pub fn parse_percent(text: &str) -> std::result::Result<f64, String> {
    let trimmed = text.trim();
    let value = match trimmed.strip_suffix('%') {
        Some(percent) => percent.trim().parse::<f64>().map(|p| p / 100.0),
        None => trimmed.parse::<f64>(),
    }
    .map_err(|_| format!("`{text}` is not a percentage; write e.g. 10%"))?;
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(format!("`{text}` is not a percentage of 0 or more"))
    }
}

/// Parses a size such as `1 KiB` or `512` (bytes).
pub fn parse_size(text: &str) -> std::result::Result<u64, String> {
    let trimmed = text.trim();
    let split = trimmed.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let value: f64 = number.parse().map_err(|_| format!("`{text}` is not a size; write e.g. 1 KiB"))?;
    let unit = unit.trim().to_ascii_lowercase();
    let multiplier: f64 = match unit.as_str() {
        "" | "b" => 1.0,
        "kb" => 1e3,
        "kib" => 1024.0,
        "mb" => 1e6,
        "mib" => 1024.0 * 1024.0,
        "gb" => 1e9,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(format!("unknown unit in `{text}`; use B, KB, KiB, MB, MiB, GB or GiB")),
    };
    Ok((value * multiplier).round() as u64)
}

/// A figure the gate can compare. Retained bytes are always gated; the others on request (`--gate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Figure {
    /// Bytes the test left allocated.
    Retained,
    /// Bytes the test held at once.
    Peak,
    /// Bytes the test allocated.
    Allocated,
    /// Allocations the test made.
    Allocations,
}

impl Figure {
    /// The figure in a baseline entry.
    pub fn of(self, entry: &BaselineEntry) -> u64 {
        match self {
            Self::Retained => entry.retained_bytes,
            Self::Peak => entry.peak_bytes,
            Self::Allocated => entry.allocated_bytes,
            Self::Allocations => entry.allocations,
        }
    }

    /// Its name in tables and messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::Retained => "retained bytes",
            Self::Peak => "peak bytes",
            Self::Allocated => "allocated bytes",
            Self::Allocations => "allocations",
        }
    }
}

/// One figure of one leak test, in both the baseline and this run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// `package::binary test`.
    pub id: String,
    /// Which figure.
    pub figure: Figure,
    /// The figure in the baseline.
    pub baseline: u64,
    /// The figure now.
    pub now: u64,
}

/// The comparison of a run with the baseline.
#[derive(Debug, Default)]
pub struct Comparison {
    /// Retained memory grew past the tolerance.
    pub regressions: Vec<Row>,
    /// Retained memory shrank.
    pub improvements: Vec<Row>,
    /// Leak tests of this run not in the baseline.
    pub new_tests: Vec<String>,
    /// Baseline tests this run should have run but did not report (only known when no filter narrowed the run).
    pub missing: Vec<String>,
}

impl Comparison {
    /// Whether the gate fails: a regression, or with `check`, a new or missing test.
    pub fn fails(&self, check: bool) -> bool {
        !self.regressions.is_empty() || (check && !(self.new_tests.is_empty() && self.missing.is_empty()))
    }
}

/// Compares `current` (this run's entries) with `baseline` on retained bytes and the `also` figures. `complete`:
/// the run covered every test, so baseline entries without a counterpart are missing rather than filtered out.
pub fn compare(
    baseline: &Baseline,
    current: &BTreeMap<String, BaselineEntry>,
    tolerance: Tolerance,
    also: &[Figure],
    complete: bool,
) -> Comparison {
    let mut figures = vec![Figure::Retained];
    figures.extend(also.iter().copied().filter(|figure| *figure != Figure::Retained));
    figures.sort_unstable();
    figures.dedup();
    let mut comparison = Comparison::default();
    for (id, entry) in current {
        let Some(base) = baseline.tests.get(id) else {
            comparison.new_tests.push(id.clone());
            continue;
        };
        for &figure in &figures {
            let (before, now) = (figure.of(base), figure.of(entry));
            let row = Row { id: id.clone(), figure, baseline: before, now };
            if now > tolerance.limit_of(figure, before) {
                comparison.regressions.push(row);
            } else if now < before && figure == Figure::Retained {
                comparison.improvements.push(row);
            }
        }
    }
    if complete {
        comparison.missing = baseline.tests.keys().filter(|id| !current.contains_key(*id)).cloned().collect();
    }
    comparison
}

/// The baseline entry of a leak test: its summary figures and its retained stacks.
pub fn entry(test: &SummaryTest, report: &ying::report::LeakReport) -> BaselineEntry {
    BaselineEntry { retained_stacks: render::retained_lines(report), ..figures(test) }
}

/// The baseline entry of a leak test from its summary figures alone, without stacks.
pub fn figures(test: &SummaryTest) -> BaselineEntry {
    BaselineEntry {
        retained_bytes: test.retained_bytes.unwrap_or_default(),
        peak_bytes: test.peak_bytes.unwrap_or_default(),
        allocated_bytes: test.allocated_bytes.unwrap_or_default(),
        allocations: test.allocations.unwrap_or_default(),
        retained_stacks: Vec::new(),
    }
}

/// The baseline entries of a finished run, from summary.json and the reports stored beside it.
pub fn entries(summary: &Summary, out_dir: &Path) -> Result<BTreeMap<String, BaselineEntry>> {
    let mut entries = BTreeMap::new();
    for test in &summary.tests {
        let Some(report_path) = &test.report else { continue };
        let path = out_dir.join(report_path);
        let action = || format!("read the report {}", path.display());
        let bytes = std::fs::read(&path).map_err(|error| Error::new(action(), error))?;
        let report = serde_json::from_slice(&bytes).map_err(|error| Error::new(action(), error))?;
        entries.insert(test.id(), entry(test, &report));
    }
    Ok(entries)
}

/// Folded lines with two counts (`stack before after`), for a differential flamegraph of retained memory.
pub fn differential_lines(before: &BaselineEntry, after: &BaselineEntry) -> Vec<String> {
    let parse = |lines: &[String]| -> BTreeMap<String, u64> {
        let mut stacks = BTreeMap::new();
        for line in lines {
            if let Some((stack, bytes)) = line.rsplit_once(' ') {
                *stacks.entry(stack.to_owned()).or_default() += bytes.parse::<u64>().unwrap_or_default();
            }
        }
        stacks
    };
    let (before, after) = (parse(&before.retained_stacks), parse(&after.retained_stacks));
    let stacks: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    stacks
        .into_iter()
        .map(|stack| {
            let count = |map: &BTreeMap<String, u64>| map.get(stack).copied().unwrap_or_default();
            format!("{stack} {} {}", count(&before), count(&after))
        })
        .collect()
}

fn signed(delta: i128) -> String {
    if delta > 0 { format!("+{delta}") } else { delta.to_string() }
}

fn percent(row: &Row) -> String {
    if row.baseline == 0 {
        return "new".to_owned();
    }
    format!("{:+.1}%", (row.now as f64 - row.baseline as f64) * 100.0 / row.baseline as f64)
}

/// The comparison as lines for the terminal.
pub fn render_table(comparison: &Comparison, baseline_path: &Path, tolerance: Tolerance) -> Vec<String> {
    let mut lines = vec![format!(
        "retained memory against {} (tolerance: {:.0}% or {} bytes, whichever is larger)",
        baseline_path.display(),
        tolerance.relative * 100.0,
        tolerance.absolute
    )];
    let rows: Vec<(&str, String, &Row)> = comparison
        .regressions
        .iter()
        .map(|row| ("REGRESSED", row))
        .chain(comparison.improvements.iter().map(|row| ("improved", row)))
        .map(|(label, row)| {
            let id = match row.figure {
                Figure::Retained => row.id.clone(),
                figure => format!("{} ({})", row.id, figure.name()),
            };
            (label, id, row)
        })
        .collect();
    if !rows.is_empty() {
        let width = rows.iter().map(|(_, id, _)| id.len()).max().unwrap_or(4).max(4);
        lines.push(format!(
            "  {:<9}  {:<width$}  {:>10}  {:>10}  {:>10}  {:>8}",
            "", "test", "baseline", "now", "delta", "%"
        ));
        for (label, id, row) in rows {
            lines.push(format!(
                "  {label:<9}  {id:<width$}  {:>10}  {:>10}  {:>10}  {:>8}",
                row.baseline,
                row.now,
                signed(i128::from(row.now) - i128::from(row.baseline)),
                percent(row)
            ));
        }
    }
    for id in &comparison.new_tests {
        lines.push(format!("  new (not in the baseline): {id}"));
    }
    for id in &comparison.missing {
        lines.push(format!("  missing (in the baseline, not in this run): {id}"));
    }
    if comparison.regressions.is_empty() && comparison.improvements.is_empty() {
        lines.push("  no leak test's retained memory changed beyond the tolerance".to_owned());
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::{Tolerance, compare, parse_percent, parse_size};
    use crate::baseline::{Baseline, BaselineEntry};
    use std::collections::BTreeMap;

    fn entries(figures: &[(&str, u64)]) -> BTreeMap<String, BaselineEntry> {
        figures
            .iter()
            .map(|&(id, retained_bytes)| (id.to_owned(), BaselineEntry { retained_bytes, ..BaselineEntry::default() }))
            .collect()
    }

    #[test]
    fn the_tolerance_is_the_larger_of_its_two_parts() {
        let tolerance = Tolerance::default();
        assert_eq!(tolerance.limit(0), 1024);
        assert_eq!(tolerance.limit(100_000), 110_000);
        assert_eq!(Tolerance { relative: 0.0, absolute: 0 }.limit(500), 500);
    }

    #[test]
    fn growth_past_the_tolerance_regresses_and_shrinking_improves() {
        let baseline =
            Baseline { schema_version: 1, tests: entries(&[("a", 1000), ("b", 50_000), ("c", 10_000), ("gone", 1)]) };
        let now = entries(&[("a", 1900), ("b", 60_000), ("c", 9_000), ("fresh", 5)]);
        let comparison = compare(&baseline, &now, Tolerance::default(), &[], true);
        let ids = |rows: &[super::Row]| rows.iter().map(|row| row.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&comparison.regressions), ["b"]);
        assert_eq!(ids(&comparison.improvements), ["c"]);
        assert_eq!(comparison.new_tests, ["fresh"]);
        assert_eq!(comparison.missing, ["gone"]);
        assert!(comparison.fails(false));
        let filtered = compare(&baseline, &entries(&[("a", 1000)]), Tolerance::default(), &[], false);
        assert!(filtered.missing.is_empty() && !filtered.fails(true));
    }

    #[test]
    fn other_figures_are_gated_only_when_asked() {
        let entry = |retained_bytes, peak_bytes, allocations| BaselineEntry {
            retained_bytes,
            peak_bytes,
            allocations,
            ..BaselineEntry::default()
        };
        let baseline = Baseline { schema_version: 1, tests: [("t".to_owned(), entry(100, 10_000, 50))].into() };
        let now: BTreeMap<String, BaselineEntry> = [("t".to_owned(), entry(100, 90_000, 56))].into();
        assert!(compare(&baseline, &now, Tolerance::default(), &[], true).regressions.is_empty());
        let gated =
            compare(&baseline, &now, Tolerance::default(), &[super::Figure::Peak, super::Figure::Allocations], true);
        let figures: Vec<_> = gated.regressions.iter().map(|row| row.figure).collect();
        // Allocations grew 12%, past the 10% tolerance (the 1 KiB floor is for bytes only).
        assert_eq!(figures, [super::Figure::Peak, super::Figure::Allocations]);
    }

    #[test]
    fn tolerances_parse_from_flags() {
        assert_eq!(parse_percent("10%"), Ok(0.1));
        assert_eq!(parse_percent("0.25"), Ok(0.25));
        assert!(parse_percent("lots").is_err());
        assert_eq!(parse_size("1 KiB"), Ok(1024));
        assert_eq!(parse_size("512"), Ok(512));
        assert!(parse_size("3 parsecs").is_err());
    }
}
