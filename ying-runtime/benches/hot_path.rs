//! The allocator's hot-path pieces one at a time: the sampler's countdown, the live table's insert and remove (and
//! the filter that answers for the blocks it does not hold), and the stack capture of a sampled allocation (the
//! caching walker, and the system unwinder it replaces; a stack met again, recognised from the walk remembered), and
//! a whole `measure` scope around one allocation (opening, the entry in the thread's nursery, closing).

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use ying::__private::hot_path;

#[global_allocator]
static ALLOC: ying::YingProfiler = ying::YingProfiler::new();

fn sampler(c: &mut Criterion) {
    c.bench_function("sampler/countdown_512KiB", |b| {
        b.iter(|| hot_path::should_sample(black_box(256), black_box(512 * 1024)))
    });
}

fn table(c: &mut Criterion) {
    let mut key = 1usize;
    c.bench_function("table/insert_remove", |b| {
        b.iter(|| {
            key = key.wrapping_add(0x9e37_79b9_7f4a_7c16) | 1;
            hot_path::table_insert_remove(black_box(key))
        })
    });
    c.bench_function("table/remove_absent", |b| {
        b.iter(|| {
            key = key.wrapping_add(0x9e37_79b9_7f4a_7c16) | 1;
            hot_path::table_remove_absent(black_box(key))
        })
    });
}

#[inline(never)]
fn nested(depth: usize, capture: fn() -> usize) -> usize {
    if depth == 0 { capture() } else { black_box(nested(depth - 1, capture)) }
}

fn remembered() -> usize {
    usize::from(hot_path::record_stack())
}

fn capture(c: &mut Criterion) {
    c.bench_function("stack/capture_20_frames", |b| b.iter(|| nested(black_box(12), hot_path::capture_stack)));
    c.bench_function("stack/capture_20_frames_remembered", |b| b.iter(|| nested(black_box(12), remembered)));
    c.bench_function("stack/capture_20_frames_system_unwinder", |b| {
        b.iter(|| nested(black_box(12), hot_path::capture_stack_system_unwinder))
    });
}

fn scope(c: &mut Criterion) {
    c.bench_function("scope/measure_one_allocation", |b| {
        b.iter(|| ying::measure(|| drop(black_box(Box::new(black_box(7u64))))).1.allocations)
    });
}

criterion_group!(benches, sampler, table, capture, scope);
criterion_main!(benches);
