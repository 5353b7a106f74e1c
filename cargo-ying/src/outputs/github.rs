//! GitHub Actions: `::error` annotations and the job summary, from the run model.

use crate::gate::Row;
use crate::model::{Cause, Outcome, Run, TestRecord};
use std::path::{Path, PathBuf};
use ying_report::ByteSize;

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

/// GitHub shows at most this many error annotations of a step; the rest are dropped without a word.
pub(crate) const MAX_ERRORS: usize = 10;

/// `file` (relative to the directory of `test`'s package, when known) as a path from the repository root `root`
/// (GitHub attaches annotations by paths from the repository root, which in a nested workspace is not the
/// package's directory).
fn from_root(test: &TestRecord, file: &str, root: &Path) -> String {
    let Some(package_dir) = &test.package_dir else { return file.to_owned() };
    let path = package_dir.join(file);
    let relative = path.strip_prefix(root).ok().map(Path::to_owned).or_else(|| {
        let (path, root) = (path.canonicalize().ok()?, root.canonicalize().ok()?);
        path.strip_prefix(root).ok().map(Path::to_owned)
    });
    relative.map_or_else(|| file.to_owned(), |relative| relative.display().to_string().replace('\\', "/"))
}

/// Where a test's source line is, relative to the repository root `root`.
fn location(test: &TestRecord, root: &Path) -> Option<(String, u32)> {
    let (file, line) = test.source()?;
    Some((from_root(test, &file, root), line))
}

/// Where a cause's site is: its frame in the package's code (relative to the repository root `root`), else the
/// first test's source line.
fn cause_location(cause: &Cause<'_>, root: &Path) -> Option<(String, u32)> {
    let test = cause.tests.first()?;
    match cause.frame.as_ref().and_then(|frame| Some((frame.file.as_deref()?, frame.line?))) {
        Some((file, line)) if !Path::new(file).is_absolute() => {
            Some((from_root(test, &file.replace('\\', "/"), root), line))
        }
        _ => location(test, root),
    }
}

/// The repository root annotations' paths are relative to: `GITHUB_WORKSPACE` (where the checkout is), else git's
/// top level of `workspace_root`, else `workspace_root`.
pub(crate) fn repository_root(workspace_root: &Path) -> PathBuf {
    if let Some(workspace) = std::env::var_os("GITHUB_WORKSPACE").filter(|value| !value.is_empty()) {
        return PathBuf::from(workspace);
    }
    let top_level = std::process::Command::new("git")
        .args(["rev-parse", "--show-toplevel"])
        .current_dir(workspace_root)
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()));
    top_level.unwrap_or_else(|| workspace_root.to_owned())
}

/// How many tests a cause's annotation or row names before it counts the rest (here, in the job summary and in
/// index.html).
pub(crate) const NAMED_TESTS: usize = 5;

/// `items`, at most [`NAMED_TESTS`] of them (each as `name` words it), then `and N more`, joined by commas.
pub(crate) fn some_named<T>(items: &[T], name: impl Fn(&T) -> String) -> String {
    let mut named: Vec<String> = items.iter().take(NAMED_TESTS).map(name).collect();
    if items.len() > NAMED_TESTS {
        named.push(format!("and {} more", items.len() - NAMED_TESTS));
    }
    named.join(", ")
}

/// The figures a regressed test grew in, in words (`retained bytes grew from 10 to 5000 (+4990, ...)`).
fn regression_rows(test: &TestRecord) -> Vec<String> {
    test.gate.iter().flat_map(|gate| gate.regressions()).map(Row::describe).collect()
}

/// Whether the test's failure is its leak test's own verdict (its budgets), which its regression tells as well.
fn fails_on_its_budget(test: &TestRecord) -> bool {
    test.outcome == Outcome::Failed
        && test.leak.as_ref().is_some_and(|leak| leak.report.outcome == ying_report::report::Outcome::Failed)
}

