//! The plan of a leak test: what `#[ying::leak_test]` wrote, resolved through the table of the attribute's arguments
//! (`ying_report::arguments`) into budgets with their defaults, runs, attribution and excuses.

use crate::hot::allocator::is_installed;
use crate::products::measure::install_hint;
use std::sync::{Mutex, MutexGuard, OnceLock};
use ying_report::arguments::{self, Value, Written};
use ying_report::report::{
    ATTRIBUTION_ENV, Attribution, Budgets, DEFER_SYMBOLS_ENV, TestIdentity, allow_patterns, task_budgets,
};

/// Process-attributed tests count every allocation in the process: two at once would count each other's.
static PROCESS_TESTS: Mutex<()> = Mutex::new(());

/// A leak test as `#[ying::leak_test]` describes it: identity and the arguments as written.
#[doc(hidden)]
#[derive(Debug)]
pub struct LeakTest {
    pub package: &'static str,
    /// `CARGO_BIN_NAME` of the test's binary: set in binaries and examples, `None` elsewhere.
    pub bin_name: Option<&'static str>,
    pub module_path: &'static str,
    pub name: &'static str,
    pub file: &'static str,
    pub line: u32,
    pub manifest_dir: &'static str,
    /// The arguments as written, each by its name in `ying_report::arguments::ARGUMENTS`; the plan resolves them
    /// through that table and applies the defaults.
    pub arguments: &'static [(&'static str, Value)],
    pub should_panic: bool,
    /// The path the test's crate names the runtime by (`ying`, or what `crate = ".."` gave): messages that name a
    /// fix write it so.
    pub runtime: &'static str,
}

impl LeakTest {
    /// A test with no argument written (`#[ying::leak_test]` alone), for code that calls the runner itself.
    pub const fn unconfigured(
        package: &'static str,
        module_path: &'static str,
        name: &'static str,
        file: &'static str,
        line: u32,
        manifest_dir: &'static str,
    ) -> Self {
        Self {
            package,
            bin_name: None,
            module_path,
            name,
            file,
            line,
            manifest_dir,
            arguments: &[],
            should_panic: false,
            runtime: "ying",
        }
    }

    /// The arguments as written, resolved through the table; a list the table does not allow (which only code
    /// written by hand against `__private` can make) fails the test, naming it.
    fn written(&self) -> Written {
        arguments::resolve(self.arguments)
            .unwrap_or_else(|error| panic!("ying: the arguments of leak test `{}` cannot be read: {error}", self.name))
    }
}

/// The workspace's `allow` patterns, which `cargo ying` passes every test process
/// ([`ALLOW_ENV`](ying_report::report::ALLOW_ENV)), read once.
///
/// # Panics
///
/// When the variable is set but not a list of patterns: `cargo ying` checks them before it sets it, so whoever set
/// it by hand is told.
fn workspace_allow() -> &'static [&'static str] {
    static PATTERNS: OnceLock<Vec<&'static str>> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let patterns = allow_patterns().unwrap_or_else(|why| panic!("ying: {why}"));
        // Kept for the process's life, as the attribute's patterns are.
        patterns.into_iter().map(|pattern| &*Box::leak(pattern.into_boxed_str())).collect()
    })
}

/// The workspace's budgets of async tasks, (leaked, lingering), which `cargo ying` passes every test process
/// ([`TASK_BUDGETS_ENV`](ying_report::report::TASK_BUDGETS_ENV)).
///
/// # Panics
///
/// When the variable is set but not of its form, as [`workspace_allow`].
fn workspace_task_budgets() -> (Option<u64>, Option<u64>) {
    task_budgets().unwrap_or_else(|why| panic!("ying: {why}"))
}

/// A test's `allow` patterns (`written`, the attribute's) with the workspace's after them.
fn with_workspace_allow(written: &'static [&'static str]) -> &'static [&'static str] {
    let workspace = workspace_allow();
    match (written.is_empty(), workspace.is_empty()) {
        (_, true) => written,
        (true, false) => workspace,
        // One test a process: the joined list is made once.
        (false, false) => Box::leak(written.iter().chain(workspace).copied().collect::<Box<[_]>>()),
    }
}

