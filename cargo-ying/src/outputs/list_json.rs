//! `cargo ying list --message-format json`: the test list as cargo-nextest writes it (`cargo nextest list
//! --message-format json`, nextest-metadata's `TestListSummary`), so that tools reading nextest's read ours: every
//! test of every binary (`test-count` counts them all, as nextest's does) with whether it matches, and why not
//! (`ignored`, `string`, `expression`, `partition`), the binaries' ids, names, kinds, paths and packages; a binary
//! with its own harness, never started, is a suite `skipped`, with no tests. `--list-type binaries-only` gives the
//! binaries alone (`BinaryListSummary`), without running them to list their tests.
//!
//! The lists are nextest-metadata's own types, serialised: the same fields, names and forms as nextest's by
//! construction. `rust-build-meta` holds what cargo's messages tell of the build (the build scripts' output
//! directories and environments among it), and the platforms as nextest reads them from `rustc` (the host's triple
//! and library directory, and the target's when cross-compiling).

use crate::run::select::build::{BuildMeta, TestBinary};
use crate::run::select::discover::{Mismatch, Selection};
use crate::run::select::plan::Plan;
use cargo_metadata::Metadata;
use cargo_metadata::camino::Utf8PathBuf;
use nextest_metadata::{
    BinaryListSummary, BuildPlatform, BuildPlatformsSummary, BuildScriptInfoSummary, FilterMatch, HostPlatformSummary,
    MismatchReason, PlatformLibdirSummary, PlatformLibdirUnavailable, RustBuildMetaSummary, RustNonTestBinaryKind,
    RustNonTestBinarySummary, RustTestBinaryKind, RustTestBinarySummary, RustTestCaseSummary, RustTestKind,
    RustTestSuiteStatusSummary, RustTestSuiteSummary, TargetPlatformSummary, TestCaseName, TestListSummary,
};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use target_spec::summaries::PlatformSummary;

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

/// The test list of `plan`, chosen by `selection`, as nextest's JSON: nextest-metadata's `TestListSummary`.
pub(crate) fn tests(plan: &Plan, selection: &Selection, metadata: &Metadata) -> Value {
    let running: BTreeSet<(String, String)> =
        plan.running().map(|test| (test.binary.binary_id(), test.name.clone())).collect();
    let mut list = TestListSummary::new(build_meta(&plan.build_meta, metadata));
    for binary in &plan.binaries {
        let binary_id = binary.binary_id();
        let mut cases = BTreeMap::new();
        for test in plan.listed.iter().filter(|test| Arc::ptr_eq(&test.binary, binary)) {
            let mismatch = selection.mismatch(&test.id(), test.ignored).or_else(|| {
                (!running.contains(&(binary_id.clone(), test.name.clone()))).then_some(Mismatch::Partition)
            });
            let filter_match = match mismatch {
                None => FilterMatch::Matches,
                Some(mismatch) => FilterMatch::Mismatch { reason: reason(mismatch) },
            };
            list.test_count += 1;
            let case = RustTestCaseSummary { kind: Some(RustTestKind::TEST), ignored: test.ignored, filter_match };
            cases.insert(TestCaseName::new(&test.name), case);
        }
        list.rust_suites
            .insert(binary_id.as_str().into(), suite(binary, RustTestSuiteStatusSummary::LISTED, cases, metadata));
    }
    // Never started, so never listed: as nextest gives a binary it did not list, with no tests.
    for binary in &plan.own_harness {
        let suite = suite(binary, RustTestSuiteStatusSummary::SKIPPED, BTreeMap::new(), metadata);
        list.rust_suites.insert(binary.binary_id().as_str().into(), suite);
    }
    with_build_platforms(serde_json::to_value(&list).expect("a test list is JSON"))
}

/// The binaries alone, as nextest's JSON binary list: nextest-metadata's `BinaryListSummary`.
pub(crate) fn binaries(binaries: &[Arc<TestBinary>], meta: &BuildMeta, metadata: &Metadata) -> Value {
    let list = BinaryListSummary {
        rust_build_meta: build_meta(meta, metadata),
        rust_binaries: binaries
            .iter()
            .map(|binary| (binary.binary_id().as_str().into(), binary_summary(binary, metadata)))
            .collect(),
    };
    with_build_platforms(serde_json::to_value(&list).expect("a binary list is JSON"))
}

/// `list` with each non-test binary's `build-platform`, which cargo-nextest writes (0.9.143) and nextest-metadata's
/// `RustNonTestBinarySummary` (0.14.1) has no field for: the binaries are built for the target, as the test
/// binaries are.
fn with_build_platforms(mut list: Value) -> Value {
    let binaries = list.pointer_mut("/rust-build-meta/non-test-binaries").and_then(Value::as_object_mut);
    for binary in binaries.into_iter().flat_map(|packages| packages.values_mut()).filter_map(Value::as_array_mut) {
        for entry in binary.iter_mut().filter_map(Value::as_object_mut) {
            entry.insert("build-platform".to_owned(), Value::String("target".to_owned()));
        }
    }
    list
}

