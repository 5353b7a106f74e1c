//! A scope's figures, kept in parts that one thread each writes, and the scope's exact peak over all of them.
//!
//! Every thread that counts in a scope writes a part of its own: the scope's home thread (the one that opened it)
//! the scope's home part, any other thread a part it takes from a pool of thread-owned parts and registers with the
//! scope once ([`Registry`]); a thread that finds no part free writes the scope's shared part with atomic adds. A
//! part's owner updates it with plain loads and stores, so a thread that allocates in a scope writes no cache line
//! another thread writes (a leak test whose body runs tokio's multi-thread runtime updates its scope from three
//! threads at once). The scope's figures are the sums of its parts.
//!
//! A thread part carries the scope it counts for: its thread takes it for a scope, and the scope's closer, once it
//! has read the part, gives it back (clears the scope). A late update (one that found the scope open just before it
//! closed) lands in a part no scope reads any more, and changes nothing. A part's figures are read between two
//! reads of a sequence number its thread makes odd while it writes.
//!
//! The peak needs the maximum over time of the sum of every part's live bytes. While the home part is the only
//! one written (a leak test whose body stays on its thread), its live bytes are the scope's, and it raises the peak
//! itself ([`SOLO`]). Once another part joins, each part has a ceiling, and the ceilings add up to at most the peak
//! ([`CEILINGS`]): while every part stays below its ceiling, the sum stays below the peak, so a rise within its
//! part's ceiling needs nothing more. A rise past it takes the scope's peak lock and is granted more room
//! (`Figures::rise`); when the room is gone, the scope turns [`TIGHT`]: the lock holder reads every part's live
//! bytes (the true sum at that moment, and perhaps a new peak), lowers every ceiling to the live bytes it read, and
//! from then on every rise takes the lock, until the sum is below the peak again. A rise writes its live bytes with
//! a read-modify-write and then reads the mode, and the lock holder writes the mode and then reads the live bytes,
//! so that one of them sees the other: no rise escapes the count. While the home part is alone, its side is a
//! compiler fence and the joining part's a `membarrier` (`base::barrier`), where the system has them: no locked
//! instruction per allocation of a leak test that stays on its thread. Frees only lower a part's live bytes.

use crate::base::barrier;
use crate::base::handles::PartsIndex;
use crate::base::ids::{AtomicScopeId, ScopeId};
use crate::base::sync::{SeqCount, SpinLock};
use crate::hot::counters::{self, Events};
use core::sync::atomic::{AtomicI64, AtomicPtr, AtomicU8, AtomicU64, AtomicUsize, Ordering, fence};

/// Parts a scope registers; threads beyond write its shared part.
const REGISTERED: usize = 30;
/// Parts one thread owns (one per scope it counts in at a time).
const PER_THREAD: usize = 4;
/// Threads that can own parts; the threads after them write scopes' shared parts.
const THREADS: usize = 1024;
/// The most room a rise is granted past its part's live bytes.
const GRANT: i64 = 64 * 1024;

/// One writer's figures in one scope.
#[repr(align(128))]
pub(crate) struct Part {
    /// The scope these figures count for (`None`: free for its thread to take). Unused for home and shared parts.
    scope: AtomicScopeId,
    /// Odd while the owner writes.
    pub(super) seq: SeqCount,
    pub(super) events: Events,
    live_blocks: AtomicU64,
    live_bytes: AtomicI64,
    /// The most live bytes this part may reach without taking the peak lock (see the module's notes).
    ceiling: AtomicI64,
}

/// A scope's figures as the sum of its parts.
#[derive(Clone, Copy, Default)]
pub(super) struct Sums {
    pub(super) allocated_bytes: u64,
    pub(super) allocations: u64,
    pub(super) freed_bytes: u64,
    pub(super) frees: u64,
    pub(super) live_blocks: i64,
    pub(super) live_bytes: i64,
}

impl Part {
    const fn new() -> Self {
        Self {
            scope: AtomicScopeId::none(),
            seq: SeqCount::new(),
            events: Events::new(),
            live_blocks: AtomicU64::new(0),
            live_bytes: AtomicI64::new(0),
            ceiling: AtomicI64::new(0),
        }
    }

    /// Whether the part counts for scope `id`.
    #[inline(always)]
    pub(super) fn counts_for(&self, id: ScopeId) -> bool {
        id == self.scope.load(Ordering::Relaxed)
    }

    /// Zeroes the figures (while nobody else writes the part).
    fn reset(&self) {
        self.events.reset();
        self.live_blocks.store(0, Ordering::Relaxed);
        self.live_bytes.store(0, Ordering::Relaxed);
        self.ceiling.store(0, Ordering::Relaxed);
    }

