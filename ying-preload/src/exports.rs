//! The C allocation functions, defined here in place of the C library's: each is a call of the profiler over
//! [`Blocks`], with the C library's meaning kept (null and `errno` on failure, `free(NULL)` does nothing,
//! `realloc(p, 0)` frees as glibc's does).
//!
//! The program's global allocator (Rust's `System`) reaches them too: `malloc`, `posix_memalign` past 16-byte
//! alignment, `calloc`, `realloc` and `free`.

use crate::blocks::{Block, Blocks, block_of};
use crate::own::MALLOC_ALIGN;
use crate::unwind;
use core::alloc::{GlobalAlloc, Layout};
use core::ffi::c_void;
use ying::YingProfiler;

/// The profiler every allocation of the process goes through. The interposer changes no allocation's outcome:
/// no size is too large to try.
static PROFILER: YingProfiler<Blocks> = YingProfiler::with_allocator(Blocks::MEASURED).giant_alloc_limit(usize::MAX);

/// Sets the calling thread's `errno`.
fn set_errno(code: i32) {
    // SAFETY: `__errno_location` returns the calling thread's `errno`, valid for the thread's life.
    unsafe { *libc::__errno_location() = code };
}

/// Allocates `size` bytes aligned to `align` (a power of two) through the profiler (unmeasured, past it, inside the
/// standard library's stack walk: see `unwind`): null and `ENOMEM` when it cannot. A size of 0 gets a block of its
/// own, as from glibc.
fn allocate(size: usize, align: usize, zeroed: bool) -> *mut c_void {
    let Ok(layout) = Layout::from_size_align(size, align.max(MALLOC_ALIGN)) else {
        set_errno(libc::ENOMEM);
        return core::ptr::null_mut();
    };
    // SAFETY: the profiler passes the layout on to `Blocks`, which serves every size (0 included: the header
    // alone) and alignment; the profiler itself only counts the size.
    let ptr = unsafe {
        match (unwind::walking(), zeroed) {
            (false, false) => PROFILER.alloc(layout),
            (false, true) => PROFILER.alloc_zeroed(layout),
            (true, false) => Blocks::UNMEASURED.alloc(layout),
            (true, true) => Blocks::UNMEASURED.alloc_zeroed(layout),
        }
    };
    if ptr.is_null() {
        set_errno(libc::ENOMEM);
    }
    ptr.cast()
}

/// `malloc(3)`.
///
/// # Safety
///
/// None beyond C's: the block is the caller's until it frees it.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
    allocate(size, MALLOC_ALIGN, false)
}

/// `calloc(3)`: null and `ENOMEM` when `count * size` overflows.
///
/// # Safety
///
/// None beyond C's.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn calloc(count: usize, size: usize) -> *mut c_void {
    let Some(total) = count.checked_mul(size) else {
        set_errno(libc::ENOMEM);
        return core::ptr::null_mut();
    };
    allocate(total, MALLOC_ALIGN, true)
}

/// `free(3)`.
///
/// # Safety
///
/// `ptr` is null or a block of this allocator's not yet freed, as C requires.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn free(ptr: *mut c_void) {
    if ptr.is_null() {
        return;
    }
    let ptr = ptr.cast::<u8>();
    // SAFETY: a block the program holds (the caller's contract); the bytes before it are readable.
    let Some(block) = (unsafe { block_of(ptr) }) else { not_a_block("free", ptr) };
    // SAFETY: a live block of ours, freed with the layout its header keeps, past the profiler when it never went
    // through it.
    unsafe {
        if block.unmeasured {
            Blocks::UNMEASURED.dealloc(ptr, block.layout);
        } else {
            PROFILER.dealloc(ptr, block.layout);
        }
    }
}

/// Ends the process as glibc does when `function` (`free`, `realloc`) is passed `ptr`, which is no live block:
/// freed already, or never allocated. Says so first on standard error, starting `ying: `, without allocating.
#[cold]
fn not_a_block(function: &str, ptr: *mut u8) -> ! {
    ying::__private::interposer::say(format_args!(
        "ying: {function}({ptr:p}): double free or invalid pointer: the block was freed already, or never \
         allocated; aborting"
    ));
    // SAFETY: `abort` ends the process; nothing after it runs.
    unsafe { libc::abort() }
}

