//! Building the test binaries: `cargo test --no-run --message-format=json-render-diagnostics`, the executables
//! taken from cargo's `compiler-artifact` messages, and what else the build made as nextest records it (its
//! executables and dynamic libraries that are not tests, the build scripts' linked paths and output directories).
//! Compiler diagnostics reach the user as cargo renders them.

use crate::error::{BuildError, Error, Result};
use crate::run::process;
use crate::signals;
use cargo_metadata::{Message, Metadata};
use std::collections::{BTreeMap, BTreeSet};
use std::io::BufReader;
use std::path::{Path, PathBuf};
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
    /// `--target`: the triple cross-compiled for.
    pub target: Option<String>,
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

/// What a build made, as cargo's messages tell it.
#[derive(Debug, Default)]
pub(crate) struct Built {
    /// The test binaries, in cargo's order.
    pub binaries: Vec<TestBinary>,
    /// The rest, as nextest's test list records it.
    pub meta: BuildMeta,
}

/// What nextest's test list records of a build beyond its test binaries (its `rust-build-meta`), each path relative
/// to the build directory (`cargo metadata`'s, the target directory unless cargo's `build.build-dir` moves it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct BuildMeta {
    /// The directory cargo builds in.
    pub build_directory: PathBuf,
    /// The triple cross-compiled for (`--target`), if any.
    pub target_platform: Option<String>,
    /// The `[<triple>/]<profile>` directories the executables were built into.
    pub base_output_directories: BTreeSet<String>,
    /// The executables (`bin-exe`) and dynamic libraries (`dylib`) that are not tests, by package id: each one's
    /// target name, kind and path.
    pub non_test_binaries: BTreeMap<String, BTreeSet<(String, &'static str, String)>>,
    /// The directories build scripts gave the linker (`cargo::rustc-link-search`).
    pub linked_paths: BTreeSet<String>,
    /// The build scripts' output directories, by package id: of the workspace's packages that have a test binary.
    pub build_script_out_dirs: BTreeMap<String, String>,
    /// The variables the same build scripts set for the compiler (`cargo::rustc-env`), by package id; none for a
    /// script that sets none.
    pub build_script_envs: BTreeMap<String, BTreeMap<String, String>>,
}

impl BuildMeta {
    /// The start of a build in `metadata`'s workspace.
    fn new(metadata: &Metadata) -> Self {
        let build_directory = metadata.build_directory.as_ref().unwrap_or(&metadata.target_directory);
        Self { build_directory: build_directory.as_std_path().to_owned(), ..Self::default() }
    }

