//! `cargo-ying ying wrap <test binary> <args>...`: the wrapper script of nextest's profile `ying`. nextest lists
//! every binary through it (the listing recorded for `cargo ying gate`, the binary's known code kept for its tests).
//! A test reaches it when the interposer in the test hands it over (a binary outside a target directory: an
//! archive's), or when the profile is one an earlier setup wrote, which ran every test through it; the profile's
//! setup script (`commands::setup_script`) otherwise has the interposer record each test itself. The wrapper records
//! the test as it starts for `cargo ying gate` (`ying_report::nextest`), sets what `cargo ying test --measure all`
//! sets for one (the interposer preloaded, a report directory, the run's token, the binary's known code, the
//! workspace's `allow` patterns: a [`Plan`] per binary, worked out by the run's first wrapper of it and kept for the
//! others) and runs the test in its own place (`exec`): nextest waits for the test itself, its timeouts and signals
//! reach it, and a test costs one process. The interposer in the test says how its process ended
//! (`ying_report::end_mark`) and ends what it left running; the gate finishes the record from that, takes the
//! report, names its stacks once per binary and reads why a failed test failed from nextest's JUnit
//! (`run::exec::finish`).
//!
//! An archive's binary is gone once nextest's run ends: the wrapper runs it as a child instead, as the runner runs
//! one, its output passed on to nextest through `run::exec::relay` (which keeps the first panic's message and the
//! last lines of a test that failed), takes its report and names its stacks, records how it ended, and ends as the
//! test did (the same exit code, or killed by the same signal). nextest tells the wrapper which test it runs
//! (`NEXTEST_BINARY_ID`, `NEXTEST_TEST_NAME`), which run and attempt it is (`NEXTEST_RUN_ID`, `NEXTEST_ATTEMPT`)
//! and where the workspace is (`NEXTEST_WORKSPACE_ROOT`, remapped for an archive's run).
//!
//! Where things are: the target directory is the one the test binary is in (cargo keeps its `.rustc_info.json`
//! there, and `cargo ying gate` finds the same directory through `cargo metadata`), or, for a binary extracted
//! from an archive, the workspace's (`CARGO_TARGET_DIR`, else `target` under its root; `cargo ying gate
//! --workspace-remap` reads it the same way). The interposer is the one cargo-ying carries (`run::exec::interposer`):
//! a machine that runs an archive's tests needs cargo-ying, nothing more.

use crate::cli::WrapArgs;
use crate::error::{Error, Result, WrapError};
use crate::model::Outcome;
use crate::nextest::record::{self, Listing, Record, Unnamed};
use crate::run::exec::attempt::{self, Attempting, Measuring, Output, Watch};
use crate::run::exec::known_code::KnownCodes;
use crate::run::names::symbols::Symbolizer;
use crate::workspace::Place;
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use ying_report::TestId;
use ying_report::nextest::Test;
use ying_report::report::TestIdentity;

/// What nextest tells a wrapper of the test it runs, and where the run's files go.
struct Nextest<'a> {
    binary: PathBuf,
    test_args: &'a [std::ffi::OsString],
    run_id: String,
    binary_id: String,
    /// The directory nextest runs the test in: its package's.
    package_dir: PathBuf,
    /// The workspace's root: `NEXTEST_WORKSPACE_ROOT` (remapped for an archive's run), else the package's
    /// directory.
    root: PathBuf,
    /// The target directory the binary is in, when it is in one (not an archive's extracted binary).
    target_dir: Option<PathBuf>,
    /// nextest's list phase (`NEXTEST_TEST_PHASE=list`).
    listing: bool,
}

impl<'a> Nextest<'a> {
    /// Reads it from the environment, for `command` (the test binary and its arguments).
    fn read(command: &'a [std::ffi::OsString]) -> Result<Self> {
        let (binary, test_args) = command.split_first().ok_or(Error::Wrap(WrapError::NoBinary))?;
        let binary = PathBuf::from(binary);
        let package_dir = std::env::current_dir().map_err(Error::io("read", "the current directory"))?;
        let root = std::env::var_os("NEXTEST_WORKSPACE_ROOT").map_or_else(|| package_dir.clone(), PathBuf::from);
        let target_dir = ying_report::nextest::target_dir_of(&binary);
        Ok(Self {
            run_id: nextest_var("NEXTEST_RUN_ID")?,
            binary_id: nextest_var("NEXTEST_BINARY_ID")?,
            binary,
            test_args,
            package_dir,
            root,
            target_dir,
            listing: std::env::var("NEXTEST_TEST_PHASE").as_deref() == Ok("list"),
        })
    }
}

