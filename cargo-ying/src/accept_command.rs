//! `cargo ying accept`: writes the baseline from the last run's results without running the tests again.

use crate::baseline::Baseline;
use crate::build;
use crate::cli::{AcceptArgs, CargoOptions};
use crate::error::{EXIT_OK, Error, Result};
use crate::summary::Summary;
use crate::test_command;

/// Runs `cargo ying accept`; returns the exit code.
pub fn run(args: AcceptArgs) -> Result<u8> {
    let options = CargoOptions { manifest_path: args.manifest_path.clone(), ..CargoOptions::default() };
    let metadata = build::metadata(&options)?;
    let config = test_command::config(&metadata)?;
    let path = test_command::baseline_path(args.baseline.as_deref(), &config, &metadata);
    let existing = Baseline::read(&path)?;
    let target_dir = args.target_dir.unwrap_or_else(|| metadata.target_directory.clone().into());
    let out_dir = target_dir.join("ying");
    let summary_path = out_dir.join("summary.json");
    let action = || format!("read {} (run cargo ying test first)", summary_path.display());
    let bytes = std::fs::read(&summary_path).map_err(|error| Error::new(action(), error))?;
    let summary: Summary = serde_json::from_slice(&bytes).map_err(|error| Error::new(action(), error))?;
    let entries = crate::gate::entries(&summary, &out_dir)?;
    let count = entries.len();
    test_command::save_baseline(existing, entries, &path)?;
    eprintln!("{:>12} {} ({count} leak tests from the last run)", "Accepted", path.display());
    Ok(EXIT_OK)
}
