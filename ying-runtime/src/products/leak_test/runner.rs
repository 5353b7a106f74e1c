//! Running a leak test: warm-up runs, the measured runs in one scope that records every stack, and what the scope
//! retained read back by allocation site; then the verdict and the report.

use super::excuses::Excuses;
use super::plan::{LeakTest, Plan, default_attribution};
use super::report::{self, relative_frames};
use super::verdict::{self, Findings, Names, Verdict};
use super::why;
use crate::base::ids::{ScopeId, StackId};
use crate::base::thread::{THREAD, as_profiler};
use crate::hot::scope::{OpenScope, ScopeStats};
use crate::hot::{live, stacks};
use crate::read::symbolize::{allocated_type, name_test_body, span_frames, symbolize};
use std::cell::Cell;
use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use ying_report::Frame;
use ying_report::report::{CycleEntry, IterationFigures, Outcome, Owned, RetainedSite, TaskEntry};

/// What a test function returns: `()` or a `Result`.
#[doc(hidden)]
pub trait TestResult {
    fn is_success(&self) -> bool;

    /// What the test returned, in the test harness's words, when it is a failure.
    fn failure(&self) -> Option<String>;
}

impl TestResult for () {
    fn is_success(&self) -> bool {
        true
    }

    fn failure(&self) -> Option<String> {
        None
    }
}

/// A test harness takes a `Result` whose error is `Debug`, and says `Error: {error:?}`.
impl<T, E: core::fmt::Debug> TestResult for Result<T, E> {
    fn is_success(&self) -> bool {
        self.is_ok()
    }

    fn failure(&self) -> Option<String> {
        self.as_ref().err().map(|error| format!("Error: {error:?}"))
    }
}

/// What a test returning `impl Termination` reports (the attribute reports its value, as the test harness would).
impl TestResult for std::process::ExitCode {
    fn is_success(&self) -> bool {
        *self == Self::SUCCESS
    }

    fn failure(&self) -> Option<String> {
        (!self.is_success()).then(|| format!("{self:?}"))
    }
}

/// Why the body failed, for its report (the test harness prints it on standard error, which the test may have
/// closed): `what` happened (`panicked`), and the panic's message or the failure returned when there is one.
fn body_failure(plan: &Plan, what: &str, detail: Option<&str>) -> String {
    let name = plan.harness_name();
    match detail {
        Some(detail) => format!("ying: leak test `{name}` {what}: {detail}"),
        None => format!("ying: leak test `{name}` {what}"),
    }
}

/// The message of a panic, when its payload is text (as `panic!`'s is).
fn panic_message(payload: &(dyn core::any::Any + Send)) -> Option<&str> {
    payload.downcast_ref::<&str>().copied().or_else(|| payload.downcast_ref::<String>().map(String::as_str))
}

thread_local! {
    /// The leak test whose body this thread runs, if any.
    static RUNNING_HERE: Cell<Option<&'static LeakTest>> = const { Cell::new(None) };
}

/// Marks the thread as running a leak test's body until dropped.
struct OnThisThread {
    /// Other tests' scans leave this thread's stack unread.
    #[cfg(target_os = "linux")]
    _test_thread: crate::read::reach::TestThread,
}

impl OnThisThread {
    /// Refuses a leak test called from another's body: the two would share one measured scope, and under process
    /// attribution the inner test would wait forever for the lock the outer one holds.
    #[track_caller]
    fn enter(test: &'static LeakTest) -> Self {
        if let Some(outer) = RUNNING_HERE.with(Cell::get) {
            panic!(
                "ying: leak test `{inner}` was called from the body of leak test `{outer}`, and a leak test cannot \
                 run inside another; move the body of `{inner}` into a plain function and call that from both tests",
                inner = test.name,
                outer = outer.name,
            );
        }
        RUNNING_HERE.with(|running| running.set(Some(test)));
        Self {
            #[cfg(target_os = "linux")]
            _test_thread: crate::read::reach::TestThread::enter(),
        }
    }
}

