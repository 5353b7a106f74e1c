//! A thread's first event through the profiler: what the process and the thread need before the allocator counts
//! anything for it.
//!
//! The allocator asks for the calling thread's counter ([`counter`]) on every path that counts past the fast one (a
//! thread without its counter block is never [`plain`](crate::base::thread::ThreadState::plain), so its first
//! event takes one of them). The first time, out of line, the process registers its fork handlers (`hot::fork`) and
//! registers for `membarrier` (`base::barrier`), once each, and the thread gets its counter block
//! (`hot::counters`).

use crate::base::handles::ShardHandle;
use crate::base::thread::ThreadState;
use crate::hot::counters::{self, Counter};

/// The calling thread's (`thread`'s) counter, its block given on its first event.
#[inline(always)]
pub(crate) fn counter(thread: &ThreadState) -> Counter<'_> {
    let shard = match thread.shard() {
        Some(shard) => shard,
        None => first_event(thread),
    };
    counters::of_thread(thread, shard)
}

/// The calling thread's first allocation or free through the ying allocator: returns its counter block's handle.
#[cold]
fn first_event(thread: &ThreadState) -> ShardHandle {
    // Before this thread takes any lock of the allocation path.
    #[cfg(unix)]
    crate::hot::fork::register();
    // Before any scope opens, and while the process most likely has one thread: registering a process with several
    // threads waits for an RCU grace period (about 14 ms here).
    crate::base::barrier::register_once();
    counters::assign(thread)
}
