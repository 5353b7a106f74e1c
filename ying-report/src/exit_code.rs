//! The exit codes `cargo ying` ends with: one table, which its help shows and scripts around it (a CI step, a
//! wrapper of another test runner) may rely on.

/// Every test passed and no leak test's memory regressed.
pub const OK: u8 = 0;
/// A test failed, crashed or timed out, or a leak test's memory regressed.
pub const TEST_FAILED: u8 = 1;
/// A usage, configuration or build error.
pub const USAGE: u8 = 2;
/// No test was selected to run (with `--no-tests=fail`, the default), as cargo-nextest's.
pub const NO_TESTS: u8 = 4;

/// The exit code of a run stopped by `signal`, as a shell reports a process it killed: 128 + the signal (130 for
/// SIGINT, 143 for SIGTERM).
///
/// ```
/// assert_eq!(ying_report::exit_code::stopped_by(2), 130);
/// ```
pub const fn stopped_by(signal: i32) -> u8 {
    match 128 + signal {
        code @ 0..=255 => code as u8,
        _ => u8::MAX,
    }
}

/// Every exit code with what it means, in the order the help lists them: the codes as written there, and the
/// meaning.
pub const DOCUMENTED: &[(&str, &str)] = &[
    ("0", "every test passed"),
    ("1", "a test failed, crashed or timed out, or a leak test's memory regressed"),
    ("2", "usage, configuration or build error"),
    ("4", "no tests to run (with --no-tests=fail, the default)"),
    ("130, 143", "stopped by SIGINT, SIGTERM (the summary is marked interrupted; no baseline is written)"),
];

/// The table as the help shows it, after its heading `Exit codes:`.
pub fn help() -> String {
    let mut text = String::from("Exit codes:");
    for (codes, meaning) in DOCUMENTED {
        text.push_str(&format!("\n  {codes}  {meaning}"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::{DOCUMENTED, NO_TESTS, OK, TEST_FAILED, USAGE, stopped_by};

    #[test]
    fn the_documented_table_lists_every_code_once_in_order() {
        let listed: Vec<String> = DOCUMENTED.iter().map(|(codes, _)| (*codes).to_owned()).collect();
        let signals = format!("{}, {}", stopped_by(2), stopped_by(15));
        let expected = [OK, TEST_FAILED, USAGE, NO_TESTS].map(|code| code.to_string());
        assert_eq!(listed[..4], expected);
        assert_eq!(listed[4], signals);
        assert_eq!(listed.len(), 5);
    }

    #[test]
    fn a_signal_beyond_the_range_saturates() {
        assert_eq!(stopped_by(15), 143);
        assert_eq!(stopped_by(200), u8::MAX);
    }
}
