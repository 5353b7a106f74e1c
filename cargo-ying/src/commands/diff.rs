//! `cargo ying diff OLD NEW`: compares two saved baselines or summaries offline, with the gate's table and exit
//! codes.

use crate::cli::DiffArgs;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::gate;
use crate::outputs::gate_table;
use crate::settings;
use std::collections::BTreeMap;
use std::path::Path;
use ying_report::exit_code;
use ying_report::{Baseline, BaselineEntry, Measured, Summary, TestId};

/// Reads a baseline (`tests` is a table) or a summary.json (`tests` is a list) as baseline entries, with which
/// tests it measured.
fn read_entries(path: &Path) -> Result<(BTreeMap<TestId, BaselineEntry>, Measured)> {
    let error = |source| Error::ReadComparison { path: path.to_owned(), source };
    let text = ying_report::read_text(path).map_err(error)?;
    let is_summary = serde_json::from_str::<serde_json::Value>(text.trim_start_matches('\u{feff}'))
        .is_ok_and(|value| value.get("tests").is_some_and(serde_json::Value::is_array));
    if is_summary {
        let summary = Summary::parse(&text).map_err(error)?;
        let entries =
            summary.tests.into_iter().filter_map(|test| Some((test.id.clone(), test.baseline_entry()?))).collect();
        return Ok((entries, summary.measured));
    }
    let baseline = Baseline::parse(&text).map_err(error)?;
    Ok((baseline.tests, baseline.measured))
}

/// Runs `cargo ying diff`; returns the exit code.
pub(crate) fn run(args: &DiffArgs) -> Result<u8> {
    settings::refuse_reruns(&args.gating, "diff")?;
    let (old, old_measured) = read_entries(&args.old)?;
    let (new, new_measured) = read_entries(&args.new)?;
    // No workspace here: the flags, else the defaults.
    let gating = settings::gating(&args.gating, &Config::default());
    let mut comparison = gate::compare(&old, &new, &gating, true);
    comparison.measured(old_measured, new_measured);
    for line in gate_table::render(&comparison, &args.old.display().to_string(), gating.tolerance) {
        println!("{line}");
    }
    Ok(exit_code::of_run(false, comparison.fails(args.gating.check)))
}
