//! JUnit XML for test reporters, from the run model, valid against Jenkins' junit-10 schema (the xunit plugin's
//! junit-10.xsd, which it validates JUnit files against) and Ant's junit-4: a test suite per binary, a test case per
//! test, each with its time, and totals on every suite and on the run. Only what both declare is written: `name`,
//! `tests`, `failures`, `errors` and `time` on `<testsuites>`; the same and `skipped` on each `<testsuite>`; `name`,
//! `classname` and `time` on each `<testcase>`; `<skipped>` with its reason as text, no attribute.
//!
//! A test case shows the run's verdict on the test: a failed, crashed or timed-out test is a `<failure>`, and so is
//! a passing leak test whose memory regressed against the baseline, with its figures and its diff flamegraph (the
//! run fails for it). Crashes and timeouts are failures of the test, not errors, as cargo-nextest has them: JUnit's
//! `<error>` is for a test the harness could not run at all, which `cargo ying test` records as no test's outcome.
//! An unstable test is not a failure; it says so in `<system-err>`, with the test's warnings. Ignored tests and
//! tests fail-fast did not start are `<skipped>`. The test's output is its `<system-out>`, ANSI codes and characters
//! XML cannot hold removed.
//!
//! The XML is written here rather than by `quick-junit`'s serializer (which cargo-nextest writes with): that one
//! puts a `disabled` attribute on every `<testsuite>`, which junit-10 does not declare, and has no way to leave it
//! out. Its `XmlString` still cleans the text.

use crate::model::{Outcome, Run, TestRecord};
use quick_junit::XmlString;
use std::time::Duration;
use ying_report::{GateVerdict, Reruns};

/// Text as XML can hold it: `XmlString` removes ANSI escapes and control characters; the two non-characters XML
/// refuses go too.
fn text(text: &str) -> String {
    XmlString::new(text.replace(['\u{fffe}', '\u{ffff}'], "")).into_string()
}

/// Appends `text` to `xml`, escaped for an attribute's value (`attribute`) or an element's content. Line breaks and
/// tabs in a value are written as character references, which a parser keeps rather than turning into spaces, and
/// so is a carriage return anywhere, which a parser keeps rather than dropping.
fn escape(xml: &mut String, text: &str, attribute: bool) {
    for c in text.chars() {
        match c {
            '&' => xml.push_str("&amp;"),
            '<' => xml.push_str("&lt;"),
            '>' => xml.push_str("&gt;"),
            '\r' => xml.push_str("&#13;"),
            '"' if attribute => xml.push_str("&quot;"),
            '\n' if attribute => xml.push_str("&#10;"),
            '\t' if attribute => xml.push_str("&#9;"),
            c => xml.push(c),
        }
    }
}

/// JUnit's form of a duration: seconds with three decimals, which junit-10's `SUREFIRE_TIME` pattern admits.
fn seconds(duration: Duration) -> String {
    format!("{:.3}", duration.as_secs_f64())
}

/// A JUnit document being written: elements indented by four spaces a level, as cargo-nextest's are; the text of
/// an element on the element's line.
struct Writer {
    xml: String,
    depth: usize,
}

impl Writer {
    fn new() -> Self {
        Self { xml: "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n".to_owned(), depth: 0 }
    }

    fn start_tag(&mut self, name: &str, attributes: &[(&str, &str)]) {
        self.xml.push_str(&"    ".repeat(self.depth));
        self.xml.push('<');
        self.xml.push_str(name);
        for (key, value) in attributes {
            self.xml.push_str(&format!(" {key}=\""));
            escape(&mut self.xml, value, true);
            self.xml.push('"');
        }
    }

    /// Opens an element whose children follow, up to [`close`](Self::close).
    fn open(&mut self, name: &str, attributes: &[(&str, &str)]) {
        self.start_tag(name, attributes);
        self.xml.push_str(">\n");
        self.depth += 1;
    }

    fn close(&mut self, name: &str) {
        self.depth -= 1;
        self.xml.push_str(&format!("{}</{name}>\n", "    ".repeat(self.depth)));
    }

    /// An element with no children: empty, or holding `content` as its text.
    fn leaf(&mut self, name: &str, attributes: &[(&str, &str)], content: Option<&str>) {
        self.start_tag(name, attributes);
        match content {
            Some(content) => {
                self.xml.push('>');
                escape(&mut self.xml, content, false);
                self.xml.push_str(&format!("</{name}>\n"));
            }
            None => self.xml.push_str("/>\n"),
        }
    }
}

