//! The gate's comparison as a table for a terminal, as `cargo ying test`, `diff` and `merge` print it.

use crate::gate::{Comparison, Row, Tolerance};
use ying_report::{Figure, GateVerdict};

/// The comparison as lines for a terminal: regressions, unstable tests and improvements, then new and missing
/// tests.
pub(crate) fn render(comparison: &Comparison, baseline: &str, tolerance: Tolerance) -> Vec<String> {
    let mut lines = vec![format!(
        "retained memory against {baseline} (tolerance: {} or {} bytes, whichever is larger; lost bytes: {} bytes; \
         held bytes: {} bytes)",
        tolerance.relative,
        tolerance.absolute.bytes(),
        tolerance.lost_floor(),
        tolerance.held_floor()
    )];
    let verdicts = [
        (GateVerdict::Regressed, "REGRESSED"),
        (GateVerdict::Unstable, "unstable"),
        (GateVerdict::Improved, "improved"),
    ];
    let rows: Vec<(&str, String, &Row)> = verdicts
        .into_iter()
        .flat_map(|(verdict, label)| {
            comparison
                .tests
                .iter()
                .filter(move |(_, gate)| gate.verdict == verdict)
                .flat_map(move |(id, gate)| gate.rows.iter().map(move |row| (label, id, gate, row)))
        })
        .map(|(label, id, gate, row)| {
            let id = match (row.figure, gate.steady_state) {
                (Figure::Retained, false) => id.to_string(),
                (figure, false) => format!("{id} ({})", figure.name()),
                (figure, true) => format!("{id} (steady state: {})", figure.name()),
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
            let delta = row.delta();
            lines.push(format!(
                "  {label:<9}  {id:<width$}  {:>10}  {:>10}  {:>10}  {:>8}",
                row.baseline,
                row.now,
                if delta > 0 { format!("+{delta}") } else { delta.to_string() },
                row.percent().unwrap_or_else(|| "new".to_owned())
            ));
        }
    }
    for (id, gate) in &comparison.tests {
        if let Some(reruns) = &gate.reruns {
            lines.push(format!(
                "  {id}: {}{}",
                reruns.describe(),
                if reruns.verdict() == GateVerdict::Regressed { "" } else { ": unstable, not a failure" }
            ));
        }
    }
    for id in comparison.with(GateVerdict::New) {
        lines.push(format!("  new (not in the baseline): {id}"));
    }
    for id in &comparison.missing {
        lines.push(format!("  missing (in the baseline, not in this run): {id}"));
    }
    if let Some(count) = comparison.measured_all_only {
        let which = match count {
            0 => "its tests measured from outside".to_owned(),
            1 => "1 of its tests".to_owned(),
            count => format!("{count} of its tests"),
        };
        lines.push(format!(
            "  {baseline} was saved with --measure all and this run measured leak tests only: {which} not compared \
             (run with --measure all)"
        ));
    }
    if lines.len() == 1 || comparison.tests.values().all(|gate| gate.rows.is_empty()) {
        lines.push("  no leak test's retained memory changed beyond the tolerance".to_owned());
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::render;
    use crate::gate::{Gating, Tolerance, compare};
    use std::collections::BTreeMap;
    use ying_report::{BaselineEntry, Figures, Measured, TargetKind, TestId};

    fn entries(names: &[&str]) -> BTreeMap<TestId, BaselineEntry> {
        names
            .iter()
            .map(|name| {
                let figures = Figures { retained_bytes: 10, ..Figures::default() };
                (TestId::new("p", TargetKind::Test, "t", *name), BaselineEntry::new(figures, Vec::new()))
            })
            .collect()
    }

    /// The lines of the table that speak of baseline tests this run did not compare.
    fn uncompared(lines: &[String]) -> Vec<&String> {
        lines.iter().filter(|line| line.contains("missing") || line.contains("not compared")).collect()
    }

    #[test]
    fn a_baseline_of_every_test_under_a_run_of_the_leak_tests_is_one_line_and_fails_only_check() {
        let gating = Gating::new(Tolerance::default(), &[]);
        let before = entries(&["a_leak_test", "b", "c", "d"]);
        let mut comparison = compare(&before, &entries(&["a_leak_test"]), &gating, true);
        comparison.measured(Measured::All, Measured::LeakTests);
        let lines = render(&comparison, "ying-baseline.json", Tolerance::default());
        assert_eq!(
            uncompared(&lines),
            ["  ying-baseline.json was saved with --measure all and this run measured leak tests only: 3 of its \
                 tests not compared (run with --measure all)"]
        );
        assert!(!comparison.fails(false) && comparison.fails(true), "--check fails");
        // Under a run of every test, a test the run did not report is missing, each said.
        let mut all = compare(&before, &entries(&["a_leak_test"]), &gating, true);
        all.measured(Measured::All, Measured::All);
        assert_eq!(uncompared(&render(&all, "ying-baseline.json", Tolerance::default())).len(), 3);
    }
}
