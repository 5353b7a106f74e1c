//! The program's blocks: the C library's, each with a header in front that keeps the size the program asked for.
//!
//! `free` and `realloc` are not told a block's size, and ying's figures are of requested bytes (`malloc(500)`
//! counts 500 where glibc's `malloc_usable_size` says 504). So every block is taken 16 bytes larger (an
//! over-aligned one, its alignment larger), and the 16 bytes before the address the program gets hold the
//! distance back to the C library's block and the size asked for. Every block of the process comes from here, from
//! the first `malloc` on (the interposer is loaded before the program's first allocation), so every pointer the
//! program frees has its header.
//!
//! The header is sealed with the address it belongs to, and the seal is broken when the block is freed, so a
//! block freed twice (whose header the C library has since written over) or an address that was never a block is
//! told apart from a live block, instead of being trusted as one.
//!
//! A block the standard library allocates while it walks the stack (see `unwind`) is marked unmeasured in its seal:
//! it never goes through the profiler, its free and resize neither, and the reachability scan does not read it
//! ([`unmeasured_chunk`]).

use crate::libc_malloc::{__libc_calloc, __libc_free, __libc_malloc, __libc_memalign, __libc_realloc};
use crate::own::{MALLOC_ALIGN, realloc_by_copy};
use core::alloc::{GlobalAlloc, Layout};

/// Bytes in front of every block: its [`Header`], and malloc's alignment after it.
const HEADER: usize = 16;
const _: () = assert!(size_of::<Header>() <= HEADER && HEADER.is_multiple_of(MALLOC_ALIGN));

/// What a block keeps in front of the address the program gets.
#[derive(Clone, Copy)]
#[repr(C)]
struct Header {
    /// The size the program asked for.
    size: usize,
    /// The distance from the C library's block to the program's address ([`HEADER`], or the alignment of an
    /// over-aligned block), as its base-2 logarithm in the low six bits, whether the block is unmeasured in the
    /// next ([`UNMEASURED`]), and above the low byte a hash of the address, the size and the mark.
    seal: usize,
}

/// The bits of [`Header::seal`] that hold the offset's logarithm.
const OFFSET_BITS: usize = 0x3F;
/// The bit of [`Header::seal`] that marks a block unmeasured.
const UNMEASURED: usize = 0x40;
/// The low byte of [`Header::seal`]: what is not the hash.
const LOW_BYTE: usize = 0xFF;

impl Header {
    /// The header of the block at `user`, `offset` bytes into the C library's block, of `size` bytes asked for,
    /// `unmeasured` or not.
    fn new(user: *mut u8, offset: usize, size: usize, unmeasured: bool) -> Self {
        let mark = if unmeasured { UNMEASURED } else { 0 };
        let hash = (user.addr() ^ size ^ mark).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        Self { size, seal: (hash & !LOW_BYTE) | mark | offset.trailing_zeros() as usize }
    }

    /// The header of no block: what a block's header becomes as it is freed.
    const BROKEN: Self = Self { size: 0, seal: 0 };

    /// The offset of the block at `user`, when this is the header [`Header::new`] made for it: `None` for a
    /// block freed already (its header broken, or the C library's since) or an address that was never a block.
    fn offset(self, user: *mut u8) -> Option<usize> {
        let offset = 1_usize.checked_shl(u32::try_from(self.seal & OFFSET_BITS).ok()?)?;
        let sealed = Self::new(user, offset, self.size, self.unmeasured()).seal == self.seal;
        (offset >= HEADER && sealed).then_some(offset)
    }

    /// Whether the block is marked unmeasured.
    fn unmeasured(self) -> bool {
        self.seal & UNMEASURED != 0
    }

    /// The offset this header keeps, known to be one [`Header::new`] made.
    fn offset_unchecked(self) -> usize {
        1 << (self.seal & OFFSET_BITS)
    }
}

/// The header of the block the program knows as `user`.
///
/// # Safety
///
/// `user` is an address [`Blocks`] returned (its header lies in the same allocation, just before it).
unsafe fn header(user: *mut u8) -> *mut Header {
    // SAFETY: every address `Blocks` hands out is at least `HEADER` bytes into the C library's block, and the
    // header sits in the `HEADER` bytes before it (the caller's contract).
    unsafe { user.sub(HEADER).cast() }
}

/// What a live block's header says of it.
#[derive(Clone, Copy)]
pub(crate) struct Block {
    /// The layout the block was allocated with: the size asked for, and its alignment.
    pub(crate) layout: Layout,
    /// It was allocated inside a stack walk, past the profiler (see `unwind`).
    pub(crate) unmeasured: bool,
}

