//! The runner behind `#[ying::leak_test]`: warm-up and measured runs of a test body in a scope, budgets judged on
//! exact figures, the allocation sites of retained memory named, and a report written for `cargo ying`.
//!
//! Stacks: the scope records the stack of every allocation it owns. That names the site of even a single small
//! leaked block, lets `allow` patterns excuse what they match, and recognises two kinds of memory that a test
//! retains without leaking it: libtest's captured output (a test's `println!` output is kept in a buffer its own
//! prints allocate) and values of thread-locals first used by the test (freed when the thread exits). Recording
//! costs a stack capture and an entry (in the thread's nursery, see `nursery`) per allocation (an allocation-bound
//! body runs about 2.7x to 3.3x slower than under the System allocator on one thread); the figures themselves are
//! exact either way.

use crate::allocator::is_installed;
use crate::measure::INSTALL_HINT;
use crate::report::{
    Budgets, DEFER_SYMBOLS_ENV, IterationFigures, LeakReport, Outcome, REPORT_DIR_ENV, REPORT_SCHEMA_VERSION,
    RetainedSite, SampledStack, TestId,
};
use crate::scope::{Attribution, OpenScope, ScopeStats};
use crate::size::{human, human_signed};
use crate::stack_stats;
use crate::symbolize::{Frame, executable_address, is_own_frame, span_frames, symbolize};
use crate::thread::{THREAD, as_profiler};
use crate::{stacks, table};
use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::{Mutex, MutexGuard};

/// The environment variable that sets the default attribution of leak tests: `process` or `thread`. `cargo ying`
/// sets `process`, since it runs each test in a process of its own.
pub const ATTRIBUTION_ENV: &str = "YING_ATTRIBUTION";

/// Frames of the standard library's output functions: memory they retain is libtest's captured output.
const CAPTURED_OUTPUT: &[&str] = &["std::io::stdio::print_to", "std::io::stdio::_print", "std::io::stdio::_eprint"];

/// Suffixes of the initialiser `thread_local!` generates (current and earlier toolchains): memory it allocates is
/// the thread-local's value, which lives until its thread exits.
const THREAD_LOCAL_INIT: &[&str] = &["::__rust_std_internal_init_fn", "::__init"];

/// Stacks shown per failure message, and frames per stack.
const SITES_SHOWN: usize = 5;
const FRAMES_SHOWN: usize = 8;

/// Process-attributed tests count every allocation in the process: two at once would count each other's.
static PROCESS_TESTS: Mutex<()> = Mutex::new(());

/// A leak test as `#[ying::leak_test]` describes it: identity and the arguments as written.
#[doc(hidden)]
#[derive(Debug)]
pub struct LeakTest {
    pub package: &'static str,
    pub module_path: &'static str,
    pub name: &'static str,
    pub file: &'static str,
    pub line: u32,
    pub manifest_dir: &'static str,
    /// Budgets as written; defaults are applied by the runner.
    pub budgets: Budgets,
    pub warmup: u32,
    /// `None`: one measured run, no growth budget by default.
    pub iterations: Option<u32>,
    pub attribution: Option<Attribution>,
    pub allow: &'static [&'static str],
    pub should_panic: bool,
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
            module_path,
            name,
            file,
            line,
            manifest_dir,
            budgets: Budgets {
                max_retained: None,
                max_peak: None,
                max_allocated: None,
                max_allocations: None,
                max_growth_per_iteration: None,
            },
            warmup: 0,
            iterations: None,
            attribution: None,
            allow: &[],
            should_panic: false,
        }
    }
}

/// What a test function returns: `()` or a `Result`.
#[doc(hidden)]
pub trait TestResult {
    fn is_success(&self) -> bool;
}

impl TestResult for () {
    fn is_success(&self) -> bool {
        true
    }
}

impl<T, E> TestResult for Result<T, E> {
    fn is_success(&self) -> bool {
        self.is_ok()
    }
}

/// The resolved plan of a run: budgets with defaults, attribution, iterations and stack recording.
struct Plan {
    test: &'static LeakTest,
    budgets: Budgets,
    attribution: Attribution,
    iterations: u32,
}

impl Plan {
    fn new(test: &'static LeakTest) -> Self {
        let mut budgets = test.budgets;
        match test.iterations {
            // One run: a leak test retains nothing unless told otherwise.
            None => budgets.max_retained = budgets.max_retained.or(Some(0)),
            // Several runs: growth is the leak signal; retained is checked only when written.
            Some(_) => budgets.max_growth_per_iteration = budgets.max_growth_per_iteration.or(Some(0)),
        }
        let attribution = test.attribution.unwrap_or_else(default_attribution);
        Self { test, budgets, attribution, iterations: test.iterations.unwrap_or(1).max(1) }
    }

