//! The verdict on a leak test: its budgets judged against its exact figures, and the failure message that names
//! each exceeded budget and the sites of the retained memory. A pure function of budgets, figures and sites.

use crate::read::symbolize::{is_own_frame, name_test_body};
use ying_frames::is_package_code;
use ying_report::report::{
    Budgets, CycleEntry, IterationFigures, Reach, RetainedSite, ScopeStats, TaskEntry, TaskKind,
};
use ying_report::{ByteSize, Frame, SignedByteSize};

/// Stacks shown per failure message, and frames per stack; tasks shown.
const SITES_SHOWN: usize = 5;
const TASKS_SHOWN: usize = 5;
const FRAMES_SHOWN: usize = 8;

/// What the measured runs of a test found.
#[derive(Clone, Copy, Debug)]
pub(super) struct Findings<'a> {
    /// Exact figures of the measured runs as a whole.
    pub(super) stats: ScopeStats,
    /// Retained bytes and blocks that are excused (see `excuses`).
    pub(super) excused_bytes: u64,
    pub(super) excused_blocks: u64,
    /// Exact figures of each measured run.
    pub(super) per_iteration: &'a [IterationFigures],
}

impl Findings<'_> {
    /// Retained bytes as the budget judges them.
    fn retained(&self) -> u64 {
        self.stats.judged_retained_bytes(self.excused_bytes)
    }

    /// Retained blocks as the budget judges them.
    fn retained_blocks(&self) -> u64 {
        self.stats.judged_retained_blocks(self.excused_blocks)
    }
}

/// Which test the message is about: its name as the harness lists it, its function's path (the closure the body
/// runs in is shown as the function itself), and the path its crate names the runtime by (`ying`, or what
/// `crate = ".."` gave), which the fix a message names is written with.
#[derive(Clone, Copy, Debug)]
pub(super) struct Names<'a> {
    pub(super) harness: &'a str,
    pub(super) function: &'a str,
    pub(super) runtime: &'a str,
}

/// The verdict: passed, or failed with the message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    Passed,
    Failed(String),
}

/// Judges `budgets` against `findings` and the async `tasks` the body left; a failure's message lists the exceeded
/// budgets, the tasks and the largest retained `sites` that are not excused. `lost_alone`: the budget of a kind the attribute wrote (`max_lost`, `max_held`) while
/// it left `max_retained` to its default (0 B for one run), which a breach of that then says, with the fix.
pub(super) fn judge(
    names: Names<'_>,
    budgets: &Budgets,
    lost_alone: Option<&str>,
    findings: &Findings<'_>,
    sites: &[RetainedSite],
    (tasks, cycles): (&[TaskEntry], &[CycleEntry]),
) -> Verdict {
    let judged = || sites.iter().filter(|site| !site.excused);
    let lost = judged().map(RetainedSite::lost_bytes).sum();
    let held = judged().map(RetainedSite::held_bytes).sum();
    let mut breaches = breaches(budgets, findings, lost, held);
    breaches.extend(task_breaches(budgets, tasks));
    if let Some(written) = lost_alone
        && let Some(breach) = breaches.iter_mut().find(|breach| breach.budget == "max_retained")
    {
        breach.finding.push_str(&format!(
            " (0 B is the default, which `{written}` does not relax: write `max_retained = \"{}\"` too to allow what \
             the test keeps reachable)",
            ByteSize::new(findings.retained().next_power_of_two()).rounded()
        ));
    }
    if breaches.is_empty() {
        Verdict::Passed
    } else {
        Verdict::Failed(message(names, &breaches, findings, sites, (tasks, cycles)))
    }
}

/// The exceeded budgets of tasks: more leaked or lingering than allowed.
fn task_breaches(budgets: &Budgets, tasks: &[TaskEntry]) -> Vec<Breach> {
    let budgeted = [
        ("max_leaked_tasks", budgets.max_leaked_tasks, TaskKind::Leaked, "pending, and nothing but itself can wake it"),
        (
            "max_lingering_tasks",
            budgets.max_lingering_tasks,
            TaskKind::Lingering,
            "pending, and something else can still wake it",
        ),
    ];
    let mut breaches = Vec::new();
    for (budget, limit, kind, meaning) in budgeted {
        let count = tasks.iter().filter(|task| task.kind == kind).count() as u64;
        if let Some(limit) = limit
            && count > limit
        {
            let word = kind.word();
            breaches.push(Breach {
                budget,
                limit: limit.to_string(),
                finding: format!("{count} task{} {word} ({meaning}), {} over", plural(count), count - limit),
            });
        }
    }
    breaches
}

