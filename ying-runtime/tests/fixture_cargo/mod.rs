//! `cargo test` on a fixture workspace, as the tests that build one run it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's root.
pub(crate) fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// `cargo test --no-fail-fast` on the fixture workspace of `manifest` (relative to the repository), built into
/// `target_dir` (relative to the repository), with a cleaned environment: cargo's, ying's and libtest's variables
/// removed (the toolchain's kept), no color, no backtraces. The caller adds the targets, the profile and libtest's
/// arguments.
pub(crate) fn cargo_test(manifest: &str, target_dir: &str) -> Command {
    let root = repository();
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.args(["test", "--no-fail-fast", "--manifest-path"]).arg(root.join(manifest));
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        let keep = ["CARGO_HOME", "RUSTUP_HOME", "RUSTUP_TOOLCHAIN"].contains(&key.as_ref());
        if (key.starts_with("CARGO_") && !keep) || key.starts_with("YING_") || key.starts_with("RUST_TEST_") {
            command.env_remove(key.as_ref());
        }
    }
    command.env("CARGO_TARGET_DIR", root.join(target_dir)).env("CARGO_TERM_COLOR", "never").env("RUST_BACKTRACE", "0");
    command
}
