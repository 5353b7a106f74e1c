//! The report a leak test writes when `YING_REPORT_DIR` is set: the one definition that the runtime writes and
//! `cargo ying` reads.
//!
//! Reports hold nothing that changes between identical runs in the fields that get compared (no addresses, no
//! timestamps), and source paths are relative to the test's package where they lie inside it.

use crate::frame::Frame;
use crate::json::{self, Kind, ReadError};
use crate::test_id::{TargetKind, TestId};
use std::path::Path;

/// The version of the report format; bumped on any change a reader must know about.
pub const REPORT_SCHEMA_VERSION: u32 = 4;

/// The environment variable naming the directory where leak tests write their reports.
pub const REPORT_DIR_ENV: &str = "YING_REPORT_DIR";

/// When this environment variable is set (as `cargo ying` sets it), a report's sampled stacks carry the
/// executable's instruction addresses instead of frames where the platform allows, and the reader symbolises them
/// once per executable rather than every test process loading the debug information.
pub const DEFER_SYMBOLS_ENV: &str = "YING_DEFER_SYMBOLS";

/// The environment variable that sets the default attribution of leak tests: `process` or `thread`. `cargo ying`
/// sets `process`, since it runs each test in a process of its own.
pub const ATTRIBUTION_ENV: &str = "YING_ATTRIBUTION";

/// The environment variable naming the test a process runs when `cargo ying test --measure all` measures it from
/// outside, through the allocation interposer: the test's [`TestIdentity`] as JSON. The interposer measures the
/// thread the test harness names after the test, and the threads it spawns, from that thread's start to its end.
pub const MEASURE_TEST_ENV: &str = "YING_MEASURE_TEST";

/// The function the allocation interposer exports (C ABI, no arguments) for a leak test to call when it starts in a
/// process the interposer measures: the test is measured by its own scope, and the interposer stops measuring it.
pub const INTERPOSER_LEAK_TEST_STARTED: &core::ffi::CStr = c"ying_interposer_leak_test_started";

/// The environment variable carrying a token of this run of this test, which `cargo ying` sets for each test
/// process: a leak test copies it into its report ([`LeakReport::run_token`]) and into the mark it leaves when it
/// starts ([`STARTED_EXTENSION`]), and `cargo ying` takes only what carries it.
pub const RUN_TOKEN_ENV: &str = "YING_RUN_TOKEN";

/// A token for [`RUN_TOKEN_ENV`] that no other run, and no other test of this run (`index`, in the process that
/// starts them), has: what a test's report must carry to be taken.
pub fn run_token(index: usize) -> String {
    use std::hash::BuildHasher as _;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let [a, b] = [0u8, 1]
        .map(|half| std::collections::hash_map::RandomState::new().hash_one((half, index, std::process::id(), now)));
    format!("{a:016x}{b:016x}")
}

/// The extension of the mark a leak test leaves in [`REPORT_DIR_ENV`] when it starts under [`RUN_TOKEN_ENV`]: a
/// file holding the token, beside where its report will be. A mark without a report says that the test's process
/// ended before the test reported (`std::process::exit` in its body, for instance). The report is written in the
/// mark's file ([`LeakReport::write_over_mark`]): a report cut short says the same as the mark.
pub const STARTED_EXTENSION: &str = "started";

/// The environment variable in which `cargo ying` passes every test process the workspace's `allow` patterns
/// (`allow = [...]` in `[workspace.metadata.ying]`), as a JSON list of strings: retained memory allocated under a
/// function whose name contains one of them is excused, in a leak test (beside its attribute's own `allow`) and in
/// a test measured from outside alike. A list too long for a process's environment is passed in a file, the
/// variable holding `@` and the file's path. Read with [`allow_patterns`].
pub const ALLOW_ENV: &str = "YING_ALLOW";

/// The environment variable in which `cargo ying` passes every test process the workspace's budgets of async
/// tasks (`max-leaked-tasks` and `max-lingering-tasks` in `[workspace.metadata.ying]`), for the leak tests whose
/// attribute does not write its own: `leaked=N`, `lingering=N` or both, joined by a comma. Read with
/// [`task_budgets`].
pub const TASK_BUDGETS_ENV: &str = "YING_TASK_BUDGETS";

/// The budgets of tasks [`TASK_BUDGETS_ENV`] holds, as (leaked, lingering): none when it is unset; an error that
/// says why when it is not of its form.
///
/// ```
/// # use ying_report::report::parse_task_budgets;
/// assert_eq!(parse_task_budgets("leaked=1,lingering=0"), Ok((Some(1), Some(0))));
/// assert_eq!(parse_task_budgets("lingering=3"), Ok((None, Some(3))));
/// assert!(parse_task_budgets("leaked=one").is_err());
/// ```
pub fn task_budgets() -> Result<(Option<u64>, Option<u64>), String> {
    match std::env::var(TASK_BUDGETS_ENV) {
        Ok(value) => parse_task_budgets(&value),
        Err(std::env::VarError::NotPresent) => Ok((None, None)),
        Err(std::env::VarError::NotUnicode(_)) => Err(format!("{TASK_BUDGETS_ENV} is not UTF-8")),
    }
}

/// The budgets of tasks a [`TASK_BUDGETS_ENV`] of `value` holds (see [`task_budgets`]).
pub fn parse_task_budgets(value: &str) -> Result<(Option<u64>, Option<u64>), String> {
    let mut budgets = (None, None);
    for item in value.split(',').filter(|item| !item.trim().is_empty()) {
        let wrong = || format!("{TASK_BUDGETS_ENV} is not `leaked=N,lingering=N`: `{item}`");
        let (kind, count) = item.split_once('=').ok_or_else(wrong)?;
        let count: u64 = count.trim().parse().map_err(|_| wrong())?;
        match kind.trim() {
            "leaked" => budgets.0 = Some(count),
            "lingering" => budgets.1 = Some(count),
            _ => return Err(wrong()),
        }
    }
    Ok(budgets)
}

/// The patterns [`ALLOW_ENV`] holds: none when it is unset; an error that says why when it is not a JSON list of
/// strings none of which is empty (an empty pattern would excuse everything).
pub fn allow_patterns() -> Result<Vec<String>, String> {
    let Some(value) = std::env::var_os(ALLOW_ENV) else { return Ok(Vec::new()) };
    parse_allow(value)
}

/// The patterns an [`ALLOW_ENV`] of `value` holds (see [`allow_patterns`]).
fn parse_allow(value: std::ffi::OsString) -> Result<Vec<String>, String> {
    let value = value.into_string().map_err(|_| format!("{ALLOW_ENV} is not UTF-8"))?;
    // A list too long for a process's environment is passed in a file: `@` and its path.
    let value = match value.strip_prefix('@') {
        Some(path) => json::read_text(Path::new(path)).map_err(|why| format!("{ALLOW_ENV} names {path}: {why}"))?,
        None => value,
    };
    let patterns: Vec<String> = serde_json::from_str(&value)
        .map_err(|why| format!("{ALLOW_ENV} is not a JSON list of strings (`[\"regex::\"]`): {why}"))?;
    if patterns.iter().any(String::is_empty) {
        return Err(format!("{ALLOW_ENV} holds an empty pattern, which would excuse everything"));
    }
    if let Some(why) = patterns.iter().find_map(|pattern| excuses_every_test(pattern)) {
        return Err(format!("{ALLOW_ENV}: {why}"));
    }
    Ok(patterns)
}

