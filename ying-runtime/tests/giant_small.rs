//! A `giant_alloc_limit` of a few KiB (4 KiB, 64 KiB, 256 KiB): every refused allocation returns null promptly, the
//! first one and the next ones, on several threads at once, so that `try_reserve` fails and an infallible
//! allocation aborts through `handle_alloc_error`; each is reported on standard error.
//!
//! Each case runs in a child process of this binary (without libtest's harness, which may allocate past such a
//! limit), and a watchdog kills a child that has not finished after a generous deadline: a refusal that hangs fails
//! the test instead of hanging it.

use std::alloc::{GlobalAlloc, Layout};
use std::hint::black_box;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use ying::YingProfiler;

const LIMITS: [usize; 3] = [4 << 10, 64 << 10, 256 << 10];

/// How long a child may take: it finishes in well under a second.
const DEADLINE: Duration = Duration::from_secs(60);

/// The profilers this binary may allocate through: the default one (the parent's), then one per limit.
static PROFILERS: [YingProfiler; 4] = [
    YingProfiler::new(),
    YingProfiler::new().giant_alloc_limit(LIMITS[0]),
    YingProfiler::new().giant_alloc_limit(LIMITS[1]),
    YingProfiler::new().giant_alloc_limit(LIMITS[2]),
];

/// The index in [`PROFILERS`] of the one in use: a child chooses its limit's first thing in `main`. (The profilers
/// share the process's tables, so a block allocated through one may be freed through another.)
static CHOSEN: AtomicUsize = AtomicUsize::new(0);

struct Chosen;

fn chosen() -> &'static YingProfiler {
    &PROFILERS[CHOSEN.load(Ordering::Relaxed)]
}

// SAFETY: every method forwards to a `YingProfiler` with the caller's arguments; all of them wrap `System` and share
// one set of tables, so each accepts what another allocated.
unsafe impl GlobalAlloc for Chosen {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc`'s contract, passed on.
        unsafe { chosen().alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc_zeroed`'s contract, passed on.
        unsafe { chosen().alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller upholds `dealloc`'s contract, passed on.
        unsafe { chosen().dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller upholds `realloc`'s contract, passed on.
        unsafe { chosen().realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Chosen = Chosen;

/// Names the case a child runs: `LIMIT_INDEX:fallible` or `LIMIT_INDEX:infallible`.
const CASE: &str = "YING_GIANT_SMALL_CASE";

fn main() {
    if let Some(case) = std::env::var_os(CASE) {
        let case = case.into_string().unwrap();
        let (index, kind) = case.split_once(':').unwrap();
        let index: usize = index.parse().unwrap();
        let infallible = kind == "infallible";
        drop(case);
        CHOSEN.store(index + 1, Ordering::Relaxed);
        child(LIMITS[index], infallible);
        return;
    }
    parent();
}

/// Refusals under `limit`: allocations and a growth past it fail, again and again, on four threads at once; then,
/// with `infallible`, an allocation that cannot fail aborts the process.
fn child(limit: usize, infallible: bool) {
    for _ in 0..3 {
        assert!(black_box(Vec::<u8>::new()).try_reserve_exact(limit + 1).is_err());
    }
    let mut small = black_box(Vec::<u8>::with_capacity(64));
    assert!(small.try_reserve_exact(limit + 1).is_err());
    assert_eq!(small.capacity(), 64, "a refused growth leaves the block as it was");
    drop(small);
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..5 {
                    assert!(black_box(Vec::<u8>::new()).try_reserve_exact(limit + 1).is_err());
                }
            });
        }
    });
    // Allocations within the limit still succeed.
    assert_eq!(black_box(vec![1u8; limit]).len(), limit);
    if infallible {
        let giant = black_box(Vec::<u8>::with_capacity(limit + 1));
        unreachable!("{}", giant.capacity());
    }
}

/// Runs every case in a child process (all at once), with the watchdog, and checks how each ended.
fn parent() {
    let cases = (0..LIMITS.len()).flat_map(|index| [(index, false), (index, true)]);
    let children: Vec<_> = cases
        .map(|(index, infallible)| {
            let kind = if infallible { "infallible" } else { "fallible" };
            let mut child = Command::new(std::env::current_exe().unwrap())
                .env(CASE, format!("{index}:{kind}"))
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let mut stderr = child.stderr.take().unwrap();
            let reader = std::thread::spawn(move || {
                let mut text = String::new();
                stderr.read_to_string(&mut text).unwrap();
                text
            });
            (LIMITS[index], infallible, child, reader)
        })
        .collect();
    let started = Instant::now();
    let mut failures = Vec::new();
    for (limit, infallible, mut child, reader) in children {
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if started.elapsed() > DEADLINE {
                child.kill().unwrap();
                child.wait().unwrap();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let stderr = reader.join().unwrap();
        let case = format!("limit {limit}, {}", if infallible { "infallible" } else { "fallible" });
        match status {
            None => failures.push(format!("{case}: still running after {DEADLINE:?} (killed)\n{stderr}")),
            Some(status) => {
                if let Err(why) = check(limit, infallible, status, &stderr) {
                    failures.push(format!("{case}: {why}\n{stderr}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    println!("giant_small: {} cases: every refusal returned null", LIMITS.len() * 2);
}

/// What a case must have done: reported its refusals and finished (normally, or aborted by `handle_alloc_error`).
fn check(limit: usize, infallible: bool, status: ExitStatus, stderr: &str) -> Result<(), String> {
    let refusal = format!(
        "ying: refused an allocation of {} bytes, above the giant_alloc_limit of {limit} bytes, at:",
        limit + 1
    );
    // Three, one growth, four threads' five, and the infallible one.
    let expected = 3 + 1 + 4 * 5 + usize::from(infallible);
    let reported = stderr.matches(&refusal).count();
    if reported != expected {
        return Err(format!("{reported} refusals reported, {expected} expected"));
    }
    if infallible {
        let aborted = status.signal() == Some(libc::SIGABRT);
        let said = stderr.contains(&format!("memory allocation of {} bytes failed", limit + 1));
        if !aborted || !said {
            return Err(format!("not aborted by handle_alloc_error: {status}"));
        }
    } else if !status.success() {
        return Err(format!("failed: {status}"));
    }
    Ok(())
}
