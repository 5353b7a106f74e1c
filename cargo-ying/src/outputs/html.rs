//! The self-contained `index.html` of a summary: the run's verdict and totals (the terminal's Summary line and the
//! gate's counts), then every test with its outcome, gate verdict, reason, figures and files. Tests that regressed,
//! then those that failed, come first, marked in words as well as colour, each regressed test with the figures that
//! regressed and the sites they grew at, then unstable ones, then the rest; within
//! each group tests are in the order of their ids, so two runs of one suite list their tests alike. Sizes are shown
//! rounded, with the exact bytes on hover; for a steady state, the baseline and the change are per measured run.
//! The page is well-formed XML as well as HTML.

use crate::model::SharedStatic;
use std::collections::BTreeMap;
use ying_report::{ByteSize, GateVerdict, Summary, SummaryTest, TestId, TestOutcome};

/// What the run knows of a regressed test that its summary entry does not say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Regression {
    /// The figures that regressed, in words (`lost bytes grew from 0 to 512 (+512)`).
    pub figures: Vec<String>,
    /// The sites its memory grew at, a line each ([`TestRecord::grown_sites`](crate::model::TestRecord::grown_sites)).
    pub sites: Vec<String>,
}

/// Escapes text for HTML and SVG.
pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#39;")
}

/// The terminal's Summary line for these tests: `N tests run: P passed, F failed, ...; memory: R regressed`.
pub(crate) fn totals_line(tests: &[SummaryTest]) -> String {
    ying_report::Totals::of(tests.iter().map(|test| (test.outcome, test.gate, test.attempts.unwrap_or(1)))).to_string()
}

/// The run's verdict: `failed` when a test failed, crashed or timed out, else `regressed` when the gate found a
/// regression, else `passed`.
pub(crate) fn run_verdict(tests: &[SummaryTest]) -> &'static str {
    if tests.iter().any(|test| test.outcome.is_failure()) {
        "failed"
    } else if tests.iter().any(|test| test.gate == Some(GateVerdict::Regressed)) {
        "regressed"
    } else {
        "passed"
    }
}

/// Where a test's row goes: regressed first, then failed (crashed, timed out), then unstable, then the rest.
fn group(test: &SummaryTest) -> u8 {
    match (test.gate, test.outcome.is_failure()) {
        (Some(GateVerdict::Regressed), _) => 0,
        (_, true) => 1,
        (Some(GateVerdict::Unstable), _) => 2,
        _ => 3,
    }
}

/// The tests in the page's order: by `group`, then by id.
pub(crate) fn ordered(tests: &[SummaryTest]) -> Vec<&SummaryTest> {
    let mut ordered: Vec<&SummaryTest> = tests.iter().collect();
    ordered.sort_by(|a, b| (group(a), &a.id).cmp(&(group(b), &b.id)));
    ordered
}

/// A size rounded, the exact bytes on hover.
fn size(bytes: Option<u64>, class: &str) -> String {
    match bytes {
        Some(bytes) => {
            format!("<td class=\"n {class}\" title=\"{bytes} bytes\">{}</td>", ByteSize::new(bytes).rounded())
        }
        None => format!("<td class=\"n {class}\"></td>"),
    }
}

/// The baseline's figure: retained bytes, or for a steady state the growth of one measured run.
fn baseline(test: &SummaryTest) -> String {
    match (test.baseline_retained_bytes, test.steady_state) {
        (Some(bytes), Some(_)) => format!(
            "<td class=\"n baseline\" title=\"{bytes} bytes per measured run\">{}<br/><small>per run</small></td>",
            ByteSize::new(bytes).rounded()
        ),
        (bytes, _) => size(bytes, "baseline"),
    }
}

