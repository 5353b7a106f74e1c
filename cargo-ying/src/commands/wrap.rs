//! `cargo-ying ying wrap <test binary> <args>...`: the wrapper script of nextest's profile `ying`. nextest runs
//! each test through it; it runs the test as `cargo ying test --measure all` runs one (the interposer preloaded, a
//! report directory, the run's token, the binary's known code, the workspace's `allow` patterns), takes its report
//! (its stacks left as addresses for `cargo ying gate` to name, once per binary; named here from an archive's
//! binary, which is there now and not after the run), and records
//! how it ended for `cargo ying gate` (see `nextest::record`). It then ends as the test did: the same exit code, or
//! killed by the same signal, so nextest sees the test's own outcome.
//!
//! The test's output goes to nextest, which captures it, through the wrapper, which keeps the first panic's message
//! and the last lines of a test that failed (`run::exec::relay`) for the gate's reasons. nextest tells the wrapper which test it runs
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
use ying_report::TestOutcome;

/// How many directories above the test binary its target directory may be (`<target>/<triple>/debug/deps/`).
const LEVELS: usize = 5;

/// Runs the test nextest gave, measured, and records it; returns the test's exit code (a test killed by a signal
/// ends this process with the same signal). In nextest's list phase (`NEXTEST_TEST_PHASE=list`), lists the binary's
/// tests and records the listing instead.
pub(crate) fn run(args: &WrapArgs) -> Result<u8> {
    let (binary, test_args) = args.command.split_first().expect("clap requires the test binary");
    let binary = PathBuf::from(binary);
    let nextest = |name: &'static str| std::env::var(name).map_err(|_| Error::Wrap(WrapError::NotUnderNextest(name)));
    let run_id = nextest("NEXTEST_RUN_ID")?;
    let binary_id = nextest("NEXTEST_BINARY_ID")?;
    let package_dir = std::env::current_dir().map_err(Error::io("read", "the current directory"))?;
    let nextest_root = std::env::var_os("NEXTEST_WORKSPACE_ROOT").map(PathBuf::from);
    let root = nextest_root.clone().unwrap_or_else(|| package_dir.clone());
    let place = Place::read(&root)?;
    let ancestors: Vec<&Path> = binary.ancestors().skip(1).take(LEVELS).collect();
    let target_dir = ancestors.iter().find(|dir| dir.join(".rustc_info.json").is_file());
    let out_dir = target_dir.map_or_else(|| place.out_dir(None), |dir| dir.join("ying"));
    let run_dir = record::run_dir(&out_dir, &run_id);
    if std::env::var("NEXTEST_TEST_PHASE").as_deref() == Ok("list") {
        return list(&binary, test_args, binary_id, &run_dir);
    }
    let name = nextest("NEXTEST_TEST_NAME")?;
    let attempt_number = nextest("NEXTEST_ATTEMPT").ok().and_then(|attempt| attempt.parse().ok()).unwrap_or(1);
    let attempts_allowed = std::env::var("NEXTEST_TOTAL_ATTEMPTS").ok().and_then(|total| total.parse().ok());

    let (id, identity) = record::test_of(&binary_id, &binary, &name)?;
    // A binary of an archive names its package's files where it was built, not where it runs.
    let built_in = crate::nextest::archive::built_package_dir(&binary, &id.package).filter(|dir| *dir != package_dir);
    let interposer = crate::run::exec::interposer::library()?;
    if crate::run::exec::interposer::preloads(&binary) == Some(false) {
        return Err(Error::Wrap(WrapError::StaticBinary(binary)));
    }
    // The attempts before this one, as their records left them: nextest runs a test's attempts one after another.
    let earlier = match Record::read(&run_dir, &id) {
        Some(mut last) if last.attempt < attempt_number => {
            let mut earlier = std::mem::take(&mut last.earlier);
            earlier.push(last);
            earlier
        }
        _ => Vec::new(),
    };
    let started_at = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
    let mut record = Record {
        id: id.clone(),
        outcome: TestOutcome::NotRun,
        signal: None,
        exit_code: None,
        unreported: false,
        unmeasured: false,
        duration: 0.0,
        started_at,
        attempt: attempt_number,
        report: None,
        warnings: Vec::new(),
        workspace_root: nextest_root.map(|root| root.display().to_string()),
        running: true,
        stopped_by: None,
        timeout: None,
        attempts_allowed,
        unnamed: None,
        panic: None,
        output_tail: None,
        earlier,
    };
    // Before the test runs: a test killed with this process is still known to have run.
    record.write(&run_dir)?;

    // Each test process's directory of its own; `tmp` is shared by the run's wrappers and stays.
    let report_dir = run_dir.join("tmp").join(std::process::id().to_string());
    std::fs::create_dir_all(&report_dir).map_err(Error::io("create", &report_dir))?;
    let token = attempt::run_token(0);
    let allow = attempt::allow_value(place.config.allow.as_deref().unwrap_or_default(), &run_dir);
    let mut command = Command::new(&binary);
    command.args(test_args);
    // An archive's binary may be gone when the gate runs: its stacks are named here. Another's are left to the
    // gate, which names every test's once per binary rather than once per test.
    let symbolizer = built_in.is_some().then(|| {
        Symbolizer::keeping_frames_in(out_dir.join("symbols"))
            .excusing(place.config.allow.clone().unwrap_or_default())
            .alone()
    });
    // nextest's SIGTERM (at the test's timeout, or when the run stops) is passed on to the test, and this process
    // stays to record how it ended.
    crate::signals::catch();
    // What the test leaves running outside its group (in a session of its own) comes here when it ends, and ends
    // with it.
    crate::run::process::adopt_orphans();
    let attempt = Attempting {
        id: &id,
        binary: &binary,
        package_dir: &package_dir,
        built_in: built_in.as_deref(),
        command,
        measuring: Measuring {
            report_dir: &report_dir,
            token: &token,
            // Read once per binary in the run, kept for its other tests' wrappers.
            known_code: KnownCodes::kept_in(run_dir.join("known")).env_value(&binary),
            allow: allow.as_deref(),
            interposer: Some((&interposer, identity)),
        },
        // The test's output goes to nextest, which captures it; the wrapper keeps why it failed. Output nextest
        // does not capture (`--no-capture`, a terminal) goes straight there.
        output: if std::io::stdout().is_terminal() { Output::Inherited } else { Output::Relayed },
        // In this process's group, which nextest ends at the test's timeout or when it is stopped: the test goes
        // with it.
        watch: Watch::CallersGroup { timeout: timeout_of(&place.root) },
        store: &run_dir,
        symbolizer: symbolizer.as_ref(),
    }
    .run()
    .map_err(|source| Error::Wrap(WrapError::Spawn { path: binary.clone(), source }))?;
    let left = crate::run::process::end_adopted();
    if let Some(symbolizer) = &symbolizer {
        symbolizer.save();
    }
    // Empty once its report was taken; what a test left beside it goes too.
    let _ = std::fs::remove_dir(&report_dir).or_else(|_| std::fs::remove_dir_all(&report_dir));
    let unreported = matches!(attempt.outcome, Outcome::Unreported { .. });
    let unmeasured = attempt.outcome == Outcome::Unmeasured;
    record.outcome = attempt.outcome.kind();
    record.signal = match &attempt.outcome {
        Outcome::Crashed(signal) => Some(signal.clone()),
        _ => None,
    };
    record.stopped_by = attempt.stopped_by.map(crate::signals::name);
    record.timeout = match attempt.outcome {
        Outcome::TimedOut(timeout) => Some(timeout.as_secs_f64()),
        _ => None,
    };
    record.exit_code = attempt.exit_code;
    record.unreported = unreported;
    record.unmeasured = unmeasured;
    record.duration = attempt.duration.as_secs_f64();
    record.started_at = humantime::format_rfc3339_millis(attempt.started_at).to_string();
    if symbolizer.is_none() && attempt.leak.is_some() {
        let stamp = std::fs::metadata(&binary).ok().and_then(|metadata| ying_frames::ExecutableStamp::of(&metadata));
        record.unnamed = Some(Unnamed { binary: binary.clone(), package_dir: package_dir.clone(), stamp });
    }
    record.report = attempt.leak.map(|leak| leak.path);
    record.warnings = attempt.warnings;
    if left > 0 {
        let processes = if left == 1 { "process" } else { "processes" };
        record
            .warnings
            .push(format!("it left {left} {processes} running outside its process group, ended when it did"));
    }
    if let Some(kept) = attempt.kept.filter(|_| attempt.outcome.is_failure()) {
        record.panic = kept.panic;
        record.output_tail = Some(kept.tail).filter(|tail| !tail.is_empty());
    }
    record.running = false;
    record.write(&run_dir)?;

    match (attempt.stopped_by.or(attempt.killed_by), attempt.exit_code) {
        (Some(signal), _) => {
            end_like(signal);
            Ok(ying_report::exit_code::TEST_FAILED)
        }
        // The failure the gate will see, nextest sees too.
        (_, Some(0)) if unreported || unmeasured => {
            eprintln!("ying: the test {}", attempt.outcome.reason().unwrap_or_default());
            Ok(1)
        }
        (_, Some(code)) => Ok(u8::try_from(code).unwrap_or(1)),
        (_, None) => Ok(1),
    }
}

/// nextest's list phase: runs `<binary> --list ...` as nextest asked, its output passed on, and records the tests
/// it listed in `run_dir` (a listing that cannot be recorded is only a warning: the run goes on).
fn list(binary: &Path, args: &[std::ffi::OsString], binary_id: String, run_dir: &Path) -> Result<u8> {
    use std::io::Write as _;
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
    }
    #[cfg(unix)]
    if let Some(signal) = std::os::unix::process::ExitStatusExt::signal(&output.status) {
        end_like(signal);
    }
    Ok(output.status.code().and_then(|code| u8::try_from(code).ok()).unwrap_or(1))
}

/// The longest a test may run in the nextest profile this run is of (`NEXTEST_PROFILE`), as `.config/nextest.toml`
/// under `root` sets it: a test stopped that long after it started timed out. `None` when it sets none or does not
/// read.
fn timeout_of(root: &Path) -> Option<std::time::Duration> {
    let profile = std::env::var("NEXTEST_PROFILE").ok()?;
    let text = ying_report::read_text(&root.join(".config").join("nextest.toml")).ok()?;
    crate::nextest::config::profile(&text, &profile, crate::config::cores()).ok()?.timeout
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
