//! `YingProfiler` over System recording every allocation's stack (`sample_interval(0)`).

#[global_allocator]
static ALLOC: ying::YingProfiler = ying::YingProfiler::new().sample_interval(0);

fn main() {
    ying_bench::main("ying_r0", |workload| workload());
}
