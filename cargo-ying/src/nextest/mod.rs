//! Riding cargo-nextest: the profile `cargo ying setup nextest` writes (`profile`), the gate's reading of what each
//! test leaves (`record`), what `cargo ying test -P NAME` takes of a nextest profile (`config`), and the test binaries
//! a nextest archive holds (`archive`). The profile's setup script is a command (`commands::setup_script`).

pub(crate) mod archive;
pub(crate) mod config;
pub(crate) mod profile;
pub(crate) mod record;