/// The run's memory regression of `test`, in words: each figure that grew, the sites it grew at, how the reruns
/// bore it out, and where the diff flamegraph is; as a message of one line and a description of several. `None`
/// unless the gate's verdict is `regressed`.
fn regression(test: &TestRecord) -> Option<(String, String)> {
    let gate = test.gate.as_ref().filter(|gate| gate.verdict == GateVerdict::Regressed)?;
    let rows: Vec<String> = gate.regressions().map(|row| row.describe()).collect();
    let sites = test.grown_sites();
    let mut message = rows.join("; ");
    let mut description = format!("memory regression against the baseline: {message}\n");
    if !sites.is_empty() {
        message.push_str(&format!("; grown at: {}", sites.join("; ")));
        description.push_str("grown at:\n");
        for site in &sites {
            description.push_str(&format!("  {site}\n"));
        }
    }
    if let Some(diff) = &test.files.retained_diff_flamegraph {
        message.push_str(&format!("; retained diff flamegraph: {diff}"));
        description.push_str(&format!("retained diff flamegraph: {diff}\n"));
    }
    if gate.steady_state {
        description.push_str("figures of the steady state: the smallest of one measured run\n");
    }
    if let Some(reruns) = &gate.reruns {
        description.push_str(&format!("{}\n", reruns.describe()));
    }
    if test.files.retained_diff_flamegraph.is_some() {
        description.push_str("the flamegraph's path is relative to the output directory, <target-dir>/ying/\n");
    }
    Some((message, description))
}

/// What goes to the test's `<system-err>`: an unstable verdict and the warnings.
fn notes(test: &TestRecord) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(gate) = test.gate.as_ref().filter(|gate| gate.verdict == GateVerdict::Unstable) {
        let rows: Vec<String> = gate.rows.iter().map(|row| row.describe()).collect();
        let reruns = gate.reruns.as_ref().map_or_else(|| "crossed the tolerance".to_owned(), Reruns::describe);
        notes
            .push(format!("ying: memory unstable, not a failure: {}: {reruns}: it did not reproduce", rows.join("; ")));
    }
    if test.is_flaky() {
        let failed = test.failed_attempts.len();
        let reasons: Vec<String> = test
            .failed_attempts
            .iter()
            .map(|attempt| attempt.outcome.reason().unwrap_or_else(|| attempt.outcome.kind().name().to_owned()))
            .collect();
        notes.push(format!(
            "flaky: failed {failed} time{} before passing ({})",
            if failed == 1 { "" } else { "s" },
            reasons.join(", ")
        ));
    }
    notes.extend(test.warnings.iter().map(|warning| format!("warning: {warning}")));
    notes
}

/// A test case's verdict, as JUnit has it.
enum Status {
    Success,
    /// `<skipped>why</skipped>`: the reason as text, which both schemas take (junit-4 allows no attribute).
    Skipped(String),
    /// `<failure type="..." message="...">description</failure>`.
    Failure {
        kind: String,
        message: String,
        description: String,
    },
}

fn status(test: &TestRecord) -> Status {
    match &test.outcome {
        Outcome::Ignored => Status::Skipped("ignored".to_owned()),
        Outcome::NotRun => {
            Status::Skipped("not run: an earlier test failed and the run stopped (fail-fast)".to_owned())
        }
        Outcome::Interrupted(_) => {
            Status::Skipped(text(&format!("not run: {}", test.outcome.reason().unwrap_or_default())))
        }
        outcome if outcome.is_failure() => {
            let reason = test.failure_message();
            let mut description = reason.clone();
            if let Some((_, regression)) = regression(test) {
                description.push_str(&format!("\n\n{regression}"));
            }
            Status::Failure {
                kind: outcome.kind().name().to_owned(),
                message: text(reason.lines().next().unwrap_or("the test failed")),
                description: text(&description),
            }
        }
        _ => match regression(test) {
            Some((message, description)) => Status::Failure {
                kind: "memory regression".to_owned(),
                message: text(&message),
                description: text(&description),
            },
            None => Status::Success,
        },
    }
}

