//! Scopes: exact figures of what one piece of code did to the heap.
//!
//! How an update of scope `S` (an allocation, a free, a resize, a block owned or disowned) made by thread `T`
//! reaches the figures:
//!
//! ```text
//! home     T opened S ───────────────────────────────────> S's home part (no check)
//! other    T did not ── S still in its slot? ── yes ──────> T's own part of S, else S's shared part
//!                                            └─ no ──> closed
//! nested   S has a parent P ── as other ──> S, then P, then P's parent, ... (each open one, outwards)
//! closed   S's slot says where S's blocks went ──> there, else the scopes T is still in, else the process scope
//! ```
//!
//! - Home thread: the thread that opened a scope nested in none, and alone closes it, writes the slot's home part
//!   with plain loads and stores and checks nothing (`update::update`, inlined).
//! - Other thread: any other thread checks that the slot still holds the scope's id, then writes a part of its own,
//!   taken from a pool and registered with the scope once, or the scope's shared part when none is left
//!   (`update::other_writer`, `parts::take`).
//! - Nested: a scope opened inside another has no home thread; its updates take the other threads' path
//!   (`update::update_other`), which applies them to each open scope enclosing it, outwards
//!   (`update::update_beyond`).
//! - Closed: an update that finds its scope closed goes to the scope the closed one handed its blocks to, while its
//!   slot remembers it (`slots::forwarded`), and otherwise to the scopes the thread is still in
//!   (`update::update_closed`).
//!
//! A scope lives in one of 256 fixed slots of atomics (`slots`), so opening, updating and closing one never
//! allocates. Its id combines a generation with the slot index (and a bit, see below): blocks remember the id of
//! the scope that owns them, and a free that arrives after the scope closed (or after the slot was reused) finds a
//! different id and changes nothing.
//! A scope's figures are kept in parts, one per thread that counts in it (`parts`): the thread that opened the
//! scope (its home thread), which also closes it, writes the slot's home part; any other thread writes a part of
//! its own, registered with the scope once, which the closer reads and gives back. Every writer updates its part
//! with plain loads and stores, and the peak stays exact across threads (see `parts`). An update that finds the
//! scope open just before it closes lands in a part nobody reads any more, so a closed scope's figures are final
//! and a reused slot never receives a late update meant for its previous scope. A nested scope (below) has no home
//! thread.
//!
//! Scopes nest. A scope opened where its thread is in another scope (a `measure` inside a leak test) records that
//! scope as its parent, and every update of the inner scope is applied to each open scope enclosing it, outwards
//! (out of line): a block allocated in the inner scope counts in all of them, and so do its free and its peak. The
//! inner scope is no thread's home scope, so its updates take the path of other threads (`update_other`), where
//! that is done, and the home path (the scope its thread opened, nearly every update of a leak test) has nothing to
//! check. When the inner scope closes, the blocks it owns are handed to its nearest open ancestor
//! (`live::on_scope_close`), which counted them all along; a scope whose parent closes first takes its grandparent
//! as parent. Until a closed nested scope's slot is reused, the slot remembers which scope it was handed to, so that
//! an update that raced with the close (or arrives through a stale handle) still reaches the enclosing scopes.
//! Whether a scope has a parent is a bit of its id, which the path of other threads tests.
//!
//! One job per module: `face` ([`Scope`], [`EnterGuard`], and [`OpenScope`], which `measure` and the leak-test
//! runner open and close); `slots` (the slot table, claiming, ids, the links between nested scopes, the process
//! scope and the scope a thread's activity is attributed to); `update` (the protocol drawn above, and the updates
//! the allocator makes); `parts` (a scope's figures in parts, its exact peak, and the pool of thread parts).

mod face;
mod parts;
mod slots;
mod update;

pub(crate) use face::OpenScope;
pub use face::{EnterGuard, Scope};
#[cfg(unix)]
pub(crate) use parts::forget_other_threads;
pub(crate) use slots::{attributed, is_process_scope, process_scope_open};
#[cfg(unix)]
pub(crate) use slots::{lock_for_fork, unlock_after_fork};
#[cfg(all(test, unix))]
pub(crate) use update::{begin_update, end_update};
pub(crate) use update::{disown, free_owned, grow_owned, on_alloc, on_alloc_closed, on_free, on_resize, own};
pub use ying_report::report::{Attribution, ScopeStats};
