//! Leak tests in a process of their own, as `cargo ying` runs them: process attribution (by argument or by the
//! `YING_ATTRIBUTION` environment variable) catches leaks on helper threads, and `YING_REPORT_DIR` receives a
//! report per test. Each check runs one `#[ignore]`d leak test in a child process of this test binary.

use std::hint::black_box;
use std::process::{Command, Output};

#[global_allocator]
static ALLOC: ying::YingProfiler = ying::YingProfiler::new();

fn leak_on_a_helper_thread() {
    std::thread::spawn(|| {
        Box::leak(black_box(Box::new([0u8; 512])));
    })
    .join()
    .unwrap();
}

#[ying::leak_test(attribution = "process")]
#[ignore = "run in a child process"]
fn helper_thread_leak_process() {
    leak_on_a_helper_thread();
}

#[ying::leak_test]
#[ignore = "run in a child process"]
fn helper_thread_leak_default() {
    leak_on_a_helper_thread();
}

#[ying::leak_test(max_retained = "1 KiB", max_growth_per_iteration = "128 B", warmup = 1, iterations = 2)]
#[ignore = "run in a child process"]
fn clean_with_budgets() {
    drop(black_box(vec![0u8; 10_000]));
    Box::leak(black_box(Box::new([0u8; 100])));
}

fn leak(bytes: usize) {
    std::mem::forget(black_box(Vec::<u8>::with_capacity(bytes)));
}

/// `ying::measure` inside a process-attributed scope: the process scope's figures include the inner scope's,
/// exactly.
#[test]
#[ignore = "run in a child process"]
fn nested_in_a_process_scope() {
    let ((inner, second), outer) = ying::measure_with(ying::Attribution::Process, || {
        leak(50);
        let older = black_box(vec![0u8; 1000]);
        let (kept, inner) = ying::measure(move || {
            leak(100);
            drop(older);
            black_box(vec![0u8; 200])
        });
        drop(kept);
        let ((), second) = ying::measure(|| assert_eq!(ying::measure(|| leak(30)).1.retained_bytes, 30));
        (inner, second)
    });
    let figures = |s: &ying::ScopeStats| {
        [s.retained_bytes, s.retained_blocks, s.peak_bytes, s.allocated_bytes, s.allocations, s.freed_bytes, s.frees]
    };
    assert_eq!(figures(&inner), [300, 2, 300, 300, 2, 1000, 1]);
    assert_eq!(figures(&second), [30, 1, 30, 30, 1, 0, 0]);
    assert_eq!(figures(&outer), [180, 3, 1150, 1380, 5, 1200, 2]);
}

/// A helper thread keeps the guard of a `measure`'s scope after the scope closed, then leaks. (Barriers, not
/// channels: a blocking receive allocates thread-local state that the helper frees as it exits, after the join.)
#[ying::leak_test(attribution = "process", warmup = 1)]
#[ignore = "run in a child process"]
fn outliving_guard_leak_process() {
    use std::sync::{Arc, Barrier};
    let (entered, go) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
    let (helper, _) = ying::measure(|| {
        let scope = ying::Scope::current();
        let (helper_entered, helper_go) = (Arc::clone(&entered), Arc::clone(&go));
        let helper = std::thread::spawn(move || {
            let _entered = scope.enter();
            helper_entered.wait();
            helper_go.wait();
            leak(4096);
        });
        entered.wait();
        helper
    });
    go.wait();
    helper.join().unwrap();
}

#[test]
fn scopes_nest_in_a_process_attributed_scope() {
    let output = run_alone("nested_in_a_process_scope", &[]);
    assert!(output.status.success(), "{}", stderr(&output));
}

#[test]
fn a_guard_that_outlived_its_scope_hides_nothing_from_process_attribution() {
    let output = run_alone("outliving_guard_leak_process", &[]);
    let stderr = stderr(&output);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("max_retained = 0 B: retained 4.0 KiB (4096 bytes) in 1 block"), "{stderr}");
}

/// Runs the ignored test `name` alone in a child process, as `cargo ying` does.
/// A task's output: 500 bytes.
async fn produce() -> Vec<u8> {
    black_box(vec![9u8; 500])
}

/// The line of `unclaimed_task`'s spawn.
const UNCLAIMED_SPAWN_LINE: u32 = line!() + 7;

/// A task that completed, its `JoinHandle` forgotten: its output is kept, unclaimed.
#[ying::leak_test]
#[tokio::test]
#[ignore = "run in a child process"]
async fn unclaimed_task() {
    let handle = tokio::spawn(produce());
    tokio::task::yield_now().await;
    std::mem::forget(handle);
}

