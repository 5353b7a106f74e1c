//! The runner behind `#[ying::leak_test]`: warm-up and measured runs of a test body in a scope, budgets judged on
//! exact figures, the allocation sites of retained memory named, and a report written for `cargo ying`.
//!
//! One job per module: [`plan`] resolves what the attribute wrote into budgets, runs and attribution;
//! [`runner`] runs the body in the measured scope and reads what it retained; [`excuses`] tells the memory a test
//! keeps without leaking it; [`hook`] keeps the panic hook's work out of the figures; [`exit`] fails a process that
//! exits inside a body; [`why`] says why each retained block is still there (the reachability scan of
//! `read::reach`, summed per site); [`verdict`] judges budgets against figures and writes the failure message, as
//! a pure function; [`report`] writes the JSON report; [`tasks`] finds the async tasks an `async fn` body left as it
//! ends; [`unannotated`] measures a test without the attribute from
//! outside, for the allocation interposer, waiting at its end for the threads the test left running ([`settle`]);
//! [`interposer`] tells that interposer when a leak test starts, so that it stops measuring.
//!
//! Stacks: the scope records the stack of every allocation it owns. That names the site of even a single small
//! leaked block, lets `allow` patterns excuse what they match, and recognises two kinds of memory that a test
//! retains without leaking it: libtest's captured output (a test's `println!` output is kept in a buffer its own
//! prints allocate) and values of thread-locals first used by the test (freed when the thread exits). Recording
//! costs a stack capture and an entry (in the thread's nursery, see `hot::live::nursery`) per allocation (what that
//! costs an allocation-bound body: BENCHMARKS.md, "What a leak-test scope costs"); the figures themselves are exact
//! either way.

mod cycles;
mod excuses;
mod exit;
mod hook;
mod interposer;
mod plan;
mod report;
mod runner;
mod settle;
mod tasks;
mod unannotated;
mod verdict;
mod why;

pub use plan::LeakTest;
pub use runner::{TestResult, run};
pub use tasks::body_end;
pub use unannotated::{leak_test_started, thread_named};
