//! The interposer loaded into a test binary that knows nothing of ying (this one: its global allocator is
//! `System`): each `subject_*` test runs alone in a process of its own under `LD_PRELOAD`, as `cargo ying test
//! --measure all` runs it, and its report is read back.

#![cfg(all(target_os = "linux", target_env = "gnu"))]

use std::path::{Path, PathBuf};
use std::process::Command;
use ying_frames::{ExecutableStamp, KnownCode};
use ying_report::KNOWN_CODE_ENV;
use ying_report::report::{
    DEFER_SYMBOLS_ENV, LeakReport, MEASURE_TEST_ENV, REPORT_DIR_ENV, RUN_TOKEN_ENV, Reach, STARTED_EXTENSION,
    TestIdentity,
};

/// The interposer, built beside this test's binary.
fn interposer() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    [deps.join("libying_preload.so"), deps.parent().unwrap().join("libying_preload.so")]
        .into_iter()
        .find(|path| path.exists())
        .expect("the interposer is built with this test")
}

/// Runs `subject` alone under the interposer and returns its report.
fn measure(subject: &str) -> LeakReport {
    measure_with(subject, &[])
}

/// [`measure`] with more variables in the subject's environment.
fn measure_with(subject: &str, env: &[(&str, &str)]) -> LeakReport {
    let reports = tempfile::tempdir().unwrap();
    measure_into(subject, env, reports.path())
}

/// Runs `subject` alone in a process of its own under the interposer, as a measured test writing to `reports`.
fn run_subject(subject: &str, env: &[(&str, &str)], reports: &Path) -> std::process::Output {
    let identity = TestIdentity::new("ying-preload", None, "interposed", subject, "", 0);
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", subject, "--include-ignored", "--nocapture", "--test-threads=1"])
        .env("LD_PRELOAD", interposer())
        .env(MEASURE_TEST_ENV, serde_json::to_string(&identity).unwrap())
        .env(REPORT_DIR_ENV, reports)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// [`measure_with`], the subject writing to `reports`.
fn measure_into(subject: &str, env: &[(&str, &str)], reports: &Path) -> LeakReport {
    let output = run_subject(subject, env, reports);
    let shown = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{subject} failed under the interposer:\n{shown}");
    let report = only_report(reports).unwrap_or_else(|| panic!("{subject} wrote no report:\n{shown}"));
    serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap()
}

fn only_report(dir: &Path) -> Option<PathBuf> {
    let mut reports = std::fs::read_dir(dir).ok()?.map(|entry| entry.unwrap().path());
    reports.find(|path| path.extension().is_some_and(|extension| extension == "json"))
}

/// Bytes the test retained, excused memory left out.
fn retained(report: &LeakReport) -> u64 {
    report.figures.retained_bytes - report.excused_bytes
}

/// The sites of what the test retained, excused memory left out: bytes, blocks, and the frames' functions.
fn sites(report: &LeakReport) -> Vec<(u64, u64, Vec<&str>)> {
    let sites = report.retained_sites.iter().filter(|site| !site.excused);
    sites
        .map(|site| (site.bytes, site.blocks, site.frames.iter().map(|frame| frame.function.as_str()).collect()))
        .collect()
}

#[test]
fn the_library_defines_the_c_allocator_and_the_leak_tests_hand_over() {
    use object::{Object, ObjectSymbol};
    let bytes = std::fs::read(interposer()).unwrap();
    let library = object::File::parse(&*bytes).unwrap();
    let exported: Vec<&str> = library
        .dynamic_symbols()
        .filter(|symbol| symbol.is_definition() && symbol.is_global())
        .filter_map(|symbol| symbol.name().ok())
        .collect();
    let hand_over = ying_report::report::INTERPOSER_LEAK_TEST_STARTED.to_str().unwrap();
    let c_allocator = ["malloc", "calloc", "realloc", "reallocarray", "free", "posix_memalign", "aligned_alloc"];
    let others =
        ["memalign", "valloc", "pvalloc", "malloc_usable_size", "pthread_setname_np", "_Unwind_Backtrace", hand_over];
    for name in c_allocator.into_iter().chain(others) {
        assert!(exported.contains(&name), "{name} is not exported: {exported:?}");
    }
}

#[test]
fn a_leaked_box_is_retained_exactly() {
    let report = measure("subject_box_leak_1000");
    assert_eq!(retained(&report), 1000, "{report:#?}");
    let sites = sites(&report);
    assert_eq!(sites.len(), 1, "{sites:#?}");
    assert_eq!((sites[0].0, sites[0].1), (1000, 1));
    assert!(sites[0].2.contains(&"interposed::subject_box_leak_1000"), "{sites:#?}");
}

#[test]
fn a_block_from_the_c_library_is_retained_with_its_site() {
    let report = measure("subject_libc_malloc_500");
    assert_eq!(retained(&report), 500, "{report:#?}");
    let sites = sites(&report);
    assert_eq!(sites.len(), 1, "{sites:#?}");
    // The interposer's frames (`malloc` the first of them) are cut: the site is the line that called it.
    assert_eq!(sites[0].2.first(), Some(&"interposed::subject_libc_malloc_500"), "{sites:#?}");
}

/// What the C library keeps for itself (its name-service state after a `getaddrinfo`) is reached from its statics,
/// as valgrind reaches it: never lost.
#[test]
fn what_the_c_library_keeps_after_resolving_a_name_is_not_lost() {
    let report = measure("subject_resolves_localhost");
    let lost: Vec<_> = report
        .retained_sites
        .iter()
        .filter(|site| site.why.iter().any(|why| matches!(why.kind, Reach::Lost | Reach::Cycle)))
        .collect();
    assert!(lost.is_empty(), "{lost:#?}");
    // Named by the library whose data holds it, where no symbol of it does.
    let roots: Vec<&str> =
        report.retained_sites.iter().flat_map(|site| &site.why).filter_map(|why| why.root.as_deref()).collect();
    assert!(roots.iter().any(|root| root.starts_with("data of libc.so")), "{roots:?}");
}

#[test]
fn what_a_spawned_thread_leaks_is_the_tests() {
    let report = measure("subject_thread_leaks_2000");
    assert_eq!(retained(&report), 2000, "{report:#?}");
    let sites = sites(&report);
    assert_eq!(sites.len(), 1, "{sites:#?}");
    assert!(sites[0].2.iter().any(|function| function.starts_with("interposed::subject_thread_leaks_2000")));
}

/// Runs `subject` alone under the interposer, expecting it to be ended by SIGABRT, and returns its standard error.
fn aborted(subject: &str) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    let reports = tempfile::tempdir().unwrap();
    let output = run_subject(subject, &[], reports.path());
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.signal(), Some(libc::SIGABRT), "{subject} ended as {:?}:\n{stderr}", output.status);
    stderr
}

