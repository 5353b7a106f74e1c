//! Errors of `cargo ying` and the exit codes they map to.
//!
//! An error stops `cargo ying` before or around the tests; a failing test is a result, not an error. Each variant
//! reads after "failed to" and carries its cause as a source, so the whole chain is shown: `error: failed to read
//! the baseline ying-baseline.json: expected value at line 3 column 5`.

use std::path::PathBuf;
use std::process::ExitStatus;

use ying_report::exit_code;

/// What stopped `cargo ying`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum Error {
    /// `cargo metadata` failed.
    #[error("failed to read the workspace metadata")]
    Metadata(#[source] cargo_metadata::Error),
    /// `[workspace.metadata.ying]` (or a package's `[package.metadata.ying]`) is not a valid configuration.
    #[error("failed to read {table} in {}", manifest.display())]
    Config {
        /// The Cargo.toml the table is in.
        manifest: PathBuf,
        /// `[workspace.metadata.ying]` or `[package.metadata.ying]`.
        table: &'static str,
        /// What is wrong, naming the key.
        #[source]
        source: ConfigError,
    },
    /// The arguments after `--` are not what a test harness takes.
    #[error("failed to read the test arguments")]
    TestArgs(#[source] SelectionError),
    /// The baseline exists but is not a baseline this cargo ying reads.
    #[error("failed to read the baseline {}", path.display())]
    ReadBaseline {
        /// The baseline file.
        path: PathBuf,
        /// Why.
        #[source]
        source: ying_report::ReadError,
    },
    /// The baseline could not be written.
    #[error("failed to write the baseline {}", path.display())]
    WriteBaseline {
        /// The baseline file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The baseline is to be saved and could not be replaced: checked before anything runs.
    #[error("failed to save the baseline {}", path.display())]
    SaveBaseline {
        /// The baseline file.
        path: PathBuf,
        /// Why.
        #[source]
        source: BaselineFileError,
    },
    /// Two summaries given to `cargo ying merge` have a test in common: the same shard twice, or shards of
    /// different runs.
    #[error("failed to merge {} and {}: both have the test `{test}`", first.display(), second.display())]
    MergeOverlap {
        /// The summary that had the test first.
        first: PathBuf,
        /// The other.
        second: PathBuf,
        /// The test, in its display form.
        test: String,
        /// What to do.
        #[source]
        hint: MergeHint,
    },
    /// A summary (of an earlier run, or of a shard) could not be read.
    #[error("failed to read {}{hint}", path.display())]
    ReadSummary {
        /// The summary file.
        path: PathBuf,
        /// What to do, when there is an obvious step (` (run cargo ying test first)`).
        hint: &'static str,
        /// Why.
        #[source]
        source: ying_report::ReadError,
    },
    /// A report beside a summary could not be read.
    #[error("failed to read the report {}", path.display())]
    ReadReport {
        /// The report file.
        path: PathBuf,
        /// Why.
        #[source]
        source: ying_report::ReadError,
    },
    /// A file to compare is neither a baseline nor a summary of this cargo ying.
    #[error("failed to read {}", path.display())]
    ReadComparison {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: ying_report::ReadError,
    },
    /// Building the tests failed; cargo has shown why.
    #[error("failed to build the tests")]
    Build(#[source] BuildError),
    /// A test binary did not list its tests.
    #[error("failed to list the tests of {}", binary.display())]
    List {
        /// The test executable.
        binary: PathBuf,
        /// Why.
        #[source]
        source: ListError,
    },
    /// A package's Cargo.toml could not be read for its targets' `harness` settings.
    #[error("failed to read the targets of {}", path.display())]
    Manifest {
        /// The package's Cargo.toml.
        path: PathBuf,
        /// Why: the file's error, or the TOML error with its line and column.
        #[source]
        source: ManifestError,
    },
    /// The allocation interposer of `--measure all` could not be had.
    #[error("failed to set up the allocation interposer of `--measure all`")]
    Interposer(#[source] InterposerError),
    /// `.config/nextest.toml` could not take the profile `ying`.
    #[error("failed to add the profile `ying` to {}", path.display())]
    NextestConfig {
        /// The file.
        path: PathBuf,
        /// Why: it is not TOML (with the line), or it has a `ying` of its own.
        #[source]
        source: NextestConfigError,
    },
    /// `ying-wrap` is not on `PATH`, where nextest looks for the profile's wrapper script.
    #[error(
        "failed to find `ying-wrap` on PATH: nextest runs every test of the profile `ying` through it, and each would fail \
         to start; install it with cargo-ying (`cargo install cargo-ying` installs both) or put {} on PATH, then run \
         this again",
        dir.display()
    )]
    WrapperNotOnPath {
        /// Where the running cargo-ying is.
        dir: PathBuf,
    },
    /// A nextest profile (`-P`) could not be read.
    #[error("failed to read the nextest profile `{profile}` in {}", path.display())]
    NextestProfile {
        /// `.config/nextest.toml`.
        path: PathBuf,
        /// The profile.
        profile: String,
        /// Why.
        #[source]
        source: NextestProfileError,
    },
    /// `cargo ying wrap` could not run its test measured.
    #[error("failed to run the test measured")]
    Wrap(#[source] WrapError),
    /// `--reruns` given to a command that runs no test.
    #[error(
        "failed to rerun regressions in `cargo ying {0}`: it runs no test, so --reruns would do nothing; run the \
         tests with `cargo ying test` (`--measure all` for every test) to have a regression run again"
    )]
    RerunsWithoutRunning(&'static str),
    /// A run of another workspace than this one, found in a target directory they share.
    #[error(
        "failed to take {run} as this workspace's: it ran the tests of the workspace at {}, not of this one at {} \
         (a target directory both share?); run this workspace's tests first, or give each workspace a target \
         directory of its own",
        ran_in.display(),
        root.display()
    )]
    ForeignRun {
        /// Which run: `the last run's summary.json`, `nextest run <id>`.
        run: String,
        /// The workspace it ran.
        ran_in: PathBuf,
        /// This workspace.
        root: PathBuf,
    },
    /// `cargo ying merge` was given the summary of another workspace's run: tests of packages this one has none of.
    #[error(
        "failed to merge {} into this workspace's run: it holds tests of {packages}, which this workspace at {} has \
         no package of; merge the summaries of this workspace's shards",
        summary.display(),
        root.display()
    )]
    ForeignSummary {
        /// The summary.
        summary: PathBuf,
        /// The packages not of this workspace, named.
        packages: String,
        /// This workspace.
        root: PathBuf,
    },
    /// `cargo ying gate --archive-file` names a file that is not a nextest archive that reads.
    #[error("failed to read the nextest archive {}: {reason}", path.display())]
    Archive {
        /// The archive.
        path: PathBuf,
        /// Why it does not read.
        reason: String,
    },
    /// `cargo ying gate` found no run to judge.
    #[error("failed to find a nextest run in {}: run `cargo nextest run --profile ying` first (`cargo ying setup nextest` adds the profile)", .0.display())]
    NoNextestRun(PathBuf),
    /// A test binary to measure from outside is statically linked: the interposer cannot be loaded into it.
    #[error(
        "failed to measure the tests of {} from outside: it is statically linked (no dynamic loader reads \
         LD_PRELOAD in it: `-C target-feature=+crt-static`, or a musl target); build it dynamically linked to run it \
         with --measure all, or measure its leak tests (`#[ying::leak_test]`, the runtime linked in)",
        .0.display()
    )]
    StaticBinary(PathBuf),
    /// cargo ying was asked to stop (SIGINT, SIGTERM) before the tests ran.
    #[error("failed to {during}: cargo ying was stopped by {}", crate::signals::name(*signal))]
    Interrupted {
        /// What it was doing (`build the tests`).
        during: &'static str,
        /// The signal.
        signal: i32,
    },
    /// The run's lock is something cargo ying did not make: a link, a named pipe, a device, a directory.
    #[error(
        "failed to lock {}: it is {what}, not the regular file cargo ying makes there; remove it, and cargo ying makes \
         it again",
        path.display()
    )]
    LockNotAFile {
        /// The lock's path.
        path: PathBuf,
        /// What it is.
        what: &'static str,
    },
    /// Reading or writing one of the run's files failed.
    #[error("failed to {action} {}", path.display())]
    Io {
        /// What was done: `write`, `create`, `clear`, `append to`.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// An I/O error while doing `action` to `path`.
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { action, path, source }
    }

    /// The exit code this error ends `cargo ying` with.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            Self::Metadata(_) => exit_code::CARGO_METADATA_FAILED,
            Self::Build(_) => exit_code::BUILD_FAILED,
            Self::Interrupted { signal, .. } => exit_code::stopped_by(*signal),
            Self::List { source: ListError::Interrupted(_), .. } => {
                crate::signals::interrupted().map_or(exit_code::TEST_LIST_FAILED, exit_code::stopped_by)
            }
            Self::List { .. } => exit_code::TEST_LIST_FAILED,
            Self::NextestProfile { .. } => exit_code::SETUP_ERROR,
            Self::Config { .. }
            | Self::TestArgs(_)
            | Self::ReadBaseline { .. }
            | Self::WriteBaseline { .. }
            | Self::SaveBaseline { .. }
            | Self::MergeOverlap { .. }
            | Self::ReadSummary { .. }
            | Self::ReadReport { .. }
            | Self::ReadComparison { .. }
            | Self::Manifest { .. }
            | Self::Interposer(_)
            | Self::NextestConfig { .. }
            | Self::WrapperNotOnPath { .. }
            | Self::Wrap(_)
            | Self::NoNextestRun(_)
            | Self::Archive { .. }
            | Self::ForeignSummary { .. }
            | Self::ForeignRun { .. }
            | Self::RerunsWithoutRunning(_)
            | Self::LockNotAFile { .. }
            | Self::StaticBinary(_)
            | Self::Io { .. } => exit_code::USAGE,
        }
    }

    /// The error and its causes, each after a colon: `failed to read X: cause: its cause`.
    pub(crate) fn chain(&self) -> String {
        let mut text = self.to_string();
        let mut source = std::error::Error::source(self);
        while let Some(cause) = source {
            let shown = cause.to_string();
            // A cause that only repeats its own source adds nothing.
            if !text.ends_with(&shown) {
                text.push_str(": ");
                text.push_str(&shown);
            }
            source = cause.source();
        }
        text
    }
}

