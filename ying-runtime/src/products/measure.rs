//! [`measure`]: the exact heap figures of a closure.

use crate::hot::allocator::is_installed;
use crate::hot::scope::{Attribution, OpenScope, ScopeStats};

/// The lines that install the ying allocator, shown when it is missing, in a crate that names the runtime by
/// `runtime` (`ying`, or another name it depends on `ying-runtime` by).
pub(crate) fn install_hint(runtime: &str) -> String {
    format!("#[global_allocator]\nstatic ALLOC: {runtime}::YingProfiler = {runtime}::YingProfiler::new();")
}

/// Runs `body` and returns its result with the exact heap figures of what it did on this thread (and on threads
/// that entered its [`Scope`](crate::Scope)).
///
/// The scope closes after `body` returns, so its locals have been dropped; memory owned by the value it returns is
/// still live and counts as retained.
///
/// Scopes nest: a `measure` inside a leak test, or inside another `measure`, is enclosed by it, and everything it
/// counts (allocations, frees, retained blocks, the peak) counts in every enclosing scope too, exactly as if it were
/// not there. The blocks it retains belong to the enclosing scope once it closes.
///
/// ```
/// #[global_allocator]
/// static ALLOC: ying::YingProfiler = ying::YingProfiler::new();
///
/// let (leaked, stats) = ying::measure(|| {
///     let scratch = vec![0u8; 4096]; // freed before the scope closes
///     drop(scratch);
///     std::mem::forget(Vec::<u8>::with_capacity(1000));
/// });
/// assert_eq!(leaked, ());
/// assert_eq!(stats.retained_bytes, 1000);
/// assert_eq!(stats.retained_blocks, 1);
/// assert_eq!(stats.peak_bytes, 4096);
/// assert_eq!(stats.allocations, 2);
/// ```
///
/// # Panics
///
/// When the global allocator is not a [`YingProfiler`](crate::YingProfiler): without it there is nothing to
/// measure, and zeros would pass silently.
pub fn measure<R>(body: impl FnOnce() -> R) -> (R, ScopeStats) {
    measure_with(Attribution::Thread, body)
}

/// [`measure`] with an explicit [`Attribution`]: `Process` counts every allocation in the process, whichever
/// thread makes it.
///
/// # Panics
///
/// When the global allocator is not a [`YingProfiler`](crate::YingProfiler), or when `attribution` is `Process`
/// and another process-attributed scope is open.
pub fn measure_with<R>(attribution: Attribution, body: impl FnOnce() -> R) -> (R, ScopeStats) {
    assert!(
        is_installed(),
        "ying: the global allocator is not ying's, so nothing can be measured; add to the crate root:\n\n{}\n",
        install_hint("ying")
    );
    let scope = OpenScope::open(attribution, false);
    let result = body();
    (result, scope.close())
}
