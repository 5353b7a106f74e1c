//! What the wrapper leaves of each test a nextest run ran, for `cargo ying gate`: under
//! `<target-dir>/ying/nextest/<run-id>/` (the run's id is nextest's `NEXTEST_RUN_ID`), the test's report under
//! `reports/` as `cargo ying test` stores it, and its record under `tests/`: how it ended, how long it took, which
//! attempt it was, and when it started. A test nextest ran again (`retries`) has the record of its last attempt,
//! which keeps those of the attempts before it.
//!
//! A record is written as the test starts (`running`), and again when it ended: by the wrapper of an archive's test,
//! which waits for it, and by the gate for a test the wrapper ran in its own place ([`Exec`], from what its process
//! left; `run::exec::finish`). A test killed outright (SIGKILL after its timeout's grace period) keeps the first,
//! so the gate knows it ran and did not end. The run's scratch files (each process's report directory, its end
//! mark) are under `tmp/`, and what each binary's tests run with under `plans/`. Under
//! `listed/`, what nextest listed of each binary through the wrapper (`list-wrapper`): the gate tells from it the
//! tests nextest skipped (its filter) and ignored from those it ran.
//!
//! Each record is written whole (a temporary file renamed), after the report it names; a run read while tests still
//! run has the records of those that ended, and of those running as running.

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use ying_report::report::TestIdentity;
use ying_report::{TargetKind, TestId, TestOutcome};

/// The directory of nextest's runs under `<target-dir>/ying`.
const RUNS: &str = "nextest";

/// How one attempt of a test ended, as the wrapper saw it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Record {
    /// Which test.
    #[serde(flatten)]
    pub id: TestId,
    /// How it ended (`passed`, `failed`, `crashed`).
    pub outcome: TestOutcome,
    /// The signal that killed it (`SIGABRT`), for a test that crashed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// The code its process exited with, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// A leak test started in the process and its process exited before it reported: a failure, what it retained
    /// unknown.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unreported: bool,
    /// It passed in a process that showed no sign of the allocation interposer: nothing measured it, a failure.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unmeasured: bool,
    /// How long its process ran, in seconds.
    pub duration: f64,
    /// When it started, RFC 3339 in UTC.
    pub started_at: String,
    /// Which attempt, from 1 (nextest's `NEXTEST_ATTEMPT`).
    pub attempt: u32,
    /// Its report, relative to the run's directory, for a test that reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
    /// What went wrong around the test without failing it (a report refused, say).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The root of the workspace whose test it is, as nextest names it (`NEXTEST_WORKSPACE_ROOT`, remapped for an
    /// archive's run): the gate refuses a run of another workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_root: Option<String>,
    /// The test was running when this was written: a record that stays so is of a test killed before
    /// it ended.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub running: bool,
    /// The signal nextest sent the wrapper while the test ran (SIGTERM at its timeout, or when the run stopped),
    /// passed on to the test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<String>,
    /// The timeout of nextest's profile, in seconds, for a test that ran to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<f64>,
    /// How many attempts nextest gives the test (`NEXTEST_TOTAL_ATTEMPTS`: its retries and the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts_allowed: Option<u32>,
    /// The test binary whose debug information names the stacks its report left as addresses, and the directory
    /// of its package, for `cargo ying gate` to name them (once per binary, for every test of the run); absent when
    /// the wrapper named them itself (an archive's binary, gone once nextest's run ends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unnamed: Option<Unnamed>,
    /// The first panic's message in the test's output (`panicked at tests/a.rs:9:5: assertion failed`), which
    /// nextest captured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub panic: Option<String>,
    /// The last lines of the test's output, for a test that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tail: Option<String>,
    /// The records of the attempts before this one, first first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier: Vec<Record>,
    /// For a test the wrapper ran in its own place (`exec`), left `running` for the gate to finish: the process,
    /// which the test kept, and what the gate needs to finish it (see `run::exec::finish`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<Exec>,
}

/// What the gate needs to finish the record of a test the wrapper ran in its own place: the wrapper is not there
/// to see it end.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Exec {
    /// The test's process id: its reports went to `tmp/<pid>/`, its end mark to `tmp/<pid>.end`.
    pub pid: u32,
    /// The token its report must carry.
    pub token: String,
    /// nextest's id of its binary (`NEXTEST_BINARY_ID`) and its name (`NEXTEST_TEST_NAME`), as nextest's JUnit
    /// names the test case.
    pub binary_id: String,
    /// See `binary_id`.
    pub test_name: String,
    /// The timeout of nextest's profile, in seconds, when it has one: a test stopped that long after it started
    /// timed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<f64>,
    /// The JUnit file nextest's profile writes, which holds why a test failed (nextest captured its output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub junit: Option<PathBuf>,
}

impl Exec {
    /// The directory the test's process wrote its reports to, under `run_dir`.
    pub(crate) fn report_dir(&self, run_dir: &Path) -> PathBuf {
        run_dir.join(TMP).join(self.pid.to_string())
    }

    /// The file the test's process left its end mark in (`ying_report::end_mark`), under `run_dir`.
    pub(crate) fn end_mark(&self, run_dir: &Path) -> PathBuf {
        run_dir.join(TMP).join(format!("{}.end", self.pid))
    }
}

