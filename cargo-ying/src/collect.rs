//! Collecting a leak test's report from the directory its process wrote it to: the report of this test, of this
//! version, is taken and stored under the test's own file name; anything else found there is refused with a
//! warning that names where it was put, and the test is shown as having no figures.

use crate::model::Leak;
use std::path::Path;
use ying_report::{LeakReport, TestId};

/// What a test's report directory held.
#[derive(Debug, Default)]
pub struct Collected {
    /// The test's report, stored under `reports/`.
    pub leak: Option<Leak>,
    /// A line for each file refused.
    pub warnings: Vec<String>,
}

/// Takes the report of test `id` from `dir` (the directory its process wrote reports to) into `out_dir`.
pub fn take_report(id: &TestId, dir: &Path, out_dir: &Path) -> Collected {
    let mut collected = Collected::default();
    let Ok(entries) = std::fs::read_dir(dir) else { return collected };
    let mut written: Vec<_> = entries
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "json"))
        .collect();
    written.sort();
    for path in written {
        let refused = match LeakReport::read(&path, id) {
            Ok(_) if collected.leak.is_some() => "the test wrote a second report".to_owned(),
            Ok(report) => match store(&path, &id.report_path(), out_dir) {
                Ok(()) => {
                    collected.leak = Some(Leak { report, path: id.report_path() });
                    continue;
                }
                Err(error) => format!("it could not be stored: {error}"),
            },
            Err(error) => error.to_string(),
        };
        let file_name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
        let kept = format!("refused/{}/{file_name}", id.file_stem());
        let place = match store(&path, &kept, out_dir) {
            Ok(()) => out_dir.join(&kept),
            Err(_) => path.clone(),
        };
        collected.warnings.push(format!("refused the report {}: {refused}", place.display()));
    }
    collected
}

/// Moves `from` to `relative` under `out_dir`.
fn store(from: &Path, relative: &str, out_dir: &Path) -> std::io::Result<()> {
    let destination = out_dir.join(relative);
    if let Some(dir) = destination.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::rename(from, &destination).or_else(|_| std::fs::copy(from, &destination).map(drop))
}

#[cfg(test)]
mod tests {
    use super::take_report;
    use ying_report::report::{Attribution, Budgets, TestIdentity};
    use ying_report::{LeakReport, TargetKind, TestId};

    fn report(name: &str) -> LeakReport {
        LeakReport::new(
            TestIdentity::new("p", None, "leaks", name, "tests/leaks.rs", 1),
            Attribution::Process,
            Budgets::default(),
        )
    }

    #[test]
    fn the_tests_own_report_is_taken_and_others_refused_with_a_warning() {
        let (scratch, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let id = TestId::new("p", TargetKind::Test, "leaks", "box_leak");
        report("box_leak").write(&scratch.path().join("a.json")).unwrap();
        report("other").write(&scratch.path().join("b.json")).unwrap();
        std::fs::write(scratch.path().join("c.json"), "{\"schema_version\": 99}").unwrap();
        let collected = take_report(&id, scratch.path(), out.path());
        let leak = collected.leak.expect("its own report");
        assert_eq!(leak.path, "reports/p/test/leaks/box_leak.json");
        assert!(out.path().join(&leak.path).is_file());
        assert_eq!(collected.warnings.len(), 2, "{:?}", collected.warnings);
        let refused = out.path().join("refused/p/test/leaks/box_leak/b.json");
        assert!(collected.warnings[0].contains(&refused.display().to_string()), "{:?}", collected.warnings);
        assert!(collected.warnings[0].contains("it is the report of `p (crate leaks) other`"));
        assert!(collected.warnings[1].contains("schema_version 99"), "{:?}", collected.warnings);
        assert!(refused.is_file(), "a refused report is kept for a look");
    }

    #[test]
    fn a_foreign_report_alone_leaves_the_test_without_figures() {
        let (scratch, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        report("other").write(&scratch.path().join("a.json")).unwrap();
        let collected =
            take_report(&TestId::new("p", TargetKind::Test, "leaks", "box_leak"), scratch.path(), out.path());
        assert!(collected.leak.is_none());
        assert_eq!(collected.warnings.len(), 1);
    }
}
