//! ying: a sampling allocator that measures exactly what code retains, and names where it was allocated.
//!
//! [`YingProfiler`] wraps a global allocator ([`System`](std::alloc::System) by default, or any other such as
//! mimalloc). It keeps three things:
//!
//! - **exact figures** of the process ([`YingProfiler::stats`]): bytes and blocks allocated, freed and live, and
//!   the peak, from per-thread sharded counters;
//! - **exact figures of a scope** ([`measure`]): what a closure retained, its peak, its allocations and frees,
//!   counting only its own thread (and threads that [enter](Scope::enter) its scope) so that other work in the
//!   process never pollutes them;
//! - **sampled stacks**: Poisson byte-interval sampling (one sample per 512 KiB allocated on average, by default)
//!   with unbiased estimates of retained and allocated bytes and objects per stack
//!   ([`YingProfiler::top_k_stacks_by_retained`]), symbolised lazily, outside the allocator.
//!
//! # Setup
//!
//! Add `ying-runtime` to `[dependencies]` (or `[dev-dependencies]` for tests only) and install the allocator once
//! in the binary:
//!
//! ```
//! #[global_allocator]
//! static ALLOC: ying::YingProfiler = ying::YingProfiler::new();
//!
//! fn main() {
//!     let (_, stats) = ying::measure(|| Box::leak(Box::new([0u8; 1000])));
//!     assert_eq!(stats.retained_bytes, 1000);
//!
//!     for stack in ALLOC.top_k_stacks_by_retained(5) {
//!         println!("{:.0} bytes retained at {:?}", stack.retained_bytes(), stack.frames().first());
//!     }
//! }
//! ```
//!
//! # Caveats
//!
//! - Only allocations made through Rust's global allocator are seen: memory that C libraries allocate with
//!   `malloc`, and `mmap`ed memory, are not.
//! - Stacks need debug information to have names and lines: keep `debug = "line-tables-only"` (or more) in the
//!   profile you profile. Frame pointers are not needed.
//! - Per-stack figures are estimates whose precision grows with the number of samples; budgets belong on the exact
//!   figures of [`ScopeStats`] and [`HeapStats`].
//! - The process peak ([`HeapStats::peak_bytes`]) is batched per thread and may read up to 64 KiB per allocating
//!   thread below the true peak; scope peaks are exact.
//! - Allocations larger than [`YingProfiler::giant_alloc_limit`] (64 GiB by default) are refused.
//! - A thread's allocations during its own teardown, after its thread-local storage is gone, are counted in the
//!   exact figures but not attributed to scopes or sampled; [`HeapStats::dropped_events`] counts them.

#![deny(unsafe_op_in_unsafe_fn)]

mod allocator;
mod counters;
mod histogram;
mod leak_test;
mod measure;
mod raw;
pub mod report;
mod sampler;
mod scope;
mod size;
mod stack_stats;
mod stacks;
mod symbolize;
mod sync;
mod table;
mod thread;

pub use allocator::{DEFAULT_GIANT_ALLOC_LIMIT, YingProfiler, is_installed};
pub use counters::HeapStats;
pub use histogram::LifetimeHistogram;
pub use leak_test::ATTRIBUTION_ENV;
pub use measure::{measure, measure_with};
pub use sampler::DEFAULT_SAMPLE_INTERVAL;
pub use scope::{Attribution, EnterGuard, Scope, ScopeStats};
pub use stack_stats::StackStats;
pub use symbolize::Frame;
pub use ying_macros::leak_test;

/// Internals for ying's own macros and tests; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::leak_test::{LeakTest, TestResult, run};
    pub use crate::report::Budgets;
    pub use crate::scope::Attribution;

    /// Entries in the live table: (sampled, owned by a scope, the profiler's own).
    pub fn live_table_census() -> (usize, usize, usize) {
        crate::table::census()
    }
}
