//! `cargo ying accept`: writes the baseline from the last run's results without running the tests again.

use crate::baseline::BaselineFile;
use crate::cli::AcceptArgs;
use crate::error::{BaselineFileError, Error, Result};
use crate::saved;
use crate::workspace::Workspace;
use ying_report::exit_code;

/// Runs `cargo ying accept`; returns the exit code.
pub(crate) fn run(args: &AcceptArgs) -> Result<u8> {
    let workspace = Workspace::open(args.manifest_path.as_deref(), &[])?;
    let baseline = BaselineFile::open_to_save(workspace.baseline_path(args.baseline.as_deref()))?;
    let out_dir = workspace.out_dir(args.target_dir.as_deref());
    let summary = saved::read_summary(&out_dir.join("summary.json"), " (run cargo ying test first)")?;
    let mut entries = saved::entries(&summary, &out_dir)?;
    if entries.is_empty() {
        return Err(Error::SaveBaseline { path: baseline.path, source: BaselineFileError::NothingMeasured });
    }
    // As `--save-baseline` does: a test within the tolerance keeps its recorded entry.
    for test in &summary.tests {
        if test.gate.is_some_and(ying_report::GateVerdict::keeps_baseline_entry) {
            entries.remove(&test.id);
        }
    }
    let count = entries.len();
    baseline.save(entries)?;
    eprintln!("{:>12} {} ({count} measured tests from the last run)", "Accepted", baseline.path.display());
    Ok(exit_code::OK)
}
