//! `cargo ying list --message-format json`: the test list as cargo-nextest writes it (`cargo nextest list
//! --message-format json`, nextest-metadata's `TestListSummary`), so that tools reading nextest's read ours: every
//! test of every binary (`test-count` counts them all, as nextest's does) with whether it matches, and why not
//! (`ignored`, `string`, `expression`, `partition`), the binaries' ids, names, kinds, paths and packages; a binary
//! with its own harness, never started, is a suite `skipped`, with no tests. `--list-type binaries-only` gives the
//! binaries alone (`BinaryListSummary`), without running them to list their tests.
//!
//! `rust-build-meta` holds what cargo's messages tell of the build (the fields nextest-metadata requires, and the
//! build scripts' output directories and environments); what cargo ying does not know of it is left out rather than
//! made up (the platforms but the cross-compiled triple, which nextest-metadata reads as optional).

use crate::run::select::build::{BuildMeta, TestBinary};
use crate::run::select::discover::{Mismatch, Selection};
use crate::run::select::plan::Plan;
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
    /// One test per line: its binary's id and its name
    Oneline,
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
        suites.insert(binary_id, suite(binary, "listed", cases, metadata));
    }
    // Never started, so never listed: as nextest gives a binary it did not list, with no tests.
    for binary in &plan.own_harness {
        suites.insert(binary.binary_id(), suite(binary, "skipped", Map::new(), metadata));
    }
    json!({
        "rust-build-meta": build_meta(&plan.build_meta, metadata),
        "test-count": count,
        "rust-suites": suites,
    })
}

/// The binaries alone, as nextest's JSON binary list.
pub(crate) fn binaries(binaries: &[Arc<TestBinary>], meta: &BuildMeta, metadata: &Metadata) -> Value {
    let entries: Map<String, Value> =
        binaries.iter().map(|binary| (binary.binary_id(), Value::Object(binary_entry(binary, metadata)))).collect();
    json!({ "rust-build-meta": build_meta(meta, metadata), "rust-binaries": entries })
}

/// A test suite of the list: the binary, where its tests run, whether it was `listed`, and its tests.
fn suite(binary: &TestBinary, status: &str, cases: Map<String, Value>, metadata: &Metadata) -> Value {
    let mut suite = binary_entry(binary, metadata);
    suite.insert("package-name".to_owned(), json!(binary.package));
    suite.insert("cwd".to_owned(), json!(binary.package_dir));
    suite.insert("status".to_owned(), json!(status));
    suite.insert("testcases".to_owned(), Value::Object(cases));
    Value::Object(suite)
}

/// What nextest says of a test binary.
fn binary_entry(binary: &TestBinary, metadata: &Metadata) -> Map<String, Value> {
    let package = metadata.packages.iter().find(|package| package.name.as_str() == binary.package);
    let mut entry = Map::new();
    entry.insert("binary-id".to_owned(), json!(binary.binary_id()));
    entry.insert("binary-name".to_owned(), json!(binary.name));
    entry.insert("package-id".to_owned(), json!(package.map(|package| package.id.repr.clone())));
    entry.insert("kind".to_owned(), json!(binary.kind.name()));
    entry.insert("binary-path".to_owned(), json!(binary.path));
    entry.insert("build-platform".to_owned(), json!("target"));
    entry
}

/// What cargo ying knows of the build, as nextest's `rust-build-meta`.
fn build_meta(meta: &BuildMeta, metadata: &Metadata) -> Value {
    let non_test_binaries: Map<String, Value> = meta
        .non_test_binaries
        .iter()
        .map(|(package, binaries)| {
            let binaries = binaries
                .iter()
                .map(|(name, kind, path)| {
                    json!({ "name": name, "kind": kind, "path": path, "build-platform": "target" })
                })
                .collect();
            (package.clone(), Value::Array(binaries))
        })
        .collect();
    json!({
        "target-directory": metadata.target_directory,
        "build-directory": meta.build_directory,
        "base-output-directories": meta.base_output_directories,
        "non-test-binaries": non_test_binaries,
        "build-script-out-dirs": meta.build_script_out_dirs,
        "build-script-info": meta
            .build_script_envs
            .iter()
            .map(|(package, envs)| (package.clone(), json!({ "envs": envs })))
            .collect::<Map<String, Value>>(),
        "linked-paths": meta.linked_paths,
        "target-platform": meta.target_platform,
    })
}
