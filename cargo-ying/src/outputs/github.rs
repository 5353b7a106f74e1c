//! GitHub Actions: `::error` annotations and the job summary, from the run model.

use crate::gate::Row;
use crate::model::{Run, TestRecord};
use ying_report::TestOutcome;

/// Escapes the message of a GitHub workflow command.
fn escape_data(text: &str) -> String {
    text.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

/// Escapes a property (`file=...`) of a GitHub workflow command.
fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

fn annotation(location: Option<(String, u32)>, title: &str, message: &str) -> String {
    let place = match location {
        Some((file, line)) => format!("file={},line={line},", escape_property(&file)),
        None => String::new(),
    };
    format!("::error {place}title={}::{}", escape_property(title), escape_data(message))
}

fn growth(row: &Row) -> String {
    let delta = format!("{:+}", row.delta());
    match row.percent() {
        Some(percent) => format!("{delta}, {percent}"),
        None => delta,
    }
}

/// One `::error` annotation per failed test (at its source line where known) and per regressed figure.
pub fn annotations(run: &Run) -> Vec<String> {
    let mut lines = Vec::new();
    for test in run.tests.iter().filter(|test| test.outcome.is_failure()) {
        let title = format!("{} {}", test.outcome.kind().name(), test.id);
        lines.push(annotation(test.source(), &title, &test.failure_message()));
    }
    for test in &run.tests {
        for row in test.gate.iter().flat_map(|gate| gate.regressions()) {
            let message = format!("{} grew from {} to {} ({})", row.figure.name(), row.baseline, row.now, growth(row));
            lines.push(annotation(test.source(), &format!("memory regression {}", test.id), &message));
        }
    }
    lines
}

/// The job summary in Markdown: totals, regressions against the baseline, failed tests.
pub fn step_summary(run: &Run) -> String {
    let mut out = String::from("## cargo ying test\n\n");
    let failed: Vec<&TestRecord> = run.tests.iter().filter(|test| test.outcome.is_failure()).collect();
    out.push_str(&format!(
        "{} passed, {} failed ({} crashed, {} timed out), {} ignored\n\n",
        run.count(TestOutcome::Passed),
        failed.len(),
        run.count(TestOutcome::Crashed),
        run.count(TestOutcome::TimedOut),
        run.count(TestOutcome::Ignored),
    ));
    if let Some(gate) = &run.gate {
        let regressions: Vec<_> = gate.comparison.regressions().collect();
        if regressions.is_empty() {
            out.push_str("No leak test's retained memory grew beyond the tolerance.\n\n");
        } else {
            let tolerance = gate.gating.tolerance;
            out.push_str(&format!(
                "### Memory regressions (tolerance {} or {} bytes)\n\n| test | figure | baseline | now | change |\n|---|---|---:|---:|---:|\n",
                tolerance.relative,
                tolerance.absolute.bytes()
            ));
            for (id, row) in regressions {
                out.push_str(&format!(
                    "| `{id}` | {} | {} | {} | {} |\n",
                    row.figure.name(),
                    row.baseline,
                    row.now,
                    growth(row)
                ));
            }
            out.push('\n');
        }
    }
    if !failed.is_empty() {
        out.push_str("### Failed tests\n\n");
        for test in failed {
            let reason = test.outcome.reason().map_or_else(String::new, |reason| format!(" ({reason})"));
            out.push_str(&format!("- `{}`: {}{reason}\n", test.id, test.outcome.kind().name()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{annotation, escape_data};

    #[test]
    fn workflow_commands_are_escaped() {
        assert_eq!(escape_data("50%\nnext"), "50%25%0Anext");
        assert_eq!(
            annotation(Some(("tests/a,b.rs".into(), 7)), "failed x::y", "line one\nline two"),
            "::error file=tests/a%2Cb.rs,line=7,title=failed x%3A%3Ay::line one%0Aline two"
        );
        assert_eq!(annotation(None, "t", "m"), "::error title=t::m");
    }
}
