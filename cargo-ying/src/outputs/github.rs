//! GitHub Actions: `::error` annotations and the job summary, from the run model.

use crate::gate::Row;
use crate::model::{Run, TestRecord};
use std::path::{Path, PathBuf};

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

/// Where a test's source line is, relative to the repository root `root` (GitHub attaches annotations by paths
/// from the repository root, which in a nested workspace is not the package's directory).
fn location(test: &TestRecord, root: &Path) -> Option<(String, u32)> {
    let (file, line) = test.source()?;
    let Some(package_dir) = &test.package_dir else { return Some((file, line)) };
    let path = package_dir.join(&file);
    let relative = path.strip_prefix(root).ok().map(Path::to_owned).or_else(|| {
        let (path, root) = (path.canonicalize().ok()?, root.canonicalize().ok()?);
        path.strip_prefix(root).ok().map(Path::to_owned)
    });
    Some((relative.map_or(file, |relative| relative.display().to_string().replace('\\', "/")), line))
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

/// The `::error` annotations, at each test's source line where known: one per regressed leak test first (the
/// figures that grew, then the sites they grew at), then one per failed test; at most [`MAX_ERRORS`], and then a
/// `::notice` that says how many more there are and where they are all listed. Paths are relative to `root`, the
/// repository root.
pub(crate) fn annotations(run: &Run, root: &Path) -> Vec<String> {
    let mut errors = Vec::new();
    for test in &run.tests {
        let rows: Vec<String> = test.gate.iter().flat_map(|gate| gate.regressions()).map(Row::describe).collect();
        if !rows.is_empty() {
            let sites: Vec<String> = test.grown_sites().iter().map(|site| format!("  {site}")).collect();
            let message = if sites.is_empty() {
                rows.join("\n")
            } else {
                format!("{}\ngrown at:\n{}", rows.join("\n"), sites.join("\n"))
            };
            errors.push(annotation(location(test, root), &format!("memory regression {}", test.id), &message));
        }
    }
    for test in run.tests.iter().filter(|test| test.outcome.is_failure()) {
        let title = format!("{} {}", test.outcome.kind().name(), test.id);
        errors.push(annotation(location(test, root), &title, &test.failure_message()));
    }
    let more = errors.len().saturating_sub(MAX_ERRORS);
    errors.truncate(MAX_ERRORS);
    if more > 0 {
        errors.push(format!(
            "::notice title={}::{more} more failed or regressed tests are not annotated (GitHub shows {MAX_ERRORS} \
             error annotations per step): the job summary and target/ying/summary.json list every one",
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

/// The job summary in Markdown: totals, regressions against the baseline with the sites each grew at, failed
/// tests.
pub(crate) fn step_summary(run: &Run) -> String {
    let mut out = String::from("## cargo ying test\n\n");
    let failed: Vec<&TestRecord> = run.tests.iter().filter(|test| test.outcome.is_failure()).collect();
    // The terminal's Summary line, word for word.
    out.push_str(&format!("{}\n\n", run.totals()));
    if let Some(gate) = &run.gate {
        let regressions: Vec<_> = gate.comparison.regressions().collect();
        if regressions.is_empty() {
            out.push_str("No leak test's retained memory grew beyond the tolerance.\n\n");
        } else {
            let tolerance = gate.gating.tolerance;
            out.push_str(&format!(
                "### Memory regressions (tolerance {} or {} bytes; lost bytes {} bytes; held bytes {} bytes)\n\n| test | figure | baseline | now | change | past |\n|---|---|---:|---:|---:|---|\n",
                tolerance.relative,
                tolerance.absolute.bytes(),
                tolerance.lost_floor(),
                tolerance.held_floor()
            ));
            for (id, row) in regressions {
                out.push_str(&format!(
                    "| `{id}` | {} | {} | {} | {} | {} |\n",
                    row.figure.name(),
                    row.baseline,
                    row.now,
                    row.growth(),
                    row.rule()
                ));
            }
            out.push('\n');
            for test in &run.tests {
                let sites = test.grown_sites();
                if !sites.is_empty() {
                    out.push_str(&format!("`{}` grew at:\n\n", test.id));
                    for site in sites {
                        out.push_str(&format!("- {}\n", markdown(&site)));
                    }
                    out.push('\n');
                }
            }
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

        let lines = annotations(&run, Path::new("/repo"));
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
            lines[MAX_ERRORS].contains("::3 more failed or regressed tests are not annotated"),
            "{}",
            lines[MAX_ERRORS]
        );
        // Outside the repository, the path stays relative to the package.
        assert!(annotations(&run, Path::new("/elsewhere"))[0].starts_with("::error file=tests/leaks.rs,line=3,"));
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

        let lines = annotations(&run, Path::new("/repo"));
        assert_eq!(
            lines[0],
            "::error file=crates/p/tests/leaks.rs,line=3,title=memory regression p%3A%3Aleaks forgets::lost bytes grew \
             from 0 to 512 (+512), past the lost floor%0Agrown at:%0A  512 B in 1 block, lost (nothing points to it), at tests/leaks.rs:12 \
             in leaks::forgets"
        );
        let summary = step_summary(&run);
        assert!(
            summary.contains("| `p::leaks forgets` | lost bytes | 0 | 512 | +512 | the lost floor |\n"),
            "{summary}"
        );
        assert!(
            summary.contains(
                "`p::leaks forgets` grew at:\n\n- 512 B in 1 block, lost (nothing points to it), at \
                 tests/leaks.rs:12 in leaks::forgets\n\n"
            ),
            "{summary}"
        );
        assert_eq!(markdown("a <T> | *b* `c`"), "a \\<T\\> \\| \\*b\\* \\`c\\`");
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
