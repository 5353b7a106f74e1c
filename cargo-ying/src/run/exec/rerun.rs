//! A regression must reproduce: a leak test that crossed the tolerance runs again, [`Gating::reruns`] times, and
//! regresses unless a rerun measures it within the tolerance. One that crosses it only sometimes is unstable:
//! reported, and the run does not fail. A one-time event (a table resized in one run and not in another) makes a
//! test unstable; a leak makes every run cross. A rerun that fails, crashes or times out measured nothing and
//! confirms nothing: the regression stands on the reruns that measured, and those that did not are named with it.
//!
//! [`Gating::reruns`]: crate::gate::Gating::reruns

use crate::gate::{self, Reruns};
use crate::model::{Outcome, Run};
use crate::run::exec::runner::{self, RunOptions};
use crate::run::select::discover::TestCase;
use ying_report::{GateVerdict, TestId, UnmeasuredRerun};

/// Runs again each passing leak test of `run` that the gate found regressed, and settles its verdict with what
/// the reruns show; `on_settled` sees each test's reruns. `planned` are the run's tests, in the run's order.
pub(crate) fn confirm(
    run: &mut Run,
    planned: &[(TestCase, bool)],
    options: &RunOptions,
    mut on_settled: impl FnMut(&TestId, &Reruns),
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
        // What it crossed, in the words of its first figure that did.
        let rule = test.gate.as_ref().and_then(|gate| gate.regressions().next()).map(|row| row.rule().to_owned());
        let mut settled = Reruns { runs: reruns as u32, rule, ..Reruns::default() };
        for record in records {
            // Only a rerun that passed measured the test: a failed, crashed or timed-out one confirms nothing.
            match record.baseline_entry().filter(|_| record.outcome == Outcome::Passed) {
                Some(now) => {
                    if gate::judge(before, &now, &gating).verdict == GateVerdict::Regressed {
                        settled.crossed += 1;
                    }
                }
                None => settled
                    .unmeasured
                    .push(UnmeasuredRerun { outcome: record.outcome.kind(), reason: record.why_it_failed() }),
            }
        }
        let id = test.id.clone();
        on_settled(&id, &settled);
        run.settle(&id, settled);
    }
}