/// Keeps its own waker where only it can reach it (as a task awaiting a channel whose only sender it holds):
/// nothing can ever wake it.
async fn await_own_waker() {
    let slot: std::sync::Arc<std::sync::Mutex<Option<std::task::Waker>>> = std::sync::Arc::default();
    std::future::poll_fn(|cx| {
        *slot.lock().unwrap() = Some(cx.waker().clone());
        std::task::Poll::<()>::Pending
    })
    .await;
}

/// Sleeps for an hour at a time, for ever: its timer can wake it.
async fn sleep_for_ever() {
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
    }
}

/// The line of `leave_waiting_tasks`' first spawn (the one that leaks).
const LEAKED_SPAWN_LINE: u32 = line!() + 4;

/// Spawns one task that keeps its own waker (leaked) and one that sleeps (lingering), and drops their handles.
async fn leave_waiting_tasks() {
    drop(tokio::spawn(await_own_waker()));
    drop(tokio::spawn(sleep_for_ever()));
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
}

/// Leaves a leaked task and a lingering one.
#[ying::leak_test]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run in a child process"]
async fn waiting_tasks() {
    leave_waiting_tasks().await;
}

/// Leaves the same, the leaked one allowed.
#[ying::leak_test(max_leaked_tasks = 1)]
#[tokio::test]
#[ignore = "run in a child process"]
async fn waiting_tasks_allowed() {
    leave_waiting_tasks().await;
}

/// The line of `thread_left_running`'s spawn.
const THREAD_SPAWN_LINE: u32 = line!() + 8;

/// Starts a thread that outlives the test.
#[ying::leak_test(max_retained = "64 KiB")]
#[ignore = "run in a child process"]
fn thread_left_running() {
    std::thread::Builder::new()
        .name("ticker".into())
        .spawn(|| std::thread::sleep(std::time::Duration::from_secs(2)))
        .unwrap();
}

/// A task joined: nothing is left of it.
#[ying::leak_test]
#[tokio::test]
#[ignore = "run in a child process"]
async fn joined_task() {
    assert_eq!(tokio::spawn(produce()).await.unwrap().len(), 500);
}

fn run_alone(name: &str, envs: &[(&str, &std::ffi::OsStr)]) -> Output {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command.args(["--exact", name, "--ignored", "--nocapture", "--test-threads=1"]);
    command.env_remove(ying::ATTRIBUTION_ENV).env_remove(ying::report::REPORT_DIR_ENV);
    for (key, value) in envs {
        command.env(key, value);
    }
    command.output().unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn process_attribution_catches_a_leak_on_a_helper_thread() {
    let output = run_alone("helper_thread_leak_process", &[]);
    let stderr = stderr(&output);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("max_retained = 0 B: retained 512 B in 1 block"), "{stderr}");
    assert!(
        stderr.contains("leak_test_process::leak_on_a_helper_thread::{{closure}} at tests/leak_test_process.rs:"),
        "{stderr}"
    );
}

#[test]
fn thread_attribution_counts_only_the_tests_own_thread() {
    let output = run_alone("helper_thread_leak_default", &[]);
    assert!(output.status.success(), "{}", stderr(&output));
}

#[test]
fn the_environment_switches_the_default_to_process_attribution() {
    let output = run_alone("helper_thread_leak_default", &[(ying::ATTRIBUTION_ENV, "process".as_ref())]);
    let stderr = stderr(&output);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("retained 512 B in 1 block"), "{stderr}");
}

#[test]
fn an_unknown_attribution_in_the_environment_is_an_error() {
    let output = run_alone("clean_with_budgets", &[(ying::ATTRIBUTION_ENV, "everything".as_ref())]);
    let stderr = stderr(&output);
    assert!(!output.status.success());
    assert!(stderr.contains("ying: YING_ATTRIBUTION must be `process` or `thread`, not `everything`"), "{stderr}");
}

fn read_reports(dir: &std::path::Path) -> Vec<ying::report::LeakReport> {
    let mut reports: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .map(|path| serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap())
        .collect();
    reports.sort_by(|a: &ying::report::LeakReport, b| a.test.name.cmp(&b.test.name));
    reports
}

