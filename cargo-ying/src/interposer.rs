//! The allocation interposer for `--measure all`: the `ying-preload` shared library, built by cargo ying itself
//! (once per target directory, then reused) and loaded into each test process with `LD_PRELOAD`.
//!
//! It is built from a small crate cargo ying writes under `<target-dir>/ying/interposer/`, a `cdylib` over
//! `ying-preload`: from this source tree when cargo ying runs from one (its lock file copied, so the versions are
//! those ying is tested with), else from the registry at cargo ying's own version.

use crate::build::cargo;
use crate::error::{Error, InterposerError, Result};
use std::path::{Path, PathBuf};
use std::process::Stdio;

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

/// Builds the interposer under `out_dir` (`<target-dir>/ying`), unless it is built and up to date, and returns the
/// library's path. `verbosity`: cargo's `--quiet` or `--verbose`; `cargo_flags`: `--offline` when the run stays
/// off the network.
pub fn build(out_dir: &Path, verbosity: Option<&str>, cargo_flags: &[&str]) -> Result<PathBuf> {
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
    write_if_changed(&dir.join("Cargo.toml"), &manifest(&dependency))?;
    write_if_changed(
        &dir.join("lib.rs"),
        "//! ying's allocation interposer, as one shared library.\n\nextern crate ying_preload;\n",
    )?;
    let target_dir = dir.join("target");
    let status = cargo()
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
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .status()
        .map_err(|error| Error::Interposer(InterposerError::Spawn(error)))?;
    if !status.success() {
        return Err(Error::Interposer(InterposerError::Failed(status)));
    }
    Ok(target_dir.join("release").join(LIBRARY))
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

/// Writes `contents` to `path` unless it holds them already (cargo rebuilds what changed).
fn write_if_changed(path: &Path, contents: &str) -> Result<()> {
    if std::fs::read_to_string(path).is_ok_and(|existing| existing == contents) {
        return Ok(());
    }
    std::fs::write(path, contents).map_err(Error::io("write", path))
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