/// `realloc(3)`: `realloc(NULL, n)` allocates, `realloc(p, 0)` frees `p` and returns null (glibc's meaning).
///
/// # Safety
///
/// `ptr` is null or a block of this allocator's not yet freed.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn realloc(ptr: *mut c_void, size: usize) -> *mut c_void {
    if ptr.is_null() {
        return allocate(size, MALLOC_ALIGN, false);
    }
    if size == 0 {
        // SAFETY: the caller's block, freed once.
        unsafe { free(ptr) };
        return core::ptr::null_mut();
    }
    let ptr = ptr.cast::<u8>();
    // SAFETY: a block the program holds (the caller's contract); the bytes before it are readable.
    let Some(Block { layout, unmeasured }) = (unsafe { block_of(ptr) }) else { not_a_block("realloc", ptr) };
    // SAFETY: a live block of ours with the layout its header keeps; the new size, at that alignment, cannot
    // overflow a layout (checked first).
    unsafe {
        if Layout::from_size_align(size, layout.align()).is_err() {
            set_errno(libc::ENOMEM);
            return core::ptr::null_mut();
        }
        // A block that never went through the profiler is resized past it, and stays unmeasured.
        let new = if unmeasured {
            Blocks::UNMEASURED.realloc(ptr, layout, size)
        } else {
            PROFILER.realloc(ptr, layout, size)
        };
        if new.is_null() {
            set_errno(libc::ENOMEM);
        }
        new.cast()
    }
}

/// `reallocarray(3)`: `realloc` of `count * size` bytes, null and `ENOMEM` when that overflows.
///
/// # Safety
///
/// As [`realloc`].
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn reallocarray(ptr: *mut c_void, count: usize, size: usize) -> *mut c_void {
    let Some(total) = count.checked_mul(size) else {
        set_errno(libc::ENOMEM);
        return core::ptr::null_mut();
    };
    // SAFETY: the caller's contract is `realloc`'s.
    unsafe { realloc(ptr, total) }
}

/// `posix_memalign(3)`: `EINVAL` unless `align` is a power of two and a multiple of a pointer's size.
///
/// # Safety
///
/// `out` is valid for a pointer's write.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> i32 {
    if !align.is_power_of_two() || !align.is_multiple_of(size_of::<*mut c_void>()) {
        return libc::EINVAL;
    }
    let ptr = allocate(size, align, false);
    if ptr.is_null() {
        return libc::ENOMEM;
    }
    // SAFETY: the caller's contract.
    unsafe { out.write(ptr) };
    0
}

/// `aligned_alloc(3)`: null and `EINVAL` unless `align` is a power of two.
///
/// # Safety
///
/// None beyond C's.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    if !align.is_power_of_two() {
        set_errno(libc::EINVAL);
        return core::ptr::null_mut();
    }
    allocate(size, align, false)
}

/// `memalign(3)`: an alignment that is not a power of two is raised to the next one, as glibc does.
///
/// # Safety
///
/// None beyond C's.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    match align.checked_next_power_of_two() {
        Some(align) => allocate(size, align, false),
        None => {
            set_errno(libc::EINVAL);
            core::ptr::null_mut()
        }
    }
}

/// The system's page size.
fn page_size() -> usize {
    // SAFETY: `sysconf` reads a constant of the system.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
}

/// `valloc(3)`: page-aligned.
///
/// # Safety
///
/// None beyond C's.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn valloc(size: usize) -> *mut c_void {
    allocate(size, page_size(), false)
}

/// `pvalloc(3)`: page-aligned, the size rounded up to whole pages (one page at least).
///
/// # Safety
///
/// None beyond C's.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn pvalloc(size: usize) -> *mut c_void {
    let page = page_size();
    match size.max(1).checked_next_multiple_of(page) {
        Some(size) => allocate(size, page, false),
        None => {
            set_errno(libc::ENOMEM);
            core::ptr::null_mut()
        }
    }
}

/// `malloc_usable_size(3)`: the size the block was asked with (all of which the program may use).
///
/// # Safety
///
/// `ptr` is null or a live block of this allocator's.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn malloc_usable_size(ptr: *mut c_void) -> usize {
    if ptr.is_null() {
        return 0;
    }
    // SAFETY: a block the program holds (the caller's contract). One that is not a live block has no usable
    // bytes, as glibc answers for a freed one.
    unsafe { block_of(ptr.cast()) }.map_or(0, |block| block.layout.size())
}
