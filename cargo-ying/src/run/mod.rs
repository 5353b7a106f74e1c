//! A run's pipeline, from the build to each test's report: [`build`] builds the test binaries through cargo,
//! [`not_run`] sets aside and names what cargo ying does not run (doctests, where [`doctests`] finds some;
//! `harness = false` targets), [`discover`] lists and selects their tests (with [`filterset`]s), [`partition`]
//! keeps this shard's, [`plan`] is these together; [`order`] starts the tests the last run took longest over first;
//! [`runner`] runs each test in its own process (started, killed and waited for by [`process`]), with the
//! allocation [`interposer`] loaded under `--measure all` and the code its runtime knows by address
//! ([`known_code`]); [`collect`] takes its report and [`symbols`] names the stacks it deferred (kept for the next
//! run by [`symbol_cache`]; the code executables share named once a run, by [`code_units`]), reading the types
//! retained sites allocated with [`types`]; [`rerun`] runs a regressed test again; [`run_lock`] keeps one run per
//! target directory.

pub(crate) mod build;
pub(crate) mod code_units;
pub(crate) mod collect;
pub(crate) mod discover;
pub(crate) mod doctests;
pub(crate) mod filterset;
pub(crate) mod interposer;
pub(crate) mod known_code;
pub(crate) mod not_run;
pub(crate) mod order;
pub(crate) mod partition;
pub(crate) mod plan;
pub(crate) mod process;
pub(crate) mod rerun;
pub(crate) mod run_lock;
pub(crate) mod runner;
pub(crate) mod symbol_cache;
pub(crate) mod symbols;
pub(crate) mod types;
