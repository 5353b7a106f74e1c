//! Giant allocations above the limit are refused: null to the caller, nothing recorded, and the allocating stack
//! on standard error, as addresses. (Limits of a few KiB: `giant_small.rs`.)

use std::hint::black_box;
use std::process::Command;

const LIMIT: usize = 1 << 30;

#[global_allocator]
static ALLOC: ying::YingProfiler = ying::YingProfiler::new().giant_alloc_limit(LIMIT);

#[test]
fn a_giant_allocation_fails_and_leaves_no_trace() {
    let ((), stats) = ying::measure(|| {
        let mut giant = Vec::<u8>::new();
        assert!(giant.try_reserve_exact(2 * LIMIT).is_err());
        let mut small = black_box(Vec::<u8>::with_capacity(100));
        // A realloc past the limit fails too, and leaves the block as it was.
        assert!(small.try_reserve_exact(2 * LIMIT).is_err());
        assert_eq!(small.capacity(), 100);
        drop(small);
    });
    assert_eq!(stats.allocations, 1);
    assert_eq!(stats.allocated_bytes, 100);
    assert_eq!(stats.retained_bytes, 0);
    assert_eq!(stats.peak_bytes, 100);
}

#[test]
fn the_limit_itself_is_allowed() {
    let ((), stats) = ying::measure(|| {
        let mut at_limit = Vec::<u8>::new();
        // Reserving address space only: the pages are never touched.
        assert!(at_limit.try_reserve_exact(LIMIT).is_ok());
    });
    assert_eq!(stats.allocated_bytes, LIMIT as u64);
}

#[inline(never)]
fn allocate_a_giant() {
    let _ = black_box(Vec::<u8>::new().try_reserve_exact(3 * LIMIT));
}

/// The functions and files at each return address of a stack, as this process's symbols name them.
fn resolve(ips: impl Iterator<Item = usize>) -> Vec<String> {
    let mut names = Vec::new();
    for ip in ips {
        backtrace::resolve((ip - 1) as *mut core::ffi::c_void, |symbol| {
            let file = symbol.filename().map(|file| file.display().to_string()).unwrap_or_default();
            names.push(format!("{} at {file}", symbol.name().map(|name| format!("{name:#}")).unwrap_or_default()));
        });
    }
    names
}

#[test]
fn the_refusal_gives_the_allocating_stack() {
    // The test runs itself in a child process, whose standard error it reads, and names the addresses it reports.
    if std::env::var_os("YING_GIANT_CHILD").is_some() {
        println!("allocate_a_giant={:#x}", allocate_a_giant as *const () as usize);
        allocate_a_giant();
        return;
    }
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "the_refusal_gives_the_allocating_stack", "--nocapture", "--test-threads=1"])
        .env("YING_GIANT_CHILD", "1")
        .output()
        .unwrap();
    assert!(output.status.success());
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    let expected =
        format!("ying: refused an allocation of {} bytes, above the giant_alloc_limit of {LIMIT} bytes", 3 * LIMIT);
    assert!(stderr.contains(&expected), "{stderr}");
    // Each frame is an address in the child, the object holding it and the address in that object's file.
    let exe = std::env::current_exe().unwrap().canonicalize().unwrap();
    assert!(stderr.contains(&format!(" in {} at 0x", exe.display())), "{stderr}");
    // Moved to this process's addresses (the same executable, loaded elsewhere), they name the allocating function.
    let in_child = stdout.split("allocate_a_giant=0x").nth(1).and_then(|rest| rest.lines().next()).unwrap();
    let moved = (allocate_a_giant as *const () as usize).wrapping_sub(usize::from_str_radix(in_child, 16).unwrap());
    let ips = stderr
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("0x")?.split(' ').next())
        .map(|ip| usize::from_str_radix(ip, 16).unwrap().wrapping_add(moved));
    let names = resolve(ips);
    assert!(
        names.iter().any(|name| name.starts_with("giant::allocate_a_giant at ") && name.contains("tests/giant.rs")),
        "{names:#?}\n{stderr}"
    );
}