/// The change of the figure the gate compares (retained bytes, or for a steady state the growth of one measured
/// run) from the baseline, rounded with its sign and in percent, the exact bytes on hover; marked as grown only when
/// the gate says so.
fn change(test: &SummaryTest) -> String {
    let now = test.steady_state.or(test.figures).map(|figures| figures.retained_bytes);
    let (Some(before), Some(now)) = (test.baseline_retained_bytes, now) else {
        return "<td class=\"n change\"></td>".to_owned();
    };
    let per_run = if test.steady_state.is_some() { " per measured run" } else { "" };
    if now == before {
        return format!("<td class=\"n change\" title=\"0 bytes{per_run}\">0 B</td>");
    }
    let delta = i128::from(now) - i128::from(before);
    let sign = if delta > 0 { "+" } else { "-" };
    let shown = ByteSize::new(u64::try_from(delta.unsigned_abs()).unwrap_or(u64::MAX)).rounded();
    let percent = if before > 0 {
        format!("<br/><small>({:+.1}%)</small>", delta as f64 * 100.0 / before as f64)
    } else {
        String::new()
    };
    let class = match test.gate {
        Some(GateVerdict::Regressed | GateVerdict::Unstable) => "n change grew",
        Some(GateVerdict::Improved) => "n change shrank",
        _ => "n change",
    };
    format!("<td class=\"{class}\" title=\"{delta:+} bytes{per_run}\">{sign}{shown}{percent}</td>")
}

fn link(path: &Option<String>, label: &str) -> String {
    path.as_ref().map_or_else(String::new, |path| format!("<a href=\"{}\">{label}</a>", escape(path)))
}

/// The words that mark a row: its failure and its regression or instability.
fn labels(test: &SummaryTest) -> String {
    let mut labels = Vec::new();
    if test.outcome.is_failure() {
        let word = match test.outcome {
            TestOutcome::Crashed => "CRASHED",
            TestOutcome::TimedOut => "TIMED OUT",
            _ => "FAILED",
        };
        labels.push(format!("<span class=\"label {}\">{word}</span>", test.outcome.name()));
    }
    match test.gate {
        Some(GateVerdict::Regressed) => labels.push("<span class=\"label regressed\">REGRESSED</span>".to_owned()),
        Some(GateVerdict::Unstable) => labels.push("<span class=\"label unstable\">UNSTABLE</span>".to_owned()),
        _ => {}
    }
    labels.join(" ")
}

/// What the reason column says: why a failed test failed ([`failure`]), then, for a regressed test, the figures
/// that regressed and the sites they grew at.
fn reason(test: &SummaryTest, regressions: &BTreeMap<TestId, Regression>) -> String {
    let mut parts = Vec::new();
    if test.outcome.is_failure() {
        parts.push(failure(test));
    }
    let regression = regressions.get(&test.id).filter(|_| test.gate == Some(GateVerdict::Regressed));
    if let Some(regression) = regression {
        parts.extend(regression.figures.iter().map(|figure| escape(figure)));
        if !regression.sites.is_empty() {
            let sites: Vec<String> = regression.sites.iter().map(|site| format!("<li>{}</li>", escape(site))).collect();
            parts.push(format!("grown at:<ul class=\"sites\">{}</ul>", sites.concat()));
        }
    }
    // The tasks the body left, unless the grown sites above listed them.
    if !test.tasks.is_empty()
        && regression.is_none_or(|regression| !regression.sites.iter().any(|site| site.contains(" task")))
    {
        let tasks = ying_report::report::task_lines(&test.tasks);
        let tasks: Vec<String> = tasks.iter().map(|task| format!("<li>{}</li>", escape(task))).collect();
        parts.push(format!("tasks left:<ul class=\"sites\">{}</ul>", tasks.concat()));
    }
    for (index, cycle) in test.cycles.iter().enumerate() {
        // The drawing's arrowhead has an id of its own in the page.
        let id = {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            test.id.hash(&mut hasher);
            format!("arrow-{:x}-{index}", hasher.finish())
        };
        parts.push(format!("{}<br/>{}", escape(&cycle.to_string()), cycle_drawing(cycle, &id)));
    }
    parts.join("<br/>")
}

