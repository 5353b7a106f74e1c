//! The subcommands of `cargo ying`, each tying the modules together for one job.

pub mod accept;
pub mod diff;
pub mod list;
pub mod merge;
pub mod test;
