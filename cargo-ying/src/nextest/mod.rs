//! Riding cargo-nextest: the profile `cargo ying setup nextest` writes (`profile`), what the wrapper leaves of
//! each test for `cargo ying gate` (`record`), and what `cargo ying test -P NAME` takes of a nextest profile
//! (`config`).

pub(crate) mod config;
pub(crate) mod profile;
pub(crate) mod record;
