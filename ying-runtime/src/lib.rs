//! ying: a sampling allocator that measures exactly what code retains, and names where it was allocated.
//!
//! [`YingProfiler`] wraps a global allocator ([`System`](std::alloc::System) by default, or any other such as
//! mimalloc). It keeps three things:
//!
//! - **exact figures** of the process ([`YingProfiler::stats`]): bytes and blocks allocated, freed and live, and
//!   the peak, from per-thread sharded counters;
//! - **exact figures of a scope** ([`measure`]): what a closure retained, its peak, its allocations and frees,
//!   counting only its own thread (and threads that [enter](Scope::enter) its scope) so that other work in the
//!   process never pollutes them; scopes nest, so what an inner scope counts, every enclosing scope counts too;
//! - **sampled stacks**: Poisson byte-interval sampling (one sample per 512 KiB allocated on average, by default)
//!   with unbiased estimates of retained and allocated bytes and objects per stack
//!   ([`YingProfiler::top_k_stacks_by_retained`]), symbolised lazily, outside the allocator.
//!
//! # Setup
//!
//! Add `ying-runtime` to `[dev-dependencies]` to write leak tests (or to `[dependencies]` to profile a program),
//! install the allocator once in each test binary (for unit tests, in the library under `#[cfg(test)]`), and mark
//! tests with [`leak_test`]:
//!
//! ```no_run
//! #[global_allocator]
//! static ALLOC: ying::YingProfiler = ying::YingProfiler::new();
//!
//! #[ying::leak_test]
//! fn builds_and_drops_the_index() {
//!     let index: std::collections::HashMap<u32, String> = (0..100).map(|i| (i, i.to_string())).collect();
//!     assert_eq!(index.len(), 100);
//! }
//! # fn main() {}
//! ```
//!
//! The same allocator measures and profiles ordinary code:
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
//! # Features
//!
//! - `profiler`: the production reporter of the seed `ying-profiler` crate (`utils::ProfilerRunner`,
//!   `YingProfiler::start_profiling`): text reports and flamegraphs when retained memory moves.
//! - `pprof`: `Profiler` sessions that read the heap profile as standard pprof (`profile.proto`) bytes.
//! - `profile-spans`: the `tracing` spans a thread is in are recorded with each sampled stack, as frames
//!   (`spans::SpanLayer`).
//!
//! None is on by default: a program that only wants the allocator builds no renderer, encoder or `tracing`.
//!
//! # Caveats
//!
//! - Only allocations made through Rust's global allocator are seen: memory that C libraries allocate with
//!   `malloc`, and `mmap`ed memory, are not.
//! - Stacks are named from the executable's symbol table and debug information: without debug information
//!   (`debug = 0`, as in `cargo test --release`) a frame is a function that exists in the machine code, named by its
//!   path, without file or line; `debug = "line-tables-only"` adds files, lines and inlined functions (named bare;
//!   `debug = "limited"` gives them their paths). Keep the symbol table (no `strip`). Frame pointers are not needed.
//! - Why a leak test's retained memory is still there (each site's `why`: lost, cycle, static, thread-local, thread
//!   stack, heap) comes from a conservative scan of the process at the end of the test (Linux; a test that retains
//!   nothing is not scanned): a word that only looks like a pointer (a stale copy in a buffer's unused capacity or
//!   in a stack slot) keeps a block reachable, never the other way round; the main thread's thread-locals and the
//!   memory of an allocator other than glibc's are not read.
//! - Per-stack figures are estimates whose precision grows with the number of samples; budgets belong on the exact
//!   figures of [`ScopeStats`] and [`HeapStats`].
//! - The process peak ([`HeapStats::peak_bytes`]) is batched per thread and may be off by up to 64 KiB per
//!   allocating thread (with one thread, below the true peak); scope peaks are exact.
//! - Allocations larger than [`YingProfiler::giant_alloc_limit`] (64 GiB by default) are refused; the refusal
//!   writes the allocating stack as addresses (for `addr2line`), since it may not allocate to name them.
//! - A process may fork while other threads allocate: the profiler's locks are taken around the fork
//!   (`pthread_atfork`), so the child can allocate. In the child, the scopes that other threads opened stay open
//!   (no thread is left to close them); the forking thread's scopes and figures carry on.
//! - A thread's allocations during its own teardown, after its thread-local storage is gone, are counted in the
//!   exact figures but not attributed to scopes or sampled; [`HeapStats::dropped_events`] counts them.
//! - Overhead (BENCHMARKS.md in the repository, whose figures these are): outside scopes, at the default interval,
//!   close to the System allocator's time on allocation-bound workloads, and little more memory ("Allocator
//!   overhead"). Inside a leak test every allocation records its stack, so that every retained block can be named
//!   and excused: on x86-64 Linux ying walks stacks with cached unwind rules and recognises a stack its thread met
//!   just before for a fraction of a new walk's cost; elsewhere the system unwinder walks every stack, at many times
//!   that cost ("Instruction counts", the hot path's pieces). An allocation-bound body runs slower than under
//!   System, about as much with several threads allocating in one scope as with one, and far faster than under
//!   dhat-rs ("What a leak-test scope costs"). Keep leak-test bodies to the work under test; `measure` scopes record
//!   no stacks.
//! - A thread with a scope open, and under process attribution any thread that allocates while the leak test runs,
//!   keeps the entries of the blocks it allocates in a table of its own (262,144 entries in 4 MiB of address space,
//!   beside a tree of the thread's stack walks in about 3.4 MiB more, mapped outside the heap, of which only the
//!   pages it fills are touched; 63 at once; further threads use the shared table). A scope's own thread gives it
//!   back when its last scope closes; a
//!   helper thread of a process-attributed test keeps it until the process ends or it allocates for another scope.
//! - Each thread that counts in another thread's scope keeps its figures in parts of its own, taken from a pool of
//!   1024 threads' parts for the life of the process; further threads share one set of counters per scope (slower,
//!   still exact). On Linux the process registers for `membarrier` when it first allocates, so that a leak test on
//!   one thread updates its live bytes without a locked instruction.

