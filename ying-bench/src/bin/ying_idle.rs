//! `YingProfiler` over System at the default sampling interval (512 KiB), nothing else running.

#[global_allocator]
static ALLOC: ying::YingProfiler = ying::YingProfiler::new();

fn main() {
    ying_bench::main("ying_idle", |workload| workload());
}
