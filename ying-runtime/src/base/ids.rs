//! The ids the profiler's tables hand out and every part passes around: a scope's and a recorded stack's.
//!
//! Typed, so that "none" is `None` rather than a magic 0, at no cost: `Option<ScopeId>` is one `u64`, as the bare
//! id was, a [`StackId`] is the `u32` index it wraps, and an optional stack packs in one `u32` ([`StackId::pack`]).

use core::num::NonZeroU64;
use core::sync::atomic::{AtomicU64, Ordering};

/// A scope (see `hot::scope`): a generation and the index of the scope's slot, never 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ScopeId(NonZeroU64);

impl ScopeId {
    /// The id whose bits are `bits`; `None` for 0.
    #[inline]
    pub(crate) const fn from_bits(bits: u64) -> Option<Self> {
        match NonZeroU64::new(bits) {
            Some(bits) => Some(Self(bits)),
            None => None,
        }
    }

    /// The id's bits (never 0).
    #[inline]
    pub(crate) const fn bits(self) -> u64 {
        self.0.get()
    }
}

/// `id == other`: an id against an optional one (a thread's scope, a slot's, an entry's owner), without wrapping
/// the id in `Some`.
impl PartialEq<Option<ScopeId>> for ScopeId {
    #[inline]
    fn eq(&self, other: &Option<ScopeId>) -> bool {
        self.bits() == bits(*other)
    }
}

/// An optional [`ScopeId`] that threads share: 0 stands for `None` in it, and nowhere else. All zeros is `None`.
#[repr(transparent)]
pub(crate) struct AtomicScopeId(AtomicU64);

impl AtomicScopeId {
    pub(crate) const fn none() -> Self {
        Self(AtomicU64::new(0))
    }

    #[inline]
    pub(crate) fn load(&self, order: Ordering) -> Option<ScopeId> {
        ScopeId::from_bits(self.0.load(order))
    }

    #[inline]
    pub(crate) fn store(&self, id: Option<ScopeId>, order: Ordering) {
        self.0.store(bits(id), order);
    }

    /// [`AtomicU64::compare_exchange`] of the ids' bits; true when it succeeded.
    pub(crate) fn compare_exchange(
        &self,
        current: Option<ScopeId>,
        new: Option<ScopeId>,
        success: Ordering,
        failure: Ordering,
    ) -> bool {
        self.0.compare_exchange(bits(current), bits(new), success, failure).is_ok()
    }
}

/// The bits of an optional id: 0 for none.
#[inline]
const fn bits(id: Option<ScopeId>) -> u64 {
    match id {
        Some(id) => id.bits(),
        None => 0,
    }
}

/// A stack recorded in the stack table (see `hot::stacks`): its index there, below `u32::MAX` (the table refuses the
/// last index), so that an optional stack packs in a `u32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct StackId(u32);

impl StackId {
    /// The stack at `index` in the stack table.
    #[inline]
    pub(crate) const fn new(index: u32) -> Self {
        Self(index)
    }

    /// Its index in the stack table.
    #[inline]
    pub(crate) const fn get(self) -> u32 {
        self.0
    }

    /// Its index in the stack table, to index a slice.
    #[inline]
    pub(crate) const fn index(self) -> usize {
        self.0 as usize
    }

    /// An optional stack in one `u32`, as the nurseries, the live table and each thread's pending stack figures
    /// keep it: its index plus one, 0 for none.
    #[inline]
    pub(crate) const fn pack(stack: Option<Self>) -> u32 {
        match stack {
            Some(stack) => stack.0 + 1,
            None => 0,
        }
    }

    /// The optional stack [`pack`](Self::pack) gave `packed` for.
    #[inline]
    pub(crate) fn unpack(packed: u32) -> Option<Self> {
        packed.checked_sub(1).map(Self)
    }
}

const _: () = assert!(size_of::<Option<ScopeId>>() == size_of::<u64>(), "an optional scope is one word");