#[test]
fn a_block_freed_twice_is_named_and_the_process_aborts_as_under_glibc() {
    for (subject, function) in [
        ("subject_double_free", "free"),
        ("subject_double_free_aligned", "free"),
        ("subject_realloc_after_free", "realloc"),
        ("subject_free_inside_a_block", "free"),
    ] {
        let stderr = aborted(subject);
        let said = stderr.lines().find(|line| line.starts_with(&format!("ying: {function}(0x")));
        let said = said.unwrap_or_else(|| panic!("{subject} did not say why it ended:\n{stderr}"));
        assert!(
            said.ends_with("double free or invalid pointer: the block was freed already, or never allocated; aborting"),
            "{said}"
        );
    }
}

#[test]
fn a_deterministic_tests_figures_are_the_same_in_every_run() {
    // Frees of blocks older than the test (the harness's) race with the harness's main thread; what the test
    // allocated and kept does not.
    let figures = |report: LeakReport| {
        let figures = report.figures;
        (figures.retained_bytes, figures.peak_bytes, figures.allocated_bytes, figures.allocations, report.excused_bytes)
    };
    let first = figures(measure("subject_box_leak_1000"));
    for _ in 1..10 {
        assert_eq!(figures(measure("subject_box_leak_1000")), first);
    }
}

#[test]
fn a_clean_test_retains_nothing() {
    let report = measure("subject_clean");
    assert_eq!(retained(&report), 0, "{report:#?}");
    assert!(report.figures.allocated_bytes >= 3000, "{report:#?}");
}

#[test]
fn a_process_the_test_starts_does_not_measure_it_again() {
    let report = measure("subject_starts_itself");
    assert_eq!(retained(&report), 1000, "the first process's figures: {report:#?}");
}

