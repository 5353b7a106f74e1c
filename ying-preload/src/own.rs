//! The global allocator of this library's own Rust code: the C library's allocator, called directly.
//!
//! The runtime's tables never come from here (it maps them itself); what does is the memory of its slower work
//! (reading the test's identity, symbolising stacks, writing the report). Were it to go through the exported
//! `malloc`, the profiler would see its own work as the program's.

use crate::libc_malloc::{__libc_free, __libc_malloc, __libc_memalign, __libc_realloc};
use core::alloc::{GlobalAlloc, Layout};

/// Alignment every `malloc` block has on glibc's 64-bit targets.
pub(crate) const MALLOC_ALIGN: usize = 16;

/// The C library's allocator, for this library's Rust code.
struct Own;

// SAFETY: every block comes from the C library with at least the layout's size and alignment (`__libc_memalign`
// past malloc's own alignment) and goes back to it with `__libc_free`; a growth beyond malloc's alignment copies.
unsafe impl GlobalAlloc for Own {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= MALLOC_ALIGN {
            // SAFETY: plain `malloc` of the layout's (non-zero) size.
            unsafe { __libc_malloc(layout.size()) }.cast()
        } else {
            // SAFETY: the alignment is a power of two, as a `Layout`'s is.
            unsafe { __libc_memalign(layout.align(), layout.size()) }.cast()
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from `alloc` or `realloc` above, so from the C library.
        unsafe { __libc_free(ptr.cast()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= MALLOC_ALIGN {
            // SAFETY: `ptr` came from the C library; `realloc` keeps malloc's alignment, all this layout needs.
            return unsafe { __libc_realloc(ptr.cast(), new_size) }.cast();
        }
        // SAFETY: the caller's contract for `realloc`, passed on.
        unsafe { realloc_by_copy(self, ptr, layout, new_size) }
    }
}

/// `realloc` of an over-aligned block, which the C library cannot resize keeping its alignment: a new block of
/// `allocator`'s, the contents copied, the old block freed.
///
/// # Safety
///
/// As [`GlobalAlloc::realloc`]'s: `ptr` is a live block of `allocator` with `layout`, and `new_size` with that
/// alignment is a valid layout of non-zero size.
pub(crate) unsafe fn realloc_by_copy(
    allocator: &impl GlobalAlloc,
    ptr: *mut u8,
    layout: Layout,
    new_size: usize,
) -> *mut u8 {
    // SAFETY: the caller guarantees that `new_size`, with the layout's alignment, is a valid layout.
    let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
    // SAFETY: a new block, the contents copied (both blocks hold at least the smaller size and are distinct), the
    // old block freed once, after: `realloc`'s meaning.
    unsafe {
        let new = allocator.alloc(new_layout);
        if !new.is_null() {
            core::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
            allocator.dealloc(ptr, layout);
        }
        new
    }
}

#[global_allocator]
static OWN: Own = Own;
