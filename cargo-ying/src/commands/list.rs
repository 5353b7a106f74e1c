//! `cargo ying list`: the tests a run with the same options would run, by binary, as cargo-nextest lists them, or
//! nextest's JSON test list (`-T json`), or the binaries alone (`--list-type binaries-only`, none of them run, those
//! with their own harness included).
//! Builds the binaries; runs no test and writes nothing under `<target-dir>/ying/`.

use crate::cli::ListArgs;
use crate::error::Result;
use crate::outputs::list_json::{self, ListFormat, ListType};
use crate::outputs::listing;
use crate::run::select::build;
use crate::run::select::not_run;
use crate::run::select::partition;
use crate::run::select::plan::Plan;
use crate::settings;
use crate::workspace::Workspace;
use std::sync::Arc;
use ying_report::exit_code;

/// Runs `cargo ying list`; returns the exit code.
pub(crate) fn run(args: &ListArgs) -> Result<u8> {
    // SIGINT and SIGTERM stop the build whole (see `run::process::stop_on_interrupt`).
    crate::signals::catch();
    let cargo = args.filter.cargo.to_args();
    let workspace = Workspace::open(cargo.manifest_path.as_deref(), &cargo.lock_flags)?;
    let request = settings::request(&args.filter, cargo)?;
    let json = match args.list_type {
        ListType::BinariesOnly => {
            let built = build::build(&request.cargo, &workspace.metadata, None)?;
            let split = not_run::split(built.binaries, &workspace.metadata, request.cargo.selects_targets)?;
            // Every test binary, as nextest lists them: those with their own harness too, which `cargo ying test`
            // does not run (said on standard error).
            let mut binaries: Vec<_> = split.binaries.into_iter().chain(split.own_harness).map(Arc::new).collect();
            binaries.sort_by_cached_key(|binary| {
                let id = binary.binary_id();
                let (package, rank, kind, name) = partition::binary_order(&id);
                (package.to_owned(), rank, kind.to_owned(), name.to_owned())
            });
            if matches!(args.message_format, ListFormat::Human | ListFormat::Oneline) {
                for binary in &binaries {
                    println!("{}", binary.binary_id());
                }
                for target in &split.not_run {
                    eprintln!("{:>12} {}", "NOT RUN", not_run::describe(target));
                }
                return Ok(exit_code::OK);
            }
            list_json::binaries(&binaries, &built.meta, &workspace.metadata)
        }
        ListType::Full => {
            let plan = Plan::make(&request, &workspace.metadata, None, |_| {})?;
            if matches!(args.message_format, ListFormat::Human | ListFormat::Oneline) {
                listing::print(&plan, args.message_format == ListFormat::Oneline);
                return Ok(exit_code::OK);
            }
            list_json::tests(&plan, &request.selection, &workspace.metadata)
        }
    };
    let text = if args.message_format == ListFormat::JsonPretty {
        serde_json::to_string_pretty(&json)
    } else {
        serde_json::to_string(&json)
    };
    println!("{}", text.expect("a list is JSON"));
    Ok(exit_code::OK)
}
