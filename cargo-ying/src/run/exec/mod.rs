//! Running the tests: [`attempt`] is one test's process, measured (its command and environment, spawned and
//! waited for, its outcome and its report, and what a test that never reported is told by), with the allocation
//! [`interposer`] loaded under `--measure all` and the code its runtime knows by address ([`known_code`]);
//! [`relay`] passes its output on to nextest, keeping why it failed;
//! [`collect`] takes the report from the directory the process wrote it to; [`finish`] finishes the record of a
//! test nextest's wrapper ran in its own place, from what its process left; [`runner`] runs the tests of a run,
//! several at once, each through an attempt; [`rerun`] runs a regressed test again; [`run_lock`] keeps one run per
//! target directory.

pub(crate) mod attempt;
pub(crate) mod collect;
pub(crate) mod finish;
pub(crate) mod interposer;
pub(crate) mod known_code;
pub(crate) mod relay;
pub(crate) mod rerun;
pub(crate) mod run_lock;
pub(crate) mod runner;