#![deny(unsafe_op_in_unsafe_fn)]

// The runtime in layers, each built only on the ones before it: `base` (building blocks that never allocate),
// `hot` (the allocation path), `read` (symbolising and ranking, outside the allocator) and `products` (the leak-test
// runner, `measure`, reports, profiles). Their module docs say what each holds.
mod base;
mod hot;
mod products;
mod read;

// Documented as the re-export of `callstack`'s enum it has always been, not as a page of its own.
#[doc(no_inline)]
pub use callstack::Measurement;
pub use hot::allocator::{DEFAULT_GIANT_ALLOC_LIMIT, YingProfiler, is_installed};
pub use hot::counters::HeapStats;
pub use hot::histogram::LifetimeHistogram;
pub use hot::sampler::DEFAULT_SAMPLE_INTERVAL;
pub use hot::scope::{Attribution, EnterGuard, Scope, ScopeStats};
pub use products::callstack;
pub use products::measure::{measure, measure_with};
pub use products::report;
#[cfg(feature = "pprof")]
pub use products::session::{Profiler, ProfilerConfig, ProfilerError};
#[cfg(feature = "profile-spans")]
pub use products::spans;
#[cfg(feature = "profiler")]
pub use products::utils;
pub use read::stack_stats::StackStats;
/// Marks a test as a leak test: its body runs in a measured scope, and the test fails when it exceeds its budgets,
/// naming where the retained memory was allocated.
///
/// ```no_run
/// #[global_allocator]
/// static ALLOC: ying::YingProfiler = ying::YingProfiler::new();
///
/// #[ying::leak_test] // retains nothing: max_retained = "0"
/// fn parses_without_leaking() {
///     let words: Vec<String> = "a b c".split(' ').map(String::from).collect();
///     assert_eq!(words.len(), 3);
/// }
///
/// #[ying::leak_test(max_retained = "4 KiB", max_peak = "16 MiB")]
/// fn within_budget() {}
///
/// #[ying::leak_test(max_allocated = "1 GiB", max_allocations = 10_000)]
/// fn allocation_budgets() {}
///
/// // A real leak grows the heap on every call; one-time initialisation happens in the warm-up run.
/// #[ying::leak_test(warmup = 1, iterations = 5)] // max_growth_per_iteration = "0" by default
/// fn cache_stays_bounded() {}
///
/// #[ying::leak_test(allow = ["regex::", "my_crate::interner"])] // excuses memory these allocated
/// fn with_allowed_sites() {}
///
/// #[ying::leak_test(attribution = "process")] // count every thread's allocations
/// fn with_helper_threads() {}
///
/// #[ying::leak_test]
/// #[tokio::test] // either order; the scope spans the runtime
/// async fn async_test() {}
/// # fn main() {}
/// ```
///
/// # Arguments
///
/// Sizes are strings with a unit (`B`, `KB`/`KiB`, `MB`/`MiB`, `GB`/`GiB`, `TB`/`TiB`, any case, decimals allowed)
/// or plain integers of bytes. Invalid arguments are compile errors on the offending tokens.
///
#[doc = ying_report::leak_test_arguments_doc!()]
///
/// # Forms
///
/// `#[test]`, or an async test attribute such as `#[tokio::test]`, may be written before the leak test, after it,
/// or not at all: the test is registered once. Inner attributes (`#![allow(..)]`) apply to the body. A leak test
/// returns what a test may: `()`, a `Result`, an `ExitCode` or `impl Termination`.
///
/// An `async fn` leak test written above its async test attribute runs its body to its end inside the runtime and
/// then, before the runtime shuts down, looks for the tokio tasks the body left: the report `cargo ying` reads
/// lists each, with the future it runs and the line that spawned it: `leaked` (pending, and nothing that could wake
/// it is reachable), `lingering` (pending, but something can still wake it) or `unclaimed` (complete, its
/// `JoinHandle` neither awaited nor dropped). A leaked task fails the test unless `max_leaked_tasks` allows it;
/// `max_lingering_tasks` budgets the lingering ones.
///
/// A crate that depends on `ying-runtime` under another name gives that name to `crate`, so that the generated code
/// finds the runtime: with `yr = { package = "ying-runtime", version = "0.1" }` in `[dev-dependencies]`, write
/// `#[yr::leak_test(crate = "yr", max_retained = "1 KiB")]`.
///
/// A leak test's function cannot be called from another leak test's body (the two would share one measured
/// scope): the call panics at once, naming both tests. Move the shared body into a plain function and call that.
///
/// # Attribution
///
/// Under plain `cargo test`, tests run as threads of one process, so a leak test counts only its own thread (and
/// threads that entered its [`Scope`]): other tests running beside it never change its figures. When
/// [`ATTRIBUTION_ENV`] (`YING_ATTRIBUTION`) is `process`, as `cargo ying` sets it when it runs each test in a
/// process of its own, the default becomes process attribution and leaks on helper threads and runtime workers
/// count too.
///
/// # What is not a leak
///
/// Every allocation of the measured scope records its stack, which names the site of each leak and excuses
/// memory that a test retains without leaking it: the test harness's captured output (`println!` under
/// `cargo test`), and the values of thread-locals the test used first (freed when the thread exits). What the
/// panic hook does when the body panics (std's message, and the backtrace `RUST_BACKTRACE` asks for) is not the
/// test's either: the figures of a panicking test do not depend on the environment.
///
/// Memory a dependency keeps for the life of the process, allocated the first time the test needs it (parking_lot's
/// table of waiting threads, at the first contended lock), is retained as far as the test can tell. The
/// failure message names the dependency that allocated such a site and the `allow` that excuses it.
///
/// A process that exits while a body runs (`std::process::exit` in the test) cannot report what the test retained:
/// the runtime names the test on standard error and ends the process with exit code 101, a failure. So does one
/// that runs another program in its own place (`CommandExt::exec`, `libc::execv`, ...) while a body runs: on Linux
/// with glibc the runtime defines `execve`, `execv`, `execvp`, `execvpe` and `fexecve`, which end the process so
/// then, and otherwise (and in every child process) call the C library's. Caveat: a test binary that defines these
/// functions itself does not link with the runtime.
///
/// # Reports
///
/// When [`report::REPORT_DIR_ENV`] (`YING_REPORT_DIR`) is set, each leak test writes a
/// [`report::LeakReport`] there as JSON; under [`report::RUN_TOKEN_ENV`] (`YING_RUN_TOKEN`, set by `cargo ying`)
/// the report carries the token, and the test leaves a mark when it starts, so that a report that never came is
/// noticed.
pub use ying_macros::leak_test;
pub use ying_report::Frame;
pub use ying_report::report::ATTRIBUTION_ENV;

