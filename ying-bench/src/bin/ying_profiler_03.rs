//! The seed crate, `ying-profiler` 0.3.0 from crates.io, at its defaults.

#[global_allocator]
static ALLOC: ying_profiler::YingProfiler = ying_profiler::YingProfiler::default();

fn main() {
    ying_bench::main("ying_profiler_03", |workload| workload());
}
