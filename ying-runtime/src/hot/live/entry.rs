//! What the profiler remembers of a live block: its entry, and the sample it may carry. The live table and the
//! nurseries keep the same entries; both take their shape from here.

use crate::base::ids::{ScopeId, StackId};
use crate::hot::sampler::Weight;
use std::time::Instant;

/// What the profiler remembers of a sampled block.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sample {
    /// The allocating stack.
    pub(crate) stack: StackId,
    /// What it stands for: recorded with certainty, or sampled at the interval then in force.
    pub(crate) weight: Weight,
    /// When it was allocated, for the lifetime histogram; `None` when its lifetime is not measured (a block a
    /// scope recorded only because it records every stack: reading the clock at its allocation and its free was
    /// 14% of a leak test's time, BENCHMARKS-LOG.md, the first to fourth rounds).
    pub(crate) born: Option<Instant>,
}

/// What the profiler remembers of a live block.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry {
    /// Current size in bytes.
    pub(crate) size: usize,
    /// The scope that owns bytes of this block, if any.
    pub(crate) scope: Option<ScopeId>,
    /// How many of its bytes that scope caused (all of them for a block allocated in it; the growth for an older
    /// block a scope enlarged).
    pub(crate) owned: usize,
    /// Present when the block was sampled.
    pub(crate) sample: Option<Sample>,
    /// The block was allocated in that scope (it counts among the scope's retained blocks), rather than only grown.
    pub(crate) owns_block: bool,
    /// The profiler allocated this block for itself: it is in no figure.
    pub(crate) internal: bool,
}

impl Entry {
    /// An entry for a block of `size` bytes that records nothing yet.
    pub(crate) const fn untracked(size: usize) -> Self {
        Self { size, scope: None, owned: 0, sample: None, owns_block: false, internal: false }
    }

    /// An entry for a block the profiler allocated for itself.
    pub(crate) const fn internal(size: usize) -> Self {
        Self { size, scope: None, owned: 0, sample: None, owns_block: false, internal: true }
    }

    /// The entry of a block of `size` bytes that `scope` allocated and recorded `stack` for with certainty, if
    /// any, and nothing else: nearly every entry of a leak test. The nurseries keep only such entries, and the
    /// live table keeps them in a third of an entry's room ([`owned_block_parts`](Self::owned_block_parts)).
    #[inline]
    pub(crate) const fn owned_block(size: usize, scope: Option<ScopeId>, stack: Option<StackId>) -> Self {
        let sample = match stack {
            Some(stack) => Some(Sample { stack, weight: Weight::Certain, born: None }),
            None => None,
        };
        Self { size, scope, owned: size, sample, owns_block: true, internal: false }
    }

    /// The scope and stack this entry was made from by [`owned_block`](Self::owned_block), when it is such an
    /// entry with a scope: `Entry::owned_block(entry.size, Some(scope), stack)` is `entry` again.
    #[inline]
    pub(crate) fn owned_block_parts(&self) -> Option<(ScopeId, Option<StackId>)> {
        let scope = self.scope.filter(|_| self.owns_block && !self.internal && self.owned == self.size)?;
        match self.sample {
            None => Some((scope, None)),
            Some(Sample { stack, weight: Weight::Certain, born: None }) => Some((scope, Some(stack))),
            Some(_) => None,
        }
    }
}
