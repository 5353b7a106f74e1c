//! Memory for the profiler's own tables, taken straight from the operating system.
//!
//! The live table and the stack table grow while the global allocator is inside `alloc`. Their memory therefore
//! never goes through the global allocator (which is the profiler itself): on Unix it is mapped with `mmap`, on
//! other systems it comes from [`std::alloc::System`], through this [`Allocator`]. Growing a table can neither
//! recurse into profiling nor appear in any figure, and (mapped apart from the heap) the profiler's long-lived
//! tables never sit between the program's blocks, where they would keep the program's allocator from growing a
//! block in place.
//!
//! On Unix a block of at most [`SMALL_MAX`] bytes comes from a pool of blocks of its power-of-two size, carved from
//! mappings of [`POOL_CHUNK`] bytes and kept for reuse once freed: the live table's 64 shards each start a map of a
//! few entries and grow it by doubling, as the scan's vectors do, where a mapping of its own for each of those cost a
//! short test's process a system call, a page touched and another call to unmap it, a hundred times over.
//! A pool's lock is the last lock of the allocation path: taken inside the others, it holds none
//! ([`lock_for_fork`]).

use allocator_api2::alloc::{AllocError, Allocator};
use core::alloc::Layout;
use core::ptr::NonNull;

#[cfg(unix)]
use crate::base::sync::SpinLock;

/// The operating system's memory, called directly, as an [`Allocator`] for hashbrown and allocator-api2
/// collections.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RawSystem;

/// Alignment every mapping has: the smallest page size of the supported systems.
#[cfg(unix)]
const PAGE: usize = 4096;

#[cfg(unix)]
fn map(layout: Layout) -> *mut u8 {
    if layout.align() > PAGE {
        return core::ptr::null_mut();
    }
    // SAFETY: an anonymous private mapping of a non-zero length at an address of the system's choosing: no
    // existing memory is touched.
    let ptr = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            layout.size(),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED { core::ptr::null_mut() } else { ptr.cast() }
}

/// A fresh mapping is zero-filled by the system, and each page only when first touched: zeroing it again would touch
/// every page of it at once.
#[cfg(unix)]
fn map_zeroed(layout: Layout) -> *mut u8 {
    map(layout)
}

#[cfg(unix)]
fn unmap(ptr: *mut u8, layout: Layout) {
    // SAFETY: `ptr` and `layout.size()` are those of a mapping made by `map`, which nothing uses any more.
    unsafe { libc::munmap(ptr.cast(), layout.size()) };
}

/// The largest block a pool serves; a larger one is a mapping of its own. With pools of blocks up to 2 KiB, the
/// vectors that grow through 2-8 KiB cost a tokio-util test's process four to six more mappings and unmappings.
#[cfg(unix)]
const SMALL_MAX: usize = 8192;
/// The smallest pool's block size; each pool's blocks are twice the size of the one before.
#[cfg(unix)]
const SMALL_MIN: usize = 32;
/// How many pools there are: blocks of 32, 64, ..., [`SMALL_MAX`] bytes.
#[cfg(unix)]
const POOL_COUNT: usize = (SMALL_MAX / SMALL_MIN).trailing_zeros() as usize + 1;
/// How much a pool maps at a time: a multiple of every block size, whose pages are touched only as blocks are used.
#[cfg(unix)]
const POOL_CHUNK: usize = 64 * 1024;

/// One block size's free blocks, and what is left of the last chunk mapped for it.
#[cfg(unix)]
struct Pool {
    /// The address of the first free block (0: none); a free block's first word holds the next one's.
    free: usize,
    /// The rest of the last chunk, never handed out and as the system zeroed it: from `next` to `end`.
    next: usize,
    end: usize,
}

/// A pool of each block size.
#[cfg(unix)]
struct Pools([SpinLock<Pool>; POOL_COUNT]);

