//! `cargo ying`: runs a test suite with ying's leak tests, each test in a process of its own, and reports their
//! memory.
//!
//! The binary is a thin wrapper around [`main_impl`]; nextest's wrapper script, `ying-wrap`, around [`wrap_impl`].
//! One job per module, from the door inwards:
//! - the command line: `cli` parses it (clap), `settings` resolves what it says with `[workspace.metadata.ying]`
//!   (`config`) into the values the rest takes; `commands` (`test`, `list`, `accept`, `diff`, `merge`, `setup`,
//!   `gate`, `wrap`) each tie the modules below together for one job; `ending` is the end of a run that `test` and
//!   `gate` share;
//! - `outputs`: the terminal, the run's files, GitHub Actions and JUnit, each reading the run model and deciding
//!   nothing;
//! - `run`: the pipeline, from the build of the test binaries to each test's report (see its module);
//! - the verdict: `model` is the run model, where each test's result (outcome, figures, gate verdict, files) is
//!   decided once, judged by `gate` against the `baseline`; `saved` reads a finished run back, `nextest` what a
//!   nextest run left (and the profile that has nextest run the tests measured);
//! - the ground: `workspace` (metadata, configuration, where files go), `error` (what stops a command, with its
//!   exit code), `signals` (their names; SIGINT and SIGTERM caught), `lock` (how a lock is waited for).
//!
//! What crosses from the runtime (reports) and what is kept (summaries, baselines, exit codes) is defined once, in
//! the `ying-report` crate; the rules stacks are read by, in `ying-frames`.

mod baseline;
mod cli;
mod commands;
mod config;
mod ending;
mod error;
mod gate;
mod lock;
mod model;
mod nextest;
mod outputs;
mod run;
mod saved;
mod settings;
mod signals;
mod workspace;

use clap::Parser;
use std::process::ExitCode;

/// Runs `cargo ying` with the process's arguments and returns its exit code.
pub fn main_impl() -> ExitCode {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|arg| arg == run::process::WATCHDOG_ARG) {
        run::process::watchdog(std::io::stdin().lock());
        return ExitCode::SUCCESS;
    }
    // nextest's wrapper runs once per test, ahead of it: a test binary and its arguments need no parser.
    if args.len() > 3 && args[1] == "ying" && args[2] == "wrap" && !args[3].to_string_lossy().starts_with('-') {
        let args = cli::WrapArgs { setup: false, command: args.split_off(3) };
        return finish(commands::wrap::run(&args));
    }
    // `cargo ying test` runs `cargo-ying ying test`; `cargo-ying test` (run directly) means the same.
    if args.get(1).is_none_or(|arg| arg != "ying") {
        args.insert(1.min(args.len()), "ying".into());
    }
    let cli = match cli::Cargo::try_parse_from(args) {
        Ok(cli) => cli,
        Err(error) => {
            if error.use_stderr() {
                eprint!("{}", cli::message(&error));
            } else {
                let _ = error.print();
            }
            return ExitCode::from(cli::exit_code(&error));
        }
    };
    let cli::CargoCommand::Ying(ying) = cli.command;
    let result = match &ying.command {
        cli::Command::Test(args) => commands::test::run(args),
        cli::Command::List(args) => commands::list::run(args),
        cli::Command::Accept(args) => commands::accept::run(args),
        cli::Command::Diff(args) => commands::diff::run(args),
        cli::Command::Merge(args) => commands::merge::run(args),
        cli::Command::Setup(cli::SetupCommand::Nextest(args)) => commands::setup::nextest(args),
        cli::Command::Gate(args) => commands::gate::run(args),
        cli::Command::Wrap(args) if args.setup => commands::setup_script::run(),
        cli::Command::Wrap(args) => commands::wrap::run(args),
    };
    finish(result)
}

/// Runs `ying-wrap`, the wrapper and setup script of nextest's profile `ying` (`cargo ying setup nextest`), with the
/// process's arguments: nextest lists every binary through it and runs it once per run as the setup script
/// (`--setup`), and the interposer hands it an archive's tests, so it is a program of its own, small and quick to
/// start. nextest's list phase of a binary of a target directory is run and recorded here, and a test of a binary
/// whose plan the run keeps (`commands::wrap`) runs in this process's place at once; anything else (the setup
/// script, a binary's first test, an archive's binary, and every error, which it words) is `cargo-ying ying
/// wrap`'s, which this process becomes.
pub fn wrap_impl() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if let Some(code) = commands::wrap::run_kept(&args) {
        return ExitCode::from(code);
    }
    // The cargo-ying installed beside this program, else the one on PATH.
    let cargo_ying = std::env::current_exe()
        .map(|exe| exe.with_file_name("cargo-ying"))
        .ok()
        .filter(|path| path.is_file())
        .unwrap_or_else(|| "cargo-ying".into());
    let source = std::os::unix::process::CommandExt::exec(
        std::process::Command::new(&cargo_ying).args(["ying", "wrap"]).args(&args),
    );
    finish(Err(error::Error::Wrap(error::WrapError::HandOver { path: cargo_ying, source })))
}

/// The exit code of a command's `result`, its error said first.
fn finish(result: error::Result<u8>) -> ExitCode {
    match result {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("error: {}", error.chain());
            ExitCode::from(error.exit_code())
        }
    }
}