impl Drop for OnThisThread {
    fn drop(&mut self) {
        let _ = RUNNING_HERE.try_with(|running| running.set(None));
    }
}

/// Runs a leak test. Called by the code `#[ying::leak_test]` generates; async tests reach it through the sync
/// function their test attribute (`#[tokio::test]`) generates, so the scope spans the whole runtime.
///
/// Its path is [`ying_frames::LEAK_TEST_RUNNER`]: stacks are trimmed at its frame.
#[doc(hidden)]
#[track_caller]
pub fn run<R: TestResult>(test: &'static LeakTest, mut body: impl FnMut() -> R) -> R {
    let _here = OnThisThread::enter(test);
    let plan = Plan::new(test, default_attribution());
    let _serial = plan.prepare();
    super::interposer::hand_over_to_leak_test();
    super::hook::install();
    // Stacks captured on the threads the body spawns end at their entry, as reports trim them.
    crate::read::symbol_table::end_stacks_at_thread_entries();
    report::started(&plan);
    let _running = super::exit::Running::enter(test);
    for _ in 0..plan.warmup {
        let result = body();
        if !result.is_success() {
            return result;
        }
    }
    // Stacks recorded in the measured runs stop at this frame (see `ThreadState::capture_limit`).
    let marker = 0u8;
    let _limit = CaptureLimit::set(core::hint::black_box(&marker));
    let mut session = Session::open(&plan);
    // What the measured runs' async bodies leave, looked at as each ends inside its runtime (`tasks`).
    let measuring = super::tasks::Measuring::enter(session.scope().id());
    let mut last = None;
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        for _ in 0..plan.iterations {
            session.before_iteration();
            let result = body();
            let success = result.is_success();
            session.after_iteration();
            last = Some(result);
            if !success {
                break;
            }
        }
    }));
    let measured = session.close();
    let tasks = measuring.tasks(plan.test.manifest_dir);
    let result = match outcome {
        Ok(()) => last.expect("at least one measured run"),
        Err(panic) => {
            let failure = body_failure(&plan, "panicked", panic_message(&*panic));
            report::write(
                &plan,
                &measured.findings(),
                Outcome::BodyFailed,
                Some(failure),
                (Vec::new(), tasks, Vec::new()),
            );
            resume_unwind(panic);
        }
    };
    if result.is_success() {
        measured.judge(&plan, tasks);
    } else {
        let failure = body_failure(&plan, "returned a failure", result.failure().as_deref());
        report::write(&plan, &measured.findings(), Outcome::BodyFailed, Some(failure), (Vec::new(), tasks, Vec::new()));
    }
    result
}

/// Marks the runner's frame as the outer end of the stacks captured on this thread, until dropped.
struct CaptureLimit(usize);

impl CaptureLimit {
    fn set(in_runner_frame: &u8) -> Self {
        let address = core::ptr::from_ref(in_runner_frame).addr();
        Self(THREAD.try_with(|thread| thread.capture_limit.replace(address)).unwrap_or(0))
    }
}

impl Drop for CaptureLimit {
    fn drop(&mut self) {
        let _ = THREAD.try_with(|thread| thread.capture_limit.set(self.0));
    }
}

/// The measured runs in progress.
pub(super) struct Session {
    scope: Option<OpenScope>,
    excuses: Excuses,
    per_iteration: Vec<IterationFigures>,
    at_start: ScopeStats,
    excused_at_start: u64,
}

/// The measured runs, closed.
pub(super) struct Measured {
    scope_id: ScopeId,
    stats: ScopeStats,
    excused_bytes: u64,
    excused_blocks: u64,
    per_iteration: Vec<IterationFigures>,
    excuses: Excuses,
}

