//! mimalloc, the provider of `ying_mimalloc`.

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    ying_bench::main("mimalloc", |workload| workload());
}