/// A reference cycle drawn: its types on a circle, an arrow a field from one to another (a loop for a field of a
/// type to itself), the fields to make `Weak` dashed and red; `id`, its arrowhead's, unique in the page.
fn cycle_drawing(cycle: &ying_report::report::CycleEntry, id: &str) -> String {
    use ying_report::report::{CycleField, short_type};
    const SIZE: f64 = 240.0;
    const RADIUS: f64 = 70.0;
    let mut types: Vec<&str> = cycle.members.iter().map(String::as_str).collect();
    for edge in &cycle.edges {
        for name in [edge.from.as_str(), edge.to.as_str()] {
            if !types.contains(&name) {
                types.push(name);
            }
        }
    }
    let count = types.len() as f64;
    let place = |name: &str| {
        let index = types.iter().position(|known| *known == name).unwrap_or(0) as f64;
        let angle = std::f64::consts::TAU * index / count - std::f64::consts::FRAC_PI_2;
        if types.len() == 1 {
            (SIZE / 2.0, SIZE / 2.0)
        } else {
            (SIZE / 2.0 + RADIUS * angle.cos(), SIZE / 2.0 + RADIUS * angle.sin())
        }
    };
    let mut svg = format!(
        "<svg class=\"cycle\" width=\"{SIZE}\" height=\"{SIZE}\" viewBox=\"0 0 {SIZE} {SIZE}\" role=\"img\">\
         <defs><marker id=\"{id}\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"6\" markerHeight=\"6\" \
         orient=\"auto-start-reverse\"><path d=\"M0,0L10,5L0,10z\"/></marker></defs>"
    );
    for (index, edge) in cycle.edges.iter().enumerate() {
        let weak = cycle.make_weak.contains(&CycleField::new(edge.from.clone(), edge.field.clone()));
        let class = if weak { "edge weak" } else { "edge" };
        let ((x1, y1), (x2, y2)) = (place(&edge.from), place(&edge.to));
        // Edges between one pair apart, each bowed to its own side.
        let bow = 18.0 * (1.0 + index as f64);
        let (path, label) = if edge.from == edge.to {
            let path = format!("M{:.1},{:.1}c{bow:.1},-{bow:.1} {bow:.1},{bow:.1} 8,14", x1 + 10.0, y1 - 6.0);
            (path, (x1 + bow, y1 - bow / 2.0))
        } else {
            let (mx, my) = ((x1 + x2) / 2.0, (y1 + y2) / 2.0);
            let (dx, dy) = (x2 - x1, y2 - y1);
            let length = dx.hypot(dy).max(1.0);
            let (cx, cy) = (mx - dy / length * bow, my + dx / length * bow);
            (format!("M{x1:.1},{y1:.1}Q{cx:.1},{cy:.1} {x2:.1},{y2:.1}"), (cx, cy))
        };
        svg.push_str(&format!(
            "<path class=\"{class}\" d=\"{path}\" marker-end=\"url(#{id})\"/><text class=\"field\" x=\"{:.1}\" \
             y=\"{:.1}\">{}</text>",
            label.0,
            label.1,
            escape(&edge.field)
        ));
    }
    for name in &types {
        let (x, y) = place(name);
        svg.push_str(&format!(
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"5\"/><text class=\"member\" x=\"{x:.1}\" y=\"{:.1}\">{}</text>",
            y + 18.0,
            escape(short_type(name))
        ));
    }
    svg.push_str("</svg>");
    svg
}

/// Why a failed test failed: the summary's reason (of a leak test's message, its lines up to the first blank one:
/// what it exceeded), else that it failed.
fn failure(test: &SummaryTest) -> String {
    match &test.reason {
        Some(reason) => reason
            .lines()
            .map(str::trim)
            .take_while(|line| !line.is_empty())
            .take(4)
            .map(escape)
            .collect::<Vec<_>>()
            .join("<br/>"),
        None if test.output.is_some() => "the test failed; see its output".to_owned(),
        None => "the test failed; its output is in the terminal".to_owned(),
    }
}