/// Internals for ying's own macros and tests; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::products::leak_test::{LeakTest, TestResult, body_end, run};
    pub use ying_report::arguments::Value;

    /// What the allocation interposer (`ying-preload`) tells the runtime.
    pub mod interposer {
        pub use crate::products::leak_test::{leak_test_started, thread_named};

        /// Tells the reachability scan which blocks of the C library's heap are not to be read: `unread(start)`,
        /// with the start of a block in use, is true for a block the interposer keeps out of every figure (those the
        /// standard library allocates while it walks the stack). The first call decides.
        #[cfg(target_os = "linux")]
        pub fn leave_unread_where(unread: fn(usize) -> bool) {
            crate::read::reach::leave_unread_where(unread);
        }

        /// Writes `message` and a line break to standard error without allocating or locking.
        pub fn say(message: core::fmt::Arguments<'_>) {
            let mut stderr = crate::base::stderr::Stderr::new();
            // Writing to the buffer cannot fail: what does not fit is written as it fills.
            let _ = core::fmt::Write::write_fmt(&mut stderr, message);
            stderr.line(b"");
        }
    }

    /// Entries in the live table: (sampled, owned by a scope, the profiler's own).
    pub fn live_table_census() -> (usize, usize, usize) {
        crate::hot::live::census()
    }

    /// Entries the threads' nurseries hold, of those [`live_table_census`] counts.
    pub fn nursed_entries() -> usize {
        crate::hot::live::nursed()
    }

    /// The allocator's hot-path pieces, one at a time, for the criterion benchmarks.
    pub mod hot_path {
        use crate::base::thread::THREAD;
        use crate::hot::live::{self, Entry};
        use crate::hot::{sampler, stacks};

        /// The sampler's decision for an allocation of `size` bytes at mean interval `interval` (countdown).
        pub fn should_sample(size: usize, interval: usize) -> bool {
            THREAD.try_with(|thread| sampler::should_sample(thread, size, interval)).unwrap_or(false)
        }

        /// Records an entry for `key` in the live table and removes it. `key` must be odd, so that it is never the
        /// address of a real block.
        pub fn table_insert_remove(key: usize) -> bool {
            assert!(key % 2 == 1, "ying: odd keys only: they are never real blocks");
            live::insert(key, Entry::untracked(16));
            live::remove(key).is_some()
        }

        /// What a free of an untracked block costs the table: the filter says no.
        pub fn table_remove_absent(key: usize) -> bool {
            assert!(key % 2 == 1, "ying: odd keys only: they are never real blocks");
            live::remove(key).is_some()
        }

        /// Captures the calling thread's stack as the allocator does for a sample; returns its depth.
        pub fn capture_stack() -> usize {
            stacks::capture().as_slice().len()
        }

        /// Captures the calling thread's stack and finds it in the stack table, as a sampled allocation does (adding
        /// nothing to the stack's figures): a stack this thread met just before is recognised without walking it.
        pub fn record_stack() -> bool {
            stacks::record_sample(0.0, 0.0, None).is_some()
        }

        /// [`capture_stack`] with the system unwinder only (what the caching walker replaces).
        pub fn capture_stack_system_unwinder() -> usize {
            stacks::capture_with(false).as_slice().len()
        }
    }
}
