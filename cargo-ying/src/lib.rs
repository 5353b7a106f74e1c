//! `cargo ying`: runs a test suite with ying's leak tests.
//!
//! The binary is a thin wrapper around [`main_impl`]. Its subcommands (`cargo ying test`, baselines, diffs) are
//! not built yet; until they are, it reports that and exits with the usage error code.

use std::process::ExitCode;

/// Exit code for usage, configuration and build errors.
pub const EXIT_USAGE: u8 = 2;

/// Runs `cargo ying` with the process's arguments and returns its exit code.
pub fn main_impl() -> ExitCode {
    eprintln!("error: failed to run cargo ying: no subcommand is available yet in this version");
    ExitCode::from(EXIT_USAGE)
}
