#[ying::leak_test(max_peak = "1 MiB", max_peak = "2 MiB")]
fn twice() {}

fn main() {}
