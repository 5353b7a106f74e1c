//! Riding cargo-nextest: the profile `cargo ying setup nextest` writes (`profile`), what the wrapper leaves of
//! each test for `cargo ying gate` (`record`), what `cargo ying test -P NAME` takes of a nextest profile
//! (`config`), and the test binaries a nextest archive holds (`archive`).

pub(crate) mod archive;
pub(crate) mod config;
pub(crate) mod profile;
pub(crate) mod record;