#[test]
fn names_are_left_to_the_reader_when_symbols_are_deferred() {
    // Deferred, as under cargo ying: the process reads no debug information; a site it cannot judge by its
    // addresses carries them, unjudged and unnamed, for the reader.
    let deferred = measure_with("subject_box_leak_1000", &[(DEFER_SYMBOLS_ENV, "1")]);
    let left: Vec<_> = deferred.retained_sites.iter().filter(|site| !site.addresses.is_empty()).collect();
    assert_eq!(left.iter().map(|site| site.bytes).sum::<u64>(), 1000, "{deferred:#?}");
    assert!(left.iter().all(|site| !site.excused && site.frames.is_empty()), "{left:#?}");
    assert!(deferred.deferred.is_some(), "the reader is told where the runtime's frames lie");

    // Named in the process, the same leak has its frames.
    let named = measure("subject_box_leak_1000");
    assert!(named.retained_sites.iter().all(|site| site.addresses.is_empty()), "{named:#?}");
    assert_eq!(sites(&named).iter().map(|site| site.0).sum::<u64>(), 1000, "{named:#?}");
}

#[test]
fn what_a_backtrace_caches_is_excused_by_its_code_whether_names_are_deferred_or_not() {
    // Naming a backtrace's frames, the standard library reads the executable's debug information and keeps it: its
    // code is known by address, so the process excuses it without naming it, and does not scan it.
    let named = measure("subject_backtrace");
    let deferred = measure_with("subject_backtrace", &[(DEFER_SYMBOLS_ENV, "1")]);
    for report in [&named, &deferred] {
        assert_eq!(retained(report), 0, "{report:#?}");
        let cached: Vec<_> = report
            .retained_sites
            .iter()
            .filter(|site| site.frames.first().is_some_and(|frame| frame.function == "std::backtrace_rs::symbolize"))
            .collect();
        assert!(!cached.is_empty(), "{report:#?}");
        assert!(cached.iter().all(|site| site.excused && site.addresses.is_empty() && site.why.is_empty()));
        assert!(cached.iter().map(|site| site.bytes).sum::<u64>() > 100_000, "{cached:#?}");
    }
    assert_eq!(deferred.excused_bytes, named.excused_bytes);
}

#[test]
fn what_a_stack_walk_allocates_is_in_no_figure_and_is_freed_and_resized_as_any_block() {
    // The frames of a captured backtrace are gathered inside the walk, in a vector grown as it goes: neither its
    // allocations nor its resizes nor its frees are counted, and the process does not take them for blocks freed
    // twice. The box that keeps one backtrace is the test's, counted as any other.
    let report = measure_with("subject_walks", &[("RUST_BACKTRACE", "0")]);
    assert_eq!(retained(&report), SUBJECT_WALKS_KEPT as u64, "{report:#?}");
    let beside_excused = report.figures.allocated_bytes - report.excused_bytes;
    assert!(beside_excused < 2048, "the frames of 21 walks are not counted: {report:#?}");
}

#[test]
fn a_panics_full_backtrace_begins_at_the_callers_frame_not_the_interposers() {
    // The walk reports each frame to the standard library, which names it: the interposer's own `_Unwind_Backtrace`
    // would be named from the interposer's debug information, megabytes read for a frame nobody asked for.
    let reports = tempfile::tempdir().unwrap();
    let output = run_subject("subject_panics", &[("RUST_BACKTRACE", "full")], reports.path());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let first_frame = stderr.lines().skip_while(|line| !line.starts_with("stack backtrace:")).nth(1);
    let first_frame = first_frame.unwrap_or_else(|| panic!("no backtrace printed:\n{stderr}"));
    assert!(first_frame.contains("backtrace_rs::backtrace::libunwind::trace"), "{stderr}");
    assert!(!stderr.contains("_Unwind_Backtrace") && !stderr.contains("ying-preload/src"), "{stderr}");
}

