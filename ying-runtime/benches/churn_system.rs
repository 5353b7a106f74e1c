//! Alloc/free churn on the plain System allocator: the reference the other churn benches are compared with.

mod workload;

fn churn(c: &mut criterion::Criterion) {
    workload::bench(c, "system", |run| run());
}

criterion::criterion_group!(benches, churn);
criterion::criterion_main!(benches);