#[test]
fn an_async_bodys_unclaimed_task_is_reported_with_its_future_and_spawn_line_and_a_joined_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let envs = [(ying::report::REPORT_DIR_ENV, dir.path().as_os_str())];
    let unclaimed = run_alone("unclaimed_task", &envs);
    assert!(!unclaimed.status.success(), "the task's cell and output are retained: {}", stderr(&unclaimed));
    let joined = run_alone("joined_task", &envs);
    assert!(joined.status.success(), "{}", stderr(&joined));
    let reports = read_reports(dir.path());
    assert_eq!(reports.len(), 2);
    assert_eq!(reports[0].test.name, "joined_task");
    assert_eq!(reports[0].tasks, []);
    assert_eq!(reports[1].test.name, "unclaimed_task");
    let tasks = &reports[1].tasks;
    assert_eq!(tasks.len(), 1, "{tasks:#?}");
    let task = &tasks[0];
    assert_eq!(task.kind, ying::report::TaskKind::Unclaimed, "{task:#?}");
    assert_eq!(task.future.as_deref(), Some("leak_test_process::produce"), "{task:#?}");
    let spawned_at = format!("tests/leak_test_process.rs:{UNCLAIMED_SPAWN_LINE}");
    assert_eq!(task.spawned_at.as_deref(), Some(spawned_at.as_str()), "{task:#?}");
    assert!(task.bytes > 0, "{task:#?}");
}

#[test]
fn a_task_nothing_can_wake_is_leaked_and_one_a_timer_can_is_lingering_and_the_runtimes_workers_are_not_listed() {
    let dir = tempfile::tempdir().unwrap();
    let envs = [(ying::report::REPORT_DIR_ENV, dir.path().as_os_str())];
    let output = run_alone("waiting_tasks", &envs);
    let reports = read_reports(dir.path());
    assert_eq!(reports.len(), 1);
    let tasks: Vec<_> =
        reports[0].tasks.iter().map(|task| (task.kind, task.future.as_deref(), task.spawned_at.as_deref())).collect();
    let leaked_at = format!("tests/leak_test_process.rs:{LEAKED_SPAWN_LINE}");
    let lingering_at = format!("tests/leak_test_process.rs:{}", LEAKED_SPAWN_LINE + 1);
    use ying::report::TaskKind::{Leaked, Lingering};
    assert_eq!(
        tasks,
        [
            (Leaked, Some("leak_test_process::await_own_waker"), Some(leaked_at.as_str())),
            (Lingering, Some("leak_test_process::sleep_for_ever"), Some(lingering_at.as_str())),
        ],
        "{:#?}",
        reports[0].tasks
    );
    // A leaked task fails the test by default, the message naming it.
    assert!(!output.status.success(), "{}", stderr(&output));
    assert_eq!(reports[0].outcome, ying::report::Outcome::Failed);
    let message = reports[0].message.as_deref().unwrap();
    assert!(message.contains("\n  max_leaked_tasks = 0: 1 task leaked"), "{message}");
    let named = format!("leaked task `leak_test_process::await_own_waker`, spawned at {leaked_at}, ");
    assert!(message.contains(&named), "{message}");
    assert!(stderr(&output).contains(&named), "{}", stderr(&output));
}

#[test]
fn a_leaked_task_is_allowed_by_the_attributes_budget_or_the_workspaces() {
    let dir = tempfile::tempdir().unwrap();
    let envs = [(ying::report::REPORT_DIR_ENV, dir.path().as_os_str())];
    let allowed = run_alone("waiting_tasks_allowed", &envs);
    assert!(allowed.status.success(), "{}", stderr(&allowed));
    let reports = read_reports(dir.path());
    assert_eq!(reports[0].budgets.max_leaked_tasks, Some(1));
    assert_eq!(reports[0].tasks.len(), 2, "{:#?}", reports[0].tasks);
    // The workspace's budget, where the attribute writes none; the attribute's wins over it.
    let workspace = [envs[0], (ying::report::TASK_BUDGETS_ENV, "leaked=1,lingering=0".as_ref())];
    let strict = run_alone("waiting_tasks", &workspace);
    assert!(!strict.status.success());
    let message = stderr(&strict);
    assert!(message.contains("max_lingering_tasks = 0: 1 task lingering"), "{message}");
    assert!(!message.contains("max_leaked_tasks"), "{message}");
    let loose = [envs[0], (ying::report::TASK_BUDGETS_ENV, "leaked=0,lingering=1".as_ref())];
    assert!(run_alone("waiting_tasks_allowed", &loose).status.success());
}

#[test]
fn a_thread_the_test_left_running_is_listed_with_its_name_closure_and_spawn_line() {
    let dir = tempfile::tempdir().unwrap();
    let envs = [(ying::report::REPORT_DIR_ENV, dir.path().as_os_str())];
    let output = run_alone("thread_left_running", &envs);
    assert!(output.status.success(), "what its stack holds is within the budget: {}", stderr(&output));
    let reports = read_reports(dir.path());
    let threads = &reports[0].tasks;
    assert_eq!(threads.len(), 1, "{threads:#?}");
    let thread = &threads[0];
    assert_eq!((thread.kind, thread.thread.as_deref()), (ying::report::TaskKind::Thread, Some("ticker")));
    assert_eq!(thread.future.as_deref(), Some("leak_test_process::thread_left_running::{closure}"));
    let spawned_at = format!("tests/leak_test_process.rs:{THREAD_SPAWN_LINE}");
    assert_eq!(thread.spawned_at.as_deref(), Some(spawned_at.as_str()));
    assert!(thread.bytes > 0, "{thread:?}");
}

