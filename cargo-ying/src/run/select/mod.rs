//! What a run runs: [`build`] builds the test binaries through cargo, [`not_run`] sets aside and names what cargo
//! ying does not run (doctests, where [`doctests`] finds some; `harness = false` targets), [`discover`] lists and
//! selects their tests (with [`filterset`]s), [`partition`] keeps this shard's, [`plan`] is these together, and
//! [`order`] starts the tests the last run took longest over first.

pub(crate) mod build;
pub(crate) mod discover;
pub(crate) mod doctests;
pub(crate) mod filterset;
pub(crate) mod not_run;
pub(crate) mod order;
pub(crate) mod partition;
pub(crate) mod plan;
