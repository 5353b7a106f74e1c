//! `cargo ying test`: build, discover, run, then write reports, flamegraphs, summary.json and index.html.

use crate::baseline::{BASELINE_SCHEMA_VERSION, Baseline, BaselineEntry, DEFAULT_BASELINE};
use crate::build::{self, TestBinary};
use crate::cli::{CargoOptions, TestArgs};
use crate::config::Config;
use crate::discover::{self, Selection};
use crate::error::{EXIT_OK, EXIT_TEST_FAILED, Error, Result};
use crate::output::{self, Reporter};
use crate::render;
use crate::runner::{self, RunOptions, TestResult};
use crate::summary::{SUMMARY_SCHEMA_VERSION, Summary, SummaryTest, slash_path};
use crate::symbols::Symbolizer;
use crate::{ci_output, gate};
use cargo_metadata::Metadata;
use std::collections::BTreeMap;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The timeout when neither `--timeout` nor the configuration sets one: generous, for slow debug builds.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// Reads `[workspace.metadata.ying]`.
pub fn config(metadata: &Metadata) -> Result<Config> {
    let manifest = metadata.workspace_root.join("Cargo.toml");
    Config::from_metadata(&metadata.workspace_metadata, manifest.as_std_path())
}

/// The baseline file: the flag, else the configuration (relative to the workspace root), else the default.
pub fn baseline_path(flag: Option<&Path>, config: &Config, metadata: &Metadata) -> PathBuf {
    let root = metadata.workspace_root.as_std_path();
    match (flag, &config.baseline) {
        (Some(path), _) => path.to_owned(),
        (None, Some(configured)) => root.join(configured),
        (None, None) => root.join(DEFAULT_BASELINE),
    }
}

/// The workspace of `manifest_path`, its configuration, and its baseline (path and contents), for the commands that
/// work from saved results rather than a build.
pub fn open_baseline(
    manifest_path: Option<&Path>,
    flag: Option<&Path>,
) -> Result<(Metadata, Config, PathBuf, Option<Baseline>)> {
    let options = CargoOptions { manifest_path: manifest_path.map(Path::to_owned), ..CargoOptions::default() };
    let metadata = build::metadata(&options)?;
    let config = config(&metadata)?;
    let path = baseline_path(flag, &config, &metadata);
    let baseline = Baseline::read(&path)?;
    Ok((metadata, config, path, baseline))
}

/// Writes `entries` into the baseline at `path` (over `existing`, whose other tests stay as they were).
pub fn save_baseline(existing: Option<Baseline>, entries: BTreeMap<String, BaselineEntry>, path: &Path) -> Result<()> {
    let mut baseline = existing.unwrap_or_default();
    baseline.schema_version = BASELINE_SCHEMA_VERSION;
    baseline.tests.extend(entries);
    baseline.write(path)
}

