//! The exit codes `cargo ying` ends with: one table, which its help shows and scripts around it (a CI step, a
//! wrapper of another test runner) may rely on. They are cargo-nextest's (its `NextestExitCode`), so that a script
//! written for one reads the other, and one of ying's own, for a run whose tests all passed and whose memory
//! regressed.

/// Every test passed and no leak test's memory regressed.
pub const OK: u8 = 0;
/// A usage or configuration error (clap's code for a command line it refuses), a corrupt or foreign baseline or
/// summary: nothing ran, or nothing was written.
pub const USAGE: u8 = 2;
/// Every test passed, and the gate failed the run: a test's memory regressed against the baseline (or, with
/// `--check`, a test is new to it or missing from it). ying's own code: nextest has none for it.
pub const MEMORY_REGRESSED: u8 = 3;
/// No test was selected to run (with `--no-tests=fail`, the default), as cargo-nextest's `NO_TESTS_RUN`.
pub const NO_TESTS: u8 = 4;
/// A `-E` filterset could not be parsed, as cargo-nextest's `INVALID_FILTERSET`.
pub const INVALID_FILTERSET: u8 = 94;
/// The nextest profile `-P` names is not in `.config/nextest.toml`, or the file does not read, as cargo-nextest's
/// `SETUP_ERROR`.
pub const SETUP_ERROR: u8 = 96;
/// A test failed, crashed or timed out (whatever the memory did), or the run was stopped by a signal, as
/// cargo-nextest's `TEST_RUN_FAILED`.
pub const TEST_FAILED: u8 = 100;
/// Building the tests (or the allocation interposer of `--measure all`) failed, as cargo-nextest's `BUILD_FAILED`.
pub const BUILD_FAILED: u8 = 101;
/// `cargo metadata` failed, as cargo-nextest's `CARGO_METADATA_FAILED`.
pub const CARGO_METADATA_FAILED: u8 = 102;
/// A test binary did not list its tests, as cargo-nextest's `TEST_LIST_CREATION_FAILED`.
pub const TEST_LIST_FAILED: u8 = 104;

/// The exit code of a run that finished: a failed test outweighs a regression.
///
/// ```
/// use ying_report::exit_code::{MEMORY_REGRESSED, OK, TEST_FAILED, of_run};
/// assert_eq!((of_run(false, false), of_run(false, true), of_run(true, true)), (OK, MEMORY_REGRESSED, TEST_FAILED));
/// ```
pub const fn of_run(failed: bool, regressed: bool) -> u8 {
    match (failed, regressed) {
        (true, _) => TEST_FAILED,
        (false, true) => MEMORY_REGRESSED,
        (false, false) => OK,
    }
}

/// The exit code of a run stopped by `signal` (SIGINT, SIGTERM): [`TEST_FAILED`], whatever the signal, as
/// cargo-nextest ends a run it was asked to stop; the summary says which signal it was.
///
/// ```
/// assert_eq!(ying_report::exit_code::stopped_by(2), 100);
/// ```
pub const fn stopped_by(signal: i32) -> u8 {
    let _ = signal;
    TEST_FAILED
}

/// Every exit code with what it means, in the order the help lists them: the codes as written there, and the
/// meaning.
pub const DOCUMENTED: &[(&str, &str)] = &[
    ("0", "every test passed, and no test's memory regressed"),
    ("2", "usage or configuration error, or a corrupt baseline or summary"),
    ("3", "every test passed, and memory regressed against the baseline (ying's own code)"),
    ("4", "no tests to run (with --no-tests=fail, the default)"),
    ("94", "invalid filterset"),
    ("96", "the nextest profile of -P is not found, or .config/nextest.toml does not read"),
    ("100", "a test failed, crashed or timed out, or the run was stopped (SIGINT, SIGTERM)"),
    ("101", "the build failed"),
    ("102", "cargo metadata failed"),
    ("104", "a test binary did not list its tests"),
];

/// The table as the help shows it, after its heading `Exit codes:`.
pub fn help() -> String {
    let mut text = String::from("Exit codes (cargo-nextest's, and 3):");
    for (codes, meaning) in DOCUMENTED {
        text.push_str(&format!("\n  {codes:>3}  {meaning}"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::{
        BUILD_FAILED, CARGO_METADATA_FAILED, DOCUMENTED, INVALID_FILTERSET, MEMORY_REGRESSED, NO_TESTS, OK,
        SETUP_ERROR, TEST_FAILED, TEST_LIST_FAILED, USAGE, stopped_by,
    };

    #[test]
    fn the_documented_table_lists_every_code_once_in_order() {
        let listed: Vec<String> = DOCUMENTED.iter().map(|(codes, _)| (*codes).to_owned()).collect();
        let codes = [
            OK,
            USAGE,
            MEMORY_REGRESSED,
            NO_TESTS,
            INVALID_FILTERSET,
            SETUP_ERROR,
            TEST_FAILED,
            BUILD_FAILED,
            CARGO_METADATA_FAILED,
            TEST_LIST_FAILED,
        ];
        let expected: Vec<String> = codes.iter().map(u8::to_string).collect();
        assert_eq!(listed, expected);
    }

    /// The values of cargo-nextest's `NextestExitCode` (nextest-metadata), which scripts around nextest test for;
    /// ying's own code is none of nextest's.
    #[test]
    fn the_codes_are_nextests() {
        assert_eq!((NO_TESTS, INVALID_FILTERSET, SETUP_ERROR, TEST_FAILED, BUILD_FAILED), (4, 94, 96, 100, 101));
        assert_eq!((CARGO_METADATA_FAILED, TEST_LIST_FAILED), (102, 104));
        let nextests = [0, 4, 5, 10, 70, 80, 81, 82, 90, 92, 93, 94, 95, 96, 100, 101, 102, 103, 104, 105, 106, 110];
        assert!(!nextests.contains(&MEMORY_REGRESSED));
    }

    #[test]
    fn a_stopped_run_fails_as_nextests_does_whatever_the_signal() {
        assert_eq!((stopped_by(2), stopped_by(15)), (TEST_FAILED, TEST_FAILED));
    }
}