    /// The test's name as the test harness lists it: the module path without the crate, then the function.
    fn harness_name(&self) -> String {
        match self.test.module_path.split_once("::") {
            Some((_, modules)) => format!("{modules}::{}", self.test.name),
            None => self.test.name.to_owned(),
        }
    }

    /// Checks the allocator, and makes the process-wide lazy allocations a body's first print would make.
    #[track_caller]
    fn prepare(&self) -> Option<MutexGuard<'static, ()>> {
        assert!(
            is_installed(),
            "ying: leak test `{}` cannot measure anything: the global allocator of this test binary is not ying's. \
             Add to the crate root of the test (or to the library, for unit tests):\n\n{INSTALL_HINT}\n",
            self.harness_name()
        );
        let _ = std::io::stdout();
        (self.attribution == Attribution::Process)
            .then(|| PROCESS_TESTS.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }

    /// Opens the measured scope, recording every stack.
    fn open(&self) -> OpenScope {
        OpenScope::open(self.attribution, true)
    }
}

/// `process` or `thread` from [`ATTRIBUTION_ENV`]; thread attribution when unset.
fn default_attribution() -> Attribution {
    match std::env::var(ATTRIBUTION_ENV).as_deref() {
        Ok("process") => Attribution::Process,
        Ok("thread") | Err(_) => Attribution::Thread,
        Ok(other) => panic!("ying: {ATTRIBUTION_ENV} must be `process` or `thread`, not `{other}`"),
    }
}

/// Which recorded stacks are excused: matched by an `allow` pattern, libtest's captured output, or a thread-local's
/// initial value.
struct Excuses {
    patterns: &'static [&'static str],
    verdicts: HashMap<u32, bool>,
}

impl Excuses {
    fn new(patterns: &'static [&'static str]) -> Self {
        Self { patterns, verdicts: HashMap::new() }
    }

    fn frames_are_excused(&self, frames: &[Frame]) -> bool {
        frames.iter().any(|frame| {
            CAPTURED_OUTPUT.iter().any(|name| frame.function.starts_with(name))
                || THREAD_LOCAL_INIT.iter().any(|suffix| frame.function.ends_with(suffix))
                || self.patterns.iter().any(|pattern| frame.function.contains(pattern))
        })
    }

    fn is_excused(&mut self, stack: u32) -> bool {
        if let Some(&verdict) = self.verdicts.get(&stack) {
            return verdict;
        }
        let frames = stacks::ips(stack).map(|ips| symbolize(&ips)).unwrap_or_default();
        let verdict = self.frames_are_excused(&frames);
        self.verdicts.insert(stack, verdict);
        verdict
    }

    /// Bytes and blocks scope `id` owns whose stacks are excused.
    fn owned(&mut self, id: u64) -> (u64, u64) {
        as_profiler(|| {
            let mut excused = (0, 0);
            for block in table::owned_by(id).iter() {
                if block.stack.is_some_and(|stack| self.is_excused(stack)) {
                    excused.0 += block.owned as u64;
                    excused.1 += u64::from(block.owns_block);
                }
            }
            excused
        })
    }
}

/// The measured runs in progress.
struct Session {
    plan: Plan,
    scope: Option<OpenScope>,
    excuses: Excuses,
    per_iteration: Vec<IterationFigures>,
    at_start: ScopeStats,
    excused_at_start: u64,
}

/// The measured runs, closed.
struct Measured {
    plan: Plan,
    scope_id: u64,
    stats: ScopeStats,
    excused_bytes: u64,
    excused_blocks: u64,
    per_iteration: Vec<IterationFigures>,
    excuses: Excuses,
}

impl Session {
    /// Opens the measured scope. Whatever the session itself needs while measuring is allocated before.
    fn open(plan: Plan, iterations: u32) -> Self {
        let excuses = Excuses::new(plan.test.allow);
        let per_iteration = Vec::with_capacity(iterations as usize);
        let scope = plan.open();
        Self { plan, scope: Some(scope), excuses, per_iteration, at_start: ScopeStats::default(), excused_at_start: 0 }
    }

