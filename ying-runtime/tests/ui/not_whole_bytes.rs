#[ying::leak_test(max_retained = "1.3 B")]
fn fraction() {}

fn main() {}
