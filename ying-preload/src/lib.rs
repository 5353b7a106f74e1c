//! ying's allocation interposer: a shared library that, loaded into a process with `LD_PRELOAD` (Linux, glibc),
//! sends every `malloc`, `calloc`, `realloc`, `free` and aligned allocation of the process through a
//! [`YingProfiler`](ying::YingProfiler), so that ying measures a program without a line of it changed, memory
//! that C libraries allocate included. `cargo ying test --measure all` loads it into each test process.
//!
//! # Layout
//!
//! - [`blocks`]: the blocks the program gets: the C library's, each with a header in front that keeps the size
//!   the program asked for (`free` is not told it, and ying's figures are of requested bytes);
//! - [`ending`]: the line that says how the process ended, for a test of nextest's profile, whose process no
//!   wrapper waits for (`ying_report::end_mark`), and the processes the test left running ended as it exits;
//! - [`exports`]: the C allocation functions this library defines in place of the C library's, each a call of the
//!   profiler over [`blocks`];
//! - [`threads`]: `pthread_setname_np`, through which the runtime learns which thread runs the measured test;
//! - [`unwind`]: `_Unwind_Backtrace`, whose walks (a panic's printed backtrace among them) allocate outside every
//!   figure;
//! - [`next`]: the definitions these stand in front of, looked up once;
//! - [`nextest`]: a test of nextest's profile `ying`, whose record this library starts as it is loaded (the
//!   profile's setup script preloads it; no wrapper runs the test);
//! - [`own`]: the global allocator of this library's own Rust code (the runtime's reports, symbols), which takes
//!   memory from the C library directly: it is never measured and never re-enters the interposer.
//!
//! # Caveats
//!
//! - Every block of the process carries a 16-byte header (an over-aligned block: its alignment), and
//!   `malloc_usable_size` returns the size asked for.
//! - The C library forwarded to is glibc's (`__libc_malloc` and its siblings); other C libraries are not
//!   supported.
//! - A program whose global allocator does not use `malloc` (jemalloc, mimalloc) is measured only for what reaches
//!   `malloc`.

#![deny(unsafe_op_in_unsafe_fn)]

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod blocks;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod ending;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod exports;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod libc_malloc;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod next;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod nextest;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod own;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod threads;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod unwind;