/// The directory of a run's scratch files: each test process's report directory, and its end mark.
pub(crate) const TMP: &str = "tmp";

/// Where the stacks a report left as addresses are named from.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Unnamed {
    /// The test binary.
    pub binary: std::path::PathBuf,
    /// The directory of its package, which the report's source paths are made relative to.
    pub package_dir: std::path::PathBuf,
    /// The binary's identity when the test ran: one built anew since names other code at the same addresses.
    pub stamp: Option<ying_frames::ExecutableStamp>,
}

impl Unnamed {
    /// Whether the binary is still the one the test ran.
    pub(crate) fn is_there(&self) -> bool {
        let now = std::fs::metadata(&self.binary).ok().and_then(|metadata| ying_frames::ExecutableStamp::of(&metadata));
        now.is_some() && now == self.stamp
    }
}

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

/// The directory of the nextest run `run_id` under `out_dir` (`<target-dir>/ying`).
pub(crate) fn run_dir(out_dir: &Path, run_id: &str) -> PathBuf {
    out_dir.join(RUNS).join(ying_report::file_name_component(run_id))
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

impl Record {
    /// Where the record of `id` is in `run_dir`.
    fn path(run_dir: &Path, id: &TestId) -> PathBuf {
        run_dir.join("tests").join(format!("{}.json", id.file_stem()))
    }

    /// The record `run_dir` holds of test `id`, if one is there and reads.
    pub(crate) fn read(run_dir: &Path, id: &TestId) -> Option<Self> {
        read_json(&Self::path(run_dir, id)).ok()
    }

    /// Writes the record into `run_dir`, replacing an earlier attempt's.
    pub(crate) fn write(&self, run_dir: &Path) -> Result<()> {
        let path = Self::path(run_dir, &self.id);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(Error::io("create", dir))?;
        }
        ying_report::write_own(&path, self).map_err(Error::io("write", &path))
    }

    /// Every record in `run_dir`, in the order of the tests' ids (none when it has no `tests/`). A record whose
    /// numbers are out of range, or that names a report elsewhere than its test's, is an error naming it and the
    /// field. The walk never follows a link: the wrapper writes none.
    pub(crate) fn read_all(run_dir: &Path) -> Result<Vec<Self>> {
        let mut records: Vec<Self> = Vec::new();
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
                    let record: Self = read_json(&path)?;
                    record.check().map_err(|source| Error::io("read", &path)(source.into()))?;
                    records.push(record);
                }
            }
        }
        records.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(records)
    }

    /// The record's numbers in range, and its report where the wrapper stores its test's; so are its earlier
    /// attempts', which may not be more than it says came before.
    fn check(&self) -> std::result::Result<(), ying_report::ReadError> {
        use ying_report::summary::{check_attempts, check_path, check_seconds};
        let key = |field: &str| format!("{field}` of `{}", self.id);
        check_seconds(&key("duration"), self.duration)?;
        if let Some(timeout) = self.timeout {
            check_seconds(&key("timeout"), timeout)?;
        }
        check_attempts(&key("attempt"), self.attempt)?;
        if let Some(allowed) = self.attempts_allowed {
            check_attempts(&key("attempts_allowed"), allowed)?;
        }
        if self.earlier.len() >= self.attempt as usize {
            return Err(ying_report::ReadError::OutOfRange {
                key: key("earlier"),
                found: format!("{} attempts", self.earlier.len()),
                expected: format!("fewer than attempt {}", self.attempt),
            });
        }
        if let Some(report) = &self.report {
            check_path(&key("report"), report, &self.id.report_path())?;
        }
        self.earlier.iter().try_for_each(Self::check)
    }
}

/// The test's id and its identity as the interposer reports it, from nextest's binary id (`pkg`, `pkg::name`,
/// `pkg::kind/name`), the binary (whose file name, less cargo's hash, is a library's crate) and the test's name.
pub(crate) fn test_of(binary_id: &str, binary: &Path, name: &str) -> Result<(TestId, TestIdentity)> {
    let invalid = || Error::Wrap(crate::error::WrapError::BinaryId(binary_id.to_owned()));
    let (package, kind, target) = match binary_id.split_once("::") {
        None => {
            let stem = binary.file_name().and_then(|name| name.to_str()).unwrap_or(binary_id);
            let krate = stem.rsplit_once('-').map_or(stem, |(krate, _)| krate);
            (binary_id, TargetKind::Lib, krate.to_owned())
        }
        Some((package, rest)) => match rest.split_once('/') {
            None => (package, TargetKind::Test, rest.to_owned()),
            Some((kind, target)) => (package, TargetKind::from_cargo(&[kind]).ok_or_else(invalid)?, target.to_owned()),
        },
    };
    if package.is_empty() || target.is_empty() {
        return Err(invalid());
    }
    let id = TestId::new(package, kind, &target, name);
    let identity = TestIdentity::listed(package, kind, &target, name);
    Ok((id, identity))
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
        assert_eq!(Record::read_all(&run).unwrap().len(), 1, "the loop is not followed");
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
            let error = Record::read_all(&run).unwrap_err();
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
        let records = Record::read_all(&run).unwrap();
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
