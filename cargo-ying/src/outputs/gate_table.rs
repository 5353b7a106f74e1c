//! The gate's comparison as a table for a terminal, as `cargo ying test`, `diff` and `merge` print it.

use crate::gate::{Comparison, Row, Tolerance};
use ying_report::{Figure, GateVerdict};

/// The comparison as lines for a terminal: regressions then improvements, then new and missing tests.
pub fn render(comparison: &Comparison, baseline: &str, tolerance: Tolerance) -> Vec<String> {
    let mut lines = vec![format!(
        "retained memory against {baseline} (tolerance: {} or {} bytes, whichever is larger)",
        tolerance.relative,
        tolerance.absolute.bytes()
    )];
    let rows: Vec<(&str, String, &Row)> = [(GateVerdict::Regressed, "REGRESSED"), (GateVerdict::Improved, "improved")]
        .into_iter()
        .flat_map(|(verdict, label)| {
            comparison
                .tests
                .iter()
                .filter(move |(_, gate)| gate.verdict == verdict)
                .flat_map(move |(id, gate)| gate.rows.iter().map(move |row| (label, id, row)))
        })
        .map(|(label, id, row)| {
            let id = match row.figure {
                Figure::Retained => id.to_string(),
                figure => format!("{id} ({})", figure.name()),
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
    for id in comparison.with(GateVerdict::New) {
        lines.push(format!("  new (not in the baseline): {id}"));
    }
    for id in &comparison.missing {
        lines.push(format!("  missing (in the baseline, not in this run): {id}"));
    }
    if lines.len() == 1 || comparison.tests.values().all(|gate| gate.rows.is_empty()) {
        lines.push("  no leak test's retained memory changed beyond the tolerance".to_owned());
    }
    lines
}
