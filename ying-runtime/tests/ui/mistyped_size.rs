#[ying::leak_test(max_retained = true)]
fn mistyped() {}

fn main() {}
