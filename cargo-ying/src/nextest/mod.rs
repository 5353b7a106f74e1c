//! Riding cargo-nextest: the profile `cargo ying setup nextest` writes (`profile`), and what the wrapper leaves of
//! each test for `cargo ying gate` (`record`).

pub(crate) mod profile;
pub(crate) mod record;
