//! The gate's comparison as a table for a terminal, as `cargo ying test`, `diff` and `merge` print it.

use crate::gate::{Comparison, Row, Tolerance};
use ying_report::{Figure, GateVerdict};

/// The comparison as lines for a terminal: regressions, unstable tests and improvements, then new and missing
/// tests.
pub(crate) fn render(comparison: &Comparison, baseline: &str, tolerance: Tolerance) -> Vec<String> {
    let mut lines = vec![format!(
        "retained memory against {baseline} (tolerance: {} or {} bytes, whichever is larger; lost bytes: {} bytes)",
        tolerance.relative,
        tolerance.absolute.bytes(),
        tolerance.lost_floor()
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
        if let Some(reruns) = gate.reruns {
            lines.push(format!(
                "  {id}: crossed the tolerance, then again in {} of {} reruns{}",
                reruns.crossed,
                reruns.runs,
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
    if lines.len() == 1 || comparison.tests.values().all(|gate| gate.rows.is_empty()) {
        lines.push("  no leak test's retained memory changed beyond the tolerance".to_owned());
    }
    lines
}