    /// The part's figures, read whole: retried while its owner writes.
    fn read(&self) -> Sums {
        self.seq.read(|| self.read_torn())
    }

    /// The part's figures, each read once (what a part with several writers gives).
    fn read_torn(&self) -> Sums {
        let [allocated_bytes, allocations, freed_bytes, frees] = self.events.read();
        Sums {
            allocated_bytes,
            allocations,
            freed_bytes,
            frees,
            live_blocks: self.live_blocks.load(Ordering::Relaxed) as i64,
            live_bytes: self.live_bytes.load(Ordering::Relaxed),
        }
    }

    /// `bytes` more live bytes and `blocks` more live blocks: a rise, checked against the ceiling (see the module's
    /// notes).
    #[inline(always)]
    pub(super) fn add_live(&self, figures: &Figures, id: ScopeId, bytes: usize, blocks: i64, exclusive: bool) {
        counters::add(&self.live_blocks, blocks as u64, exclusive);
        if !exclusive {
            self.live_bytes.fetch_add(bytes as i64, Ordering::SeqCst);
            return figures.rise(id, self, false);
        }
        let peak = &figures.peak;
        let mut mode = peak.mode.load(Ordering::Relaxed);
        let live = if mode == SOLO {
            // The home part alone: a plain store, ordered before the second read of the mode by a compiler fence
            // against the `membarrier` of a part joining (`Figures::join`).
            let live = self.live_bytes.load(Ordering::Relaxed) + bytes as i64;
            self.live_bytes.store(live, Ordering::Relaxed);
            barrier::light();
            mode = peak.mode.load(Ordering::Relaxed);
            if mode == SOLO {
                if live > peak.bytes.load(Ordering::Relaxed) {
                    peak.bytes.fetch_max(live, Ordering::Relaxed);
                }
                return;
            }
            live
        } else {
            // Several parts: the read-modify-write orders the new figure before the read of the mode, as the lock
            // holder's fence orders its change of mode before its reads of the figures.
            let live = self.live_bytes.fetch_add(bytes as i64, Ordering::SeqCst) + bytes as i64;
            mode = peak.mode.load(Ordering::SeqCst);
            live
        };
        if mode == TIGHT || live > self.ceiling.load(Ordering::Relaxed) {
            figures.rise(id, self, true);
        }
    }

    /// `bytes` fewer live bytes and `blocks` fewer live blocks.
    #[inline(always)]
    pub(super) fn sub_live(&self, bytes: usize, blocks: i64, exclusive: bool) {
        counters::add(&self.live_blocks, blocks.wrapping_neg() as u64, exclusive);
        if exclusive {
            self.live_bytes.store(self.live_bytes.load(Ordering::Relaxed) - bytes as i64, Ordering::Relaxed);
        } else {
            self.live_bytes.fetch_sub(bytes as i64, Ordering::Relaxed);
        }
    }
}

impl Sums {
    fn add(&mut self, other: Sums) {
        self.allocated_bytes = self.allocated_bytes.wrapping_add(other.allocated_bytes);
        self.allocations = self.allocations.wrapping_add(other.allocations);
        self.freed_bytes = self.freed_bytes.wrapping_add(other.freed_bytes);
        self.frees = self.frees.wrapping_add(other.frees);
        self.live_blocks = self.live_blocks.wrapping_add(other.live_blocks);
        self.live_bytes = self.live_bytes.wrapping_add(other.live_bytes);
    }
}

/// [`Peak::mode`]: only the home part has been written, and it keeps the peak itself.
const SOLO: u8 = 0;
/// [`Peak::mode`]: several parts, each rising without the lock up to its ceiling.
const CEILINGS: u8 = 1;
/// [`Peak::mode`]: several parts, and every rise takes the lock.
const TIGHT: u8 = 2;

/// A scope's peak and what keeps it exact (see the module's notes).
struct Peak {
    /// [`SOLO`], [`CEILINGS`] or [`TIGHT`]; read by every rise.
    mode: AtomicU8,
    bytes: AtomicI64,
    /// The sum of the ceilings (and of the shared part's live bytes when last read), under the lock.
    reserved: SpinLock<i64>,
}

impl Peak {
    const fn new() -> Self {
        Self { mode: AtomicU8::new(SOLO), bytes: AtomicI64::new(0), reserved: SpinLock::new(0) }
    }

    /// Back to no peak, for a scope opening (while no rise can reach it).
    fn reset(&self) {
        *self.reserved.lock() = 0;
        self.bytes.store(0, Ordering::Relaxed);
        self.mode.store(SOLO, Ordering::Relaxed);
    }
}