/// Frames that the stack of every allocation a test makes holds (libtest's, as the standard library's symbols
/// name them): an `allow` pattern, which excuses an allocation when it is part of any frame's function, that is
/// part of one of these would excuse every leak of every test.
const FRAMES_OF_EVERY_TEST: &[&str] = &[
    "<fn() -> core::result::Result<(), alloc::string::String> as core::ops::function::FnOnce<()>>::call_once",
    "test::__rust_begin_short_backtrace::<core::result::Result<(), alloc::string::String>, fn() -> \
     core::result::Result<(), alloc::string::String>>",
    "<core::panic::unwind_safe::AssertUnwindSafe<test::run_test_in_process::{closure#0}> as \
     core::ops::function::FnOnce<()>>::call_once",
    "std::panicking::catch_unwind::do_call::<core::panic::unwind_safe::AssertUnwindSafe<\
     test::run_test_in_process::{closure#0}>, core::result::Result<(), alloc::string::String>>",
    "test::run_test_in_process::{{closure}}",
];

/// Why `pattern` may not be an `allow` pattern, when it is part of a frame every test's stack holds (`"core"`,
/// `"::"`, `" "`): it names the frame, and says what to write instead.
pub fn excuses_every_test(pattern: &str) -> Option<String> {
    let frame = FRAMES_OF_EVERY_TEST.iter().find(|frame| frame.contains(pattern))?;
    Some(format!(
        "the pattern {pattern:?} is part of `{frame}`, a frame of every test's stack: it would excuse every leak of \
         every test; write more of the path of the functions to excuse, like \"my_crate::cache::\""
    ))
}

/// The environment variable in which `cargo ying` passes a test process the code of its executable the runtime
/// knows by address (the frame rules' `KnownCode`, as its `to_env` writes it). Optional: without it, or for another
/// executable, the process reads its own.
pub const KNOWN_CODE_ENV: &str = "YING_KNOWN_CODE";

/// The environment variable in which `cargo ying` names a directory of the run where its test processes keep the
/// stack walker's call-frame rules for the processes after them (by build id). Optional: without it each process
/// computes its own.
pub const RULES_DIR_ENV: &str = "YING_RULES_DIR";

const KIND: Kind = Kind {
    name: "report",
    version: REPORT_SCHEMA_VERSION,
    older: "it was written by an earlier ying-runtime than this cargo ying reads; use the same version of both",
    newer: "it was written by a later ying-runtime than this cargo ying reads; use the same version of both",
};

/// Everything one run of one leak test measured.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct LeakReport {
    /// [`REPORT_SCHEMA_VERSION`] of the writer.
    pub schema_version: u32,
    /// Which test this is, as the test knows itself.
    pub test: TestIdentity,
    /// Which allocations the test's figures count.
    pub attribution: Attribution,
    /// The budgets in force (defaults applied).
    pub budgets: Budgets,
    /// Unmeasured runs of the body before the measured ones.
    pub warmup: u32,
    /// Measured runs of the body.
    pub iterations: u32,
    /// How the test ended.
    pub outcome: Outcome,
    /// Why the test failed, in the words the runtime printed: the exceeded budgets, or the body's panic message or
    /// failing return value.
    pub message: Option<String>,
    /// Exact figures of the measured runs as a whole.
    pub figures: ScopeStats,
    /// Retained bytes excused by the test's `allow` patterns or as the test harness's captured output; not in
    /// the figure the `max_retained` budget is checked against.
    pub excused_bytes: u64,
    /// Exact figures of each measured run.
    pub per_iteration: Vec<IterationFigures>,
    /// Where the retained memory was allocated, exactly, when the test recorded every stack; largest first.
    pub retained_sites: Vec<RetainedSite>,
    /// The process's top sampled stacks at the end of the test (estimates). Under thread attribution other tests
    /// running in the same process appear here too; `cargo ying` runs each test alone.
    pub sampled_stacks: Vec<SampledStack>,
    /// What a reader needs to symbolise the addresses of [`SampledStack::addresses`] (under
    /// [`DEFER_SYMBOLS_ENV`]); `None` once every stack has its frames.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deferred: Option<DeferredSymbols>,
    /// The token of the run that asked for the report ([`RUN_TOKEN_ENV`]), when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_token: Option<String>,
    /// What a reader should know of how the figures were taken: for a test measured from outside
    /// ([`MEASURE_TEST_ENV`]) whose binary has a global allocator of its own, that only what reaches `malloc` is
    /// counted. Empty for a leak test.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The async tasks the test's body left behind, found as the body ended while its runtime still ran (an
    /// `async fn` leak test's); by where they were spawned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<TaskEntry>,
    /// The reference cycles among the blocks nothing reaches any more: each strongly connected component of lost
    /// blocks, by its members' types, with the fields to make `Weak`. The most bytes first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cycles: Vec<CycleEntry>,
}

/// A reference cycle among lost blocks (see [`LeakReport::cycles`]): blocks that keep each other alive and that
/// nothing else reaches.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct CycleEntry {
    /// The members' Rust types, each once, in the order first met (`my_crate::Node`; a closure as its function's
    /// `{closure}`); `"?"` for a block whose type the debug information does not tell.
    pub members: Vec<String>,
    /// The bytes of the cycle's blocks and of those only they hold (its members' buffers, what their fields own),
    /// as valgrind counts a cycle's "definitely" and "indirectly lost".
    pub bytes: u64,
    /// The pointers between members, by the field that holds each, once each.
    pub edges: Vec<CycleEdge>,
    /// A smallest set of fields whose pointers, made `Weak`, leave the cycle none: one for a simple cycle.
    pub make_weak: Vec<CycleField>,
    /// The bytes freed if the fields of [`make_weak`](Self::make_weak) were `Weak`, as the reference counts would
    /// free them: checked on the graph of lost blocks with those pointers taken out.
    pub freed_if_weak: u64,
}

/// A pointer between members of a cycle: the field of `from` that holds it, and the type it points to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct CycleEdge {
    /// The type whose field holds the pointer.
    pub from: String,
    /// The field's path as its user names it (`parent`, `children[]`, a closure's captured `window`); `"?"` where
    /// the debug information does not tell.
    pub field: String,
    /// The type pointed to.
    pub to: String,
}

/// A field to make `Weak` (see [`CycleEntry::make_weak`]).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct CycleField {
    /// The type whose field it is.
    pub from: String,
    /// The field's path.
    pub field: String,
}

impl CycleEdge {
    /// The pointer of `from`'s `field` to `to`.
    pub fn new(from: impl Into<String>, field: impl Into<String>, to: impl Into<String>) -> Self {
        Self { from: from.into(), field: field.into(), to: to.into() }
    }
}

impl CycleField {
    /// `from`'s field `field`.
    pub fn new(from: impl Into<String>, field: impl Into<String>) -> Self {
        Self { from: from.into(), field: field.into() }
    }
}