/// Why the configuration is not valid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ConfigError {
    /// The key at fault, when one is.
    pub key: Option<String>,
    /// What is wrong with it.
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.key {
            Some(key) => write!(f, "`{key}`: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Why the baseline cannot be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum BaselineFileError {
    /// The file is read-only.
    #[error("it is read-only (mode {mode:o}); make it writable to save the baseline (chmod u+w)")]
    ReadOnly {
        /// Its permission bits.
        mode: u32,
    },
    /// The file, or its directory, has an attribute that forbids replacing it whatever the permissions say.
    #[error("{} is {what} (chattr +{flag}); lift it to save the baseline (chattr -{flag})", if *directory { "its directory" } else { "it" })]
    Attribute {
        /// The attribute's letter, as chattr(1) names it (`i`, `a`).
        flag: char,
        /// What it makes the file (`immutable`, `append-only`).
        what: &'static str,
        /// Whether it is the directory's.
        directory: bool,
    },
    /// Its directory does not let a file be replaced in it.
    #[error("its directory {} is not writable, and the baseline is replaced by a rename in it", .0.display())]
    DirectoryReadOnly(PathBuf),
    /// It could not be checked.
    #[error("could not check whether it is writable")]
    Check(#[source] std::io::Error),
    /// The run measured no test: a baseline of nothing would pass every run after it.
    #[error("{NOTHING_MEASURED}; the baseline is left as it was")]
    NothingMeasured,
}

/// What a run that measured no test says.
pub(crate) const NOTHING_MEASURED: &str = "0 tests measured: add #[ying::leak_test] or run with --measure all";

/// Why the tests could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum BuildError {
    /// cargo could not be started.
    #[error("could not run cargo test --no-run")]
    Spawn(#[source] std::io::Error),
    /// Its messages could not be read.
    #[error("could not read cargo's build messages")]
    Messages(#[source] std::io::Error),
    /// It failed; it has printed why.
    #[error("cargo test --no-run exited with {0}")]
    Failed(ExitStatus),
}

/// Why the allocation interposer could not be had.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum InterposerError {
    /// This platform has none.
    #[error(
        "there is none for this platform, only for Linux with glibc; here ying measures leak tests \
         (`#[ying::leak_test]`)"
    )]
    Unsupported,
    /// There is no cache directory to write it to.
    #[error("neither XDG_CACHE_HOME nor HOME names a directory to keep it in; set one")]
    NoCacheDirectory,
    /// It could not be written there.
    #[error("could not write {}", path.display())]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Why the profile `ying` could not be added to .config/nextest.toml.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NextestConfigError {
    /// The file is not TOML.
    #[error("{}", .0.to_string().trim_end())]
    Parse(toml_edit::TomlError),
    /// It has a `ying` of its own.
    #[error(transparent)]
    Conflict(Conflict),
}