fn row(test: &SummaryTest, regressions: &BTreeMap<TestId, Regression>) -> String {
    let figures = test.figures;
    let mut classes = vec!["test", test.outcome.name()];
    if let Some(gate) = test.gate {
        classes.push(gate.name());
    }
    if group(test) <= 1 {
        classes.push("attention");
    }
    format!(
        "<tr class=\"{classes}\"><td class=\"mark\">{labels}</td><td class=\"id\">\
         <span class=\"binary\">{binary}</span><br/><span class=\"name\">{name}</span></td><td class=\"outcome\">{outcome}</td><td class=\"gate\">{gate}</td>\
         <td class=\"reason\">{reason}</td>{retained}{baseline}{change}{peak}{allocated}\
         <td class=\"n allocations\">{allocations}</td>\
         <td class=\"files\">{diff_svg}{output}{report}{retained_svg}{allocated_svg}{warnings}</td></tr>\n",
        classes = classes.join(" "),
        labels = labels(test),
        binary = escape(&test.id.binary_id()),
        name = escape(&test.id.name),
        outcome = test.outcome.name(),
        gate = test.gate.map_or("", |gate| gate.name()),
        reason = reason(test, regressions),
        retained = size(figures.map(|f| f.retained_bytes), "retained"),
        baseline = baseline(test),
        change = change(test),
        peak = size(figures.map(|f| f.peak_bytes), "peak"),
        allocated = size(figures.map(|f| f.allocated_bytes), "allocated"),
        allocations = figures.map_or_else(String::new, |f| f.allocations.to_string()),
        output = link(&test.output, "output"),
        report = link(&test.report, "report"),
        retained_svg = link(&test.retained_flamegraph, "retained"),
        allocated_svg = link(&test.allocated_flamegraph, "allocated"),
        diff_svg = link(&test.retained_diff_flamegraph, "retained diff"),
        warnings = test
            .warnings
            .iter()
            .map(|warning| format!("<br/><small class=\"warning\">{}</small>", escape(warning)))
            .collect::<String>(),
    )
}

