//! A process that forks while other threads allocate: every child can allocate, free, close its scopes and exit.
//!
//! Sampling every allocation (interval 0), the other threads hold the profiler's locks most of the time; a child
//! forked while one was held, without the fork handlers, hung in its first allocation that needed it. Each child
//! allocates, frees and exits with `_exit`; the parent waits for all of them, and kills those still running after
//! a generous deadline, which fails the test instead of hanging it.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: ying::YingProfiler = ying::YingProfiler::new().sample_interval(0);

const FORKS: usize = 200;

/// How long the children may take, from the last fork: each finishes in milliseconds.
const DEADLINE: Duration = Duration::from_secs(60);

/// Allocations of assorted sizes, some kept a while, some grown, all freed.
fn churn(round: usize) {
    let mut kept: Vec<Box<[u8]>> = Vec::new();
    for size in [8, 24, 100, 1000, 4096, 40_000] {
        kept.push(vec![round as u8; size].into_boxed_slice());
        let mut grown = Vec::with_capacity(size / 2 + 1);
        grown.extend_from_slice(&kept[kept.len() - 1]);
        black_box(&grown);
    }
    black_box(kept);
}

/// What a child does before `_exit`: allocations of its own, all freed.
fn in_child() {
    for round in 0..10 {
        churn(round);
    }
    let text = (0..100).map(|n| n.to_string()).collect::<Vec<_>>().join(",");
    black_box(text);
}

/// Forks `FORKS` children, each running `child` then `_exit(0)`, with `around` wrapped around each fork in the
/// parent (and in the child, up to its return); returns their ids.
fn fork_children(around: impl Fn(&dyn Fn() -> libc::pid_t) -> libc::pid_t) -> Vec<libc::pid_t> {
    (0..FORKS)
        .map(|_| {
            let pid = around(&|| {
                // SAFETY: the child only allocates, frees and returns here, then `_exit`s below; every lock it may
                // need is the allocator's or the C library's, which both make safe to take after a fork.
                let pid = unsafe { libc::fork() };
                if pid == 0 {
                    in_child();
                }
                pid
            });
            if pid == 0 {
                // SAFETY: ends the child at once, running nothing of the parent's (no destructor, no exit handler).
                unsafe { libc::_exit(0) };
            }
            assert!(pid > 0, "fork failed: {}", std::io::Error::last_os_error());
            pid
        })
        .collect()
}

/// Waits for every child; those still running after the deadline are killed. Panics unless each exited with 0.
fn expect_every_child_exits(pids: Vec<libc::pid_t>) {
    let started = Instant::now();
    let mut running = pids;
    let mut failed = Vec::new();
    while !running.is_empty() && started.elapsed() < DEADLINE {
        running.retain(|&pid| {
            let mut status = 0;
            // SAFETY: `pid` is a child of this process not reaped yet; `status` is valid for the call.
            let done = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if done == 0 {
                return true;
            }
            assert_eq!(done, pid, "waitpid: {}", std::io::Error::last_os_error());
            if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
                failed.push(status);
            }
            false
        });
        std::thread::sleep(Duration::from_millis(10));
    }
    let hung = running.len();
    for pid in running {
        // SAFETY: `pid` is a child of this process not reaped yet: killed, then reaped.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, core::ptr::null_mut(), 0);
        }
    }
    assert_eq!(hung, 0, "{hung} of {FORKS} children still running after {DEADLINE:?} (killed)");
    assert!(failed.is_empty(), "children that did not exit with 0 (wait statuses): {failed:?}");
}

#[test]
fn every_child_exits_while_another_thread_allocates() {
    assert_eq!(ALLOC.current_sample_interval(), 0);
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                let mut round = 0;
                while !stop.load(Ordering::Relaxed) {
                    churn(round);
                    round += 1;
                }
            });
        }
        let pids = fork_children(|fork| fork());
        stop.store(true, Ordering::Relaxed);
        expect_every_child_exits(pids);
    });
}

#[test]
fn every_child_exits_with_scopes_open() {
    // The forking thread measures each fork, and hands blocks its scope owns to another thread, which frees them
    // (updates of the scope from another thread, which its close waits for) inside scopes of its own. In the child
    // the scope closes as the closure returns, then the child exits.
    let (blocks, freed) = mpsc::channel::<Box<[u8; 64]>>();
    let freeing = std::thread::spawn(move || {
        let mut open = true;
        while open {
            ying::measure(|| {
                for _ in 0..16 {
                    match freed.recv() {
                        Ok(block) => drop(block),
                        Err(_) => open = false,
                    }
                    churn(1);
                }
            });
        }
    });
    let pids = fork_children(|fork| {
        ying::measure(|| {
            for _ in 0..16 {
                blocks.send(Box::new([7; 64])).unwrap();
            }
            fork()
        })
        .0
    });
    drop(blocks);
    freeing.join().unwrap();
    expect_every_child_exits(pids);
}