/// The pools [`RawSystem`] takes its small blocks from.
#[cfg(unix)]
static POOLS: Pools = Pools::new();

/// The pool of a block of `layout` and its block size, when a pool serves it. A block is aligned to its size: a
/// chunk is page-aligned and cut into blocks of one size, which divides the page.
#[cfg(unix)]
fn pool_of(layout: Layout) -> Option<(usize, usize)> {
    let size = layout.size().max(layout.align()).max(SMALL_MIN).next_power_of_two();
    (size <= SMALL_MAX).then(|| ((size / SMALL_MIN).trailing_zeros() as usize, size))
}

#[cfg(unix)]
impl Pools {
    const fn new() -> Self {
        Self([const { SpinLock::new(Pool { free: 0, next: 0, end: 0 }) }; POOL_COUNT])
    }

    /// A block of `size` bytes from pool `index` (zeroed when `zeroed`), or null when no chunk could be mapped.
    fn take(&self, index: usize, size: usize, zeroed: bool) -> *mut u8 {
        let mut pool = self.0[index].lock();
        if pool.free != 0 {
            let block = pool.free as *mut u8;
            // SAFETY: a free block of this pool, `size` bytes of a chunk that is never unmapped; its first word is
            // the next free block's address, written by `give`.
            pool.free = unsafe { block.cast::<usize>().read() };
            drop(pool);
            if zeroed {
                // SAFETY: the block is this caller's now, `size` bytes.
                unsafe { block.write_bytes(0, size) };
            }
            return block;
        }
        if pool.next == pool.end {
            // Every block size divides the chunk: a used-up chunk ends exactly at `end`.
            let chunk = map(Layout::from_size_align(POOL_CHUNK, PAGE).expect("a page-aligned chunk"));
            if chunk.is_null() {
                return chunk;
            }
            pool.next = chunk as usize;
            pool.end = chunk as usize + POOL_CHUNK;
        }
        let block = pool.next;
        pool.next += size;
        block as *mut u8
    }

    /// Gives `block`, taken from pool `index`, back to it.
    ///
    /// # Safety
    ///
    /// `block` came from [`take`](Self::take) of these pools with this `index`, and nothing uses it any more.
    unsafe fn give(&self, index: usize, block: *mut u8) {
        let mut pool = self.0[index].lock();
        // SAFETY: the block is at least `SMALL_MIN` bytes, aligned to its size, and no longer used: its first word
        // keeps the list of free blocks.
        unsafe { block.cast::<usize>().write(pool.free) };
        pool.free = block as usize;
    }
}

/// Takes every pool's lock before the process forks (see `hot::fork`): last, since a pool's lock is taken inside
/// the others.
#[cfg(unix)]
pub(crate) fn lock_for_fork() {
    POOLS.0.iter().for_each(SpinLock::lock_for_fork);
}

/// Releases the locks [`lock_for_fork`] took, in the parent and in the child.
///
/// # Safety
///
/// The calling thread took the locks with [`lock_for_fork`] (in a child: the thread that forked it did).
#[cfg(unix)]
pub(crate) unsafe fn unlock_after_fork() {
    for pool in &POOLS.0 {
        // SAFETY: the caller took this lock with `lock_for_fork`, as this function's contract says.
        unsafe { pool.unlock_after_fork() };
    }
}

#[cfg(not(unix))]
fn map(layout: Layout) -> *mut u8 {
    // SAFETY: `layout` has a non-zero size (checked by the caller).
    unsafe { core::alloc::GlobalAlloc::alloc(&std::alloc::System, layout) }
}

#[cfg(not(unix))]
fn map_zeroed(layout: Layout) -> *mut u8 {
    // SAFETY: `layout` has a non-zero size (checked by the caller).
    unsafe { core::alloc::GlobalAlloc::alloc_zeroed(&std::alloc::System, layout) }
}

