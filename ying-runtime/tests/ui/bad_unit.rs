#[ying::leak_test(max_retained = "64 KiBs")]
fn unit() {}

fn main() {}
