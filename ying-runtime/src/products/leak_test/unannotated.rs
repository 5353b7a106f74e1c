//! A test without `#[ying::leak_test]`, measured from outside (`cargo ying test --measure all`).
//!
//! The allocation interposer (`ying-preload`, loaded into the test process) sends every `malloc` and `free` of the
//! process through a [`YingProfiler`](crate::YingProfiler), and tells the runtime each time a thread is named. The
//! test harness runs the test on a thread named after it (libtest does, with `--test-threads=1` too); when the
//! thread named after the test in [`MEASURE_TEST_ENV`] starts, a process-attributed scope opens on it, recording
//! every stack, and it closes when that thread exits, after the thread's thread-locals are gone and the threads the
//! test left running have ended (or half a second has passed: see `settle`). Process
//! attribution opened off the main thread counts the test's thread and every thread it spawns, not the harness's
//! main thread. There are no budgets: the figures and the retained sites go into the test's report, and the gate
//! judges them against the baseline. A test that is a leak test writes its own report, which is kept.

use super::plan::{LeakTest, Plan};
use super::report;
use super::runner::Session;
use super::settle::{SETTLE, Threads};
use std::cell::RefCell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use ying_report::report::{MEASURE_TEST_ENV, REPORT_DIR_ENV, RUN_TOKEN_ENV, TestIdentity};

/// Longest thread name the system keeps (Linux: 15 bytes and the terminating zero); the standard library cuts
/// longer names to it before naming the thread.
const THREAD_NAME_MAX: usize = 15;

/// The test this process measures from outside, read from [`MEASURE_TEST_ENV`] once.
fn measured_test() -> Option<&'static LeakTest> {
    static TEST: OnceLock<Option<&'static LeakTest>> = OnceLock::new();
    *TEST.get_or_init(|| {
        let json = std::env::var(MEASURE_TEST_ENV).ok()?;
        let identity: TestIdentity = match serde_json::from_str(&json) {
            Ok(identity) => identity,
            Err(error) => {
                eprintln!("ying: {MEASURE_TEST_ENV} is not a test's identity ({error}); the test is not measured");
                return None;
            }
        };
        Some(leak_test_of(identity))
    })
}

/// The leak test with no budget that stands for the test `identity`, for the runner's session and report. Made
/// once per process, and kept for its life.
fn leak_test_of(identity: TestIdentity) -> &'static LeakTest {
    let keep = |text: String| -> &'static str { Box::leak(text.into_boxed_str()) };
    let function = identity.name.rsplit("::").next().unwrap_or_default().to_owned();
    let manifest_dir = std::env::current_dir().map(|dir| dir.display().to_string()).unwrap_or_default();
    let mut test = LeakTest::unconfigured(
        keep(identity.package),
        keep(identity.module_path),
        keep(function),
        keep(identity.file),
        identity.line,
        keep(manifest_dir),
    );
    test.bin_name = identity.bin_name.map(keep);
    Box::leak(Box::new(test))
}

/// Whether a thread named `name` (as the system keeps it) is the one the harness runs test `test` on.
fn names_test(name: &[u8], test: &str) -> bool {
    let test = test.as_bytes();
    !name.is_empty() && test.starts_with(name) && (name.len() == test.len() || name.len() >= THREAD_NAME_MAX)
}

/// The test's measured window, held by the thread it is measured on; closed when that thread's thread-locals are
/// destroyed.
struct Window {
    plan: Plan,
    session: Option<Session>,
    /// The process's threads as the window opened.
    threads: Threads,
}

impl Drop for Window {
    fn drop(&mut self) {
        let Some(session) = self.session.take() else { return };
        if leak_test_reported(&self.plan) {
            // Closed unread: the leak test's report is the one kept.
            drop(session);
            return;
        }
        // What threads the test left running hold is theirs until they end, which they may do any moment now.
        self.threads.wait_for_those_started_since(SETTLE);
        // A test measured from outside has no body's end inside its runtime: the tasks left on a runtime that
        // outlives it are looked at now.
        let tasks = super::tasks::left_as_the_test_ended(session.scope().id(), self.plan.test.manifest_dir);
        session.close().judge(&self.plan, tasks);
    }
}

