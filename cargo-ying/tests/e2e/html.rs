//! index.html after a run whose baseline a grown leak test regressed, beside tests that fail, crash and pass: the
//! page, parsed, shows the run's verdict and the terminal's totals, the regressed test first and marked with what
//! regressed and where it grew, a reason on every failed row, rounded sizes with their exact bytes on hover, and the
//! same order of rows in two runs.

use super::{Fixture, TEST_FAILED, entry, stderr, summary};
use roxmltree::{Document, Node};

/// One row of the page's table, as read back.
#[derive(Debug, PartialEq)]
struct Row {
    classes: Vec<String>,
    mark: String,
    binary: String,
    name: String,
    reason: String,
    /// Each size cell's class (`retained`, `baseline`, `change`, `peak`, `allocated`), text and hover text.
    sizes: Vec<(String, String, Option<String>)>,
}

fn classes(node: Node<'_, '_>) -> Vec<String> {
    node.attribute("class").unwrap_or_default().split_whitespace().map(str::to_owned).collect()
}

fn text(node: Node<'_, '_>) -> String {
    let texts: Vec<&str> = node.descendants().filter(Node::is_text).filter_map(|n| n.text()).map(str::trim).collect();
    texts.into_iter().filter(|text| !text.is_empty()).collect::<Vec<_>>().join(" ")
}

/// The element under `node` with `class` among its classes.
fn with_class<'a, 'i>(node: Node<'a, 'i>, class: &str) -> Option<Node<'a, 'i>> {
    node.descendants().find(|n| n.is_element() && classes(*n).iter().any(|c| c == class))
}

fn rows(document: &Document<'_>) -> Vec<Row> {
    // The tests' table: the one whose rows are tests (the causes' table comes first).
    let is_test = |row: Node<'_, '_>| classes(row).iter().any(|class| class == "test");
    let body = document
        .descendants()
        .find(|n| n.has_tag_name("tbody") && n.children().any(is_test))
        .expect("a table body of tests");
    body.children()
        .filter(|n| n.has_tag_name("tr"))
        .map(|tr| {
            let cell = |class: &str| text(with_class(tr, class).unwrap_or_else(|| panic!("a {class} cell")));
            let sizes = ["retained", "baseline", "change", "peak", "allocated"]
                .into_iter()
                .map(|class| {
                    let td = with_class(tr, class).unwrap_or_else(|| panic!("a {class} cell"));
                    (class.to_owned(), text(td), td.attribute("title").map(str::to_owned))
                })
                .collect();
            Row {
                classes: classes(tr),
                mark: cell("mark"),
                binary: cell("binary"),
                name: cell("name"),
                reason: cell("reason"),
                sizes,
            }
        })
        .collect()
}

/// The terminal's totals: the Summary line after its duration.
fn terminal_totals(stderr: &str) -> String {
    let line = stderr.lines().find(|line| line.trim_start().starts_with("Summary [")).expect("a Summary line");
    line.split_once("] ").expect("a duration").1.trim().to_owned()
}