/// A scope's figures: its home part, its shared part, the parts of other threads it registered, and its peak.
pub(super) struct Figures {
    /// Written by the scope's home thread alone.
    pub(super) home: Part,
    /// Written with atomic adds by any thread without a part of its own.
    pub(super) shared: Part,
    peak: Peak,
    registry: Registry,
}

impl Figures {
    pub(super) const fn new() -> Self {
        Self { home: Part::new(), shared: Part::new(), peak: Peak::new(), registry: Registry::new() }
    }

    /// Zeroes everything, for a scope opening (before its id is published).
    pub(super) fn reset(&self) {
        self.home.reset();
        self.shared.reset();
        self.peak.reset();
        self.registry.reset();
    }

    /// The sums of every part of scope `id` (on its home thread, which reads its own part as it wrote it).
    pub(super) fn sums(&self, id: ScopeId) -> Sums {
        let mut sums = self.home.read_torn();
        sums.add(self.shared.read_torn());
        self.registry.for_each(id, |part| sums.add(part.read()));
        sums
    }

    /// The peak of the sum of the parts' live bytes.
    pub(super) fn peak(&self) -> i64 {
        self.peak.bytes.load(Ordering::Relaxed)
    }

    /// At the close of `id`, once read: the thread parts go back to their threads.
    pub(super) fn release(&self, id: ScopeId) {
        self.registry.for_each(id, |part| {
            let _ = part.scope.compare_exchange(Some(id), None, Ordering::AcqRel, Ordering::Relaxed);
        });
    }

    /// Calls `f` with every part of scope `id`.
    fn for_each_part(&self, id: ScopeId, mut f: impl FnMut(&Part)) {
        f(&self.home);
        f(&self.shared);
        self.registry.for_each(id, f);
    }

    /// A rise of `part` (`exclusive`: written by the calling thread alone) went past its ceiling, or the scope is
    /// tight, or a part joins: more room if there is some, else a count of every part of scope `id`.
    #[cold]
    #[inline(never)]
    fn rise(&self, id: ScopeId, part: &Part, exclusive: bool) {
        let peak = &self.peak;
        let mut reserved = peak.reserved.lock();
        let mode = peak.mode.load(Ordering::Relaxed);
        if exclusive && mode == CEILINGS {
            let live = part.live_bytes.load(Ordering::Relaxed);
            let others = *reserved - part.ceiling.load(Ordering::Relaxed);
            let top = peak.bytes.load(Ordering::Relaxed);
            if others + live <= top {
                // Room: up to half of what is left, at most `GRANT`.
                let ceiling = live + ((top - others - live) / 2).min(GRANT);
                part.ceiling.store(ceiling, Ordering::Relaxed);
                *reserved = others + ceiling;
                return;
            }
        }
        // Any rise from here on takes the lock: the live bytes read below are every rise that did not. A home part
        // alone wrote its figure without a locked instruction: the other side of its fence is a `membarrier`.
        if mode != TIGHT {
            peak.mode.store(TIGHT, Ordering::SeqCst);
        }
        if mode == SOLO {
            barrier::heavy()
        } else {
            fence(Ordering::SeqCst)
        }
        let mut sum = 0i64;
        self.for_each_part(id, |part| {
            let live = part.live_bytes.load(Ordering::SeqCst);
            part.ceiling.store(live, Ordering::Relaxed);
            sum += live;
        });
        // A home part alone may have raised the peak without the lock just before the mode changed.
        peak.bytes.fetch_max(sum, Ordering::Relaxed);
        *reserved = sum;
        if sum < peak.bytes.load(Ordering::Relaxed) {
            // Room again: each part asks for its share at its next rise. After the ceilings, which a rise reads
            // after it reads the mode.
            peak.mode.store(CEILINGS, Ordering::Release);
        }
    }

    /// A thread part joined scope `id`: the home part no longer keeps the peak alone.
    fn join(&self, id: ScopeId) {
        if self.peak.mode.load(Ordering::SeqCst) == SOLO {
            self.rise(id, &self.shared, false);
        }
    }

    /// Takes the peak lock before the process forks (see `hot::fork`).
    #[cfg(unix)]
    pub(super) fn lock_for_fork(&self) {
        self.peak.reserved.lock_for_fork();
    }

    /// Releases the lock [`lock_for_fork`](Self::lock_for_fork) took.
    ///
    /// # Safety
    ///
    /// The calling thread took the lock with `lock_for_fork` (in a child: the thread that forked it did).
    #[cfg(unix)]
    pub(super) unsafe fn unlock_after_fork(&self) {
        // SAFETY: as this function's contract says.
        unsafe { self.peak.reserved.unlock_after_fork() };
    }
}

/// The thread parts a scope counts: registered once per thread, read at close.
struct Registry {
    count: AtomicUsize,
    parts: [AtomicPtr<Part>; REGISTERED],
}

