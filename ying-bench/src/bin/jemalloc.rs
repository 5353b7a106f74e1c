//! jemalloc, its heap profiler off.

#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    ying_bench::main("jemalloc", |workload| workload());
}