    fn scope(&self) -> &OpenScope {
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
        let start = self.at_start;
        let allocated_bytes = now.allocated_bytes - start.allocated_bytes;
        let freed_bytes = now.freed_bytes - start.freed_bytes;
        self.per_iteration.push(IterationFigures {
            allocated_bytes,
            allocations: now.allocations - start.allocations,
            freed_bytes,
            frees: now.frees - start.frees,
            growth: allocated_bytes as i64 - freed_bytes as i64 - excused_growth,
            excused_growth,
        });
    }

    fn close(mut self) -> Measured {
        let (excused_bytes, excused_blocks) = self.excused_now();
        let scope = self.scope.take().expect("closed once");
        let scope_id = scope.id();
        let stats = scope.close();
        Measured {
            plan: self.plan,
            scope_id,
            stats,
            excused_bytes,
            excused_blocks,
            per_iteration: self.per_iteration,
            excuses: self.excuses,
        }
    }
}

/// One exceeded budget.
struct Breach {
    budget: &'static str,
    /// The budget as written: a size, or a count of allocations.
    limit: String,
    finding: String,
}

impl Measured {
    fn retained(&self) -> u64 {
        self.stats.retained_bytes.saturating_sub(self.excused_bytes)
    }

    fn breaches(&self) -> Vec<Breach> {
        let budgets = self.plan.budgets;
        let mut breaches = Vec::new();
        if let Some(limit) = budgets.max_retained
            && self.retained() > limit
        {
            let blocks = self.stats.retained_blocks.saturating_sub(self.excused_blocks);
            breaches.push(Breach {
                budget: "max_retained",
                limit: human(limit),
                finding: format!(
                    "retained {} in {blocks} block{}, {} over",
                    human(self.retained()),
                    plural(blocks),
                    human(self.retained() - limit)
                ),
            });
        }
        if let Some(limit) = budgets.max_peak
            && self.stats.peak_bytes > limit
        {
            breaches.push(Breach {
                budget: "max_peak",
                limit: human(limit),
                finding: format!(
                    "peaked at {}, {} over",
                    human(self.stats.peak_bytes),
                    human(self.stats.peak_bytes - limit)
                ),
            });
        }
        let largest = |figure: fn(&IterationFigures) -> u64| self.per_iteration.iter().map(figure).max().unwrap_or(0);
        let per_run = if self.per_iteration.len() > 1 { " in one measured run" } else { "" };
        if let Some(limit) = budgets.max_allocated {
            let allocated = largest(|it| it.allocated_bytes);
            if allocated > limit {
                breaches.push(Breach {
                    budget: "max_allocated",
                    limit: human(limit),
                    finding: format!("allocated {}{per_run}, {} over", human(allocated), human(allocated - limit)),
                });
            }
        }
        if let Some(limit) = budgets.max_allocations {
            let allocations = largest(|it| it.allocations);
            if allocations > limit {
                breaches.push(Breach {
                    budget: "max_allocations",
                    limit: limit.to_string(),
                    finding: format!("made {allocations} allocations{per_run}, {} over", allocations - limit),
                });
            }
        }
        if let Some(limit) = budgets.max_growth_per_iteration {
            let least = self.per_iteration.iter().map(|it| it.growth).min().unwrap_or(0);
            if least > limit as i64 {
                let growths: Vec<String> = self.per_iteration.iter().map(|it| it.growth.to_string()).collect();
                breaches.push(Breach {
                    budget: "max_growth_per_iteration",
                    limit: human(limit),
                    finding: format!(
                        "the heap grew in each of {} measured runs, by at least {} (bytes per run: {})",
                        self.per_iteration.len(),
                        human_signed(least),
                        growths.join(", ")
                    ),
                });
            }
        }
        breaches
    }

