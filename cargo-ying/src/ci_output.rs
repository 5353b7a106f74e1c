//! Outputs for CI systems: GitHub Actions annotations and job summary, and JUnit XML.

use crate::gate::{Comparison, Row, Tolerance};
use crate::runner::{Outcome, TestResult};

/// Escapes the message of a GitHub workflow command.
fn escape_data(text: &str) -> String {
    text.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

/// Escapes a property (`file=...`) of a GitHub workflow command.
fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

/// Where a test's source is, when its report says (leak tests do).
fn location(result: &TestResult) -> Option<(String, u32)> {
    let (_, report) = result.report.as_ref()?;
    Some((report.test.file.replace('\\', "/"), report.test.line))
}

fn annotation(location: Option<(String, u32)>, title: &str, message: &str) -> String {
    let place = match location {
        Some((file, line)) => format!("file={},line={line},", escape_property(&file)),
        None => String::new(),
    };
    format!("::error {place}title={}::{}", escape_property(title), escape_data(message))
}

fn growth(row: &Row) -> String {
    let delta = i128::from(row.now) - i128::from(row.baseline);
    if row.baseline == 0 {
        return format!("{delta:+}");
    }
    format!("{delta:+}, {:+.1}%", delta as f64 * 100.0 / row.baseline as f64)
}

/// One `::error` annotation per failed test (at its source line where known) and per regressed leak test.
pub fn github_annotations(results: &[TestResult], comparison: Option<&Comparison>) -> Vec<String> {
    let mut lines = Vec::new();
    for result in results.iter().filter(|result| result.outcome.is_failure()) {
        let message = match (&result.outcome, &result.report) {
            (Outcome::Failed, Some((_, report))) => {
                report.message.clone().unwrap_or_else(|| "the test failed".to_owned())
            }
            (outcome, _) => outcome.reason().unwrap_or_else(|| "the test failed".to_owned()),
        };
        lines.push(annotation(location(result), &format!("{} {}", result.outcome.name(), result.test.id()), &message));
    }
    for row in comparison.map_or(&[][..], |comparison| &comparison.regressions[..]) {
        let result = results.iter().find(|result| result.test.id() == row.id);
        let message = format!("{} grew from {} to {} ({})", row.figure.name(), row.baseline, row.now, growth(row));
        lines.push(annotation(result.and_then(location), &format!("memory regression {}", row.id), &message));
    }
    lines
}

/// The job summary in Markdown: totals, regressions against the baseline, failed tests.
pub fn step_summary(results: &[TestResult], comparison: Option<&Comparison>, tolerance: Tolerance) -> String {
    let count = |wanted: fn(&Outcome) -> bool| results.iter().filter(|r| wanted(&r.outcome)).count();
    let mut out = String::from("## cargo ying test\n\n");
    out.push_str(&format!(
        "{} passed, {} failed ({} crashed, {} timed out), {} ignored\n\n",
        count(|o| *o == Outcome::Passed),
        count(Outcome::is_failure),
        count(|o| matches!(o, Outcome::Crashed(_))),
        count(|o| matches!(o, Outcome::TimedOut(_))),
        count(|o| *o == Outcome::Ignored),
    ));
    if let Some(comparison) = comparison {
        if comparison.regressions.is_empty() {
            out.push_str("No leak test's retained memory grew beyond the tolerance.\n\n");
        } else {
            out.push_str(&format!(
                "### Memory regressions (tolerance {:.0}% or {} bytes)\n\n| test | figure | baseline | now | change |\n|---|---|---:|---:|---:|\n",
                tolerance.relative * 100.0,
                tolerance.absolute
            ));
            for row in &comparison.regressions {
                out.push_str(&format!(
                    "| `{}` | {} | {} | {} | {} |\n",
                    row.id,
                    row.figure.name(),
                    row.baseline,
                    row.now,
                    growth(row)
                ));
            }
            out.push('\n');
        }
    }
    let failed: Vec<_> = results.iter().filter(|result| result.outcome.is_failure()).collect();
    if !failed.is_empty() {
        out.push_str("### Failed tests\n\n");
        for result in failed {
            let reason = result.outcome.reason().map_or_else(String::new, |reason| format!(" ({reason})"));
            out.push_str(&format!("- `{}`: {}{reason}\n", result.test.id(), result.outcome.name()));
        }
    }
    out
}

fn xml(text: &str) -> String {
    text.chars()
        .filter(|&c| c == '\n' || c == '\t' || !c.is_control())
        .collect::<String>()
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// JUnit XML: a test suite per binary, a test case per test; failures carry their message and output.
pub fn junit(results: &[TestResult]) -> String {
    let mut suites: Vec<(String, Vec<&TestResult>)> = Vec::new();
    for result in results {
        let suite = result.test.binary.id();
        match suites.iter_mut().find(|(name, _)| *name == suite) {
            Some((_, members)) => members.push(result),
            None => suites.push((suite, vec![result])),
        }
    }
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"cargo ying test\">\n");
    for (suite, members) in suites {
        let failures = members.iter().filter(|result| result.outcome.is_failure()).count();
        let skipped = members.iter().filter(|r| matches!(r.outcome, Outcome::Ignored | Outcome::NotRun)).count();
        out.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" skipped=\"{skipped}\">\n",
            xml(&suite),
            members.len()
        ));
        for result in members {
            out.push_str(&format!(
                "    <testcase name=\"{}\" classname=\"{}\" time=\"{:.3}\"",
                xml(&result.test.name),
                xml(&suite),
                result.duration.as_secs_f64()
            ));
            match &result.outcome {
                Outcome::Ignored | Outcome::NotRun => out.push_str("><skipped/></testcase>\n"),
                outcome if outcome.is_failure() => {
                    let message = match (outcome, &result.report) {
                        (Outcome::Failed, Some((_, report))) => report.message.clone().unwrap_or_default(),
                        _ => outcome.reason().unwrap_or_default(),
                    };
                    let first_line = message.lines().next().unwrap_or(outcome.name());
                    out.push_str(&format!(
                        ">\n      <failure type=\"{}\" message=\"{}\">{}</failure>\n    </testcase>\n",
                        outcome.name(),
                        xml(first_line),
                        xml(&result.output)
                    ));
                }
                _ => out.push_str("/>\n"),
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::{annotation, escape_data, xml};

    #[test]
    fn workflow_commands_are_escaped() {
        assert_eq!(escape_data("50%\nnext"), "50%25%0Anext");
        assert_eq!(
            annotation(Some(("tests/a,b.rs".into(), 7)), "failed x::y", "line one\nline two"),
            "::error file=tests/a%2Cb.rs,line=7,title=failed x%3A%3Ay::line one%0Aline two"
        );
        assert_eq!(annotation(None, "t", "m"), "::error title=t::m");
    }

    #[test]
    fn xml_is_escaped_and_control_characters_dropped() {
        assert_eq!(xml("a<b & \"c\"\u{1b}[0m"), "a&lt;b &amp; &quot;c&quot;[0m");
    }
}
