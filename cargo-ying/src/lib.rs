//! `cargo ying`: runs a test suite with ying's leak tests, each test in a process of its own, and reports their
//! memory.
//!
//! The binary is a thin wrapper around [`main_impl`]. Modules, one job each: [`cli`] parses the command line,
//! [`config`] reads `[workspace.metadata.ying]`, [`build`] builds the test binaries through cargo, [`discover`]
//! lists and selects their tests, [`runner`] runs them, [`output`] shows the run, [`ci_output`] writes annotations, job summaries and JUnit, [`symbols`] symbolises the
//! stacks the tests deferred, [`summary`] and [`render`] write `summary.json`, flamegraphs and `index.html`,
//! [`baseline`] reads and writes the committed baseline and [`gate`] compares a run with it, [`partition`] splits
//! a run across machines; [`test_command`], [`accept_command`], [`diff_command`] and [`merge_command`] tie them
//! together.

pub mod accept_command;
pub mod baseline;
pub mod build;
pub mod ci_output;
pub mod cli;
pub mod config;
pub mod diff_command;
pub mod discover;
pub mod error;
pub mod gate;
pub mod merge_command;
pub mod output;
pub mod partition;
pub mod render;
pub mod runner;
pub mod summary;
pub mod symbols;
pub mod test_command;

use clap::Parser;
use std::process::ExitCode;

pub use error::{EXIT_OK, EXIT_TEST_FAILED, EXIT_USAGE};

/// Runs `cargo ying` with the process's arguments and returns its exit code.
pub fn main_impl() -> ExitCode {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // `cargo ying test` runs `cargo-ying ying test`; `cargo-ying test` (run directly) means the same.
    if args.get(1).is_none_or(|arg| arg != "ying") {
        args.insert(1.min(args.len()), "ying".into());
    }
    let cli = match cli::Cargo::try_parse_from(args) {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return ExitCode::from(if error.use_stderr() { EXIT_USAGE } else { EXIT_OK });
        }
    };
    let cli::CargoCommand::Ying(ying) = cli.command;
    let result = match ying.command {
        cli::Command::Test(args) => test_command::run(*args),
        cli::Command::Accept(args) => accept_command::run(args),
        cli::Command::Diff(args) => diff_command::run(args),
        cli::Command::Merge(args) => merge_command::run(args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}
