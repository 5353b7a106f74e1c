//! The production profiler of the seed `ying_profiler` crate, module path and names kept: [`ProfilerRunner`]
//! checks memory on a background thread and, each time the measured memory has moved by the trigger since the last
//! report, writes `ying.<RFC 3339 time>.<N>MB.report` (the top stacks, with their allocation lifetimes) and the
//! `.svg` flamegraph beside it; [`gen_flamegraph`] writes one on demand.
//!
//! ```no_run
//! use ying::utils::ProfilerRunnerBuilder;
//!
//! #[global_allocator]
//! static YING_ALLOC: ying::YingProfiler = ying::YingProfiler::new();
//!
//! let runner = ProfilerRunnerBuilder::default()
//!     .check_interval_secs(60usize)
//!     .report_pct_change_trigger(5usize)
//!     .reporting_path("/var/log/ying")
//!     .gen_flamegraphs(true)
//!     .build()
//!     .unwrap();
//! let handle = runner.spawn(&YING_ALLOC);
//! // ... the program runs; the reports appear under /var/log/ying
//! handle.stop();
//! ```

use crate::hot::allocator::YingProfiler;
use crate::products::callstack::Measurement;
use crate::products::report::folded_stack;
use crate::read::stack_stats::StackStats;
use core::alloc::GlobalAlloc;
use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Seconds between checks when not configured: 5 minutes.
pub const DEFAULT_CHECK_INTERVAL_SECS: usize = 300;
/// Percent change of the measured memory that triggers a report when not configured.
pub const DEFAULT_PCT_CHANGE_TRIGGER: usize = 10;
/// Directory of the reports when not configured.
pub const DEFAULT_REPORTING_PATH: &str = "ying-profiles";
/// Stacks listed in a report.
const REPORT_STACKS: usize = 10;
/// Stacks drawn in a flamegraph.
const FLAMEGRAPH_STACKS: usize = 500;

/// A background reporter: checks memory every `check_interval_secs` and writes a report when it moved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfilerRunner {
    check_interval_secs: usize,
    report_pct_change_trigger: usize,
    reporting_path: PathBuf,
    measure_allocated_not_retained: bool,
    gen_flamegraphs: bool,
    expand_frames: bool,
}

/// Builds a [`ProfilerRunner`]; every setting has a default.
///
/// ```
/// let runner = ying::utils::ProfilerRunnerBuilder::default().check_interval_secs(10usize).build().unwrap();
/// assert_eq!(runner.check_interval_secs(), 10);
/// assert_eq!(runner.report_pct_change_trigger(), 10);
/// ```
#[derive(Clone, Debug, Default)]
pub struct ProfilerRunnerBuilder {
    check_interval_secs: Option<usize>,
    report_pct_change_trigger: Option<usize>,
    reporting_path: Option<PathBuf>,
    measure_allocated_not_retained: Option<bool>,
    gen_flamegraphs: Option<bool>,
    expand_frames: Option<bool>,
}

/// Why a [`ProfilerRunnerBuilder`] could not build.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildError(String);

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ying: invalid profiler runner: {}", self.0)
    }
}

impl std::error::Error for BuildError {}

impl ProfilerRunnerBuilder {
    /// Seconds between two checks of memory (default 300).
    pub fn check_interval_secs(&mut self, secs: usize) -> &mut Self {
        self.check_interval_secs = Some(secs);
        self
    }

    /// How much, in percent, the measured memory must move since the last report to write a new one (default 10).
    pub fn report_pct_change_trigger(&mut self, percent: usize) -> &mut Self {
        self.report_pct_change_trigger = Some(percent);
        self
    }

    /// Directory for reports and flamegraphs, created if missing (default `ying-profiles`).
    pub fn reporting_path(&mut self, path: impl Into<PathBuf>) -> &mut Self {
        self.reporting_path = Some(path.into());
        self
    }

    /// Rank stacks by allocated rather than retained bytes (default false).
    pub fn measure_allocated_not_retained(&mut self, allocated: bool) -> &mut Self {
        self.measure_allocated_not_retained = Some(allocated);
        self
    }

    /// Write an SVG flamegraph beside each report (default false; `start_profiling` turns it on).
    pub fn gen_flamegraphs(&mut self, flamegraphs: bool) -> &mut Self {
        self.gen_flamegraphs = Some(flamegraphs);
        self
    }

    /// List inlined functions in reports too, not only the functions the code is in (default false).
    pub fn expand_frames(&mut self, expand: bool) -> &mut Self {
        self.expand_frames = Some(expand);
        self
    }

