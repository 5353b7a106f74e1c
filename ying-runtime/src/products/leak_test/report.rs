//! The report a leak test writes to `YING_REPORT_DIR` for `cargo ying`: what it measured, judged and retained, and
//! the process's top sampled stacks.

use super::plan::Plan;
use super::verdict::Findings;
use crate::base::thread::as_profiler;
use crate::read::stack_stats;
use crate::read::symbol_table::executable_address;
use crate::read::symbolize::{OWN_SOURCE, span_frames, symbolize};
use ying_report::report::{
    CycleEntry, DEFER_SYMBOLS_ENV, DeferredSymbols, LeakReport, Outcome, REPORT_DIR_ENV, RUN_TOKEN_ENV, RetainedSite,
    STARTED_EXTENSION, SampledStack, TaskEntry, TestIdentity,
};
use ying_report::{Frame, file_name_component};

/// Writes the report of `plan`'s test, which ended with `outcome` (and `message`), to [`REPORT_DIR_ENV`] when it
/// is set.
pub(super) fn write(
    plan: &Plan,
    findings: &Findings<'_>,
    outcome: Outcome,
    message: Option<String>,
    (retained_sites, tasks, cycles): (Vec<RetainedSite>, Vec<TaskEntry>, Vec<CycleEntry>),
) {
    let Some(dir) = std::env::var_os(REPORT_DIR_ENV) else { return };
    as_profiler(|| {
        let mut report = LeakReport::new(plan.identity.clone(), plan.attribution, plan.budgets);
        report.warmup = plan.warmup;
        report.iterations = plan.iterations;
        report.outcome = outcome;
        report.message = message;
        report.figures = findings.stats;
        report.excused_bytes = findings.excused_bytes;
        report.per_iteration = findings.per_iteration.to_vec();
        report.retained_sites = retained_sites;
        report.tasks = tasks;
        report.cycles = cycles;
        report.sampled_stacks = sampled_stacks(plan.test.manifest_dir);
        if report.sampled_stacks.iter().any(|stack| !stack.addresses.is_empty())
            || report.retained_sites.iter().any(|site| !site.addresses.is_empty())
        {
            report.deferred = Some(DeferredSymbols::new(OWN_SOURCE));
        }
        report.run_token = std::env::var(RUN_TOKEN_ENV).ok();
        report.notes.clone_from(&plan.notes);
        let dir = std::path::Path::new(&dir);
        let path = dir.join(file_name(&report.test, "json"));
        // Under a run that checks for the start mark, the report takes the mark's file: no file is made.
        let written = std::fs::create_dir_all(dir).and_then(|()| match report.run_token {
            Some(_) => report.write_over_mark(&path, &dir.join(file_name(&report.test, STARTED_EXTENSION))),
            None => report.write(&path),
        });
        if let Err(error) = written {
            eprintln!("ying: failed to write the report of `{}` to {}: {error}", report.test.name, path.display());
        }
        // The walker's rules, for the run's processes after this one.
        crate::hot::unwind::keep_rules();
    });
}

/// Leaves the mark of `plan`'s test starting in [`REPORT_DIR_ENV`], when a run that checks for it
/// ([`RUN_TOKEN_ENV`]) asked for reports: if the process ends before the test reports, the run knows.
pub(super) fn started(plan: &Plan) {
    let (Some(dir), Some(token)) = (std::env::var_os(REPORT_DIR_ENV), std::env::var_os(RUN_TOKEN_ENV)) else {
        return;
    };
    leave_start_mark(plan, std::path::Path::new(&dir), token.as_encoded_bytes(), false);
}