/// nextest's variable `name`.
fn nextest_var(name: &'static str) -> Result<String> {
    std::env::var(name).map_err(|_| Error::Wrap(WrapError::NotUnderNextest(name)))
}

/// A test's record as it starts, and its process as it will run.
struct Starting {
    id: TestId,
    /// nextest's name of the test (`NEXTEST_TEST_NAME`), as its JUnit names it.
    name: String,
    identity: TestIdentity,
    record: Record,
    /// Its process's directory of its own for its reports; `tmp` is shared by the run's wrappers and stays.
    report_dir: PathBuf,
    /// Where the run's test processes keep the stack walker's rules for each other.
    rules_dir: PathBuf,
    token: String,
}

impl Starting {
    /// The test nextest runs, its record as it starts in `run_dir` (with the records of its earlier attempts).
    fn new(nextest: &Nextest<'_>, run_dir: &Path) -> Result<Self> {
        let test = Test::from_env(nextest.binary.clone(), nextest.package_dir.clone())
            .map_err(|name| Error::Wrap(WrapError::NotUnderNextest(name)))?;
        let (id, identity) = record::test_of(&test.binary_id, &test.binary, &test.name)?;
        let record = Record::starting(&test, id.clone(), run_dir);
        let report_dir = run_dir.join(record::TMP).join(std::process::id().to_string());
        let rules_dir = ying_report::nextest::rules_dir(run_dir);
        Ok(Self { id, name: test.name, identity, record, report_dir, rules_dir, token: attempt::run_token(0) })
    }

    /// The test's command, measured as `plan` says; its report directory is made.
    fn command(&self, nextest: &Nextest<'_>, plan: &Plan) -> Result<Command> {
        std::fs::create_dir_all(&self.report_dir).map_err(Error::io("create", &self.report_dir))?;
        let mut command = Command::new(&nextest.binary);
        command.args(nextest.test_args);
        self.measuring(plan).apply(&mut command);
        Ok(command)
    }

    fn measuring<'p>(&'p self, plan: &'p Plan) -> Measuring<'p> {
        Measuring {
            report_dir: &self.report_dir,
            token: &self.token,
            known_code: plan.known_code.as_deref().map(Arc::from),
            allow: plan.allow.as_deref(),
            task_budgets: plan.task_budgets.as_deref(),
            rules_dir: Some(&self.rules_dir),
            interposer: Some((&plan.interposer, self.identity.clone())),
        }
    }

    /// Runs the test in this process's place, its record written as it starts: nextest waits for the test itself,
    /// its timeouts and signals reach it, and the interposer in it says how it ended (`run::exec::finish`, in the
    /// gate, which names its stacks: the binary is there when the gate runs). Returns only when it could not.
    fn exec(mut self, nextest: &Nextest<'_>, plan: &Plan, run_dir: &Path) -> Error {
        let exec = record::Exec {
            pid: std::process::id(),
            token: self.token.clone(),
            binary_id: nextest.binary_id.clone(),
            test_name: self.name.clone(),
            timeout: plan.timeout,
            junit: nextest
                .target_dir
                .as_ref()
                .zip(plan.junit.as_ref())
                .map(|(target_dir, junit)| ying_report::nextest::junit_path(target_dir, junit)),
        };
        let mut command = match self.command(nextest, plan) {
            Ok(command) => command,
            Err(error) => return error,
        };
        command.env(ying_report::END_MARK_ENV, exec.end_mark(run_dir));
        // The binary's stamp as the plan read it in this process (worked out, or checked kept).
        self.record.unnamed = Some(Unnamed {
            binary: nextest.binary.clone(),
            package_dir: nextest.package_dir.clone(),
            stamp: plan.stamp,
        });
        self.record.exec = Some(exec);
        if let Err(error) = record::write(&self.record, run_dir) {
            return error;
        }
        let source = std::os::unix::process::CommandExt::exec(&mut command);
        Error::Wrap(WrapError::Spawn { path: nextest.binary.clone(), source })
    }
}

