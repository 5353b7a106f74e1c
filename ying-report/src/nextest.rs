//! What each test a nextest run of the profile `ying` ran leaves for `cargo ying gate`, under
//! `<target-dir>/ying/nextest/<run-id>/` (the run's id is nextest's `NEXTEST_RUN_ID`): the test's report under
//! `reports/` as `cargo ying test` stores it, and its [`Record`] under `tests/`: how it ended, how long it took,
//! which attempt it was, and when it started. A test nextest ran again (`retries`) has the record of its last
//! attempt, which keeps those of the attempts before it.
//!
//! A record is written as the test starts (`running`), by the allocation interposer in the test's process (nextest's
//! setup script of the profile, `ying-wrap --setup`, preloads it into every test with [`SETUP_ENV`]) or by the
//! wrapper (`ying-wrap`, for an archive's test and for profiles written before the setup script), and again when it
//! ended: by the wrapper of an archive's test, which waits for it, and by the gate for the others ([`Exec`], from
//! what the process left). A test killed outright (SIGKILL after its timeout's grace period) keeps the first, so
//! the gate knows it ran and did not end. The run's scratch files (each process's report directory, its end mark)
//! are under `tmp/`, each binary's known code under `known/`, and under `listed/` what nextest listed of each binary
//! through the wrapper (`list-wrapper`).
//!
//! Each record is written whole (a temporary file renamed), after the report it names; a run read while tests still
//! run has the records of those that ended, and of those running as running.

use crate::report::TestIdentity;
use crate::stamp::ExecutableStamp;
use crate::terms::TestOutcome;
use crate::test_id::{TargetKind, TestId, file_name_component};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The directory of nextest's runs under `<target-dir>/ying`.
pub const RUNS: &str = "nextest";

/// The directory of a run's scratch files: each test process's report directory, and its end mark.
pub const TMP: &str = "tmp";

/// The directory of a run's known code, one file per test binary (see [`known_code_path`]).
const KNOWN: &str = "known";
/// The run directory's directory of call-frame rules ([`rules_dir`]).
const RULES: &str = "rules";

/// How many directories above a test binary its target directory may be (`<target>/<triple>/debug/deps/`).
const LEVELS: usize = 5;

/// The variable the setup script of nextest's profile `ying` (`ying-wrap --setup`) gives every test, beside the
/// preload: what the interposer needs to start the test's record itself ([`Setup`], as JSON). The interposer takes
/// it out of its process's environment, so that the test's own children do not take themselves for the test.
pub const SETUP_ENV: &str = "YING_NEXTEST";

/// What the setup script of the profile worked out once for the run's tests (see [`SETUP_ENV`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Setup {
    /// The wrapper (`ying-wrap`), which a test of a binary outside a target directory (an archive's, extracted for
    /// the run and gone after it) is handed to: it runs the test as its child and names its stacks while the binary
    /// is there.
    pub wrapper: PathBuf,
    /// The interposer the setup preloads: taken out of `LD_PRELOAD` again for the wrapper, which preloads it into
    /// the test itself.
    pub interposer: PathBuf,
    /// The timeout of nextest's profile, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<f64>,
    /// The JUnit file of nextest's profile, relative to its directory (`<target-dir>/nextest/<profile>/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub junit: Option<PathBuf>,
}

/// How one attempt of a test ended, as its process, its wrapper or the gate saw it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
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
    /// For a test that ran in the process nextest started (no wrapper waiting for it), left `running` for the gate
    /// to finish: the process, and what the gate needs to finish it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<Exec>,
}

/// What the gate needs to finish the record of a test no wrapper waited for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Exec {
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
    pub fn report_dir(&self, run_dir: &Path) -> PathBuf {
        run_dir.join(TMP).join(self.pid.to_string())
    }

    /// The file the test's process left its end mark in ([`end_mark`](crate::end_mark)), under `run_dir`.
    pub fn end_mark(&self, run_dir: &Path) -> PathBuf {
        run_dir.join(TMP).join(format!("{}.end", self.pid))
    }
}

/// Where the stacks a report left as addresses are named from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unnamed {
    /// The test binary.
    pub binary: PathBuf,
    /// The directory of its package, which the report's source paths are made relative to.
    pub package_dir: PathBuf,
    /// The binary's identity when the test ran: one built anew since names other code at the same addresses.
    pub stamp: Option<ExecutableStamp>,
}

impl Unnamed {
    /// Whether the binary is still the one the test ran.
    pub fn is_there(&self) -> bool {
        let now = std::fs::metadata(&self.binary).ok().and_then(|metadata| ExecutableStamp::of(&metadata));
        now.is_some() && now == self.stamp
    }
}

/// The directory of the nextest run `run_id` under `out_dir` (`<target-dir>/ying`).
pub fn run_dir(out_dir: &Path, run_id: &str) -> PathBuf {
    out_dir.join(RUNS).join(file_name_component(run_id))
}

