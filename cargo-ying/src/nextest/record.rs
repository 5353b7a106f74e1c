//! What the wrapper leaves of each test a nextest run ran, for `cargo ying gate`: under
//! `<target-dir>/ying/nextest/<run-id>/` (the run's id is nextest's `NEXTEST_RUN_ID`), the test's report under
//! `reports/` as `cargo ying test` stores it, and its record under `tests/`: how it ended, how long it took, which
//! attempt it was, and when it started. A test nextest ran again (`retries`) has the record of its last attempt.
//!
//! Each record is written whole (a temporary file renamed), after the report it names; a run read while tests still
//! run has the records of those that ended.

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use ying_report::{TestId, TestOutcome};

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

impl Record {
    /// Where the record of `id` is in `run_dir`.
    fn path(run_dir: &Path, id: &TestId) -> PathBuf {
        run_dir.join("tests").join(format!("{}.json", id.file_stem()))
    }

    /// Writes the record into `run_dir`, replacing an earlier attempt's.
    pub(crate) fn write(&self, run_dir: &Path) -> Result<()> {
        let path = Self::path(run_dir, &self.id);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(Error::io("create", dir))?;
        }
        ying_report::write_whole(&path, self).map_err(Error::io("write", &path))
    }

    /// Every record in `run_dir`, in the order of the tests' ids.
    pub(crate) fn read_all(run_dir: &Path) -> Result<Vec<Self>> {
        let mut records = Vec::new();
        let mut dirs = vec![run_dir.join("tests")];
        while let Some(dir) = dirs.pop() {
            let entries = std::fs::read_dir(&dir).map_err(Error::io("read", &dir))?;
            for entry in entries {
                let path = entry.map_err(Error::io("read", &dir))?.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|extension| extension == "json") {
                    let text = std::fs::read_to_string(&path).map_err(Error::io("read", &path))?;
                    let record: Self = serde_json::from_str(&text).map_err(|error| Error::Io {
                        action: "read",
                        path: path.clone(),
                        source: std::io::Error::new(std::io::ErrorKind::InvalidData, error),
                    })?;
                    records.push(record);
                }
            }
        }
        records.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(records)
    }
}

#[cfg(test)]
mod tests {
    use super::{Record, last_run, run_dir};
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
            report: Some(format!("reports/p/test/t/{name}.json")),
            warnings: Vec::new(),
            workspace_root: Some("/ws".to_owned()),
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
}