/// The tasks the body left, leaked first, each with its future, spawn line and bytes; and what to do of a leaked one.
fn tasks_section(names: Names<'_>, tasks: &[TaskEntry], breaches: &[Breach]) -> String {
    let rank = |task: &&TaskEntry| match task.kind {
        TaskKind::Leaked => 0,
        TaskKind::Lingering => 1,
        _ => 2,
    };
    let mut shown: Vec<&TaskEntry> = tasks.iter().collect();
    shown.sort_by_key(rank);
    let threads = tasks.iter().any(|task| task.kind == TaskKind::Thread);
    let mut section = String::from(if threads {
        "\n\nasync tasks and threads the body left:"
    } else {
        "\n\nasync tasks the body left:"
    });
    let lines = ying_report::report::task_lines(shown);
    for line in lines.iter().take(TASKS_SHOWN) {
        section.push_str(&format!("\n  {line}"));
    }
    if lines.len() > TASKS_SHOWN {
        section.push_str(&format!("\n  ... and {} more", lines.len() - TASKS_SHOWN));
    }
    let breached = |budget: &str| breaches.iter().any(|breach| breach.budget == budget);
    if breached("max_leaked_tasks") {
        section.push_str(&format!(
            "\n\na leaked task waits for what only it, or another leaked task, holds (its own channel's sender, the \
             handle of a task that awaits it): it will never end, and in a runtime that outlives the test it is never \
             freed. Drop what it waits for, or keep its `JoinHandle` and `abort()` it; a leak intended is allowed with \
             `#[{}::leak_test(max_leaked_tasks = N)]`",
            names.runtime
        ));
    }
    if breached("max_lingering_tasks") {
        section.push_str(&format!(
            "\n\na lingering task outlives the test's body, which does not wait for it: await or `abort()` its \
             `JoinHandle` before the body ends, or allow it with `#[{}::leak_test(max_lingering_tasks = N)]`",
            names.runtime
        ));
    }
    section
}

/// One exceeded budget.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Breach {
    budget: &'static str,
    /// The budget as written: a size, or a count of allocations.
    limit: String,
    finding: String,
}

/// The exceeded budgets; `lost`: retained bytes that nothing reaches any more, `held`: those a static or a
/// thread-local holds, excused sites left out.
fn breaches(budgets: &Budgets, findings: &Findings<'_>, lost: u64, held: u64) -> Vec<Breach> {
    let mut breaches = Vec::new();
    let size = |bytes: u64| ByteSize::new(bytes).to_string();
    let retained = findings.retained();
    if let Some(limit) = budgets.max_retained
        && retained > limit
    {
        let blocks = findings.retained_blocks();
        breaches.push(Breach {
            budget: "max_retained",
            limit: size(limit),
            finding: format!(
                "retained {} in {blocks} block{}, {} over",
                size(retained),
                plural(blocks),
                size(retained - limit)
            ),
        });
    }
    if let Some(limit) = budgets.max_lost
        && lost > limit
    {
        breaches.push(Breach {
            budget: "max_lost",
            limit: size(limit),
            finding: format!(
                "{} retained that nothing points to any more (lost, or in a cycle of lost blocks), {} over",
                size(lost),
                size(lost - limit)
            ),
        });
    }
    if let Some(limit) = budgets.max_held
        && held > limit
    {
        breaches.push(Breach {
            budget: "max_held",
            limit: size(limit),
            finding: format!(
                "{} retained that a static or a thread-local holds, {} over",
                size(held),
                size(held - limit)
            ),
        });
    }
    let peak = findings.stats.peak_bytes;
    if let Some(limit) = budgets.max_peak
        && peak > limit
    {
        breaches.push(Breach {
            budget: "max_peak",
            limit: size(limit),
            finding: format!("peaked at {}, {} over", size(peak), size(peak - limit)),
        });
    }
    let runs = findings.per_iteration;
    let largest = |figure: fn(&IterationFigures) -> u64| runs.iter().map(figure).max().unwrap_or(0);
    let per_run = if runs.len() > 1 { " in one measured run" } else { "" };
    if let Some(limit) = budgets.max_allocated {
        let allocated = largest(|run| run.allocated_bytes);
        if allocated > limit {
            breaches.push(Breach {
                budget: "max_allocated",
                limit: size(limit),
                finding: format!("allocated {}{per_run}, {} over", size(allocated), size(allocated - limit)),
            });
        }
    }
    if let Some(limit) = budgets.max_allocations {
        let allocations = largest(|run| run.allocations);
        if allocations > limit {
            breaches.push(Breach {
                budget: "max_allocations",
                limit: limit.to_string(),
                finding: format!("made {allocations} allocations{per_run}, {} over", allocations - limit),
            });
        }
    }
    if let Some(limit) = budgets.max_growth_per_iteration {
        let least = runs.iter().map(|run| run.growth).min().unwrap_or(0);
        if least > i64::try_from(limit).unwrap_or(i64::MAX) {
            let growths: Vec<String> = runs.iter().map(|run| run.growth.to_string()).collect();
            breaches.push(Breach {
                budget: "max_growth_per_iteration",
                limit: size(limit),
                finding: format!(
                    "the heap grew in each of {} measured runs, by at least {} (bytes per run: {})",
                    runs.len(),
                    SignedByteSize(least),
                    growths.join(", ")
                ),
            });
        }
    }
    breaches
}