/// The run's verdict, the terminal's totals and the gate's counts.
fn headline(tests: &[SummaryTest]) -> String {
    let verdict = run_verdict(tests);
    let gated = tests.iter().filter_map(|test| test.gate).collect::<Vec<_>>();
    let gate = if gated.is_empty() {
        "<p class=\"gate-totals\">no baseline: the gate compared nothing</p>".to_owned()
    } else {
        let counts: Vec<String> = [
            GateVerdict::Regressed,
            GateVerdict::Unstable,
            GateVerdict::Improved,
            GateVerdict::New,
            GateVerdict::Unchanged,
        ]
        .into_iter()
        .map(|verdict| {
            let number = gated.iter().filter(|gate| **gate == verdict).count();
            format!(
                "<span class=\"count {name}\" data-count=\"{number}\">{number} {name}</span>",
                name = verdict.name()
            )
        })
        .collect();
        format!("<p class=\"gate-totals\">gate: {}</p>", counts.join(", "))
    };
    format!(
        "<div id=\"headline\" class=\"{verdict}\">\n<p class=\"verdict\">run <strong>{}</strong></p>\n\
         <p id=\"totals\">{}</p>\n{gate}\n</div>\n",
        verdict.to_uppercase(),
        escape(&totals_line(tests)),
    )
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1em;color:#222}\
h1{font-size:1.4em;margin:0 0 .6em}\
svg.cycle{display:block;overflow:visible}svg.cycle .edge{fill:none;stroke:#555}\
svg.cycle .edge.weak{stroke:#b00020;stroke-dasharray:4 3}svg.cycle text{font-size:11px;text-anchor:middle}\
#headline{border-left:.5em solid #2a7a2a;background:#eef7ee;padding:.6em 1em;margin-bottom:1em}\
#headline.failed,#headline.regressed{border-color:#b00020;background:#fdecee}\
#headline p{margin:.2em 0}.verdict{font-size:1.2em}#totals{font-weight:600}\
.count.regressed{color:#b00020;font-weight:600}.count.unstable{color:#8a5a00}.count[data-count=\"0\"]{color:inherit;font-weight:400}\
table{border-collapse:collapse;font-size:.85em;width:100%}\
td,th{padding:.25em .5em;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}\
th{background:#f4f4f4;position:sticky;top:0;vertical-align:bottom}\
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}td.n{white-space:nowrap}\
.binary{color:#555;font-size:.9em}.name{font-weight:600}\
td[title]{cursor:help}\
tr.attention td{background:#fdecee}tr.unstable td{background:#fff6e0}\
tr.attention td.mark{border-left:.3em solid #b00020}tr.unstable td.mark{border-left:.3em solid #c98a00}\
tr.ignored td,tr.not-run td{color:#888}\
.label{display:inline-block;font-size:.8em;font-weight:700;padding:.1em .4em;border-radius:.2em;color:#fff;\
background:#b00020;white-space:nowrap}.label.unstable{background:#8a5a00}\
td.reason{min-width:16em;max-width:21em;font-size:.9em}td.change.grew{color:#b00020;font-weight:600}td.change.shrank{color:#2a7a2a}\
ul.sites{margin:.2em 0 0;padding-left:1.2em}ul.sites li{word-break:break-word}td.id{max-width:18em;overflow-wrap:anywhere}td.files{max-width:8em}td.files a{display:block;white-space:nowrap}\
td.where{overflow-wrap:anywhere}small.warning{color:#8a5a00;white-space:normal}";

/// The statics the suite's tests retain memory in, with how many tests each and the `allow` line that excuses one;
/// nothing when none does.
fn statics_section(statics: &[SharedStatic]) -> String {
    if statics.is_empty() {
        return String::new();
    }
    let rows: String = statics
        .iter()
        .map(|shared| {
            let allow = shared
                .pattern
                .as_ref()
                .map(|pattern| format!("<code>allow = [\"{}\"]</code>", escape(pattern)))
                .unwrap_or_default();
            format!(
                "<tr><td><code>{}</code></td><td class=\"n\">{}</td><td class=\"n\" title=\"{} bytes\">{}</td>\
                 <td>{allow}</td></tr>\n",
                escape(&shared.root),
                shared.tests,
                shared.bytes,
                ByteSize::new(shared.bytes).rounded()
            )
        })
        .collect();
    format!(
        "<h2 id=\"statics\">Statics the suite retains</h2>\n<p>Memory a static holds stays for the whole process: \
         the process's own state (a runtime's registry, a dependency's cache) more often than a leak when many tests \
         retain it. Its <code>allow</code> line, under <code>[workspace.metadata.ying]</code>, excuses it in every \
         test.</p>\n<table>\n<thead><tr><th>static</th><th class=\"n\">tests</th><th class=\"n\">most in one \
         test</th><th>excused by</th></tr></thead>\n<tbody>\n{rows}</tbody>\n</table>\n"
    )
}

/// A cause of the run's regressions as the page shows it: the grown site's line, the most one test retains there,
/// and the tests it grew in.
#[derive(Clone, Debug, Default)]
pub(crate) struct Cause {
    /// The site, in the words every output uses.
    pub line: String,
    /// The most bytes one of its tests retains there.
    pub bytes: u64,
    /// Its tests, by their display names.
    pub tests: Vec<String>,
}

/// The causes of the run's regressions, one row each, first on the page: one leaking function that many tests call
/// is one row, not a row of every test.
fn causes_section(causes: &[Cause]) -> String {
    if causes.is_empty() {
        return String::new();
    }
    let rows: String = causes
        .iter()
        .map(|cause| {
            format!(
                "<tr><td class=\"where\">{}</td><td class=\"n\" title=\"{} bytes\">{}</td><td class=\"n\">{}</td>\
                 <td>{}</td></tr>\n",
                escape(&cause.line),
                cause.bytes,
                ByteSize::new(cause.bytes).rounded(),
                cause.tests.len(),
                super::github::some_named(&cause.tests, |test| escape(test))
            )
        })
        .collect();
    format!(
        "<h2 id=\"causes\">Where memory grew</h2>\n<table>\n<thead><tr><th>where</th><th class=\"n\">most in one \
         test</th><th class=\"n\">tests</th><th>regressed tests</th></tr></thead>\n<tbody>\n{rows}</tbody>\n\
         </table>\n<h2 id=\"tests\">Tests</h2>\n"
    )
}

/// The link to the run's artifacts, where GitHub's environment gives the run's page.
fn artifacts_link() -> String {
    super::github::run_page().map_or_else(String::new, |page| {
        format!(
            "<p class=\"artifacts\"><a href=\"{}#artifacts\">This run's artifacts on GitHub</a></p>\n",
            escape(&page)
        )
    })
}

/// The self-contained HTML page of `summary`: `regressions` what regressed of each regressed test, `statics` the
/// statics the suite retains memory in, `causes` the causes of its regressions.
pub(crate) fn index_html(
    summary: &Summary,
    regressions: &BTreeMap<TestId, Regression>,
    statics: &[SharedStatic],
    causes: &[Cause],
) -> String {
    let rows: String = ordered(&summary.tests).into_iter().map(|test| row(test, regressions)).collect();
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n\
         <title>ying: memory of the test suite</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <h1>Memory of the test suite</h1>\n{headline}{artifacts}{causes}\
         <p>Regressed tests first, then failed ones, then unstable ones, then the rest, each group by test. Figures are \
         exact, for leak tests, shown rounded: hover over one for its bytes. Retained memory leaves out what the \
         test excused.</p>\n<table>\n<thead><tr><th></th><th>test</th><th>outcome</th>\
         <th>gate</th><th>reason</th><th class=\"n\">retained</th><th class=\"n\">baseline retained</th>\
         <th class=\"n\">change</th><th class=\"n\">peak</th><th class=\"n\">allocated</th>\
         <th class=\"n\">allocations</th><th>files</th></tr></thead>\n<tbody>\n{rows}</tbody>\n</table>\n\
         {statics}</body>\n</html>\n",
        headline = headline(&summary.tests),
        artifacts = artifacts_link(),
        causes = causes_section(causes),
        statics = statics_section(statics),
    )
}

#[cfg(test)]
mod tests {
    use super::{Regression, SharedStatic, escape, index_html, ordered, run_verdict, totals_line};
    use std::collections::BTreeMap;
    use ying_report::{Figures, GateVerdict, Summary, SummaryTest, TargetKind, TestId, TestOutcome};

    fn test(name: &str, outcome: TestOutcome, gate: Option<GateVerdict>) -> SummaryTest {
        let mut test = SummaryTest::new(TestId::new("p", TargetKind::Test, "t", name), outcome);
        test.gate = gate;
        test
    }

    #[test]
    fn a_cycle_is_drawn_with_its_fields_and_the_one_to_make_weak_dashed() {
        use ying_report::report::{CycleEdge, CycleEntry, CycleField};
        let mut cycle = CycleEntry::default();
        cycle.members = vec!["app::Node".into()];
        cycle.bytes = 391;
        cycle.edges = vec![
            CycleEdge::new("app::Node", "children[]", "app::Node"),
            CycleEdge::new("app::Node", "parent", "app::Node"),
        ];
        cycle.make_weak = vec![CycleField::new("app::Node", "parent")];
        cycle.freed_if_weak = 391;
        let mut tree = test("tree", TestOutcome::Failed, None);
        tree.cycles = vec![cycle];
        let html = index_html(&Summary::new(vec![tree]), &BTreeMap::new(), &[], &[]);
        assert!(html.contains("make `Node.parent` a `Weak`"), "{html}");
        assert_eq!(html.matches("<svg class=\"cycle\"").count(), 1, "{html}");
        assert_eq!(html.matches("class=\"edge weak\"").count(), 1, "the parent field alone: {html}");
        assert_eq!(html.matches("class=\"edge\"").count(), 1, "{html}");
        for text in [">children[]</text>", ">parent</text>", ">Node</text>"] {
            assert!(html.contains(text), "{text}: {html}");
        }
    }

    #[test]
    fn html_is_escaped() {
        assert_eq!(escape("<a & \"b\" 'c'>"), "&lt;a &amp; &quot;b&quot; &#39;c&#39;&gt;");
    }

    #[test]
    fn each_test_links_its_own_files() {
        let test = |kind, name: &str| {
            let id = TestId::new("p", kind, "p", name);
            let mut test = SummaryTest::new(id.clone(), TestOutcome::Passed);
            test.report = Some(id.report_path());
            test
        };
        let summary = Summary::new(vec![test(TargetKind::Lib, "m::t"), test(TargetKind::Bin, "m__t")]);
        let html = index_html(&summary, &BTreeMap::new(), &[], &[]);
        assert!(
            html.contains("<span class=\"name\">m::t</span>") && html.contains("<a href=\"reports/p/lib/p/m.t.json\">")
        );
        assert!(html.contains("<span class=\"binary\">p::bin/p</span><br/><span class=\"name\">m__t</span>"));
        assert!(html.contains("<a href=\"reports/p/bin/p/m__t.json\">"));
    }

    #[test]
    fn the_statics_the_suite_retains_are_listed_with_their_tests_and_allow_line() {
        let summary = Summary::new(vec![test("a", TestOutcome::Passed, None)]);
        assert!(!index_html(&summary, &BTreeMap::new(), &[], &[]).contains("Statics the suite retains"));
        let statics = [
            SharedStatic {
                root: "tokio::signal::registry::globals::GLOBALS".to_owned(),
                tests: 168,
                bytes: 23_552,
                pattern: Some("tokio::signal::registry::globals::".to_owned()),
            },
            SharedStatic { root: "data of libc.so.6".to_owned(), tests: 2, bytes: 4599, pattern: None },
        ];
        let html = index_html(&summary, &BTreeMap::new(), &statics, &[]);
        assert!(html.contains("<h2 id=\"statics\">Statics the suite retains</h2>"), "{html}");
        assert!(
            html.contains(
                "<tr><td><code>tokio::signal::registry::globals::GLOBALS</code></td><td class=\"n\">168</td>\
                 <td class=\"n\" title=\"23552 bytes\">23.0 KiB</td><td><code>allow = \
                 [\"tokio::signal::registry::globals::\"]</code></td></tr>"
            ),
            "{html}"
        );
        assert!(html.contains("<td><code>data of libc.so.6</code></td><td class=\"n\">2</td>"), "{html}");
    }

    #[test]
    fn one_cause_of_many_tests_is_one_row_first_and_the_diff_comes_first_among_a_tests_files() {
        let causes = [super::Cause {
            line: "2.3 KiB in 1 block of u64, lost, at src/lib.rs:289 in lru::LruCache<K,V,S>::construct".into(),
            bytes: 4800,
            tests: (0..52).map(|n| format!("lru tests::t{n:02}")).collect(),
        }];
        let mut grown = test("grown", TestOutcome::Passed, Some(GateVerdict::Regressed));
        grown.retained_diff_flamegraph = Some("flamegraphs/p/test/t/grown.retained-diff.svg".into());
        grown.report = Some("reports/p/test/t/grown.json".into());
        let html = index_html(&Summary::new(vec![grown]), &BTreeMap::new(), &[], &causes);
        let where_at = html.find("<h2 id=\"causes\">Where memory grew</h2>").expect("the causes' section");
        assert!(where_at < html.find("<h2 id=\"tests\">").unwrap(), "before the tests' table");
        assert_eq!(html.matches("lru::LruCache&lt;K,V,S&gt;::construct").count(), 1, "{html}");
        assert!(html.contains("<td class=\"n\">52</td><td>lru tests::t00, lru tests::t01"), "{html}");
        assert!(html.contains("lru tests::t04, and 47 more</td>"), "{html}");
        let files = &html[html.find("<td class=\"files\">").unwrap()..];
        assert!(
            files.starts_with("<td class=\"files\"><a href=\"flamegraphs/p/test/t/grown.retained-diff.svg\""),
            "{files}"
        );
        assert!(
            html.contains("table{border-collapse:collapse;font-size:.85em;width:100%}"),
            "the page is as wide as the window"
        );
    }

    #[test]
    fn a_failed_test_links_its_whole_output() {
        let mut kept = test("kept", TestOutcome::Failed, None);
        kept.output = Some(kept.id.output_path());
        let html =
            index_html(&Summary::new(vec![kept, test("shown", TestOutcome::Failed, None)]), &BTreeMap::new(), &[], &[]);
        assert!(html.contains("<a href=\"output/p/test/t/kept.log\">output</a>"), "{html}");
        assert!(html.contains("the test failed; see its output") && html.contains("its output is in the terminal"));
    }

    #[test]
    fn regressed_then_failed_tests_come_first_then_unstable_then_the_rest_each_by_id() {
        let tests = vec![
            test("e", TestOutcome::Passed, Some(GateVerdict::Unchanged)),
            test("d", TestOutcome::Passed, Some(GateVerdict::Unstable)),
            test("c", TestOutcome::Crashed, None),
            test("b", TestOutcome::Passed, Some(GateVerdict::Regressed)),
            test("a", TestOutcome::Ignored, None),
        ];
        let names: Vec<&str> = ordered(&tests).iter().map(|test| test.id.name.as_str()).collect();
        assert_eq!(names, ["b", "c", "d", "a", "e"]);
        assert_eq!(run_verdict(&tests), "failed");
        assert_eq!(run_verdict(&tests[3..]), "regressed");
        assert_eq!(run_verdict(&tests[4..]), "passed");
        assert_eq!(totals_line(&tests), "4 tests run: 3 passed, 1 crashed, 1 ignored; memory: 1 regressed, 1 unstable");
    }

    #[test]
    fn sizes_are_rounded_with_their_bytes_on_hover_and_failures_give_their_reason() {
        let mut grown = test("grown", TestOutcome::Failed, Some(GateVerdict::Regressed));
        grown.figures = Some(Figures {
            retained_bytes: 3000,
            peak_bytes: 3000,
            allocated_bytes: 2048,
            allocations: 1,
            ..Figures::default()
        });
        grown.baseline_retained_bytes = Some(1000);
        grown.reason = Some(
            "ying: leak test `grown` exceeded its budget\n  max_retained = 0 B: retained 3000 B\n\nsites".to_owned(),
        );
        let html = index_html(&Summary::new(vec![grown]), &BTreeMap::new(), &[], &[]);
        assert!(html.contains("<td class=\"n retained\" title=\"3000 bytes\">2.9 KiB</td>"), "{html}");
        assert!(html.contains("<td class=\"n baseline\" title=\"1000 bytes\">1000 B</td>"), "{html}");
        assert!(html.contains("title=\"+2000 bytes\">+2.0 KiB<br/><small>(+200.0%)</small></td>"), "{html}");
        assert!(html.contains("<td class=\"n allocated\" title=\"2048 bytes\">2.0 KiB</td>"), "{html}");
        assert!(
            html.contains(
                "<td class=\"reason\">ying: leak test `grown` exceeded its budget<br/>max_retained = 0 B: retained \
                 3000 B</td>"
            ),
            "{html}"
        );
        assert!(html.contains("<span class=\"label failed\">FAILED</span> <span class=\"label regressed\">"));
    }

    #[test]
    fn a_regressed_test_says_what_regressed_and_where_it_grew_escaped() {
        let mut grown = test("grown", TestOutcome::Passed, Some(GateVerdict::Regressed));
        grown.figures = Some(Figures { retained_bytes: 25_088, lost_bytes: 512, ..Figures::default() });
        grown.baseline_retained_bytes = Some(24_576);
        let regression = Regression {
            figures: vec!["lost bytes grew from 0 to 512 (+512)".into()],
            sites: vec![
                "512 B in 1 block of Vec<u8>, lost (nothing points to it), at tests/t.rs:12 in t::grown".into(),
                "... and 1 more".into(),
            ],
        };
        let unstable = test("wobbles", TestOutcome::Passed, Some(GateVerdict::Unstable));
        let regressions = BTreeMap::from([(grown.id.clone(), regression.clone()), (unstable.id.clone(), regression)]);
        let html = index_html(&Summary::new(vec![grown, unstable]), &regressions, &[], &[]);
        assert!(
            html.contains(
                "<td class=\"reason\">lost bytes grew from 0 to 512 (+512)<br/>grown at:<ul class=\"sites\"><li>512 B \
                 in 1 block of Vec&lt;u8&gt;, lost (nothing points to it), at tests/t.rs:12 in t::grown</li><li>... and 1 \
                 more</li></ul></td>"
            ),
            "{html}"
        );
        assert_eq!(html.matches("grown at:").count(), 1, "only a regressed test says where it grew");
        let options = roxmltree::ParsingOptions { allow_dtd: true, ..roxmltree::ParsingOptions::default() };
        roxmltree::Document::parse_with_options(&html, options).unwrap();
    }

    #[test]
    fn a_steady_state_is_compared_with_the_baseline_per_measured_run() {
        let mut steady = test("steady", TestOutcome::Passed, Some(GateVerdict::Unchanged));
        steady.figures = Some(Figures {
            retained_bytes: 176,
            peak_bytes: 176,
            allocated_bytes: 176,
            allocations: 5,
            ..Figures::default()
        });
        steady.steady_state = Some(Figures {
            retained_bytes: 16,
            peak_bytes: 176,
            allocated_bytes: 16,
            allocations: 1,
            ..Figures::default()
        });
        steady.baseline_retained_bytes = Some(16);
        let html = index_html(&Summary::new(vec![steady]), &BTreeMap::new(), &[], &[]);
        assert!(html.contains("<td class=\"n change\" title=\"0 bytes per measured run\">0 B</td>"), "{html}");
        assert!(html.contains("title=\"16 bytes per measured run\">16 B<br/><small>per run</small>"), "{html}");
        assert!(html.contains("<td class=\"n retained\" title=\"176 bytes\">176 B</td>"), "{html}");
    }
}