/// The wrapper at its quickest, for `ying-wrap`: nextest's list phase of a binary of a target directory is run
/// and recorded here, and a test of a binary the run's wrappers have seen, whose plan is kept, runs in this
/// process's place. Returns the listing's exit code, or `None` (having run nothing, or written only a test's start
/// record, which `cargo-ying ying wrap` writes again) when the test needs more: an archive's binary, a binary not
/// seen yet or built anew, or anything that went wrong, which `cargo-ying ying wrap` then says.
pub(crate) fn run_kept(command: &[std::ffi::OsString]) -> Option<u8> {
    let nextest = Nextest::read(command).ok()?;
    let target_dir = nextest.target_dir.as_ref()?;
    let run_dir = record::run_dir(&target_dir.join("ying"), &nextest.run_id);
    if nextest.listing {
        return list(&nextest.binary, nextest.test_args, nextest.binary_id.clone(), &run_dir).ok();
    }
    let plan = Plan::kept(&run_dir, &nextest.binary, &nextest.root)?;
    let starting = Starting::new(&nextest, &run_dir).ok()?;
    let _ = starting.exec(&nextest, &plan, &run_dir);
    None
}

/// Runs the test nextest gave, measured, and records it; returns the test's exit code (a test killed by a signal
/// ends this process with the same signal). In nextest's list phase (`NEXTEST_TEST_PHASE=list`), lists the binary's
/// tests and records the listing instead.
pub(crate) fn run(args: &WrapArgs) -> Result<u8> {
    let nextest = Nextest::read(&args.command)?;
    // A binary the run's wrappers have seen: what it is run with is kept in the run's directory.
    let kept_plan = match &nextest.target_dir {
        Some(dir) if !nextest.listing => {
            Plan::kept(&record::run_dir(&dir.join("ying"), &nextest.run_id), &nextest.binary, &nextest.root)
        }
        _ => None,
    };
    let place = match kept_plan {
        Some(_) => None,
        None => Some(Place::read(&nextest.root)?),
    };
    let out_dir = match (&nextest.target_dir, &place) {
        (Some(dir), _) => dir.join("ying"),
        (None, Some(place)) => place.out_dir(None),
        (None, None) => unreachable!("a plan is kept only in a target directory"),
    };
    let run_dir = record::run_dir(&out_dir, &nextest.run_id);
    if nextest.listing {
        return list(&nextest.binary, nextest.test_args, nextest.binary_id, &run_dir);
    }
    let starting = Starting::new(&nextest, &run_dir)?;
    let binary = &nextest.binary;
    // A binary of an archive names its package's files where it was built, not where it runs. A kept plan is never
    // an archive's binary's.
    let built_in = match kept_plan {
        Some(_) => None,
        None => crate::nextest::archive::built_package_dir(binary, &starting.id.package)
            .filter(|dir| *dir != nextest.package_dir),
    };
    let plan = match kept_plan {
        Some(plan) => plan,
        None => {
            let place = place.as_ref().expect("read when no plan is kept");
            let plan = Plan::new(binary, &nextest.root, place, &run_dir)?;
            if nextest.target_dir.is_some() && built_in.is_none() {
                plan.keep(&run_dir, binary);
            }
            plan
        }
    };
    if built_in.is_none() {
        return Err(starting.exec(&nextest, &plan, &run_dir));
    }
    let command = starting.command(&nextest, &plan)?;
    let (id, report_dir, package_dir) = (&starting.id, &starting.report_dir, &nextest.package_dir);
    let mut record = starting.record.clone();
    let timeout = plan.timeout.map(|timeout| Duration::from_secs_f64(timeout.max(0.0)));
    // Before the test runs: a test killed with this process is still known to have run.
    record::write(&record, &run_dir)?;
    // An archive's binary may be gone when the gate runs: its stacks are named here.
    let symbolizer =
        Symbolizer::keeping_frames_in(out_dir.join("symbols")).excusing(plan.allow_patterns.clone()).alone();
    // nextest's SIGTERM (at the test's timeout, or when the run stops) is passed on to the test, and this process
    // stays to record how it ended.
    crate::signals::catch();
    // What the test leaves running outside its group (in a session of its own) comes here when it ends, and ends
    // with it.
    crate::run::process::adopt_orphans();
    let attempt = Attempting {
        id,
        binary,
        package_dir,
        built_in: built_in.as_deref(),
        command,
        measuring: starting.measuring(&plan),
        // The test's output goes to nextest, which captures it; the wrapper keeps why it failed. Output nextest
        // does not capture (`--no-capture`, a terminal) goes straight there.
        output: if std::io::stdout().is_terminal() { Output::Inherited } else { Output::Relayed },
        // In this process's group, which nextest ends at the test's timeout or when it is stopped: the test goes
        // with it.
        watch: Watch::CallersGroup { timeout },
        store: &run_dir,
        symbolizer: Some(&symbolizer),
    }
    .run()
    .map_err(|source| Error::Wrap(WrapError::Spawn { path: binary.clone(), source }))?;
    let left = crate::run::process::end_adopted();
    symbolizer.save();
    // Empty once its report was taken; what a test left beside it goes too.
    let _ = std::fs::remove_dir(report_dir).or_else(|_| std::fs::remove_dir_all(report_dir));
    let (stopped_by, killed_by, exit_code) = (attempt.stopped_by, attempt.killed_by, attempt.exit_code);
    let unreported = matches!(attempt.outcome, Outcome::Unreported { .. });
    let unmeasured = attempt.outcome == Outcome::Unmeasured;
    let reason = attempt.outcome.reason();
    crate::run::exec::finish::record_ending(&mut record, attempt, left);
    record::write(&record, &run_dir)?;

    match (stopped_by.or(killed_by), exit_code) {
        (Some(signal), _) => {
            end_like(signal);
            Ok(ying_report::exit_code::TEST_FAILED)
        }
        // The failure the gate will see, nextest sees too.
        (_, Some(0)) if unreported || unmeasured => {
            eprintln!("ying: the test {}", reason.unwrap_or_default());
            Ok(1)
        }
        (_, Some(code)) => Ok(u8::try_from(code).unwrap_or(1)),
        (_, None) => Ok(1),
    }
}

