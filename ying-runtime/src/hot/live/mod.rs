//! The live entries: what the profiler remembers of each block it must recognise when the block is freed or
//! reallocated. [`entries`] is the one way in; the live table and the nurseries behind it know nothing of each
//! other.

mod entries;
mod entry;
mod nursery;
mod table;

pub(crate) use entries::{
    LiveSample, OwnBlock, OwnedBlock, any_nursery_held, census, frees_gated, insert, insert_nursed, internal_blocks,
    may_hold, nursed, on_scope_close, on_scope_open, owned_by, remove, remove_elsewhere, remove_held_unless_own_nursed,
    remove_own_nursed, sampled, set_process_scope_open, walk_tree,
};
pub(crate) use entry::{Entry, Sample};
#[cfg(unix)]
pub(crate) use table::{lock_for_fork, unlock_after_fork};