/// Leaves the mark of `plan`'s test starting in `dir`, holding `token`: over one left before, or (`exclusive`)
/// only where none is. Returns whether it was left; a failure to write it is said on standard error and counts as
/// left.
pub(super) fn leave_start_mark(plan: &Plan, dir: &std::path::Path, token: &[u8], exclusive: bool) -> bool {
    as_profiler(|| {
        let path = dir.join(file_name(&plan.identity, STARTED_EXTENSION));
        let written = std::fs::create_dir_all(dir).and_then(|()| {
            let mut options = std::fs::OpenOptions::new();
            options.write(true);
            if exclusive {
                options.create_new(true);
            } else {
                options.create(true).truncate(true);
            }
            std::io::Write::write_all(&mut options.open(&path)?, token)
        });
        match written {
            Ok(()) => true,
            Err(error) if exclusive && error.kind() == std::io::ErrorKind::AlreadyExists => false,
            Err(error) => {
                eprintln!("ying: failed to mark the start of `{}` in {}: {error}", plan.identity.name, path.display());
                true
            }
        }
    })
}

/// `package.crate.test.<extension>` (`package.bin-name.test.<extension>` in a binary), each part a file-name
/// component: two tests of one process never share a file name, nor do a library's test and a binary's of the
/// same crate name.
pub(super) fn file_name(test: &TestIdentity, extension: &str) -> String {
    let binary = match &test.bin_name {
        Some(bin) => format!("bin-{}", file_name_component(bin)),
        None => file_name_component(&test.krate),
    };
    format!("{}.{binary}.{}.{extension}", file_name_component(&test.package), file_name_component(&test.name))
}

/// The process's top stacks by allocated and by retained bytes, for flamegraphs. Under [`DEFER_SYMBOLS_ENV`], as
/// addresses in the executable where the platform allows (see [`SampledStack::addresses`]).
fn sampled_stacks(manifest_dir: &str) -> Vec<SampledStack> {
    const TOP: usize = 50;
    let ranked = stack_stats::ranked(TOP, &[stack_stats::Order::Allocated, stack_stats::Order::Retained]);
    let defer = std::env::var_os(DEFER_SYMBOLS_ENV).is_some();
    ranked
        .into_iter()
        .map(|ranked| {
            let addresses: Vec<u64> = if defer {
                ranked.ips.as_slice().iter().filter_map(|&ip| executable_address(ip)).collect()
            } else {
                Vec::new()
            };
            // Deferred stacks keep their span frames; cargo ying puts the code frames before them.
            let frames = if addresses.is_empty() {
                relative_frames(symbolize(&ranked.ips), manifest_dir)
            } else {
                relative_frames(span_frames(&ranked.ips), manifest_dir)
            };
            let stats = &ranked.stats;
            let mut stack = SampledStack::default();
            stack.retained_bytes = stats.retained_bytes();
            stack.retained_objects = stats.retained_objects();
            stack.allocated_bytes = stats.allocated_bytes();
            stack.allocated_objects = stats.allocated_objects();
            stack.frames = frames;
            stack.addresses = addresses;
            stack
        })
        .collect()
}

/// Source paths inside the test's package (or the working directory), made relative to it.
pub(super) fn relative_frames(frames: Vec<Frame>, manifest_dir: &str) -> Vec<Frame> {
    let cwd = std::env::current_dir().ok().map(|dir| dir.display().to_string());
    ying_frames::relative_paths(frames, &[manifest_dir, cwd.as_deref().unwrap_or_default()])
}

#[cfg(test)]
mod tests {
    use super::file_name;
    use ying_report::report::TestIdentity;

    #[test]
    fn a_librarys_test_and_a_binarys_of_one_crate_write_two_files() {
        let test = |bin: Option<&str>| TestIdentity::new("app", bin, "app::tests", "same_unit", "src/lib.rs", 1);
        assert_eq!(file_name(&test(None), "json"), "app.app.tests.same_unit.json");
        assert_eq!(file_name(&test(Some("app")), "json"), "app.bin-app.tests.same_unit.json");
        assert_eq!(file_name(&test(None), "started"), "app.app.tests.same_unit.started");
    }
}