/// The cycle as every output words it: its members, its edges, the fields to make `Weak` and what that frees.
///
/// ```
/// # use ying_report::report::{CycleEdge, CycleEntry, CycleField};
/// let mut cycle = CycleEntry::default();
/// cycle.members = vec!["app::Node".into()];
/// cycle.bytes = 192;
/// cycle.edges = vec![CycleEdge::new("app::Node", "children[]", "app::Node"), CycleEdge::new("app::Node", "parent", "app::Node")];
/// cycle.make_weak = vec![CycleField::new("app::Node", "parent")];
/// cycle.freed_if_weak = 256;
/// assert_eq!(
///     cycle.to_string(),
///     "reference cycle of `Node`, 192 B (Node.children[] -> Node, Node.parent -> Node): make `Node.parent` a `Weak` \
///      (frees 256 B)"
/// );
/// ```
impl std::fmt::Display for CycleEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let members: Vec<String> = self.members.iter().map(|member| format!("`{}`", short_type(member))).collect();
        write!(f, "reference cycle of {}, {}", members.join(", "), crate::size::ByteSize::new(self.bytes))?;
        let edges: Vec<String> = self
            .edges
            .iter()
            .map(|edge| {
                format!("{} -> {}", CycleField::new(edge.from.clone(), edge.field.clone()), short_type(&edge.to))
            })
            .collect();
        if !edges.is_empty() {
            write!(f, " ({})", edges.join(", "))?;
        }
        if !self.make_weak.is_empty() {
            let fields: Vec<String> = self.make_weak.iter().map(|field| format!("`{field}`")).collect();
            let (fields, article) = match fields.split_last() {
                Some((last, [])) => (last.clone(), "a `Weak`"),
                Some((last, rest)) => (format!("{} and {last}", rest.join(", ")), "`Weak`s"),
                None => (String::new(), ""),
            };
            write!(f, ": make {fields} {article} (frees {})", crate::size::ByteSize::new(self.freed_if_weak))?;
        }
        Ok(())
    }
}

/// The field as every output names it: `Node.parent`, the type's path left out.
///
/// ```
/// # use ying_report::report::CycleField;
/// assert_eq!(CycleField::new("app::tree::Node", "parent").to_string(), "Node.parent");
/// assert_eq!(CycleField::new("app::Window::new::{closure}", "window").to_string(), "Window::new::{closure}.window");
/// assert_eq!(CycleField::new("app::open::{closure}", "window").to_string(), "open::{closure}.window");
/// ```
impl std::fmt::Display for CycleField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", short_type(&self.from), self.field)
    }
}

/// A type's path as outputs show it: its last segment (`Node` of `app::tree::Node<T>`, generic arguments kept);
/// a closure with the function it is in, its crate left out (`Window::new::{closure}`).
pub fn short_type(path: &str) -> &str {
    let generic = path.find('<').unwrap_or(path.len());
    let segments: Vec<usize> = path[..generic].match_indices("::").map(|(at, _)| at).collect();
    let kept = match segments.first() {
        Some(&first) if path[..generic].ends_with("{closure}") && segments.len() > 1 => Some(first),
        _ => segments.last().copied(),
    };
    kept.map_or(path, |at| &path[at + 2..])
}

/// An async task a test's body left behind (see [`LeakReport::tasks`]).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct TaskEntry {
    /// What became of it.
    pub kind: TaskKind,
    /// The future's Rust type: the async fn or closure it runs (`my_crate::fetch`, `my_crate::run::{closure}`);
    /// `None` where the debug information does not tell.
    pub future: Option<String>,
    /// `file:line` of the user's call that spawned it, as a site's frames name files; `None` where no frame is the
    /// user's.
    pub spawned_at: Option<String>,
    /// The bytes of the task's cell (its future or output, and tokio's header); of a thread, what its stack holds of
    /// the test's memory.
    pub bytes: u64,
    /// Of a [`TaskKind::Thread`], the thread's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<String>,
}

impl TaskEntry {
    /// A task of `kind`, running `future`, spawned at `spawned_at`, of `bytes`.
    pub fn new(kind: TaskKind, future: Option<String>, spawned_at: Option<String>, bytes: u64) -> Self {
        Self { kind, future, spawned_at, bytes, thread: None }
    }

    /// A thread named `name` the test started and left running, running `closure`, spawned at `spawned_at`, holding
    /// `bytes` of the test's memory on its stack.
    pub fn thread(name: Option<String>, closure: Option<String>, spawned_at: Option<String>, bytes: u64) -> Self {
        Self { kind: TaskKind::Thread, future: closure, spawned_at, bytes, thread: name }
    }
}

/// The task as every output words it: `leaked task `app::serve`, spawned at tests/server.rs:14, 256 B`.
///
/// ```
/// # use ying_report::report::{TaskEntry, TaskKind};
/// let task = TaskEntry::new(TaskKind::Leaked, Some("app::serve".into()), Some("tests/server.rs:14".into()), 256);
/// assert_eq!(task.to_string(), "leaked task `app::serve`, spawned at tests/server.rs:14, 256 B");
/// ```
impl std::fmt::Display for TaskEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.kind == TaskKind::Thread {
            match &self.thread {
                Some(name) => write!(f, "thread `{name}` left running")?,
                None => write!(f, "a thread left running")?,
            }
            if let Some(closure) = &self.future {
                write!(f, " `{closure}`")?;
            }
        } else {
            let future = self.future.as_deref().unwrap_or("of a future of unknown type");
            write!(f, "{} task `{future}`", self.kind.word())?;
        }
        if let Some(spawned_at) = &self.spawned_at {
            write!(f, ", spawned at {spawned_at}")?;
        }
        write!(f, ", {}", crate::size::ByteSize::new(self.bytes))
    }
}

/// `tasks` as every output lists them: a line for each (kind, future, spawn line), in the order first met, tasks
/// alike counted on one line (`3 leaked tasks `app::serve`, spawned at tests/server.rs:14, 768 B in all`).
///
/// ```
/// # use ying_report::report::{TaskEntry, TaskKind, task_lines};
/// let task = TaskEntry::new(TaskKind::Leaked, Some("app::serve".into()), Some("tests/server.rs:14".into()), 256);
/// let lines = task_lines(&[task.clone(), task.clone(), task]);
/// assert_eq!(lines, ["3 leaked tasks `app::serve`, spawned at tests/server.rs:14, 768 B in all"]);
/// ```
pub fn task_lines<'a>(tasks: impl IntoIterator<Item = &'a TaskEntry>) -> Vec<String> {
    task_groups(tasks).into_iter().map(|group| group.line).collect()
}

/// Tasks alike (one kind, future and spawn line; a thread alone), as [`task_lines`] counts them on one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskGroup<'a> {
    /// The first task of the group met.
    pub first: &'a TaskEntry,
    /// The bytes of all of them.
    pub bytes: u64,
    /// The group as every output words it.
    pub line: String,
}