/// The target directory the test binary `binary` is in (cargo keeps its `.rustc_info.json` there); `None` for a
/// binary outside one (an archive's, extracted for its run).
pub fn target_dir_of(binary: &Path) -> Option<PathBuf> {
    binary.ancestors().skip(1).take(LEVELS).find(|dir| dir.join(".rustc_info.json").is_file()).map(Path::to_path_buf)
}

/// The JUnit file `junit` (relative, as a profile names it) that nextest writes for the profile of this process's run
/// (`NEXTEST_PROFILE`) under the target directory `target_dir`: `<target-dir>/nextest/<profile>/<junit>`.
pub fn junit_path(target_dir: &Path, junit: &Path) -> PathBuf {
    let profile = std::env::var_os("NEXTEST_PROFILE").unwrap_or_default();
    target_dir.join("nextest").join(profile).join(junit)
}

/// Where the test processes of the run whose directory is `run_dir` keep the stack walker's call-frame rules
/// ([`RULES_DIR_ENV`](crate::RULES_DIR_ENV)).
pub fn rules_dir(run_dir: &Path) -> PathBuf {
    run_dir.join(RULES)
}

/// Where the run whose directory is `run_dir` keeps the known code ([`KNOWN_CODE_ENV`](crate::KNOWN_CODE_ENV)'s
/// value) of the executable `executable` whose stamp is `stamp`.
pub fn known_code_path(run_dir: &Path, executable: &Path, stamp: &ExecutableStamp) -> PathBuf {
    let name = executable.file_name().unwrap_or_default().to_string_lossy();
    run_dir.join(KNOWN).join(file_name_component(&format!("{name}.{}", stamp.key())))
}

/// A test nextest runs, as it tells the process it starts (the test's, or its wrapper's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Test {
    /// The test binary.
    pub binary: PathBuf,
    /// nextest's `NEXTEST_RUN_ID`.
    pub run_id: String,
    /// nextest's `NEXTEST_BINARY_ID`.
    pub binary_id: String,
    /// nextest's `NEXTEST_TEST_NAME`: the test's name as its binary lists it.
    pub name: String,
    /// nextest's `NEXTEST_ATTEMPT`, from 1.
    pub attempt: u32,
    /// nextest's `NEXTEST_TOTAL_ATTEMPTS`.
    pub attempts_allowed: Option<u32>,
    /// The directory nextest runs the test in: its package's.
    pub package_dir: PathBuf,
    /// nextest's `NEXTEST_WORKSPACE_ROOT` (remapped for an archive's run).
    pub workspace_root: Option<PathBuf>,
}

impl Test {
    /// The test of `binary`, run in `package_dir`, that nextest describes in this process's environment; `Err`
    /// names the variable of nextest's that is missing.
    pub fn from_env(binary: PathBuf, package_dir: PathBuf) -> Result<Self, &'static str> {
        let var = |name: &'static str| std::env::var(name).map_err(|_| name);
        let number = |name: &'static str| std::env::var(name).ok().and_then(|value| value.parse().ok());
        Ok(Self {
            binary,
            run_id: var("NEXTEST_RUN_ID")?,
            binary_id: var("NEXTEST_BINARY_ID")?,
            name: var("NEXTEST_TEST_NAME")?,
            attempt: number("NEXTEST_ATTEMPT").unwrap_or(1),
            attempts_allowed: number("NEXTEST_TOTAL_ATTEMPTS"),
            package_dir,
            workspace_root: std::env::var_os("NEXTEST_WORKSPACE_ROOT").map(PathBuf::from),
        })
    }

    /// The test's id and its identity as the interposer reports it (see [`test_of`]).
    pub fn ids(&self) -> Option<(TestId, TestIdentity)> {
        test_of(&self.binary_id, &self.binary, &self.name)
    }
}

/// The test's id and its identity as the interposer reports it, from nextest's binary id (`pkg`, `pkg::name`,
/// `pkg::kind/name`), the binary (whose file name, less cargo's hash, is a library's crate) and the test's name;
/// `None` for a binary id of no such form.
pub fn test_of(binary_id: &str, binary: &Path, name: &str) -> Option<(TestId, TestIdentity)> {
    let (package, kind, target) = match binary_id.split_once("::") {
        None => {
            let stem = binary.file_name().and_then(|name| name.to_str()).unwrap_or(binary_id);
            let krate = stem.rsplit_once('-').map_or(stem, |(krate, _)| krate);
            (binary_id, TargetKind::Lib, krate.to_owned())
        }
        Some((package, rest)) => match rest.split_once('/') {
            None => (package, TargetKind::Test, rest.to_owned()),
            Some((kind, target)) => (package, TargetKind::from_cargo(&[kind])?, target.to_owned()),
        },
    };
    if package.is_empty() || target.is_empty() {
        return None;
    }
    let id = TestId::new(package, kind, &target, name);
    let identity = TestIdentity::listed(package, kind, &target, name);
    Some((id, identity))
}

