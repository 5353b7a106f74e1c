//! `ying-wrap --setup` (`cargo-ying ying wrap --setup`): the setup script of nextest's profile `ying`. nextest runs
//! it once per run, before the tests, and gives every test of the profile what it writes to the file `NEXTEST_ENV`
//! names: the allocation interposer preloaded, what `cargo ying test --measure all` sets for every test process of
//! a run (allocations attributed to the process, stacks named later by the gate, the workspace's `allow` patterns),
//! and `ying_report::nextest::SETUP_ENV`, with which the interposer in each test starts the test's record itself
//! (`ying-preload`'s `nextest`): no wrapper runs between nextest and the test, and a test costs one process, as
//! without the profile.

use crate::error::{Error, Result, WrapError};
use crate::nextest::record;
use crate::run::exec::{attempt, interposer};
use crate::workspace::Place;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use ying_report::nextest::{SETUP_ENV, Setup};
use ying_report::report::{ALLOW_ENV, ATTRIBUTION_ENV, DEFER_SYMBOLS_ENV, TASK_BUDGETS_ENV};

/// Writes the run's variables to nextest's `NEXTEST_ENV` file; returns the exit code, 0.
pub(crate) fn run() -> Result<u8> {
    let var = |name: &'static str| std::env::var_os(name).ok_or(Error::Wrap(WrapError::NotUnderNextest(name)));
    let env_file = PathBuf::from(var("NEXTEST_ENV")?);
    let run_id = var("NEXTEST_RUN_ID")?.to_string_lossy().into_owned();
    let root = match std::env::var_os("NEXTEST_WORKSPACE_ROOT") {
        Some(root) => PathBuf::from(root),
        None => std::env::current_dir().map_err(Error::io("read", "the current directory"))?,
    };
    let place = Place::read(&root)?;
    let library = interposer::library()?;
    let run_dir = record::run_dir(&place.out_dir(None), &run_id);
    std::fs::create_dir_all(&run_dir).map_err(Error::io("create", &run_dir))?;
    let patterns = place.config.allow.clone().unwrap_or_default();
    let profile = crate::nextest::config::profile_of_run(&place.root);
    let setup = Setup {
        wrapper: wrapper(),
        interposer: library.clone(),
        timeout: profile.as_ref().and_then(|profile| profile.timeout).map(|timeout| timeout.as_secs_f64()),
        junit: profile.and_then(|profile| profile.junit),
    };
    let mut lines = vec![
        (interposer::PRELOAD_ENV, interposer::preload_value(&library).to_string_lossy().into_owned()),
        (ATTRIBUTION_ENV, "process".to_owned()),
        (DEFER_SYMBOLS_ENV, "1".to_owned()),
    ];
    if let Some(allow) = attempt::allow_value(&patterns, &run_dir) {
        lines.push((ALLOW_ENV, allow.to_string()));
    }
    if let Some(task_budgets) = place.config.task_budgets_value() {
        lines.push((TASK_BUDGETS_ENV, task_budgets));
    }
    lines.push((SETUP_ENV, serde_json::to_string(&setup).expect("a setup is JSON")));
    write(&env_file, &lines)?;
    Ok(0)
}

/// The wrapper an archive's test is handed to: the `ying-wrap` installed beside this program, else the one on
/// `PATH` (where nextest found the setup script).
fn wrapper() -> PathBuf {
    std::env::current_exe()
        .ok()
        .map(|exe| exe.with_file_name(crate::nextest::profile::WRAPPER_COMMAND))
        .filter(|path| path.is_file())
        .unwrap_or_else(|| crate::nextest::profile::WRAPPER_COMMAND.into())
}

/// Appends `lines` to the file nextest reads them from, one `NAME=value` a line; a value of more than one line
/// (which nextest cannot read) is an error naming the variable.
fn write(path: &Path, lines: &[(&str, String)]) -> Result<()> {
    let mut text = String::new();
    for (name, value) in lines {
        if value.contains(['\n', '\r']) {
            return Err(Error::Wrap(WrapError::SetupValue { name: (*name).to_owned() }));
        }
        text.push_str(&format!("{name}={value}\n"));
    }
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .map_err(Error::io("write", path))
}
