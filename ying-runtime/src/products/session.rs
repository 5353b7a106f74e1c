//! The pprof session API (`pprof` feature): one [`Profiler`] at a time owns the process's profile and reads it as
//! standard `profile.proto` bytes.

use crate::base::thread::as_profiler;
use crate::hot::{allocator, sampler};
use crate::products::pprof::{Builder, Header, Values};
use crate::read::stack_stats::StackStats;
use crate::read::{objects, stack_stats, symbolize};
use core::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

/// Deepest stack a profile can keep, in code frames plus spans.
const MAX_FRAMES_LIMIT: usize = 1024;

/// The generation of the session that owns the profile; 0 when none does.
static OWNER: AtomicU64 = AtomicU64::new(0);

/// The next session's generation.
static GENERATIONS: AtomicU64 = AtomicU64::new(1);

/// Why a [`Profiler`] could not start or report.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProfilerError {
    /// The process's global allocator is not a [`YingProfiler`](crate::YingProfiler): a profile would be empty.
    #[error(
        "ying: the global allocator is not ying's; install it with \
         `#[global_allocator] static ALLOC: ying::YingProfiler = ying::YingProfiler::new();`"
    )]
    MissingAllocator,
    /// Another session owns the process's profile; stop or drop it first.
    #[error("ying: a profiler session is already active in this process; stop or drop it before starting another")]
    AlreadyActive,
    /// This session was stopped.
    #[error("ying: this profiler session was stopped; start a new one")]
    Inactive,
    /// A setting of the [`ProfilerConfig`] is out of range.
    #[error("ying: invalid profiler configuration: `{setting}` {reason}")]
    InvalidConfig {
        /// The setting, as its [`ProfilerConfig`] method is named.
        setting: &'static str,
        /// What it must be.
        reason: String,
    },
}

/// The settings of a [`Profiler`] session. Every setting has a default.
///
/// ```
/// let config = ying::ProfilerConfig::default().max_stacks(5_000).max_frames(32);
/// assert_eq!(config.get_max_stacks(), 5_000);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfilerConfig {
    max_stacks: usize,
    max_frames: usize,
}

impl Default for ProfilerConfig {
    fn default() -> Self {
        Self { max_stacks: usize::MAX, max_frames: 128 }
    }
}

impl ProfilerConfig {
    /// Keeps the `stacks` stacks with the most live bytes (then allocated bytes) in each report; the others are
    /// left out. At least 1; no limit by default.
    #[must_use]
    pub fn max_stacks(mut self, stacks: usize) -> Self {
        self.max_stacks = stacks;
        self
    }

    /// Keeps the innermost `frames` places (machine frames and spans) of each stack; stacks that become the same
    /// are merged. From 1 to 1024; 128 by default.
    #[must_use]
    pub fn max_frames(mut self, frames: usize) -> Self {
        self.max_frames = frames;
        self
    }

    /// The [`max_stacks`](Self::max_stacks) setting.
    pub fn get_max_stacks(&self) -> usize {
        self.max_stacks
    }

    /// The [`max_frames`](Self::max_frames) setting.
    pub fn get_max_frames(&self) -> usize {
        self.max_frames
    }

    fn validate(&self) -> Result<(), ProfilerError> {
        if self.max_stacks == 0 {
            return Err(ProfilerError::InvalidConfig { setting: "max_stacks", reason: "must be at least 1".into() });
        }
        if !(1..=MAX_FRAMES_LIMIT).contains(&self.max_frames) {
            return Err(ProfilerError::InvalidConfig {
                setting: "max_frames",
                reason: format!("must be from 1 to {MAX_FRAMES_LIMIT}, not {}", self.max_frames),
            });
        }
        Ok(())
    }
}

/// A profiling session: the one owner of the process's heap profile, read as pprof.
///
/// [`start`](Self::start) checks the configuration and that ying's allocator is installed, and claims the
/// profile; [`report`](Self::report) returns owned, uncompressed `profile.proto` bytes; [`stop`](Self::stop) (or
/// dropping the session) releases it. Each report holds four sample types:
///
/// - `alloc_objects`, `alloc_space`: allocations made since the previous report (or the start), estimated;
/// - `inuse_objects`, `inuse_space`: memory live at the report, estimated, whenever it was allocated.
///
/// Every sample is labelled `__delta__="false"`: its values cover the report's interval already, so consumers
/// that would subtract consecutive profiles (Pyroscope) must not. Estimates are kept fractional through
/// aggregation and rounded once, when written. Write the bytes gzip-compressed to a `.pb.gz` file for
/// `go tool pprof`, or send them to a profile store.
///
/// ```
/// #[global_allocator]
/// static ALLOC: ying::YingProfiler = ying::YingProfiler::new();
///
/// let mut session = ying::Profiler::start(ying::ProfilerConfig::default())?;
/// let kept: Vec<Vec<u8>> = (0..64).map(|_| vec![0; 64 << 10]).collect();
/// let profile: Vec<u8> = session.report()?;
/// assert!(!profile.is_empty());
/// session.stop()?;
/// assert_eq!(session.report(), Err(ying::ProfilerError::Inactive));
/// # drop(kept);
/// # Ok::<(), ying::ProfilerError>(())
/// ```
#[derive(Debug)]
#[must_use = "dropping the session stops it"]
pub struct Profiler {
    generation: u64,
    config: ProfilerConfig,
    /// Each stack's allocation estimates at the previous report (objects, bytes), by stack index.
    reported: Vec<(f64, f64)>,
    /// When the current interval started.
    since: SystemTime,
}