/// The resolved plan of a run: budgets with defaults, attribution, runs and excuses.
pub(super) struct Plan {
    pub(super) test: &'static LeakTest,
    pub(super) identity: TestIdentity,
    pub(super) budgets: Budgets,
    pub(super) attribution: Attribution,
    /// Unmeasured runs of the body before the measured ones.
    pub(super) warmup: u32,
    pub(super) iterations: u32,
    /// Patterns of the function names whose retained memory is excused: the attribute's, then the workspace's
    /// ([`with_workspace_allow`]).
    pub(super) allow: &'static [&'static str],
    /// What the report says of how the figures were taken (see `LeakReport::notes`).
    pub(super) notes: Vec<String>,
    /// The budget of a kind the attribute wrote (`max_lost`, `max_held`) while it left `max_retained` to its
    /// default: a breach of that says so.
    pub(super) lost_alone: Option<&'static str>,
}

impl Plan {
    /// The plan of `test`, whose attribution defaults to `default_attribution`.
    pub(super) fn new(test: &'static LeakTest, default_attribution: Attribution) -> Self {
        let written = test.written();
        let kind_budget = match (written.budgets.max_lost, written.budgets.max_held) {
            (Some(_), _) => Some("max_lost"),
            (None, Some(_)) => Some("max_held"),
            (None, None) => None,
        };
        let lost_alone = kind_budget.filter(|_| written.budgets.max_retained.is_none());
        Self {
            test,
            identity: TestIdentity::new(test.package, test.bin_name, test.module_path, test.name, test.file, test.line),
            lost_alone,
            budgets: budgets_with_defaults(
                with_task_defaults(written.budgets, workspace_task_budgets()),
                written.iterations.is_some(),
            ),
            attribution: written.attribution.unwrap_or(default_attribution),
            warmup: written.warmup,
            iterations: written.iterations.unwrap_or(1).max(1),
            allow: with_workspace_allow(written.allow),
            notes: Vec::new(),
        }
    }

    /// The plan of `test` measured from outside (see `unannotated`): no budgets, one run, process attribution.
    pub(super) fn unannotated(test: &'static LeakTest) -> Self {
        let written = test.written();
        Self {
            test,
            identity: TestIdentity::new(test.package, test.bin_name, test.module_path, test.name, test.file, test.line),
            budgets: written.budgets,
            lost_alone: None,
            attribution: Attribution::Process,
            warmup: written.warmup,
            iterations: 1,
            allow: with_workspace_allow(written.allow),
            notes: Vec::new(),
        }
    }

    /// Whether the stacks of retained memory are left for the reader to name and excuse (see
    /// `RetainedSite::addresses`) instead of symbolised in the test's process: in a run that defers symbols, when no
    /// budget that excused bytes are taken out of is set, so that the excuses cannot change the verdict.
    pub(super) fn defers_excuses(&self) -> bool {
        self.budgets.max_retained.is_none()
            && self.budgets.max_growth_per_iteration.is_none()
            && std::env::var_os(DEFER_SYMBOLS_ENV).is_some()
    }

    /// The test's name as the test harness lists it.
    pub(super) fn harness_name(&self) -> &str {
        &self.identity.name
    }

    /// The test function's path: `module::path::name`.
    pub(super) fn function_path(&self) -> String {
        self.identity.function_path()
    }

    /// Checks the allocator, and makes the process-wide lazy allocations a body's first print would make. Under
    /// process attribution, holds the lock that keeps two such tests of one process from running at once.
    #[track_caller]
    pub(super) fn prepare(&self) -> Option<MutexGuard<'static, ()>> {
        assert!(
            is_installed(),
            "ying: leak test `{}` cannot measure anything: the global allocator of this test binary is not ying's. \
             Add to the crate root of the test (or to the library, for unit tests):\n\n{}\n",
            self.harness_name(),
            install_hint(self.test.runtime)
        );
        let _ = std::io::stdout();
        (self.attribution == Attribution::Process)
            .then(|| PROCESS_TESTS.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }
}

/// The budgets written, with the defaults: one run retains nothing unless told otherwise; with `iterations`,
/// growth is the leak signal and retained memory is checked only when written.
pub(super) fn budgets_with_defaults(mut budgets: Budgets, iterated: bool) -> Budgets {
    if iterated {
        budgets.max_growth_per_iteration = budgets.max_growth_per_iteration.or(Some(0));
    } else {
        budgets.max_retained = budgets.max_retained.or(Some(0));
    }
    budgets
}

