//! The workloads of the overhead benchmarks, shared by one binary per global allocator configuration.
//!
//! Each binary installs its allocator and calls [`main`], which runs the workload named on the command line once
//! and prints one JSON line: the configuration, the workload, the wall time of the workload alone, the process's
//! peak resident set size and a checksum (which keeps the work from being optimised away and must agree between
//! configurations). `scripts/bench-overhead.py` runs the binaries A/B/B/A against the System allocator.
//!
//! | workload | what it does |
//! |---|---|
//! | `w1` | one thread: 10M alloc+free of random sizes 16..=1024 B, keeping 1000 blocks live |
//! | `w2` | `w1` on each of 2 threads at once |
//! | `w3` | build and drop a `HashMap<String, Vec<u64>>` of 200k entries, 20 times |
//! | `w4` | 1M vectors grown by `push` to random lengths up to 256: realloc-heavy growth |
//! | `w5` | a tokio multi-thread runtime (2 workers) running 10,000 tasks that each build and drop a `Vec<String>` and a `HashMap`: the shape of an async test |
//! | `w6` | serde_json: generate 42,000 records, serialise them (20 MB of JSON), parse the text into a `serde_json::Value` and into the typed records (`#[derive(Deserialize)]`), serialise the value, and the records pretty and compact |
//! | `w7` | regex: generate a 1000-word dictionary and a 2 MB log, then search the log in 8 parts, each with 32 patterns compiled afresh (Unicode classes, addresses, dates, case-insensitive literals, captures, two alternations of the dictionary) and a `RegexSet` of 10 run on every line |
//!
//! The time of a run covers the whole workload: `w6` and `w7` generate their input (the records, the log) within it,
//! allocations included, as a program would read its input.

use std::collections::HashMap;
use std::hint::black_box;
use std::time::Instant;

mod json_round_trip;
mod regex_search;
mod rng;

pub use json_round_trip::json_round_trip;
pub use regex_search::regex_search;
use rng::Rng;

/// `w1` on one thread: `ops` times, replace a random one of `live` blocks by a new block of 16..=1024 bytes.
pub fn churn(ops: usize, live: usize, seed: u64) -> u64 {
    let mut rng = Rng::new(seed);
    let mut slots: Vec<Vec<u8>> = (0..live).map(|_| Vec::new()).collect();
    let mut checksum = 0u64;
    for _ in 0..ops {
        let size = 16 + rng.below(1009);
        let slot = rng.below(live as u64);
        let mut block = Vec::with_capacity(size);
        block.push(size as u8);
        slots[slot] = black_box(block);
        checksum = checksum.wrapping_add(size as u64);
    }
    checksum
}

/// `w2`: [`churn`] on `threads` threads at once. Threads enter the caller's ying scope, if any, so that a
/// leak-test scope sees their allocations as a test's helper threads would be seen.
pub fn churn_threads(threads: usize, ops: usize, live: usize) -> u64 {
    let scope = ying::Scope::current();
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads as u64)
            .map(|seed| {
                s.spawn(move || {
                    let _entered = scope.is_some().then(|| scope.enter());
                    churn(ops, live, seed + 1)
                })
            })
            .collect();
        workers.into_iter().map(|worker| worker.join().unwrap()).fold(0, u64::wrapping_add)
    })
}

/// `w3`: build and drop a `HashMap<String, Vec<u64>>` of `entries` entries, `rounds` times.
pub fn maps(rounds: usize, entries: usize) -> u64 {
    let mut checksum = 0u64;
    for round in 0..rounds {
        let mut map: HashMap<String, Vec<u64>> = HashMap::new();
        for i in 0..entries {
            map.insert(format!("key-{round}-{i}"), vec![i as u64; i % 8 + 1]);
        }
        checksum = checksum.wrapping_add(black_box(&map).len() as u64);
    }
    checksum
}

/// `w4`: `vectors` vectors, each grown by `push` from empty to a random length below 256.
pub fn growth(vectors: usize, seed: u64) -> u64 {
    let mut rng = Rng::new(seed);
    let mut checksum = 0u64;
    for _ in 0..vectors {
        let length = rng.below(256);
        let mut vector: Vec<u64> = Vec::new();
        for k in 0..length {
            vector.push(k as u64);
        }
        checksum = checksum.wrapping_add(black_box(vector).capacity() as u64);
    }
    checksum
}

/// `w5`: a tokio multi-thread runtime with 2 workers, built and shut down inside the workload, running `tasks`
/// tasks that each build a `Vec<String>` of 16 words and a `HashMap` over them, then drop both.
pub fn tasks(tasks: usize) -> u64 {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().expect("a tokio runtime");
    runtime.block_on(async {
        let handles: Vec<_> = (0..tasks)
            .map(|task| {
                tokio::spawn(async move {
                    let words: Vec<String> = (0..16).map(|word| format!("task-{task}-word-{word}")).collect();
                    let lengths: HashMap<&str, usize> = words.iter().map(|word| (word.as_str(), word.len())).collect();
                    black_box(&lengths).values().sum::<usize>() as u64
                })
            })
            .collect();
        let mut checksum = 0u64;
        for handle in handles {
            checksum = checksum.wrapping_add(handle.await.expect("a task that does not panic"));
        }
        checksum
    })
}

/// The workloads' names.
pub const WORKLOADS: [&str; 7] = ["w1", "w2", "w3", "w4", "w5", "w6", "w7"];

/// Runs one workload by name; `None` for an unknown name.
pub fn workload(name: &str) -> Option<u64> {
    Some(match name {
        "w1" => churn(10_000_000, 1000, 1),
        "w2" => churn_threads(2, 10_000_000, 1000),
        "w3" => maps(20, 200_000),
        "w4" => growth(1_000_000, 4),
        "w5" => tasks(10_000),
        "w6" => json_round_trip(42_000, 6),
        "w7" => regex_search(2 << 20, 8, 7),
        _ => return None,
    })
}

/// The process's peak resident set size in KiB.
fn peak_rss_kib() -> u64 {
    // Linux: the high-water mark of this program's memory (`ru_maxrss` would carry over a parent's larger one
    // through `exec`).
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        let hwm = status.lines().find_map(|line| line.strip_prefix("VmHWM:"));
        if let Some(kib) = hwm.and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok()) {
            return kib;
        }
    }
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `getrusage` writes a `rusage` into the pointer, which points to enough writable memory.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    // macOS counts bytes.
    usage.ru_maxrss as u64 / 1024
}

/// The benchmark binary's main: `<binary> <workload>`, with `run` wrapping the workload in the configuration's
/// setting (a profiler session, a leak-test scope, ...). Prints one JSON line.
pub fn main(config: &str, run: impl FnOnce(&dyn Fn() -> u64) -> u64) {
    let name = std::env::args().nth(1).unwrap_or_default();
    if !WORKLOADS.contains(&name.as_str()) {
        eprintln!("ying-bench: unknown workload `{name}`; expected w1, w2, w3, w4, w5, w6 or w7");
        std::process::exit(2);
    }
    let start = Instant::now();
    let checksum = run(&|| workload(&name).unwrap_or(0));
    let seconds = start.elapsed().as_secs_f64();
    let line = serde_json::json!({
        "config": config,
        "workload": name,
        "seconds": seconds,
        "peak_rss_kib": peak_rss_kib(),
        "checksum": checksum,
    });
    println!("{line}");
}