#[test]
fn under_a_run_token_the_report_takes_the_start_marks_file() {
    let reports = tempfile::tempdir().unwrap();
    let report = measure_into("subject_box_leak_1000", &[(RUN_TOKEN_ENV, "a-run")], reports.path());
    let left: Vec<String> = std::fs::read_dir(reports.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(!left[0].ends_with(STARTED_EXTENSION), "{left:?}");
    assert_eq!(report.run_token.as_deref(), Some("a-run"));
    assert_eq!(retained(&report), 1000);
}

#[test]
fn the_known_code_passed_for_this_executable_is_taken_and_another_executables_is_not() {
    // Passed as cargo ying passes it, but saying that this binary (whose global allocator is `System`) has one of
    // its own: only the report's note tells whether the process took what was passed or read its own.
    let executable = std::env::current_exe().unwrap();
    let mut code = KnownCode::read(&std::fs::read(&executable).unwrap());
    assert_eq!(code.default_allocator, Some(true));
    code.default_allocator = Some(false);
    let own_allocator =
        |report: &LeakReport| report.notes.iter().any(|note| note.contains("global allocator of its own"));

    let this = ExecutableStamp::of(&std::fs::metadata(&executable).unwrap()).unwrap();
    let taken = measure_with("subject_box_leak_1000", &[(KNOWN_CODE_ENV, &code.to_env(this))]);
    assert!(own_allocator(&taken), "{taken:#?}");
    assert_eq!(retained(&taken), 1000);

    // Stamped with another file (a program the test starts inherits the variable): the process reads its own.
    let other = ExecutableStamp::of(&std::fs::metadata(interposer()).unwrap()).unwrap();
    let read = measure_with("subject_box_leak_1000", &[(KNOWN_CODE_ENV, &code.to_env(other))]);
    assert!(!own_allocator(&read), "{read:#?}");
    assert_eq!(retained(&read), 1000);
}

#[ignore = "run by the interposer's tests, under LD_PRELOAD"]
#[test]
fn subject_backtrace() {
    // Naming the frames, the standard library reads the executable's debug information and keeps it.
    let shown = std::backtrace::Backtrace::force_capture().to_string();
    assert!(shown.contains("subject_backtrace"), "{shown}");
}

/// What `subject_walks` keeps: one captured backtrace, in a box.
const SUBJECT_WALKS_KEPT: usize = size_of::<std::backtrace::Backtrace>();

#[ignore = "run by the interposer's tests, under LD_PRELOAD"]
#[test]
fn subject_walks() {
    for _ in 0..20 {
        drop(std::hint::black_box(std::backtrace::Backtrace::force_capture()));
    }
    let kept = Box::leak(Box::new(std::backtrace::Backtrace::force_capture()));
    assert_eq!(size_of_val(kept), SUBJECT_WALKS_KEPT);
    assert!(matches!(kept.status(), std::backtrace::BacktraceStatus::Captured));
}

#[ignore = "run by the interposer's tests, under LD_PRELOAD"]
#[test]
fn subject_panics() {
    let caught = std::panic::catch_unwind(|| panic!("a panic whose backtrace is printed"));
    assert!(caught.is_err());
}

#[ignore = "run by the interposer's tests, under LD_PRELOAD"]
#[test]
fn subject_starts_itself() {
    const CHILD: &str = "INTERPOSED_CHILD";
    if std::env::var_os(CHILD).is_some() {
        Box::leak(vec![3u8; 3000].into_boxed_slice());
        return;
    }
    // The same test of the same binary, inheriting the preload and the environment.
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "subject_starts_itself", "--include-ignored", "--test-threads=1"])
        .env(CHILD, "1")
        .status()
        .unwrap();
    assert!(status.success());
    let reports = std::env::var_os(REPORT_DIR_ENV).unwrap();
    assert_eq!(only_report(Path::new(&reports)), None, "the child wrote a report of the test");
    Box::leak(vec![7u8; 1000].into_boxed_slice());
}

#[ignore = "run by the interposer's tests, under LD_PRELOAD"]
#[test]
fn subject_box_leak_1000() {
    Box::leak(vec![7u8; 1000].into_boxed_slice());
}

#[ignore = "run by the interposer's tests, under LD_PRELOAD"]
#[test]
fn subject_clean() {
    let kept: Vec<String> = (0..100).map(|i| format!("{i:>30}")).collect();
    assert_eq!(kept.len(), 100);
}

#[ignore = "run by the interposer's tests, under LD_PRELOAD"]
#[test]
fn subject_libc_malloc_500() {
    // SAFETY: a plain allocation, never freed: the leak this test is about.
    let block = unsafe { libc::malloc(500) };
    assert!(!block.is_null());
}

#[ignore = "run by the interposer's tests, under LD_PRELOAD"]
#[test]
fn subject_resolves_localhost() {
    use std::net::ToSocketAddrs as _;
    // getaddrinfo: the C library keeps its name-service state (the `nsswitch.conf` it read, the modules it loaded)
    // for the rest of the process, reached from its own statics.
    let addresses: Vec<_> = ("localhost", 80).to_socket_addrs().expect("localhost resolves").collect();
    assert!(!addresses.is_empty());
}

