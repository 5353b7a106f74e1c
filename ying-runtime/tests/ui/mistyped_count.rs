#[ying::leak_test(warmup = "1", max_allocations = "10 KiB")]
fn mistyped() {}

fn main() {}
