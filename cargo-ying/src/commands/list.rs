//! `cargo ying list`: the tests a run with the same options would run, by binary, as cargo-nextest lists them.
//! Builds the binaries; runs no test and writes nothing under `<target-dir>/ying/`.

use crate::cli::ListArgs;
use crate::discover::Selection;
use crate::error::Result;
use crate::outputs::listing;
use crate::plan::Plan;
use crate::workspace::Workspace;
use ying_report::exit_code;

/// Runs `cargo ying list`; returns the exit code.
pub fn run(args: ListArgs) -> Result<u8> {
    let filter = &args.filter;
    let workspace = Workspace::open(&filter.cargo)?;
    let selection = Selection::new(&filter.filters, &filter.filtersets, &filter.test_args)?;
    let plan = Plan::make(filter, &selection, &workspace.metadata, None, |_| {})?;
    listing::print(&plan);
    Ok(exit_code::OK)
}