/// The program's block `user` as its header says it, or `None` when `user` is not a live block of ours: freed
/// already, or never one.
///
/// # Safety
///
/// `user` is an address the program holds as a block: the 16 bytes before it are readable. (Any block of the C
/// library's has them, freed or not, unless it was a mapping of its own, now unmapped, as glibc itself assumes.)
pub(crate) unsafe fn block_of(user: *mut u8) -> Option<Block> {
    // SAFETY: the bytes before a block the program holds (the caller's contract).
    let header = unsafe { header(user).read() };
    let offset = header.offset(user)?;
    let align = if offset == HEADER { MALLOC_ALIGN } else { offset };
    // SAFETY: the size and alignment of a layout the block was allocated with (an alignment is a power of two).
    let layout = unsafe { Layout::from_size_align_unchecked(header.size, align) };
    Some(Block { layout, unmeasured: header.unmeasured() })
}

/// Whether the C library's block in use at `start` is one of ours marked unmeasured: the reachability scan leaves
/// such blocks unread. Reads the 16 bytes at `start`, which a block in use has.
pub(crate) fn unmeasured_chunk(start: usize) -> bool {
    let user = core::ptr::without_provenance_mut::<u8>(start.wrapping_add(HEADER));
    // SAFETY: the scan passes the start of a block in use of the C library's heap, whose first 16 bytes are
    // mapped and ours to read (a header, when the block is ours).
    let header = unsafe { (start as *const Header).read() };
    header.unmeasured() && header.offset(user) == Some(HEADER)
}

/// The C library's allocator, each block with its [`Header`]: the provider of the interposer's profiler (its
/// blocks measured), and of the blocks allocated inside the standard library's stack walks (unmeasured).
pub(crate) struct Blocks {
    unmeasured: bool,
}

impl Blocks {
    /// The blocks the profiler measures.
    pub(crate) const MEASURED: Self = Self { unmeasured: false };
    /// The blocks nothing measures.
    pub(crate) const UNMEASURED: Self = Self { unmeasured: true };

    /// Writes the header of a new block of the C library's at `raw` (null: none), `offset` bytes before what the
    /// program gets, for `size` bytes asked for; returns the program's address.
    ///
    /// # Safety
    ///
    /// `raw`, when not null, is a block of at least `offset + size` bytes, aligned to `offset`'s alignment need.
    unsafe fn made(&self, raw: *mut u8, offset: usize, size: usize) -> *mut u8 {
        if raw.is_null() {
            return raw;
        }
        // SAFETY: `offset` bytes into a block longer than that (the caller's contract), with room for the header.
        unsafe {
            let user = raw.add(offset);
            header(user).write(Header::new(user, offset, size, self.unmeasured));
            user
        }
    }
}

// SAFETY: every block is the C library's, larger by `HEADER` (or its alignment) than asked, and the program's
// address lies that far in, aligned as the layout asks; `dealloc` and `realloc` find the C library's block back
// from the header.
unsafe impl GlobalAlloc for Blocks {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= MALLOC_ALIGN {
            let Some(total) = layout.size().checked_add(HEADER) else { return core::ptr::null_mut() };
            // SAFETY: `malloc` of a non-zero size; the block is 16-aligned, so `HEADER` bytes in still is.
            unsafe { self.made(__libc_malloc(total).cast(), HEADER, layout.size()) }
        } else {
            let Some(total) = layout.size().checked_add(layout.align()) else { return core::ptr::null_mut() };
            // SAFETY: the alignment is a power of two above 16; one alignment in, the address is still aligned
            // and the header (16 bytes) fits before it.
            unsafe { self.made(__libc_memalign(layout.align(), total).cast(), layout.align(), layout.size()) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.align() > MALLOC_ALIGN {
            // SAFETY: the caller's layout, passed on.
            let user = unsafe { self.alloc(layout) };
            if !user.is_null() {
                // SAFETY: the new block holds `layout.size()` bytes.
                unsafe { user.write_bytes(0, layout.size()) };
            }
            return user;
        }
        let Some(total) = layout.size().checked_add(HEADER) else { return core::ptr::null_mut() };
        // SAFETY: `calloc` of one element of a non-zero size, 16-aligned as `malloc`'s blocks are.
        unsafe { self.made(__libc_calloc(1, total).cast(), HEADER, layout.size()) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` is a live block of ours (the caller's contract); its header says where the C library's
        // block starts, which goes back to it once, its header broken first.
        unsafe {
            let offset = header(ptr).read().offset_unchecked();
            header(ptr).write(Header::BROKEN);
            __libc_free(ptr.sub(offset).cast());
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` is a live block of ours (the caller's contract).
        let offset = unsafe { header(ptr).read() }.offset_unchecked();
        if offset == HEADER {
            let Some(total) = new_size.checked_add(HEADER) else { return core::ptr::null_mut() };
            // SAFETY: the C library's block of `ptr`, resized; its contents (the header first) move with it, and
            // the header is rewritten with the new size. On failure the old block stays as it was.
            return unsafe { self.made(__libc_realloc(ptr.sub(HEADER).cast(), total).cast(), HEADER, new_size) };
        }
        // SAFETY: the caller's contract for `realloc`, passed on.
        unsafe { realloc_by_copy(self, ptr, layout, new_size) }
    }
}