    /// `path` relative to the build directory, with forward slashes, as nextest writes it; `None` outside it.
    fn relative(&self, path: &Path) -> Option<String> {
        let relative = path.strip_prefix(&self.build_directory).ok()?;
        Some(relative.components().map(|part| part.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/"))
    }

    /// Takes in an executable at `path`: its base output directory (`debug` of `debug/deps/<binary>`,
    /// `debug/examples/<binary>`, or `debug/build/<package>/<hash>/out/<binary>` in cargo's newer layout).
    fn executable(&mut self, path: &Path) {
        let Some(relative) = self.relative(path) else { return };
        let parts: Vec<&str> = relative.split('/').collect();
        let base = match parts.as_slice() {
            [base @ .., "deps" | "examples", _] => base,
            [base @ .., "build", _, _, "out", _] => base,
            _ => return,
        };
        if !base.is_empty() {
            self.base_output_directories.insert(base.join("/"));
        }
    }

    /// Takes in a build script's run: its linked paths (`native=` and the like left out), and its output directory
    /// when its package is one of `workspace`'s.
    fn build_script(&mut self, script: &cargo_metadata::BuildScript, workspace: &[cargo_metadata::PackageId]) {
        for path in &script.linked_paths {
            let path = path.as_str().split_once('=').map_or(path.as_str(), |(_, path)| path);
            if let Some(relative) = self.relative(Path::new(path)) {
                self.linked_paths.insert(relative);
            }
        }
        if !workspace.contains(&script.package_id) {
            return;
        }
        let package = &script.package_id.repr;
        if let Some(out_dir) = self.relative(script.out_dir.as_std_path()) {
            self.build_script_out_dirs.insert(package.clone(), out_dir);
        }
        if !script.env.is_empty() {
            self.build_script_envs.insert(package.clone(), script.env.iter().cloned().collect());
        }
    }

    /// Takes in an artifact that is no test: an executable (`bin-exe`) or a dynamic library's files (`dylib`).
    fn non_test(&mut self, artifact: &cargo_metadata::Artifact) {
        use cargo_metadata::TargetKind as Kind;
        let kinds = &artifact.target.kind;
        let files: Vec<(&'static str, &cargo_metadata::camino::Utf8PathBuf)> = match &artifact.executable {
            Some(executable) if kinds.contains(&Kind::Bin) => vec![("bin-exe", executable)],
            None if kinds.iter().any(|kind| matches!(kind, Kind::DyLib | Kind::CDyLib)) => {
                artifact.filenames.iter().map(|file| ("dylib", file)).collect()
            }
            _ => return,
        };
        for (kind, file) in files {
            if let Some(path) = self.relative(file.as_std_path()) {
                let entry = (artifact.target.name.clone(), kind, path);
                self.non_test_binaries.entry(artifact.package_id.repr.clone()).or_default().insert(entry);
            }
        }
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

/// Builds the test binaries and returns them, in cargo's order, with what else the build made. `verbosity`: cargo's
/// `--quiet` or `--verbose`, if any.
pub(crate) fn build(cargo_args: &CargoArgs, metadata: &Metadata, verbosity: Option<&str>) -> Result<Built> {
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
    let built = read_built(&mut child, metadata).map(|mut built| {
        built.meta.target_platform.clone_from(&cargo_args.target);
        built
    });
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
    built
}

/// What cargo's messages on `child`'s standard output say was built, until it ends.
fn read_built(child: &mut std::process::Child, metadata: &Metadata) -> Result<Built> {
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut binaries = Vec::new();
    let mut meta = BuildMeta::new(metadata);
    let mut scripts = Vec::new();
    for message in Message::parse_stream(BufReader::new(stdout)) {
        let message = message.map_err(|error| Error::Build(BuildError::Messages(error)))?;
        let artifact = match message {
            Message::CompilerArtifact(artifact) => artifact,
            Message::BuildScriptExecuted(script) => {
                scripts.push(script);
                continue;
            }
            _ => continue,
        };
        if let Some(executable) = &artifact.executable {
            meta.executable(executable.as_std_path());
        }
        if !artifact.profile.test {
            meta.non_test(&artifact);
            continue;
        }
        let Some(executable) = artifact.executable else { continue };
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
    // Of the workspace's packages that have a test binary, as nextest keeps them.
    let tested: Vec<cargo_metadata::PackageId> = metadata
        .workspace_packages()
        .into_iter()
        .filter(|package| binaries.iter().any(|binary| binary.package == package.name.as_str()))
        .map(|package| package.id.clone())
        .collect();
    for script in &scripts {
        meta.build_script(script, &tested);
    }
    Ok(Built { binaries, meta })
}

#[cfg(test)]
mod tests {
    use super::BuildMeta;
    use serde_json::json;
    use std::path::{Path, PathBuf};

    fn meta() -> BuildMeta {
        BuildMeta { build_directory: PathBuf::from("/w/target"), ..BuildMeta::default() }
    }

    #[test]
    fn base_output_directories_are_read_from_cargos_layouts_as_nextest_reads_them() {
        let mut meta = meta();
        for path in [
            "/w/target/debug/deps/leaks-0123",
            "/w/target/x86_64-unknown-linux-gnu/release/examples/demo-4567",
            "/w/target/debug/build/pkg/89ab/out/tool",
            "/w/target/debug/tool",
            "/elsewhere/debug/deps/leaks-0123",
        ] {
            meta.executable(Path::new(path));
        }
        assert_eq!(
            meta.base_output_directories.into_iter().collect::<Vec<_>>(),
            ["debug", "x86_64-unknown-linux-gnu/release"]
        );
    }

    #[test]
    fn build_scripts_and_artifacts_that_are_no_tests_are_recorded_relative_to_the_build_directory() {
        let package = "path+file:///w#pkg@0.1.0";
        let script: cargo_metadata::BuildScript = serde_json::from_value(json!({
            "package_id": package,
            "linked_libs": [],
            "linked_paths": ["native=/w/target/debug/build/pkg-1/out/lib", "/usr/lib"],
            "cfgs": [],
            "env": [["PKG_BUILT", "yes"]],
            "out_dir": "/w/target/debug/build/pkg-1/out"
        }))
        .unwrap();
        let mut meta = meta();
        meta.build_script(&script, &[]);
        assert_eq!(meta.linked_paths.iter().collect::<Vec<_>>(), ["debug/build/pkg-1/out/lib"]);
        assert!(meta.build_script_out_dirs.is_empty(), "not of a tested workspace package");
        meta.build_script(&script, std::slice::from_ref(&script.package_id));
        assert_eq!(meta.build_script_out_dirs[package], "debug/build/pkg-1/out");
        assert_eq!(meta.build_script_envs[package]["PKG_BUILT"], "yes");

        let artifact = |kind: &str, executable: Option<&str>, files: &[&str]| -> cargo_metadata::Artifact {
            serde_json::from_value(json!({
                "package_id": package,
                "manifest_path": "/w/Cargo.toml",
                "target": {
                    "name": "tool", "kind": [kind], "crate_types": [kind], "src_path": "/w/src/main.rs",
                    "edition": "2024", "doctest": false, "test": true
                },
                "profile": { "opt_level": "0", "debuginfo": 2, "debug_assertions": true, "overflow_checks": true,
                             "test": false },
                "features": [],
                "filenames": files,
                "executable": executable,
                "fresh": true
            }))
            .unwrap()
        };
        meta.non_test(&artifact("bin", Some("/w/target/debug/tool"), &["/w/target/debug/tool"]));
        meta.non_test(&artifact("cdylib", None, &["/w/target/debug/libtool.so"]));
        meta.non_test(&artifact("lib", None, &["/w/target/debug/libtool.rlib"]));
        let recorded: Vec<(String, &str, String)> = meta.non_test_binaries[package].iter().cloned().collect();
        assert_eq!(
            recorded,
            [
                ("tool".to_owned(), "bin-exe", "debug/tool".to_owned()),
                ("tool".to_owned(), "dylib", "debug/libtool.so".to_owned())
            ]
        );
    }
}
