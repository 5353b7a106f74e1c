#[ying::leak_test(max_retained)]
fn bare() {}

fn main() {}
