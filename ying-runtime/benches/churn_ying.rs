//! Alloc/free churn under `YingProfiler` at the default sampling interval, outside any scope.

mod workload;

#[global_allocator]
static ALLOC: ying::YingProfiler = ying::YingProfiler::new();

fn churn(c: &mut criterion::Criterion) {
    workload::bench(c, "ying", |run| run());
}

criterion::criterion_group!(benches, churn);
criterion::criterion_main!(benches);
