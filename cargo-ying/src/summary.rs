//! `summary.json`: one entry per test with its outcome and, for leak tests, its figures and files.

use crate::runner::TestResult;

/// The version of the summary format.
pub const SUMMARY_SCHEMA_VERSION: u32 = 1;

/// The whole run.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    /// [`SUMMARY_SCHEMA_VERSION`] of the writer.
    pub schema_version: u32,
    /// Every test, in the order of the binaries and their listing.
    pub tests: Vec<SummaryTest>,
}

/// One test. The figures are `null` for ordinary tests; paths are relative to the summary's directory.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct SummaryTest {
    /// The test's name as libtest lists it.
    pub name: String,
    /// The test target's name.
    pub binary: String,
    /// The package.
    pub package: String,
    /// `passed`, `failed`, `crashed`, `timed-out`, `ignored` or `not-run`.
    pub outcome: String,
    /// The signal or timeout, for crashed and timed-out tests.
    pub reason: Option<String>,
    /// Retained bytes as the budget judges them (excused memory left out).
    pub retained_bytes: Option<u64>,
    /// Peak bytes held at once.
    pub peak_bytes: Option<u64>,
    /// Bytes allocated.
    pub allocated_bytes: Option<u64>,
    /// Allocations made.
    pub allocations: Option<u64>,
    /// The leak test's JSON report.
    pub report: Option<String>,
    /// Flamegraph of retained memory.
    pub retained_flamegraph: Option<String>,
    /// Flamegraph of allocated memory.
    pub allocated_flamegraph: Option<String>,
    /// Retained bytes in the baseline, when the baseline has this test.
    #[serde(default)]
    pub baseline_retained_bytes: Option<u64>,
    /// Differential flamegraph of retained memory, baseline against now, for a test that regressed.
    #[serde(default)]
    pub retained_diff_flamegraph: Option<String>,
}

impl Summary {
    /// Reads a summary.json, of this version.
    pub fn read(path: &std::path::Path) -> crate::error::Result<Self> {
        use crate::error::Error;
        let action = || format!("read {}", path.display());
        let bytes = std::fs::read(path).map_err(|error| Error::new(action(), error))?;
        let summary: Self = serde_json::from_slice(&bytes).map_err(|error| Error::new(action(), error))?;
        if summary.schema_version != SUMMARY_SCHEMA_VERSION {
            let why = format!("schema_version {} is not {SUMMARY_SCHEMA_VERSION}", summary.schema_version);
            return Err(Error::new(action(), why));
        }
        Ok(summary)
    }
}

impl SummaryTest {
    /// Whether the test failed, crashed or timed out.
    pub fn failed(&self) -> bool {
        ["failed", "crashed", "timed-out"].contains(&self.outcome.as_str())
    }

    /// `package::binary name`, the id the baseline knows the test by.
    pub fn id(&self) -> String {
        format!("{}::{} {}", self.package, self.binary, self.name)
    }

    /// The summary entry of `result`, with the flamegraphs written for it.
    pub fn new(result: &TestResult, flamegraphs: Option<(String, String)>) -> Self {
        let report = result.report.as_ref().map(|(_, report)| report);
        let figure = |get: fn(&ying::report::LeakReport) -> u64| report.map(get);
        Self {
            name: result.test.name.clone(),
            binary: result.test.binary.name.clone(),
            package: result.test.binary.package.clone(),
            outcome: result.outcome.name().to_owned(),
            reason: result.outcome.reason(),
            retained_bytes: figure(|r| r.figures.retained_bytes.saturating_sub(r.excused_bytes)),
            peak_bytes: figure(|r| r.figures.peak_bytes),
            allocated_bytes: figure(|r| r.figures.allocated_bytes),
            allocations: figure(|r| r.figures.allocations),
            report: result.report.as_ref().map(|(path, _)| slash_path(path)),
            retained_flamegraph: flamegraphs.as_ref().map(|(retained, _)| retained.clone()),
            allocated_flamegraph: flamegraphs.map(|(_, allocated)| allocated),
            baseline_retained_bytes: None,
            retained_diff_flamegraph: None,
        }
    }
}

/// A relative path with `/` separators, as links and JSON want them.
pub fn slash_path(path: &std::path::Path) -> String {
    path.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}