/// A table of the file named `ying` that is not setup's, or an `experimental` that is not a list.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "it has {what} already, which is not what `cargo ying setup nextest` writes; remove it, or add the profile by \
     hand (`--print` shows it)"
)]
pub(crate) struct Conflict {
    /// The table or key, as TOML names it (`[profile.ying]`).
    pub what: String,
}

/// Why a nextest profile could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum NextestProfileError {
    /// The file could not be read.
    #[error(transparent)]
    Io(std::io::Error),
    /// It is not TOML (the message names the line and column).
    #[error("{0}")]
    Toml(String),
    /// No such profile (nextest's words).
    #[error("profile `{name}` not found (known profiles: {})", known.join(", "))]
    Unknown {
        /// The profile named.
        name: String,
        /// The profiles there are: the file's and nextest's own, sorted.
        known: Vec<String>,
    },
    /// Profiles inherit from each other in a circle.
    #[error("the profile `{0}` inherits from itself")]
    Cycle(String),
    /// A value cargo ying takes is not what nextest allows.
    #[error("`{key}`: {message}")]
    Value {
        /// The key, in full (`profile.ci.slow-timeout`).
        key: String,
        /// What is wrong.
        message: String,
    },
}

/// Why nextest's wrapper could not run its test measured.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum WrapError {
    /// It was not started by nextest.
    #[error(
        "`cargo ying wrap` is the wrapper script of nextest's profile `ying`, and {0} is not set: run the tests with \
         `cargo nextest run --profile ying` (`cargo ying setup nextest` adds the profile)"
    )]
    NotUnderNextest(&'static str),
    /// It was given no test binary to run.
    #[error("nextest gave no test binary to run: the wrapper runs `<test binary> <arguments>...`")]
    NoBinary,
    /// A value the setup script gives the tests holds a line break, which nextest's `NEXTEST_ENV` file cannot.
    #[error(
        "failed to give the tests {name}: its value holds a line break, which nextest's `NEXTEST_ENV` file cannot hold"
    )]
    SetupValue {
        /// The variable.
        name: String,
    },
    /// nextest's binary id is not one.
    #[error("nextest's binary id `{0}` is not of the form `package`, `package::name` or `package::kind/name`")]
    BinaryId(String),
    /// The test binary is statically linked.
    #[error(
        "{} is statically linked: no dynamic loader reads LD_PRELOAD in it, so the interposer cannot measure it; \
         build the tests dynamically linked to run them with the profile `ying`",
        .0.display()
    )]
    StaticBinary(PathBuf),
    /// `ying-wrap` could not start cargo-ying, which it hands every test over to but those whose plan is kept.
    #[error(
        "could not start {}: `ying-wrap` hands a binary's first test of a run and an archive's binaries to `cargo-ying \
         ying wrap`; install both (`cargo install cargo-ying`) or put cargo-ying on PATH",
        path.display()
    )]
    HandOver {
        /// The cargo-ying it tried.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The test binary could not be started.
    #[error("could not start {}", path.display())]
    Spawn {
        /// The binary.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// What to do about summaries that overlap.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum MergeHint {
    /// The same file was given twice.
    #[error("the same summary is given twice; give each shard's summary once")]
    SameFile,
    /// Two files have a test in common.
    #[error("each test runs in exactly one shard of a run; give each shard's summary once, all from one run")]
    Overlap,
}

/// Why the arguments after `--` are not a test harness's.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum SelectionError {
    /// An option that takes a value (`--skip`, `--test-threads`, ...) was the last argument.
    #[error("`{0}` needs a value")]
    MissingValue(String),
    /// `--test-threads` was not a number of threads.
    #[error("`--test-threads {0}` is not a number of threads; give a whole number of at least 1")]
    TestThreads(String),
}