impl Profiler {
    /// Starts a session: validates `config`, checks that ying's allocator is the global allocator, and claims the
    /// process's profile.
    ///
    /// # Errors
    ///
    /// [`ProfilerError::InvalidConfig`] for a setting out of range, [`ProfilerError::MissingAllocator`] when the
    /// global allocator is not a [`YingProfiler`](crate::YingProfiler), [`ProfilerError::AlreadyActive`] while
    /// another session owns the profile.
    pub fn start(config: ProfilerConfig) -> Result<Self, ProfilerError> {
        config.validate()?;
        if !allocator::is_installed() {
            return Err(ProfilerError::MissingAllocator);
        }
        let generation = GENERATIONS.fetch_add(1, Ordering::Relaxed);
        OWNER
            .compare_exchange(0, generation, Ordering::AcqRel, Ordering::Acquire)
            .map_err(|_| ProfilerError::AlreadyActive)?;
        let reported = allocation_totals(&stack_stats::totals());
        Ok(Self { generation, config, reported, since: SystemTime::now() })
    }

    /// Whether this session owns the profile (it has not been stopped).
    pub fn is_active(&self) -> bool {
        self.generation != 0 && OWNER.load(Ordering::Acquire) == self.generation
    }

    /// The profile now, as uncompressed `profile.proto` bytes; starts the next interval.
    ///
    /// # Errors
    ///
    /// [`ProfilerError::Inactive`] once the session is stopped.
    pub fn report(&mut self) -> Result<Vec<u8>, ProfilerError> {
        if !self.is_active() {
            return Err(ProfilerError::Inactive);
        }
        Ok(as_profiler(|| self.encode()))
    }

    /// Stops the session and releases the profile, so that another session can start. Dropping the session does
    /// the same.
    ///
    /// # Errors
    ///
    /// [`ProfilerError::Inactive`] when the session was stopped already; a later session is left as it is.
    pub fn stop(&mut self) -> Result<(), ProfilerError> {
        if !self.is_active() {
            return Err(ProfilerError::Inactive);
        }
        // Only this session's own generation is cleared: a later session is never released by an earlier one.
        let _ = OWNER.compare_exchange(self.generation, 0, Ordering::AcqRel, Ordering::Acquire);
        self.generation = 0;
        self.reported = Vec::new();
        Ok(())
    }

    fn encode(&mut self) -> Vec<u8> {
        let now = SystemTime::now();
        let totals = stack_stats::totals();
        let mut stacks: Vec<(usize, Values)> = totals
            .iter()
            .enumerate()
            .map(|(index, (_, stats))| {
                let (objects, bytes) = self.reported.get(index).copied().unwrap_or_default();
                let values = [
                    stats.allocated_objects() - objects,
                    stats.allocated_bytes() - bytes,
                    stats.retained_objects(),
                    stats.retained_bytes(),
                ];
                (index, values)
            })
            .filter(|(_, values)| values.iter().any(|&value| value > 0.0))
            .collect();
        stacks.sort_by(|(a_index, a), (b_index, b)| {
            b[3].total_cmp(&a[3]).then(b[1].total_cmp(&a[1])).then(a_index.cmp(b_index))
        });
        stacks.truncate(self.config.max_stacks);

        let mut builder = Builder::new(objects::executable_segments());
        for (index, values) in stacks {
            let mut places = symbolize::places(&totals[index].0);
            places.truncate(self.config.max_frames);
            builder.add(&places, values);
        }
        let nanos = |time: SystemTime| {
            time.duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |elapsed| i64::try_from(elapsed.as_nanos()).unwrap_or(i64::MAX))
        };
        let header = Header {
            time_nanos: nanos(self.since),
            duration_nanos: nanos(now).saturating_sub(nanos(self.since)),
            period: i64::try_from(sampler::interval_in_force()).unwrap_or(i64::MAX),
        };
        self.reported = allocation_totals(&totals);
        self.since = now;
        builder.finish(&header)
    }
}

impl Drop for Profiler {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Each stack's allocation estimates (objects, bytes), by stack index.
fn allocation_totals(totals: &[(crate::hot::stacks::Ips, StackStats)]) -> Vec<(f64, f64)> {
    totals.iter().map(|(_, stats)| (stats.allocated_objects(), stats.allocated_bytes())).collect()
}
