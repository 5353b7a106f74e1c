#[ying::leak_test(crate = "ying", max_retained = "1 KiB", crate = "::ying")]
fn twice() {}

fn main() {}
