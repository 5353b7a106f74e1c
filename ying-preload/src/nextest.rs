//! A test nextest runs with the profile `ying`: the profile's setup script (`ying-wrap --setup`) preloads this
//! library into every test, with [`SETUP_ENV`]. As the library is loaded into the test's process (before `main`,
//! before [`ending`](crate::ending) reads its variable), it does what a wrapper would have done before running the
//! test, so that the test costs one process, as without the profile:
//!
//! - writes the test's record as it starts (`ying_report::nextest::Record`, running, with the records of its
//!   earlier attempts), for `cargo ying gate`, which finishes it;
//! - sets, in its own environment, what `cargo ying test --measure all` sets for each test process: its report
//!   directory, the run's token, the test's identity, where to leave its end mark, and the known code of its binary
//!   when the run's list phase kept it;
//! - takes [`SETUP_ENV`] out of the environment, so that the test's own children, which inherit the preload and the
//!   rest, do not take themselves for the test.
//!
//! nextest starts each test through a copy of itself (`cargo-nextest __double-spawn -- <binary> <args>`), which
//! inherits the test's environment and `exec`s the test: there this does nothing. A binary outside a target
//! directory (an archive's, extracted for the run and gone once it ends) is handed to the wrapper, which this
//! process becomes (`exec`): the wrapper runs the test as its child and names its stacks while the binary is there.
//!
//! What cannot be done (no record written, nextest's variables missing) ends the process with exit code 2 and
//! says why, starting `ying: `: a test that was not measured fails, as nextest's wrapper failed it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use ying_report::nextest::{self, Exec, Record, SETUP_ENV, Setup, Test, Unnamed};
use ying_report::report::{MEASURE_TEST_ENV, REPORT_DIR_ENV, RUN_TOKEN_ENV};
use ying_report::{END_MARK_ENV, ExecutableStamp, KNOWN_CODE_ENV, RULES_DIR_ENV};

/// The largest known code read back: far more than any binary's.
const KNOWN_CODE_MAX: u64 = 1 << 20;

/// The exit code of a test that could not be measured: `cargo ying`'s for a usage error.
const NOT_MEASURED: i32 = ying_report::exit_code::USAGE as i32;

/// Starts the test's record and its measurement, when nextest's profile `ying` runs it (see the module's docs).
/// Called as the library is loaded, before `main`, before any other thread of the program runs.
pub(crate) fn start() {
    let Some(setup) = std::env::var_os(SETUP_ENV) else { return };
    let command = command_line();
    if command.get(1).is_some_and(|arg| arg == "__double-spawn") {
        return;
    }
    // SAFETY: before `main`, in the loader's constructors: no other thread of the program reads the environment yet.
    unsafe { std::env::remove_var(SETUP_ENV) };
    if let Err(why) = begin(&setup, &command) {
        ying::__private::interposer::say(format_args!("ying: failed to {why}"));
        std::process::exit(NOT_MEASURED);
    }
}

/// See [`start`]; `Err` says what failed, as a fragment that reads after "failed to".
fn begin(setup: &std::ffi::OsStr, command: &[OsString]) -> Result<(), String> {
    let setup: Setup = serde_json::from_slice(setup.as_encoded_bytes())
        .map_err(|error| format!("read {SETUP_ENV}, which `ying-wrap --setup` sets: {error}"))?;
    let binary = match command.first() {
        Some(binary) if Path::new(binary).is_absolute() => PathBuf::from(binary),
        _ => std::env::current_exe().map_err(|error| format!("find the test binary: {error}"))?,
    };
    let Some(target_dir) = nextest::target_dir_of(&binary) else { return Err(hand_over(&setup, command)) };
    let package_dir = std::env::current_dir().map_err(|error| format!("read the current directory: {error}"))?;
    let test = Test::from_env(binary.clone(), package_dir.clone())
        .map_err(|name| format!("start the test's record: nextest's {name} is not set"))?;
    let (id, identity) = test.ids().ok_or_else(|| {
        format!(
            "start the test's record: nextest's binary id `{}` is not of the form `package`, `package::name` or \
             `package::kind/name`",
            test.binary_id
        )
    })?;
    let run_dir = nextest::run_dir(&target_dir.join("ying"), &test.run_id);
    let exec = Exec {
        pid: std::process::id(),
        token: ying_report::report::run_token(0),
        binary_id: test.binary_id.clone(),
        test_name: test.name.clone(),
        timeout: setup.timeout,
        junit: setup.junit.map(|junit| nextest::junit_path(&target_dir, &junit)),
    };
    let report_dir = exec.report_dir(&run_dir);
    std::fs::create_dir_all(&report_dir).map_err(|error| format!("create {}: {error}", report_dir.display()))?;
    let stamp = std::fs::metadata(&binary).ok().and_then(|metadata| ExecutableStamp::of(&metadata));
    let known_code = stamp.and_then(|stamp| {
        ying_report::read_bounded(&nextest::known_code_path(&run_dir, &binary, &stamp), KNOWN_CODE_MAX).ok()
    });
    let identity = serde_json::to_string(&identity).map_err(|error| format!("write the test's identity: {error}"))?;
    // SAFETY: before `main`, in the loader's constructors: no other thread of the program reads the environment yet.
    unsafe {
        std::env::set_var(REPORT_DIR_ENV, &report_dir);
        std::env::set_var(RUN_TOKEN_ENV, &exec.token);
        std::env::set_var(MEASURE_TEST_ENV, identity);
        std::env::set_var(END_MARK_ENV, exec.end_mark(&run_dir));
        std::env::set_var(RULES_DIR_ENV, nextest::rules_dir(&run_dir));
        if let Some(known_code) = known_code.and_then(|bytes| String::from_utf8(bytes).ok()) {
            std::env::set_var(KNOWN_CODE_ENV, known_code);
        }
    }
    let mut record = Record::starting(&test, id, &run_dir);
    record.unnamed = Some(Unnamed { binary, package_dir, stamp });
    record.exec = Some(exec);
    record.write(&run_dir).map_err(|(path, error)| format!("write {}: {error}", path.display()))
}

/// Becomes the wrapper `setup` names, run with `command` (the test binary and its arguments), this library out of
/// the preload: the wrapper preloads it into the test it starts. Returns why, when it could not.
fn hand_over(setup: &Setup, command: &[OsString]) -> String {
    use std::os::unix::process::CommandExt as _;
    let preload: Vec<PathBuf> = std::env::var_os("LD_PRELOAD")
        .map(|preload| std::env::split_paths(&preload).filter(|path| *path != setup.interposer).collect())
        .unwrap_or_default();
    let mut wrapper = std::process::Command::new(&setup.wrapper);
    wrapper.args(command);
    match std::env::join_paths(&preload) {
        Ok(preload) if !preload.is_empty() => wrapper.env("LD_PRELOAD", preload),
        _ => wrapper.env_remove("LD_PRELOAD"),
    };
    let error = wrapper.exec();
    format!("hand the test of a binary outside a target directory to {}: {error}", setup.wrapper.display())
}

/// This process's arguments, the program's name first, as the kernel keeps them (`/proc/self/cmdline`): read
/// here, where the standard library's copy may not be made yet.
fn command_line() -> Vec<OsString> {
    use std::os::unix::ffi::OsStringExt as _;
    let bytes = std::fs::read("/proc/self/cmdline").unwrap_or_default();
    // Each argument ends with a NUL.
    let args = bytes.strip_suffix(&[0]).unwrap_or(&bytes);
    if args.is_empty() {
        return Vec::new();
    }
    args.split(|&byte| byte == 0).map(|arg| OsString::from_vec(arg.to_vec())).collect()
}