/// `tasks` grouped as [`task_lines`] lists them, in the order first met.
pub fn task_groups<'a>(tasks: impl IntoIterator<Item = &'a TaskEntry>) -> Vec<TaskGroup<'a>> {
    let mut groups: Vec<(&TaskEntry, u64, u64)> = Vec::new();
    for task in tasks {
        // Threads each have a line of their own.
        let alike = |(first, _, _): &&mut (&TaskEntry, u64, u64)| {
            task.kind != TaskKind::Thread
                && (first.kind, &first.future, &first.spawned_at) == (task.kind, &task.future, &task.spawned_at)
        };
        match groups.iter_mut().find(alike) {
            Some((_, count, bytes)) => (*count, *bytes) = (*count + 1, *bytes + task.bytes),
            None => groups.push((task, 1, task.bytes)),
        }
    }
    groups
        .into_iter()
        .map(|(first, count, bytes)| {
            let line = match count {
                1 => first.to_string(),
                _ => {
                    let all = TaskEntry { bytes, ..first.clone() };
                    let line = all.to_string();
                    // `leaked task ...` -> `3 leaked tasks ...`, the bytes of them all.
                    let (word, rest) = line.split_once(" task ").unwrap_or((&line, ""));
                    format!("{count} {word} tasks {rest} in all")
                }
            };
            TaskGroup { first, bytes, line }
        })
        .collect()
}

/// What became of a task a test's body left behind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TaskKind {
    /// Pending, and nothing outside itself and the runtime's own lists of tasks can wake it.
    Leaked,
    /// Pending, and reachable from something that can still wake it (a timer, a channel whose sender is held
    /// elsewhere).
    Lingering,
    /// Complete, its output kept because its `JoinHandle` was neither awaited nor dropped.
    Unclaimed,
    /// Not a task: a thread the test started that was still running as it ended.
    Thread,
}

impl TaskKind {
    /// The kind as messages write it: `leaked`, `lingering`, `unclaimed`.
    pub fn word(self) -> &'static str {
        match self {
            Self::Leaked => "leaked",
            Self::Lingering => "lingering",
            Self::Unclaimed => "unclaimed",
            Self::Thread => "thread",
        }
    }
}

impl LeakReport {
    /// A report of `test` with `attribution` and `budgets`, its figures zero and its lists empty until set.
    pub fn new(test: TestIdentity, attribution: Attribution, budgets: Budgets) -> Self {
        Self {
            schema_version: REPORT_SCHEMA_VERSION,
            test,
            attribution,
            budgets,
            warmup: 0,
            iterations: 1,
            outcome: Outcome::Passed,
            message: None,
            figures: ScopeStats::default(),
            excused_bytes: 0,
            per_iteration: Vec::new(),
            retained_sites: Vec::new(),
            sampled_stacks: Vec::new(),
            deferred: None,
            run_token: None,
            notes: Vec::new(),
            tasks: Vec::new(),
            cycles: Vec::new(),
        }
    }

    /// Retained bytes as the `max_retained` budget and the gate judge them: excused memory left out.
    pub fn judged_retained_bytes(&self) -> u64 {
        self.figures.judged_retained_bytes(self.excused_bytes)
    }

    /// Retained bytes that nothing reaches any more ([`Reach::is_lost`]), excused sites left out.
    pub fn lost_bytes(&self) -> u64 {
        self.retained_sites.iter().filter(|site| !site.excused).map(RetainedSite::lost_bytes).sum()
    }

    /// Retained bytes a static or a thread-local holds ([`Reach::is_held`]), excused sites left out.
    pub fn held_bytes(&self) -> u64 {
        self.retained_sites.iter().filter(|site| !site.excused).map(RetainedSite::held_bytes).sum()
    }

    /// Reads the report at `path`, which must be of this version and of test `expected`.
    pub fn read(path: &Path, expected: &TestId) -> Result<Self, ReadError> {
        let text = json::read_text(path)?;
        let report: Self = json::parse(&text, &KIND)?;
        if !report.test.is(expected) {
            return Err(ReadError::OtherTest { expected: expected.to_string(), found: report.test.to_string() });
        }
        Ok(report)
    }

    /// Reads the report of test `expected` written in the run whose token is `run_token`: as [`read`](Self::read),
    /// and a report without that token (a file the test wrote itself, or left by another run) is refused.
    pub fn read_of_run(path: &Path, expected: &TestId, run_token: &str) -> Result<Self, ReadError> {
        let report = Self::read(path, expected)?;
        if report.run_token.as_deref() != Some(run_token) {
            return Err(ReadError::OtherRun);
        }
        Ok(report)
    }

    /// Writes the report to `path` as JSON, whole or not at all, never through a link ([`json::write_own`]); it is
    /// read right away, so the write does not wait for the disk.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        json::write_own(path, self)
    }

    /// Writes the report over the file at `path`, in place: for a file no one reads until its writer moves it
    /// where it is read (`cargo ying` completing the report a test wrote). No file is created.
    ///
    /// The file is written over from its start, then cut to the report's length only when it was longer, rather
    /// than emptied first: a file emptied or cut and written again is sent to the disk when it is closed on ext4
    /// (`auto_da_alloc`, for programs that replace a file's contents that way), a write for every test that no
    /// reader needs. A start mark (the run's token) is always shorter than the report written over it.
    pub fn rewrite(&self, path: &Path) -> std::io::Result<()> {
        let json = json::to_bytes(self)?;
        let mut file = std::fs::OpenOptions::new().write(true).open(path)?;
        let was = file.metadata()?.len();
        std::io::Write::write_all(&mut file, &json)?;
        let len = json.len() as u64;
        if was > len { file.set_len(len) } else { Ok(()) }
    }

    /// Writes the report to `path` in the file of its test's start mark `mark` ([`STARTED_EXTENSION`]): the mark is
    /// renamed to `path`, then the report written over it, so no file is created. For a report no one reads before
    /// its process has ended (`cargo ying`'s): a process that ends during the write leaves a report
    /// [cut short](Self::is_cut_short), which says that a report was due as the mark did. Without the mark, as
    /// [`write`](Self::write); when the report cannot be written, the mark is put back.
    pub fn write_over_mark(&self, path: &Path, mark: &Path) -> std::io::Result<()> {
        if std::fs::rename(mark, path).is_err() {
            return self.write(path);
        }
        self.rewrite(path).inspect_err(|_| {
            let _ = std::fs::rename(path, mark);
        })
    }

    /// Whether the file at `path` is a report of the run `run_token` whose write was cut short
    /// ([`write_over_mark`](Self::write_over_mark) by a process that ended during it): the mark renamed and not yet
    /// written over (it holds the token), or JSON that ends before its value does. A write over the mark is cut at a
    /// page's end at the earliest, so none leaves the report's beginning followed by the rest of the token.
    pub fn is_cut_short(path: &Path, run_token: &str) -> bool {
        json::read_text(path).is_ok_and(|text| {
            text.trim().is_empty()
                || text == run_token
                || serde_json::from_str::<serde_json::Value>(&text).is_err_and(|error| error.is_eof())
        })
    }
}

/// The identity of a leak test, as the test binary knows it at compile time.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct TestIdentity {
    /// The Cargo package the test belongs to.
    pub package: String,
    /// The crate of the test binary (the first segment of the module path).
    pub krate: String,
    /// The binary target's name when the test is in a binary or an example (`CARGO_BIN_NAME`); `None` in a
    /// library, an integration test or a benchmark.
    #[serde(default)]
    pub bin_name: Option<String>,
    /// The module path of the test function (`my_crate::cache::tests`).
    pub module_path: String,
    /// The test's name as the test harness lists it (`cache::tests::evicts`).
    pub name: String,
    /// The source file of the test function, as `file!()` gives it.
    pub file: String,
    /// The line of the test function.
    pub line: u32,
}

