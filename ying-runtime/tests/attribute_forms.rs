//! The forms `#[ying::leak_test]` accepts: a test attribute in either order registers the test once, inner
//! attributes apply to the body, `-> impl Termination` works, the runtime can be named by the path `crate` gives
//! (`fixtures/renamed-runtime` depends on it under another name); and a leak test called from another's body fails at
//! once, naming both, whatever the attribution.

use std::hint::black_box;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: ying::YingProfiler = ying::YingProfiler::new();

#[test]
#[ying::leak_test]
fn test_attribute_written_first() {
    drop(black_box(vec![0u8; 64]));
}

#[ying::leak_test]
#[test]
fn test_attribute_written_after() {
    drop(black_box(vec![0u8; 64]));
}

#[tokio::test]
#[ying::leak_test]
async fn tokio_attribute_written_first() {
    tokio::task::yield_now().await;
}

#[ying::leak_test]
#[tokio::test]
async fn tokio_attribute_written_after() {
    #![expect(unused_variables, reason = "an inner attribute of an async leak test applies to its body")]
    let unused = black_box(1);
    tokio::task::yield_now().await;
}

#[ying::leak_test]
fn inner_attributes_apply_to_the_body() {
    #![expect(unused_variables, reason = "an inner attribute of a leak test applies to its body")]
    let unused = black_box(vec![0u8; 16]);
}

#[ying::leak_test(crate = "ying", max_retained = "1 KiB")]
fn runtime_named_by_its_path() {
    drop(black_box(vec![0u8; 64]));
}

#[ying::leak_test(crate = "::ying", max_retained = "1 KiB")]
#[tokio::test]
async fn runtime_named_by_its_path_in_an_async_test() {
    tokio::task::yield_now().await;
}

#[ying::leak_test]
fn returns_impl_termination() -> impl std::process::Termination {
    drop(black_box(vec![0u8; 16]));
    Ok::<(), String>(())
}

#[ying::leak_test]
fn returns_an_exit_code() -> std::process::ExitCode {
    std::process::ExitCode::SUCCESS
}

#[ying::leak_test]
#[ignore = "run in a child process"]
fn leaks_returning_impl_termination() -> impl std::process::Termination {
    Box::leak(black_box(Box::new([0u8; 300])));
}

#[ying::leak_test]
#[ignore = "run in a child process"]
fn fails_returning_impl_termination() -> impl std::process::Termination {
    Err::<(), &str>("the body's error")
}

#[ying::leak_test]
#[ignore = "called from `calls_another_leak_test`"]
fn called_leak_test() {
    drop(black_box(vec![0u8; 16]));
}

#[ying::leak_test]
#[ignore = "run in a child process"]
fn calls_another_leak_test() {
    called_leak_test();
}

#[test]
fn each_test_is_listed_once_whatever_the_attribute_order() {
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--list", "--format", "terse", "--include-ignored"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let listing = String::from_utf8(output.stdout).unwrap();
    let mut lines: Vec<&str> = listing.lines().collect();
    for name in [
        "test_attribute_written_first",
        "test_attribute_written_after",
        "tokio_attribute_written_first",
        "tokio_attribute_written_after",
        "inner_attributes_apply_to_the_body",
        "returns_impl_termination",
        "runtime_named_by_its_path",
        "runtime_named_by_its_path_in_an_async_test",
    ] {
        let line = format!("{name}: test");
        assert_eq!(lines.iter().filter(|listed| **listed == line).count(), 1, "{name}:\n{listing}");
    }
    let count = lines.len();
    lines.sort_unstable();
    lines.dedup();
    assert_eq!(lines.len(), count, "a test is listed twice:\n{listing}");
}

/// Runs the ignored test `name` alone in a child process, as `cargo ying` does, and fails if it has not finished
/// within a minute. Returns whether it passed, and its standard error.
fn run_alone(name: &str, attribution: &str) -> (bool, String) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--ignored", "--nocapture", "--test-threads=1"])
        .env(ying::ATTRIBUTION_ENV, attribution)
        .env_remove(ying::report::REPORT_DIR_ENV)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut stderr = String::new();
        pipe.read_to_string(&mut stderr).unwrap();
        stderr
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("`{name}` under {attribution} attribution still runs after a minute:\n{}", reader.join().unwrap());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status.success(), reader.join().unwrap())
}

#[test]
fn a_leak_test_called_from_another_fails_at_once_naming_both() {
    for attribution in ["process", "thread"] {
        let (passed, stderr) = run_alone("calls_another_leak_test", attribution);
        assert!(!passed, "{attribution}: {stderr}");
        assert!(
            stderr.contains(
                "ying: leak test `called_leak_test` was called from the body of leak test `calls_another_leak_test`, \
                 and a leak test cannot run inside another; move the body of `called_leak_test` into a plain \
                 function and call that from both tests"
            ),
            "{attribution}: {stderr}"
        );
    }
}

#[test]
fn a_test_returning_impl_termination_is_measured_and_judged() {
    for attribution in ["process", "thread"] {
        let (passed, stderr) = run_alone("leaks_returning_impl_termination", attribution);
        assert!(!passed, "{attribution}: {stderr}");
        assert!(stderr.contains("max_retained = 0 B: retained 300 B in 1 block"), "{attribution}: {stderr}");
        let (passed, stderr) = run_alone("fails_returning_impl_termination", attribution);
        assert!(!passed, "{attribution}: {stderr}");
        assert!(stderr.contains("Error: \"the body's error\""), "{attribution}: {stderr}");
    }
}
