//! The read side: what runs outside the allocator, on what the allocation path recorded. It symbolises captured
//! stacks (`symbolize`, with the executable's `symbol_table` where debug information names a function bare) and
//! names the type a retained site allocated (`types`, from the executable's debug information), ranks stacks by
//! their estimates (`stack_stats`, with the methods of `YingProfiler` that return them) and describes the loaded
//! objects as profiles need them (`objects`), says why a test's retained blocks are still there (`reach`), and which system call a thread waits in (`tasks`). It
//! allocates freely, as the profiler (`base::thread::as_profiler`), so that nothing it allocates is in any figure.

#[cfg(feature = "pprof")]
pub(crate) mod objects;
#[cfg(target_os = "linux")]
pub(crate) mod reach;
pub(crate) mod stack_stats;
pub(crate) mod symbol_table;
pub(crate) mod symbolize;
#[cfg(target_os = "linux")]
pub(crate) mod tasks;
pub(crate) mod types;
