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
    /// scope recorded only because it records every stack: reading the clock twice per allocation would double
    /// a leak test's cost).
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
}