/// The test case of `test`, in the suite named `suite`.
fn test_case(xml: &mut Writer, test: &TestRecord, status: &Status, suite: &str) {
    let (name, time) = (text(&test.id.name), seconds(test.duration));
    let attributes = [("name", name.as_str()), ("classname", suite), ("time", time.as_str())];
    let output = (!test.output.is_empty()).then(|| text(&test.output));
    let notes = notes(test);
    let notes = (!notes.is_empty()).then(|| text(&(notes.join("\n") + "\n")));
    if matches!(status, Status::Success) && output.is_none() && notes.is_none() {
        xml.leaf("testcase", &attributes, None);
        return;
    }
    xml.open("testcase", &attributes);
    match status {
        Status::Success => {}
        Status::Skipped(message) => xml.leaf("skipped", &[], Some(message)),
        Status::Failure { kind, message, description } => {
            xml.leaf("failure", &[("type", kind), ("message", message)], Some(description));
        }
    }
    if let Some(output) = &output {
        xml.leaf("system-out", &[], Some(output));
    }
    if let Some(notes) = &notes {
        xml.leaf("system-err", &[], Some(notes));
    }
    xml.close("testcase");
}

/// The counts of a suite or of the run. Nothing is an `<error>`, so junit-10's required `errors` is always 0.
#[derive(Default)]
struct Totals {
    tests: usize,
    failures: usize,
    skipped: usize,
}

impl Totals {
    fn of<'a>(statuses: impl IntoIterator<Item = &'a Status>) -> Self {
        let mut totals = Self::default();
        for status in statuses {
            totals.tests += 1;
            match status {
                Status::Success => {}
                Status::Skipped(_) => totals.skipped += 1,
                Status::Failure { .. } => totals.failures += 1,
            }
        }
        totals
    }
}

/// The run as JUnit XML.
pub(crate) fn junit(run: &Run) -> String {
    let mut suites: Vec<(String, Vec<(&TestRecord, Status)>)> = Vec::new();
    for test in &run.tests {
        let suite = test.id.binary_id();
        let case = (test, status(test));
        match suites.iter_mut().find(|(name, _)| *name == suite) {
            Some((_, cases)) => cases.push(case),
            None => suites.push((suite, vec![case])),
        }
    }
    let run_totals = Totals::of(suites.iter().flat_map(|(_, cases)| cases.iter().map(|(_, status)| status)));
    let mut xml = Writer::new();
    xml.open(
        "testsuites",
        &[
            ("name", "cargo ying test"),
            ("tests", &run_totals.tests.to_string()),
            ("failures", &run_totals.failures.to_string()),
            ("errors", "0"),
            ("time", &seconds(run.elapsed)),
        ],
    );
    for (name, cases) in &suites {
        let name = text(name);
        let totals = Totals::of(cases.iter().map(|(_, status)| status));
        let time = cases.iter().map(|(test, _)| test.duration).sum::<Duration>();
        xml.open(
            "testsuite",
            &[
                ("name", &name),
                ("tests", &totals.tests.to_string()),
                ("failures", &totals.failures.to_string()),
                ("errors", "0"),
                ("skipped", &totals.skipped.to_string()),
                ("time", &seconds(time)),
            ],
        );
        for (test, status) in cases {
            test_case(&mut xml, test, status, &name);
        }
        xml.close("testsuite");
    }
    xml.close("testsuites");
    xml.xml
}

#[cfg(test)]
mod tests {
    use super::{escape, junit};
    use crate::gate::{Reruns, Row, TestGate};
    use crate::model::{Outcome, Run, TestRecord};
    use std::time::Duration;
    use ying_report::{Figure, GateVerdict, TargetKind, TestId, TestOutcome, UnmeasuredRerun};

    fn record(name: &str, outcome: Outcome, output: &str) -> TestRecord {
        let id = TestId::new("p", TargetKind::Test, "leaks", name);
        TestRecord::new(id, outcome, Duration::from_millis(250), output.to_owned())
    }

    fn gate(verdict: GateVerdict, reruns: Option<Reruns>) -> TestGate {
        let mut gate = TestGate::new(
            GateVerdict::Regressed,
            vec![Row { figure: Figure::Retained, baseline: 1000, now: 3000 }],
            false,
        );
        if let Some(reruns) = reruns {
            gate.settle(reruns);
        }
        assert_eq!(gate.verdict, verdict);
        gate
    }

