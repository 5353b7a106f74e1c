#[ying::leak_test(attribution = "everything")]
fn everything() {}

fn main() {}
