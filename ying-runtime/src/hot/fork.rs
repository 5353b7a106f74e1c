//! Fork safety: no lock of the allocation path is held by another thread when the process forks.
//!
//! A child process starts with one thread, the one that called `fork`, and a copy of the parent's memory as it was:
//! a spin lock that another thread held at that moment would stay locked in the child for ever, and the child's
//! first allocation that needs it would hang. So the profiler registers `pthread_atfork` handlers, once, when the
//! first thread first allocates through it (`first_event`, out of line, as the thread gets its counter block):
//!
//! - before the fork, the forking thread takes every lock the allocation path can hold: the call-frame rules'
//!   writer lock (`unwind`), the stack table's (`stacks`), the live table's shards (`live`) and the scopes' peak
//!   locks (`scope`), in that order, and last the pools the tables' small blocks come from (`base::raw`). No path
//!   holds two of the first at once, and a pool's lock, taken inside any of them, holds none, so no order can
//!   deadlock with a thread that holds one;
//! - after it, the parent and the child release them: the tables are as the last holder left them;
//! - the child forgets the scope updates that other threads had in flight (`scope`): those threads are not in the
//!   child, and a scope's close waits for a part being written. Their scopes stay open, with no home thread, and
//!   what the other threads kept (their nurseries, their counter blocks) stays as it was: the forking thread's
//!   figures are exactly what they were.
//!
//! Handlers registered after these run their `prepare` before, and their `parent` and `child` after them: they
//! may allocate. One registered before (by a library loaded before the first allocation) must not allocate through
//! the global allocator in its handlers.

use crate::hot::{live, scope, stacks, unwind};
use core::sync::atomic::{AtomicBool, Ordering};

/// The handlers are registered (or being registered).
static REGISTERED: AtomicBool = AtomicBool::new(false);

/// Registers the fork handlers unless they are. Called when a thread first allocates through the profiler; never
/// allocates through the global allocator.
#[inline]
pub(crate) fn register() {
    if !REGISTERED.load(Ordering::Relaxed) {
        register_once();
    }
}

#[cold]
#[inline(never)]
fn register_once() {
    if REGISTERED.swap(true, Ordering::AcqRel) {
        return;
    }
    // SAFETY: the three handlers are `extern "C"` functions without arguments that live as long as the process;
    // they neither unwind nor allocate through the global allocator. `pthread_atfork` allocates its record with the
    // C library's `malloc`, which is not this allocator.
    let failed = unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) } != 0;
    if failed {
        crate::base::stderr::Stderr::new()
            .line(b"ying: could not register the fork handlers; a child process may hang in the allocator");
    }
}

/// Before the fork, on the forking thread: takes every lock of the allocation path.
extern "C" fn prepare() {
    unwind::lock_for_fork();
    stacks::lock_for_fork();
    live::lock_for_fork();
    scope::lock_for_fork();
    crate::base::raw::lock_for_fork();
}

/// After the fork, in the parent: releases the locks.
extern "C" fn parent() {
    release();
}

/// After the fork, in the child (one thread, the forking one): releases the locks and forgets the other threads'
/// scope updates in flight.
extern "C" fn child() {
    release();
    crate::base::barrier::register_child();
    scope::forget_other_threads();
    stacks::forget_other_threads();
}

fn release() {
    // SAFETY: `prepare` took these locks on the forking thread, which runs `parent` or `child` (in the child, the
    // only thread), and nothing released them since.
    unsafe {
        crate::base::raw::unlock_after_fork();
        scope::unlock_after_fork();
        live::unlock_after_fork();
        stacks::unlock_after_fork();
        unwind::unlock_after_fork();
    }
}

#[cfg(test)]
mod tests {
    use crate::hot::scope::{self, Attribution, OpenScope};
    use std::time::{Duration, Instant};

    /// Waits for child `pid` for up to a minute (it takes milliseconds), then kills it; its exit code, `None` when
    /// it had to be killed or did not exit.
    fn exit_code_within_a_minute(pid: libc::pid_t) -> Option<i32> {
        let started = Instant::now();
        let mut status = 0;
        while started.elapsed() < Duration::from_secs(60) {
            // SAFETY: `pid` is a child of this process, not reaped yet; `status` is valid for the call.
            match unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } {
                0 => std::thread::sleep(Duration::from_millis(10)),
                _ => return libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
            }
        }
        // SAFETY: `pid` is a child of this process, not reaped yet: killed, then reaped.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, core::ptr::null_mut(), 0);
        }
        None
    }

    #[test]
    fn a_child_closes_a_scope_another_thread_was_updating_at_the_fork() {
        super::register();
        let open = OpenScope::open(Attribution::Thread, false);
        let id = open.id();
        // Another thread announced an update of the scope (as the free of a block the scope owns does) and was in
        // it when the process forked: it is not in the child, and will never end it there.
        let update = scope::begin_update(id);
        // SAFETY: the child only closes the scope, which allocates nothing, and ends with `_exit`.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            open.close();
            // SAFETY: ends the child at once, running nothing of the parent's.
            unsafe { libc::_exit(0) };
        }
        assert!(pid > 0, "fork failed");
        scope::end_update(update);
        open.close();
        assert_eq!(exit_code_within_a_minute(pid), Some(0), "the child's close waited for a thread it does not have");
    }
}