thread_local! {
    /// The window open on this thread. Its destructor is registered when the window opens, at the thread's start,
    /// so it runs after those of the thread-locals the test used.
    static WINDOW: RefCell<Option<Window>> = const { RefCell::new(None) };
}

/// Claims the test for this process by leaving the mark of its start (with the run's token) in the report directory,
/// unless a process claimed it first: a process the test starts inherits the preload and the environment, and when
/// it runs the same test (its own binary again, say) only the first process measures it.
fn claim(plan: &Plan) -> bool {
    let Some(dir) = std::env::var_os(REPORT_DIR_ENV) else { return true };
    let token = std::env::var_os(RUN_TOKEN_ENV).unwrap_or_default();
    // The report takes the mark's file when it is written: a report there claimed the test too.
    !leak_test_reported(plan)
        && report::leave_start_mark(plan, std::path::Path::new(&dir), token.as_encoded_bytes(), true)
}

/// What the report says of how the figures were taken.
fn notes() -> Vec<String> {
    // The standard library's default global allocator (`System`, over `malloc`) is `__rdl_alloc`: an executable
    // that has symbols but not that one has a global allocator of its own.
    let own_allocator = crate::read::symbol_table::known_code().default_allocator == Some(false);
    if own_allocator { vec![OWN_GLOBAL_ALLOCATOR.to_owned()] } else { Vec::new() }
}

/// The note of a test binary with a global allocator of its own.
const OWN_GLOBAL_ALLOCATOR: &str = "the test binary has a global allocator of its own: only the memory it takes \
     from malloc (and what C code allocates) is measured";

/// Whether a report of the test is in the report directory: a leak test's own, or that of a process that measured
/// the test before this one (a program the test started, running the same test).
fn leak_test_reported(plan: &Plan) -> bool {
    std::env::var_os(REPORT_DIR_ENV)
        .is_some_and(|dir| std::path::Path::new(&dir).join(report::file_name(&plan.identity, "json")).exists())
}

/// The calling thread is being named `name` (the bytes the system keeps): if it is the thread of the test
/// measured from outside, its window opens. Called by the allocation interposer; only the first such thread
/// counts.
pub fn thread_named(name: &[u8]) {
    static OPENED: AtomicBool = AtomicBool::new(false);
    let Some(test) = measured_test() else { return };
    let mut plan = Plan::unannotated(test);
    if !names_test(name, plan.harness_name()) || OPENED.swap(true, Ordering::Relaxed) {
        return;
    }
    if !claim(&plan) {
        return;
    }
    plan.notes = notes();
    // Stacks captured on the threads the test spawns end at their entry, as reports trim them.
    crate::read::symbol_table::end_stacks_at_thread_entries();
    let threads = Threads::now();
    let opened = WINDOW.try_with(|window| {
        let mut window = window.borrow_mut();
        *window = Some(Window { session: None, plan, threads });
        if let Some(window) = window.as_mut() {
            window.session = Some(Session::open(&window.plan));
        }
    });
    if opened.is_err() {
        eprintln!("ying: the test's thread is exiting as it is named; the test is not measured");
    }
}

/// The leak test that starts on this thread measures itself: the window open on it, if any, closes unread (its
/// report is the leak test's). Called through the interposer's
/// [`INTERPOSER_LEAK_TEST_STARTED`](ying_report::report::INTERPOSER_LEAK_TEST_STARTED), by the runtime in the test
/// binary (`interposer::hand_over_to_leak_test`).
pub fn leak_test_started() {
    let window = WINDOW.try_with(|window| window.borrow_mut().take());
    if let Ok(Some(mut window)) = window {
        drop(window.session.take());
    }
}

#[cfg(test)]
mod tests {
    use super::names_test;

    #[test]
    fn a_thread_is_the_tests_by_the_name_the_system_keeps() {
        assert!(names_test(b"tests::short", "tests::short"));
        assert!(names_test(b"tests::a_fairly", "tests::a_fairly_long_test_name"));
        assert!(!names_test(b"tests::a_fairl", "tests::a_fairly_long_test_name"));
        assert!(!names_test(b"tests::shorter", "tests::short"));
        assert!(!names_test(b"", "tests::short"));
        assert!(!names_test(b"main", "tests::short"));
    }
}
