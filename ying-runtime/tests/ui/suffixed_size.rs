#[ying::leak_test(max_retained = 4096u8)]
fn suffixed() {}

fn main() {}
