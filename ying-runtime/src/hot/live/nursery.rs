//! Nurseries: the entries of the blocks a thread allocates in a scope it opened (or in the process-attributed
//! scope), kept without a lock.
//!
//! In a leak test nearly every allocation is made on the test's thread and freed there soon after, and every one
//! needs an entry (its owner and its stack). A live-table shard costs a lock and a hash-map update at both ends.
//! So while a thread has a scope open (it is the scope's home thread, see `scope`), the entries of the blocks it
//! allocates for that scope go into its nursery, and so do those of the blocks any thread allocates for the open
//! process-attributed scope (a test process's helper threads: tokio's workers, a thread pool); such a nursery keeps
//! its entries after the scope closes, until its thread allocates for another scope. A nursery is 262,144 slots in
//! buckets of 4, a bucket one cache line, a slot the block's address and stack packed in one word beside its size
//! (4 MiB of address space, of which only the pages of buckets in use are ever touched), taken from a pool of
//! [`POOL`] for as long as the thread has a scope open (a helper thread of a process-attributed scope keeps it). A
//! nursery serves one scope at a time (the thread's innermost); a full bucket, a block that does not pack, or an
//! empty pool sends the entry to the live table as before. A test whose code keeps many thousands of blocks live at
//! once (a compiler's) fills a smaller nursery's buckets: with 8192 slots, the live table's functions took 19% of
//! regex's largest test (3% with 65,536), which took 15% more CPU; with 65,536, the live table still took 432,000 of
//! the 790,000 entries of its test with the most blocks live at once (BENCHMARKS-LOG.md, the ninth and tenth rounds of
//! `--measure all`).
//!
//! A bucket holds the blocks of 128 bytes of address space, and the buckets follow the addresses within each 64 MiB
//! (each 64 MiB starting at a bucket of its own, so that the heaps of the C library's arenas, 64 MiB-aligned, do not
//! all start at the same bucket): the buckets cover 8 MiB of a heap before they wrap, and a program's allocator hands
//! out neighbouring blocks one after the other and frees the latest first, so that consecutive inserts and removals
//! touch the same few lines of the nursery, where a hash of the address sent each one to a line of its own (a cache
//! miss at half of the allocations of regex's tests). With a bucket start every 2 MiB instead, the starts of a 10 MiB
//! heap overlapped, and a bucket full sent 186,000 entries of regex's largest test to the live table (5 now).
//!
//! Only the nursery's thread inserts. An entry leaves with the free (or realloc) of its block, and only the thread
//! that frees a block does anything with its address:
//!
//! - insert (the nursery's thread): a slot whose word is 0 gets the size, then the word (release);
//! - removal by the nursery's thread: the word is found, the size read, the word cleared;
//! - removal by another thread: the word is found (acquire), the size read, and the word cleared by
//!   compare-exchange, which fails only when the nursery's thread moved the entry to the live table meanwhile.
//!
//! Frees find no filter bit for a nursery's blocks, so every free reads [`frees_gated`] first (one word: the pool's
//! bitmap, which changes when a thread opens its first scope or closes its last, and whether a process-attributed
//! scope is open, which the free's fast path would otherwise read next) and, while a nursery is held, looks in the
//! held nurseries before the live table.
//!
//! A nested scope (see `scope`) is no thread's home scope and keeps no entries here: while it is open, the nursery
//! keeps those of the enclosing scope its thread opened, and closing it leaves them in place ([`on_scope_close`]).
//! When the home thread closes a scope of its own (or starts allocating for another), it moves its entries to the
//! live table through the function its caller passes (the nursery knows nothing of the table): each is inserted under its shard's lock,
//! and its word cleared ([`MovingSlot::clear`], release) before the lock is released. A thread that finds the word
//! cleared then finds the entry, and the filter bit, in the live table; a thread that cleared the word first has
//! freed the block, and the copy is taken back out. A nursery goes back to the pool, empty, when its thread closes
//! its last scope.
//!
//! Readers of every entry ([`for_each`]) run on any thread: they read a size between two reads of its slot's word
//! and keep it only if the word did not change (a sequence lock on the word). Everything is atomic, so a concurrent
//! update is never a data race; an entry that moves to the live table while a reader runs may be read twice.