impl Registry {
    const fn new() -> Self {
        Self { count: AtomicUsize::new(0), parts: [const { AtomicPtr::new(core::ptr::null_mut()) }; REGISTERED] }
    }

    /// Forgets every part, for a scope opening (before its id is published).
    fn reset(&self) {
        self.count.store(0, Ordering::Relaxed);
        for part in &self.parts {
            part.store(core::ptr::null_mut(), Ordering::Relaxed);
        }
    }

    /// Calls `f` with each registered part that counts for `id`.
    fn for_each(&self, id: ScopeId, mut f: impl FnMut(&Part)) {
        let count = self.count.load(Ordering::SeqCst).min(REGISTERED);
        for part in &self.parts[..count] {
            // SAFETY: a registered pointer is to a part of the static pool.
            if let Some(part) = unsafe { part.load(Ordering::SeqCst).as_ref() }
                && id == part.scope.load(Ordering::Acquire)
            {
                f(part);
            }
        }
    }

    /// Registers `part` (taken for `id`, whose slot this registry is); false when every place is taken.
    fn register(&self, part: &Part) -> bool {
        let pointer = core::ptr::from_ref(part).cast_mut();
        loop {
            let index = self.count.fetch_add(1, Ordering::SeqCst);
            let Some(place) = self.parts.get(index) else { return false };
            // A place may have been taken by a late registration for the slot's previous scope: try the next.
            if place.compare_exchange(core::ptr::null_mut(), pointer, Ordering::SeqCst, Ordering::Relaxed).is_ok() {
                return true;
            }
        }
    }
}

/// The pool: each thread that counts in another thread's scope takes `PER_THREAD` parts, for the life of the
/// process (a thread has no destructor to give them back).
static POOL: [[Part; PER_THREAD]; THREADS] = [const { [const { Part::new() }; PER_THREAD] }; THREADS];
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// The calling thread's part for scope `id` (whose figures are `figures`, open while `open` says so): `Some(part)`, or
/// `Some(None)` when the thread must write the shared part, or `None` when the scope closed meanwhile.
/// `owned` is the thread's block of parts (`None`: none yet), which this may assign.
#[cold]
#[inline(never)]
pub(super) fn take(
    owned: &core::cell::Cell<Option<PartsIndex>>,
    id: ScopeId,
    figures: &Figures,
    open: impl Fn() -> bool,
) -> Option<Option<&'static Part>> {
    let index = match owned.get() {
        Some(index) => index,
        None => {
            let index = NEXT.fetch_add(1, Ordering::Relaxed);
            let Some(index) = PartsIndex::new(index).filter(|_| index < THREADS) else {
                NEXT.store(THREADS, Ordering::Relaxed);
                return Some(None);
            };
            owned.set(Some(index));
            index
        }
    };
    let block = &POOL[index.get()];
    if let Some(part) = block.iter().find(|part| id == part.scope.load(Ordering::Relaxed)) {
        return Some(Some(part));
    }
    let Some(part) = block.iter().find(|part| part.scope.load(Ordering::Acquire).is_none()) else {
        return Some(None);
    };
    part.reset();
    part.scope.store(Some(id), Ordering::Release);
    if !figures.registry.register(part) {
        part.scope.store(None, Ordering::Release);
        figures.join(id);
        return Some(None);
    }
    figures.join(id);
    // Registered before the scope closed, or the closer never reads it: then it is given back here.
    if !open() {
        part.scope.store(None, Ordering::Release);
        return None;
    }
    Some(Some(part))
}

/// In a child process, just after the fork: the parts other threads of the parent were writing are whole again
/// (their writers are not in the child, and the forking thread itself was writing none: it was in `fork`), so no
/// close in the child waits for them. The scopes other threads opened stay open, with no home thread: the child's
/// updates of them take its own parts.
#[cfg(unix)]
pub(crate) fn forget_other_threads() {
    for part in POOL.iter().take(NEXT.load(Ordering::Relaxed).min(THREADS)).flatten() {
        part.seq.end_abandoned_write();
    }
}

/// Starts a write of a fresh part for `id`, registered with `registry`, that no thread finishes until
/// [`end_stuck_write`]: a test's stand-in for another thread caught in an update.
#[cfg(all(test, unix))]
pub(super) fn begin_stuck_write(id: ScopeId, figures: &Figures) -> &'static Part {
    let owned = core::cell::Cell::new(None);
    let part = take(&owned, id, figures, || true).flatten().expect("a free part");
    part.seq.begin_write();
    part
}

/// Ends the write [`begin_stuck_write`] began.
#[cfg(all(test, unix))]
pub(super) fn end_stuck_write(part: &Part) {
    part.seq.end_abandoned_write();
}