#[test]
fn each_leak_test_writes_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let envs = [(ying::report::REPORT_DIR_ENV, dir.path().as_os_str()), (ying::ATTRIBUTION_ENV, "process".as_ref())];
    assert!(!run_alone("helper_thread_leak_process", &envs).status.success());
    assert!(run_alone("clean_with_budgets", &envs).status.success());
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    let reports = read_reports(dir.path());
    assert_eq!(reports.len(), 2, "{names:?}");

    let clean = &reports[0];
    assert_eq!(clean.schema_version, ying::report::REPORT_SCHEMA_VERSION);
    assert_eq!(clean.test.name, "clean_with_budgets");
    assert_eq!(clean.test.package, "ying-runtime");
    assert_eq!(clean.test.krate, "leak_test_process");
    assert_eq!(clean.test.module_path, "leak_test_process");
    assert_eq!(clean.test.file, "ying-runtime/tests/leak_test_process.rs");
    assert_eq!(clean.attribution, ying::Attribution::Process);
    assert_eq!(clean.outcome, ying::report::Outcome::Passed);
    assert_eq!((clean.warmup, clean.iterations), (1, 2));
    assert_eq!(clean.budgets.max_retained, Some(1024));
    assert_eq!(clean.budgets.max_growth_per_iteration, Some(128));
    assert_eq!(clean.budgets.max_peak, None, "not written, no default");
    assert_eq!(clean.per_iteration.len(), 2);
    assert!(clean.per_iteration.iter().all(|it| it.allocations >= 2 && it.allocated_bytes >= 10_100));
    assert_eq!(clean.figures.retained_bytes, 200);
    assert!(clean.message.is_none());
    let site = &clean.retained_sites[0];
    assert_eq!((site.bytes, site.blocks, site.excused), (200, 2, false));
    // The body's closure is named after the test, whatever the debug information.
    assert!(
        site.frames.iter().any(|f| f.function == "leak_test_process::clean_with_budgets"
            && f.file.as_deref() == Some("tests/leak_test_process.rs")),
        "{:#?}",
        site.frames
    );
    assert!(!clean.sampled_stacks.is_empty());

    let leaky = &reports[1];
    assert_eq!(leaky.test.name, "helper_thread_leak_process");
    assert_eq!(leaky.outcome, ying::report::Outcome::Failed);
    assert!(leaky.message.as_deref().unwrap().starts_with("ying: leak test `helper_thread_leak_process`"));
    assert_eq!(leaky.figures.retained_bytes, 512);
    assert_eq!(names.len(), 2, "no partial files left: {names:?}");
}

#[test]
fn reports_hold_nothing_that_churns_between_identical_runs() {
    let first = tempfile::tempdir().unwrap();
    let second = tempfile::tempdir().unwrap();
    for dir in [&first, &second] {
        let envs =
            [(ying::report::REPORT_DIR_ENV, dir.path().as_os_str()), (ying::ATTRIBUTION_ENV, "process".as_ref())];
        assert!(run_alone("clean_with_budgets", &envs).status.success());
    }
    let (mut first, mut second) = (read_reports(first.path()), read_reports(second.path()));
    // Sampled stacks are estimates of a random sample; everything else is exact and must match.
    first[0].sampled_stacks.clear();
    second[0].sampled_stacks.clear();
    assert_eq!(first, second);
}

#[test]
fn deferred_symbols_leave_addresses_for_the_reader() {
    let dir = tempfile::tempdir().unwrap();
    let envs = [
        (ying::report::REPORT_DIR_ENV, dir.path().as_os_str()),
        (ying::report::DEFER_SYMBOLS_ENV, "1".as_ref()),
        (ying::ATTRIBUTION_ENV, "process".as_ref()),
    ];
    assert!(run_alone("clean_with_budgets", &envs).status.success());
    let report = read_reports(dir.path()).remove(0);
    assert!(!report.sampled_stacks.is_empty());
    // Retained sites are still named in the process (the failure message and the excuses need names).
    assert!(report.retained_sites.iter().all(|site| !site.frames.is_empty()));
    if cfg!(target_os = "linux") {
        for stack in &report.sampled_stacks {
            assert!(stack.frames.is_empty() && !stack.addresses.is_empty(), "{stack:?}");
        }
    } else {
        assert!(report.sampled_stacks.iter().all(|stack| !stack.frames.is_empty() && stack.addresses.is_empty()));
    }
}
