//! The base: building blocks that never allocate through the global allocator and use no other layer, so that
//! the allocation path may use any of them: memory straight from the system (`raw`), a lock that never allocates
//! (`sync`), an asymmetric fence (`barrier`), the state each thread keeps (`thread`) and its handles on what the
//! pools hand it (`handles`), the ids the tables hand out (`ids`), the objects the loader has loaded (`loaded`), the
//! `tracing` spans each thread is in (`span_stack`), and standard error written from a buffer on the stack
//! (`stderr`).

pub(crate) mod barrier;
pub(crate) mod handles;
pub(crate) mod ids;
#[cfg(target_os = "linux")]
pub(crate) mod loaded;
pub(crate) mod raw;
#[cfg(feature = "profile-spans")]
pub(crate) mod span_stack;
pub(crate) mod stderr;
pub(crate) mod sync;
pub(crate) mod thread;
