//! Finding the tests: each binary's `--list --format terse` (and `--ignored` to know which are ignored), filtered
//! the way libtest filters them.

use crate::build::TestBinary;
use crate::error::{Error, ListError, Result, SelectionError};
use std::process::Command;
use std::sync::Arc;
use ying_report::TestId;

/// One test of one binary.
#[derive(Clone, Debug)]
pub struct TestCase {
    /// The binary it is in.
    pub binary: Arc<TestBinary>,
    /// Its name as libtest lists it (`module::name`).
    pub name: String,
    /// Marked `#[ignore]`.
    pub ignored: bool,
}

impl TestCase {
    /// The test's id.
    pub fn id(&self) -> TestId {
        self.binary.test_id(&self.name)
    }
}

/// How libtest arguments select tests: filters, `--exact`, `--skip`, `--ignored`, `--include-ignored`. Other
/// arguments are passed to every test process.
#[derive(Debug, Default)]
pub struct Selection {
    /// Names (or parts of names) to run; all tests when empty.
    pub filters: Vec<String>,
    /// Filters and skips match whole names.
    pub exact: bool,
    /// Names (or parts of names) not to run.
    pub skip: Vec<String>,
    /// Run only ignored tests.
    pub ignored_only: bool,
    /// Run ignored tests too.
    pub include_ignored: bool,
    /// Other arguments, for every test process.
    pub passthrough: Vec<String>,
}

impl Selection {
    /// Reads the positional filters and the arguments after `--`.
    pub fn new(filters: &[String], test_args: &[String]) -> Result<Self> {
        Self::parse(filters, test_args).map_err(Error::TestArgs)
    }

    fn parse(filters: &[String], test_args: &[String]) -> std::result::Result<Self, SelectionError> {
        let mut selection = Self { filters: filters.to_vec(), ..Self::default() };
        let mut args = test_args.iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--exact" => selection.exact = true,
                "--ignored" => selection.ignored_only = true,
                "--include-ignored" => selection.include_ignored = true,
                "--skip" => selection.skip.push(args.next().ok_or(SelectionError::SkipWithoutValue)?.clone()),
                other if other.starts_with("--skip=") => selection.skip.push(other["--skip=".len()..].to_owned()),
                other if !other.starts_with('-') => selection.filters.push(other.to_owned()),
                other => selection.passthrough.push(other.to_owned()),
            }
        }
        Ok(selection)
    }

    fn matches(&self, pattern: &str, name: &str) -> bool {
        if self.exact { name == pattern } else { name.contains(pattern) }
    }

    /// Whether `name` passes the filters and skips.
    pub fn selects(&self, name: &str) -> bool {
        (self.filters.is_empty() || self.filters.iter().any(|filter| self.matches(filter, name)))
            && !self.skip.iter().any(|skip| self.matches(skip, name))
    }

    /// Whether a test with this ignored flag runs (rather than being reported as ignored).
    pub fn runs(&self, ignored: bool) -> bool {
        if self.ignored_only { ignored } else { self.include_ignored || !ignored }
    }
}

fn list(binary: &TestBinary, ignored: bool) -> Result<Vec<String>> {
    let mut command = Command::new(&binary.path);
    command.args(["--list", "--format", "terse"]).current_dir(&binary.package_dir);
    if ignored {
        command.arg("--ignored");
    }
    let error = |source| Error::List { binary: binary.path.clone(), source };
    let output = command.output().map_err(|why| error(ListError::Spawn(why)))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
        return Err(error(ListError::Failed { status: output.status, stderr }));
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.strip_suffix(": test"))
        .map(str::to_owned)
        .collect())
}

/// Lists every test of every binary that passes `selection`'s filters (ignored ones included, marked).
pub fn discover(binaries: &[Arc<TestBinary>], selection: &Selection) -> Result<Vec<TestCase>> {
    let mut tests = Vec::new();
    for binary in binaries {
        let ignored = list(binary, true)?;
        for name in list(binary, false)? {
            if selection.selects(&name) {
                let ignored = ignored.contains(&name);
                tests.push(TestCase { binary: Arc::clone(binary), name, ignored });
            }
        }
    }
    Ok(tests)
}

#[cfg(test)]
mod tests {
    use super::Selection;

    fn selection(filters: &[&str], args: &[&str]) -> Selection {
        let owned = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        Selection::new(&owned(filters), &owned(args)).unwrap()
    }

    #[test]
    fn filters_skips_and_exact_behave_like_libtest() {
        let all = selection(&[], &[]);
        assert!(all.selects("cache::evicts"));
        let some = selection(&["cache"], &["--skip", "slow"]);
        assert!(some.selects("cache::evicts") && !some.selects("cache::slow_fill") && !some.selects("index::build"));
        let exact = selection(&["cache::evicts"], &["--exact"]);
        assert!(exact.selects("cache::evicts") && !exact.selects("cache::evicts_twice"));
        let after_dashes = selection(&[], &["index", "--test-threads=1"]);
        assert!(after_dashes.selects("index::build") && !after_dashes.selects("cache::evicts"));
        assert_eq!(after_dashes.passthrough, ["--test-threads=1"]);
    }

    #[test]
    fn ignored_tests_run_only_when_asked() {
        assert!(selection(&[], &[]).runs(false) && !selection(&[], &[]).runs(true));
        assert!(selection(&[], &["--ignored"]).runs(true) && !selection(&[], &["--ignored"]).runs(false));
        assert!(selection(&[], &["--include-ignored"]).runs(true));
        assert!(Selection::new(&[], &["--skip".to_owned()]).is_err());
    }
}
