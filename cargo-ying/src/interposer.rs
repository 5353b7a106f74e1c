//! The allocation interposer for `--measure all`: the `ying-preload` shared library, built by cargo ying itself
//! (once per target directory, then reused) and loaded into each test process with `LD_PRELOAD`.
//!
//! It is built from a small crate cargo ying writes under `<target-dir>/ying/interposer/`, a `cdylib` over
//! `ying-preload`: from this source tree when cargo ying runs from one (its lock file copied, so the versions are
//! those ying is tested with), else from the registry at cargo ying's own version. Once built, cargo's check that
//! it is up to date runs while the tests are built and listed, not after.

use crate::build::cargo;
use crate::error::{Error, InterposerError, Result};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Whether this platform has the interposer: Linux with glibc (`LD_PRELOAD`, and glibc's allocator under its own
/// names to forward to).
pub const SUPPORTED: bool = cfg!(all(target_os = "linux", target_env = "gnu"));

/// The environment variable that loads a shared library into a process before its own.
pub const PRELOAD_ENV: &str = "LD_PRELOAD";

/// ying-preload in the source tree cargo ying was built from.
const SOURCE_TREE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../ying-preload");
/// ying's lock file in that tree.
const SOURCE_LOCK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.lock");

/// The library's file name.
const LIBRARY: &str = "libying_interposer.so";

/// The interposer's build, started by [`start`] beside the tests' build; [`Build::finish`] waits for it and gives
/// the library's path.
pub struct Build {
    library: PathBuf,
    cargo: Cargo,
}

/// How the interposer's `cargo build` runs.
enum Cargo {
    /// Started at once, its output kept: the library was built before from the same crate, and cargo only checks
    /// that it is up to date, in the time the tests' own build takes.
    Checking(Child),
    /// Run by [`Build::finish`], after the tests' build, its output shown as it goes (a build error of the tests
    /// comes first): the first build, or one that a changed crate makes.
    Building(Command),
}

/// Writes the interposer's crate under `out_dir` (`<target-dir>/ying`) and starts building it, unless it needs a
/// build that shows its output (see `Cargo`). `verbosity`: cargo's `--quiet` or `--verbose`; `cargo_flags`:
/// `--offline` when the run stays off the network.
pub fn start(out_dir: &Path, verbosity: Option<&str>, cargo_flags: &[&str]) -> Result<Build> {
    if !SUPPORTED {
        return Err(Error::Interposer(InterposerError::Unsupported));
    }
    let dir = out_dir.join("interposer");
    std::fs::create_dir_all(&dir).map_err(Error::io("create", &dir))?;
    let source = Path::new(SOURCE_TREE);
    let dependency = if source.join("Cargo.toml").is_file() {
        let lock = dir.join("Cargo.lock");
        if !lock.exists() {
            // A missing lock file only means the registry decides the versions.
            let _ = std::fs::copy(SOURCE_LOCK, &lock);
        }
        format!("{{ path = {:?} }}", source.display().to_string())
    } else {
        format!("\"={}\"", env!("CARGO_PKG_VERSION"))
    };
    let mut changed = write_if_changed(&dir.join("Cargo.toml"), &manifest(&dependency))?;
    changed |= write_if_changed(
        &dir.join("lib.rs"),
        "//! ying's allocation interposer, as one shared library.\n\nextern crate ying_preload;\n",
    )?;
    let target_dir = dir.join("target");
    let library = target_dir.join("release").join(LIBRARY);
    let mut command = cargo();
    command
        .args(["build", "--release", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .args(verbosity)
        .args(cargo_flags)
        // The user's flags for their own build are not the interposer's (a `-C target-cpu`, say, is harmless, a
        // sanitizer is not).
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .stdout(Stdio::null());
    let cargo = if changed || !library.is_file() {
        Cargo::Building(command)
    } else {
        let child = command.stderr(Stdio::piped()).spawn().map_err(spawn_failed)?;
        Cargo::Checking(child)
    };
    Ok(Build { library, cargo })
}

impl Build {
    /// Waits for the build (or runs it) and returns the library's path. A check's output is shown when it failed,
    /// or with `--verbose` (`verbose`).
    pub fn finish(self, verbose: bool) -> Result<PathBuf> {
        let status = match self.cargo {
            Cargo::Building(mut command) => command.stderr(Stdio::inherit()).status().map_err(spawn_failed)?,
            Cargo::Checking(child) => {
                let output = child.wait_with_output().map_err(spawn_failed)?;
                if verbose || !output.status.success() {
                    let _ = std::io::Write::write_all(&mut std::io::stderr(), &output.stderr);
                }
                output.status
            }
        };
        if !status.success() {
            return Err(Error::Interposer(InterposerError::Failed(status)));
        }
        Ok(self.library)
    }

    /// Ends the build unused (the tests' build failed, or no test is selected): a check started is waited for, so
    /// that no cargo outlives the run; a build not started is not run.
    pub fn abandon(self) {
        if let Cargo::Checking(child) = self.cargo {
            let _ = child.wait_with_output();
        }
    }
}

/// The error of a `cargo build` of the interposer that could not be started or waited for.
fn spawn_failed(error: std::io::Error) -> Error {
    Error::Interposer(InterposerError::Spawn(error))
}

/// The crate's manifest, with `ying-preload` as `dependency` (a TOML value).
fn manifest(dependency: &str) -> String {
    format!(
        "# Written by cargo ying: the allocation interposer of `cargo ying test --measure all`.\n\
         [package]\nname = \"ying-interposer\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
         [lib]\ncrate-type = [\"cdylib\"]\npath = \"lib.rs\"\n\n\
         [dependencies]\nying-preload = {dependency}\n\n\
         # Line tables, for the names of the interposer's own frames.\n\
         [profile.release]\ndebug = \"line-tables-only\"\n\n\
         # A workspace of its own, whatever encloses the target directory.\n[workspace]\n"
    )
}

/// Writes `contents` to `path` unless it holds them already (cargo rebuilds what changed); returns whether it wrote.
fn write_if_changed(path: &Path, contents: &str) -> Result<bool> {
    if std::fs::read_to_string(path).is_ok_and(|existing| existing == contents) {
        return Ok(false);
    }
    std::fs::write(path, contents).map_err(Error::io("write", path))?;
    Ok(true)
}

/// `LD_PRELOAD` for a test process: the interposer first, then whatever the environment preloads already.
pub fn preload_value(library: &Path) -> std::ffi::OsString {
    let mut value = library.as_os_str().to_owned();
    if let Some(existing) = std::env::var_os(PRELOAD_ENV).filter(|existing| !existing.is_empty()) {
        value.push(":");
        value.push(existing);
    }
    value
}

#[cfg(test)]
mod tests {
    use super::manifest;

    #[test]
    fn the_crate_is_a_shared_library_over_ying_preload_in_a_workspace_of_its_own() {
        let toml: toml::Table = manifest("{ path = \"/src/ying-preload\" }").parse().unwrap();
        assert_eq!(toml["lib"]["crate-type"].as_array().unwrap()[0].as_str(), Some("cdylib"));
        assert_eq!(toml["dependencies"]["ying-preload"]["path"].as_str(), Some("/src/ying-preload"));
        assert!(toml.contains_key("workspace"));
        let released: toml::Table = manifest("\"=0.1.0\"").parse().unwrap();
        assert_eq!(released["dependencies"]["ying-preload"].as_str(), Some("=0.1.0"));
    }
}
