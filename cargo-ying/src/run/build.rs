//! Building the test binaries: `cargo test --no-run --message-format=json-render-diagnostics`, the executables
//! taken from cargo's `compiler-artifact` messages. Compiler diagnostics reach the user as cargo renders them.

use crate::error::{BuildError, Error, Result};
use crate::run::process;
use crate::signals;
use cargo_metadata::{Message, Metadata};
use std::io::BufReader;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use ying_report::TargetKind;

/// What cargo is asked to build, as the command line gave it: the arguments of `cargo test --no-run`, and what cargo
/// ying reads of them.
#[derive(Clone, Debug, Default)]
pub(crate) struct CargoArgs {
    /// The arguments, passed on as given: packages, targets, features, profile, target triple, lock file and network
    /// flags, manifest path, target directory.
    pub args: Vec<String>,
    /// `--manifest-path`.
    pub manifest_path: Option<PathBuf>,
    /// `--target-dir`.
    pub target_dir: Option<PathBuf>,
    /// `--locked`, `--offline` and `--frozen` as given, which `cargo metadata` takes too.
    pub lock_flags: Vec<&'static str>,
    /// Targets are selected (`--lib`, `--bins`, `--tests`, `--examples`, `--all-targets` or named ones) rather than
    /// cargo's default targets: `cargo test` then runs no doctests either.
    pub selects_targets: bool,
    /// Packages are selected (`-p`).
    pub selects_packages: bool,
}

impl CargoArgs {
    /// Whether cargo builds its default targets (lib, bins, tests), of the packages it would by default: only then
    /// can a run select every test.
    pub(crate) fn builds_default_targets(&self) -> bool {
        !self.selects_targets && !self.selects_packages
    }
}

/// One test executable.
#[derive(Clone, Debug)]
pub(crate) struct TestBinary {
    /// The package it belongs to.
    pub package: String,
    /// The target's name (`leaks` for `tests/leaks.rs`, the library's name for its unit tests).
    pub name: String,
    /// The target's kind.
    pub kind: TargetKind,
    /// The executable.
    pub path: PathBuf,
    /// The package's directory: the tests run there, as under `cargo test`.
    pub package_dir: PathBuf,
}

impl TestBinary {
    /// The id of its test `name`.
    pub(crate) fn test_id(&self, name: &str) -> ying_report::TestId {
        ying_report::TestId::new(&self.package, self.kind, &self.name, name)
    }

    /// Its id, as cargo-nextest writes it (`pkg`, `pkg::tests`, `pkg::bin/tool`).
    pub(crate) fn binary_id(&self) -> String {
        self.test_id("").binary_id()
    }
}

/// The cargo executable: the one that invoked us, or `cargo` on the path.
pub(crate) fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// The kind of a target as cargo metadata gives it; `None` for one that has no tests (a build script).
pub(crate) fn target_kind(target: &cargo_metadata::Target) -> Option<TargetKind> {
    let kinds: Vec<String> = target.kind.iter().map(ToString::to_string).collect();
    TargetKind::from_cargo(&kinds.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Builds the test binaries and returns them, in cargo's order. `verbosity`: cargo's `--quiet` or `--verbose`,
/// if any.
pub(crate) fn build(cargo_args: &CargoArgs, metadata: &Metadata, verbosity: Option<&str>) -> Result<Vec<TestBinary>> {
    let mut command = cargo();
    command
        .args(["test", "--no-run", "--message-format=json-render-diagnostics"])
        .args(verbosity)
        .args(&cargo_args.args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    // In a process group of its own, with every rustc it starts: stopped whole when cargo ying is asked to stop,
    // and by the watchdog when cargo ying is killed.
    let mut child = process::spawn(&mut command).map_err(|error| Error::Build(BuildError::Spawn(error)))?;
    let stopper = process::stop_on_interrupt(&child);
    let binaries = read_binaries(&mut child, metadata);
    drop(stopper);
    let status = child.wait().map_err(|error| Error::Build(BuildError::Messages(error)));
    // What is left of the group (nothing, once cargo exited) goes, and the watchdog forgets it.
    process::kill_group(&mut child);
    if let Some(signal) = signals::interrupted() {
        return Err(Error::Interrupted { during: "build the tests", signal });
    }
    let status = status?;
    if !status.success() {
        return Err(Error::Build(BuildError::Failed(status)));
    }
    binaries
}

/// The test binaries of cargo's messages on `child`'s standard output, until it ends.
fn read_binaries(child: &mut std::process::Child, metadata: &Metadata) -> Result<Vec<TestBinary>> {
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut binaries = Vec::new();
    for message in Message::parse_stream(BufReader::new(stdout)) {
        let message = message.map_err(|error| Error::Build(BuildError::Messages(error)))?;
        let Message::CompilerArtifact(artifact) = message else { continue };
        let (Some(executable), true) = (artifact.executable, artifact.profile.test) else { continue };
        let Some(kind) = target_kind(&artifact.target) else {
            continue;
        };
        let package = metadata.packages.iter().find(|package| package.id == artifact.package_id);
        let (package, package_dir) = match package {
            Some(package) => (
                package.name.to_string(),
                package.manifest_path.parent().map(|dir| dir.as_std_path().to_owned()).unwrap_or_default(),
            ),
            None => (artifact.target.name.clone(), metadata.workspace_root.as_std_path().to_owned()),
        };
        binaries.push(TestBinary {
            package,
            name: artifact.target.name.clone(),
            kind,
            path: executable.into_std_path_buf(),
            package_dir,
        });
    }
    Ok(binaries)
}
