//! A long-running toy service under ying's production profiler: a cache workload (entries inserted and evicted)
//! plus a simulated leak (a registry that only grows), with the reporter writing a report and a flamegraph under
//! `ying-profiles/` each time retained memory has moved by 10%.
//!
//! About 12 minutes with the defaults (a check a minute); for a quick demo:
//!
//! ```sh
//! YING_EXAMPLE_INTERVAL_SECS=10 YING_EXAMPLE_RUNTIME_SECS=45 \
//!     cargo run --profile bench -p ying-runtime --features profiler --example ying_example
//! ```

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use ying::utils::ProfilerRunnerBuilder;

#[global_allocator]
static YING_ALLOC: ying::YingProfiler = ying::YingProfiler::new();

/// Settings from the environment, with defaults.
fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|value| value.parse().ok()).unwrap_or(default)
}

/// A cache that evicts its oldest entry once full.
struct Cache {
    capacity: usize,
    order: VecDeque<u64>,
    entries: HashMap<u64, Vec<u8>>,
}

impl Cache {
    #[inline(never)]
    fn insert_one(&mut self, key: u64) {
        if self.order.len() == self.capacity
            && let Some(oldest) = self.order.pop_front()
        {
            self.entries.remove(&oldest);
        }
        self.order.push_back(key);
        self.entries.insert(key, vec![(key % 251) as u8; 512 + (key % 1024) as usize]);
    }
}

/// Sessions that are never closed: the leak.
static SESSIONS: Mutex<Vec<String>> = Mutex::new(Vec::new());

#[inline(never)]
fn open_session(id: u64) {
    SESSIONS.lock().unwrap().push(format!("session-{id:012}-{}", "x".repeat(480)));
}

fn main() {
    let interval = setting("YING_EXAMPLE_INTERVAL_SECS", 60);
    let runtime = Duration::from_secs(setting("YING_EXAMPLE_RUNTIME_SECS", 720));
    let reporter = ProfilerRunnerBuilder::default()
        .check_interval_secs(interval as usize)
        .report_pct_change_trigger(10usize)
        .reporting_path("ying-profiles")
        .gen_flamegraphs(true)
        .build()
        .expect("valid settings")
        .spawn(&YING_ALLOC);
    println!("ying example: running for {runtime:?}, checking memory every {interval}s; reports go to ying-profiles/");

    let started = Instant::now();
    let workers: Vec<_> = (0..2u64)
        .map(|worker| {
            std::thread::spawn(move || {
                let mut cache = Cache { capacity: 2000, order: VecDeque::new(), entries: HashMap::new() };
                let mut key = worker << 40;
                while started.elapsed() < runtime {
                    for _ in 0..200 {
                        key += 1;
                        cache.insert_one(key);
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        })
        .collect();
    // The leak grows in proportion to the heap, so that every check sees retained memory move by more than 10%.
    let mut id = 0;
    while started.elapsed() < runtime {
        let retained = YING_ALLOC.total_retained_bytes();
        let sessions = (retained / 40 / 512).max(1);
        for _ in 0..sessions {
            id += 1;
            open_session(id);
        }
        std::thread::sleep(Duration::from_millis(interval * 100));
    }
    for worker in workers {
        worker.join().unwrap();
    }
    reporter.stop();
    let stats = YING_ALLOC.stats();
    println!("ying example: done; {} bytes live, peak {} bytes", stats.live_bytes, stats.peak_bytes);
}
