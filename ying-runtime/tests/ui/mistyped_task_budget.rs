#[ying::leak_test(max_leaked_tasks = "1", max_lingering_tasks = -1)]
fn mistyped() {}

fn main() {}
