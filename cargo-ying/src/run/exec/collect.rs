//! Collecting a leak test's report from the directory its process wrote it to: the report of this test, of this
//! version and of this run (it carries the run's token) is taken, completed (its deferred stacks symbolised) and
//! stored under the test's own file name; the mark the leak test left when it started says that a report was
//! due; anything else found there is refused with a warning that names where it was put, and the test keeps only
//! what its own report says.

use crate::model::Leak;
use std::path::Path;
use ying_report::report::STARTED_EXTENSION;
use ying_report::{LeakReport, TestId};

/// What a test's report directory held.
#[derive(Debug, Default)]
pub(crate) struct Collected {
    /// The test's report, stored under `reports/`.
    pub leak: Option<Leak>,
    /// A leak test started in the process (it left its mark with the run's token): a report was due.
    pub started: bool,
    /// A line for each file refused.
    pub warnings: Vec<String>,
}

/// The longest mark of a test's start that is read: a run's token is 32 characters.
const MARK_MAX: u64 = 64;

/// Takes the report of test `id` written in the run whose token is `run_token` from `dir` (the directory its
/// process wrote reports to) into `out_dir`, after `complete` has filled in what the test deferred (it returns
/// whether it changed the report).
pub(crate) fn take_report(
    id: &TestId,
    dir: &Path,
    out_dir: &Path,
    run_token: &str,
    mut complete: impl FnMut(&mut LeakReport) -> bool,
) -> Collected {
    let mut collected = Collected::default();
    let Ok(entries) = std::fs::read_dir(dir) else { return collected };
    let mut written: Vec<_> = entries.filter_map(|entry| entry.ok()).map(|entry| entry.path()).collect();
    written.sort();
    for path in written {
        let extension = path.extension().and_then(|extension| extension.to_str()).unwrap_or_default();
        let refused = match extension {
            "json" => match LeakReport::read_of_run(&path, id, run_token) {
                Ok(_) if collected.leak.is_some() => "the test wrote a second report".to_owned(),
                Ok(mut report) => {
                    // Completed where the test wrote it, then moved: no file is created.
                    let completed = if complete(&mut report) { report.rewrite(&path) } else { Ok(()) };
                    match completed.and_then(|()| store(&path, &id.report_path(), out_dir)) {
                        Ok(()) => {
                            collected.leak = Some(Leak { report, path: id.report_path() });
                            continue;
                        }
                        Err(error) => format!("it could not be stored: {error}"),
                    }
                }
                Err(error) => {
                    // The test's process ended while writing its report in the mark's file: a report was due.
                    collected.started |= LeakReport::is_cut_short(&path, run_token);
                    error.to_string()
                }
            },
            STARTED_EXTENSION
                if ying_report::read_bounded(&path, MARK_MAX).is_ok_and(|token| token == run_token.as_bytes()) =>
            {
                collected.started = true;
                continue;
            }
            STARTED_EXTENSION => "it is not the mark of a leak test started in this run".to_owned(),
            _ => "it is not a report".to_owned(),
        };
        let file_name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
        let kept = format!("refused/{}/{file_name}", id.file_stem());
        let place = match store(&path, &kept, out_dir) {
            Ok(()) => out_dir.join(&kept),
            Err(_) => path.clone(),
        };
        collected.warnings.push(format!("refused {}: {refused}", place.display()));
    }
    collected
}

/// Moves `from` to `relative` under `out_dir`.
fn store(from: &Path, relative: &str, out_dir: &Path) -> std::io::Result<()> {
    let destination = out_dir.join(relative);
    if let Some(dir) = destination.parent() {
        std::fs::create_dir_all(dir)?;
    }
    // The last run's file removed first: a rename over a file is sent to the disk on ext4 (`auto_da_alloc`, for
    // programs that replace a file that way), a write for every test that no reader needs.
    let _ = std::fs::remove_file(&destination);
    std::fs::rename(from, &destination).or_else(|_| std::fs::copy(from, &destination).map(drop))
}

#[cfg(test)]
mod tests {
    use super::take_report;
    use ying_report::report::{Attribution, Budgets, TestIdentity};
    use ying_report::{LeakReport, TargetKind, TestId};

    const TOKEN: &str = "0123abcd";

    fn report(name: &str, token: Option<&str>) -> LeakReport {
        let mut report = LeakReport::new(
            TestIdentity::new("p", None, "leaks", name, "tests/leaks.rs", 1),
            Attribution::Process,
            Budgets::default(),
        );
        report.run_token = token.map(str::to_owned);
        report
    }

