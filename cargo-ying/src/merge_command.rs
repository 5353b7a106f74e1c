//! `cargo ying merge`: joins the summaries of partitioned runs into one summary and one gate result, so that a
//! matrix of CI runners gates as one run.

use crate::baseline::{BASELINE_SCHEMA_VERSION, Baseline};
use crate::cli::MergeArgs;
use crate::error::{EXIT_OK, EXIT_TEST_FAILED, Error, Result};
use crate::gate;
use crate::summary::{SUMMARY_SCHEMA_VERSION, Summary};
use crate::test_command;
use std::collections::BTreeMap;

/// Runs `cargo ying merge`; returns the exit code.
pub fn run(args: MergeArgs) -> Result<u8> {
    let (metadata, config, baseline_path, baseline) =
        test_command::open_baseline(args.manifest_path.as_deref(), args.baseline.as_deref())?;
    let tolerance = config.tolerance(args.gating.max_growth, args.gating.min_growth);

    let mut tests = Vec::new();
    let mut entries = BTreeMap::new();
    for path in &args.summaries {
        let summary = Summary::read(path)?;
        let dir = path.parent().unwrap_or(std::path::Path::new("."));
        entries.extend(gate::entries(&summary, dir)?);
        tests.extend(summary.tests);
    }
    tests.sort_by(|a, b| (&a.package, &a.binary, &a.name).cmp(&(&b.package, &b.binary, &b.name)));
    let failed = tests.iter().filter(|test| test.failed()).count();
    let merged = Summary { schema_version: SUMMARY_SCHEMA_VERSION, tests };
    let output = args.output.unwrap_or_else(|| metadata.target_directory.join("ying").join("summary.json").into());
    if let Some(dir) = output.parent() {
        std::fs::create_dir_all(dir).map_err(|error| Error::new(format!("create {}", dir.display()), error))?;
    }
    let json = serde_json::to_vec_pretty(&merged).map_err(|error| Error::new("encode the merged summary", error))?;
    std::fs::write(&output, json).map_err(|error| Error::new(format!("write {}", output.display()), error))?;
    eprintln!(
        "{:>12} {} summaries: {} tests, {failed} failed -> {}",
        "Merged",
        args.summaries.len(),
        merged.tests.len(),
        output.display()
    );

    let baseline = baseline.unwrap_or(Baseline { schema_version: BASELINE_SCHEMA_VERSION, ..Baseline::default() });
    let comparison = gate::compare(&baseline, &entries, tolerance, &config.gates(&args.gating.gate), true);
    for line in gate::render_table(&comparison, &baseline_path, tolerance) {
        eprintln!("{line}");
    }
    Ok(if failed > 0 || comparison.fails(args.gating.check) { EXIT_TEST_FAILED } else { EXIT_OK })
}
