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
        // SAFETY: the caller guarantees that `new_size`, with the layout's alignment, is a valid layout.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: `new_layout` has a non-zero size (the caller's contract for `realloc`).
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks hold at least the smaller size and are distinct; `ptr` is freed once, after.
            unsafe {
                core::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        new
    }
}

#[global_allocator]
static OWN: Own = Own;
