//! Compile errors of `#[ying::leak_test]`: each mistake is reported on its own tokens, naming the fix.

#[test]
fn invalid_arguments_are_compile_errors() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
