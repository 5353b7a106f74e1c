//! `YingProfiler` over mimalloc at the default sampling interval (512 KiB).

#[global_allocator]
static ALLOC: ying::YingProfiler<mimalloc::MiMalloc> = ying::YingProfiler::with_allocator(mimalloc::MiMalloc);

fn main() {
    ying_bench::main("ying_mimalloc", |workload| workload());
}