impl Session {
    /// Opens the measured scope, recording every stack. Whatever the session itself needs while measuring is
    /// allocated before.
    pub(super) fn open(plan: &Plan) -> Self {
        let excuses = Excuses::new(plan.allow, plan.function_path(), plan.defers_excuses());
        let per_iteration = Vec::with_capacity(plan.iterations as usize);
        let scope = OpenScope::open(plan.attribution, true);
        Self { scope: Some(scope), excuses, per_iteration, at_start: ScopeStats::default(), excused_at_start: 0 }
    }

    pub(super) fn scope(&self) -> &OpenScope {
        self.scope.as_ref().expect("the session's scope is open until it closes")
    }

    /// Excused bytes and blocks the scope owns now.
    fn excused_now(&mut self) -> (u64, u64) {
        let id = self.scope().id();
        self.excuses.owned(id)
    }

    fn before_iteration(&mut self) {
        self.excused_at_start = self.excused_now().0;
        self.at_start = self.scope().figures();
    }

    fn after_iteration(&mut self) {
        let now = self.scope().figures();
        let excused_growth = self.excused_now().0 as i64 - self.excused_at_start as i64;
        self.per_iteration.push(IterationFigures::between(&self.at_start, &now, excused_growth));
    }

    pub(super) fn close(mut self) -> Measured {
        let (excused_bytes, excused_blocks) = self.excused_now();
        let scope = self.scope.take().expect("closed once");
        let scope_id = scope.id();
        let stats = scope.close();
        Measured {
            scope_id,
            stats,
            excused_bytes,
            excused_blocks,
            per_iteration: self.per_iteration,
            excuses: self.excuses,
        }
    }
}

