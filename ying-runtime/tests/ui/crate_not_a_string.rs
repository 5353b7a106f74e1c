#[ying::leak_test(crate = ying)]
fn bare_path() {}

#[ying::leak_test(crate = 1)]
fn number() {}

fn main() {}
