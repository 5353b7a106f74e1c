//! The alloc/free churn every allocator bench runs: the same deterministic workload, one binary per allocator.

use criterion::{BatchSize, Criterion, Throughput};
use std::hint::black_box;

/// Live blocks kept while churning.
const LIVE: usize = 1000;
/// Allocations (each paired with a free) per measured iteration.
pub(crate) const OPS: u64 = 10_000;

/// Replaces a pseudo-random live block with a fresh one of a pseudo-random size in 16..1024 bytes, `OPS` times.
fn churn(live: &mut [Vec<u8>], seed: &mut u64) {
    for _ in 0..OPS {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        let slot = (*seed as usize) % live.len();
        let size = 16 + ((*seed >> 32) as usize) % (1024 - 16);
        live[slot] = black_box(Vec::with_capacity(size));
    }
}

/// Registers the churn benchmark under `name`, running each iteration through `wrap` (the identity, or a scope).
pub(crate) fn bench(c: &mut Criterion, name: &str, wrap: fn(&mut dyn FnMut())) {
    let mut group = c.benchmark_group("churn");
    group.throughput(Throughput::Elements(OPS));
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    group.bench_function(name, |b| {
        b.iter_batched_ref(
            || (0..LIVE).map(|_| Vec::<u8>::with_capacity(64)).collect::<Vec<_>>(),
            |live| wrap(&mut || churn(live, &mut seed)),
            BatchSize::LargeInput,
        )
    });
    group.finish();
}
