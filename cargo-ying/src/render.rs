//! Rendering leak-test reports: SVG flamegraphs (inferno, bytes as the unit, deterministic colours) and the
//! self-contained `index.html` that lists every test.

use crate::summary::{Summary, SummaryTest};
use std::io::Write;
use ying::report::{LeakReport, folded_stack};

/// Folded lines of the retained memory (exact sites) of a report, sorted.
pub fn retained_lines(report: &LeakReport) -> Vec<String> {
    let mut lines: Vec<String> = report
        .retained_sites
        .iter()
        .filter(|site| !site.excused)
        .filter_map(|site| folded_stack(&site.frames, site.bytes))
        .collect();
    lines.sort();
    lines
}

/// Folded lines of the allocated memory (sampled stacks, rounded once) of a report, sorted.
pub fn allocated_lines(report: &LeakReport) -> Vec<String> {
    let mut lines: Vec<String> = report
        .sampled_stacks
        .iter()
        .filter_map(|stack| folded_stack(&stack.frames, stack.allocated_bytes.round() as u64))
        .collect();
    lines.sort();
    lines
}

/// Writes a flamegraph of `lines` to `path`; with no lines, an SVG that says so.
pub fn flamegraph(lines: &[String], title: &str, path: &std::path::Path) -> std::io::Result<()> {
    let mut svg = Vec::new();
    if lines.is_empty() {
        write!(
            svg,
            "<?xml version=\"1.0\" standalone=\"no\"?>\n<svg version=\"1.1\" width=\"1200\" height=\"60\" \
             xmlns=\"http://www.w3.org/2000/svg\"><text x=\"600\" y=\"34\" text-anchor=\"middle\" \
             font-family=\"Verdana\" font-size=\"15\">{}: nothing to show</text></svg>\n",
            escape(title)
        )?;
    } else {
        let mut options = inferno::flamegraph::Options::default();
        options.title = title.to_owned();
        options.count_name = "bytes".to_owned();
        options.deterministic = true;
        options.hash = true;
        inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut svg)
            .map_err(std::io::Error::other)?;
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, svg)
}

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
    format!(
        "<tr class=\"{outcome}\"><td>{package}</td><td>{binary}</td><td>{name}</td><td>{outcome}{reason}</td>\
         <td class=\"n\">{retained}</td><td class=\"n\">{peak}</td><td class=\"n\">{allocated}</td>\
         <td class=\"n\">{allocations}</td><td class=\"n\">{baseline}</td><td class=\"n\">{delta}</td>\
         <td>{report} {retained_svg} {allocated_svg} {diff_svg}</td></tr>\n",
        package = escape(&test.package),
        binary = escape(&test.binary),
        name = escape(&test.name),
        outcome = escape(&test.outcome),
        reason = test.reason.as_ref().map_or_else(String::new, |reason| format!(" ({})", escape(reason))),
        retained = figure(test.retained_bytes),
        peak = figure(test.peak_bytes),
        allocated = figure(test.allocated_bytes),
        allocations = figure(test.allocations),
        report = link(&test.report, "report"),
        retained_svg = link(&test.retained_flamegraph, "retained"),
        allocated_svg = link(&test.allocated_flamegraph, "allocated"),
        baseline = figure(test.baseline_retained_bytes),
        delta = match (test.baseline_retained_bytes, test.retained_bytes) {
            (Some(before), Some(now)) => format!("{:+}", i128::from(now) - i128::from(before)),
            _ => String::new(),
        },
        diff_svg = link(&test.retained_diff_flamegraph, "retained diff"),
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
         <table>\n<tr><th>package</th><th>binary</th><th>test</th><th>outcome</th><th>retained</th><th>peak</th>\
         <th>allocated</th><th>allocations</th><th>baseline retained</th><th>change</th><th>files</th></tr>\n{rows}</table>\n</body>\n</html>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn html_is_escaped() {
        assert_eq!(escape("<a & \"b\">"), "&lt;a &amp; &quot;b&quot;&gt;");
    }
}
