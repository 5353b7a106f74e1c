//! `cargo ying merge`: joins the summaries of partitioned runs into one summary and one gate result, so that a
//! matrix of CI runners gates as one run. The shards may have run anywhere (each runner its own checkout path), so
//! a summary is this workspace's when every package it has tests of is one of this workspace's: another
//! workspace's summary is refused, naming its packages.

use crate::baseline::BaselineFile;
use crate::cli::MergeArgs;
use crate::error::{Error, MergeHint, Result};
use crate::gate;
use crate::outputs::gate_table;
use crate::saved;
use crate::settings;
use crate::workspace::Workspace;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use ying_report::exit_code;
use ying_report::{GateVerdict, Measured, Summary, TestId};

/// Runs `cargo ying merge`; returns the exit code.
pub(crate) fn run(args: &MergeArgs) -> Result<u8> {
    settings::refuse_reruns(&args.gating, "merge")?;
    let workspace = Workspace::open(args.manifest_path.as_deref(), &[])?;
    let baseline = BaselineFile::open(workspace.baseline_path(args.baseline.as_deref()))?;
    let gating = settings::gating(&args.gating, &workspace.place.config);

    let mut tests = Vec::new();
    let mut not_run = BTreeSet::new();
    let mut entries = BTreeMap::new();
    let mut measured = Measured::LeakTests;
    let mut started_at: Option<String> = None;
    // Which summary each test came from: a test in two of them (the same shard twice) would be counted twice.
    let mut sources: BTreeMap<TestId, &Path> = BTreeMap::new();
    let packages: BTreeSet<&str> = workspace.metadata.packages.iter().map(|package| package.name.as_str()).collect();
    for path in &args.summaries {
        let summary = saved::read_summary(path, "")?;
        let foreign: BTreeSet<&str> = summary
            .tests
            .iter()
            .map(|test| test.id.package.as_str())
            .filter(|package| !packages.contains(package))
            .collect();
        if !foreign.is_empty() {
            return Err(Error::ForeignSummary {
                summary: path.clone(),
                packages: foreign.into_iter().map(|package| format!("`{package}`")).collect::<Vec<_>>().join(", "),
                root: workspace.place.root.clone(),
            });
        }
        if summary.measured == Measured::All {
            measured = Measured::All;
        }
        for test in &summary.tests {
            if let Some(first) = sources.insert(test.id.clone(), path) {
                let same = first == path.as_path() || same_file(first, path);
                return Err(Error::MergeOverlap {
                    first: first.to_owned(),
                    second: path.clone(),
                    test: test.id.to_string(),
                    hint: if same { MergeHint::SameFile } else { MergeHint::Overlap },
                });
            }
        }
        // RFC 3339 times in UTC order as text: the earliest shard's start is the run's.
        if let Some(start) = &summary.started_at
            && started_at.as_ref().is_none_or(|earliest| start < earliest)
        {
            started_at = Some(start.clone());
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        entries.extend(saved::entries(&summary, dir)?);
        tests.extend(summary.tests);
        // Every shard names the same doctests and custom-harness targets: once each.
        not_run.extend(summary.not_run);
    }
    tests.sort_by(|a, b| a.id.cmp(&b.id));
    let mut comparison = gate::compare(baseline.entries(), &entries, &gating, true);
    comparison.measured(baseline.measured(), measured);
    // A shard's reruns found some regressions not to reproduce: the merged verdict keeps what they showed.
    for test in &tests {
        if test.gate == Some(GateVerdict::Unstable)
            && let Some(gate) = comparison.tests.get_mut(&test.id)
            && gate.verdict == GateVerdict::Regressed
        {
            gate.verdict = GateVerdict::Unstable;
        }
    }
    // The merged summary tells the gate's verdicts as the table below does.
    for test in &mut tests {
        test.gate = comparison.tests.get(&test.id).map(|gate| gate.verdict);
        test.baseline_retained_bytes = baseline.entries().get(&test.id).map(|entry| entry.retained_bytes);
    }
    let failed = tests.iter().filter(|test| test.outcome.is_failure()).count();
    let code = exit_code::of_run(failed > 0, comparison.fails(args.gating.check));
    let totals =
        ying_report::Totals::of(tests.iter().map(|test| (test.outcome, test.gate, test.attempts.unwrap_or(1))));
    let mut merged = Summary::new(tests);
    merged.measured = measured;
    merged.not_run = not_run.into_iter().collect();
    merged.started_at = started_at;
    merged.totals = Some(totals);
    merged.exit_code = Some(code);
    merged.tolerance = Some(gating.tolerance.stated());
    let output = args.output.clone().unwrap_or_else(|| workspace.out_dir(None).join("summary.json"));
    if let Some(dir) = output.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(Error::io("create", dir))?;
    }
    merged.write(&output).map_err(Error::io("write", &output))?;
    eprintln!(
        "{:>12} {} summaries: {} tests, {failed} failed -> {}",
        "Merged",
        args.summaries.len(),
        merged.tests.len(),
        output.display()
    );
    for line in gate_table::render(&comparison, &baseline.path.display().to_string(), gating.tolerance) {
        eprintln!("{line}");
    }
    Ok(code)
}

/// Whether two paths name one file (through links or `..`).
fn same_file(a: &Path, b: &Path) -> bool {
    matches!((std::fs::canonicalize(a), std::fs::canonicalize(b)), (Ok(a), Ok(b)) if a == b)
}