    /// The retained blocks of scope `id` grouped by stack, largest first.
    fn sites(&mut self, id: u64) -> Vec<RetainedSite> {
        as_profiler(|| {
            let mut by_stack: HashMap<Option<u32>, (u64, u64)> = HashMap::new();
            for block in table::owned_by(id).iter() {
                let (bytes, blocks) = by_stack.entry(block.stack).or_default();
                *bytes += block.owned as u64;
                *blocks += u64::from(block.owns_block);
            }
            let mut sites: Vec<RetainedSite> = by_stack
                .into_iter()
                .map(|(stack, (bytes, blocks))| {
                    let frames = stack
                        .and_then(stacks::ips)
                        .map(|ips| symbolize(&ips))
                        .map(|frames| relative_frames(frames, self.plan.test.manifest_dir))
                        .unwrap_or_default();
                    let excused = stack.is_some_and(|stack| self.excuses.is_excused(stack));
                    RetainedSite { bytes, blocks, excused, frames }
                })
                .collect();
            sites.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.frames.cmp(&b.frames)));
            sites
        })
    }

    fn message(&self, breaches: &[Breach], sites: &[RetainedSite]) -> String {
        let mut message = format!("ying: leak test `{}` exceeded its budget", self.plan.harness_name());
        if breaches.len() > 1 {
            message.push('s');
        }
        for breach in breaches {
            message.push_str(&format!("\n  {} = {}: {}", breach.budget, breach.limit, breach.finding));
        }
        if self.excused_bytes > 0 {
            message.push_str(&format!(
                "\n  (not counted: {} excused as captured test output, thread-local values or by `allow`)",
                human(self.excused_bytes)
            ));
        }
        let shown: Vec<&RetainedSite> = sites.iter().filter(|site| !site.excused).collect();
        if shown.is_empty() {
            return message;
        }
        message.push_str("\n\nretained memory by allocation site:");
        for site in shown.iter().take(SITES_SHOWN) {
            if site.blocks == 0 {
                message.push_str(&format!("\n  {} grown in blocks allocated before", human(site.bytes)));
            } else {
                message.push_str(&format!("\n  {} in {} block{}", human(site.bytes), site.blocks, plural(site.blocks)));
            }
            let test_function = format!("{}::{}", self.plan.test.module_path, self.plan.test.name);
            let frames = user_frames(&site.frames, &test_function);
            if frames.is_empty() {
                message.push_str("\n      (stack not recorded)");
            }
            for frame in frames {
                message.push_str(&format!("\n      {frame}"));
            }
        }
        if shown.len() > SITES_SHOWN {
            message.push_str(&format!("\n  ... and {} more sites", shown.len() - SITES_SHOWN));
        }
        message
    }

    fn report(&self, outcome: Outcome, message: Option<String>, retained_sites: Vec<RetainedSite>) {
        let Some(dir) = std::env::var_os(REPORT_DIR_ENV) else { return };
        as_profiler(|| {
            let test = self.plan.test;
            let krate = test.module_path.split("::").next().unwrap_or(test.module_path);
            let report = LeakReport {
                schema_version: REPORT_SCHEMA_VERSION,
                test: TestId {
                    package: test.package.to_owned(),
                    krate: krate.to_owned(),
                    module_path: test.module_path.to_owned(),
                    name: self.plan.harness_name(),
                    file: test.file.to_owned(),
                    line: test.line,
                },
                attribution: self.plan.attribution,
                budgets: self.plan.budgets,
                warmup: test.warmup,
                iterations: self.plan.iterations,
                outcome,
                message,
                figures: self.stats,
                excused_bytes: self.excused_bytes,
                per_iteration: self.per_iteration.clone(),
                retained_sites,
                sampled_stacks: sampled_stacks(test.manifest_dir),
            };
            let file_name = format!("{}.{krate}.{}.json", test.package, report.test.name.replace("::", "."));
            let path = std::path::Path::new(&dir).join(file_name);
            if let Err(error) = write_report(&path, &report) {
                eprintln!("ying: failed to write the report of `{}` to {}: {error}", report.test.name, path.display());
            }
        });
    }
}

fn plural(count: u64) -> &'static str {
    if count == 1 { "" } else { "s" }
}

/// Writes `report` as JSON next to `path` and renames it into place, so a reader never sees half a report.
fn write_report(path: &std::path::Path, report: &LeakReport) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let json = serde_json::to_vec_pretty(report).map_err(std::io::Error::other)?;
    let partial = path.with_extension("json.partial");
    std::fs::write(&partial, json)?;
    std::fs::rename(&partial, path)
}

/// The process's top stacks by allocated and by retained bytes, for flamegraphs. Under [`DEFER_SYMBOLS_ENV`], as
/// addresses in the executable where the platform allows (see [`SampledStack::addresses`]).
fn sampled_stacks(manifest_dir: &str) -> Vec<SampledStack> {
    const TOP: usize = 50;
    let mut ranked = stack_stats::ranked(TOP, stack_stats::Order::Allocated);
    for stack in stack_stats::ranked(TOP, stack_stats::Order::Retained) {
        if !ranked.iter().any(|known| known.index == stack.index) {
            ranked.push(stack);
        }
    }
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
            SampledStack {
                retained_bytes: stats.retained_bytes(),
                retained_objects: stats.retained_objects(),
                allocated_bytes: stats.allocated_bytes(),
                allocated_objects: stats.allocated_objects(),
                frames,
                addresses,
            }
        })
        .collect()
}