#[test]
fn index_html_puts_the_regression_first_with_totals_reasons_and_exact_bytes() {
    let fixture = Fixture::new();
    let subset = ["--no-fail-fast", "budget_passes", "clean", "box_leak", "aborts", "--", "--exact"];
    let saved = fixture.cargo_ying(&[&["--save-baseline"][..], &subset[..]].concat(), &[]);
    assert_eq!(saved.status.code(), TEST_FAILED, "box_leak and aborts fail: {}", stderr(&saved));
    fixture.grow_budget_passes();

    let mut orders = Vec::new();
    for _ in 0..2 {
        let output = fixture.cargo_ying(&subset, &[]);
        let stderr = stderr(&output);
        assert_eq!(output.status.code(), TEST_FAILED, "{stderr}");
        let summary = summary(&fixture.target_dir());
        assert_eq!(entry(&summary, "leaks", "budget_passes")["gate"], "regressed", "{stderr}");
        let html = std::fs::read_to_string(fixture.target_dir().join("ying/index.html")).unwrap();
        let options = roxmltree::ParsingOptions { allow_dtd: true, ..Default::default() };
        let document = Document::parse_with_options(&html, options)
            .unwrap_or_else(|error| panic!("index.html is well-formed: {error}"));

        // The headline: the run's verdict, the terminal's totals and the gate's counts from summary.json.
        let headline = document.descendants().find(|n| n.attribute("id") == Some("headline")).expect("a headline");
        assert_eq!(classes(headline), ["failed"], "a test failed");
        let totals = document.descendants().find(|n| n.attribute("id") == Some("totals")).expect("totals");
        assert_eq!(text(totals), terminal_totals(&stderr));
        let tests = summary["tests"].as_array().unwrap();
        for verdict in ["regressed", "unstable", "improved", "new"] {
            let count = with_class(headline, verdict).unwrap_or_else(|| panic!("a count of {verdict}"));
            let expected = tests.iter().filter(|test| test["gate"] == verdict).count();
            assert_eq!(count.attribute("data-count"), Some(expected.to_string().as_str()), "{verdict}");
            assert_eq!(text(count), format!("{expected} {verdict}"));
        }

        // The cause first: the grown site once, with the test it grew in.
        let causes = document.descendants().find(|n| n.attribute("id") == Some("causes")).expect("the causes");
        let cause = causes.next_sibling_element().expect("the causes' table");
        let cause_text = text(cause);
        assert!(cause_text.contains("at tests/leaks.rs:69 in leaks::budget_passes"), "{cause_text}");
        assert!(cause_text.ends_with("leak-fixtures::leaks budget_passes"), "{cause_text}");

        let rows = rows(&document);
        assert_eq!(rows.len(), tests.len(), "a row per test");
        // The regressed test first, marked in words and by class; then the failed ones, by id.
        assert_eq!((rows[0].binary.as_str(), rows[0].name.as_str()), ("leak-fixtures::leaks", "budget_passes"));
        assert!(rows[0].classes.contains(&"regressed".to_owned()), "{:?}", rows[0]);
        assert!(rows[0].mark.contains("REGRESSED"), "{:?}", rows[0]);
        let failed: Vec<&Row> =
            rows[1..].iter().take_while(|row| row.classes.contains(&"attention".to_owned())).collect();
        let names: Vec<(&str, &str)> = failed.iter().map(|row| (row.binary.as_str(), row.name.as_str())).collect();
        assert_eq!(names, [("leak-fixtures::crashes", "aborts"), ("leak-fixtures::leaks", "box_leak")]);
        // The regressed row says which figure grew and the site it grew at, as the terminal does.
        assert!(rows[0].reason.starts_with("retained bytes grew from 1000 to 3000 (+2000, +200.0%)"), "{:?}", rows[0]);
        assert!(rows[0].reason.contains("grown at: 2.9 KiB (3000 bytes) in 1 block"), "{:?}", rows[0]);
        assert!(rows[0].reason.ends_with("at tests/leaks.rs:69 in leaks::budget_passes"), "{:?}", rows[0]);
        // Every failed row says why: the signal, or the leak test's message.
        for row in &rows {
            let test = entry(&summary, row.binary.rsplit("::").next().unwrap(), &row.name);
            let failure = ["failed", "crashed", "timed-out"].contains(&test["outcome"].as_str().unwrap());
            assert_eq!(failure || test["gate"] == "regressed", !row.reason.is_empty(), "{row:?}");
            let outcome = test["outcome"].clone();
            assert_eq!(failure, row.mark.contains(&outcome.as_str().unwrap().to_uppercase()), "{row:?}");
        }
        assert_eq!(failed[0].reason, "killed by SIGABRT");
        assert!(failed[1].reason.starts_with("ying: leak test `box_leak` exceeded its budget"), "{:?}", failed[1]);
        assert!(failed[1].reason.contains("max_retained"), "what it exceeded: {:?}", failed[1]);
        let rest: Vec<&str> = rows[3..].iter().map(|row| row.name.as_str()).collect();
        let mut sorted = rest.clone();
        sorted.sort_unstable();
        assert_eq!(rest, sorted, "the rest by id");

        // Sizes rounded for people, the exact bytes on hover; the baseline and the change beside retained bytes.
        for row in &rows {
            let test = entry(&summary, row.binary.rsplit("::").next().unwrap(), &row.name);
            for (class, shown, title) in &row.sizes {
                let key = match class.as_str() {
                    "baseline" => "baseline_retained_bytes".to_owned(),
                    "change" => continue,
                    figure => format!("{figure}_bytes"),
                };
                match test[&key].as_u64() {
                    Some(bytes) => {
                        assert_eq!(title.as_deref(), Some(format!("{bytes} bytes").as_str()), "{row:?}");
                        let rounded = ying_report::ByteSize::new(bytes).rounded().to_string();
                        assert_eq!(*shown, rounded, "{row:?}");
                    }
                    None => assert!(shown.is_empty() && title.is_none(), "{row:?}"),
                }
            }
        }
        let regressed = &rows[0].sizes;
        assert_eq!(regressed[0], ("retained".into(), "2.9 KiB".into(), Some("3000 bytes".into())));
        assert_eq!(regressed[1], ("baseline".into(), "1000 B".into(), Some("1000 bytes".into())));
        assert_eq!(regressed[2], ("change".into(), "+2.0 KiB (+200.0%)".into(), Some("+2000 bytes".into())));
        orders.push(rows.iter().map(|row| (row.binary.clone(), row.name.clone())).collect::<Vec<_>>());
    }
    assert_eq!(orders[0], orders[1], "two runs list their rows alike");
}
