#[ying::leak_test(iterations = 0)]
fn never() {}

fn main() {}