/// Source paths inside the test's package (or the working directory), made relative to it.
pub fn relative_frames(mut frames: Vec<Frame>, manifest_dir: &str) -> Vec<Frame> {
    let cwd = std::env::current_dir().ok().map(|dir| dir.display().to_string());
    for frame in &mut frames {
        if let Some(file) = &frame.file {
            let relative = [Some(manifest_dir), cwd.as_deref()]
                .into_iter()
                .flatten()
                .find_map(|base| file.strip_prefix(base)?.strip_prefix(['/', '\\']));
            if let Some(relative) = relative {
                frame.file = Some(relative.to_owned());
            }
        }
    }
    frames
}

/// The frames worth showing in a failure message: the test package's own code between the allocation and the
/// test runner (frames whose source path [`relative_frames`] made relative), at most [`FRAMES_SHOWN`]. Memory a
/// dependency or the standard library allocated on its own shows the frames where it was allocated instead. The
/// closure the test's body runs in is shown as the test function itself.
fn user_frames(frames: &[Frame], test_function: &str) -> Vec<String> {
    let is_own_code = |frame: &Frame| {
        // System libraries record paths relative to their own build (`./nptl/pthread_create.c`).
        frame.file.as_deref().is_some_and(|file| !std::path::Path::new(file).is_absolute() && !file.starts_with('.'))
            && !frame.function.starts_with("__rust")
    };
    let outside_the_runner =
        || frames.iter().take_while(|frame| !is_own_frame(frame) && !frame.function.starts_with("test::"));
    let user: Vec<&Frame> = outside_the_runner().filter(|frame| is_own_code(frame)).take(FRAMES_SHOWN).collect();
    let shown = if user.is_empty() { outside_the_runner().take(FRAMES_SHOWN).collect() } else { user };
    let mut lines = shown
        .into_iter()
        .map(|frame| {
            // `module::test::{{closure}}` (the body, possibly an async block in it) reads as the test itself.
            let function = frame.function.as_str();
            let is_body =
                function.strip_prefix(test_function).is_some_and(|rest| rest.split("::{{closure}}").all(str::is_empty));
            let function = if is_body { test_function } else { function };
            Frame::new(function, frame.file.clone(), frame.line).to_string()
        })
        .collect::<Vec<_>>();
    // An async body and the test function that polls it can land on the same line.
    lines.dedup();
    lines
}

impl Measured {
    /// Judges the budgets, reports, and fails the test with the message when a budget was exceeded (for a
    /// `should_panic` test whose body did not panic, the message is printed and the harness fails the test for
    /// not panicking). The panic is located at the test function.
    #[track_caller]
    fn judge(mut self) {
        let breaches = self.breaches();
        let sites = self.sites(self.scope_id);
        if breaches.is_empty() {
            self.report(Outcome::Passed, None, sites);
            return;
        }
        let message = self.message(&breaches, &sites);
        self.report(Outcome::Failed, Some(message.clone()), sites);
        if self.plan.test.should_panic {
            eprintln!("{message}");
        } else {
            panic!("{message}");
        }
    }

    fn body_failed(self) {
        self.report(Outcome::BodyFailed, None, Vec::new());
    }
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

/// Runs a leak test. Called by the code `#[ying::leak_test]` generates; async tests reach it through the sync
/// function their test attribute (`#[tokio::test]`) generates, so the scope spans the whole runtime.
#[doc(hidden)]
#[track_caller]
pub fn run<R: TestResult>(test: &'static LeakTest, mut body: impl FnMut() -> R) -> R {
    let plan = Plan::new(test);
    let _serial = plan.prepare();
    for _ in 0..test.warmup {
        let result = body();
        if !result.is_success() {
            return result;
        }
    }
    let iterations = plan.iterations;
    // Stacks recorded in the measured runs stop at this frame (see `ThreadState::capture_limit`).
    let marker = 0u8;
    let _limit = CaptureLimit::set(core::hint::black_box(&marker));
    let mut session = Session::open(plan, iterations);
    let mut last = None;
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        for _ in 0..iterations {
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
    let result = match outcome {
        Ok(()) => last.expect("at least one measured run"),
        Err(panic) => {
            measured.body_failed();
            resume_unwind(panic);
        }
    };
    if result.is_success() {
        measured.judge();
    } else {
        measured.body_failed();
    }
    result
}