/// The `::error` annotations: one per cause of the regressions ([`Run::causes`]: a site where memory grew, at its
/// file and line, naming every test it grew in), most tests first; then one per regressed test whose memory grew
/// at no site, and one per failed test (but a leak test that failed on its budget and whose regression an
/// annotation tells already), each at the test's source line where known. At most [`MAX_ERRORS`], and then a
/// `::notice` that says how many more there are and where they are all listed (`summary`, the run's
/// summary.json). Paths are relative to `root`, the repository root.
pub(crate) fn annotations(run: &Run, root: &Path, summary: &Path) -> Vec<String> {
    let mut errors = Vec::new();
    let causes = run.causes();
    for cause in &causes {
        let count = cause.tests.len();
        let title = format!("memory regression in {count} test{}", if count == 1 { "" } else { "s" });
        let mut message = format!("grown at: {}\n", cause.line);
        for test in cause.tests.iter().take(NAMED_TESTS) {
            message.push_str(&format!("{}: {}\n", test.id, regression_rows(test).join("; ")));
        }
        if count > NAMED_TESTS {
            message.push_str(&format!("... and {} more tests\n", count - NAMED_TESTS));
        }
        errors.push(annotation(cause_location(cause, root), &title, message.trim_end()));
    }
    let in_a_cause = |test: &TestRecord| causes.iter().any(|cause| cause.tests.iter().any(|t| std::ptr::eq(*t, test)));
    for test in run.tests.iter().filter(|test| !in_a_cause(test)) {
        let rows = regression_rows(test);
        if !rows.is_empty() {
            errors.push(annotation(location(test, root), &format!("memory regression {}", test.id), &rows.join("\n")));
        }
    }
    for test in run.tests.iter().filter(|test| test.outcome.is_failure()) {
        if fails_on_its_budget(test) && in_a_cause(test) {
            continue;
        }
        let title = format!("{} {}", test.outcome.kind().name(), test.id);
        errors.push(annotation(location(test, root), &title, &test.failure_message()));
    }
    let more = errors.len().saturating_sub(MAX_ERRORS);
    errors.truncate(MAX_ERRORS);
    if more > 0 {
        let summary = summary.strip_prefix(root).unwrap_or(summary).display().to_string().replace('\\', "/");
        errors.push(format!(
            "::notice title={}::{more} more causes of regressions or failed tests are not annotated (GitHub shows \
             {MAX_ERRORS} error annotations per step): the job summary and {summary} list every one",
            escape_property(&format!("{more} more not annotated"))
        ));
    }
    errors
}

/// Text as Markdown shows it: the characters that would make markup (a generic's `<T>` a tag, `*` emphasis, `|` a
/// table's cell) escaped.
fn markdown(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        if matches!(character, '\\' | '`' | '*' | '_' | '<' | '>' | '[' | ']' | '|' | '#') {
            escaped.push('\\');
        }
        escaped.push(character);
    }
    escaped
}

/// How many regressed tests' figures the job summary lists; the rest are counted.
const FIGURE_ROWS: usize = 20;

/// The page of the workflow run, whose artifacts hold the run's files, from GitHub's environment
/// (`GITHUB_SERVER_URL`, `GITHUB_REPOSITORY`, `GITHUB_RUN_ID`), when it gives one.
pub(crate) fn run_page() -> Option<String> {
    let var = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
    let (server, repository, run) = (var("GITHUB_SERVER_URL")?, var("GITHUB_REPOSITORY")?, var("GITHUB_RUN_ID")?);
    Some(format!("{}/{repository}/actions/runs/{run}", server.trim_end_matches('/')))
}