use super::entry::Entry;
use crate::base::handles::NurseryHandle;
use crate::base::ids::{AtomicScopeId, ScopeId, StackId};
use crate::base::raw::RawSystem;
use crate::base::thread::{THREAD, ThreadState};
use crate::hot::unwind::WalkTree;
use allocator_api2::alloc::Allocator;
use core::alloc::Layout;
use core::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering, fence};

/// Buckets per nursery (a power of two).
const BUCKET_BITS: u32 = 16;
const BUCKETS: usize = 1 << BUCKET_BITS;
/// Slots per bucket: a bucket is one 64-byte line.
const WAYS: usize = 4;
/// Nurseries in the pool: one bit each in [`HELD`].
const POOL: usize = 63;
/// The bit of [`HELD`] set while a process-attributed scope is open.
const PROCESS_SCOPE: u64 = 1 << POOL;
/// Bits of a slot's word that hold its block's stack index plus one (0: no stack); the rest hold the block's
/// address divided by 8.
const STACK_BITS: u32 = 19;

/// One block: its address and stack in one word (0 for a free slot), and its size.
struct Slot {
    word: AtomicU64,
    size: AtomicUsize,
}

/// The slots of one bucket, in one cache line.
#[repr(align(64))]
struct Bucket([Slot; WAYS]);

/// The word of a block at `ptr` with `stack`; `None` when they do not fit (an address not a multiple of 8 or not
/// below 2^48, a stack index from 2^19 - 1 on): the live table takes such a block.
#[inline]
fn word(ptr: usize, stack: Option<StackId>) -> Option<u64> {
    let stack = StackId::pack(stack);
    let fits = stack < 1 << STACK_BITS && ptr.is_multiple_of(8) && (ptr as u64) < 1 << (64 - STACK_BITS + 3);
    fits.then_some((ptr as u64 >> 3) << STACK_BITS | u64::from(stack))
}

/// One thread's table of the entries of blocks it allocated in one of its scopes. All zeros is an empty nursery.
///
/// In this order (`repr(C)`): the words every insert reads first, on a page of their own, then the buckets. Laid
/// out by the compiler, `scope` came after the 4 MiB of buckets, and a leak test's allocation loop (W1) took 5%
/// longer.
#[repr(C)]
struct Nursery {
    /// The scope every entry belongs to: a nursery is emptied into the live table when its thread allocates for
    /// another scope, and when a scope of its thread closes (written by its thread only).
    scope: AtomicScopeId,
    /// One bit per bucket, set when an entry went in since the nursery was last emptied (written by its thread
    /// only; removals leave it set): emptying the nursery and reading every entry read only those buckets, so that
    /// a scope that allocated little (`measure` in a loop closes a scope per turn) costs little to close.
    occupied: [AtomicU64; BUCKETS / 64],
    buckets: [Bucket; BUCKETS],
    /// The holding thread's tree of walks (see `unwind`), used by that thread only.
    walks: WalkTree,
}

impl Nursery {
    /// The entry of the block in `slot`, whose word was `word` and size `size`.
    fn entry(&self, word: u64, size: usize) -> Entry {
        Entry::owned_block(size, self.scope.load(Ordering::Relaxed), stack_of(word))
    }
}

/// The stack a slot's `word` names.
#[inline]
fn stack_of(word: u64) -> Option<StackId> {
    StackId::unpack((word & ((1 << STACK_BITS) - 1)) as u32)
}

