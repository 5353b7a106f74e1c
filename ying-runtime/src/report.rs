//! The report a leak test writes when `YING_REPORT_DIR` is set: the one definition that the runtime writes and
//! `cargo ying` reads.
//!
//! Reports hold nothing that changes between identical runs in the fields that get compared (no addresses, no
//! timestamps), and source paths are relative to the test's package where they lie inside it.

use crate::scope::{Attribution, ScopeStats};
use crate::symbolize::Frame;

/// The version of the report format; bumped on any change a reader must know about.
pub const REPORT_SCHEMA_VERSION: u32 = 1;

/// The environment variable naming the directory where leak tests write their reports.
pub const REPORT_DIR_ENV: &str = "YING_REPORT_DIR";

/// When this environment variable is set (as `cargo ying` sets it), a report's sampled stacks carry the
/// executable's instruction addresses instead of frames where the platform allows, and the reader symbolises them
/// once per executable rather than every test process loading the debug information.
pub const DEFER_SYMBOLS_ENV: &str = "YING_DEFER_SYMBOLS";

/// Everything one run of one leak test measured.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct LeakReport {
    /// [`REPORT_SCHEMA_VERSION`] of the writer.
    pub schema_version: u32,
    /// Which test this is.
    pub test: TestId,
    /// Which allocations the test's figures count.
    pub attribution: Attribution,
    /// The budgets in force (defaults applied).
    pub budgets: Budgets,
    /// Unmeasured runs of the body before the measured ones.
    pub warmup: u32,
    /// Measured runs of the body.
    pub iterations: u32,
    /// How the test ended.
    pub outcome: Outcome,
    /// The failure message, when the test failed a budget.
    pub message: Option<String>,
    /// Exact figures of the measured runs as a whole.
    pub figures: ScopeStats,
    /// Retained bytes excused by the test's `allow` patterns or as the test harness's captured output; not in
    /// the figure the `max_retained` budget is checked against.
    pub excused_bytes: u64,
    /// Exact figures of each measured run.
    pub per_iteration: Vec<IterationFigures>,
    /// Where the retained memory was allocated, exactly, when the test recorded every stack; largest first.
    pub retained_sites: Vec<RetainedSite>,
    /// The process's top sampled stacks at the end of the test (estimates). Under thread attribution other tests
    /// running in the same process appear here too; `cargo ying` runs each test alone.
    pub sampled_stacks: Vec<SampledStack>,
}

/// The identity of a leak test.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct TestId {
    /// The Cargo package the test belongs to.
    pub package: String,
    /// The crate of the test binary (the first segment of the module path).
    pub krate: String,
    /// The module path of the test function (`my_crate::cache::tests`).
    pub module_path: String,
    /// The test's name as the test harness lists it (`cache::tests::evicts`).
    pub name: String,
    /// The source file of the test function, as `file!()` gives it.
    pub file: String,
    /// The line of the test function.
    pub line: u32,
}

/// A leak test's budgets, in bytes (or allocations); `None` is not checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Budgets {
    /// Bytes the measured runs may leave allocated.
    pub max_retained: Option<u64>,
    /// Bytes the measured runs may hold at once.
    pub max_peak: Option<u64>,
    /// Bytes each measured run may allocate.
    pub max_allocated: Option<u64>,
    /// Allocations each measured run may make.
    pub max_allocations: Option<u64>,
    /// Net growth of the heap each measured run may cause (checked against the smallest growth among them).
    pub max_growth_per_iteration: Option<u64>,
}

/// How a leak test ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The body succeeded within every budget.
    Passed,
    /// A budget was exceeded.
    Failed,
    /// The body panicked or returned an error; budgets were not judged.
    BodyFailed,
}

/// Exact figures of one measured run of the body.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct IterationFigures {
    /// Bytes allocated (growth by realloc included).
    pub allocated_bytes: u64,
    /// Allocation calls.
    pub allocations: u64,
    /// Bytes freed (shrinkage by realloc included), whatever their age.
    pub freed_bytes: u64,
    /// Free calls.
    pub frees: u64,
    /// Net change of the live heap: `allocated_bytes - freed_bytes`, less the excused growth.
    pub growth: i64,
    /// Growth of excused memory (captured test output, `allow` patterns), left out of `growth`.
    pub excused_growth: i64,
}

/// Where retained memory was allocated: one stack and what its blocks still hold.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct RetainedSite {
    /// Bytes retained from this stack (exact).
    pub bytes: u64,
    /// Blocks allocated from this stack and still live (blocks only grown here are not counted).
    pub blocks: u64,
    /// Excused by an `allow` pattern or as captured test output.
    pub excused: bool,
    /// The stack, from the allocation site outwards; empty when the stack was not recorded.
    pub frames: Vec<Frame>,
}

/// A sampled stack with its estimates, as [`StackStats`](crate::StackStats) gives them.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct SampledStack {
    /// Estimated bytes retained.
    pub retained_bytes: f64,
    /// Estimated allocations still live.
    pub retained_objects: f64,
    /// Estimated bytes allocated.
    pub allocated_bytes: f64,
    /// Estimated allocations made.
    pub allocated_objects: f64,
    /// The stack, from the allocation site outwards, then the `tracing` spans it was allocated in (frames named
    /// `span:<name>`, with the `profile-spans` feature).
    pub frames: Vec<Frame>,
    /// Instead of the code frames, under [`DEFER_SYMBOLS_ENV`]: the stack's instruction addresses in the test
    /// executable (as its debug information counts them), innermost first, for the reader to symbolise, pass
    /// through [`crate::__private::tidy_frames`] and put before the span frames `frames` then holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<u64>,
}

/// One folded-stack line (`root;...;leaf bytes`, function names only) for flamegraphs and baselines, from frames
/// given innermost first. Frames from ying's leak-test runner outwards are the test harness's, the same for every
/// test, and are left out, except the frames of `tracing` spans (`span:<name>`), which stay at the root.
/// `None` for zero bytes.
pub fn folded_stack(frames: &[Frame], bytes: u64) -> Option<String> {
    if bytes == 0 {
        return None;
    }
    let inner =
        frames.iter().position(|frame| frame.function.starts_with("ying::leak_test::run")).unwrap_or(frames.len());
    let spans = frames[inner..].iter().filter(|frame| frame.function.starts_with("span:"));
    let names: Vec<String> =
        frames[..inner].iter().chain(spans).rev().map(|frame| frame.function.replace(';', ":")).collect();
    let stack = if names.is_empty() { "[unknown]".to_owned() } else { names.join(";") };
    Some(format!("{stack} {bytes}"))
}

#[cfg(test)]
mod tests {
    use super::folded_stack;
    use crate::symbolize::Frame;

    #[test]
    fn folded_stacks_run_root_to_leaf_and_stop_at_the_runner() {
        let frames = [
            Frame::new("alloc::boxed::Box<T>::new", None, None),
            Frame::new("app::leak;it", None, None),
            Frame::new("ying::leak_test::run::{{closure}}", None, None),
            Frame::new("test::run_test", None, None),
            Frame::new("span:request", None, None),
        ];
        assert_eq!(folded_stack(&frames, 1000).unwrap(), "span:request;app::leak:it;alloc::boxed::Box<T>::new 1000");
        assert_eq!(folded_stack(&frames, 0), None);
        assert_eq!(folded_stack(&[], 5).unwrap(), "[unknown] 5");
    }
}