impl TestIdentity {
    /// The identity of the test function `function` in `module_path` (whose first segment is the crate), of
    /// `package`, at `file:line`: the harness lists it as the module path without the crate, then the function.
    pub fn new(
        package: &str,
        bin_name: Option<&str>,
        module_path: &str,
        function: &str,
        file: &str,
        line: u32,
    ) -> Self {
        let (krate, name) = match module_path.split_once("::") {
            Some((krate, modules)) => (krate, format!("{modules}::{function}")),
            None => (module_path, function.to_owned()),
        };
        Self {
            package: package.to_owned(),
            krate: krate.to_owned(),
            bin_name: bin_name.map(str::to_owned),
            module_path: module_path.to_owned(),
            name,
            file: file.to_owned(),
            line,
        }
    }

    /// The identity of test `name`, as the harness of target `target` (of `kind`) of `package` lists it, for a test
    /// measured from outside (`cargo ying test --measure all`): the crate is the target's, and there is no source
    /// location (the test binary is not asked).
    pub fn listed(package: &str, kind: TargetKind, target: &str, name: &str) -> Self {
        let krate = target.replace('-', "_");
        let bin_name = matches!(kind, TargetKind::Bin | TargetKind::Example).then_some(target);
        let (module_path, function) = match name.rsplit_once("::") {
            Some((modules, function)) => (format!("{krate}::{modules}"), function),
            None => (krate, name),
        };
        Self::new(package, bin_name, &module_path, function, "", 0)
    }

    /// The test function's path, `crate::module::function`: the stack frames of its body are named after it.
    pub fn function_path(&self) -> String {
        format!("{}::{}", self.krate, self.name)
    }

    /// Whether this is test `id`, as far as a test binary can tell: same package and test, a binary exactly when
    /// `id` is in a binary or an example (of that name), and the crate of `id`'s target outside a library (whose
    /// crate name the id does not keep).
    pub fn is(&self, id: &TestId) -> bool {
        let crate_of_target = id.target.replace('-', "_");
        self.package == id.package
            && self.name == id.name
            && match id.kind {
                TargetKind::Bin | TargetKind::Example => self.bin_name.as_deref() == Some(id.target.as_str()),
                TargetKind::Lib => self.bin_name.is_none(),
                TargetKind::Test | TargetKind::Bench => self.bin_name.is_none() && self.krate == crate_of_target,
            }
    }
}

impl std::fmt::Display for TestIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.bin_name {
            Some(bin) => write!(f, "{}::bin/{bin} {}", self.package, self.name),
            None => write!(f, "{} (crate {}) {}", self.package, self.krate, self.name),
        }
    }
}

/// What a reader needs to symbolise deferred addresses.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct DeferredSymbols {
    /// The directory of the runtime's source files as the executable's debug information names them (with its
    /// trailing `/`), for the frame rules' `Trim` (`ying_frames`): it tells the runtime's frames apart.
    pub runtime_source: String,
}

impl DeferredSymbols {
    /// Deferred symbols of a runtime whose source lies under `runtime_source`.
    pub fn new(runtime_source: impl Into<String>) -> Self {
        Self { runtime_source: runtime_source.into() }
    }
}

/// Which allocations a scope counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Attribution {
    /// Allocations made on the scope's thread and on threads that entered it (`Scope::enter`). Right when other
    /// work runs in the same process at the same time, as tests do under `cargo test`.
    #[default]
    Thread,
    /// Every allocation in the process (except the profiler's own) that no thread-attributed scope claims. Right
    /// when the code under test runs alone in its process and spreads work over threads it does not control.
    /// One process-attributed scope can be open at a time. When it is opened on a thread other than the main
    /// thread (as a test harness runs tests), the main thread is the harness's and is not counted.
    Process,
}

/// Exact figures of what a scope did to the heap, as `ying::measure` returns them.
///
/// The scope owns the blocks it allocated and the growth (by `realloc`) it gave to older blocks; frees from any
/// thread reduce what it owns. `freed_bytes` and `frees` count the frees the scope itself made, of blocks of any
/// age, so `allocated_bytes - freed_bytes` is the scope's net change of the live heap ("growth").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct ScopeStats {
    /// Bytes the scope owned that were still live when it closed.
    pub retained_bytes: u64,
    /// Blocks allocated in the scope that were still live when it closed.
    pub retained_blocks: u64,
    /// The largest number of bytes the scope owned at once while it was open (exact).
    pub peak_bytes: u64,
    /// Bytes allocated in the scope, including growth by `realloc`.
    pub allocated_bytes: u64,
    /// Allocation calls made in the scope (a `realloc` is not a new allocation).
    pub allocations: u64,
    /// Bytes the scope freed, whatever their age, including shrinkage by `realloc`.
    pub freed_bytes: u64,
    /// Free calls made in the scope, whatever the age of the block.
    pub frees: u64,
}

impl ScopeStats {
    /// Retained bytes as a leak test's `max_retained` budget and the gate judge them: less `excused_bytes`, the
    /// retained memory the test keeps without leaking it.
    pub fn judged_retained_bytes(&self, excused_bytes: u64) -> u64 {
        self.retained_bytes.saturating_sub(excused_bytes)
    }

    /// Retained blocks as the budget judges them: less the `excused_blocks`.
    pub fn judged_retained_blocks(&self, excused_blocks: u64) -> u64 {
        self.retained_blocks.saturating_sub(excused_blocks)
    }

    /// The scope's net change of the live heap: `allocated_bytes - freed_bytes` (negative when it freed more
    /// than it allocated).
    pub fn growth(&self) -> i64 {
        self.allocated_bytes as i64 - self.freed_bytes as i64
    }
}

/// A leak test's budgets, in bytes (or allocations); `None` is not checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Budgets {
    /// Bytes the measured runs may leave allocated.
    pub max_retained: Option<u64>,
    /// Bytes the measured runs may hold at once.
    pub max_peak: Option<u64>,
    /// Bytes each measured run may allocate.
    pub max_allocated: Option<u64>,
    /// Allocations each measured run may make.
    pub max_allocations: Option<u64>,
    /// Net growth of the heap each measured run may cause (checked against the smallest growth among them).
    pub max_growth_per_iteration: Option<u64>,
    /// Retained bytes that nothing reaches any more ([`Reach::is_lost`]: lost, or in a cycle only lost blocks
    /// reach) the measured runs may leave.
    #[serde(default)]
    pub max_lost: Option<u64>,
    /// Retained bytes a static or a thread-local holds ([`Reach::is_held`]) the measured runs may leave.
    #[serde(default)]
    pub max_held: Option<u64>,
    /// Async tasks the body may leave [`TaskKind::Leaked`]: pending with nothing left to wake them.
    #[serde(default)]
    pub max_leaked_tasks: Option<u64>,
    /// Async tasks the body may leave [`TaskKind::Lingering`]: pending, something else still able to wake them.
    #[serde(default)]
    pub max_lingering_tasks: Option<u64>,
}

