//! The C library's allocator under its own names, which the interposer's `malloc` and the others forward to.
//!
//! glibc exports them beside the public names, so the interposer needs no `dlsym` (which may itself allocate)
//! to reach them.

use core::ffi::c_void;

unsafe extern "C" {
    pub(crate) fn __libc_malloc(size: usize) -> *mut c_void;
    pub(crate) fn __libc_calloc(count: usize, size: usize) -> *mut c_void;
    pub(crate) fn __libc_realloc(ptr: *mut c_void, size: usize) -> *mut c_void;
    pub(crate) fn __libc_free(ptr: *mut c_void);
    pub(crate) fn __libc_memalign(align: usize, size: usize) -> *mut c_void;
}
