//! A run's pipeline, in three stages over the ground they spawn through, as nextest separates listing tests from
//! running them: [`select`] decides what runs (the build, what is set aside, the listing, filters, the shard, the
//! order), [`exec`] runs each test in a process of its own and takes what it reported (one [`exec::attempt`] a
//! process, for `cargo ying test` and nextest's wrapper alike), and [`names`] names the stacks the reports left
//! as addresses. [`process`] starts, stops and waits for the processes of the build, the listing and the tests.

pub(crate) mod exec;
pub(crate) mod names;
pub(crate) mod process;
pub(crate) mod select;