/// How a leak test ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The body succeeded within every budget.
    Passed,
    /// A budget was exceeded.
    Failed,
    /// The body panicked or returned an error; budgets were not judged.
    BodyFailed,
}

/// Exact figures of one measured run of the body.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct IterationFigures {
    /// Bytes allocated (growth by realloc included).
    pub allocated_bytes: u64,
    /// Allocation calls.
    pub allocations: u64,
    /// Bytes freed (shrinkage by realloc included), whatever their age.
    pub freed_bytes: u64,
    /// Free calls.
    pub frees: u64,
    /// Net change of the live heap: `allocated_bytes - freed_bytes`, less the excused growth.
    pub growth: i64,
    /// Growth of excused memory (captured test output, `allow` patterns), left out of `growth`.
    pub excused_growth: i64,
}

impl IterationFigures {
    /// The figures of a run between two readings of its scope, `start` and `end`, whose excused memory grew by
    /// `excused_growth` bytes.
    pub fn between(start: &ScopeStats, end: &ScopeStats, excused_growth: i64) -> Self {
        let allocated_bytes = end.allocated_bytes - start.allocated_bytes;
        let freed_bytes = end.freed_bytes - start.freed_bytes;
        Self {
            allocated_bytes,
            allocations: end.allocations - start.allocations,
            freed_bytes,
            frees: end.frees - start.frees,
            growth: allocated_bytes as i64 - freed_bytes as i64 - excused_growth,
            excused_growth,
        }
    }
}

/// Where retained memory was allocated: one stack and what its blocks still hold.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct RetainedSite {
    /// Bytes retained from this stack (exact).
    pub bytes: u64,
    /// Blocks allocated from this stack and still live (blocks only grown here are not counted).
    pub blocks: u64,
    /// Excused by an `allow` pattern or as captured test output.
    pub excused: bool,
    /// The stack, from the allocation site outwards; empty when the stack was not recorded.
    pub frames: Vec<Frame>,
    /// Instead of the code frames, for a test measured from outside under [`DEFER_SYMBOLS_ENV`]: the stack's
    /// instruction addresses in the test executable, innermost first, as in [`SampledStack::addresses`]. The
    /// process judged only what the addresses tell ([`excused`](Self::excused) is false until then): the reader
    /// symbolises them, judges the frames by the frame rules' `frames_are_excused` (no
    /// patterns) and, for an excused site, sets `excused` and adds its bytes to
    /// [`LeakReport::excused_bytes`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<u64>,
    /// The Rust type of what was allocated here (`my_crate::Session` for a `Box<Session>`, `u8` for a `Vec<u8>`'s
    /// buffer), when the stack's frames tell it; `None` rather than a guess.
    #[serde(rename = "type", default)]
    pub type_name: Option<String>,
    /// Why the retained bytes are still there, at the end of the test: what reaches them, by kind and root, the
    /// most bytes first. The bytes add up to [`bytes`](Self::bytes). Empty when the test did not look (a test
    /// that did not pass, a platform where memory is not scanned, or memory excused by the addresses of the code
    /// that allocated it, such as the standard library's backtraces, which is not scanned).
    #[serde(default)]
    pub why: Vec<Why>,
    /// The lost blocks of other sites that only this site's lost blocks lead to, as valgrind groups lost memory
    /// (its "indirectly lost"): a forgotten `Box<Tree>` owns its nodes, the first member allocated of a cycle owns
    /// the rest. By site, the most bytes first; a site's own blocks are never listed here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owns: Vec<Owned>,
}

/// Lost blocks of another site that a site's lost blocks own ([`RetainedSite::owns`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Owned {
    /// The other site: its index in the report's [`LeakReport::retained_sites`].
    pub site: usize,
    /// Bytes of its blocks owned.
    pub bytes: u64,
    /// Its blocks owned.
    pub blocks: u64,
}

impl RetainedSite {
    /// `bytes` in `blocks` blocks allocated at `frames`.
    pub fn new(bytes: u64, blocks: u64, excused: bool, frames: Vec<Frame>) -> Self {
        Self {
            bytes,
            blocks,
            excused,
            frames,
            addresses: Vec::new(),
            type_name: None,
            why: Vec::new(),
            owns: Vec::new(),
        }
    }

    /// `bytes` in `blocks` blocks allocated at the instruction `addresses` of the test executable, for the reader
    /// to symbolise and judge (see [`addresses`](Self::addresses)); `frames` holds what follows the code frames
    /// (the `tracing` spans the stack was captured in).
    pub fn deferred(bytes: u64, blocks: u64, addresses: Vec<u64>, frames: Vec<Frame>) -> Self {
        Self { bytes, blocks, excused: false, frames, addresses, type_name: None, why: Vec::new(), owns: Vec::new() }
    }

    /// Puts `sites` in a report's order: the most bytes first, then by frames. The sites each [`owns`](Self::owns)
    /// names follow them to their new places.
    pub fn sort(sites: &mut [Self]) {
        let order = |a: &Self, b: &Self| b.bytes.cmp(&a.bytes).then_with(|| a.frames.cmp(&b.frames));
        // Both sorts are stable with one order: the sites land where their indices do.
        let mut indices: Vec<usize> = (0..sites.len()).collect();
        indices.sort_by(|&a, &b| order(&sites[a], &sites[b]));
        let mut moved_to = vec![usize::MAX; sites.len()];
        for (to, &from) in indices.iter().enumerate() {
            moved_to[from] = to;
        }
        for owned in sites.iter_mut().flat_map(|site| &mut site.owns) {
            owned.site = moved_to.get(owned.site).copied().unwrap_or(usize::MAX);
        }
        sites.sort_by(order);
    }

    /// The bytes of each of `sites` that other sites' lost blocks own ([`owns`](Self::owns)).
    pub fn owned_elsewhere(sites: &[Self]) -> Vec<u64> {
        let mut owned = vec![0; sites.len()];
        for (index, site) in sites.iter().enumerate() {
            for item in site.owns.iter().filter(|item| item.site != index) {
                if let Some(bytes) = owned.get_mut(item.site) {
                    *bytes += item.bytes;
                }
            }
        }
        owned
    }

    /// Bytes of this site that nothing reaches any more (lost, or in a cycle of lost blocks).
    pub fn lost_bytes(&self) -> u64 {
        self.why.iter().filter(|why| why.kind.is_lost()).map(|why| why.bytes).sum()
    }

    /// Bytes of this site a static or a thread-local holds ([`Reach::is_held`]).
    pub fn held_bytes(&self) -> u64 {
        self.why.iter().filter(|why| why.kind.is_held()).map(|why| why.bytes).sum()
    }
}