/// What every test of one binary is run with in one run: worked out by the run's first wrapper of the binary
/// (the workspace's manifest and nextest's configuration read, the interposer found, the binary's known code read)
/// and kept in the run's directory (`plans/`) for the others, which then read one small file.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Plan {
    /// The binary it is of, as it was: one built anew gets a new plan.
    stamp: Option<ying_frames::ExecutableStamp>,
    /// The workspace it was read from.
    root: PathBuf,
    /// The allocation interposer.
    interposer: PathBuf,
    /// The workspace's `allow` patterns, and their value for the test process.
    allow_patterns: Vec<String>,
    allow: Option<String>,
    /// The workspace's budgets of async tasks, for the test process.
    #[serde(default)]
    task_budgets: Option<String>,
    /// The binary's known code for its test processes.
    known_code: Option<String>,
    /// The timeout of nextest's profile, in seconds.
    timeout: Option<f64>,
    /// The JUnit file of nextest's profile, relative to its directory.
    junit: Option<PathBuf>,
}

impl Plan {
    /// Works the plan of `binary` out, for a run whose directory is `run_dir`.
    fn new(binary: &Path, root: &Path, place: &Place, run_dir: &Path) -> Result<Self> {
        let interposer = crate::run::exec::interposer::library()?;
        if crate::run::exec::interposer::preloads(binary) == Some(false) {
            return Err(Error::Wrap(WrapError::StaticBinary(binary.to_owned())));
        }
        let allow_patterns = place.config.allow.clone().unwrap_or_default();
        let profile = crate::nextest::config::profile_of_run(&place.root);
        Ok(Self {
            stamp: stamp_of(binary),
            root: root.to_owned(),
            interposer,
            allow: attempt::allow_value(&allow_patterns, run_dir).map(|allow| allow.to_string()),
            allow_patterns,
            task_budgets: place.config.task_budgets_value(),
            known_code: KnownCodes::kept_in(run_dir.to_owned()).env_value(binary).map(|known| known.to_string()),
            timeout: profile.as_ref().and_then(|profile| profile.timeout).map(|timeout| timeout.as_secs_f64()),
            junit: profile.and_then(|profile| profile.junit),
        })
    }

