//! The control: the System allocator.

#[global_allocator]
static ALLOC: std::alloc::System = std::alloc::System;

fn main() {
    ying_bench::main("system", |workload| workload());
}