/// Runs `cargo ying test`; returns the exit code.
pub fn run(args: TestArgs) -> Result<u8> {
    let metadata = build::metadata(&args.cargo)?;
    let config = config(&metadata)?;
    let selection = Selection::new(&args.filters, &args.test_args)?;
    // Read (and check) the baseline before anything runs: a corrupt one stops the run and stays as it was.
    let baseline_path = baseline_path(args.baseline.as_deref(), &config, &metadata);
    let baseline = Baseline::read(&baseline_path)?;
    let tolerance = config.tolerance(args.gating.max_growth, args.gating.min_growth);
    let target_dir = args.cargo.target_dir.clone().unwrap_or_else(|| metadata.target_directory.clone().into());
    let out_dir = target_dir.join("ying");

    let binaries: Vec<Arc<TestBinary>> = build::build(&args.cargo, &metadata)?.into_iter().map(Arc::new).collect();
    let tests = discover::discover(&binaries, &selection)?;

    let options = RunOptions {
        jobs: args
            .jobs
            .or(config.jobs)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1),
        timeout: args.timeout.or_else(|| config.timeout()).unwrap_or(DEFAULT_TIMEOUT),
        fail_fast: !args.no_fail_fast && config.fail_fast.unwrap_or(true),
        out_dir: out_dir.clone(),
        passthrough: selection.passthrough.clone(),
    };
    prepare_out_dir(&out_dir)?;

    let mut reporter = Reporter::new(output::use_color(args.color));
    let planned: Vec<_> = tests
        .into_iter()
        .map(|test| {
            let runs = selection.runs(test.ignored);
            (test, runs)
        })
        .enumerate()
        .filter(|(index, (test, _))| args.partition.is_none_or(|partition| partition.contains(*index, &test.id())))
        .map(|(_, planned)| planned)
        .collect();
    let running = planned.iter().filter(|(_, runs)| *runs).count();
    let with_tests =
        binaries.iter().filter(|binary| planned.iter().any(|(test, _)| Arc::ptr_eq(&test.binary, binary))).count();
    reporter.start(running, with_tests, planned.len() - running);
    let started = Instant::now();
    let mut results = runner::run(planned, &options, |result| reporter.result(result));
    complete_reports(&mut results, &out_dir)?;
    reporter.finish(&results, started.elapsed(), options.fail_fast);

    let mut summary = flamegraphs(&results, &out_dir)?;
    let failed = results.iter().any(|result| result.outcome.is_failure());
    let mut entries = BTreeMap::new();
    for (test, result) in summary.tests.iter().zip(&results) {
        if let Some((_, report)) = &result.report {
            entries.insert(test.id(), gate::entry(test, report));
        }
    }

    // Only a run of every test can tell a test missing from one filtered out.
    let cargo = &args.cargo;
    let complete = args.partition.is_none()
        && selection.filters.is_empty()
        && selection.skip.is_empty()
        && !selection.ignored_only
        && cargo.test_targets.is_empty()
        && cargo.packages.is_empty()
        && !cargo.lib
        && !cargo.tests;
    let gates = config.gates(&args.gating.gate);
    let comparison = baseline.as_ref().map(|baseline| gate::compare(baseline, &entries, tolerance, &gates, complete));
    if let (Some(baseline), Some(comparison)) = (&baseline, &comparison) {
        annotate_with_baseline(&mut summary, baseline, comparison, &entries, &out_dir)?;
    }
    write_summary(&summary, &out_dir)?;
    reporter.artifacts(&out_dir.join("index.html"));

    let mut regressed = false;
    if let Some(comparison) = &comparison {
        eprintln!();
        for line in gate::render_table(comparison, &baseline_path, tolerance) {
            eprintln!("{line}");
        }
        regressed = comparison.fails(args.gating.check);
    } else if !args.save_baseline {
        eprintln!(
            "\nno baseline at {} yet: --save-baseline (or cargo ying accept) writes one",
            baseline_path.display()
        );
    }
    write_ci_outputs(&results, comparison.as_ref(), tolerance, args.junit.as_deref())?;
    if args.save_baseline {
        let count = entries.len();
        save_baseline(baseline, entries, &baseline_path)?;
        eprintln!("{:>12} {} ({count} leak tests)", "Saved", baseline_path.display());
        regressed = false;
    }
    Ok(if failed || regressed { EXIT_TEST_FAILED } else { EXIT_OK })
}

/// Clears what an earlier run left under `<target>/ying/` (reports, flamegraphs), so every file there is this
/// run's.
fn prepare_out_dir(out_dir: &Path) -> Result<()> {
    for dir in ["reports", "flamegraphs", "tmp"] {
        let path = out_dir.join(dir);
        if path.exists() {
            std::fs::remove_dir_all(&path).map_err(|error| Error::new(format!("clear {}", path.display()), error))?;
        }
    }
    std::fs::create_dir_all(out_dir).map_err(|error| Error::new(format!("create {}", out_dir.display()), error))
}

/// Symbolises the stacks the tests deferred, once per executable, and stores the completed reports.
fn complete_reports(results: &mut [TestResult], out_dir: &Path) -> Result<()> {
    let mut symbolizer = Symbolizer::default();
    for result in results {
        let binary = &result.test.binary;
        let Some((path, report)) = &mut result.report else { continue };
        if symbolizer.complete(report, &binary.path, &binary.package_dir) {
            let json = serde_json::to_vec_pretty(report).map_err(|error| Error::new("encode a report", error))?;
            write_file(&out_dir.join(path), &json)?;
        }
    }
    Ok(())
}

