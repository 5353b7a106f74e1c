#[ying::leak_test(max_retaind = "1 KiB", iterations = 0, warmup = 1, warmup = 2)]
fn several() {}

fn main() {}
