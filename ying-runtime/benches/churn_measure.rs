//! Alloc/free churn under `YingProfiler` inside a `ying::measure` scope, as a leak test runs its body.

mod workload;

#[global_allocator]
static ALLOC: ying::YingProfiler = ying::YingProfiler::new();

fn churn(c: &mut criterion::Criterion) {
    workload::bench(c, "ying_measure", |run| {
        let ((), stats) = ying::measure(run);
        assert_eq!(stats.allocations, workload::OPS);
    });
}

criterion::criterion_group!(benches, churn);
criterion::criterion_main!(benches);
