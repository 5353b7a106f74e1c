//! The gate's side of what each test of a nextest run of the profile `ying` leaves (see `ying_report::nextest`,
//! where the record is defined, for the run's directory): every record of a run read and checked, what nextest
//! listed of each binary through the wrapper (`listed/`: the gate tells from it the tests nextest skipped, its
//! filter, and ignored from those it ran), the last run found, and old runs pruned.

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use ying_report::TestId;
use ying_report::report::TestIdentity;

pub(crate) use ying_report::nextest::{Exec, RUNS, Record, TMP, Unnamed, run_dir};

/// What nextest listed of one test binary, as its list phase ran it through the wrapper: the tests of one
/// `--list` (or `--list --ignored`) of it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Listing {
    /// nextest's id of the binary (`NEXTEST_BINARY_ID`).
    pub binary_id: String,
    /// The binary, whose file name names a library's crate.
    pub binary: std::path::PathBuf,
    /// The listing of its ignored tests (`--ignored`).
    pub ignored: bool,
    /// The tests' names.
    pub tests: Vec<String>,
}

impl Listing {
    /// The names of the tests in the output of `<test binary> --list --format terse` (`name: test` lines).
    pub(crate) fn tests_of(terse: &str) -> Vec<String> {
        terse.lines().filter_map(|line| line.strip_suffix(": test")).map(str::to_owned).collect()
    }

    /// Writes the listing into `run_dir`.
    pub(crate) fn write(&self, run_dir: &Path) -> Result<()> {
        let dir = run_dir.join(LISTED);
        std::fs::create_dir_all(&dir).map_err(Error::io("create", &dir))?;
        let suffix = if self.ignored { ".ignored" } else { "" };
        let path = dir.join(format!("{}{suffix}.json", ying_report::file_name_component(&self.binary_id)));
        ying_report::write_own(&path, self).map_err(Error::io("write", &path))
    }

    /// Every listing in `run_dir` (none for a run of a profile whose wrapper lists nothing).
    pub(crate) fn read_all(run_dir: &Path) -> Result<Vec<Self>> {
        let dir = run_dir.join(LISTED);
        let Ok(entries) = std::fs::read_dir(&dir) else { return Ok(Vec::new()) };
        let mut listings = Vec::new();
        for entry in entries {
            let path = entry.map_err(Error::io("read", &dir))?.path();
            if path.extension().is_some_and(|extension| extension == "json") {
                listings.push(read_json(&path)?);
            }
        }
        listings.sort_by(|a: &Self, b: &Self| (&a.binary_id, a.ignored).cmp(&(&b.binary_id, b.ignored)));
        Ok(listings)
    }
}

/// The directory of a run's listings.
const LISTED: &str = "listed";

/// The JSON file at `path`, as `T`.
fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text = ying_report::read_text(path).map_err(|error| Error::io("read", path)(error.into()))?;
    serde_json::from_str(&text).map_err(|error| Error::Io {
        action: "read",
        path: path.to_owned(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, error),
    })
}

/// The directory of the last nextest run under `out_dir`: the one whose records changed last.
pub(crate) fn last_run(out_dir: &Path) -> Option<PathBuf> {
    let runs = std::fs::read_dir(out_dir.join(RUNS)).ok()?;
    runs.filter_map(|entry| entry.ok())
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()))
        .filter_map(|entry| {
            let tests = entry.path().join("tests");
            let changed = std::fs::metadata(&tests).and_then(|metadata| metadata.modified()).ok()?;
            Some((changed, entry.path()))
        })
        .max()
        .map(|(_, path)| path)
}

/// How many nextest runs [`prune`] keeps beside the one judged, as nextest keeps a few of its own.
pub(crate) const KEPT_RUNS: usize = 4;

/// Removes the directories of nextest runs under `out_dir` but the `judged` one and the [`KEPT_RUNS`] whose records
/// changed last (the newest, which a gate of another `--run-id` may still want). A directory that cannot be removed
/// is left; each run's records, reports and listing go with it.
pub(crate) fn prune(out_dir: &Path, judged: &Path) {
    let Ok(runs) = std::fs::read_dir(out_dir.join(RUNS)) else { return };
    let mut runs: Vec<(std::time::SystemTime, PathBuf)> = runs
        .filter_map(|entry| entry.ok())
        // Directories only, never through a link.
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()))
        .map(|entry| {
            let changed = std::fs::metadata(entry.path().join("tests"))
                .or_else(|_| entry.metadata())
                .and_then(|metadata| metadata.modified())
                .unwrap_or(std::time::UNIX_EPOCH);
            (changed, entry.path())
        })
        .filter(|(_, path)| path != judged)
        .collect();
    runs.sort_by(|a, b| b.cmp(a));
    for (_, path) in runs.into_iter().skip(KEPT_RUNS) {
        let _ = std::fs::remove_dir_all(path);
    }
}

