//! Elsewhere than on x86-64 Linux the system unwinder does every capture: nothing is walked or remembered here.

use super::cached::{Cached, Ticket};
use core::mem::MaybeUninit;

/// Always `None`: the caller uses the system unwinder.
pub(crate) fn capture(_ips: &mut [MaybeUninit<usize>], _limit: usize) -> Option<usize> {
    None
}

/// No walks are kept here: a nursery's tree of walks is empty.
pub(crate) struct WalkTree;

/// Always [`Cached::Unsupported`].
pub(crate) fn capture_cached(
    _ips: &mut [MaybeUninit<usize>],
    _limit: usize,
    _tree: Option<&'static WalkTree>,
) -> Cached {
    Cached::Unsupported
}

/// Nothing is remembered.
pub(crate) fn remember(_ticket: Ticket, _tag: u32) {}

/// Nothing is walked here: the system unwinder's stacks end where it ends them.
pub(crate) fn end_stacks_at(_ranges: impl IntoIterator<Item = (usize, usize)>) {}

/// No rules are computed here: none are kept.
pub(crate) fn keep_rules() {}

/// No rules are computed here: none are read.
pub(crate) fn load_kept_rules() {}