fn plural(count: u64) -> &'static str {
    if count == 1 { "" } else { "s" }
}

fn message(
    names: Names<'_>,
    breaches: &[Breach],
    findings: &Findings<'_>,
    sites: &[RetainedSite],
    (tasks, cycles): (&[TaskEntry], &[CycleEntry]),
) -> String {
    let mut message = format!("ying: leak test `{}` exceeded its budget", names.harness);
    if breaches.len() > 1 {
        message.push('s');
    }
    for breach in breaches {
        message.push_str(&format!("\n  {} = {}: {}", breach.budget, breach.limit, breach.finding));
    }
    if findings.excused_bytes > 0 {
        message.push_str(&format!(
            "\n  (not counted: {} excused as captured test output, thread-local values or by `allow`)",
            ByteSize::new(findings.excused_bytes)
        ));
    }
    if !tasks.is_empty() {
        message.push_str(&tasks_section(names, tasks, breaches));
    }
    if !cycles.is_empty() {
        message.push_str("\n\nthe lost memory's reference cycles:");
        for cycle in cycles {
            message.push_str(&format!("\n  {cycle}"));
        }
    }
    // Lost memory as valgrind groups it: a site whose lost blocks another's own is listed under that one.
    let listed = ying_frames::why::grouped(sites, (0..sites.len()).filter(|&index| !sites[index].excused));
    let shown: Vec<&RetainedSite> = listed.iter().map(|&index| &sites[index]).collect();
    if shown.is_empty() {
        return message;
    }
    message.push_str("\n\nretained memory by allocation site:");
    let mut dependencies = Vec::new();
    for site in shown.iter().take(SITES_SHOWN) {
        message.push_str(&format!("\n  {}", ying_frames::why::site_head(site)));
        if let Some(dependency) = dependency_frame(&site.frames) {
            // The frames below show the package's call; the library that allocated is named here.
            if site.frames.iter().any(is_package_code) {
                message.push_str(&format!(", allocated by {}", dependency.function));
            }
            if let Some(name) = crate_of(&dependency.function)
                && !dependencies.contains(&name)
            {
                dependencies.push(name);
            }
        }
        let frames = user_frames(&site.frames, names.function);
        if frames.is_empty() {
            message.push_str("\n      (stack not recorded)");
        }
        for frame in frames {
            message.push_str(&format!("\n      {frame}"));
        }
        if let Some(owning) = ying_frames::why::owning(sites, site) {
            message.push_str(&format!("\n    {owning}"));
        }
    }
    if shown.len() > SITES_SHOWN {
        message.push_str(&format!("\n  ... and {} more sites", shown.len() - SITES_SHOWN));
    }
    // A thread-local the body filled stays with its thread, and the test's thread outlives the body.
    let mut thread_locals: Vec<&str> = shown
        .iter()
        .flat_map(|site| &site.why)
        .filter(|why| why.kind == Reach::ThreadLocal)
        .filter_map(|why| why.root.as_deref())
        .collect();
    thread_locals.dedup();
    if let Some(first) = thread_locals.first() {
        message.push_str(&format!(
            "\n\nmemory a thread-local keeps ({first}) stays as long as its thread: filled once and reused (a buffer, a \
             cache), `#[{}::leak_test(warmup = 1)]` fills it before the measured run; grown on every run, it is a leak",
            names.runtime
        ));
    }
    if !dependencies.is_empty() {
        let patterns: Vec<String> = dependencies.iter().map(|name| format!("\"{name}::\"")).collect();
        message.push_str(&format!(
            "\n\nmemory a dependency keeps on purpose (a table for the whole process, say) is excused with \
             `#[{}::leak_test(allow = [{}])]`",
            names.runtime,
            patterns.join(", ")
        ));
    }
    message
}