    fn box_leak() -> TestId {
        TestId::new("p", TargetKind::Test, "leaks", "box_leak")
    }

    #[test]
    fn the_tests_own_report_of_this_run_is_taken_and_everything_else_refused_with_a_warning() {
        let (scratch, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let dir = scratch.path();
        let mut own = report("box_leak", Some(TOKEN));
        own.figures.retained_bytes = 1000;
        own.write(&dir.join("p.leaks.box_leak.json")).unwrap();
        std::fs::write(dir.join("p.leaks.box_leak.started"), TOKEN).unwrap();
        report("other", Some(TOKEN)).write(&dir.join("b.json")).unwrap();
        std::fs::write(dir.join("c.json"), "{\"schema_version\": 99}").unwrap();
        // Sorted before the real report: a forgery without the token, and garbage.
        report("box_leak", None).write(&dir.join("a-forged.json")).unwrap();
        report("box_leak", Some("another run")).write(&dir.join("a-stale.json")).unwrap();
        std::fs::write(dir.join("a-garbage.json"), "not json").unwrap();
        std::fs::write(dir.join("a-forged.started"), "another run").unwrap();
        std::fs::write(dir.join("notes.txt"), "stray").unwrap();

        let collected = take_report(&box_leak(), dir, out.path(), TOKEN, |_| false);
        let leak = collected.leak.expect("its own report");
        assert_eq!(leak.report.figures.retained_bytes, 1000, "the real figures, not the forged ones");
        assert_eq!(leak.path, "reports/p/test/leaks/box_leak.json");
        assert!(out.path().join(&leak.path).is_file());
        assert!(collected.started);
        let refused = out.path().join("refused/p/test/leaks/box_leak");
        let expected = [
            ("a-forged.json", "it does not carry this run's token"),
            ("a-forged.started", "it is not the mark of a leak test started in this run"),
            ("a-garbage.json", "expected ident at line 1 column 2"),
            ("a-stale.json", "it does not carry this run's token"),
            ("b.json", "it is the report of `p (crate leaks) other`"),
            ("c.json", "schema_version 99"),
            ("notes.txt", "it is not a report"),
        ];
        assert_eq!(collected.warnings.len(), expected.len(), "{:#?}", collected.warnings);
        for ((file, why), warning) in expected.iter().zip(&collected.warnings) {
            let place = refused.join(file);
            assert!(warning.starts_with(&format!("refused {}: ", place.display())), "{warning}");
            assert!(warning.contains(why), "{warning}");
            assert!(place.is_file(), "a refused file is kept for a look");
        }
    }

    #[test]
    fn a_foreign_report_alone_leaves_the_test_without_figures() {
        let (scratch, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        report("other", Some(TOKEN)).write(&scratch.path().join("a.json")).unwrap();
        let collected = take_report(&box_leak(), scratch.path(), out.path(), TOKEN, |_| false);
        assert!(collected.leak.is_none() && !collected.started);
        assert_eq!(collected.warnings.len(), 1);
    }

    #[test]
    fn a_report_cut_short_says_that_a_report_was_due() {
        let (scratch, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let path = scratch.path().join("p.leaks.box_leak.json");
        report("box_leak", Some(TOKEN)).write(&path).unwrap();
        let whole = std::fs::read_to_string(&path).unwrap();
        // The process ended while it wrote the report over its start mark.
        std::fs::write(&path, &whole[..whole.len() / 2]).unwrap();
        let collected = take_report(&box_leak(), scratch.path(), out.path(), TOKEN, |_| false);
        assert!(collected.leak.is_none() && collected.started, "{collected:?}");
        assert_eq!(collected.warnings.len(), 1, "{:?}", collected.warnings);
    }

    #[cfg(unix)]
    #[test]
    fn the_completed_report_is_stored_in_the_file_the_test_wrote() {
        use std::os::unix::fs::MetadataExt as _;
        let (scratch, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let written = scratch.path().join("p.leaks.box_leak.json");
        report("box_leak", Some(TOKEN)).write(&written).unwrap();
        let inode = std::fs::metadata(&written).unwrap().ino();
        let collected = take_report(&box_leak(), scratch.path(), out.path(), TOKEN, |report| {
            report.message = Some("completed".to_owned());
            true
        });
        let stored = out.path().join(collected.leak.expect("its report").path);
        let read = LeakReport::read(&stored, &box_leak()).unwrap();
        assert_eq!(read.message.as_deref(), Some("completed"), "what is stored is the completed report");
        assert_eq!(std::fs::metadata(&stored).unwrap().ino(), inode, "moved, not a file created");
        assert!(!written.exists());
    }
}