/// The budgets of async tasks: those written, else the `workspace`'s (leaked, lingering), else none leaked and the
/// lingering ones unchecked.
fn with_task_defaults(mut budgets: Budgets, workspace: (Option<u64>, Option<u64>)) -> Budgets {
    budgets.max_leaked_tasks = budgets.max_leaked_tasks.or(workspace.0).or(Some(0));
    budgets.max_lingering_tasks = budgets.max_lingering_tasks.or(workspace.1);
    budgets
}

/// `process` or `thread` from [`ATTRIBUTION_ENV`]; thread attribution when unset.
pub(super) fn default_attribution() -> Attribution {
    match std::env::var(ATTRIBUTION_ENV).as_deref() {
        Ok("process") => Attribution::Process,
        Ok("thread") | Err(_) => Attribution::Thread,
        Ok(other) => panic!("ying: {ATTRIBUTION_ENV} must be `process` or `thread`, not `{other}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::{LeakTest, Plan, budgets_with_defaults, with_task_defaults};
    use ying_report::arguments::Value;
    use ying_report::report::{Attribution, Budgets};

    #[test]
    fn one_run_retains_nothing_and_iterations_gate_growth_by_default() {
        let single = budgets_with_defaults(Budgets::default(), false);
        assert_eq!((single.max_retained, single.max_growth_per_iteration), (Some(0), None));
        let iterated = budgets_with_defaults(Budgets::default(), true);
        assert_eq!((iterated.max_retained, iterated.max_growth_per_iteration), (None, Some(0)));
        let written = Budgets { max_retained: Some(64), max_growth_per_iteration: Some(8), ..Budgets::default() };
        assert_eq!(budgets_with_defaults(written, true), written);
        assert_eq!(budgets_with_defaults(written, false), written);
    }

    #[test]
    fn no_task_may_leak_by_default_and_the_attribute_wins_over_the_workspace() {
        let none = with_task_defaults(Budgets::default(), (None, None));
        assert_eq!((none.max_leaked_tasks, none.max_lingering_tasks), (Some(0), None));
        let workspace = with_task_defaults(Budgets::default(), (Some(2), Some(5)));
        assert_eq!((workspace.max_leaked_tasks, workspace.max_lingering_tasks), (Some(2), Some(5)));
        let written = Budgets { max_leaked_tasks: Some(1), max_lingering_tasks: Some(0), ..Budgets::default() };
        let written = with_task_defaults(written, (Some(2), Some(5)));
        assert_eq!((written.max_leaked_tasks, written.max_lingering_tasks), (Some(1), Some(0)));
    }

    #[test]
    fn a_plan_resolves_the_arguments_written_and_applies_the_defaults() {
        static TEST: LeakTest = LeakTest {
            arguments: &[
                ("iterations", Value::Number(3)),
                ("warmup", Value::Number(2)),
                ("attribution", Value::Text("process")),
                ("allow", Value::List(&["regex::"])),
                ("max_peak", Value::Number(4096)),
            ],
            ..LeakTest::unconfigured("app", "app::tests", "cache", "src/lib.rs", 3, "/w")
        };
        let plan = Plan::new(&TEST, Attribution::Thread);
        assert_eq!((plan.warmup, plan.iterations, plan.attribution), (2, 3, Attribution::Process));
        assert_eq!(plan.allow, ["regex::"]);
        let budgets = Budgets {
            max_peak: Some(4096),
            max_growth_per_iteration: Some(0),
            max_leaked_tasks: Some(0),
            ..Budgets::default()
        };
        assert_eq!(plan.budgets, budgets);
    }

    #[test]
    #[should_panic = "ying: the arguments of leak test `cache` cannot be read: `max_retain` is not an argument"]
    fn arguments_the_table_does_not_allow_fail_the_test_naming_it() {
        static TEST: LeakTest = LeakTest {
            arguments: &[("max_retain", Value::Number(0))],
            ..LeakTest::unconfigured("app", "app::tests", "cache", "src/lib.rs", 3, "/w")
        };
        let _ = Plan::new(&TEST, Attribution::Thread);
    }

    #[test]
    fn a_plan_names_its_test_as_the_harness_does() {
        static TEST: LeakTest = LeakTest::unconfigured("app", "app::cache::tests", "evicts", "src/cache.rs", 9, "/w");
        let plan = Plan::new(&TEST, Attribution::Process);
        assert_eq!(plan.harness_name(), "cache::tests::evicts");
        assert_eq!(plan.function_path(), "app::cache::tests::evicts");
        assert_eq!((plan.attribution, plan.iterations), (Attribution::Process, 1));
    }
}
