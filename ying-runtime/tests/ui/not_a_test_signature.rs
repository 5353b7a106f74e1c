#[ying::leak_test]
#[test]
fn takes_an_argument(count: usize) {
    let _ = count;
}

#[ying::leak_test]
#[test]
fn generic<T: Default>() {
    let _ = T::default();
}

#[ying::leak_test]
const fn constant() {}

const LIMIT: usize = 4096;

#[ying::leak_test(max_retained = LIMIT)]
fn a_constant_budget() {}

fn main() {}
