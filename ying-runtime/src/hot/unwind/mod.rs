//! A caching stack walker for sampled allocations (x86-64 Linux).
//!
//! The system unwinder (`_Unwind_Backtrace`) finds and interprets the DWARF call-frame information of every frame
//! on every capture: microseconds for a 20-frame stack (BENCHMARKS.md, "Instruction counts", the hot path's
//! pieces), which at the default sampling interval was a tenth of the profiler's cost. The rule that recovers a
//! caller's frame depends only on the instruction address, and x86-64 code almost always needs one of a few simple
//! shapes (CFA = `rsp` or `rbp` plus an offset, the return address and the saved `rbp` at fixed offsets from it).
//! This walker computes each address's rule once, with `gimli`, from the object's `.eh_frame_hdr` search table, and
//! keeps it in a fixed table (`rules`), so a capture (`walk`) is then a few loads per frame and never allocates.
//!
//! Anything outside those shapes (a signal frame, a CFA given by an expression, a register saved in another
//! register, an object without `.eh_frame_hdr`) makes [`capture`] return `None`, and the caller falls back to the
//! system unwinder for that stack. A frame without call-frame information ends the stack, as it does for the
//! system unwinder.
//!
//! A thread that allocates from one place again and again walks the same stack again and again. Each thread keeps
//! its recent walks (a few for each depth of stack) as the memory they read (`remembered`, [`capture_cached`]): a walk is a function of the
//! registers it starts from and of the values it reads, so when the registers are the same and every remembered
//! slot still holds the remembered value, the walk would find the same frames, and the caller's tag for that stack
//! (the stack table's index) is returned without walking. That is one load and compare per read instead of a rule
//! lookup per frame. A thread that holds a nursery (a leak test's) also keeps every walk it makes in a tree by
//! starting point (`tree`), looked in when none of the few remembered walks is the same: a compiler's test
//! allocates from thousands of stacks.
//!
//! A walk ends at a thread's entry (`__rust_begin_short_backtrace`) once [`end_stacks_at`] has been told where
//! those functions lie: the frames past it are the runtime's and the C library's start-up, the same on every stack
//! of the thread, which reports trim anyway and every replay would otherwise check again.
//!
//! Rules are keyed by address for the life of the process. An object unloaded (`dlclose`) and another loaded at
//! the same addresses could leave stale rules: the table is cleared whenever the loader reports that an object was
//! unloaded, which the walker checks on every table miss.
//!
//! The test processes of a run compute the rules of the same return addresses: each keeps what it computed in the
//! run's directory, by build id, for the processes after it (`kept`).
//!
//! Elsewhere (`elsewhere`) every capture goes to the system unwinder.

mod cached;
#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
mod elsewhere;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod kept;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod remembered;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod rules;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod tree;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod walk;

pub(crate) use cached::Cached;
#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
pub(crate) use elsewhere::{WalkTree, capture, capture_cached, end_stacks_at, keep_rules, load_kept_rules, remember};
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub(crate) use kept::{keep as keep_rules, load as load_kept_rules};
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub(crate) use remembered::{capture_cached, remember};
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub(crate) use rules::{end_stacks_at, lock_for_fork, unlock_after_fork};
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub(crate) use tree::WalkTree;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub(crate) use walk::capture;

/// The walker keeps no lock here.
#[cfg(all(unix, not(all(target_arch = "x86_64", target_os = "linux"))))]
pub(crate) fn lock_for_fork() {}

/// The walker keeps no lock here.
///
/// # Safety
///
/// None needed; `unsafe` as on x86-64 Linux, where it releases the rules' lock.
#[cfg(all(unix, not(all(target_arch = "x86_64", target_os = "linux"))))]
pub(crate) unsafe fn unlock_after_fork() {}
