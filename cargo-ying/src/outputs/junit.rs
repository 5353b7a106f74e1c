//! JUnit XML for test reporters, from the run model: a test suite per binary, a test case per test.

use crate::model::{Outcome, Run, TestRecord};

fn xml(text: &str) -> String {
    text.chars()
        .filter(|&c| c == '\n' || c == '\t' || !c.is_control())
        .collect::<String>()
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The run as JUnit XML; failures carry their message and output.
pub fn junit(run: &Run) -> String {
    let mut suites: Vec<(String, Vec<&TestRecord>)> = Vec::new();
    for test in &run.tests {
        let suite = test.id.binary_id();
        match suites.iter_mut().find(|(name, _)| *name == suite) {
            Some((_, members)) => members.push(test),
            None => suites.push((suite, vec![test])),
        }
    }
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"cargo ying test\">\n");
    for (suite, members) in suites {
        let failures = members.iter().filter(|test| test.outcome.is_failure()).count();
        let skipped = members.iter().filter(|test| matches!(test.outcome, Outcome::Ignored | Outcome::NotRun)).count();
        out.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" skipped=\"{skipped}\">\n",
            xml(&suite),
            members.len()
        ));
        for test in members {
            out.push_str(&format!(
                "    <testcase name=\"{}\" classname=\"{}\" time=\"{:.3}\"",
                xml(&test.id.name),
                xml(&suite),
                test.duration.as_secs_f64()
            ));
            match &test.outcome {
                Outcome::Ignored | Outcome::NotRun => out.push_str("><skipped/></testcase>\n"),
                outcome if outcome.is_failure() => {
                    let message = test.failure_message();
                    let first_line = message.lines().next().unwrap_or(outcome.kind().name());
                    out.push_str(&format!(
                        ">\n      <failure type=\"{}\" message=\"{}\">{}</failure>\n    </testcase>\n",
                        outcome.kind().name(),
                        xml(first_line),
                        xml(&test.output)
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
    use super::xml;

    #[test]
    fn xml_is_escaped_and_control_characters_dropped() {
        assert_eq!(xml("a<b & \"c\"\u{1b}[0m"), "a&lt;b &amp; &quot;c&quot;[0m");
    }
}
