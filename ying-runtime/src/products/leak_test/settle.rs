//! The threads a test measured from outside started and left running: waited for, a while, before its window
//! closes. A thread the test spawned and did not join (a detached worker, a chain of threads each spawning the next)
//! still holds what it allocated while it runs, and frees it as it ends; read at the test thread's end, that memory
//! would be retained in some runs and not in others, as the threads' timing goes.
//!
//! The wait ends early when every thread left is blocked in a system call that no timeout ends (a server's
//! `accept`, a worker parked on a futex, an `epoll_wait` for ever), the same call where it was a moment before: with
//! the test's thread at its end, nothing in the process is left to wake them, and what they hold is what the
//! figures keep, however long the window waited.

use crate::base::thread::as_profiler;
use crate::read::tasks::SystemCall;
use std::time::{Duration, Instant};

/// The longest the window waits for the threads the test left running: a thread that runs longer (a pool's worker
/// parked with a timeout for the process's life) keeps what it holds in the figures.
pub(super) const SETTLE: Duration = Duration::from_millis(500);

/// How long every thread left must be seen waiting in the same call without a timeout for the wait to end early.
const STILL: Duration = Duration::from_millis(20);

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
    /// the calling thread aside, or every one of them waits for nothing that can come (see the module); returns
    /// whether they all ended. Its allocations are the profiler's own.
    pub(super) fn wait_for_those_started_since(&self, limit: Duration) -> bool {
        // SAFETY: gettid has no preconditions.
        let this = u64::try_from(unsafe { libc::gettid() }).unwrap_or_default();
        self.wait(this, limit, Self::now, |id| as_profiler(|| SystemCall::of_thread(id)))
    }

    /// [`wait_for_those_started_since`](Self::wait_for_those_started_since), the calling thread `this`, the threads
    /// alive read by `now`, the call a thread waits in by `waiting`.
    fn wait(
        &self,
        this: u64,
        limit: Duration,
        mut now: impl FnMut() -> Self,
        mut waiting: impl FnMut(u64) -> Option<SystemCall>,
    ) -> bool {
        let started = Instant::now();
        let mut pause = Duration::from_micros(100);
        // The calls every thread left was last seen waiting in without a timeout, and since when.
        let mut still: Option<(Vec<(u64, SystemCall)>, Instant)> = None;
        loop {
            let left: Vec<u64> =
                now().0.into_iter().filter(|&id| id != this && self.0.binary_search(&id).is_err()).collect();
            if left.is_empty() {
                return true;
            }
            let calls: Option<Vec<(u64, SystemCall)>> = left
                .iter()
                .map(|&id| waiting(id).filter(SystemCall::waits_without_timeout).map(|call| (id, call)))
                .collect();
            still = match (calls, still) {
                (Some(calls), Some((seen, since))) if calls == seen => {
                    if since.elapsed() >= STILL {
                        return false;
                    }
                    Some((seen, since))
                }
                (Some(calls), _) => Some((calls, Instant::now())),
                (None, _) => None,
            };
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
    use super::{STILL, Threads};
    use crate::read::tasks::SystemCall;
    use std::time::{Duration, Instant};

    /// A call of `number` (with no timeout when it is a futex wait).
    fn call(number: i64) -> SystemCall {
        SystemCall { number, args: [0x1000, libc::FUTEX_WAIT as u64, 0, 0, 0, 0], sp: 0x7ffd_0000, pc: 0x1234 }
    }

    #[test]
    fn the_threads_started_since_are_waited_for_until_they_end_and_no_longer_than_the_limit() {
        let before = Threads(vec![1, 2, 7]);
        // Thread 9 (started since) ends at the third look; 7 ends first, which is no matter; 5 is the caller.
        let mut looks = 0;
        let ends = || {
            looks += 1;
            Threads(if looks < 3 { vec![1, 2, 5, 9] } else { vec![1, 2, 5] })
        };
        assert!(before.wait(5, Duration::from_secs(30), ends, |_| None));
        assert_eq!(looks, 3);
        let started = Instant::now();
        assert!(!before.wait(5, Duration::from_millis(30), || Threads(vec![1, 2, 5, 9]), |_| None), "9 never ends");
        assert!(started.elapsed() >= Duration::from_millis(30));
        assert!(!Threads::now().0.is_empty(), "this process's threads are read");
    }

    #[test]
    fn threads_that_all_wait_without_a_timeout_end_the_wait_early_and_one_that_sleeps_does_not() {
        let before = Threads(vec![1]);
        let alive = || Threads(vec![1, 5, 8, 9]);
        let parked = |_| Some(call(libc::SYS_futex));
        let started = Instant::now();
        assert!(!before.wait(5, Duration::from_secs(30), alive, parked));
        assert!(started.elapsed() >= STILL && started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
        // One of them sleeps: it will wake, so the wait goes on to the limit.
        let one_sleeps = |id| Some(call(if id == 9 { libc::SYS_clock_nanosleep } else { libc::SYS_futex }));
        let started = Instant::now();
        assert!(!before.wait(5, Duration::from_millis(300), alive, one_sleeps));
        assert!(started.elapsed() >= Duration::from_millis(300));
        // One of them runs (no call): the same.
        let one_runs = |id| (id != 8).then(|| call(libc::SYS_futex));
        let started = Instant::now();
        assert!(!before.wait(5, Duration::from_millis(300), alive, one_runs));
        assert!(started.elapsed() >= Duration::from_millis(300));
    }

    #[test]
    fn a_thread_left_in_accept_ends_the_wait_early_and_a_sleeping_one_is_waited_for() {
        let before = Threads::now();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || drop(listener.accept()));
        let started = Instant::now();
        assert!(!before.wait_for_those_started_since(Duration::from_secs(30)), "the server never ends by itself");
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
        drop(std::net::TcpStream::connect(address).unwrap());
        server.join().unwrap();
        let before = Threads::now();
        let sleeper = std::thread::spawn(|| std::thread::sleep(Duration::from_millis(200)));
        assert!(before.wait_for_those_started_since(Duration::from_secs(30)), "the sleeper ends, and is waited for");
        sleeper.join().unwrap();
    }
}
