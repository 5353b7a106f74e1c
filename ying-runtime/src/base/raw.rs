//! Memory for the profiler's own tables, taken straight from the operating system.
//!
//! The live table and the stack table grow while the global allocator is inside `alloc`. Their memory therefore
//! never goes through the global allocator (which is the profiler itself): on Unix it is mapped with `mmap`, on
//! other systems it comes from [`std::alloc::System`], through this [`Allocator`]. Growing a table can neither
//! recurse into profiling nor appear in any figure, and (mapped apart from the heap) the profiler's long-lived
//! tables never sit between the program's blocks, where they would keep the program's allocator from growing a
//! block in place.

use allocator_api2::alloc::{AllocError, Allocator};
use core::alloc::Layout;
use core::ptr::NonNull;

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

// SAFETY: every block is a fresh mapping (or a `System` block) of at least the requested size and alignment, zeroed
// when asked for (a fresh anonymous mapping is), returned to the system with the same layout by `deallocate`; the
// default `grow` and `shrink` copy through `allocate` and `deallocate`. That is what `Allocator` requires of each
// method here.
unsafe impl Allocator for RawSystem {
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if layout.size() == 0 {
            // A dangling, well-aligned pointer is a valid zero-sized allocation.
            let dangling = NonNull::new(layout.align() as *mut u8).ok_or(AllocError)?;
            return Ok(NonNull::slice_from_raw_parts(dangling, 0));
        }
        NonNull::new(map(layout)).map(|ptr| NonNull::slice_from_raw_parts(ptr, layout.size())).ok_or(AllocError)
    }

    fn allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if layout.size() == 0 {
            return self.allocate(layout);
        }
        NonNull::new(map_zeroed(layout)).map(|ptr| NonNull::slice_from_raw_parts(ptr, layout.size())).ok_or(AllocError)
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        if layout.size() != 0 {
            unmap(ptr.as_ptr(), layout);
        }
    }
}

/// A vector whose buffer never goes through the global allocator.
pub(crate) type RawVec<T> = allocator_api2::vec::Vec<T, RawSystem>;

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::RawSystem;
    use allocator_api2::alloc::Allocator;
    use core::alloc::Layout;

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
}
