//! jemalloc with its sampling heap profiler on, one sample per 512 KiB on average (`lg_prof_sample:19`).

#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's start-up options (prefixed build): profiling active from the start.
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: &[u8] = b"prof:true,prof_active:true,lg_prof_sample:19\0";

fn main() {
    assert_eq!(MALLOC_CONF.last(), Some(&0));
    ying_bench::main("jemalloc_prof", |workload| workload());
}
