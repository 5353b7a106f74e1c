//! Nothing hangs, nothing is lost, nothing is left running: timeouts, SIGINT/SIGTERM and a SIGKILL of cargo ying
//! kill each test's whole process group, an interrupted run writes a summary marked incomplete and no baseline, a test printing 100 MiB
//! does not grow cargo ying, a process a test leaves writing outside its group writes nothing into the next test's
//! output, concurrent runs on one target directory both complete, `-j` far beyond the tests does not hang, and a
//! leak test that forks 200 times while another thread allocates (every allocation sampled)
//! ends with every child exited. A leak test that closes its standard output and error still says why it failed,
//! and a double free under `--measure all` says what it is.

use crate::{Fixture, TEST_FAILED, entry, stderr, summary};
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

/// Waits for `child` at most `limit`, then kills it and fails: a hang is a failure, not a stuck suite.
fn wait_at_most(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("cargo ying did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether `pid` still runs (a zombie does not).
fn alive(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']))
}

/// Waits until neither process runs any more, at most 30 s; says which is left.
fn assert_gone(pids: &[i32], what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while pids.iter().any(|&pid| alive(pid)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<i32> = pids.iter().copied().filter(|&pid| alive(pid)).collect();
    assert!(left.is_empty(), "{what}: processes {left:?} are still running");
}

/// The processes still running in process group `group` (a test's group is its pid: cargo ying starts each test
/// in a group of its own).
fn group_members(group: i32) -> Vec<i32> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // `pid (comm) state ppid pgrp ...`
        let Some((_, rest)) = stat.rsplit_once(')') else { continue };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.first().is_some_and(|state| !["Z", "X"].contains(state))
            && fields.get(2) == Some(&&*group.to_string())
        {
            members.push(pid);
        }
    }
    members
}

/// The pids `leaves_a_child_running` wrote: its child's and its own. `run` is the cargo ying that runs it: if it
/// ends first, or the test never starts, the test fails with what it printed.
fn wait_for_pids(path: &Path, run: &mut Child) -> [i32; 2] {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            let pids: Vec<i32> = text.split_whitespace().map(|pid| pid.parse().unwrap()).collect();
            return [pids[0], pids[1]];
        }
        let ended = run.try_wait().unwrap();
        if ended.is_some() || Instant::now() > deadline {
            let _ = run.kill();
            let mut err = String::new();
            if let Some(mut pipe) = run.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut pipe, &mut err);
            }
            panic!("the test never started (cargo ying: {ended:?}):\n{err}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts cargo ying with `args` on `fixture`, `leaves_a_child_running` hanging once it has written its pids to
/// `pid_file` (beside the fixture); returns the running cargo ying (its stderr piped) and those pids, the child's
/// first.
fn start_with_a_hanging_test(fixture: &Fixture, args: &[&str], pid_file: &str) -> (Child, [i32; 2]) {
    let pid_file = fixture.scratch(pid_file);
    let pid_env = pid_file.display().to_string();
    let mut child = fixture
        .command(args, &[("FIXTURE_CHILD_PID", &pid_env), ("FIXTURE_CHILD_HANG", "1")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pids = wait_for_pids(&pid_file, &mut child);
    (child, pids)
}

#[test]
fn a_timeout_kills_the_tests_whole_process_group() {
    let fixture = Fixture::shared();
    let pid_file = fixture.scratch("pids");
    let pid_env = pid_file.display().to_string();
    let output = fixture.cargo_ying(
        &["--timeout", "3s", "--", "--exact", "leaves_a_child_running"],
        &[("FIXTURE_CHILD_PID", &pid_env), ("FIXTURE_CHILD_HANG", "1")],
    );
    assert_eq!(output.status.code(), TEST_FAILED, "{}", stderr(&output));
    assert!(stderr(&output).contains("TIMEOUT ["), "{}", stderr(&output));
    let text = std::fs::read_to_string(&pid_file).unwrap();
    let pids: Vec<i32> = text.split_whitespace().map(|pid| pid.parse().unwrap()).collect();
    assert_gone(&pids, "after the timeout, the test and the child it started");
    assert_eq!(group_members(pids[1]), Vec::<i32>::new(), "the test's process group is empty");
}

#[test]
fn a_process_a_test_moves_into_a_session_of_its_own_ends_with_the_run() {
    let fixture = Fixture::shared();
    let pid_file = fixture.scratch("pids-session");
    let pid_env = pid_file.display().to_string();
    let output = fixture.cargo_ying(
        &["--", "--exact", "leaves_a_child_running"],
        &[("FIXTURE_CHILD_PID", &pid_env), ("FIXTURE_CHILD_SESSION", "1")],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = std::fs::read_to_string(&pid_file).unwrap();
    let pids: Vec<i32> = text.split_whitespace().map(|pid| pid.parse().unwrap()).collect();
    // Out of the test's group, it was cargo ying's to end once the test had ended (without, it is init's).
    assert_gone(&pids[..1], "the test's child in a session of its own, after the run");
    assert!(
        stderr(&output).contains("ended 1 process that tests left running outside their process groups"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn an_interrupt_kills_every_test_and_leaves_an_incomplete_summary_and_no_baseline() {
    let fixture = Fixture::new();
    // As cargo-nextest ends a run it was asked to stop: 100, the summary saying which signal.
    for (signal, name, code) in [(libc::SIGINT, "SIGINT", 100), (libc::SIGTERM, "SIGTERM", 100)] {
        let args = ["--save-baseline", "-j", "1", "-E", "binary(hostile)", "--no-fail-fast"];
        let (mut child, pids) = start_with_a_hanging_test(&fixture, &args, &format!("pids-{name}"));
        // SAFETY: signals the cargo-ying process this test started.
        unsafe { libc::kill(i32::try_from(child.id()).unwrap(), signal) };
        let status = wait_at_most(&mut child, Duration::from_secs(120));
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(code), "{name}: {err}");
        assert!(err.contains(&format!("the run was stopped by {name}")), "{err}");
        assert_gone(&pids, &format!("after {name} to cargo ying, the test and its child"));
        assert_eq!(group_members(pids[1]), Vec::<i32>::new(), "{name}: the test's process group is empty");
        let summary = summary(&fixture.target_dir());
        assert_eq!(summary["interrupted"], name, "the summary says it is incomplete");
        let hung = entry(&summary, "hostile", "leaves_a_child_running");
        assert_eq!(hung["outcome"], "not-run");
        assert_eq!(hung["reason"], format!("the run was stopped by {name}"));
        assert!(!fixture.path().join("ying-baseline.json").exists(), "an interrupted run writes no baseline");
    }
}

#[test]
fn a_sigkill_of_cargo_ying_kills_the_running_tests_whole_process_group() {
    let fixture = Fixture::shared();
    let (mut child, pids) = start_with_a_hanging_test(&fixture, &["--", "--exact", "leaves_a_child_running"], "pids");
    // SAFETY: signals the cargo-ying process this test started; nothing of it can catch the signal.
    unsafe { libc::kill(i32::try_from(child.id()).unwrap(), libc::SIGKILL) };
    child.wait().unwrap();
    assert_gone(&pids, "after a SIGKILL of cargo ying, the test and the child it started");
    assert_eq!(group_members(pids[1]), Vec::<i32>::new(), "the test's process group is empty");
}

#[test]
fn a_test_printing_100_mib_does_not_grow_cargo_ying_and_a_failure_keeps_all_of_it() {
    let fixture = Fixture::shared();
    let args = ["--", "--exact", "prints_a_lot"];
    // Built first, so that the measured run compiles nothing (the compiler's memory would count).
    assert_eq!(fixture.cargo_ying(&args, &[]).status.code(), Some(0));

    #[expect(clippy::zombie_processes, reason = "reaped by wait4 below, for its resource usage")]
    let child = fixture
        .command(&args, &[("FIXTURE_PRINT_MB", "100")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // SAFETY: rusage is plain integers, for which all zeroes is a value.
    let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
    // SAFETY: waits for the child just started, with pointers to live locals. The usage covers cargo ying and
    // what it waited for (cargo, the test): the most any of them held.
    let waited = unsafe { libc::wait4(i32::try_from(child.id()).unwrap(), &mut status, 0, &mut usage) };
    assert!(waited > 0 && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    let peak_kib = usage.ru_maxrss;
    assert!(peak_kib < 100 * 1024, "peak resident memory {peak_kib} KiB with a test printing 100 MiB");

    let failed = fixture.cargo_ying(&args, &[("FIXTURE_PRINT_MB", "3"), ("FIXTURE_PRINT_FAIL", "1")]);
    let err = stderr(&failed);
    assert_eq!(failed.status.code(), TEST_FAILED);
    assert!(err.contains("[cargo ying: the start of this output is cut"), "{}", &err[..err.len().min(2000)]);
    let summary = summary(&fixture.target_dir());
    let log = entry(&summary, "hostile", "prints_a_lot")["output"].as_str().unwrap().to_owned();
    let kept = std::fs::metadata(fixture.target_dir().join("ying").join(log)).unwrap().len();
    assert!(kept > 3 * 1024 * 1024, "the whole output is kept: {kept} bytes");
}

#[test]
fn a_process_left_writing_outside_its_tests_group_writes_nothing_into_the_next_tests_output() {
    let fixture = Fixture::shared();
    let pid_file = fixture.scratch("pids");
    let pid_env = pid_file.display().to_string();
    // One worker: `prints_a_lot` runs right after `leaves_a_child_running` (in the listing's order: the copy has no
    // last run's durations), whose child writes every 10 ms all through it (it pauses 300 ms) and fails, so that its
    // whole output is shown and kept.
    assert!(!fixture.target_dir().join("ying/summary.json").exists());
    let args = ["-j", "1", "-E", "test(=leaves_a_child_running) | test(=prints_a_lot)"];
    let envs = [
        ("FIXTURE_CHILD_PID", pid_env.as_str()),
        ("FIXTURE_CHILD_WRITES", "1"),
        ("FIXTURE_PRINT_PAUSE_MS", "300"),
        ("FIXTURE_PRINT_FAIL", "1"),
    ];
    let output = fixture.cargo_ying(&args, &envs);
    let text = std::fs::read_to_string(&pid_file).unwrap();
    let writer: i32 = text.split_whitespace().next().unwrap().parse().unwrap();
    let err = stderr(&output);
    // It wrote all through the next test (30 s of lines, from a group of its own), and was ended with the run.
    assert!(err.contains("ended 1 process that tests left running outside their process groups"), "{err}");
    assert!(!alive(writer), "the writer is gone with the run");

    assert_eq!(output.status.code(), TEST_FAILED, "{err}");
    assert!(err.contains("PASS [") && err.contains("hostile leaves_a_child_running"), "{err}");
    assert!(err.contains("asked to fail after printing"), "the failure's output is shown: {err}");
    assert!(!err.contains("stray line"), "the writer's lines are not in the next test's output: {err}");
    let summary = summary(&fixture.target_dir());
    let log = entry(&summary, "hostile", "prints_a_lot")["output"].as_str().unwrap().to_owned();
    let kept = std::fs::read_to_string(fixture.target_dir().join("ying").join(log)).unwrap();
    assert!(kept.contains("printed 0 MiB"), "{kept}");
    assert!(!kept.contains("stray line"), "the writer's lines are not in the next test's kept output: {kept}");
}

#[test]
fn two_runs_on_one_target_directory_both_complete_and_both_save() {
    let fixture = Fixture::new();
    // Built first, so that both runs race in running, not in cargo's own build lock.
    assert_eq!(fixture.cargo_ying(&["--", "--exact", "clean"], &[]).status.code(), Some(0));
    let start = |test: &str| {
        fixture
            .command(&["--save-baseline", "--", "--exact", test], &[])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut runs = [start("clean"), start("budget_passes")];
    let mut outputs = Vec::new();
    for run in &mut runs {
        let status = wait_at_most(run, Duration::from_secs(300));
        let mut err = String::new();
        std::io::Read::read_to_string(&mut run.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(0), "{err}");
        assert!(err.contains("1 test run: 1 passed"), "each run is whole: {err}");
        outputs.push(err);
    }
    assert!(outputs[0].contains("PASS [") && outputs[0].contains("leaks clean"), "{}", outputs[0]);
    assert!(outputs[1].contains("leaks budget_passes"), "{}", outputs[1]);
    let baseline = std::fs::read_to_string(fixture.path().join("ying-baseline.json")).unwrap();
    assert!(baseline.contains("leaks clean\"") && baseline.contains("leaks budget_passes\""), "both: {baseline}");
}

#[test]
fn far_more_jobs_than_tests_do_not_hang() {
    let fixture = Fixture::shared();
    let mut run = fixture
        .command(&["-j", "1000000", "-E", "binary(steady)"], &[])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert_eq!(wait_at_most(&mut run, Duration::from_secs(300)).code(), Some(0));
}

#[test]
fn a_leak_test_forking_200_times_while_another_thread_allocates_ends_and_every_child_exits() {
    let fixture = Fixture::shared();
    let mut run = fixture
        .command(&["--", "--exact", "forks"], &[("FIXTURE_FORKS", "200")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_at_most(&mut run, Duration::from_secs(300));
    let mut err = String::new();
    std::io::Read::read_to_string(&mut run.stderr.take().unwrap(), &mut err).unwrap();
    // The test waits for each child and asserts it exited 0: passing is every child exiting.
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(err.contains("PASS [") && err.contains("hostile forks"), "{err}");
}

/// The running processes whose command line names `needle` (a cargo or rustc building into a target directory).
fn processes_naming(needle: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        if String::from_utf8_lossy(&cmdline).contains(needle) && alive(pid) {
            found.push(pid);
        }
    }
    found
}

/// SIGINT or SIGTERM while the tests are still being built stops the build, every cargo and rustc of it, and the
/// run: no test runs, and the exit code is the signal's. SIGINT is ignored in the process when it starts, as a
/// background job of a script has it, which cargo ying must not take for leave to go on.
#[test]
fn an_interrupt_during_the_build_stops_it_whole_and_no_test_runs() {
    let fixture = Fixture::shared();
    // SIGKILL cannot be caught: the watchdog cargo ying starts kills the build's process group when it is gone.
    let signals =
        [(libc::SIGINT, "SIGINT", Some(100)), (libc::SIGTERM, "SIGTERM", Some(100)), (libc::SIGKILL, "SIGKILL", None)];
    for (signal, name, code) in signals {
        // A target directory of its own: a build from nothing, under way when the signal comes.
        let target = tempfile::tempdir().unwrap();
        let target_dir = target.path().to_str().unwrap();
        let mut command = fixture.command(&[], &[("CARGO_TARGET_DIR", target_dir)]);
        command.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped());
        // SAFETY: signal(2) between fork and exec changes only the disposition the child starts with.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut command, || {
                libc::signal(libc::SIGINT, libc::SIG_IGN);
                Ok(())
            });
        }
        let mut child = command.spawn().unwrap();
        // Until rustc builds into the directory.
        let started = Instant::now();
        while processes_naming(target_dir).iter().all(|&pid| pid == i32::try_from(child.id()).unwrap()) {
            assert!(started.elapsed() < Duration::from_secs(120), "the build never started");
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_secs(2));
        // SAFETY: signals the cargo-ying process this test started.
        unsafe { libc::kill(i32::try_from(child.id()).unwrap(), signal) };
        let status = wait_at_most(&mut child, Duration::from_secs(120));
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), code, "{name}: {err}");
        if code.is_some() {
            assert!(err.contains(&format!("cargo ying was stopped by {name}")), "{name}: {err}");
        }
        assert!(!err.contains("Starting"), "{name}: no test ran: {err}");
        // The watchdog notices its parent gone within its poll.
        let started = Instant::now();
        while !processes_naming(target_dir).is_empty() && started.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_gone(&processes_naming(target_dir), &format!("after {name} during the build, cargo and rustc"));
    }
}

/// Each failed attempt of a retried test is shown as it ends (`TRY 2 FAIL`), and a run stopped while the test runs
/// again keeps the attempts that ended: the test failed, it is not "not run".
#[test]
fn retries_are_shown_as_they_end_and_an_interrupt_keeps_the_attempts_that_ended() {
    let fixture = Fixture::shared();
    let mut command = fixture.command(&["--retries", "50", "-E", "binary(leaks) & test(=box_leak)"], &[]);
    command.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut all = Vec::new();
        for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)) {
            let Ok(line) = line else { break };
            let _ = sender.send(line.clone());
            all.push(line);
        }
        all
    });
    // The third failed attempt is shown while the test still runs.
    let started = Instant::now();
    loop {
        let line = receiver.recv_timeout(Duration::from_secs(120)).expect("cargo ying says how the attempts end");
        if line.trim_start().starts_with("TRY 3 FAIL [") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(300), "no third attempt was shown");
    }
    // SAFETY: signals the cargo-ying process this test started.
    unsafe { libc::kill(i32::try_from(child.id()).unwrap(), libc::SIGINT) };
    let status = wait_at_most(&mut child, Duration::from_secs(120));
    let said = reader.join().unwrap().join("\n");
    assert_eq!(status.code(), Some(100), "{said}");
    let test = entry(&summary(&fixture.target_dir()), "leaks", "box_leak").clone();
    assert_eq!(test["outcome"], "failed", "the last attempt that ended is the test's: {test}\n{said}");
    assert!(test["attempts"].as_u64().unwrap() >= 3, "{test}");
}

