//! `cargo ying accept`: writes the baseline from the last run's results without running the tests again.

use crate::baseline::BaselineFile;
use crate::cli::AcceptArgs;
use crate::cli::GateOptions;
use crate::error::{BaselineFileError, Error, Result};
use crate::gate;
use crate::saved;
use crate::settings;
use crate::workspace::Workspace;
use std::collections::BTreeMap;
use ying_report::exit_code;

/// Runs `cargo ying accept`; returns the exit code.
pub(crate) fn run(args: &AcceptArgs) -> Result<u8> {
    let workspace = Workspace::open(args.manifest_path.as_deref(), &[])?;
    let baseline = BaselineFile::open_to_save(workspace.baseline_path(args.baseline.as_deref()))?;
    let out_dir = workspace.out_dir(args.target_dir.as_deref());
    let summary = saved::read_summary(&out_dir.join("summary.json"), " (run cargo ying test first)")?;
    workspace.place.check_own("the last run's summary.json", summary.workspace_root.as_deref())?;
    let mut entries = saved::entries(&summary, &out_dir)?;
    let gating = settings::gating(&GateOptions::default(), &workspace.place.config);
    let gated = gating.figures();
    if entries.is_empty() {
        return Err(Error::SaveBaseline { path: baseline.path, source: BaselineFileError::NothingMeasured });
    }
    // As `--save-baseline` does: a test within the tolerance keeps its recorded entry (unless the baseline is of
    // an earlier form, written whole now), and an entry keeps the figures the configuration gates.
    let every = baseline.is_of_earlier_form();
    for test in &summary.tests {
        if !every && gate::keeps_recorded(test.gate, baseline.entries().get(&test.id), gated) {
            entries.remove(&test.id);
        }
    }
    let entries: BTreeMap<_, _> = entries.into_iter().map(|(id, entry)| (id, entry.keeping(gated))).collect();
    let count = entries.len();
    let form = match baseline.save(entries, summary.measured)? {
        Some(version) => format!("; rewritten from schema {version} in the current form, a line a test"),
        None => String::new(),
    };
    eprintln!("{:>12} {} ({count} measured tests from the last run{form})", "Accepted", baseline.path.display());
    Ok(exit_code::OK)
}
