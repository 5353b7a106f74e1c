//! Memory for the profiler's own tables, taken straight from the system allocator.
//!
//! The live table and the stack table grow while the global allocator is inside `alloc`. Their memory therefore
//! never goes through the global allocator (which is the profiler itself): it comes from [`std::alloc::System`]
//! through this [`Allocator`], so growing a table can neither recurse into profiling nor appear in any figure.

use allocator_api2::alloc::{AllocError, Allocator};
use core::alloc::{GlobalAlloc, Layout};
use core::ptr::NonNull;
use std::alloc::System;

/// The system allocator, called directly, as an [`Allocator`] for hashbrown and allocator-api2 collections.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RawSystem;

// SAFETY: every block comes from `System` with the requested layout and is returned to `System` with that same
// layout; `System` upholds the `GlobalAlloc` contract, which is what `Allocator` requires of each method here.
unsafe impl Allocator for RawSystem {
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if layout.size() == 0 {
            // A dangling, well-aligned pointer is a valid zero-sized allocation.
            let dangling = NonNull::new(layout.align() as *mut u8).ok_or(AllocError)?;
            return Ok(NonNull::slice_from_raw_parts(dangling, 0));
        }
        // SAFETY: `layout` has a non-zero size, checked above.
        let ptr = unsafe { System.alloc(layout) };
        NonNull::new(ptr).map(|ptr| NonNull::slice_from_raw_parts(ptr, layout.size())).ok_or(AllocError)
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        if layout.size() != 0 {
            // SAFETY: the caller guarantees `ptr` came from `allocate` with this layout, which took it from `System`.
            unsafe { System.dealloc(ptr.as_ptr(), layout) }
        }
    }
}

/// A vector whose buffer never goes through the global allocator.
pub(crate) type RawVec<T> = allocator_api2::vec::Vec<T, RawSystem>;