#[cfg(not(unix))]
fn unmap(ptr: *mut u8, layout: Layout) {
    // SAFETY: `ptr` came from `map` with this layout, which took it from `System`.
    unsafe { core::alloc::GlobalAlloc::dealloc(&std::alloc::System, ptr, layout) }
}

// SAFETY: every block is a pool's block of its layout's size class (a power of two at least the size and the
// alignment, given back to that pool by `deallocate`, which finds the pool from the same layout), or a fresh mapping
// (or a `System` block) of at least the requested size and alignment, returned to the system with the same layout by
// `deallocate`; each is zeroed when asked for (a fresh anonymous mapping and a pool's uncut chunk are; a reused block
// is zeroed by `take`). The default `grow` and `shrink` copy through `allocate` and `deallocate`. That is what
// `Allocator` requires of each method here.
unsafe impl Allocator for RawSystem {
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if layout.size() == 0 {
            // A dangling, well-aligned pointer is a valid zero-sized allocation.
            let dangling = NonNull::new(layout.align() as *mut u8).ok_or(AllocError)?;
            return Ok(NonNull::slice_from_raw_parts(dangling, 0));
        }
        #[cfg(unix)]
        if let Some((index, size)) = pool_of(layout) {
            return NonNull::new(POOLS.take(index, size, false))
                .map(|ptr| NonNull::slice_from_raw_parts(ptr, size))
                .ok_or(AllocError);
        }
        NonNull::new(map(layout)).map(|ptr| NonNull::slice_from_raw_parts(ptr, layout.size())).ok_or(AllocError)
    }

    fn allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if layout.size() == 0 {
            return self.allocate(layout);
        }
        #[cfg(unix)]
        if let Some((index, size)) = pool_of(layout) {
            return NonNull::new(POOLS.take(index, size, true))
                .map(|ptr| NonNull::slice_from_raw_parts(ptr, size))
                .ok_or(AllocError);
        }
        NonNull::new(map_zeroed(layout)).map(|ptr| NonNull::slice_from_raw_parts(ptr, layout.size())).ok_or(AllocError)
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        if layout.size() == 0 {
            return;
        }
        #[cfg(unix)]
        if let Some((index, _)) = pool_of(layout) {
            // SAFETY: `ptr` was allocated with `layout` (this method's contract), so by `take` from the same pool.
            unsafe { POOLS.give(index, ptr.as_ptr()) };
            return;
        }
        unmap(ptr.as_ptr(), layout);
    }
}

/// A vector whose buffer never goes through the global allocator.
pub(crate) type RawVec<T> = allocator_api2::vec::Vec<T, RawSystem>;