impl Measured {
    /// The retained blocks of the closed scope grouped by stack, largest first, the body's frame named after the
    /// test `function`, each with why its blocks are still there; and the reference cycles among the lost ones.
    fn sites(&mut self, manifest_dir: &str, function: &str) -> (Vec<RetainedSite>, Vec<CycleEntry>) {
        as_profiler(|| {
            let blocks = live::owned_by(self.scope_id);
            // The blocks of code the excuses know by address (the standard library's backtraces) are not scanned.
            let known: Vec<bool> = blocks
                .iter()
                .map(|block| block.stack.is_some_and(|stack| self.excuses.known(stack).is_some()))
                .collect();
            let mut reach = why::Why::scan(&blocks, &known);
            let stack_at: HashMap<usize, Option<StackId>> =
                blocks.iter().map(|block| (block.address, block.stack)).collect();
            let mut by_stack: HashMap<Option<StackId>, (u64, u64, why::Whys)> = HashMap::new();
            // Lost blocks another site's lost block owns, by (the owner's stack, their own).
            let mut owned: HashMap<(Option<StackId>, Option<StackId>), (u64, u64)> = HashMap::new();
            for (block, &known) in blocks.iter().zip(&known) {
                let (bytes, count, whys) = by_stack.entry(block.stack).or_default();
                *bytes += block.owned as u64;
                *count += u64::from(block.owns_block);
                if let Some(reach) = reach.as_mut().filter(|_| !known) {
                    whys.add(reach.of(block.address), block.owned as u64, block.owns_block);
                    let owner = reach.owner(block.address).and_then(|owner| stack_at.get(&owner).copied());
                    if let Some(owner) = owner.filter(|&owner| owner != block.stack) {
                        let (bytes, count) = owned.entry((owner, block.stack)).or_default();
                        *bytes += block.owned as u64;
                        *count += u64::from(block.owns_block);
                    }
                }
            }
            let mut index_of = HashMap::with_capacity(by_stack.len());
            let mut sites: Vec<RetainedSite> = by_stack
                .into_iter()
                .enumerate()
                .map(|(index, (stack, (bytes, blocks, whys)))| {
                    index_of.insert(stack, index);
                    let mut site = self.site(stack, bytes, blocks, manifest_dir, function);
                    if let Some(reach) = &mut reach {
                        site.why = whys.into_list(reach);
                    }
                    site
                })
                .collect();
            for ((owner, stack), (bytes, blocks)) in owned {
                let (Some(&owner), Some(&site)) = (index_of.get(&owner), index_of.get(&stack)) else { continue };
                sites[owner].owns.push(Owned { site, bytes, blocks });
            }
            for site in &mut sites {
                site.owns.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.site.cmp(&b.site)));
            }
            RetainedSite::sort(&mut sites);
            let cycles = reach
                .as_ref()
                .map(|reach| reach.cycles(|address| stack_at.get(&address).copied().flatten()))
                .unwrap_or_default();
            (sites, cycles)
        })
    }

    /// The site of the blocks allocated at `stack`, named and typed (or left as addresses for the reader).
    fn site(
        &mut self,
        stack: Option<StackId>,
        bytes: u64,
        blocks: u64,
        manifest_dir: &str,
        function: &str,
    ) -> RetainedSite {
        if let Some(stack) = stack
            && let Some(addresses) = self.excuses.deferred(stack)
        {
            // Named and judged by the reader; the spans are what follows the code frames.
            let spans = stacks::ips(stack).map(|ips| span_frames(&ips)).unwrap_or_default();
            let spans = relative_frames(spans, manifest_dir);
            return RetainedSite::deferred(bytes, blocks, addresses, spans);
        }
        let (frames, type_name) = match stack.and_then(|stack| self.excuses.known(stack)) {
            Some(known) => (vec![Frame::new(known, None, None)], None),
            None => stack
                .and_then(stacks::ips)
                .map(|ips| {
                    let frames = relative_frames(name_test_body(symbolize(&ips), function), manifest_dir);
                    (frames, allocated_type(&ips))
                })
                .unwrap_or_default(),
        };
        let excused = stack.is_some_and(|stack| self.excuses.is_excused(stack));
        let mut site = RetainedSite::new(bytes, blocks, excused, frames);
        site.type_name = type_name;
        site
    }

    fn findings(&self) -> Findings<'_> {
        Findings {
            stats: self.stats,
            excused_bytes: self.excused_bytes,
            excused_blocks: self.excused_blocks,
            per_iteration: &self.per_iteration,
        }
    }

    /// Judges the budgets, reports (with the `tasks` the bodies left), and fails the test with the message when a budget was exceeded (for a
    /// `should_panic` test whose body did not panic, the message is printed and the harness fails the test for
    /// not panicking). The panic is located at the test function.
    #[track_caller]
    pub(super) fn judge(mut self, plan: &Plan, mut tasks: Vec<TaskEntry>) {
        let function = plan.function_path();
        let (sites, cycles) = self.sites(plan.test.manifest_dir, &function);
        // The threads it left running, told by their retained `main` closures (named here unless deferred, in which
        // case `cargo ying` tells them as it names the sites).
        tasks.extend(ying_frames::tasks::threads_left(&sites));
        let names = Names { harness: plan.harness_name(), function: &function, runtime: plan.test.runtime };
        let found = (tasks.as_slice(), cycles.as_slice());
        match verdict::judge(names, &plan.budgets, plan.lost_alone, &self.findings(), &sites, found) {
            Verdict::Passed => report::write(plan, &self.findings(), Outcome::Passed, None, (sites, tasks, cycles)),
            Verdict::Failed(message) => {
                let found = (sites, tasks, cycles);
                report::write(plan, &self.findings(), Outcome::Failed, Some(message.clone()), found);
                if plan.test.should_panic {
                    eprintln!("{message}");
                } else {
                    panic!("{message}");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_runner_is_where_the_contract_says_stacks_end() {
        static TEST: super::LeakTest = super::LeakTest::unconfigured("p", "p", "t", "f.rs", 1, "/");
        let runner = super::run::<()>;
        if core::hint::black_box(false) {
            runner(&TEST, || ());
        }
        let path = std::any::type_name_of_val(&runner);
        let rest = path.strip_prefix(ying_frames::LEAK_TEST_RUNNER);
        assert!(rest.is_some_and(|rest| rest.starts_with('<')), "{path}");
    }
}