/// The pool: nursery `i` exists once a thread first held bit `i` of [`HELD`], and is never given back to the
/// system, so a reader may use it at any time.
static NURSERIES: [AtomicPtr<Nursery>; POOL] = [const { AtomicPtr::new(core::ptr::null_mut()) }; POOL];
/// Bit `i` below [`POOL`]: nursery `i` is held by a thread (which may hold entries in it). [`PROCESS_SCOPE`]: a
/// process-attributed scope is open.
static HELD: AtomicU64 = AtomicU64::new(0);

/// The bucket of `ptr`: its 128-byte line, counted from the bucket its 64 MiB start at, a hash of its address above
/// them (see the module docs).
#[inline]
fn bucket(ptr: usize) -> usize {
    let line = (ptr >> 7) as u64;
    let region = ((ptr >> 26) as u64).wrapping_mul(0xd6e8_feb8_6659_fd93) >> (64 - BUCKET_BITS);
    (line.wrapping_add(region) & (BUCKETS as u64 - 1)) as usize
}

/// The address of the block a slot's `word` names.
#[inline]
fn address(word: u64) -> usize {
    ((word >> STACK_BITS) << 3) as usize
}

/// The held nurseries' bits. Acquire: a thread that sees a nursery given back also sees the live-table entries
/// and filter bits its entries moved to.
#[inline(always)]
fn held() -> u64 {
    HELD.load(Ordering::Acquire) & !PROCESS_SCOPE
}

/// Whether some thread holds a nursery: a removal must then look there too.
#[inline(always)]
pub(crate) fn any_held() -> bool {
    held() != 0
}

/// Whether a free must take the long way: a nursery is held, or a process-attributed scope is open. Read before
/// the live table's filter (see [`held`]).
#[inline(always)]
pub(crate) fn frees_gated() -> bool {
    HELD.load(Ordering::Acquire) != 0
}

/// Marks a process-attributed scope open or closed, for [`frees_gated`].
pub(crate) fn set_process_scope_open(open: bool) {
    if open {
        HELD.fetch_or(PROCESS_SCOPE, Ordering::SeqCst);
    } else {
        HELD.fetch_and(!PROCESS_SCOPE, Ordering::SeqCst);
    }
}

/// The held nurseries that have been created.
fn held_nurseries() -> impl Iterator<Item = &'static Nursery> {
    let mut held = held();
    core::iter::from_fn(move || {
        while held != 0 {
            let index = held.trailing_zeros() as usize;
            held &= held - 1;
            if let Some(nursery) = get(index) {
                return Some(nursery);
            }
        }
        None
    })
}

/// Nursery `index`, if it has been created.
fn get(index: usize) -> Option<&'static Nursery> {
    let nursery = NURSERIES[index].load(Ordering::Acquire);
    // SAFETY: a non-null pointer in `NURSERIES` is a zero-initialised `Nursery` mapping that is never freed, and
    // is only ever used through shared references (all its fields are atomics).
    (!nursery.is_null()).then(|| unsafe { &*nursery })
}

/// Records the entry of `ptr`, a block of `size` bytes the calling thread allocated in `scope`, its home scope or the
/// process-attributed scope (which records `stack` for it, if any, and nothing else: no lifetime, no process
/// sample), in the thread's nursery.
/// Returns false when no nursery is free, the block's bucket is full or the block does not fit a slot: the live
/// table must take the entry. A nursery that held the entries of another scope is emptied through `moved` first
/// (see [`on_scope_close`]).
#[inline]
pub(crate) fn insert(
    thread: &ThreadState,
    ptr: usize,
    size: usize,
    scope: ScopeId,
    stack: Option<StackId>,
    moved: MoveOut,
) -> bool {
    let Some(word) = word(ptr, stack) else { return false };
    let Some(nursery) = own(thread) else { return false };
    if scope != nursery.scope.load(Ordering::Relaxed) {
        // The thread allocates for another of its scopes now (one it opened inside the last): one scope at a time.
        nursery.empty_into(moved);
        nursery.scope.store(Some(scope), Ordering::Relaxed);
    }
    let bucket = bucket(ptr);
    let slots = &nursery.buckets[bucket].0;
    let Some(slot) = slots.iter().find(|slot| slot.word.load(Ordering::Acquire) == 0) else { return false };
    // The slot's last reader, if another thread, cleared the word after reading the size (release): this write
    // comes after its read. The fence orders it after the word was last cleared, for `for_each`.
    fence(Ordering::Release);
    slot.size.store(size, Ordering::Relaxed);
    slot.word.store(word, Ordering::Release);
    let (occupied, bit) = nursery.occupied_bit(bucket);
    let bits = occupied.load(Ordering::Relaxed);
    if bits & bit == 0 {
        occupied.store(bits | bit, Ordering::Release);
    }
    true
}

