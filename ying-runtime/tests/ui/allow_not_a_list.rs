#[ying::leak_test(allow = "regex::")]
fn single() {}

#[ying::leak_test(allow = ["regex::", 42, ""])]
fn mixed() {}

fn main() {}
