//! The tests of a run, before any runs: the binaries built, their tests listed, selected and partitioned. What
//! `cargo ying test` runs and `cargo ying list` lists.

use crate::error::Result;
use crate::run::select::build::{self, BuildMeta, CargoArgs, TestBinary};
use crate::run::select::discover::{self, Selection, TestCase};
use crate::run::select::not_run;
use crate::run::select::partition::{Candidate, Partition};
use cargo_metadata::Metadata;
use std::sync::Arc;
use ying_report::NotRunTarget;

/// Which tests a run is of: what cargo builds, which of their tests are selected, and which shard of them.
#[derive(Debug)]
pub(crate) struct Request {
    /// What cargo builds.
    pub cargo: CargoArgs,
    /// Which tests of the binaries are selected (filters, filtersets, libtest's arguments).
    pub selection: Selection,
    /// This shard (`--partition`), if the tests are split across machines.
    pub partition: Option<Partition>,
}

/// The tests of a run.
pub(crate) struct Plan {
    /// Every test binary built whose tests are listed (libtest's harness).
    pub binaries: Vec<Arc<TestBinary>>,
    /// What cargo ying does not run (doctests, `harness = false` targets), with the command that does.
    pub not_run: Vec<NotRunTarget>,
    /// The test binaries with their own harness (`harness = false`): built, never started.
    pub own_harness: Vec<Arc<TestBinary>>,
    /// Every test of the binaries, selected or not (for `cargo ying list`'s JSON, which says why each is not).
    pub listed: Vec<TestCase>,
    /// The selected tests of this shard, in the binaries' order, each with whether it runs (or is ignored).
    pub tests: Vec<(TestCase, bool)>,
    /// How many selected tests run, in every shard: 0 only when the selection matched no test to run.
    pub selected: usize,
    /// Whether every test of the default targets is selected: only then is a test of the baseline that did not run
    /// missing, rather than filtered out.
    pub complete: bool,
    /// What else the build made (for `cargo ying list`'s JSON).
    pub build_meta: BuildMeta,
}

impl Plan {
    /// Builds the test binaries `request` asks for and selects their tests. `verbosity`: cargo's `--quiet` or
    /// `--verbose`; `on_built` sees the binaries whose tests are about to be listed.
    pub(crate) fn make(
        request: &Request,
        metadata: &Metadata,
        verbosity: Option<&str>,
        on_built: impl FnOnce(&[Arc<TestBinary>]),
    ) -> Result<Self> {
        let Request { cargo, selection, partition } = request;
        let build::Built { binaries, meta: build_meta } = build::build(cargo, metadata, verbosity)?;
        // Doctests and `harness = false` targets: named, with the command that runs them, and never listed.
        let not_run::Split { binaries, own_harness, not_run } =
            not_run::split(binaries, metadata, cargo.selects_targets)?;
        let binaries: Vec<Arc<TestBinary>> = binaries.into_iter().map(Arc::new).collect();
        let own_harness: Vec<Arc<TestBinary>> = own_harness.into_iter().map(Arc::new).collect();
        on_built(&binaries);
        let listed: Vec<TestCase> = discover::discover(&binaries)?;
        // Under `--ignored` the tests that are not ignored are left out, as libtest counts them: they are not
        // ignored tests. Ignored tests the run does not run are kept, to be reported as ignored.
        let chosen: Vec<TestCase> = listed
            .iter()
            .filter(|test| selection.selects(&test.id()) && (test.ignored || !selection.ignored_only))
            .cloned()
            .collect();
        let selected = chosen.iter().filter(|test| selection.runs(test.ignored)).count();
        let tests: Vec<(TestCase, bool)> = chosen
            .into_iter()
            .map(|test| {
                let runs = selection.runs(test.ignored);
                (test, runs)
            })
            .collect();
        let tests = match partition {
            None => tests,
            Some(partition) => {
                let ids: Vec<String> = tests.iter().map(|(test, _)| test.binary.binary_id()).collect();
                let candidates: Vec<Candidate<'_>> = tests
                    .iter()
                    .zip(&ids)
                    .map(|((test, runs), binary_id)| Candidate {
                        binary_id,
                        name: &test.name,
                        ignored: test.ignored,
                        runs: *runs,
                    })
                    .collect();
                let chosen = partition.select(&candidates);
                tests.into_iter().zip(chosen).filter(|(_, chosen)| *chosen).map(|(test, _)| test).collect()
            }
        };
        let complete = partition.is_none() && selection.selects_everything() && cargo.builds_default_targets();
        Ok(Self { binaries, not_run, own_harness, listed, tests, selected, complete, build_meta })
    }

    /// The tests of this shard that run.
    pub(crate) fn running(&self) -> impl Iterator<Item = &TestCase> {
        self.tests.iter().filter(|(_, runs)| *runs).map(|(test, _)| test)
    }

    /// How many binaries have a selected test in this shard.
    pub(crate) fn binaries_with_tests(&self) -> usize {
        self.binaries
            .iter()
            .filter(|binary| self.tests.iter().any(|(test, _)| Arc::ptr_eq(&test.binary, binary)))
            .count()
    }
}