/// The tree of walks of the nursery `thread` holds (see `unwind`), if it holds one.
#[inline]
pub(crate) fn walk_tree(thread: &ThreadState) -> Option<&'static WalkTree> {
    of_thread(thread.nursery()).map(|nursery| &nursery.walks)
}

/// The calling thread's nursery, taken from the pool if it has none yet.
#[inline]
fn own(thread: &ThreadState) -> Option<&'static Nursery> {
    match of_thread(thread.nursery()) {
        None => claim(thread),
        own => own,
    }
}

/// The calling thread's nursery, if it holds one.
#[inline]
fn of_calling_thread() -> Option<&'static Nursery> {
    of_thread(THREAD.try_with(ThreadState::nursery).unwrap_or(None))
}

/// The nursery a thread's `nursery` handle names.
#[inline]
fn of_thread(nursery: Option<NurseryHandle>) -> Option<&'static Nursery> {
    // SAFETY: every nursery handle is made by `claim`, from a nursery of the pool, never freed and only used through
    // shared references (all its fields are atomics).
    nursery.map(|nursery| unsafe { nursery.get::<Nursery>() })
}

/// Takes a nursery from the pool for the calling thread (creating it on first use); `None` when all are held.
#[cold]
fn claim(thread: &ThreadState) -> Option<&'static Nursery> {
    let mut held = HELD.load(Ordering::Relaxed);
    let index = loop {
        let index = (!(held | PROCESS_SCOPE)).trailing_zeros() as usize;
        if index >= POOL {
            return None;
        }
        match HELD.compare_exchange_weak(held, held | 1 << index, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => break index,
            Err(now) => held = now,
        }
    };
    if NURSERIES[index].load(Ordering::Acquire).is_null() {
        // Only the holder of bit `index` creates nursery `index`; readers skip it until then (it holds nothing).
        match RawSystem.allocate_zeroed(Layout::new::<Nursery>()) {
            Ok(memory) => NURSERIES[index].store(memory.cast::<Nursery>().as_ptr(), Ordering::Release),
            Err(_) => {
                HELD.fetch_and(!(1 << index), Ordering::Release);
                return None;
            }
        }
    }
    let nursery = get(index)?;
    thread.set_nursery(Some(NurseryHandle::new(nursery)));
    Some(nursery)
}

/// Removes and returns the entry of `ptr` from the calling thread's nursery; `None` when it holds none (another
/// nursery or the live table may: [`take_other`]). Called by the thread that frees or reallocates the block, the
/// only one that may remove its entry. An entry found here is always [`Entry::owned_block`]'s.
#[inline]
pub(crate) fn take_own(ptr: usize) -> Option<OwnBlock> {
    of_calling_thread()?.take_own(ptr)
}

/// A block removed from its thread's own nursery: what makes its entry, [`Entry::owned_block`]'s, kept apart so
/// that a free settles it with that entry's constants (see [`take_own`]).
#[derive(Clone, Copy)]
pub(crate) struct OwnBlock {
    /// The scope that allocated it.
    pub(crate) scope: Option<ScopeId>,
    /// Its size, all of it owned by `scope`.
    pub(crate) size: usize,
    stack: Option<StackId>,
}

