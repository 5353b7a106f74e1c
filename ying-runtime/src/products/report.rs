//! The report a leak test writes when `YING_REPORT_DIR` is set: the one definition that the runtime writes and
//! `cargo ying` reads, from the `ying-report` crate.
//!
//! Reports hold nothing that changes between identical runs in the fields that get compared (no addresses, no
//! timestamps), and source paths are relative to the test's package where they lie inside it.

pub use ying_report::report::*;

/// The identity of a leak test, as the test binary knows it.
#[deprecated(since = "0.1.0", note = "renamed `TestIdentity`")]
pub type TestId = TestIdentity;

/// One folded-stack line (`root;...;leaf bytes`) for flamegraphs, from frames given innermost first: from the root
/// to the user's code (its frames with their locations), then one frame for what it called down to the allocator.
/// Frames from ying's leak-test runner outwards are the test harness's, the same for every test, and are left out,
/// except the frames of `tracing` spans (`span:<name>`), which stay at the root. `None` for zero bytes. See
/// [`ying_report::FoldedStack`] for the typed form.
pub fn folded_stack(frames: &[ying_report::Frame], bytes: u64) -> Option<String> {
    ying_frames::fold(frames, bytes).map(|stack| stack.to_string())
}
