//! The allocation path ("hot", as in hot path): what runs inside `GlobalAlloc`, built on the base alone, and the
//! tables it fills. What runs inside the allocator keeps its rules (no allocation through the global allocator, no
//! lock that allocates, no unwinding); the parts that run rarely are kept out of line, but they run there too, so
//! they live here. The same modules give the layers above what they need of those tables outside the allocator:
//! scopes to open and close, copies of the live entries and of the stack table.
//!
//! - `allocator`: [`YingProfiler`](allocator::YingProfiler), the `GlobalAlloc` wrapper, and its fast path;
//! - `first_event`: what a thread's first event through the allocator sets up (the fork handlers, `membarrier`,
//!   the thread's counter block), called from the allocator's paths past the fast one;
//! - `counters`, `sampler`: the exact figures of the process and the Poisson sampler;
//! - `scope/`: the exact figures of scopes (the handles, the slots, the update protocol, and the per-thread parts
//!   the figures are kept in, with the exact peak over all of them);
//! - `live`: the entries of the blocks the profiler must recognise when they are freed (the live table and the
//!   nurseries, behind one entry point);
//! - `stacks`, `unwind`: stack capture (with a caching walker) and the stack table with its per-stack estimates;
//! - `histogram`: how long a stack's freed samples lived, which the free path adds to (the type is public, and read
//!   above, but written here).
//! - `fork`: the `pthread_atfork` handlers that keep a forked child from inheriting a lock another thread held.
//!
//! A refused giant allocation is reported from here too, without allocating: its stack as addresses (`allocator`).

pub(crate) mod allocator;
pub(crate) mod counters;
pub(crate) mod first_event;
#[cfg(unix)]
pub(crate) mod fork;
pub(crate) mod histogram;
pub(crate) mod live;
pub(crate) mod sampler;
pub(crate) mod scope;
pub(crate) mod stacks;
pub(crate) mod unwind;
