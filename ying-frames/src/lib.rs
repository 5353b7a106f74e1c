//! The rules ying reads stacks by, as pure functions of their frames: the runtime applies them to the stacks it
//! symbolises itself, and `cargo ying` to the stacks a test left to it as addresses, so that both read a stack
//! alike.
//!
//! - [`names`]: the name of the function at an address, whatever the debug-information level;
//! - [`Trim`] and the predicates beside it: which frames of a captured stack a report keeps, where the test's body
//!   and the leak site are;
//! - [`fold`]: the [`FoldedStack`](ying_report::FoldedStack) a flamegraph draws a stack as, and [`site_key`], the key
//!   a retained site keeps across runs;
//! - [`excuses`]: what retained memory is excused by the names of its stack;
//! - [`why`]: why retained memory is still there, in the words every output uses;
//! - [`types`]: which frame of a stack names the type it allocated, and `debug_types` (with the `dwarf` feature)
//!   the type that frame's generic argument names, read from the executable's debug information, and where that
//!   type's pointers lie, by the fields that lead to them (`debug_types::layout`);
//! - [`KnownCode`]: the functions of a test executable the runtime knows by address, which `cargo ying` reads once
//!   per executable (with the `elf` feature) and passes to its test processes.
//!
//! The data these rules read and write (frames, reports, folded stacks) is the contract's, `ying-report`; that
//! crate, and the attribute macro that uses it, do not depend on these rules.

#[cfg(feature = "dwarf")]
pub mod debug_types;
pub mod excuses;
mod fold;
pub mod known_code;
pub mod names;
pub mod tasks;
mod trim;
pub mod types;
pub mod why;

pub use fold::{MAX_KEY, allocated_stacks, fold, retained_sites, shown_site_key, site_key, user_frame};
pub use known_code::{ExecutableStamp, KnownCode, OWN_CRATES, is_own_static, is_own_thread_local};
pub use trim::{
    LEAK_TEST_RUNNER, Trim, is_allocation_plumbing, is_allocator_entry, is_in_leak_test_runner, is_leak_test_runner,
    is_package_code, is_poll_frame, is_thread_entry, leak_site, relative_paths,
};
