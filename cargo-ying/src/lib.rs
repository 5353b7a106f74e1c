//! `cargo ying`: runs a test suite with ying's leak tests, each test in a process of its own, and reports their
//! memory.
//!
//! The binary is a thin wrapper around [`main_impl`]. One job per module:
//! - the command line and the workspace: [`cli`] parses the command line, [`config`] reads
//!   `[workspace.metadata.ying]` into typed values, [`workspace`] finds the workspace's files, [`error`] names
//!   what stops a command and its exit code;
//! - a run: [`build`] builds the test binaries through cargo, [`not_run`] sets aside and names what cargo ying does
//!   not run (doctests, `harness = false` targets), [`discover`] lists and selects their tests (with
//!   [`filterset`]s), [`partition`] splits them across machines, [`plan`] is these together; [`runner`] runs each
//!   in its own process (started, killed and waited for by [`process`]), with the allocation [`interposer`] loaded
//!   under `--measure all`, one run per target directory
//!   ([`run_lock`]), [`known_code`] tells each test process the code its runtime knows by address, [`collect`]
//!   takes its report, [`symbols`] symbolises the stacks it deferred;
//! - the verdict: [`model`] is the run model, where each test's result (outcome, figures, gate verdict, files) is
//!   decided once, judged by [`gate`] against the [`baseline`];
//! - [`outputs`]: the terminal, the run's files, GitHub Actions and JUnit, each reading the run model;
//! - [`commands`]: `test`, `list`, `accept`, `diff` and `merge`, the last three from a finished run read back by
//!   [`saved`].
//!
//! What crosses from the runtime (reports) and what is kept (summaries, baselines) is defined once, in the
//! `ying-report` crate.

pub mod baseline;
pub mod build;
pub mod cli;
pub mod collect;
pub mod commands;
pub mod config;
pub mod discover;
pub mod error;
pub mod filterset;
pub mod gate;
pub mod interposer;
pub mod known_code;
pub mod model;
pub mod not_run;
pub mod outputs;
pub mod partition;
pub mod plan;
pub mod process;
pub mod rerun;
pub mod run_lock;
pub mod runner;
pub mod saved;
pub mod symbol_cache;
pub mod symbols;
pub mod workspace;

use clap::Parser;
use std::process::ExitCode;

use ying_report::exit_code;

/// Runs `cargo ying` with the process's arguments and returns its exit code.
pub fn main_impl() -> ExitCode {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|arg| arg == process::WATCHDOG_ARG) {
        process::watchdog(std::io::stdin().lock());
        return ExitCode::SUCCESS;
    }
    // `cargo ying test` runs `cargo-ying ying test`; `cargo-ying test` (run directly) means the same.
    if args.get(1).is_none_or(|arg| arg != "ying") {
        args.insert(1.min(args.len()), "ying".into());
    }
    let cli = match cli::Cargo::try_parse_from(args) {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return ExitCode::from(if error.use_stderr() { exit_code::USAGE } else { exit_code::OK });
        }
    };
    let cli::CargoCommand::Ying(ying) = cli.command;
    let result = match ying.command {
        cli::Command::Test(args) => commands::test::run(*args),
        cli::Command::List(args) => commands::list::run(*args),
        cli::Command::Accept(args) => commands::accept::run(args),
        cli::Command::Diff(args) => commands::diff::run(args),
        cli::Command::Merge(args) => commands::merge::run(args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("error: {}", error.chain());
            ExitCode::from(error.exit_code())
        }
    }
}
