//! dhat-rs heap profiling (`dhat::Alloc` with a heap profiler running).

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

fn main() {
    // Created before the timed workload and dropped (writing its file) after it.
    let output = std::env::temp_dir().join(format!("ying-bench-dhat-{}.json", std::process::id()));
    let profiler = dhat::Profiler::builder().file_name(&output).build();
    ying_bench::main("dhat", |workload| workload());
    drop(profiler);
    let _ = std::fs::remove_file(output);
}
