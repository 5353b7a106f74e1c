//! The contract between ying's parts: what the runtime (`ying-runtime`), its macros (`ying-macros`) and
//! `cargo ying` exchange, defined once.
//!
//! - [`report`]: the JSON report a leak test writes ([`LeakReport`]), read with its schema version and its test's
//!   identity checked, written whole or not at all, and the environment variables through which `cargo ying` asks
//!   for it;
//! - [`summary`] and [`baseline`]: what `cargo ying test` writes for a run and keeps for the gate, with the
//!   [`Figures`] it compares;
//! - [`TestId`]: which test of which target of which package, with one display form and one file name;
//! - [`Frame`], one symbolised frame of a stack, and [`FoldedStack`], a stack in the folded form flamegraphs
//!   are drawn from;
//! - [`ByteSize`]: the one grammar of sizes (`"64 KiB"`) that budgets, flags and configuration keys use;
//! - [`arguments`]: the arguments of `#[ying::leak_test]` in one table ([`ARGUMENTS`]), which the macro checks
//!   against, the runtime resolves through and the runtime's documentation lists;
//! - [`exit_code`]: the exit codes `cargo ying` documents;
//! - [`end_mark`]: the line a test process of nextest's profile `ying` leaves as it ends ([`EndMark`]);
//! - [`nextest`]: what each test of such a run leaves for `cargo ying gate` (its [`Record`](nextest::Record)), and
//!   what the profile's setup script hands the interposer that writes it;
//! - [`ExecutableStamp`]: which file an executable is, told without reading it.
//!
//! The rules that name, trim, fold and excuse the frames of a stack are not part of the contract: they live in
//! `ying-frames`, which the runtime and `cargo ying` use. This crate depends on serde alone: no allocator, no
//! renderer, no reader of executables.

pub mod arguments;
pub mod baseline;
pub mod end_mark;
pub mod exit_code;
mod figures;
mod folded;
mod frame;
mod json;
mod keys;
pub mod nextest;
pub mod report;
pub mod size;
mod stamp;
pub mod summary;
mod terms;
mod test_id;
mod totals;

pub use arguments::{ARGUMENTS, Argument};
pub use baseline::{BASELINE_SCHEMA_VERSION, Baseline, BaselineEntry, DEFAULT_BASELINE};
pub use end_mark::{END_MARK_ENV, EndMark, Ending};
pub use figures::{Figure, Figures};
pub use folded::{FoldedStack, FoldedStackError};
pub use frame::Frame;
pub use json::{
    ReadError, TEXT_LIMIT, read_bounded, read_text, resolve_symlinks, write_atomic, write_own, write_own_bytes,
    write_users_file, write_whole,
};
pub use keys::closest_key;
pub use report::{ALLOW_ENV, KNOWN_CODE_ENV, LeakReport, RULES_DIR_ENV, allow_patterns, excuses_every_test};
pub use size::{ByteSize, SignedByteSize, SizeError};
pub use stamp::ExecutableStamp;
pub use summary::{GateTolerance, NotRunTarget, Reruns, SUMMARY_SCHEMA_VERSION, Summary, SummaryTest, UnmeasuredRerun};
pub use terms::{GateVerdict, Measured, TestOutcome};
pub use test_id::{TargetKind, TestId, TestIdError, as_display, file_name_component, stable_hash};
pub use totals::Totals;
