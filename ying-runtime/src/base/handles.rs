//! What the allocation path's pools hand a thread, as its state (`base::thread`) keeps it: typed handles, one type
//! per use, so that one cannot be stored or read as another, at no cost.
//!
//! The pools live in `hot`, which this layer may not name. A pointer handle keeps the address of a value of a
//! `static` pool (or of memory that pool never gives back) and says nothing of its type: the one module of `hot`
//! that makes a kind of handle turns it back into a reference, in one place. An index handle keeps an index plus
//! one in a `NonZeroU32`, so that an optional one is a `u32` with 0 for none, as the bare integer was.

use core::marker::PhantomData;
use core::num::NonZeroU32;
use core::ptr::NonNull;

/// The counter block a thread writes (`hot::counters`): one of its `static` blocks, and whether the thread is its
/// only writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ShardHandle {
    block: NonNull<u8>,
    /// 1: the thread is the block's only writer; 0: it shares it. A byte rather than a `bool`, so that "none" of
    /// an optional handle is the null block, tested as the bare pointer was.
    exclusive: u8,
}

impl ShardHandle {
    /// The handle of `block`; `exclusive`: the thread is its only writer.
    #[inline]
    pub(crate) fn new<T>(block: &'static T, exclusive: bool) -> Self {
        Self { block: NonNull::from(block).cast(), exclusive: u8::from(exclusive) }
    }

    /// Whether the thread is the block's only writer.
    #[inline(always)]
    pub(crate) fn exclusive(self) -> bool {
        self.exclusive != 0
    }

    /// The block.
    ///
    /// # Safety
    ///
    /// `T` is the type of the block the handle was made from.
    #[inline(always)]
    pub(crate) unsafe fn block<T>(self) -> &'static T {
        // SAFETY: the handle was made from a `&'static T` (the caller names its type), which is still valid and
        // only ever used through shared references.
        unsafe { self.block.cast::<T>().as_ref() }
    }
}

/// A handle on one value of a `static` pool of `hot` (or of memory that pool never gives back), for the use `U`
/// names ([`OfNursery`], [`OfPart`]): handles of two uses are two types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PoolRef<U>(NonNull<u8>, PhantomData<U>);

/// The use of a thread's nursery (`hot::live::nursery`): one of the pool's, never freed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OfNursery {}

/// The use of the part a thread last took to write in another thread's scope (`hot::scope::parts`): one of the
/// pool's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OfPart {}

/// A thread's nursery.
pub(crate) type NurseryHandle = PoolRef<OfNursery>;
/// The part a thread last took to write in another thread's scope.
pub(crate) type PartHandle = PoolRef<OfPart>;

impl<U> PoolRef<U> {
    /// The handle of `value`.
    #[inline]
    pub(crate) fn new<T>(value: &'static T) -> Self {
        Self(NonNull::from(value).cast(), PhantomData)
    }

    /// The value.
    ///
    /// # Safety
    ///
    /// `T` is the type of the value the handle was made from.
    #[inline(always)]
    pub(crate) unsafe fn get<T>(self) -> &'static T {
        // SAFETY: as in `ShardHandle::block`.
        unsafe { self.0.cast::<T>().as_ref() }
    }
}

/// An index into one of `hot`'s pools, for the use `U` names ([`OfPartsBlock`], [`OfPending`]), kept plus one so
/// that an optional one is a `u32` with 0 for none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PoolIndex<U>(NonZeroU32, PhantomData<U>);

/// The use of the block of scope parts a thread owns (`hot::scope::parts`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OfPartsBlock {}

/// The use of a thread's record of pending stack figures (`hot::stacks`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OfPending {}

/// The block of scope parts a thread owns: its index in the pool.
pub(crate) type PartsIndex = PoolIndex<OfPartsBlock>;
/// A thread's record of pending stack figures: its index in the pool.
pub(crate) type PendingIndex = PoolIndex<OfPending>;

impl<U> PoolIndex<U> {
    /// The value at `index`; `None` when the index does not fit.
    #[inline]
    pub(crate) fn new(index: usize) -> Option<Self> {
        plus_one(index).map(|index| Self(index, PhantomData))
    }

    /// Its index in the pool.
    #[inline(always)]
    pub(crate) fn get(self) -> usize {
        self.0.get() as usize - 1
    }
}

/// `index` plus one, when that fits a `u32`.
#[inline]
fn plus_one(index: usize) -> Option<NonZeroU32> {
    NonZeroU32::new(u32::try_from(index).ok()?.checked_add(1)?)
}

const _: () = assert!(size_of::<Option<PartsIndex>>() == size_of::<u32>(), "an optional index is one u32");
const _: () = assert!(size_of::<Option<NurseryHandle>>() == size_of::<usize>(), "an optional handle is one word");
const _: () = assert!(size_of::<Option<ShardHandle>>() == size_of::<ShardHandle>(), "no shard is the null block");
