//! `cargo ying list`: the tests a run with the same options would run, by binary, as cargo-nextest lists them.
//! Builds the binaries; runs no test and writes nothing under `<target-dir>/ying/`.

use crate::cli::ListArgs;
use crate::error::Result;
use crate::outputs::listing;
use crate::run::plan::Plan;
use crate::settings;
use crate::workspace::Workspace;
use ying_report::exit_code;

/// Runs `cargo ying list`; returns the exit code.
pub(crate) fn run(args: &ListArgs) -> Result<u8> {
    let cargo = args.filter.cargo.to_args();
    let workspace = Workspace::open(cargo.manifest_path.as_deref(), &cargo.lock_flags)?;
    let request = settings::request(&args.filter, cargo)?;
    listing::print(&Plan::make(&request, &workspace.metadata, None, |_| {})?);
    Ok(exit_code::OK)
}
