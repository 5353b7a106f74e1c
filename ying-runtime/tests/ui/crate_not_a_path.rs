#[ying::leak_test(crate = "ying runtime")]
fn spaces() {}

#[ying::leak_test(crate = "ying<u8>")]
fn generic_arguments() {}

#[ying::leak_test(crate = "")]
fn empty() {}

fn main() {}