/// `len` zero words whose memory the system zeroed ([`Allocator::allocate_zeroed`]): a fresh mapping's pages are
/// touched only as they are written, where `resize(len, 0)` writes every one of them at once. The scan's read
/// buffer is 64 KiB of which a block's read fills a few hundred bytes: zeroed by hand, 16 page faults each time.
pub(crate) fn zeroed_words(len: usize) -> RawVec<usize> {
    let Ok(layout) = Layout::array::<usize>(len) else { panic!("ying: {len} words do not fit in memory") };
    if len == 0 {
        return RawVec::new_in(RawSystem);
    }
    let Ok(block) = RawSystem.allocate_zeroed(layout) else { allocator_api2::alloc::handle_alloc_error(layout) };
    // SAFETY: `block` holds at least `len` words, zeroed (a zero `usize` is valid), allocated by `RawSystem` with
    // the layout of `len` words: the layout the vector frees it with, its capacity being `len`.
    unsafe { RawVec::from_raw_parts_in(block.cast::<usize>().as_ptr(), len, len, RawSystem) }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::RawSystem;
    use allocator_api2::alloc::Allocator;
    use core::alloc::Layout;

    /// A live table's shard starts its map at 148 bytes: such a block comes from the pool of 256-byte blocks, which
    /// cuts them from one chunk side by side (not a mapping each), aligned to their size, and hands a freed one out
    /// again, zeroed when asked.
    #[test]
    fn small_blocks_come_side_by_side_from_a_pool_and_are_reused_once_freed() {
        let layout = Layout::from_size_align(148, 16).unwrap();
        let (index, size) = super::pool_of(layout).unwrap();
        assert_eq!(size, 256);
        let block = RawSystem.allocate(layout).unwrap();
        assert_eq!(block.len(), 256, "the block's whole size is the caller's");
        // SAFETY: the block just allocated with `layout`, freed once.
        unsafe { RawSystem.deallocate(block.cast(), layout) };

        // Pools of this test's own, which no other test takes from.
        let pools = super::Pools::new();
        let blocks: Vec<*mut u8> = (0..64).map(|_| pools.take(index, size, false)).collect();
        let addresses: Vec<usize> = blocks.iter().map(|&block| block as usize).collect();
        assert!(addresses.iter().all(|address| address % 256 == 0), "aligned to the block size: {addresses:x?}");
        assert!(addresses.windows(2).all(|pair| pair[1] == pair[0] + 256), "side by side: {addresses:x?}");
        let last = blocks[63];
        // SAFETY: the block's 256 bytes, this test's.
        unsafe { last.write_bytes(0xa5, 256) };
        // SAFETY: the block taken from `pools` with `index`, given back once.
        unsafe { pools.give(index, last) };
        let again = pools.take(index, size, true);
        assert_eq!(again, last, "the freed block is reused");
        // SAFETY: the block's bytes, all readable.
        let bytes = unsafe { core::slice::from_raw_parts(again, 256) };
        assert!(bytes.iter().all(|&byte| byte == 0), "a reused block asked zeroed is zero");
    }

    #[test]
    fn zeroed_memory_is_zero_and_no_page_of_it_is_touched_before_it_is_used() {
        const PAGES: usize = 64;
        let layout = Layout::from_size_align(PAGES * 4096, 4096).unwrap();
        let block = RawSystem.allocate_zeroed(layout).unwrap().cast::<u8>();
        let mut resident = [0u8; PAGES];
        // SAFETY: the pages of the mapping just made, one byte of `resident` for each.
        assert_eq!(unsafe { libc::mincore(block.as_ptr().cast(), layout.size(), resident.as_mut_ptr()) }, 0);
        let touched = resident.iter().filter(|&&page| page & 1 == 1).count();
        assert_eq!(touched, 0, "{touched} of {PAGES} pages touched");
        // SAFETY: the block's bytes, all readable.
        let bytes = unsafe { core::slice::from_raw_parts(block.as_ptr(), layout.size()) };
        assert!(bytes.iter().all(|&byte| byte == 0));
        // SAFETY: the block just allocated with `layout`, freed once.
        unsafe { RawSystem.deallocate(block, layout) };
    }

    #[test]
    fn zeroed_words_are_zero_and_untouched_until_written() {
        const PAGES: usize = 16;
        let mut words = super::zeroed_words(PAGES * 512);
        assert_eq!(words.len(), PAGES * 512);
        let resident = |words: &[usize]| {
            let mut resident = [0u8; PAGES];
            // SAFETY: the vector's pages (a mapping of their own, page-aligned), one byte of `resident` for each.
            let answer =
                unsafe { libc::mincore(words.as_ptr().cast_mut().cast(), PAGES * 4096, resident.as_mut_ptr()) };
            assert_eq!(answer, 0);
            resident.iter().filter(|&&page| page & 1 == 1).count()
        };
        assert_eq!(resident(&words), 0);
        words[700] = 7;
        assert_eq!(resident(&words), 1);
        assert!(words.iter().enumerate().all(|(index, &word)| word == if index == 700 { 7 } else { 0 }));
        assert!(super::zeroed_words(0).is_empty());
        assert_eq!(super::zeroed_words(3).as_slice(), [0, 0, 0]);
    }
}
