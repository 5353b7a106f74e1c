#[ying::leak_test]
async fn no_runtime() {}

fn main() {}
