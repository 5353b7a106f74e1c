#[ying::leak_test(allow = ["core"])]
fn part_of_every_tests_frames() {}

#[ying::leak_test(allow = ["regex::", " "])]
fn a_space() {}

fn main() {}