/// The job summary in Markdown, as `command` (`cargo ying test`, `gate`, `merge`) wrote it: a headline verdict, the
/// terminal's totals, the regressions by cause (a row per site where memory grew, with the tests it grew in), the
/// figures of the first regressed tests, the failed tests with why, and a link to the run's artifacts.
pub(crate) fn step_summary(run: &Run, command: &str) -> String {
    let failed: Vec<&TestRecord> = run.tests.iter().filter(|test| test.outcome.is_failure()).collect();
    let regressed: Vec<&TestRecord> =
        run.tests.iter().filter(|test| test.verdict() == Some(ying_report::GateVerdict::Regressed)).collect();
    let fails = !failed.is_empty() || run.regressed();
    let verdict = match (failed.len(), regressed.len()) {
        (0, 0) if fails => "the run fails".to_owned(),
        (0, 0) => "passed".to_owned(),
        (failed, regressed) => {
            let mut parts = Vec::new();
            if regressed > 0 {
                parts.push(format!("{regressed} test{} regressed", if regressed == 1 { "" } else { "s" }));
            }
            if failed > 0 {
                parts.push(format!("{failed} test{} failed", if failed == 1 { "" } else { "s" }));
            }
            parts.join(", ")
        }
    };
    let mut out = format!("## {} {command}: {verdict}\n\n", if fails { "❌" } else { "✅" });
    // The terminal's Summary line, word for word.
    out.push_str(&format!("{}\n\n", run.totals()));
    if let Some(gate) = &run.gate {
        let regressions: Vec<_> = gate.comparison.regressions().collect();
        if regressions.is_empty() {
            out.push_str("No leak test's retained memory grew beyond the tolerance.\n\n");
        } else {
            let tolerance = gate.gating.tolerance;
            let causes = run.causes();
            if !causes.is_empty() {
                out.push_str("### Where memory grew\n\n| where | most in one test | tests |\n|---|---:|---|\n");
                for cause in &causes {
                    let tests = some_named(&cause.tests, |test| format!("`{}`", test.id));
                    out.push_str(&format!(
                        "| {} | {} | {} |\n",
                        markdown(&cause.line),
                        ByteSize::new(cause.bytes).rounded(),
                        tests
                    ));
                }
                out.push('\n');
            }
            out.push_str(&format!(
                "### Memory regressions (tolerance {} or {}; lost bytes {}; held bytes {})\n\n| test | figure | baseline \
                 | now | change | past |\n|---|---|---:|---:|---:|---|\n",
                tolerance.relative,
                ByteSize::new(tolerance.absolute.bytes()).rounded(),
                ByteSize::new(tolerance.lost_floor()).rounded(),
                ByteSize::new(tolerance.held_floor()).rounded(),
            ));
            // A size in binary units; a count (allocations, tasks) as it is.
            let value = |figure: ying_report::Figure, value: u64| {
                if figure.is_bytes() { ByteSize::new(value).rounded().to_string() } else { value.to_string() }
            };
            for (id, row) in regressions.iter().take(FIGURE_ROWS) {
                out.push_str(&format!(
                    "| `{id}` | {} | {} | {} | {} | {} |\n",
                    row.figure.name(),
                    value(row.figure, row.baseline),
                    value(row.figure, row.now),
                    row.growth(),
                    row.rule()
                ));
            }
            if regressions.len() > FIGURE_ROWS {
                out.push_str(&format!(
                    "\n... and {} more figures; summary.json has every one.\n",
                    regressions.len() - FIGURE_ROWS
                ));
            }
            out.push('\n');
        }
    }
    if !failed.is_empty() {
        out.push_str("### Failed tests\n\n");
        for test in failed.iter().take(FIGURE_ROWS) {
            let reason = test.failure_message();
            let reason = reason.lines().next().unwrap_or_default();
            out.push_str(&format!("- `{}`: {}: {}\n", test.id, test.outcome.kind().name(), markdown(reason)));
        }
        if failed.len() > FIGURE_ROWS {
            out.push_str(&format!("- ... and {} more\n", failed.len() - FIGURE_ROWS));
        }
        out.push('\n');
    }
    if let Some(page) = run_page() {
        out.push_str(&format!("The run's reports and flamegraphs: [artifacts of this run]({page}#artifacts)\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{MAX_ERRORS, annotation, annotations, escape_data, markdown, step_summary};
    use crate::model::{Leak, Outcome, Run, TestRecord};
    use std::collections::BTreeMap;
    use std::path::Path;
    use std::time::Duration;
    use ying_report::report::{Attribution, Budgets, TestIdentity};
    use ying_report::{BaselineEntry, Figures, LeakReport, TargetKind, TestId};

    fn leak_test(name: &str, retained: u64, outcome: Outcome) -> TestRecord {
        let id = TestId::new("p", TargetKind::Test, "leaks", name);
        let mut record = TestRecord::new(id, outcome, Duration::from_millis(5), String::new());
        let identity = TestIdentity::new("p", None, "leaks", name, "tests/leaks.rs", 3);
        let mut report = LeakReport::new(identity, Attribution::Process, Budgets::default());
        report.figures.retained_bytes = retained;
        record.leak = Some(Leak { report, path: format!("reports/p/test/leaks/{name}.json") });
        record.package_dir = Some("/repo/crates/p".into());
        record
    }

    #[test]
    fn regressions_come_first_and_no_more_than_github_shows_are_written() {
        let mut tests: Vec<TestRecord> =
            (0..12).map(|index| leak_test(&format!("fails_{index:02}"), 0, Outcome::Failed)).collect();
        tests.push(leak_test("grew", 5000, Outcome::Passed));
        let mut run = Run { tests, elapsed: Duration::ZERO, max_fail: None, gate: None, interrupted: None };
        let grew = run.tests[12].id.clone();
        let entry = BaselineEntry::new(Figures { retained_bytes: 10, ..Figures::default() }, Vec::new());
        let baseline: BTreeMap<TestId, BaselineEntry> = [(grew, entry)].into();
        run.judge_by_default(&baseline, false);

        let summary = Path::new("/repo/crates/target/ying/summary.json");
        let lines = annotations(&run, Path::new("/repo"), summary);
        assert_eq!(lines.len(), MAX_ERRORS + 1, "{lines:#?}");
        assert!(
            lines[0].starts_with("::error file=crates/p/tests/leaks.rs,line=3,title=memory regression"),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].ends_with("::retained bytes grew from 10 to 5000 (+4990, +49900.0%25), past the tolerance"),
            "{}",
            lines[0]
        );
        assert!(lines[1].contains("title=failed p%3A%3Aleaks fails_00"), "{}", lines[1]);
        assert!(lines[..MAX_ERRORS].iter().all(|line| line.starts_with("::error ")));
        assert!(lines[MAX_ERRORS].starts_with("::notice "), "{}", lines[MAX_ERRORS]);
        assert!(
            lines[MAX_ERRORS].contains("::3 more causes of regressions or failed tests are not annotated")
                && lines[MAX_ERRORS].ends_with("the job summary and crates/target/ying/summary.json list every one"),
            "{}",
            lines[MAX_ERRORS]
        );
        // Outside the repository, the path stays relative to the package.
        assert!(
            annotations(&run, Path::new("/elsewhere"), summary)[0].starts_with("::error file=tests/leaks.rs,line=3,")
        );
    }

    #[test]
    fn a_regression_says_where_it_grew_in_its_annotation_and_the_job_summary() {
        use ying_report::Frame;
        use ying_report::report::{Reach, RetainedSite, Why};
        let mut forgets = leak_test("forgets", 25_088, Outcome::Passed);
        let site = |bytes, function: &str, line, kind, root: Option<&str>| {
            let frames = vec![Frame::new(function, Some("tests/leaks.rs".into()), Some(line))];
            let mut site = RetainedSite::new(bytes, 1, false, frames);
            site.why = vec![Why { kind, root: root.map(str::to_owned), bytes, blocks: 1 }];
            site
        };
        let report = &mut forgets.leak.as_mut().unwrap().report;
        report.retained_sites = vec![
            site(24_576, "leaks::fill<T>", 9, Reach::Static, Some("leaks::CACHE")),
            site(512, "leaks::forgets", 12, Reach::Lost, None),
        ];
        let mut before = crate::gate::entry(report);
        (before.retained_bytes, before.lost_bytes) = (24_576, Some(0));
        before.sites.retain(|(_, bytes)| *bytes > 512);
        let mut run =
            Run { tests: vec![forgets], elapsed: Duration::ZERO, max_fail: None, gate: None, interrupted: None };
        let baseline: BTreeMap<TestId, BaselineEntry> = [(run.tests[0].id.clone(), before)].into();
        run.judge_by_default(&baseline, true);

        let lines = annotations(&run, Path::new("/repo"), Path::new("/repo/target/ying/summary.json"));
        assert_eq!(
            lines,
            ["::error file=crates/p/tests/leaks.rs,line=12,title=memory regression in 1 test::grown at: 512 B in 1 \
              block, lost (nothing points to it), at tests/leaks.rs:12 in leaks::forgets%0Ap::leaks forgets: lost \
              bytes grew from 0 to 512 (+512), past the lost floor"]
        );
        let summary = step_summary(&run, "cargo ying gate");
        assert!(summary.starts_with("## ❌ cargo ying gate: 1 test regressed\n"), "{summary}");
        assert!(
            summary.contains("| `p::leaks forgets` | lost bytes | 0 B | 512 B | +512 | the lost floor |\n"),
            "{summary}"
        );
        assert!(
            summary.contains(
                "| 512 B in 1 block, lost (nothing points to it), at tests/leaks.rs:12 in leaks::forgets | 512 B | \
                 `p::leaks forgets` |\n"
            ),
            "{summary}"
        );
        assert_eq!(markdown("a <T> | *b* `c`"), "a \\<T\\> \\| \\*b\\* \\`c\\`");
    }

    /// One leaking function that 60 tests call: one annotation at its line naming the tests, and a job summary
    /// that stays short; a leak test that failed on its budget and regressed there takes no second annotation.
    #[test]
    fn one_cause_hitting_sixty_tests_is_one_annotation_and_one_row() {
        use ying_report::Frame;
        use ying_report::report::{Reach, RetainedSite, Why};
        let mut baseline = BTreeMap::new();
        let mut tests = Vec::new();
        for index in 0..60 {
            let outcome = if index == 0 { Outcome::Failed } else { Outcome::Passed };
            let mut test = leak_test(&format!("caches_{index:02}"), 4096, outcome);
            let frames = vec![
                Frame::new("p::Cache::register", Some("src/lib.rs".into()), Some(3424)),
                Frame::new(format!("leaks::caches_{index:02}"), Some("tests/leaks.rs".into()), Some(9)),
            ];
            let mut site = RetainedSite::new(4096, 1, false, frames);
            site.why = vec![Why { kind: Reach::Lost, root: None, bytes: 4096, blocks: 1 }];
            let report = &mut test.leak.as_mut().unwrap().report;
            report.retained_sites = vec![site];
            if index == 0 {
                report.message = Some("ying: leak test `caches_00` exceeded its budget".into());
                report.outcome = ying_report::report::Outcome::Failed;
            }
            let mut before = crate::gate::entry(report);
            (before.retained_bytes, before.lost_bytes, before.sites) = (0, Some(0), Vec::new());
            baseline.insert(test.id.clone(), before);
            tests.push(test);
        }
        let mut run = Run { tests, elapsed: Duration::ZERO, max_fail: None, gate: None, interrupted: None };
        run.judge_by_default(&baseline, true);

        let lines = annotations(&run, Path::new("/repo"), Path::new("/repo/target/ying/summary.json"));
        assert_eq!(lines.len(), 1, "{lines:#?}");
        assert!(
            lines[0].starts_with(
                "::error file=crates/p/src/lib.rs,line=3424,title=memory regression in 60 tests::grown at: 4.0 KiB \
                 (4096 bytes) in 1 block, lost (nothing points to it), at src/lib.rs:3424 in p::Cache::register"
            ),
            "{}",
            lines[0]
        );
        assert!(lines[0].contains("%0Ap::leaks caches_04: retained bytes grew from 0 to 4096"), "{}", lines[0]);
        assert!(lines[0].ends_with("%0A... and 55 more tests"), "{}", lines[0]);

        let summary = step_summary(&run, "cargo ying test");
        assert!(summary.starts_with("## ❌ cargo ying test: 60 tests regressed, 1 test failed\n"), "{summary}");
        assert!(summary.lines().count() < 60, "{summary}");
        let causes: Vec<&str> = summary.lines().filter(|line| line.contains("p::Cache::register |")).collect();
        assert_eq!(causes.len(), 1, "{summary}");
        assert!(causes[0].ends_with("`p::leaks caches_04`, and 55 more |"), "{summary}");
        assert!(
            summary.contains("- `p::leaks caches_00`: failed: ying: leak test \\`caches\\_00\\` exceeded"),
            "{summary}"
        );
    }

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
