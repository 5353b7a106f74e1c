#[ying::leak_test(max_retain = "1 KiB")]
fn typo() {}

fn main() {}
