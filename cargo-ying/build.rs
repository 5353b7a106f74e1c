//! Builds the allocation interposer of `cargo ying test --measure all` (`ying-preload`, as one shared library) while
//! cargo-ying is built, for the binary to carry it (`run::exec::interposer`): an installed cargo-ying needs no source
//! tree, no network and no build to measure every test, and fetches nothing by name.
//!
//! The library is built from the `ying-preload` beside this package, with this workspace's lock file, by a cargo of
//! its own in `OUT_DIR` (a workspace of its own, released, with line tables for the names of its own frames), and
//! without the flags of the build around it (a `-C target-cpu`, say, is harmless; a sanitizer is not), its paths
//! remapped so that it names no directory of the machine it was built on. Where there is no interposer (not Linux
//! with glibc), the binary carries an empty one, and `--measure all` says so.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The library's file name.
const LIBRARY: &str = "libying_interposer.so";
/// What the workspace's directory is called in the library.
const REMAPPED: &str = "/ying";

fn main() {
    let manifest_dir = PathBuf::from(var("CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(var("OUT_DIR"));
    let library = out_dir.join(LIBRARY);
    let workspace = manifest_dir.parent().expect("cargo-ying is in the workspace").to_path_buf();
    // The sources the library is built from: ying-preload and the packages it depends on, and the lock file.
    for source in ["ying-preload", "ying-runtime", "ying-report", "ying-frames", "ying-macros", "Cargo.lock"] {
        println!("cargo::rerun-if-changed={}", workspace.join(source).display());
    }
    let supported = var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ENV") == "gnu";
    if !supported {
        std::fs::write(&library, []).expect("OUT_DIR is writable");
        checksum(&library);
        return;
    }
    let dir = out_dir.join("interposer");
    std::fs::create_dir_all(&dir).expect("OUT_DIR is writable");
    let preload = workspace.join("ying-preload");
    write(&dir.join("Cargo.toml"), &manifest(&preload));
    write(
        &dir.join("lib.rs"),
        "//! ying's allocation interposer, as one shared library.\n\nextern crate ying_preload;\n",
    );
    std::fs::copy(workspace.join("Cargo.lock"), dir.join("Cargo.lock")).expect("the workspace has a lock file");
    let target = dir.join("target");
    let mut cargo = Command::new(var("CARGO"));
    cargo.args(["build", "--release", "--quiet", "--manifest-path"]).arg(dir.join("Cargo.toml"));
    cargo.arg("--target-dir").arg(&target);
    for flags in
        ["RUSTFLAGS", "CARGO_BUILD_RUSTFLAGS", "CARGO_TARGET_DIR", "CARGO_BUILD_TARGET", "RUSTC_WORKSPACE_WRAPPER"]
    {
        cargo.env_remove(flags);
    }
    // The sources' directory is named `/ying` in the library (its line tables, its panics' locations): the binary
    // that carries it names no directory of this machine. The runtime is told where its source then is, for the
    // frames it trims.
    let remap = format!("--remap-path-prefix={}={REMAPPED}", workspace.display());
    cargo.env("CARGO_ENCODED_RUSTFLAGS", remap);
    cargo.env("YING_REMAPPED_RUNTIME_SOURCE", format!("{REMAPPED}/ying-runtime/src/"));
    let status = cargo.status().expect("cargo runs");
    assert!(status.success(), "building the allocation interposer failed: {status}");
    std::fs::copy(target.join("release").join(LIBRARY), &library).expect("the interposer was built");
    checksum(&library);
}

/// The library's checksum, for the binary to name its cache directory by (`YING_INTERPOSER_CHECKSUM`): computed
/// once here, not by every process that looks for the library (nextest's wrapper runs once per test).
fn checksum(library: &Path) {
    use std::hash::Hasher as _;
    let bytes = std::fs::read(library).expect("the interposer was written");
    // SipHash with fixed keys: the same bytes give the same name in this build, and other bytes another.
    let mut hasher = std::hash::DefaultHasher::new();
    hasher.write(&bytes);
    let mut second = std::hash::DefaultHasher::new();
    second.write_u64(hasher.finish());
    second.write(&bytes[bytes.len() / 2..]);
    println!("cargo::rustc-env=YING_INTERPOSER_CHECKSUM={:016x}{:016x}", hasher.finish(), second.finish());
}

/// An environment variable cargo sets for build scripts.
fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("cargo sets {name}"))
}

/// Writes `contents` to `path` unless it holds them already: cargo rebuilds what changed.
fn write(path: &Path, contents: &str) {
    if std::fs::read_to_string(path).is_ok_and(|existing| existing == contents) {
        return;
    }
    std::fs::write(path, contents).expect("OUT_DIR is writable");
}

/// The manifest of the library's crate: a `cdylib` over the `ying-preload` at `preload`.
fn manifest(preload: &Path) -> String {
    format!(
        "# Written by cargo-ying's build: the allocation interposer of `cargo ying test --measure all`.\n\
         [package]\nname = \"ying-interposer\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
         [lib]\ncrate-type = [\"cdylib\"]\npath = \"lib.rs\"\n\n\
         [dependencies]\nying-preload = {{ path = {:?} }}\n\n\
         # Line tables, for the names of the interposer's own frames.\n\
         [profile.release]\ndebug = \"line-tables-only\"\n\n\
         # A workspace of its own.\n[workspace]\n",
        preload.display().to_string()
    )
}