/// What keeps retained memory allocated at the end of a test: how it is reached, and from where. A block gets the
/// first kind that reaches it, in this order from [`Static`](Self::Static) on; [`Cycle`](Self::Cycle),
/// [`Owned`](Self::Owned) and [`Lost`](Self::Lost) are what nothing reaches.
///
/// Roots are found by a conservative scan: any aligned word whose value points into a block reaches it, so a word
/// that only looks like a pointer (an integer, a stale copy in memory freed since) can keep a lost block reachable.
/// The other way round it does not err: a block reported lost is pointed to by no word the scan read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reach {
    /// Reachable from a static: the writable data of a loaded object (`root`: the symbol holding the word).
    Static,
    /// Reachable from a thread-local of a live thread (`root`: its path, when its symbol is known).
    ThreadLocal,
    /// Reachable from a live thread's stack (`root`: the thread's name).
    ThreadStack,
    /// Reachable only through memory allocated before the test (`root`: the static behind it, when known).
    Heap,
    /// In a cycle of blocks that nothing else reaches (a reference cycle, for `Rc` and `Arc` allocations), or
    /// reached only from one.
    Cycle,
    /// Only lost blocks point to it, no cycle among them: memory a lost block owns (the inner nodes of a list
    /// forgotten whole), valgrind's "indirectly lost".
    Owned,
    /// Nothing points to it: no pointer to it remains (`mem::forget`, `Box::leak` whose reference was dropped).
    Lost,
}

impl Reach {
    /// Every kind, in order.
    pub const ALL: [Reach; 7] =
        [Self::Static, Self::ThreadLocal, Self::ThreadStack, Self::Heap, Self::Cycle, Self::Owned, Self::Lost];

    /// Whether nothing reaches memory of this kind any more: [`Lost`](Self::Lost), [`Owned`](Self::Owned) or
    /// [`Cycle`](Self::Cycle).
    pub fn is_lost(self) -> bool {
        matches!(self, Self::Lost | Self::Owned | Self::Cycle)
    }

    /// Whether a static or a thread-local holds it, directly or through memory allocated before the test: memory
    /// the process keeps for as long as the static or the thread lives (`static`, `thread_local`, `heap`).
    pub fn is_held(self) -> bool {
        matches!(self, Self::Static | Self::ThreadLocal | Self::Heap)
    }

    /// Its name in the report: `static`, `thread_local`, `thread_stack`, `heap`, `cycle`, `owned`, `lost`.
    pub fn key(self) -> &'static str {
        match self {
            Self::Static => "static",
            Self::ThreadLocal => "thread_local",
            Self::ThreadStack => "thread_stack",
            Self::Heap => "heap",
            Self::Cycle => "cycle",
            Self::Owned => "owned",
            Self::Lost => "lost",
        }
    }
}

/// Retained bytes of one site reached one way ([`RetainedSite::why`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Why {
    /// How they are reached.
    pub kind: Reach,
    /// From where: the static's or thread-local's path, or the thread's name; `None` where there is none.
    pub root: Option<String>,
    /// Retained bytes reached so.
    pub bytes: u64,
    /// Retained blocks reached so.
    pub blocks: u64,
}

impl Why {
    /// What keeps these bytes, in words: `lost`, `a reference cycle` (`cycle` of `Rc`/`Arc` allocations, as
    /// `counted` says), `held by static my_crate::CACHE`, `held by thread-local my_crate::BUF`, `held on the
    /// stack of thread worker`, `held through memory allocated before the test`.
    pub fn describe(&self, counted: bool) -> String {
        let root = self.root.as_deref();
        match (self.kind, root) {
            (Reach::Lost, _) => "lost (nothing points to it)".to_owned(),
            (Reach::Owned, _) => "lost, owned by lost memory (only lost blocks point to it)".to_owned(),
            (Reach::Cycle, _) if counted => "lost in a reference cycle".to_owned(),
            (Reach::Cycle, _) => "lost in a cycle (only lost blocks point to it)".to_owned(),
            (Reach::Static, Some(root)) => format!("held by static {root}"),
            (Reach::Static, None) => "held by a static".to_owned(),
            (Reach::ThreadLocal, Some(root)) => format!("held by thread-local {root}"),
            (Reach::ThreadLocal, None) => "held by a thread-local".to_owned(),
            (Reach::ThreadStack, Some(root)) => format!("held on the stack of thread `{root}`"),
            (Reach::ThreadStack, None) => "held on a thread's stack".to_owned(),
            (Reach::Heap, Some(root)) => format!("held through memory allocated before the test (from {root})"),
            (Reach::Heap, None) => "held through memory allocated before the test".to_owned(),
        }
    }
}

/// A sampled stack with its estimates, as the runtime's `StackStats` gives them.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct SampledStack {
    /// Estimated bytes retained.
    pub retained_bytes: f64,
    /// Estimated allocations still live.
    pub retained_objects: f64,
    /// Estimated bytes allocated.
    pub allocated_bytes: f64,
    /// Estimated allocations made.
    pub allocated_objects: f64,
    /// The stack, from the allocation site outwards, then the `tracing` spans it was allocated in (frames named
    /// `span:<name>`, with the `profile-spans` feature).
    pub frames: Vec<Frame>,
    /// Instead of the code frames, under [`DEFER_SYMBOLS_ENV`]: the stack's instruction addresses in the test
    /// executable (as its debug information counts them), innermost first, for the reader to symbolise, trim
    /// with the frame rules' `Trim` (see [`LeakReport::deferred`]) and put before the span frames `frames` then
    /// holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<u64>,
}

