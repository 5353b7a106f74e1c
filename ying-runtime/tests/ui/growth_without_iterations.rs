#[ying::leak_test(max_growth_per_iteration = "1 KiB")]
fn growth_without_iterations() {}

#[ying::leak_test(max_growth_per_iteration = "1 KiB", warmup = 1)]
fn growth_with_warmup_only() {}

#[ying::leak_test(max_growth_per_iteration = "1 KiB", iterations = 3)]
fn growth_with_iterations() {}

fn main() {}
