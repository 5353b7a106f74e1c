//! Errors of `cargo ying` and the exit codes they map to.

use std::fmt;

/// Exit code: every test passed.
pub const EXIT_OK: u8 = 0;
/// Exit code: a test failed, crashed or timed out.
pub const EXIT_TEST_FAILED: u8 = 1;
/// Exit code: usage, configuration or build error.
pub const EXIT_USAGE: u8 = 2;

/// An error that stops `cargo ying` before or around the tests (not a failing test, which is a result).
#[derive(Debug)]
pub struct Error {
    /// What failed, as a lowercase fragment that reads after "failed to".
    pub action: String,
    /// Why.
    pub cause: Option<String>,
}

impl Error {
    /// An error for `action` ("read the configuration", ...) caused by `cause`.
    pub fn new(action: impl Into<String>, cause: impl fmt::Display) -> Self {
        Self { action: action.into(), cause: Some(cause.to_string()) }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "failed to {}", self.action)?;
        if let Some(cause) = &self.cause {
            write!(f, ": {cause}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// Results of `cargo ying`'s own steps.
pub type Result<T> = std::result::Result<T, Error>;