    fn run(tests: Vec<TestRecord>) -> String {
        junit(&Run { tests, elapsed: Duration::from_secs(2), max_fail: None, gate: None, interrupted: None })
    }

    fn parse(xml: &str) -> roxmltree::Document<'_> {
        roxmltree::Document::parse(xml).unwrap_or_else(|error| panic!("{error}: {xml}"))
    }

    fn case<'a>(document: &'a roxmltree::Document<'a>, name: &str) -> roxmltree::Node<'a, 'a> {
        document
            .descendants()
            .find(|node| node.has_tag_name("testcase") && node.attribute("name") == Some(name))
            .unwrap_or_else(|| panic!("a test case {name}"))
    }

    #[test]
    fn output_keeps_no_ansi_codes_or_characters_xml_cannot_hold() {
        let output = "\u{1b}[31mred\u{1b}[0m <&> \u{0}\u{7}bell\u{b}\u{fffe}\u{ffff} end\n";
        let xml = run(vec![record("noisy", Outcome::Failed, output)]);
        let document = parse(&xml);
        assert!(!xml.contains('\u{1b}') && !xml.contains('\u{fffe}'), "{xml}");
        let out = case(&document, "noisy").children().find(|node| node.has_tag_name("system-out")).unwrap();
        assert_eq!(out.text(), Some("red <&> bell end\n"));
    }

    #[test]
    fn markup_and_quotes_survive_in_names_and_text() {
        let name = "quotes \"<&>\" and 'apostrophes'";
        let output = "a\nb ]]> <tag/> &amp; \"quoted\"\n";
        let xml = run(vec![record(name, Outcome::Failed, output)]);
        let document = parse(&xml);
        let out = case(&document, name).children().find(|node| node.has_tag_name("system-out")).unwrap();
        assert_eq!(out.text(), Some(output), "{xml}");
    }

    #[test]
    fn line_breaks_and_tabs_in_an_attribute_are_kept_and_a_carriage_return_anywhere() {
        let value = "one\ntwo\tthree\r\nfour";
        let (mut attribute, mut content) = (String::new(), String::new());
        escape(&mut attribute, value, true);
        escape(&mut content, value, false);
        let xml = format!("<e a=\"{attribute}\">{content}</e>");
        let document = parse(&xml);
        let root = document.root_element();
        assert_eq!((root.attribute("a"), root.text()), (Some(value), Some(value)), "{xml}");
    }

    #[test]
    fn a_regressed_passing_test_fails_and_an_unstable_one_does_not() {
        let mut regressed = record("grew", Outcome::Passed, "");
        // One rerun crossed the tolerance again and one crashed, which confirms nothing: the regression stands.
        let crashed = UnmeasuredRerun { outcome: TestOutcome::Crashed, reason: Some("killed by SIGSEGV".into()) };
        let reruns = Reruns { crossed: 1, runs: 2, unmeasured: vec![crashed], rule: None };
        regressed.gate = Some(gate(GateVerdict::Regressed, Some(reruns)));
        regressed.files.retained_diff_flamegraph = Some("flamegraphs/p/test/leaks/grew.retained-diff.svg".into());
        let mut unstable = record("flaky", Outcome::Passed, "");
        unstable.gate = Some(gate(GateVerdict::Unstable, Some(Reruns { crossed: 1, runs: 2, ..Reruns::default() })));
        let xml = run(vec![regressed, unstable, record("slept", Outcome::Ignored, "")]);
        let document = parse(&xml);
        let suite = document.descendants().find(|node| node.has_tag_name("testsuite")).unwrap();
        let attributes: Vec<(&str, &str)> =
            suite.attributes().map(|attribute| (attribute.name(), attribute.value())).collect();
        assert_eq!(
            attributes,
            [
                ("name", "p::leaks"),
                ("tests", "3"),
                ("failures", "1"),
                ("errors", "0"),
                ("skipped", "1"),
                ("time", "0.750")
            ],
            "junit-10's attributes of a suite, and no others"
        );

        let failure = case(&document, "grew").children().find(|node| node.has_tag_name("failure")).unwrap();
        assert_eq!(failure.attribute("type"), Some("memory regression"));
        assert_eq!(
            failure.attribute("message"),
            Some(
                "retained bytes grew from 1000 to 3000 (+2000, +200.0%), past the tolerance; retained diff flamegraph: \
                 flamegraphs/p/test/leaks/grew.retained-diff.svg"
            )
        );
        assert!(
            failure.text().unwrap().contains(
                "crossed the tolerance, then again in 1 of 1 reruns that measured it; 1 measured nothing (crashed: \
                 killed by SIGSEGV): the regression stands"
            ),
            "{}",
            failure.text().unwrap()
        );

        let flaky = case(&document, "flaky");
        assert!(!flaky.children().any(|node| node.has_tag_name("failure")));
        let err = flaky.children().find(|node| node.has_tag_name("system-err")).unwrap().text().unwrap();
        assert!(
            err.contains("memory unstable, not a failure") && err.contains("then again in only 1 of 2 reruns"),
            "{err}"
        );
        assert!(case(&document, "slept").children().any(|node| node.has_tag_name("skipped")));
    }

    #[test]
    fn a_regression_names_the_sites_it_grew_at_in_its_message_and_its_description() {
        use crate::model::Leak;
        use std::collections::BTreeMap;
        use ying_report::report::{Attribution, Budgets, Reach, RetainedSite, TestIdentity, Why};
        use ying_report::{BaselineEntry, Frame, LeakReport};
        let mut forgets = record("forgets", Outcome::Passed, "");
        let identity = TestIdentity::new("p", None, "leaks", "forgets", "tests/leaks.rs", 3);
        let mut report = LeakReport::new(identity, Attribution::Process, Budgets::default());
        report.figures.retained_bytes = 512 * 7;
        report.retained_sites = (0..7)
            .map(|line| {
                let frames = vec![Frame::new("leaks::forgets", Some("tests/leaks.rs".into()), Some(10 + line))];
                let mut site = RetainedSite::new(512, 1, false, frames);
                site.type_name = Some("u8".into());
                site.why = vec![Why { kind: Reach::Lost, root: None, bytes: 512, blocks: 1 }];
                site
            })
            .collect();
        forgets.leak = Some(Leak { report, path: String::new() });
        let mut run =
            Run { tests: vec![forgets], elapsed: Duration::ZERO, max_fail: None, gate: None, interrupted: None };
        let baseline: BTreeMap<TestId, BaselineEntry> =
            [(run.tests[0].id.clone(), BaselineEntry { lost_bytes: Some(0), ..BaselineEntry::default() })].into();
        run.judge_by_default(&baseline, true);
        let xml = junit(&run);
        let document = parse(&xml);
        let failure = case(&document, "forgets").children().find(|node| node.has_tag_name("failure")).unwrap();
        let site = |line| {
            format!("512 B in 1 block of u8, lost (nothing points to it), at tests/leaks.rs:{line} in leaks::forgets")
        };
        let message = failure.attribute("message").unwrap();
        assert!(
            message.starts_with(&format!(
                "retained bytes grew from 0 to 3584 (+3584), past the tolerance; lost bytes grew from 0 to 3584 (+3584), past \
                 the lost floor; grown at: {}; {}",
                site(10),
                site(11)
            )),
            "{message}"
        );
        assert!(message.ends_with(&format!("{}; ... and 2 more", site(14))), "{message}");
        let description = failure.text().unwrap();
        assert!(description.contains(&format!("grown at:\n  {}\n  {}\n", site(10), site(11))), "{description}");
        assert!(description.contains("\n  ... and 2 more\n"), "{description}");
    }

    #[test]
    fn crashes_and_timeouts_are_failures_with_their_reason() {
        let tests = vec![
            record("aborts", Outcome::Crashed("SIGABRT".into()), "partial output\n"),
            record("hangs", Outcome::TimedOut(Duration::from_secs(4)), ""),
        ];
        let xml = run(tests);
        let document = parse(&xml);
        for (name, kind, reason) in
            [("aborts", "crashed", "killed by SIGABRT"), ("hangs", "timed-out", "timed out after 4.000s")]
        {
            let failure = case(&document, name).children().find(|node| node.has_tag_name("failure")).unwrap();
            assert_eq!((failure.attribute("type"), failure.attribute("message")), (Some(kind), Some(reason)));
        }
        let root = document.root_element();
        assert_eq!((root.attribute("failures"), root.attribute("errors")), (Some("2"), Some("0")));
    }
}