    /// Where the plan of `binary` is kept in `run_dir`.
    fn path(run_dir: &Path, binary: &Path) -> PathBuf {
        let name = binary.file_name().unwrap_or_default().to_string_lossy();
        run_dir.join("plans").join(format!("{}.json", ying_report::file_name_component(&name)))
    }

    /// The plan of `binary` kept in `run_dir`, when one is, for this binary as it is and the workspace at `root`.
    fn kept(run_dir: &Path, binary: &Path, root: &Path) -> Option<Self> {
        let text = ying_report::read_bounded(&Self::path(run_dir, binary), PLAN_MAX).ok()?;
        let plan: Self = serde_json::from_slice(&text).ok()?;
        (plan.stamp.is_some() && plan.stamp == stamp_of(binary) && plan.root == root).then_some(plan)
    }

    /// Keeps the plan of `binary` in `run_dir` for the run's other wrappers; one that cannot be kept is worked out
    /// again by the next.
    fn keep(&self, run_dir: &Path, binary: &Path) {
        let path = Self::path(run_dir, binary);
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = ying_report::write_own(&path, self);
    }
}

/// The stamp of the executable at `path`, `None` when it cannot be read.
fn stamp_of(path: &Path) -> Option<ying_frames::ExecutableStamp> {
    std::fs::metadata(path).ok().and_then(|metadata| ying_frames::ExecutableStamp::of(&metadata))
}

/// The largest plan read back: far more than any binary's (its known code is a few kilobytes).
const PLAN_MAX: u64 = 4 << 20;

/// nextest's list phase: runs `<binary> --list ...` as nextest asked, its output passed on, records the tests it
/// listed in `run_dir` (a listing that cannot be recorded is only a warning: the run goes on) and keeps the binary's
/// known code there for its tests. A statically linked binary, which the interposer cannot measure, is an error.
fn list(binary: &Path, args: &[std::ffi::OsString], binary_id: String, run_dir: &Path) -> Result<u8> {
    use std::io::Write as _;
    // The interposer the profile's setup script preloads is never read by a statically linked binary: its tests
    // would run unmeasured.
    if crate::run::exec::interposer::preloads(binary) == Some(false) {
        return Err(Error::Wrap(WrapError::StaticBinary(binary.to_owned())));
    }
    let output = Command::new(binary)
        .args(args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|source| Error::Wrap(WrapError::Spawn { path: binary.to_owned(), source }))?;
    let _ = std::io::stdout().write_all(&output.stdout);
    let _ = std::io::stdout().flush();
    if output.status.success() {
        let listing = Listing {
            binary_id,
            binary: binary.to_owned(),
            ignored: args.iter().any(|arg| arg == "--ignored"),
            tests: Listing::tests_of(&String::from_utf8_lossy(&output.stdout)),
        };
        if let Err(error) = listing.write(run_dir) {
            eprintln!("ying: warning: failed to record the tests of {}: {error}", binary.display());
        }
        // Read from the binary's symbol table once, for each of its tests (the interposer in each reads what is kept).
        if !listing.tests.is_empty() {
            let _ = KnownCodes::kept_in(run_dir.to_owned()).env_value(binary);
        }
    }
    #[cfg(unix)]
    if let Some(signal) = std::os::unix::process::ExitStatusExt::signal(&output.status) {
        end_like(signal);
    }
    Ok(output.status.code().and_then(|code| u8::try_from(code).ok()).unwrap_or(1))
}

/// Ends this process as the test's ended: killed by `signal`, its default action restored. Returns only if that
/// action does not end a process.
fn end_like(signal: i32) {
    #[cfg(unix)]
    // SAFETY: signal(2) and raise(3) with a signal number the kernel reported; no memory is touched. The default
    // action of a signal that killed the test ends this process here.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
}
