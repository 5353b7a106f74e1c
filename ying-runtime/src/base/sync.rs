//! A spin lock that never allocates, for the tables the allocator updates, and a sequence count, for figures one
//! thread writes and others read whole.
//!
//! `std::sync::Mutex` does not allocate on Linux today, but nothing promises that, and `parking_lot` keeps lazily
//! allocated per-thread data. The profiler's critical sections are a few dozen instructions (one hash-table probe),
//! so spinning with a bounded busy-wait before yielding is both simple and sufficient.

use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering, fence};

/// Busy-wait iterations before the waiting thread yields its time slice.
const SPINS_BEFORE_YIELD: u32 = 64;

/// A mutual-exclusion lock that never allocates.
pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the lock hands out access to `value` to one thread at a time, so sharing the lock between threads is
// sound whenever the value itself may move between threads.
unsafe impl<T: Send> Sync for SpinLock<T> {}

impl<T> SpinLock<T> {
    pub(crate) const fn new(value: T) -> Self {
        Self { locked: AtomicBool::new(false), value: UnsafeCell::new(value) }
    }

    /// Acquires the lock, spinning (then yielding) while another thread holds it.
    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        let mut spins = 0u32;
        loop {
            if !self.locked.swap(true, Ordering::Acquire) {
                return SpinGuard { lock: self };
            }
            while self.locked.load(Ordering::Relaxed) {
                if spins < SPINS_BEFORE_YIELD {
                    spins += 1;
                    core::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
    }

    /// Acquires the lock and keeps it past this call: for the fork handlers (`hot::fork`), which take every lock of
    /// the allocation path before the process forks and release them, with [`unlock_after_fork`](Self::unlock_after_fork),
    /// in the parent and in the child.
    #[cfg(unix)]
    pub(crate) fn lock_for_fork(&self) {
        core::mem::forget(self.lock());
    }

    /// Releases the lock [`lock_for_fork`](Self::lock_for_fork) took.
    ///
    /// # Safety
    ///
    /// The calling thread (or, in a child process, the thread that forked it) took the lock with `lock_for_fork`
    /// and has not released it since.
    #[cfg(unix)]
    pub(crate) unsafe fn unlock_after_fork(&self) {
        self.locked.store(false, Ordering::Release);
    }
}

/// A sequence count for figures that one thread writes with plain stores and other threads read whole: odd while
/// its writer writes, and a read that overlapped a write is retried.
pub(crate) struct SeqCount(AtomicU32);

impl SeqCount {
    pub(crate) const fn new() -> Self {
        Self(AtomicU32::new(0))
    }

    /// Begins a write, on the writer's thread: returns what [`end_write`](Self::end_write) takes.
    #[inline(always)]
    pub(crate) fn begin_write(&self) -> u32 {
        let seq = self.0.load(Ordering::Relaxed);
        self.0.store(seq.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        seq
    }

    /// Ends the write [`begin_write`](Self::begin_write) began.
    #[inline(always)]
    pub(crate) fn end_write(&self, seq: u32) {
        self.0.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// What `read` reads (relaxed loads of the figures), retried until no write overlapped it.
    pub(crate) fn read<T>(&self, mut read: impl FnMut() -> T) -> T {
        loop {
            let seq = self.0.load(Ordering::Acquire);
            if seq.is_multiple_of(2) {
                let value = read();
                fence(Ordering::Acquire);
                if self.0.load(Ordering::Relaxed) == seq {
                    return value;
                }
            }
            core::hint::spin_loop();
        }
    }

    /// Ends the write in progress, if any, for a writer that will never end it: in a child process just after the
    /// fork, a thread of the parent, which the child does not have.
    pub(crate) fn end_abandoned_write(&self) {
        let seq = self.0.load(Ordering::Relaxed);
        if !seq.is_multiple_of(2) {
            self.0.store(seq.wrapping_add(1), Ordering::Release);
        }
    }
}

/// Releases the lock when dropped.
pub(crate) struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while this thread holds the lock, so no other reference to the value is live.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference derived from the guard.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::SpinLock;
    use std::sync::Arc;

    #[test]
    fn excludes_concurrent_writers() {
        let lock = Arc::new(SpinLock::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let lock = Arc::clone(&lock);
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        // A non-atomic read-modify-write: lost updates would show without mutual exclusion.
                        let mut guard = lock.lock();
                        let value = *guard;
                        *guard = value + 1;
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(*lock.lock(), 80_000);
    }
}