/// Leak tests that close their standard output and error before failing, and a test that frees a block twice.
const CLOSED_OUTPUT: &str = r#"
#[global_allocator]
static ALLOC: ying::YingProfiler = ying::YingProfiler::new();

fn close_output() {
    // SAFETY: the test's own descriptors; nothing writes to them after.
    unsafe {
        libc::close(1);
        libc::close(2);
    }
}

#[ying::leak_test(max_retained = "0 B")]
fn leaks_past_its_budget() {
    close_output();
    std::mem::forget(std::hint::black_box(vec![0u8; 4096]));
}

#[ying::leak_test]
fn panics() {
    close_output();
    panic!("the reason it failed");
}

#[test]
fn frees_twice() {
    // SAFETY: none: the double free this test is about.
    unsafe {
        let block = libc::malloc(100);
        libc::free(block);
        libc::free(std::hint::black_box(block));
    }
}
"#;

#[test]
fn a_leak_test_that_closed_its_output_says_why_it_failed_and_a_double_free_says_what_it_is() {
    let fixture = Fixture::new();
    std::fs::write(fixture.path().join("tests/closed_output.rs"), CLOSED_OUTPUT).unwrap();
    let output = fixture.cargo_ying(&["--test", "closed_output", "--no-fail-fast", "-E", "not test(frees_twice)"], &[]);
    let said = stderr(&output);
    assert_eq!(output.status.code(), TEST_FAILED, "{said}");
    // What the runtime printed on the closed standard error, taken from each test's report.
    let budget = "ying: leak test `leaks_past_its_budget` exceeded its budget\n  max_retained = 0 B: retained 4.0 KiB \
                  (4096 bytes) in 1 block";
    assert!(said.contains(budget), "{said}");
    assert!(said.contains("ying: leak test `panics` panicked: the reason it failed"), "{said}");
    let summary = summary(&fixture.target_dir());
    let report = entry(&summary, "closed_output", "panics")["report"].as_str().unwrap().to_owned();
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture.target_dir().join("ying").join(report)).unwrap())
            .unwrap();
    assert_eq!(report["message"], "ying: leak test `panics` panicked: the reason it failed", "{report}");

    // The interposer finds the block's header broken by the first free: the test aborts saying so, as under glibc,
    // and cargo ying does not ask for leak tests or `--measure all` to measure a test that was killed.
    let output = fixture.cargo_ying(&["--measure", "all", "--test", "closed_output", "-E", "test(frees_twice)"], &[]);
    let said = stderr(&output);
    assert_eq!(output.status.code(), TEST_FAILED, "{said}");
    assert!(said.contains("CRASH"), "{said}");
    let free = said.lines().find(|line| line.contains("ying: free(0x")).unwrap_or_else(|| panic!("{said}"));
    assert!(
        free.ends_with("double free or invalid pointer: the block was freed already, or never allocated; aborting")
    );
    assert!(said.contains("0 tests measured: every test that ran was killed before it could report its figures"));
}
