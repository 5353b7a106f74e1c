//! Eight threads allocate, reallocate and free at random, freeing half of their blocks on another thread, with
//! every allocation sampled (R = 0) and inside scopes: afterwards every figure balances and the tables are empty.
//! A watchdog turns a deadlock into a failure instead of a hung CI job.

use std::hint::black_box;
use std::sync::mpsc;
use std::time::Duration;

#[global_allocator]
static ALLOC: ying::YingProfiler = ying::YingProfiler::new().sample_interval(0);

const THREADS: usize = 8;
const OPS_PER_THREAD: usize = 20_000;
const WATCHDOG: Duration = Duration::from_secs(240);

/// A tiny deterministic generator, one per thread.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[inline(never)]
fn stress_worker(index: usize, outbox: mpsc::Sender<Vec<u8>>, inbox: mpsc::Receiver<Vec<u8>>) -> ying::ScopeStats {
    let measured = index.is_multiple_of(2); // half the threads inside scopes, half outside
    let work = move || {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (index as u64 + 1));
        let mut live: Vec<Vec<u8>> = Vec::with_capacity(256);
        for _ in 0..OPS_PER_THREAD {
            match rng.next() % 4 {
                0 | 1 => live.push(black_box(vec![0u8; 1 + (rng.next() % 2048) as usize])),
                2 if !live.is_empty() => {
                    let i = (rng.next() as usize) % live.len();
                    let new_len = 1 + (rng.next() % 4096) as usize;
                    live[i].resize(new_len, 1);
                    live[i].shrink_to_fit();
                }
                _ if !live.is_empty() => {
                    let block = live.swap_remove((rng.next() as usize) % live.len());
                    if rng.next().is_multiple_of(2) {
                        let _ = outbox.send(block); // freed by the next thread
                    }
                }
                _ => {}
            }
            while let Ok(block) = inbox.try_recv() {
                drop(block);
            }
        }
        drop(live);
        drop(outbox);
        for block in inbox {
            drop(block);
        }
    };
    if measured { ying::measure(work).1 } else { ying::ScopeStats::default() }
}

/// Retained estimate of the stacks through `stress_worker` (sampled at R = 0: exact).
fn stress_retained() -> f64 {
    ALLOC
        .top_k_stacks_by_retained(usize::MAX)
        .iter()
        .filter(|stack| stack.frames().iter().any(|f| f.function.contains("stress_worker")))
        .map(|stack| stack.retained_bytes())
        .sum()
}

fn main() {
    // The first spawn sets up process-wide thread bookkeeping, and the first blocking receive a per-thread waiting
    // context, that stay for good: let both happen before the first reading.
    let (warm_tx, warm_rx) = mpsc::channel();
    let warm = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        warm_tx.send(())
    });
    warm_rx.recv_timeout(WATCHDOG).unwrap();
    warm.join().unwrap().unwrap();
    drop(warm_rx);
    let before = ALLOC.stats();
    let census_before = ying::__private::live_table_census();
    let (finished, watchdog) = mpsc::channel();
    let driver = std::thread::spawn(move || {
        let mut outboxes = Vec::new();
        let mut inboxes = Vec::new();
        for _ in 0..THREADS {
            let (tx, rx) = mpsc::channel();
            outboxes.push(tx);
            inboxes.push(rx);
        }
        inboxes.rotate_left(1); // thread i sends to thread i + 1
        let workers: Vec<_> = outboxes
            .into_iter()
            .zip(inboxes)
            .enumerate()
            .map(|(i, (outbox, inbox))| std::thread::spawn(move || stress_worker(i, outbox, inbox)))
            .collect();
        let stats: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        finished.send(stats).unwrap();
    });
    let scopes = match watchdog.recv_timeout(WATCHDOG) {
        Ok(scopes) => scopes,
        Err(_) => {
            eprintln!("test stress ... FAILED: no progress for {WATCHDOG:?} (deadlock?)");
            std::process::exit(101);
        }
    };
    for (i, stats) in scopes.iter().enumerate().filter(|(i, _)| i.is_multiple_of(2)) {
        assert_eq!(stats.retained_bytes, 0, "worker {i}: {stats:?}");
        assert!(stats.allocations > 0 && stats.peak_bytes > 0, "worker {i}: {stats:?}");
    }
    driver.join().unwrap();
    drop((scopes, watchdog));
    let after = ALLOC.stats();
    let census_after = ying::__private::live_table_census();

    // Every block the workers made was freed (some on another thread): the live figures are back where they were.
    assert_eq!(after.live_bytes, before.live_bytes, "{before:?}\n{after:?}");
    assert_eq!(after.live_blocks, before.live_blocks, "{before:?}\n{after:?}");
    assert!(after.allocations - before.allocations >= (THREADS * OPS_PER_THREAD / 4) as u64);
    assert_eq!(after.dropped_events, 0);
    // The live table holds no sample and no scope entry of theirs.
    assert_eq!((census_after.0, census_after.1), (census_before.0, census_before.1), "(sampled, scoped, own)");
    assert_eq!(stress_retained(), 0.0);
    println!("test stress ... ok\n\n1 passed, 0 failed");
}
