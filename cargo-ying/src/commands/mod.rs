//! The subcommands of `cargo ying`, each tying the modules together for one job; they share code only through
//! those modules, never through each other.

pub(crate) mod accept;
pub(crate) mod diff;
pub(crate) mod gate;
pub(crate) mod list;
pub(crate) mod merge;
pub(crate) mod setup;
pub(crate) mod setup_script;
pub(crate) mod test;
pub(crate) mod wrap;