/// The innermost frame of a dependency's code (a crate from a registry or a git checkout, by its source path)
/// between the allocation and the package's own code: the library that allocated the block.
fn dependency_frame(frames: &[Frame]) -> Option<&Frame> {
    frames.iter().take_while(|frame| !is_package_code(frame) && !is_own_frame(frame)).find(|frame| {
        frame.file.as_deref().is_some_and(|file| {
            let file = file.replace('\\', "/");
            file.contains("/registry/src/") || file.contains("/git/checkouts/")
        })
    })
}

/// The crate of a function: the first segment of its path, or of its self type's
/// (`<hashbrown::raw::RawTable<T>>::insert`).
fn crate_of(function: &str) -> Option<&str> {
    let path = function.trim_start_matches('<');
    let name = &path[..path.find("::")?];
    (!name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_')).then_some(name)
}

/// The frames worth showing in a failure message: the test package's own code between the allocation and the
/// test runner (frames whose source path was made relative to the package), at most [`FRAMES_SHOWN`]. Memory a
/// dependency or the standard library allocated on its own shows the frames where it was allocated instead. The
/// closure the test's body runs in is shown as the test function itself.
fn user_frames(frames: &[Frame], test_function: &str) -> Vec<String> {
    // The body (`module::test::{{closure}}`, possibly an async block in it) reads as the test itself.
    let frames = &name_test_body(frames.to_vec(), test_function);
    let outside_the_runner =
        || frames.iter().take_while(|frame| !is_own_frame(frame) && !frame.function.starts_with("test::"));
    // The first is the leak site (`ying_frames::leak_site`), as flamegraphs name it.
    let user: Vec<&Frame> = outside_the_runner().filter(|frame| is_package_code(frame)).take(FRAMES_SHOWN).collect();
    let shown = if user.is_empty() { outside_the_runner().take(FRAMES_SHOWN).collect() } else { user };
    let mut lines = shown.into_iter().map(Frame::to_string).collect::<Vec<_>>();
    // An async body and the test function that polls it can land on the same line.
    lines.dedup();
    lines
}

#[cfg(test)]
mod tests {
    use super::{Findings, Names, Verdict};
    use ying_frames::LEAK_TEST_RUNNER;
    use ying_report::Frame;
    use ying_report::report::{Budgets, IterationFigures, RetainedSite, ScopeStats, TaskEntry, TaskKind};

    /// Judges a body that left no task.
    fn judge(
        names: Names<'_>,
        budgets: &Budgets,
        lost_alone: Option<&str>,
        findings: &Findings<'_>,
        sites: &[RetainedSite],
    ) -> Verdict {
        super::judge(names, budgets, lost_alone, findings, sites, (&[], &[]))
    }

    #[test]
    fn a_leaked_task_fails_by_default_naming_its_future_and_spawn_line_and_a_budget_allows_it() {
        let runs = [run(0, 0, 0)];
        let findings = findings(stats(0, 0, 0), 0, &runs);
        let leaked =
            TaskEntry::new(TaskKind::Leaked, Some("app::serve".into()), Some("tests/server.rs:14".into()), 1216);
        let lingering = TaskEntry::new(TaskKind::Lingering, Some("app::tick".into()), None, 640);
        let tasks = [lingering.clone(), leaked.clone()];
        let defaults = Budgets { max_retained: Some(0), max_leaked_tasks: Some(0), ..Budgets::default() };
        let Verdict::Failed(message) = super::judge(NAMES, &defaults, None, &findings, &[], (&tasks, &[])) else {
            panic!("a leaked task fails by default");
        };
        let expected = "ying: leak test `box_leak` exceeded its budget\n  max_leaked_tasks = 0: 1 task leaked \
                        (pending, and nothing but itself can wake it), 1 over\n\nasync tasks the body left:\n  \
                        leaked task `app::serve`, spawned at tests/server.rs:14, 1.2 KiB (1216 bytes)\n  lingering task \
                        `app::tick`, 640 B\n\na leaked task waits";
        assert!(message.starts_with(expected), "{message}");
        assert!(message.ends_with("`#[ying::leak_test(max_leaked_tasks = N)]`"), "{message}");
        let allowed = Budgets { max_leaked_tasks: Some(1), ..defaults };
        assert_eq!(super::judge(NAMES, &allowed, None, &findings, &[], (&tasks, &[])), Verdict::Passed);
        let strict = Budgets { max_lingering_tasks: Some(0), ..allowed };
        let Verdict::Failed(message) = super::judge(NAMES, &strict, None, &findings, &[], (&tasks, &[])) else {
            panic!("a lingering task breaks a budget of none");
        };
        assert!(message.contains("\n  max_lingering_tasks = 0: 1 task lingering (pending, and something else"));
        assert!(!message.contains("max_leaked_tasks"), "{message}");
        assert!(message.ends_with("`#[ying::leak_test(max_lingering_tasks = N)]`"), "{message}");
        let unclaimed = [TaskEntry::new(TaskKind::Unclaimed, None, None, 64)];
        assert_eq!(super::judge(NAMES, &strict, None, &findings, &[], (&unclaimed, &[])), Verdict::Passed);
    }

    const NAMES: Names<'static> = Names { harness: "box_leak", function: "leaks::box_leak", runtime: "ying" };

    fn stats(retained_bytes: u64, retained_blocks: u64, peak_bytes: u64) -> ScopeStats {
        let mut stats = ScopeStats::default();
        (stats.retained_bytes, stats.retained_blocks, stats.peak_bytes) = (retained_bytes, retained_blocks, peak_bytes);
        stats
    }

    fn run(allocated_bytes: u64, allocations: u64, growth: i64) -> IterationFigures {
        let mut run = IterationFigures::default();
        (run.allocated_bytes, run.allocations, run.growth) = (allocated_bytes, allocations, growth);
        run
    }

    fn site(bytes: u64, excused: bool, functions: &[(&str, Option<&str>)]) -> RetainedSite {
        let frames =
            functions.iter().map(|&(name, file)| Frame::new(name, file.map(str::to_owned), Some(22))).collect();
        RetainedSite::new(bytes, 1, excused, frames)
    }

    fn findings(stats: ScopeStats, excused_bytes: u64, per_iteration: &[IterationFigures]) -> Findings<'_> {
        Findings { stats, excused_bytes, excused_blocks: u64::from(excused_bytes > 0), per_iteration }
    }

    #[test]
    fn within_every_budget_passes() {
        let budgets = Budgets { max_retained: Some(0), max_peak: Some(4096), ..Budgets::default() };
        let runs = [run(4096, 2, 0)];
        assert_eq!(judge(NAMES, &budgets, None, &findings(stats(0, 0, 4096), 0, &runs), &[]), Verdict::Passed);
        assert_eq!(
            judge(NAMES, &Budgets::default(), None, &findings(stats(1 << 30, 9, 1 << 30), 0, &runs), &[]),
            Verdict::Passed
        );
    }

    #[test]
    fn a_site_a_thread_local_keeps_names_the_warmup_that_fills_it_before_the_measured_run() {
        use ying_report::report::{Reach, Why};
        let mut kept = site(2045, false, &[("why::thread_local_grown", Some("tests/why.rs"))]);
        let root = "why::SCRATCH of thread `thread_local_gr`";
        kept.why = vec![Why { kind: Reach::ThreadLocal, root: Some(root.to_owned()), bytes: 2045, blocks: 1 }];
        let budgets = Budgets { max_retained: Some(0), ..Budgets::default() };
        let findings = findings(stats(2045, 1, 2045), 0, &[]);
        let Verdict::Failed(message) = judge(NAMES, &budgets, None, &findings, &[kept]) else {
            panic!("2045 B retained is over max_retained = 0")
        };
        assert!(
            message.ends_with(
                "memory a thread-local keeps (why::SCRATCH of thread `thread_local_gr`) stays as long as its thread: \
                 filled once and reused (a buffer, a cache), `#[ying::leak_test(warmup = 1)]` fills it before the \
                 measured run; grown on every run, it is a leak"
            ),
            "{message}"
        );
    }

    #[test]
    fn max_lost_written_alone_leaves_the_default_max_retained_and_a_breach_of_it_says_so_with_the_fix() {
        use ying_report::report::{Reach, Why};
        let mut cached = site(24_576, false, &[("leaks::cache", Some("tests/leaks.rs"))]);
        cached.why = vec![Why { kind: Reach::Static, root: Some("leaks::CACHE".to_owned()), bytes: 24_576, blocks: 1 }];
        // As the plan gives them: `max_lost` written, `max_retained` its default.
        let budgets = Budgets { max_lost: Some(256), max_retained: Some(0), ..Budgets::default() };
        let findings = findings(stats(24_576, 1, 24_576), 0, &[]);
        let Verdict::Failed(message) =
            judge(NAMES, &budgets, Some("max_lost"), &findings, std::slice::from_ref(&cached))
        else {
            panic!("24 KiB retained is over the default max_retained")
        };
        assert!(
            message.contains(
                "max_retained = 0 B: retained 24.0 KiB (24576 bytes) in 1 block, 24.0 KiB (24576 bytes) over (0 B is \
                 the default, which `max_lost` does not relax: write `max_retained = \"32.0 KiB\"` too"
            ),
            "{message}"
        );
        assert!(!message.contains("max_lost ="), "nothing is lost: {message}");
        let Verdict::Failed(written) = judge(NAMES, &budgets, None, &findings, &[cached]) else { unreachable!() };
        assert!(!written.contains("the default"), "a written max_retained is not the default: {written}");
    }

    #[test]
    fn max_held_judges_only_what_statics_and_thread_locals_hold_and_alone_says_it_leaves_max_retained() {
        use ying_report::report::{Reach, Why};
        let why = |kind, root: Option<&str>, bytes| Why { kind, root: root.map(str::to_owned), bytes, blocks: 1 };
        let mut cached = site(1328, false, &[("leaks::caches", Some("tests/leaks.rs"))]);
        cached.why =
            vec![why(Reach::Static, Some("leaks::CACHE"), 728), why(Reach::ThreadLocal, Some("leaks::BUF"), 600)];
        let mut forgotten = site(512, false, &[("leaks::caches", Some("tests/leaks.rs"))]);
        forgotten.why = vec![why(Reach::Lost, None, 512)];
        let budgets = Budgets { max_held: Some(1024), ..Budgets::default() };
        let findings = findings(stats(1840, 2, 1840), 0, &[]);
        let Verdict::Failed(message) = judge(NAMES, &budgets, None, &findings, &[cached.clone(), forgotten.clone()])
        else {
            panic!("1,328 B held is over a budget of 1 KiB")
        };
        assert!(
            message.contains(
                "max_held = 1.0 KiB (1024 bytes): 1.3 KiB (1328 bytes) retained that a static or a thread-local holds, 304 B over"
            ),
            "{message}"
        );
        assert_eq!(judge(NAMES, &budgets, None, &findings, &[forgotten]), Verdict::Passed, "a lost block is not held");
        // Written alone, the default `max_retained` (0 B) still judges, and says `max_held` does not relax it.
        let alone = Budgets { max_held: Some(4096), max_retained: Some(0), ..Budgets::default() };
        let Verdict::Failed(message) = judge(NAMES, &alone, Some("max_held"), &findings, &[cached]) else {
            panic!("0 B retained is the default")
        };
        assert!(
            message.contains("which `max_held` does not relax: write `max_retained = \"2.0 KiB\"` too"),
            "{message}"
        );
    }

    #[test]
    fn max_lost_judges_only_the_bytes_nothing_reaches_and_each_site_says_why() {
        use ying_report::report::{Reach, Why};
        let why = |kind, root: Option<&str>, bytes| Why { kind, root: root.map(str::to_owned), bytes, blocks: 1 };
        let mut forgotten = site(512, false, &[("leaks::forgotten", Some("tests/leaks.rs"))]);
        forgotten.why = vec![why(Reach::Lost, None, 512)];
        let mut cached = site(24_576, false, &[("leaks::forgotten", Some("tests/leaks.rs"))]);
        cached.why = vec![why(Reach::Static, Some("leaks::CACHE"), 24_576)];
        let budgets = Budgets { max_lost: Some(256), ..Budgets::default() };
        let findings = findings(stats(25_088, 2, 25_088), 0, &[]);
        let Verdict::Failed(message) = judge(NAMES, &budgets, None, &findings, &[forgotten.clone(), cached.clone()])
        else {
            panic!("512 B lost is over a budget of 256 B")
        };
        assert!(
            message.contains("max_lost = 256 B: 512 B retained that nothing points to any more (lost, or in a cycle of lost blocks), 256 B over"),
            "{message}"
        );
        assert!(message.contains("512 B in 1 block, lost (nothing points to it)"), "{message}");
        assert!(message.contains("24.0 KiB (24576 bytes) in 1 block, held by static leaks::CACHE"), "{message}");
        assert_eq!(judge(NAMES, &budgets, None, &findings, &[cached]), Verdict::Passed, "a static is not lost");
        forgotten.excused = true;
        assert_eq!(
            judge(NAMES, &budgets, None, &findings, &[forgotten]),
            Verdict::Passed,
            "excused bytes are not judged"
        );
    }

    #[test]
    fn a_retained_breach_names_the_figure_the_budget_the_excess_and_the_site() {
        let budgets = Budgets { max_retained: Some(0), ..Budgets::default() };
        let sites = [
            site(
                1000,
                false,
                &[
                    ("alloc::boxed::Box<T>::new", Some("/rustc/x/library/alloc/src/boxed.rs")),
                    ("leaks::box_leak::{{closure}}", Some("tests/leaks.rs")),
                    (&format!("{LEAK_TEST_RUNNER}::<()>"), Some("/r/ying-runtime/src/products/leak_test/runner.rs")),
                    ("test::run_test", None),
                ],
            ),
            site(48, true, &[("std::io::stdio::_print", None)]),
        ];
        let runs = [run(1048, 2, 1000)];
        let Verdict::Failed(message) = judge(NAMES, &budgets, None, &findings(stats(1048, 2, 1048), 48, &runs), &sites)
        else {
            panic!("1000 retained bytes exceed max_retained = 0");
        };
        assert_eq!(
            message,
            "ying: leak test `box_leak` exceeded its budget\n  max_retained = 0 B: retained 1000 B in 1 block, 1000 B over\n  \
             (not counted: 48 B excused as captured test output, thread-local values or by `allow`)\n\n\
             retained memory by allocation site:\n  1000 B in 1 block\n      leaks::box_leak at tests/leaks.rs:22"
        );
    }

    #[test]
    fn memory_a_dependency_allocated_names_the_dependency_and_the_allow_that_excuses_it() {
        let budgets = Budgets { max_retained: Some(0), ..Budgets::default() };
        let registry =
            "/home/u/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/parking_lot_core-0.9.12/src/parking_lot.rs";
        let sites = [
            site(
                1024,
                false,
                &[
                    ("alloc::vec::Vec<T>::with_capacity", Some("/rustc/x/library/alloc/src/vec/mod.rs")),
                    ("parking_lot_core::parking_lot::HashTable::new", Some(registry)),
                    ("parking_lot_core::parking_lot::create_hashtable", Some(registry)),
                    ("dashmap::lock::RawRwLock::unlock_exclusive_slow", Some("src/lock.rs")),
                    (&format!("{LEAK_TEST_RUNNER}::<()>"), Some("/r/ying-runtime/src/products/leak_test/runner.rs")),
                ],
            ),
            // A dependency that allocated on its own (from a git checkout): its frames are the ones shown.
            site(
                32,
                false,
                &[
                    ("<hashbrown::raw::RawTable<T>>::reserve_rehash", Some("/c/.cargo/git/checkouts/h/ab/src/raw.rs")),
                    ("std::rt::lang_start", None),
                ],
            ),
        ];
        let runs = [run(1056, 2, 1056)];
        let Verdict::Failed(message) = judge(NAMES, &budgets, None, &findings(stats(1056, 2, 1056), 0, &runs), &sites)
        else {
            panic!("1056 retained bytes exceed max_retained = 0");
        };
        assert_eq!(
            message,
            "ying: leak test `box_leak` exceeded its budget\n  \
             max_retained = 0 B: retained 1.0 KiB (1056 bytes) in 2 blocks, 1.0 KiB (1056 bytes) over\n\n\
             retained memory by allocation site:\n  \
             1.0 KiB (1024 bytes) in 1 block, allocated by parking_lot_core::parking_lot::HashTable::new\n      \
             dashmap::lock::RawRwLock::unlock_exclusive_slow at src/lock.rs:22\n  \
             32 B in 1 block\n      \
             <hashbrown::raw::RawTable<T>>::reserve_rehash at /c/.cargo/git/checkouts/h/ab/src/raw.rs:22\n      \
             std::rt::lang_start\n\n\
             memory a dependency keeps on purpose (a table for the whole process, say) is excused with \
             `#[ying::leak_test(allow = [\"parking_lot_core::\", \"hashbrown::\"])]`"
        );
        // A crate that names the runtime otherwise (`crate = "yr"`) is shown the fix as it writes it.
        let renamed = Names { runtime: "yr", ..NAMES };
        let Verdict::Failed(message) =
            judge(renamed, &budgets, None, &findings(stats(1056, 2, 1056), 0, &runs), &sites)
        else {
            panic!("the same verdict under another name");
        };
        assert!(
            message.ends_with("`#[yr::leak_test(allow = [\"parking_lot_core::\", \"hashbrown::\"])]`"),
            "{message}"
        );
    }

    #[test]
    fn the_body_is_named_after_the_test_whatever_the_debug_information() {
        let budgets = Budgets { max_retained: Some(0), ..Budgets::default() };
        let runs = [run(9, 1, 9)];
        let runner = format!("{LEAK_TEST_RUNNER}::<(), leaks::box_leak::{{closure#0}}>");
        let message = |frames: &[(&str, Option<&str>)]| {
            let Verdict::Failed(message) =
                judge(NAMES, &budgets, None, &findings(stats(9, 1, 9), 0, &runs), &[site(9, false, frames)])
            else {
                panic!("9 B retained");
            };
            message
        };
        // Line tables only: the body's closure inlined into the runner, named bare.
        let lines = message(&[("{closure#0}", Some("tests/leaks.rs")), (&runner, None)]);
        assert!(lines.ends_with("9 B in 1 block\n      leaks::box_leak at tests/leaks.rs:22"), "{lines}");
        // No debug information: the body inlined into the runner has no frame of its own.
        let bare = message(&[
            ("alloc::fmt::format::format_inner", None),
            ("leak_fixtures::open_session", None),
            (&runner, None),
        ]);
        assert!(
            bare.ends_with(
                "9 B in 1 block\n      alloc::fmt::format::format_inner\n      leak_fixtures::open_session\n      leaks::box_leak"
            ),
            "{bare}"
        );
    }

    #[test]
    fn excused_memory_alone_passes() {
        let budgets = Budgets { max_retained: Some(0), ..Budgets::default() };
        let runs = [run(48, 1, 0)];
        assert_eq!(judge(NAMES, &budgets, None, &findings(stats(48, 1, 48), 48, &runs), &[]), Verdict::Passed);
    }

    #[test]
    fn growth_fails_only_when_every_run_grew_and_per_run_budgets_take_the_largest_run() {
        let budgets = Budgets { max_growth_per_iteration: Some(0), ..Budgets::default() };
        let lazy = [run(100, 1, 100), run(0, 0, 0), run(0, 0, 0)];
        assert_eq!(judge(NAMES, &budgets, None, &findings(stats(100, 1, 100), 0, &lazy), &[]), Verdict::Passed);
        let leak = [run(16, 1, 16), run(32, 1, 32), run(16, 1, 16)];
        let Verdict::Failed(message) = judge(NAMES, &budgets, None, &findings(stats(64, 3, 64), 0, &leak), &[]) else {
            panic!("every run grew");
        };
        assert!(
            message.ends_with(
                "max_growth_per_iteration = 0 B: the heap grew in each of 3 measured runs, by at least 16 B \
                 (bytes per run: 16, 32, 16)"
            ),
            "{message}"
        );
        let budgets = Budgets { max_allocated: Some(1000), max_allocations: Some(2), ..Budgets::default() };
        let runs = [run(900, 2, 0), run(2048, 3, 0)];
        let Verdict::Failed(message) = judge(NAMES, &budgets, None, &findings(stats(0, 0, 2048), 0, &runs), &[]) else {
            panic!("the second run allocated too much");
        };
        assert!(message.starts_with("ying: leak test `box_leak` exceeded its budgets\n"), "{message}");
        assert!(message.contains(
            "max_allocated = 1000 B: allocated 2.0 KiB (2048 bytes) in one measured run, 1.0 KiB (1048 bytes) over"
        ));
        assert!(message.contains("max_allocations = 2: made 3 allocations in one measured run, 1 over"), "{message}");
    }

    #[test]
    fn memory_a_dependency_allocated_on_its_own_shows_where() {
        let budgets = Budgets { max_retained: Some(0), ..Budgets::default() };
        let sites = [site(64, false, &[("hashbrown::raw::alloc", None), ("std::thread::local::init", None)])];
        let runs = [run(64, 1, 64)];
        let Verdict::Failed(message) = judge(NAMES, &budgets, None, &findings(stats(64, 1, 64), 0, &runs), &sites)
        else {
            panic!("64 B retained");
        };
        assert!(
            message.ends_with("64 B in 1 block\n      hashbrown::raw::alloc\n      std::thread::local::init"),
            "{message}"
        );
    }
}