/// nextest's reason for a test the run leaves out.
fn reason(mismatch: Mismatch) -> MismatchReason {
    match mismatch {
        Mismatch::Ignored => MismatchReason::Ignored,
        Mismatch::String => MismatchReason::String,
        Mismatch::Expression => MismatchReason::Expression,
        Mismatch::Partition => MismatchReason::Partition,
    }
}

/// A test suite of the list: the binary, where its tests run, whether it was listed, and its tests.
fn suite(
    binary: &TestBinary,
    status: RustTestSuiteStatusSummary,
    test_cases: BTreeMap<TestCaseName, RustTestCaseSummary>,
    metadata: &Metadata,
) -> RustTestSuiteSummary {
    RustTestSuiteSummary {
        package_name: binary.package.clone(),
        binary: binary_summary(binary, metadata),
        cwd: utf8(&binary.package_dir),
        status,
        test_cases,
    }
}

/// What nextest says of a test binary.
fn binary_summary(binary: &TestBinary, metadata: &Metadata) -> RustTestBinarySummary {
    let package = metadata.packages.iter().find(|package| package.name.as_str() == binary.package);
    RustTestBinarySummary {
        binary_id: binary.binary_id().as_str().into(),
        binary_name: binary.name.clone(),
        package_id: package.map(|package| package.id.repr.clone()).unwrap_or_default(),
        kind: RustTestBinaryKind::new(binary.kind.name()),
        binary_path: utf8(&binary.path),
        build_platform: BuildPlatform::Target,
    }
}

/// A path as nextest-metadata holds one (lossily, for a path that is not UTF-8).
fn utf8(path: &Path) -> Utf8PathBuf {
    Utf8PathBuf::from(path.to_string_lossy().into_owned())
}

/// What cargo ying knows of the build, as nextest's `rust-build-meta`, the platforms read from `rustc` as nextest
/// reads them.
fn build_meta(meta: &BuildMeta, metadata: &Metadata) -> RustBuildMetaSummary {
    let non_test_binaries = meta
        .non_test_binaries
        .iter()
        .map(|(package, binaries)| {
            let binaries = binaries
                .iter()
                .map(|(name, kind, path)| RustNonTestBinarySummary {
                    name: name.clone(),
                    kind: RustNonTestBinaryKind::new(*kind),
                    path: Utf8PathBuf::from(path),
                })
                .collect();
            (package.clone(), binaries)
        })
        .collect();
    let build_script_info = meta
        .build_script_envs
        .iter()
        .map(|(package, envs)| {
            let mut info = BuildScriptInfoSummary::default();
            info.envs.clone_from(envs);
            (package.clone(), info)
        })
        .collect();
    let platforms = platforms(meta.target_platform.as_deref());
    let mut summary = RustBuildMetaSummary {
        target_directory: metadata.target_directory.clone(),
        build_directory: Some(utf8(&meta.build_directory)),
        base_output_directories: meta.base_output_directories.iter().map(Utf8PathBuf::from).collect(),
        non_test_binaries,
        build_script_out_dirs: meta.build_script_out_dirs.iter().map(|(k, v)| (k.clone(), v.into())).collect(),
        build_script_info: Some(build_script_info),
        linked_paths: meta.linked_paths.iter().map(Utf8PathBuf::from).collect(),
        platforms: None,
        target_platforms: Vec::new(),
        target_platform: meta.target_platform.clone(),
    };
    if let Some(platforms) = platforms {
        // The deprecated list: the platform the tests were built for, the host's unless cross-compiled.
        summary.target_platforms = match platforms.targets.first() {
            Some(target) => vec![target.platform.clone()],
            None => vec![platforms.host.platform.clone()],
        };
        summary.platforms = Some(platforms);
    }
    summary
}

/// The host's platform and library directory, and the target's when cross-compiling to `target`, from `rustc`
/// (`RUSTC`, else `rustc`); `None` when rustc does not say what the host is.
fn platforms(target: Option<&str>) -> Option<BuildPlatformsSummary> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let run = |args: &[&str]| -> Option<String> {
        let output = std::process::Command::new(&rustc).args(args).output().ok()?;
        output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
    };
    let version = run(&["-vV"])?;
    let host = version.lines().find_map(|line| line.strip_prefix("host: "))?.to_owned();
    let libdir = |triple: &str| match run(&["--print", "target-libdir", "--target", triple]) {
        Some(path) if !path.is_empty() => PlatformLibdirSummary::Available { path: path.into() },
        _ => PlatformLibdirSummary::Unavailable { reason: PlatformLibdirUnavailable::RUSTC_FAILED },
    };
    let targets = target
        .map(|target| TargetPlatformSummary { platform: PlatformSummary::new(target), libdir: libdir(target) })
        .into_iter()
        .collect();
    Some(BuildPlatformsSummary {
        host: HostPlatformSummary { platform: PlatformSummary::new(host.as_str()), libdir: libdir(&host) },
        targets,
    })
}
