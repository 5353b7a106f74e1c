//! The limits of the project's writing: BENCHMARKS.md holds one current table per measurement, short enough to read
//! whole, and what later rounds supersede moves to BENCHMARKS-LOG.md, which keeps every round.

use std::path::PathBuf;

/// The most lines BENCHMARKS.md may have.
const BENCHMARKS_MAX_LINES: usize = 250;

/// A file at the workspace's root.
fn at_root(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(name)
}

#[test]
fn benchmarks_stay_within_their_length() {
    let path = at_root("BENCHMARKS.md");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    let lines = text.lines().count();
    assert!(
        lines <= BENCHMARKS_MAX_LINES,
        "BENCHMARKS.md is {lines} lines long, over its limit of {BENCHMARKS_MAX_LINES} lines: keep one current table \
         per measurement there, and move superseded rounds into BENCHMARKS-LOG.md (under the round they came from)"
    );
}
