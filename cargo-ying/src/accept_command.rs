//! `cargo ying accept`: writes the baseline from the last run's results without running the tests again.

use crate::cli::AcceptArgs;
use crate::error::{EXIT_OK, Error, Result};
use crate::summary::Summary;
use crate::test_command;

/// Runs `cargo ying accept`; returns the exit code.
pub fn run(args: AcceptArgs) -> Result<u8> {
    let (metadata, _, path, existing) =
        test_command::open_baseline(args.manifest_path.as_deref(), args.baseline.as_deref())?;
    let target_dir = args.target_dir.unwrap_or_else(|| metadata.target_directory.clone().into());
    let out_dir = target_dir.join("ying");
    let summary_path = out_dir.join("summary.json");
    let summary = Summary::read(&summary_path)
        .map_err(|error| Error { action: format!("{} (run cargo ying test first)", error.action), ..error })?;
    let entries = crate::gate::entries(&summary, &out_dir)?;
    let count = entries.len();
    test_command::save_baseline(existing, entries, &path)?;
    eprintln!("{:>12} {} ({count} leak tests from the last run)", "Accepted", path.display());
    Ok(EXIT_OK)
}