    /// The runner; fails when the check interval is zero.
    pub fn build(&self) -> Result<ProfilerRunner, BuildError> {
        let check_interval_secs = self.check_interval_secs.unwrap_or(DEFAULT_CHECK_INTERVAL_SECS);
        if check_interval_secs == 0 {
            return Err(BuildError("check_interval_secs must be at least 1".to_owned()));
        }
        Ok(ProfilerRunner {
            check_interval_secs,
            report_pct_change_trigger: self.report_pct_change_trigger.unwrap_or(DEFAULT_PCT_CHANGE_TRIGGER),
            reporting_path: self.reporting_path.clone().unwrap_or_else(|| DEFAULT_REPORTING_PATH.into()),
            measure_allocated_not_retained: self.measure_allocated_not_retained.unwrap_or(false),
            gen_flamegraphs: self.gen_flamegraphs.unwrap_or(false),
            expand_frames: self.expand_frames.unwrap_or(false),
        })
    }
}

/// The running reporter thread of a [`ProfilerRunner`].
#[derive(Debug)]
pub struct RunnerHandle {
    runner: ProfilerRunner,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl RunnerHandle {
    /// The runner's settings.
    pub fn runner(&self) -> &ProfilerRunner {
        &self.runner
    }

    /// Stops the reporter after its current check and waits for it.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.thread().unpark();
        let _ = self.thread.join();
    }
}

impl ProfilerRunner {
    /// Seconds between two checks.
    pub fn check_interval_secs(&self) -> usize {
        self.check_interval_secs
    }

    /// Percent change that triggers a report.
    pub fn report_pct_change_trigger(&self) -> usize {
        self.report_pct_change_trigger
    }

    /// Directory of the reports.
    pub fn reporting_path(&self) -> &Path {
        &self.reporting_path
    }

    /// What the reports measure.
    pub fn measurement(&self) -> Measurement {
        if self.measure_allocated_not_retained { Measurement::AllocatedBytes } else { Measurement::RetainedBytes }
    }

    /// Whether a flamegraph goes beside each report.
    pub fn gen_flamegraphs(&self) -> bool {
        self.gen_flamegraphs
    }

    /// Whether reports list inlined functions.
    pub fn expand_frames(&self) -> bool {
        self.expand_frames
    }

    /// Starts the reporter thread, which checks `profiler`'s figures every interval until the handle stops it.
    pub fn spawn<A: GlobalAlloc + Sync>(self, profiler: &'static YingProfiler<A>) -> RunnerHandle {
        let stop = Arc::new(AtomicBool::new(false));
        let runner = self.clone();
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("ying-profiler".to_owned())
                .spawn(move || {
                    let mut last_reported = 0u64;
                    loop {
                        std::thread::park_timeout(Duration::from_secs(self.check_interval_secs as u64));
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        match self.check(profiler, last_reported) {
                            Ok(Some(reported)) => last_reported = reported,
                            Ok(None) => {}
                            Err(error) => eprintln!("ying: failed to write a memory report: {error}"),
                        }
                    }
                })
                .expect("ying: failed to start the profiler's reporting thread")
        };
        RunnerHandle { runner, stop, thread }
    }

    /// One check: writes a report when the measured figure moved by the trigger since `last_reported`; returns the
    /// figure reported, if any.
    pub fn check<A: GlobalAlloc>(&self, profiler: &YingProfiler<A>, last_reported: u64) -> io::Result<Option<u64>> {
        let stats = profiler.stats();
        let now = match self.measurement() {
            Measurement::RetainedBytes => stats.live_bytes,
            Measurement::AllocatedBytes => stats.allocated_bytes,
        };
        let change = now.abs_diff(last_reported) as f64;
        let trigger = last_reported as f64 * self.report_pct_change_trigger as f64 / 100.0;
        if now == 0 || (last_reported != 0 && change < trigger) {
            return Ok(None);
        }
        std::fs::create_dir_all(&self.reporting_path).map_err(naming("create the directory", &self.reporting_path))?;
        let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        let stem = format!("ying.{stamp}.{}MB", now / 1_000_000);
        let stacks = top_stacks(profiler, self.measurement(), REPORT_STACKS);
        let report = self.reporting_path.join(format!("{stem}.report"));
        std::fs::write(&report, self.render(&stacks, now)).map_err(naming("write", &report))?;
        if self.gen_flamegraphs {
            gen_flamegraph(profiler, self.measurement(), self.reporting_path.join(format!("{stem}.svg")))?;
        }
        Ok(Some(now))
    }

    /// The text report: the total and the top stacks with their estimates, frames and lifetimes.
    fn render(&self, stacks: &[StackStats], total: u64) -> String {
        let measurement = self.measurement();
        let noun = match measurement {
            Measurement::RetainedBytes => "retained",
            Measurement::AllocatedBytes => "allocated",
        };
        let mut out =
            format!("ying memory report: {total} bytes {noun}, top {} stacks by {noun} bytes\n", stacks.len());
        for (rank, stack) in stacks.iter().enumerate() {
            let objects = match measurement {
                Measurement::RetainedBytes => stack.retained_objects(),
                Measurement::AllocatedBytes => stack.allocated_objects(),
            };
            let in_all = if stack.allocated_objects() < 0.5 {
                format!("{:.0} bytes in all, by growing existing blocks", stack.allocated_bytes())
            } else {
                format!("{:.0} bytes in {:.0} allocations in all", stack.allocated_bytes(), stack.allocated_objects())
            };
            let _ = writeln!(
                out,
                "\n#{} {:.0} bytes {noun} ({objects:.0} objects); {in_all}",
                rank + 1,
                value(stack, measurement)
            );
            for frame in stack.frames().iter().filter(|frame| self.expand_frames || !frame.inlined) {
                let _ = writeln!(out, "    {frame}");
            }
            let lifetimes = stack.lifetime_histogram();
            if lifetimes.total() > 0.0 {
                let buckets: Vec<String> = lifetimes
                    .buckets()
                    .filter(|(_, count)| *count > 0.0)
                    .map(|(bound, count)| match bound {
                        Some(bound) => format!("<{bound:?}: {count:.0}"),
                        None => format!("longer: {count:.0}"),
                    })
                    .collect();
                let _ = writeln!(out, "    freed allocations by lifetime: {}", buckets.join(", "));
            }
        }
        out
    }
}

