//! Building the test binaries: `cargo test --no-run --message-format=json-render-diagnostics`, the executables
//! taken from cargo's `compiler-artifact` messages. Compiler diagnostics reach the user as cargo renders them.

use crate::cli::CargoOptions;
use crate::error::{BuildError, Error, Result};
use cargo_metadata::{Message, Metadata, MetadataCommand};
use std::io::BufReader;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use ying_report::TargetKind;

/// One test executable.
#[derive(Clone, Debug)]
pub struct TestBinary {
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
    pub fn test_id(&self, name: &str) -> ying_report::TestId {
        ying_report::TestId::new(&self.package, self.kind, &self.name, name)
    }
}

/// The cargo executable: the one that invoked us, or `cargo` on the path.
pub fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Reads the workspace's metadata (packages, target directory, `[workspace.metadata]`).
pub fn metadata(options: &CargoOptions) -> Result<Metadata> {
    let mut command = MetadataCommand::new();
    command.no_deps();
    if let Some(path) = &options.manifest_path {
        command.manifest_path(path);
    }
    let flags = [(options.offline, "--offline"), (options.frozen, "--frozen"), (options.locked, "--locked")];
    command.other_options(flags.iter().filter(|(on, _)| *on).map(|(_, flag)| (*flag).to_owned()).collect::<Vec<_>>());
    command.exec().map_err(Error::Metadata)
}

/// The kind of a target as cargo metadata gives it; `None` for one that has no tests (a build script).
pub fn target_kind(target: &cargo_metadata::Target) -> Option<TargetKind> {
    let kinds: Vec<String> = target.kind.iter().map(ToString::to_string).collect();
    TargetKind::from_cargo(&kinds.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Builds the test binaries and returns them, in cargo's order. `verbosity`: cargo's `--quiet` or `--verbose`,
/// if any.
pub fn build(options: &CargoOptions, metadata: &Metadata, verbosity: Option<&str>) -> Result<Vec<TestBinary>> {
    let mut child = cargo()
        .args(["test", "--no-run", "--message-format=json-render-diagnostics"])
        .args(verbosity)
        .args(options.cargo_args())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|error| Error::Build(BuildError::Spawn(error)))?;
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
    let status = child.wait().map_err(|error| Error::Build(BuildError::Messages(error)))?;
    if !status.success() {
        return Err(Error::Build(BuildError::Failed(status)));
    }
    Ok(binaries)
}
