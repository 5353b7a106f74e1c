#[ying::leak_test]
struct NotATest;

fn main() {}
