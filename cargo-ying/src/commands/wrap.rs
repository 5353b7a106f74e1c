//! `cargo-ying ying wrap <test binary> <args>...`: the wrapper script of nextest's profile `ying`. nextest runs
//! each test through it; it runs the test as `cargo ying test --measure all` runs one (the interposer preloaded, a
//! report directory, the run's token, the binary's known code, the workspace's `allow` patterns), takes its report
//! with its stacks named from the binary (which is there now, and may not be after an archive's run), and records
//! how it ended for `cargo ying gate` (see `nextest::record`). It then ends as the test did: the same exit code, or
//! killed by the same signal, so nextest sees the test's own outcome.
//!
//! The test's output goes straight to nextest, which captures it. nextest tells the wrapper which test it runs
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
use crate::nextest::record::{self, Record};
use crate::run::exec::attempt::{self, Attempting, Measuring, Output, Watch};
use crate::run::exec::known_code::KnownCodes;
use crate::run::names::symbols::Symbolizer;
use crate::workspace::Place;
use std::path::{Path, PathBuf};
use std::process::Command;
use ying_report::report::TestIdentity;
use ying_report::{TargetKind, TestId};

/// How many directories above the test binary its target directory may be (`<target>/<triple>/debug/deps/`).
const LEVELS: usize = 5;

/// Runs the test nextest gave, measured, and records it; returns the test's exit code (a test killed by a signal
/// ends this process with the same signal).
pub(crate) fn run(args: &WrapArgs) -> Result<u8> {
    let (binary, test_args) = args.command.split_first().expect("clap requires the test binary");
    let binary = PathBuf::from(binary);
    let nextest = |name: &'static str| std::env::var(name).map_err(|_| Error::Wrap(WrapError::NotUnderNextest(name)));
    let run_id = nextest("NEXTEST_RUN_ID")?;
    let binary_id = nextest("NEXTEST_BINARY_ID")?;
    let name = nextest("NEXTEST_TEST_NAME")?;
    let attempt_number = nextest("NEXTEST_ATTEMPT").ok().and_then(|attempt| attempt.parse().ok()).unwrap_or(1);
    let package_dir = std::env::current_dir().map_err(Error::io("read", "the current directory"))?;
    let nextest_root = std::env::var_os("NEXTEST_WORKSPACE_ROOT").map(PathBuf::from);
    let root = nextest_root.clone().unwrap_or_else(|| package_dir.clone());
    let place = Place::read(&root)?;

    let (id, identity) = test_of(&binary_id, &binary, &name)?;
    let ancestors: Vec<&Path> = binary.ancestors().skip(1).take(LEVELS).collect();
    let target_dir = ancestors.iter().find(|dir| dir.join(".rustc_info.json").is_file());
    let out_dir = target_dir.map_or_else(|| place.out_dir(None), |dir| dir.join("ying"));
    let interposer = crate::run::exec::interposer::library()?;

    if crate::run::exec::interposer::preloads(&binary) == Some(false) {
        return Err(Error::Wrap(WrapError::StaticBinary(binary)));
    }
    let run_dir = record::run_dir(&out_dir, &run_id);
    let report_dir = run_dir.join("tmp").join(std::process::id().to_string());
    std::fs::create_dir_all(&report_dir).map_err(Error::io("create", &report_dir))?;
    let token = attempt::run_token(0);
    let allow = attempt::allow_value(place.config.allow.as_deref().unwrap_or_default());
    let mut command = Command::new(&binary);
    command.args(test_args);
    let symbolizer = Symbolizer::keeping_frames_in(out_dir.join("symbols"))
        .excusing(place.config.allow.clone().unwrap_or_default())
        .alone();
    let attempt = Attempting {
        id: &id,
        binary: &binary,
        package_dir: &package_dir,
        command,
        measuring: Measuring {
            report_dir: &report_dir,
            token: &token,
            known_code: KnownCodes::default().env_value(&binary),
            allow: allow.as_deref(),
            interposer: Some((&interposer, identity)),
        },
        // The test's output goes to nextest, which captures it.
        output: Output::Inherited,
        // In this process's group, which nextest ends at the test's timeout or when it is stopped: the test goes
        // with it.
        watch: Watch::CallersGroup,
        store: &run_dir,
        symbolizer: &symbolizer,
    }
    .run()
    .map_err(|source| Error::Wrap(WrapError::Spawn { path: binary.clone(), source }))?;
    symbolizer.save();
    let _ = std::fs::remove_dir_all(&report_dir);
    // Empty once no test of the run is running.
    let _ = std::fs::remove_dir(run_dir.join("tmp"));
    let unreported = matches!(attempt.outcome, Outcome::Unreported { .. });
    let unmeasured = attempt.outcome == Outcome::Unmeasured;
    let signal = match &attempt.outcome {
        Outcome::Crashed(signal) => Some(signal.clone()),
        _ => None,
    };
    Record {
        id,
        outcome: attempt.outcome.kind(),
        signal,
        exit_code: attempt.exit_code,
        unreported,
        unmeasured,
        duration: attempt.duration.as_secs_f64(),
        started_at: humantime::format_rfc3339_millis(attempt.started_at).to_string(),
        attempt: attempt_number,
        report: attempt.leak.map(|leak| leak.path),
        warnings: attempt.warnings,
        workspace_root: nextest_root.map(|root| root.display().to_string()),
    }
    .write(&run_dir)?;

    match (attempt.killed_by, attempt.exit_code) {
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

/// The test's id and its identity as the interposer reports it, from nextest's binary id (`pkg`, `pkg::name`,
/// `pkg::kind/name`), the binary (whose file name, less cargo's hash, is a library's crate) and the test's name.
fn test_of(binary_id: &str, binary: &Path, name: &str) -> Result<(TestId, TestIdentity)> {
    let invalid = || Error::Wrap(WrapError::BinaryId(binary_id.to_owned()));
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
    use super::test_of;
    use std::path::Path;
    use ying_report::TargetKind;

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