impl OwnBlock {
    /// The block's entry.
    #[inline]
    pub(crate) fn entry(self) -> Entry {
        Entry::owned_block(self.size, self.scope, self.stack)
    }
}

/// Removes and returns the entry of `ptr` from the nurseries of other threads than the caller's, after
/// [`take_own`] found none.
#[cold]
pub(crate) fn take_other(ptr: usize) -> Option<Entry> {
    let own = of_calling_thread();
    held_nurseries()
        .filter(|nursery| !own.is_some_and(|own| core::ptr::eq(own, *nursery)))
        .find_map(|nursery| nursery.take_other(ptr))
}

impl Nursery {
    /// The slot of `ptr` in its bucket, if the nursery holds it, and the slot's word.
    #[inline]
    fn find(&self, ptr: usize) -> Option<(&Slot, u64)> {
        self.buckets[bucket(ptr)].0.iter().find_map(|slot| {
            let word = slot.word.load(Ordering::Acquire);
            (word != 0 && address(word) == ptr).then_some((slot, word))
        })
    }

    /// Removal by the nursery's thread: no other thread inserts, or removes this block.
    #[inline]
    fn take_own(&self, ptr: usize) -> Option<OwnBlock> {
        let (slot, word) = self.find(ptr)?;
        let size = slot.size.load(Ordering::Relaxed);
        slot.word.store(0, Ordering::Release);
        Some(OwnBlock { scope: self.scope.load(Ordering::Relaxed), size, stack: stack_of(word) })
    }

    /// Removal by another thread: the word is cleared only if the nursery's thread has not moved the entry meanwhile.
    fn take_other(&self, ptr: usize) -> Option<Entry> {
        let (slot, word) = self.find(ptr)?;
        let entry = self.entry(word, slot.size.load(Ordering::Relaxed));
        // Release: the nursery's thread writes this slot again only after seeing the word cleared. Acquire on failure:
        // the entry moved, and the live table's filter bit is visible to the caller's next read.
        slot.word.compare_exchange(word, 0, Ordering::AcqRel, Ordering::Acquire).is_ok().then_some(entry)
    }

    /// Hands every entry to `moved` (on its thread), from the buckets entries went into since it was last emptied.
    fn empty_into(&self, moved: MoveOut) {
        self.each_occupied_bucket(|bucket| self.empty_bucket(bucket, moved));
        for occupied in self.occupied.iter().filter(|occupied| occupied.load(Ordering::Relaxed) != 0) {
            occupied.store(0, Ordering::Relaxed);
        }
    }

    /// The word of [`Nursery::occupied`] that holds the bit of bucket `bucket`, and the bit.
    #[inline]
    fn occupied_bit(&self, bucket: usize) -> (&AtomicU64, u64) {
        (&self.occupied[bucket / 64], 1 << (bucket % 64))
    }

    /// Calls `f` with each bucket an entry went into since the nursery was last emptied.
    fn each_occupied_bucket(&self, mut f: impl FnMut(&Bucket)) {
        for (index, occupied) in self.occupied.iter().enumerate() {
            let mut bits = occupied.load(Ordering::Acquire);
            while bits != 0 {
                f(&self.buckets[index * 64 + bits.trailing_zeros() as usize]);
                bits &= bits - 1;
            }
        }
    }

    /// Hands the entries of one bucket to `moved`.
    fn empty_bucket(&self, bucket: &Bucket, moved: MoveOut) {
        for slot in &bucket.0 {
            let word = slot.word.load(Ordering::Acquire);
            if word != 0 {
                let entry = self.entry(word, slot.size.load(Ordering::Relaxed));
                moved(address(word), entry, MovingSlot { slot, word });
            }
        }
    }
}

/// Where a nursery's entries go when it is emptied: called with each block's address, its entry, and its slot,
/// to [clear](MovingSlot::clear) once the entry is there.
pub(crate) type MoveOut = fn(usize, Entry, MovingSlot<'_>);

/// The slot of an entry moving out of its nursery, as the nursery hands it over with the entry.
pub(crate) struct MovingSlot<'a> {
    slot: &'a Slot,
    word: u64,
}

