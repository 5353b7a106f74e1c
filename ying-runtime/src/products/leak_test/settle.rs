//! The threads a test measured from outside started and left running: waited for, a while, before its window
//! closes. A thread the test spawned and did not join (a detached worker, a chain of threads each spawning the next)
//! still holds what it allocated while it runs, and frees it as it ends; read at the test thread's end, that memory
//! would be retained in some runs and not in others, as the threads' timing goes.

use crate::base::thread::as_profiler;
use std::time::{Duration, Instant};

/// The longest the window waits for the threads the test left running: a thread that runs longer (a pool's worker
/// parked for the process's life) keeps what it holds in the figures.
pub(super) const SETTLE: Duration = Duration::from_millis(500);

/// The threads of this process, by their ids.
#[derive(Debug, Default)]
pub(super) struct Threads(Vec<u64>);

impl Threads {
    /// The threads alive now (none where `/proc/self/task` cannot be read). Its allocations are the profiler's own.
    pub(super) fn now() -> Self {
        as_profiler(|| {
            let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return Self::default() };
            let mut ids: Vec<u64> = tasks.filter_map(|task| task.ok()?.file_name().to_str()?.parse().ok()).collect();
            ids.sort_unstable();
            Self(ids)
        })
    }

    /// Waits, at most `limit`, until every thread alive now that is not among `self` (started since) has ended,
    /// the calling thread aside; returns whether they all did. Its allocations are the profiler's own.
    pub(super) fn wait_for_those_started_since(&self, limit: Duration) -> bool {
        // SAFETY: gettid has no preconditions.
        let this = u64::try_from(unsafe { libc::gettid() }).unwrap_or_default();
        self.wait(this, limit, Self::now)
    }

    /// [`wait_for_those_started_since`](Self::wait_for_those_started_since), the calling thread `this`, the threads
    /// alive read by `now`.
    fn wait(&self, this: u64, limit: Duration, mut now: impl FnMut() -> Self) -> bool {
        let started = Instant::now();
        let mut pause = Duration::from_micros(100);
        loop {
            let running = now().0.into_iter().any(|id| id != this && self.0.binary_search(&id).is_err());
            if !running {
                return true;
            }
            if started.elapsed() >= limit {
                return false;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(10));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Threads;
    use std::time::{Duration, Instant};

    #[test]
    fn the_threads_started_since_are_waited_for_until_they_end_and_no_longer_than_the_limit() {
        let before = Threads(vec![1, 2, 7]);
        // Thread 9 (started since) ends at the third look; 7 ends first, which is no matter; 5 is the caller.
        let mut looks = 0;
        let ends = || {
            looks += 1;
            Threads(if looks < 3 { vec![1, 2, 5, 9] } else { vec![1, 2, 5] })
        };
        assert!(before.wait(5, Duration::from_secs(30), ends));
        assert_eq!(looks, 3);
        let started = Instant::now();
        assert!(!before.wait(5, Duration::from_millis(30), || Threads(vec![1, 2, 5, 9])), "9 never ends");
        assert!(started.elapsed() >= Duration::from_millis(30));
        assert!(!Threads::now().0.is_empty(), "this process's threads are read");
    }
}