#[cfg(test)]
mod tests {
    #[test]
    fn allow_patterns_are_read_from_the_variable_or_the_file_it_names() {
        assert_eq!(super::parse_allow(r#"["regex::"]"#.into()), Ok(vec!["regex::".to_owned()]));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("allow.json");
        let many: Vec<String> = (0..20_000).map(|n| format!("my_crate::module_{n}::")).collect();
        std::fs::write(&path, serde_json::to_string(&many).unwrap()).unwrap();
        assert_eq!(super::parse_allow(format!("@{}", path.display()).into()), Ok(many));
        let missing = super::parse_allow(format!("@{}", dir.path().join("gone").display()).into()).unwrap_err();
        assert!(missing.starts_with("YING_ALLOW names "), "{missing}");
        let every = super::parse_allow(r#"["regex::", "core"]"#.into()).unwrap_err();
        assert!(every.starts_with("YING_ALLOW: the pattern \"core\" is part of"), "{every}");
    }

    #[test]
    fn a_pattern_part_of_a_frame_every_test_holds_is_refused_and_one_of_a_path_is_not() {
        for pattern in ["core", "::", " ", "std", "test::", "alloc::string::String", "call_once"] {
            let why = super::excuses_every_test(pattern).unwrap_or_else(|| panic!("{pattern:?} is refused"));
            assert!(why.starts_with(&format!("the pattern {pattern:?} is part of `")), "{why}");
        }
        for pattern in ["regex::", "tokio::signal::", "my_crate::interner", "lru::LruCache", "hashbrown::raw::"] {
            assert_eq!(super::excuses_every_test(pattern), None, "{pattern}");
        }
    }

    use super::{Attribution, Budgets, LeakReport, Owned, RetainedSite, TestIdentity};
    use crate::frame::Frame;
    use crate::json::ReadError;
    use crate::test_id::{TargetKind, TestId};

    fn identity(bin_name: Option<&str>) -> TestIdentity {
        TestIdentity::new("app", bin_name, "app::tests", "same_unit", "src/lib.rs", 7)
    }

    #[cfg(unix)]
    #[test]
    fn sorted_sites_take_the_sites_they_own_along() {
        let site =
            |bytes: u64, function: &str| RetainedSite::new(bytes, 1, false, vec![Frame::new(function, None, None)]);
        // The box (16 B) owns the two buffers; after sorting, its list still names them.
        let mut sites = vec![site(16, "app::boxed"), site(100, "app::small"), site(4096, "app::large")];
        sites[0].owns = vec![Owned { site: 2, bytes: 4096, blocks: 1 }, Owned { site: 1, bytes: 100, blocks: 1 }];
        RetainedSite::sort(&mut sites);
        let functions: Vec<&str> = sites.iter().map(|site| site.frames[0].function.as_str()).collect();
        assert_eq!(functions, ["app::large", "app::small", "app::boxed"]);
        let owned: Vec<&str> = sites[2].owns.iter().map(|item| sites[item.site].frames[0].function.as_str()).collect();
        assert_eq!(owned, ["app::large", "app::small"]);
        assert_eq!(RetainedSite::owned_elsewhere(&sites), [4096, 100, 0]);
    }

    #[test]
    fn a_report_written_over_its_mark_takes_the_marks_file_and_a_write_cut_short_says_so() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let (path, mark) = (dir.path().join("t.json"), dir.path().join("t.started"));
        std::fs::write(&mark, "token").unwrap();
        let inode = std::fs::metadata(&mark).unwrap().ino();
        let mut report = LeakReport::new(identity(None), Attribution::Process, Budgets::default());
        report.run_token = Some("token".to_owned());
        report.write_over_mark(&path, &mark).unwrap();
        assert!(!mark.exists());
        assert_eq!(std::fs::metadata(&path).unwrap().ino(), inode, "no file made");
        let written = std::fs::read_to_string(&path).unwrap();
        assert_eq!(serde_json::from_str::<LeakReport>(&written).unwrap(), report);
        assert!(!LeakReport::is_cut_short(&path, "token"));

        // Without a mark, the report is written as any other.
        let elsewhere = dir.path().join("u.json");
        report.write_over_mark(&elsewhere, &mark).unwrap();
        assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), written);

        // A process that ended during the write left the mark renamed, or a beginning of the report.
        for cut in ["token", "", &written[..1], &written[..written.len() / 2], &written[..written.len() - 2]] {
            std::fs::write(&path, cut).unwrap();
            assert!(LeakReport::is_cut_short(&path, "token"), "{cut:?}");
        }
        for other in ["another run's token", "not a report"] {
            std::fs::write(&path, other).unwrap();
            assert!(!LeakReport::is_cut_short(&path, "token"), "{other:?}");
        }
        assert!(!LeakReport::is_cut_short(&dir.path().join("none.json"), "token"));

        // Written over a longer file, the report is cut to its own length.
        std::fs::write(&path, " ".repeat(written.len() * 2)).unwrap();
        report.rewrite(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), written);
    }

    #[test]
    fn an_identity_is_its_test_and_no_other() {
        let lib = TestId::new("app", TargetKind::Lib, "app", "tests::same_unit");
        let bin = TestId::new("app", TargetKind::Bin, "app", "tests::same_unit");
        assert_eq!(identity(None).name, "tests::same_unit");
        assert!(identity(None).is(&lib) && !identity(None).is(&bin));
        assert!(identity(Some("app")).is(&bin) && !identity(Some("app")).is(&lib));
        assert!(!identity(Some("other")).is(&bin));
        let integration = TestIdentity::new("app", None, "cache_tests", "evicts", "tests/cache-tests.rs", 3);
        assert!(integration.is(&TestId::new("app", TargetKind::Test, "cache-tests", "evicts")));
        assert!(!integration.is(&TestId::new("app", TargetKind::Test, "leaks", "evicts")));
        assert!(!integration.is(&TestId::new("other", TargetKind::Test, "cache-tests", "evicts")));
    }

    #[test]
    fn a_listed_test_is_the_test_cargo_ying_ran_and_names_its_function() {
        let cases = [
            (TargetKind::Lib, "my-app", "cache::tests::evicts", "my_app::cache::tests", "my_app::cache::tests::evicts"),
            (TargetKind::Test, "cache-tests", "evicts", "cache_tests", "cache_tests::evicts"),
            (TargetKind::Bin, "tool", "tests::parses", "tool::tests", "tool::tests::parses"),
        ];
        for (kind, target, name, module_path, function_path) in cases {
            let identity = TestIdentity::listed("my-app", kind, target, name);
            assert!(identity.is(&TestId::new("my-app", kind, target, name)), "{identity:?}");
            assert_eq!((identity.module_path.as_str(), identity.function_path()), (module_path, function_path.into()));
            assert_eq!(identity.bin_name.is_some(), kind == TargetKind::Bin);
        }
    }

    #[test]
    fn reports_round_trip_and_are_refused_when_not_this_tests_or_this_versions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        let mut report = LeakReport::new(identity(None), Attribution::Process, Budgets::default());
        report.figures.retained_bytes = 1500;
        report.excused_bytes = 500;
        report.retained_sites = vec![
            RetainedSite::new(1000, 1, false, vec![Frame::new("app::leak", None, None)]),
            RetainedSite::new(500, 1, true, vec![Frame::new("std::io::stdio::_print", None, None)]),
        ];
        report.write(&path).unwrap();
        let lib = TestId::new("app", TargetKind::Lib, "app", "tests::same_unit");
        let read = LeakReport::read(&path, &lib).unwrap();
        assert_eq!(read, report);
        assert_eq!(read.judged_retained_bytes(), 1000);

        let other = TestId::new("app", TargetKind::Lib, "app", "tests::other");
        let error = LeakReport::read(&path, &other).unwrap_err();
        assert!(matches!(error, ReadError::OtherTest { .. }), "{error:?}");
        assert_eq!(
            error.to_string(),
            "it is the report of `app (crate app) tests::same_unit`, not of `app tests::other`"
        );

        let text = std::fs::read_to_string(&path).unwrap().replace("\"schema_version\": 4", "\"schema_version\": 1");
        std::fs::write(&path, text).unwrap();
        let error = LeakReport::read(&path, &lib).unwrap_err().to_string();
        assert!(
            error.contains("schema_version 1 at line 2 column 3 is not 4") && error.contains("earlier ying-runtime"),
            "{error}"
        );
    }

    #[test]
    fn a_run_takes_only_the_reports_that_carry_its_token() {
        let dir = tempfile::tempdir().unwrap();
        let lib = TestId::new("app", TargetKind::Lib, "app", "tests::same_unit");
        let mut report = LeakReport::new(identity(None), Attribution::Process, Budgets::default());
        let path = dir.path().join("untokened.json");
        report.write(&path).unwrap();
        assert!(matches!(LeakReport::read_of_run(&path, &lib, "t1"), Err(ReadError::OtherRun)));
        report.run_token = Some("t0".to_owned());
        report.write(&path).unwrap();
        let error = LeakReport::read_of_run(&path, &lib, "t1").unwrap_err();
        assert_eq!(
            error.to_string(),
            "it does not carry this run's token: the leak test's runner did not write it in this run"
        );
        assert_eq!(LeakReport::read_of_run(&path, &lib, "t0").unwrap(), report);
    }
}