/// Writes `record` into `run_dir`, replacing an earlier attempt's.
pub(crate) fn write(record: &Record, run_dir: &Path) -> Result<()> {
    record.write(run_dir).map_err(|(path, source)| Error::io("write", &path)(source))
}

/// Every record in `run_dir`, in the order of the tests' ids (none when it has no `tests/`). A record whose
/// numbers are out of range, or that names a report elsewhere than its test's, is an error naming it and the
/// field. The walk never follows a link: none is written.
pub(crate) fn read_all(run_dir: &Path) -> Result<Vec<Record>> {
    let mut records: Vec<Record> = Vec::new();
    let tests = run_dir.join("tests");
    if !std::fs::symlink_metadata(&tests).is_ok_and(|metadata| metadata.is_dir()) {
        return Ok(records);
    }
    let mut dirs = vec![tests];
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir).map_err(Error::io("read", &dir))?;
        for entry in entries {
            let entry = entry.map_err(Error::io("read", &dir))?;
            let (path, kind) = (entry.path(), entry.file_type().map_err(Error::io("read", &dir))?);
            if kind.is_dir() {
                dirs.push(path);
            } else if kind.is_file() && path.extension().is_some_and(|extension| extension == "json") {
                let record: Record = read_json(&path)?;
                check(&record).map_err(|source| Error::io("read", &path)(source.into()))?;
                records.push(record);
            }
        }
    }
    records.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(records)
}

/// The record's numbers in range, and its report where its test's is stored; so are its earlier attempts', which
/// may not be more than it says came before.
fn check(record: &Record) -> std::result::Result<(), ying_report::ReadError> {
    use ying_report::summary::{check_attempts, check_path, check_seconds};
    let key = |field: &str| format!("{field}` of `{}", record.id);
    check_seconds(&key("duration"), record.duration)?;
    if let Some(timeout) = record.timeout {
        check_seconds(&key("timeout"), timeout)?;
    }
    check_attempts(&key("attempt"), record.attempt)?;
    if let Some(allowed) = record.attempts_allowed {
        check_attempts(&key("attempts_allowed"), allowed)?;
    }
    if record.earlier.len() >= record.attempt as usize {
        return Err(ying_report::ReadError::OutOfRange {
            key: key("earlier"),
            found: format!("{} attempts", record.earlier.len()),
            expected: format!("fewer than attempt {}", record.attempt),
        });
    }
    if let Some(report) = &record.report {
        check_path(&key("report"), report, &record.id.report_path())?;
    }
    record.earlier.iter().try_for_each(check)
}

/// The test's id and its identity as the interposer reports it (`ying_report::nextest::test_of`); an error for a
/// binary id of no form nextest gives.
pub(crate) fn test_of(binary_id: &str, binary: &Path, name: &str) -> Result<(TestId, TestIdentity)> {
    ying_report::nextest::test_of(binary_id, binary, name)
        .ok_or_else(|| Error::Wrap(crate::error::WrapError::BinaryId(binary_id.to_owned())))
}

#[cfg(test)]
mod tests {
    use super::{Record, last_run, run_dir, test_of};
    use std::path::Path;
    use ying_report::{TargetKind, TestId, TestOutcome};

    fn record(name: &str, attempt: u32) -> Record {
        Record {
            id: TestId::new("p", TargetKind::Test, "t", name),
            outcome: TestOutcome::Passed,
            signal: None,
            exit_code: Some(0),
            unreported: false,
            unmeasured: false,
            duration: 0.5,
            started_at: "2026-12-04T17:00:00.000Z".to_owned(),
            attempt,
            report: Some(TestId::new("p", TargetKind::Test, "t", name).report_path()),
            warnings: Vec::new(),
            workspace_root: Some("/ws".to_owned()),
            running: false,
            stopped_by: None,
            timeout: None,
            attempts_allowed: None,
            unnamed: None,
            panic: None,
            output_tail: None,
            earlier: Vec::new(),
            exec: None,
        }
    }