fn value(stack: &StackStats, measurement: Measurement) -> f64 {
    match measurement {
        Measurement::RetainedBytes => stack.retained_bytes(),
        Measurement::AllocatedBytes => stack.allocated_bytes(),
    }
}

fn top_stacks<A: GlobalAlloc>(profiler: &YingProfiler<A>, measurement: Measurement, k: usize) -> Vec<StackStats> {
    match measurement {
        Measurement::RetainedBytes => profiler.top_k_stacks_by_retained(k),
        Measurement::AllocatedBytes => profiler.top_k_stacks_by_allocated(k),
    }
}

/// Writes a flamegraph of `profiler`'s stacks by `measurement` to `path`, now.
pub fn gen_flamegraph<A: GlobalAlloc>(
    profiler: &YingProfiler<A>,
    measurement: Measurement,
    path: impl AsRef<Path>,
) -> io::Result<()> {
    let stacks = top_stacks(profiler, measurement, FLAMEGRAPH_STACKS);
    let mut lines: Vec<String> = stacks
        .iter()
        .filter_map(|stack| folded_stack(stack.frames(), value(stack, measurement).round() as u64))
        .collect();
    lines.sort();
    let mut options = inferno::flamegraph::Options::default();
    options.title = match measurement {
        Measurement::RetainedBytes => "ying: retained bytes".to_owned(),
        Measurement::AllocatedBytes => "ying: allocated bytes".to_owned(),
    };
    options.count_name = "bytes".to_owned();
    options.deterministic = true;
    let mut svg = Vec::new();
    if lines.is_empty() {
        lines.push("[nothing sampled yet] 1".to_owned());
    }
    inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut svg)
        .map_err(io::Error::other)?;
    let path = path.as_ref();
    std::fs::write(path, svg).map_err(naming("write", path))
}

/// An I/O error that names what was being done and to which file: `could not write ying-profiles/x.svg: ...`.
fn naming<'a>(action: &'a str, path: &'a Path) -> impl FnOnce(io::Error) -> io::Error + 'a {
    move |error| io::Error::new(error.kind(), format!("could not {action} {}: {error}", path.display()))
}

impl<A: GlobalAlloc + Sync> YingProfiler<A> {
    /// Starts the seed crate's one-line profiler: checks every 5 minutes, reports (with a flamegraph) when retained
    /// memory moved by 10% since the last report, into `ying-profiles/`. Exactly a [`ProfilerRunner`] with those
    /// settings, spawned.
    pub fn start_profiling(&'static self) -> RunnerHandle {
        ProfilerRunnerBuilder::default()
            .check_interval_secs(DEFAULT_CHECK_INTERVAL_SECS)
            .report_pct_change_trigger(DEFAULT_PCT_CHANGE_TRIGGER)
            .reporting_path(DEFAULT_REPORTING_PATH)
            .measure_allocated_not_retained(false)
            .gen_flamegraphs(true)
            .build()
            .expect("the default settings are valid")
            .spawn(self)
    }
}