impl Record {
    /// The record of `test` (whose id is `id`) as it starts, in the run whose directory is `run_dir`: running,
    /// with the records of its earlier attempts (nextest runs a test's attempts one after another; a first attempt
    /// has none).
    pub fn starting(test: &Test, id: TestId, run_dir: &Path) -> Self {
        let earlier = match (test.attempt > 1).then(|| Self::read(run_dir, &id)).flatten() {
            Some(mut last) if last.attempt < test.attempt => {
                let mut earlier = std::mem::take(&mut last.earlier);
                earlier.push(last);
                earlier
            }
            _ => Vec::new(),
        };
        Self {
            id,
            outcome: TestOutcome::NotRun,
            signal: None,
            exit_code: None,
            unreported: false,
            unmeasured: false,
            duration: 0.0,
            started_at: rfc3339_millis(std::time::SystemTime::now()),
            attempt: test.attempt,
            report: None,
            warnings: Vec::new(),
            workspace_root: test.workspace_root.as_ref().map(|root| root.display().to_string()),
            running: true,
            stopped_by: None,
            timeout: None,
            attempts_allowed: test.attempts_allowed,
            unnamed: None,
            panic: None,
            output_tail: None,
            earlier,
            exec: None,
        }
    }

    /// Where the record of `id` is in `run_dir`.
    pub fn path(run_dir: &Path, id: &TestId) -> PathBuf {
        run_dir.join("tests").join(format!("{}.json", id.file_stem()))
    }

    /// The record `run_dir` holds of test `id`, if one is there and reads.
    pub fn read(run_dir: &Path, id: &TestId) -> Option<Self> {
        serde_json::from_str(&crate::json::read_text(&Self::path(run_dir, id)).ok()?).ok()
    }

    /// Writes the record into `run_dir`, replacing an earlier attempt's; `Err` names the file or directory.
    pub fn write(&self, run_dir: &Path) -> Result<(), (PathBuf, std::io::Error)> {
        let path = Self::path(run_dir, &self.id);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|error| (dir.to_owned(), error))?;
        }
        crate::json::write_own(&path, self).map_err(|error| (path, error))
    }
}

/// `time` in RFC 3339 to the millisecond, in UTC (`2026-12-07T12:00:00.000Z`), as `humantime` writes it.
fn rfc3339_millis(time: std::time::SystemTime) -> String {
    let since = time.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let (days, seconds) = (since.as_secs() / 86_400, since.as_secs() % 86_400);
    // Howard Hinnant's `civil_from_days`: the proleptic Gregorian date of a day count since 1970-01-01.
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era = (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 { shifted_month + 3 } else { shifted_month - 9 };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        seconds / 3_600,
        seconds / 60 % 60,
        seconds % 60,
        since.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::{Record, Test, rfc3339_millis, test_of};
    use crate::test_id::{TargetKind, TestId};
    use std::path::Path;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn times_are_written_as_rfc_3339_to_the_millisecond() {
        let at = |ms: u64| rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms));
        assert_eq!(at(0), "1970-01-01T00:00:00.000Z");
        // A leap day, the last millisecond of a century's leap year, and a day of this year.
        assert_eq!(at(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(at(978_307_199_999), "2000-12-31T23:59:59.999Z");
        assert_eq!(at(1_796_644_310_592), "2026-12-07T11:51:50.592Z");
    }

    #[test]
    fn nextests_binary_ids_name_the_package_the_target_and_its_kind() {
        let binary = Path::new("/t/debug/deps/my_crate-0123456789abcdef");
        let (id, _) = test_of("my-crate", binary, "tests::a").unwrap();
        assert_eq!(id, TestId::new("my-crate", TargetKind::Lib, "my_crate", "tests::a"));
        let (id, _) = test_of("my-crate::integration", binary, "a").unwrap();
        assert_eq!(id, TestId::new("my-crate", TargetKind::Test, "integration", "a"));
        let (id, _) = test_of("my-crate::bin/tool", binary, "a").unwrap();
        assert_eq!(id, TestId::new("my-crate", TargetKind::Bin, "tool", "a"));
        assert_eq!(test_of("my-crate::nonsense/tool", binary, "a"), None);
        assert_eq!(test_of("::x", binary, "a"), None);
    }

    #[test]
    fn a_later_attempt_starts_with_the_records_of_those_before_it() {
        let run_dir = std::env::temp_dir().join(format!("ying-report-nextest-{}", std::process::id()));
        let test = |attempt| Test {
            binary: "/t/debug/deps/p-0123456789abcdef".into(),
            run_id: "run".to_owned(),
            binary_id: "p".to_owned(),
            name: "a".to_owned(),
            attempt,
            attempts_allowed: Some(3),
            package_dir: "/ws".into(),
            workspace_root: Some("/ws".into()),
        };
        let id = test(1).ids().unwrap().0;
        let first = Record::starting(&test(1), id.clone(), &run_dir);
        assert!(first.earlier.is_empty() && first.running);
        first.write(&run_dir).unwrap();
        let second = Record::starting(&test(2), id.clone(), &run_dir);
        second.write(&run_dir).unwrap();
        let third = Record::starting(&test(3), id.clone(), &run_dir);
        assert_eq!(third.earlier.iter().map(|record| record.attempt).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(Record::read(&run_dir, &id), Some(second));
        std::fs::remove_dir_all(&run_dir).unwrap();
    }
}