#[ignore = "run by the interposer's tests, under LD_PRELOAD"]
#[test]
fn subject_thread_leaks_2000() {
    std::thread::spawn(|| Box::leak(vec![1u8; 2000].into_boxed_slice()).len()).join().unwrap();
}

#[ignore = "run by the interposer's tests, under LD_PRELOAD"]
#[test]
fn subject_double_free() {
    // SAFETY: none: the block is freed twice, the bug this test is about.
    unsafe {
        let block = libc::malloc(100);
        libc::free(block);
        libc::free(std::hint::black_box(block));
    }
}

#[ignore = "run by the interposer's tests, under LD_PRELOAD"]
#[test]
fn subject_double_free_aligned() {
    // SAFETY: none: the block is freed twice, the bug this test is about.
    unsafe {
        let mut block = std::ptr::null_mut();
        assert_eq!(libc::posix_memalign(&mut block, 256, 1000), 0);
        libc::free(block);
        libc::free(std::hint::black_box(block));
    }
}

#[ignore = "run by the interposer's tests, under LD_PRELOAD"]
#[test]
fn subject_realloc_after_free() {
    // SAFETY: none: a freed block is resized, the bug this test is about.
    unsafe {
        let block = libc::malloc(40);
        libc::free(block);
        libc::realloc(std::hint::black_box(block), 80);
    }
}

#[ignore = "run by the interposer's tests, under LD_PRELOAD"]
#[test]
fn subject_free_inside_a_block() {
    // SAFETY: none: an address inside a block is freed, the bug this test is about.
    unsafe {
        let block = libc::calloc(1, 256).cast::<u8>();
        libc::free(std::hint::black_box(block.add(64)).cast());
    }
}

/// With `YING_END_MARK` set (nextest's wrapper `exec`s the test), the process says how it ended: its exit code, with
/// the processes it left running (in a session of their own too), which it ended, or the signal that ended it.
#[test]
fn the_end_mark_says_how_the_process_ended_and_what_it_left_running_is_ended() {
    use ying_report::end_mark::{END_MARK_ENV, EndMark, Ending};
    for (subject, ending) in [
        ("subject_exits_3", Ending::Exited { code: 3, ended: 0 }),
        ("subject_aborts", Ending::Signalled(libc::SIGABRT)),
        ("subject_leaves_a_child_in_its_own_session", Ending::Exited { code: 0, ended: 1 }),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (mark, pid_file) = (dir.path().join("end"), dir.path().join("pid"));
        let env = [(END_MARK_ENV, mark.to_str().unwrap()), ("SUBJECT_PID_FILE", pid_file.to_str().unwrap())];
        let output = run_subject(subject, &env, dir.path());
        let text = std::fs::read_to_string(&mark).unwrap_or_default();
        let said = EndMark::parse(&text).unwrap_or_else(|| panic!("{subject}: {text:?}, {output:?}"));
        assert_eq!(said.ending, ending, "{subject}: {output:?}");
        if let Ok(pid) = std::fs::read_to_string(&pid_file) {
            // SAFETY: kill(2) with signal 0 only asks whether the process exists.
            let alive = unsafe { libc::kill(pid.trim().parse().unwrap(), 0) } == 0;
            assert!(!alive, "{subject}: its child {pid} outlived it");
        }
    }
}

#[test]
#[ignore = "run by the interposer's tests, under LD_PRELOAD"]
fn subject_exits_3() {
    std::process::exit(3);
}

#[test]
#[ignore = "run by the interposer's tests, under LD_PRELOAD"]
fn subject_aborts() {
    std::process::abort();
}

#[test]
#[ignore = "run by the interposer's tests, under LD_PRELOAD"]
fn subject_leaves_a_child_in_its_own_session() {
    use std::os::unix::process::CommandExt as _;
    let mut sleep = Command::new("sleep");
    sleep.arg("600");
    // SAFETY: setsid(2) is async-signal-safe, as a child between fork and exec needs.
    unsafe {
        sleep.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    #[expect(clippy::zombie_processes, reason = "the child outlives the test: that is what the test is for")]
    let child = sleep.spawn().unwrap();
    std::fs::write(std::env::var_os("SUBJECT_PID_FILE").unwrap(), child.id().to_string()).unwrap();
}
