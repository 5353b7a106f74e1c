//! A regression must reproduce: a leak test that crossed the tolerance runs again, [`Gating::reruns`] times, and
//! regresses only when every rerun crosses it too. One that crosses it only sometimes is unstable: reported, and
//! the run does not fail. A one-time event (a table resized in one run and not in another) makes a test unstable;
//! a leak makes every run cross.
//!
//! [`Gating::reruns`]: crate::gate::Gating::reruns

use crate::gate::{self, Reruns};
use crate::model::{Outcome, Run};
use crate::run::exec::runner::{self, RunOptions};
use crate::run::select::discover::TestCase;
use ying_report::{GateVerdict, TestId};

/// Runs again each passing leak test of `run` that the gate found regressed, and settles its verdict with what
/// the reruns show; `on_settled` sees each test's reruns. `planned` are the run's tests, in the run's order.
pub(crate) fn confirm(
    run: &mut Run,
    planned: &[(TestCase, bool)],
    options: &RunOptions,
    mut on_settled: impl FnMut(&TestId, Reruns),
) {
    let Some(gating) = run.gate.as_ref().map(|gate| gate.gating.clone()) else { return };
    let reruns = gating.reruns as usize;
    // A failed test fails the run anyway: its regression needs no confirming.
    let suspects: Vec<usize> = (0..run.tests.len())
        .filter(|&index| {
            let test = &run.tests[index];
            test.outcome == Outcome::Passed && test.verdict() == Some(GateVerdict::Regressed)
        })
        .collect();
    if reruns == 0 || suspects.is_empty() {
        return;
    }
    let again: Vec<(TestCase, bool)> =
        suspects.iter().flat_map(|&index| std::iter::repeat_n((planned[index].0.clone(), true), reruns)).collect();
    let rerun_options = options.again(options.out_dir.join("reruns"));
    let records = runner::run(&again, &(0..again.len()).collect::<Vec<_>>(), &rerun_options, |_| {});
    let _ = std::fs::remove_dir_all(&rerun_options.out_dir);
    for (&index, records) in suspects.iter().zip(records.chunks(reruns)) {
        let test = &run.tests[index];
        let Some(before) = &test.baseline else { continue };
        let crossed = records
            .iter()
            .filter(|record| {
                record
                    .baseline_entry()
                    .is_some_and(|now| gate::judge(before, &now, &gating).verdict == GateVerdict::Regressed)
            })
            .count();
        let settled = Reruns { crossed: crossed as u32, runs: reruns as u32 };
        let id = test.id.clone();
        run.settle(&id, settled);
        on_settled(&id, settled);
    }
}
