//! `cargo ying diff OLD NEW`: compares two saved baselines or summaries offline, with the gate's table and exit
//! codes.

use crate::baseline::{BASELINE_SCHEMA_VERSION, Baseline, BaselineEntry};
use crate::cli::DiffArgs;
use crate::config::Config;
use crate::error::{EXIT_OK, EXIT_TEST_FAILED, Error, Result};
use crate::gate;
use crate::summary::Summary;
use std::collections::BTreeMap;
use std::path::Path;

/// Reads a baseline (`tests` is a table) or a summary.json (`tests` is a list) as baseline entries.
fn read_entries(path: &Path) -> Result<BTreeMap<String, BaselineEntry>> {
    let action = || format!("read {}", path.display());
    let text = std::fs::read_to_string(path).map_err(|error| Error::new(action(), error))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|error| Error::new(action(), error))?;
    if value.get("tests").is_some_and(serde_json::Value::is_array) {
        let summary: Summary = serde_json::from_value(value).map_err(|error| Error::new(action(), error))?;
        return Ok(summary
            .tests
            .iter()
            .filter(|test| test.report.is_some())
            .map(|test| (test.id(), gate::figures(test)))
            .collect());
    }
    Ok(Baseline::read(path)?.map(|baseline| baseline.tests).unwrap_or_default())
}

/// Runs `cargo ying diff`; returns the exit code.
pub fn run(args: DiffArgs) -> Result<u8> {
    let old = Baseline { schema_version: BASELINE_SCHEMA_VERSION, tests: read_entries(&args.old)? };
    let new = read_entries(&args.new)?;
    // No workspace here: the flags, else the defaults.
    let tolerance = Config::default().tolerance(args.gating.max_growth, args.gating.min_growth);
    let comparison = gate::compare(&old, &new, tolerance, &args.gating.gate, true);
    for line in gate::render_table(&comparison, &args.old, tolerance) {
        println!("{line}");
    }
    Ok(if comparison.fails(args.gating.check) { EXIT_TEST_FAILED } else { EXIT_OK })
}
