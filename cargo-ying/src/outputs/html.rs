//! The self-contained `index.html` that lists every test of a summary with its outcome, gate verdict, figures and
//! files.

use ying_report::{Summary, SummaryTest};

/// Escapes text for HTML and SVG.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn figure(value: Option<u64>) -> String {
    value.map_or_else(String::new, |value| value.to_string())
}

fn link(path: &Option<String>, label: &str) -> String {
    path.as_ref().map_or_else(String::new, |path| format!("<a href=\"{}\">{label}</a>", escape(path)))
}

fn row(test: &SummaryTest) -> String {
    let figures = test.figures;
    format!(
        "<tr class=\"{outcome}\"><td>{binary}</td><td>{name}</td><td>{outcome}{reason}</td><td>{gate}</td>\
         <td class=\"n\">{retained}</td><td class=\"n\">{peak}</td><td class=\"n\">{allocated}</td>\
         <td class=\"n\">{allocations}</td><td class=\"n\">{baseline}</td><td class=\"n\">{delta}</td>\
         <td>{report} {retained_svg} {allocated_svg} {diff_svg}{warnings}</td></tr>\n",
        binary = escape(&test.id.binary_id()),
        name = escape(&test.id.name),
        outcome = test.outcome.name(),
        reason = test.reason.as_ref().map_or_else(String::new, |reason| format!(" ({})", escape(reason))),
        gate = test.gate.map_or("", |gate| gate.name()),
        retained = figure(figures.map(|f| f.retained_bytes)),
        peak = figure(figures.map(|f| f.peak_bytes)),
        allocated = figure(figures.map(|f| f.allocated_bytes)),
        allocations = figure(figures.map(|f| f.allocations)),
        report = link(&test.report, "report"),
        retained_svg = link(&test.retained_flamegraph, "retained"),
        allocated_svg = link(&test.allocated_flamegraph, "allocated"),
        baseline = figure(test.baseline_retained_bytes),
        delta = match (test.baseline_retained_bytes, figures) {
            (Some(before), Some(now)) => format!("{:+}", i128::from(now.retained_bytes) - i128::from(before)),
            _ => String::new(),
        },
        diff_svg = link(&test.retained_diff_flamegraph, "retained diff"),
        warnings =
            test.warnings.iter().map(|warning| format!("<br><small>{}</small>", escape(warning))).collect::<String>(),
    )
}

/// The self-contained HTML page listing every test with its figures and links.
pub fn index_html(summary: &Summary) -> String {
    let rows: String = summary.tests.iter().map(row).collect();
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>ying: memory of the test suite</title>\n\
         <style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}\
         td,th{{padding:.3em .8em;border-bottom:1px solid #ddd;text-align:left}}td.n{{text-align:right;\
         font-variant-numeric:tabular-nums}}tr.failed td,tr.crashed td,tr.timed-out td{{background:#fde8e8}}\
         tr.ignored td,tr.not-run td{{color:#888}}</style>\n</head>\n<body>\n<h1>Memory of the test suite</h1>\n\
         <p>Figures in bytes, exact, for leak tests; retained memory leaves out what the test excused.</p>\n\
         <table>\n<tr><th>binary</th><th>test</th><th>outcome</th><th>gate</th><th>retained</th><th>peak</th>\
         <th>allocated</th><th>allocations</th><th>baseline retained</th><th>change</th><th>files</th></tr>\n{rows}</table>\n</body>\n</html>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::{escape, index_html};
    use ying_report::{Summary, SummaryTest, TargetKind, TestId, TestOutcome};

    #[test]
    fn html_is_escaped() {
        assert_eq!(escape("<a & \"b\">"), "&lt;a &amp; &quot;b&quot;&gt;");
    }

    #[test]
    fn each_test_links_its_own_files() {
        let test = |kind, name: &str| {
            let id = TestId::new("p", kind, "p", name);
            let mut test = SummaryTest::new(id.clone(), TestOutcome::Passed);
            test.report = Some(id.report_path());
            test
        };
        let html = index_html(&Summary::new(vec![test(TargetKind::Lib, "m::t"), test(TargetKind::Bin, "m__t")]));
        assert!(html.contains("<td>p</td><td>m::t</td>") && html.contains("<a href=\"reports/p/lib/p/m.t.json\">"));
        assert!(
            html.contains("<td>p::bin/p</td><td>m__t</td>") && html.contains("<a href=\"reports/p/bin/p/m__t.json\">")
        );
    }
}