/// Why a test binary did not list its tests.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ListError {
    /// It could not be started.
    #[error("could not run it")]
    Spawn(#[source] std::io::Error),
    /// It failed.
    #[error("it exited with {status}: {stderr}")]
    Failed {
        /// How it exited.
        status: ExitStatus,
        /// What it wrote to standard error.
        stderr: String,
    },
    /// It did not list its tests in time (a `harness = false` target that runs instead, say): it was killed.
    #[error("it did not list its tests within {}s and was stopped; is it a custom test harness?", .0.as_secs())]
    TimedOut(std::time::Duration),
    /// cargo ying was asked to stop while it listed.
    #[error("cargo ying was stopped by {0}")]
    Interrupted(String),
}

/// Why a package's Cargo.toml could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ManifestError {
    /// The file could not be read.
    #[error(transparent)]
    Io(std::io::Error),
    /// It is not TOML (the error names the line and column).
    #[error("{}", .0.to_string().trim_end())]
    Toml(toml::de::Error),
}

/// Results of `cargo ying`'s own steps.
pub(crate) type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::{Error, InterposerError};
    use ying_report::exit_code;

    #[test]
    fn the_chain_reads_after_failed_to_and_ends_with_the_root_cause() {
        let source = ying_report::Baseline::parse("{\"schema_version\": 2,\n \"tests\": [").unwrap_err();
        let error = Error::ReadBaseline { path: "ying-baseline.json".into(), source };
        assert_eq!(error.exit_code(), exit_code::USAGE);
        let chain = error.chain();
        assert!(chain.starts_with("failed to read the baseline ying-baseline.json: "), "{chain}");
        assert!(chain.contains("line 2 column"), "{chain}");
        assert_eq!(chain.matches("line 2").count(), 1, "a cause is not repeated: {chain}");
    }

    #[test]
    fn a_failed_build_listing_or_metadata_ends_with_nextests_exit_code() {
        use std::os::unix::process::ExitStatusExt as _;
        let failed = std::process::ExitStatus::from_raw(101 << 8);
        let build = Error::Build(super::BuildError::Failed(failed));
        assert_eq!(build.exit_code(), exit_code::BUILD_FAILED);
        let list = Error::List { binary: "t".into(), source: super::ListError::Interrupted("SIGINT".into()) };
        assert_eq!(list.exit_code(), exit_code::TEST_LIST_FAILED);
        let metadata = Error::Metadata(cargo_metadata::Error::CargoMetadata { stderr: String::new() });
        assert_eq!(metadata.exit_code(), exit_code::CARGO_METADATA_FAILED);
    }

    /// Every code cargo ying shares with cargo-nextest has nextest's value (`NextestExitCode`, from
    /// nextest-metadata), and ying's own code is none of nextest's.
    #[test]
    fn the_exit_codes_are_nextests() {
        use nextest_metadata::NextestExitCode as Nextest;
        let shared = [
            (exit_code::OK, Nextest::OK),
            (exit_code::NO_TESTS, Nextest::NO_TESTS_RUN),
            (exit_code::INVALID_FILTERSET, Nextest::INVALID_FILTERSET),
            (exit_code::SETUP_ERROR, Nextest::SETUP_ERROR),
            (exit_code::TEST_FAILED, Nextest::TEST_RUN_FAILED),
            (exit_code::BUILD_FAILED, Nextest::BUILD_FAILED),
            (exit_code::CARGO_METADATA_FAILED, Nextest::CARGO_METADATA_FAILED),
            (exit_code::TEST_LIST_FAILED, Nextest::TEST_LIST_CREATION_FAILED),
            (exit_code::stopped_by(2), Nextest::TEST_RUN_FAILED),
        ];
        for (ours, nextests) in shared {
            assert_eq!(i32::from(ours), nextests);
        }
        let profile = Error::NextestProfile {
            path: ".config/nextest.toml".into(),
            profile: "ci".into(),
            source: super::NextestProfileError::Cycle("ci".into()),
        };
        assert_eq!(i32::from(profile.exit_code()), Nextest::SETUP_ERROR);
    }

    #[test]
    fn measuring_every_test_where_there_is_no_interposer_is_a_usage_error_naming_where_it_works() {
        let error = Error::Interposer(InterposerError::Unsupported);
        assert_eq!(error.exit_code(), exit_code::USAGE);
        assert_eq!(
            error.chain(),
            "failed to set up the allocation interposer of `--measure all`: there is none for this platform, only \
             for Linux with glibc; here ying measures leak tests (`#[ying::leak_test]`)"
        );
    }
}
