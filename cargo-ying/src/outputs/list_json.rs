//! `cargo ying list --message-format json`: the test list as cargo-nextest writes it (`cargo nextest list
//! --message-format json`, nextest-metadata's `TestListSummary`), so that tools reading nextest's read ours: every
//! test of every binary (`test-count` counts them all, as nextest's does) with whether it matches, and why not (`ignored`, `string`, `expression`, `partition`), the
//! binaries' ids, names, kinds, paths and packages. `--list-type binaries-only` gives the binaries alone
//! (`BinaryListSummary`), without running them to list their tests.
//!
//! What cargo ying does not know of a build is left out of `rust-build-meta` rather than made up (its platforms,
//! its build scripts' outputs).

use crate::run::build::TestBinary;
use crate::run::discover::{Mismatch, Selection};
use crate::run::plan::Plan;
use cargo_metadata::Metadata;
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;

/// `--message-format` of `cargo ying list`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ListFormat {
    /// Each binary's id, then its tests, indented
    #[default]
    Human,
    /// nextest's JSON test list, on one line
    Json,
    /// nextest's JSON test list, indented
    JsonPretty,
}

/// `--list-type` of `cargo ying list`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ListType {
    /// The binaries and their tests
    #[default]
    Full,
    /// The binaries alone, none of them run
    BinariesOnly,
}

/// The test list of `plan`, chosen by `selection`, as nextest's JSON.
pub(crate) fn tests(plan: &Plan, selection: &Selection, metadata: &Metadata) -> Value {
    let running: BTreeSet<(String, String)> =
        plan.running().map(|test| (test.binary.binary_id(), test.name.clone())).collect();
    let mut suites = Map::new();
    let mut count = 0;
    for binary in &plan.binaries {
        let binary_id = binary.binary_id();
        let mut cases = Map::new();
        for test in plan.listed.iter().filter(|test| Arc::ptr_eq(&test.binary, binary)) {
            let mismatch = selection.mismatch(&test.id(), test.ignored).or_else(|| {
                (!running.contains(&(binary_id.clone(), test.name.clone()))).then_some(Mismatch::Partition)
            });
            let filter_match = match mismatch {
                None => json!({ "status": "matches" }),
                Some(mismatch) => json!({ "status": "mismatch", "reason": mismatch.reason() }),
            };
            count += 1;
            cases.insert(
                test.name.clone(),
                json!({ "kind": "test", "ignored": test.ignored, "filter-match": filter_match }),
            );
        }
        let mut suite = binary_entry(binary, metadata);
        suite.insert("cwd".to_owned(), json!(binary.package_dir));
        suite.insert("status".to_owned(), json!("listed"));
        suite.insert("testcases".to_owned(), Value::Object(cases));
        suites.insert(binary_id, Value::Object(suite));
    }
    json!({
        "rust-build-meta": build_meta(&plan.binaries, metadata),
        "test-count": count,
        "rust-suites": suites,
    })
}

/// The binaries alone, as nextest's JSON binary list.
pub(crate) fn binaries(binaries: &[Arc<TestBinary>], metadata: &Metadata) -> Value {
    let entries: Map<String, Value> =
        binaries.iter().map(|binary| (binary.binary_id(), Value::Object(binary_entry(binary, metadata)))).collect();
    json!({ "rust-build-meta": build_meta(binaries, metadata), "rust-binaries": entries })
}

/// What nextest says of a test binary.
fn binary_entry(binary: &TestBinary, metadata: &Metadata) -> Map<String, Value> {
    let package = metadata.packages.iter().find(|package| package.name.as_str() == binary.package);
    let mut entry = Map::new();
    entry.insert("package-name".to_owned(), json!(binary.package));
    entry.insert("binary-id".to_owned(), json!(binary.binary_id()));
    entry.insert("binary-name".to_owned(), json!(binary.name));
    entry.insert("package-id".to_owned(), json!(package.map(|package| package.id.repr.clone())));
    entry.insert("kind".to_owned(), json!(binary.kind.name()));
    entry.insert("binary-path".to_owned(), json!(binary.path));
    entry.insert("build-platform".to_owned(), json!("target"));
    entry
}

/// What cargo ying knows of the build: the target directory and the directories under it the binaries are in.
fn build_meta(binaries: &[Arc<TestBinary>], metadata: &Metadata) -> Value {
    let target = metadata.target_directory.as_std_path();
    let outputs: BTreeSet<String> = binaries
        .iter()
        .filter_map(|binary| {
            // `<target>/debug/deps/<binary>`: the directory above `deps`, relative to the target directory.
            let output = binary.path.parent()?.parent()?;
            Some(output.strip_prefix(target).ok()?.display().to_string())
        })
        .collect();
    json!({ "target-directory": target, "base-output-directories": outputs })
}
