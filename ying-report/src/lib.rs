//! The contract between ying's parts: what the runtime (`ying-runtime`), its macros (`ying-macros`) and
//! `cargo ying` exchange, defined once.
//!
//! - [`report`]: the JSON report a leak test writes ([`LeakReport`]), read with its schema version and its test's
//!   identity checked, written whole or not at all;
//! - [`summary`] and [`baseline`]: what `cargo ying test` writes for a run and keeps for the gate;
//! - [`TestId`]: which test of which target of which package, with one display form and one file name;
//! - [`Frame`], the rule that [names] the function at an address whatever the debug-information level,
//!   the pure rules that [trim](Trim) a symbolised stack and [excuse](excuses) what it allocated, and
//!   [`FoldedStack`];
//! - [`ByteSize`]: the one grammar of sizes (`"64 KiB"`) that budgets, flags and configuration keys use;
//! - [`arguments`]: the arguments of `#[ying::leak_test]` in one table ([`ARGUMENTS`]), which the macro checks
//!   against, the runtime resolves through and the runtime's documentation lists;
//! - [`KnownCode`]: the functions of a test executable the runtime knows by address, which `cargo ying` reads once
//!   per executable and passes to its test processes.
//!
//! It depends on serde alone (and, with the `elf` feature, on object to read an executable's symbol table): no
//! allocator, no renderer.

pub mod arguments;
pub mod baseline;
pub mod excuses;
mod figures;
mod folded;
mod frame;
mod json;
mod keys;
pub mod known_code;
pub mod names;
pub mod report;
pub mod size;
pub mod summary;
mod test_id;
mod trim;

pub use arguments::{ARGUMENTS, Argument};
pub use baseline::{BASELINE_SCHEMA_VERSION, Baseline, BaselineEntry, DEFAULT_BASELINE};
pub use figures::{Figure, Figures};
pub use folded::{FoldedStack, FoldedStackError};
pub use frame::Frame;
pub use json::{ReadError, read_text, resolve_symlinks, write_atomic, write_whole};
pub use keys::closest_key;
pub use known_code::{ExecutableStamp, KNOWN_CODE_ENV, KnownCode};
pub use report::LeakReport;
pub use size::{ByteSize, SignedByteSize, SizeError};
pub use summary::{GateVerdict, NotRunTarget, SUMMARY_SCHEMA_VERSION, Summary, SummaryTest, TestOutcome};
pub use test_id::{TargetKind, TestId, TestIdError, as_display, file_name_component, stable_hash};
pub use trim::{
    LEAK_TEST_RUNNER, Trim, is_allocation_plumbing, is_allocator_entry, is_in_leak_test_runner, is_leak_test_runner,
    is_package_code, is_poll_frame, is_thread_entry, leak_site, relative_paths,
};
