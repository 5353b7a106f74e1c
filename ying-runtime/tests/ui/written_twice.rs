#[ying::leak_test(max_retained = "1 KiB")]
#[ying::leak_test]
fn written_twice() {}

fn main() {}