/// Writes the flamegraphs of every leak test and returns the summary that links them.
fn flamegraphs(results: &[TestResult], out_dir: &Path) -> Result<Summary> {
    let mut tests = Vec::new();
    for result in results {
        let flamegraphs = match &result.report {
            Some((_, report)) => {
                let stem = flamegraph_stem(result);
                let retained = stem.with_extension("retained.svg");
                let allocated = stem.with_extension("allocated.svg");
                let title = |what: &str| format!("{what}: {}", result.test.id());
                write_flamegraph(&render::retained_lines(report), &title("retained bytes"), out_dir, &retained)?;
                write_flamegraph(&render::allocated_lines(report), &title("allocated bytes"), out_dir, &allocated)?;
                Some((slash_path(&retained), slash_path(&allocated)))
            }
            None => None,
        };
        tests.push(SummaryTest::new(result, flamegraphs));
    }
    Ok(Summary { schema_version: SUMMARY_SCHEMA_VERSION, tests })
}

/// `flamegraphs/<package>/<binary>/<test>`, the stem of a test's flamegraph files.
fn flamegraph_stem(result: &TestResult) -> PathBuf {
    Path::new("flamegraphs")
        .join(runner::file_stem(&result.test.binary.package))
        .join(runner::file_stem(&result.test.binary.name))
        .join(runner::file_stem(&result.test.name))
}

fn write_flamegraph(lines: &[String], title: &str, out_dir: &Path, path: &Path) -> Result<()> {
    render::flamegraph(lines, title, &out_dir.join(path))
        .map_err(|error| Error::new(format!("write {}", out_dir.join(path).display()), error))
}

/// Adds the baseline's figures to the summary, and a differential flamegraph for each regressed test.
fn annotate_with_baseline(
    summary: &mut Summary,
    baseline: &Baseline,
    comparison: &gate::Comparison,
    entries: &BTreeMap<String, BaselineEntry>,
    out_dir: &Path,
) -> Result<()> {
    for test in &mut summary.tests {
        let id = test.id();
        let Some(before) = baseline.tests.get(&id) else { continue };
        test.baseline_retained_bytes = Some(before.retained_bytes);
        let (Some(after), true) = (entries.get(&id), comparison.regressions.iter().any(|row| row.id == id)) else {
            continue;
        };
        let Some(retained) = &test.retained_flamegraph else { continue };
        let path = PathBuf::from(retained.replace(".retained.svg", ".retained-diff.svg"));
        let title = format!("retained bytes, baseline to now: {id}");
        write_flamegraph(&gate::differential_lines(before, after), &title, out_dir, &path)?;
        test.retained_diff_flamegraph = Some(slash_path(&path));
    }
    Ok(())
}

/// GitHub Actions annotations and job summary (when `GITHUB_ACTIONS=true`), and JUnit XML (when asked).
fn write_ci_outputs(
    results: &[TestResult],
    comparison: Option<&gate::Comparison>,
    tolerance: gate::Tolerance,
    junit: Option<&Path>,
) -> Result<()> {
    if std::env::var("GITHUB_ACTIONS").is_ok_and(|value| value == "true") {
        for line in ci_output::github_annotations(results, comparison) {
            println!("{line}");
        }
        if let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY") {
            use std::io::Write;
            let summary = ci_output::step_summary(results, comparison, tolerance);
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .and_then(|mut file| file.write_all(summary.as_bytes()))
                .map_err(|error| Error::new(format!("append to {}", Path::new(&path).display()), error))?;
        }
    }
    if let Some(path) = junit {
        write_file(path, ci_output::junit(results).as_bytes())?;
    }
    Ok(())
}

/// Writes summary.json and index.html.
fn write_summary(summary: &Summary, out_dir: &Path) -> Result<()> {
    let json = serde_json::to_vec_pretty(summary).map_err(|error| Error::new("encode summary.json", error))?;
    write_file(&out_dir.join("summary.json"), &json)?;
    write_file(&out_dir.join("index.html"), render::index_html(summary).as_bytes())
}

fn write_file(path: &Path, contents: &[u8]) -> Result<()> {
    std::fs::write(path, contents).map_err(|error| Error::new(format!("write {}", path.display()), error))
}