    #[test]
    fn the_judged_run_and_the_newest_few_are_kept_the_rest_pruned() {
        let out = tempfile::tempdir().unwrap();
        let runs: Vec<std::path::PathBuf> = (0..8).map(|n| run_dir(out.path(), &format!("run-{n}"))).collect();
        for (n, run) in runs.iter().enumerate() {
            std::fs::create_dir_all(run.join("tests")).unwrap();
            let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000 + n as u64);
            std::fs::File::open(run.join("tests")).unwrap().set_modified(at).unwrap();
        }
        // The oldest is judged (`--run-id`): it stays, with the four newest.
        super::prune(out.path(), &runs[0]);
        let left: Vec<bool> = runs.iter().map(|run| run.exists()).collect();
        assert_eq!(left, [true, false, false, false, true, true, true, true]);
    }

    #[test]
    fn stacks_left_unnamed_are_named_only_from_the_binary_the_test_ran() {
        let dir = tempfile::tempdir().unwrap();
        let binary = dir.path().join("plain-0123");
        std::fs::write(&binary, "the binary").unwrap();
        let stamp = ying_frames::ExecutableStamp::of(&std::fs::metadata(&binary).unwrap());
        let unnamed = super::Unnamed { binary: binary.clone(), package_dir: dir.path().to_owned(), stamp };
        assert!(unnamed.is_there());
        std::fs::write(&binary, "the binary, built anew").unwrap();
        assert!(!unnamed.is_there(), "another build names other code at the same addresses");
        std::fs::remove_file(&binary).unwrap();
        assert!(!unnamed.is_there());
    }

    #[test]
    fn a_record_out_of_range_or_naming_another_file_is_an_error_naming_it_and_a_linked_loop_is_not_walked() {
        let out = tempfile::tempdir().unwrap();
        let run = run_dir(out.path(), "4e0c0a2e-run");
        record("a", 1).write(&run).unwrap();
        let tests = run.join("tests");
        std::os::unix::fs::symlink(&tests, tests.join("loop")).unwrap();
        assert_eq!(super::read_all(&run).unwrap().len(), 1, "the loop is not followed");
        let path = Record::path(&run, &record("a", 1).id);
        type Change = fn(&mut Record);
        let cases: [(&str, Change); 5] = [
            ("`duration` of `p::t a` is 1e300, not a duration from 0 to 31536000 seconds", |record| {
                record.duration = 1e300;
            }),
            ("`attempt` of `p::t a` is 4294967295, not a count from 1 to 1000", |record| record.attempt = u32::MAX),
            (
                "`report` of `p::t a` is \"/etc/hostname\", not \"reports/p/test/t/a.json\", where a run writes it",
                |record| {
                    record.report = Some("/etc/hostname".to_owned());
                },
            ),
            (
                "`report` of `p::t a` is \"../../x.json\", not \"reports/p/test/t/a.json\", where a run writes it",
                |record| {
                    record.report = Some("../../x.json".to_owned());
                },
            ),
            ("`earlier` of `p::t a` is 1 attempts, not fewer than attempt 1", |record| {
                record.earlier = vec![record.clone()];
            }),
        ];
        for (message, change) in cases {
            let mut bad = record("a", 1);
            change(&mut bad);
            bad.write(&run).unwrap();
            let error = super::read_all(&run).unwrap_err();
            assert_eq!(error.to_string(), format!("failed to read {}", path.display()), "{message}");
            assert_eq!(std::error::Error::source(&error).unwrap().to_string(), message);
        }
    }

    #[test]
    fn a_runs_records_are_read_back_the_last_attempt_of_each_test_kept() {
        let out = tempfile::tempdir().unwrap();
        let run = run_dir(out.path(), "4e0c0a2e-run");
        record("b::second", 1).write(&run).unwrap();
        record("a_first", 1).write(&run).unwrap();
        record("a_first", 2).write(&run).unwrap();
        let records = super::read_all(&run).unwrap();
        assert_eq!(records, [record("a_first", 2), record("b::second", 1)]);
        assert_eq!(last_run(out.path()), Some(run));
    }

    #[test]
    fn nextests_binary_ids_name_the_test_and_its_crate() {
        let bin = Path::new("/t/debug/deps/leak_fixtures-0123456789abcdef");
        let (id, identity) = test_of("leak-fixtures", bin, "tests::same_unit").unwrap();
        assert_eq!((id.kind, id.to_string().as_str()), (TargetKind::Lib, "leak-fixtures tests::same_unit"));
        assert_eq!(identity.krate, "leak_fixtures");
        let (id, _) = test_of("leak-fixtures::leaks", bin, "box_leak").unwrap();
        assert_eq!(id.to_string(), "leak-fixtures::leaks box_leak");
        let (id, identity) = test_of("p::bin/tool", bin, "tests::t").unwrap();
        assert_eq!((id.kind, identity.bin_name.as_deref()), (TargetKind::Bin, Some("tool")));
        assert!(test_of("p::widget/x", bin, "t").is_err() && test_of("::t", bin, "t").is_err());
    }
}