impl MovingSlot<'_> {
    /// Clears the slot once the entry is where it moves to (with the filter bit that finds it there); false when
    /// the thread that freed the block cleared it first: the copy must be taken back out.
    pub(crate) fn clear(self) -> bool {
        self.slot.word.compare_exchange(self.word, 0, Ordering::AcqRel, Ordering::Relaxed).is_ok()
    }
}

/// At the close of one of the calling thread's scopes (on that thread): when the nursery keeps the entries of the
/// thread's scope from now on (`home`: a nested scope closed, which kept none here), they stay; otherwise they are
/// handed to `moved`, which must keep them recognisable after the scope (in the live table) and
/// [clear](MovingSlot::clear) their slots, and with no `home` (no scope of the thread is open any more) the nursery
/// goes back to the pool.
pub(crate) fn on_scope_close(home: Option<ScopeId>, moved: MoveOut) {
    let Some(nursery) = of_calling_thread() else { return };
    if home.is_some() && home == nursery.scope.load(Ordering::Relaxed) {
        return;
    }
    nursery.empty_into(moved);
    if home.is_none() {
        let _ = THREAD.try_with(|thread| thread.set_nursery(None));
        let index = (0..POOL).find(|&index| get(index).is_some_and(|held| core::ptr::eq(held, nursery)));
        if let Some(index) = index {
            // Release: a thread that sees the bit cleared also sees the entries in the live table.
            HELD.fetch_and(!(1 << index), Ordering::Release);
        }
    }
}

/// Calls `f` with the address and entry of every block the held nurseries keep (see the module's notes on
/// concurrent readers).
pub(crate) fn for_each(mut f: impl FnMut(usize, Entry)) {
    for nursery in held_nurseries() {
        nursery.each_occupied_bucket(|bucket| {
            for slot in &bucket.0 {
                let word = slot.word.load(Ordering::Acquire);
                if word == 0 {
                    continue;
                }
                let size = slot.size.load(Ordering::Relaxed);
                fence(Ordering::Acquire);
                if slot.word.load(Ordering::Relaxed) == word {
                    f(address(word), nursery.entry(word, size));
                }
            }
        });
    }
}

const _: () = assert!(POOL < u64::BITS as usize, "a nursery is one bit of `HELD`, below `PROCESS_SCOPE`");
const _: () = assert!(BUCKETS.is_multiple_of(64), "`occupied` has one bit per bucket");

#[cfg(test)]
mod tests {
    use super::{BUCKETS, WAYS, bucket};

    #[test]
    fn neighbouring_blocks_share_a_bucket_and_the_next_line_takes_the_next_bucket() {
        // Blocks as an allocator hands them out, one after the other: the smallest glibc chunk is 32 bytes.
        let base = 0x5555_5560_0000_usize;
        for line in 0..4096 {
            let first = base + line * 128;
            let blocks: Vec<usize> = (0..WAYS).map(|block| bucket(first + block * 32)).collect();
            assert!(blocks.iter().all(|&b| b == blocks[0]), "line {line}: {blocks:?}");
            assert_eq!(bucket(first + 128), (blocks[0] + 1) % BUCKETS, "line {line}");
        }
        // A heap of 8 MiB takes each bucket once.
        let mut taken = vec![false; BUCKETS];
        for line in 0..BUCKETS {
            let bucket = bucket(base + line * 128);
            assert!(!taken[bucket], "line {line}");
            taken[bucket] = true;
        }
        // Each 64 MiB (an arena's heap) starts at a bucket of its own: the same offset in two of them seldom shares
        // a bucket.
        let starts: Vec<usize> = (0..64).map(|region| bucket((region + 1) << 26)).collect();
        let mut distinct = starts.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(distinct.len() >= 60, "{starts:?}");
    }
}
