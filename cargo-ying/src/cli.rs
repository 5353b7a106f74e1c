//! The command line: `cargo ying test [OPTIONS] [FILTERS]... [-- TEST ARGS]...`, parsed with clap. What it says
//! goes no further than the commands, which resolve it (`settings`) into what the rest of cargo ying takes.

use crate::config::{MaxFail, Measure, NoTests, RunIgnored, parse_duration};
use crate::gate::Growth;
use crate::outputs::libtest_json::{FORMAT_VERSION, MessageFormat};
use crate::outputs::list_json::{ListFormat, ListType};
use crate::outputs::terminal::ColorChoice;
use crate::run::select::build::CargoArgs;
use crate::run::select::filterset::Filterset;
use crate::run::select::partition::Partition;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use ying_report::exit_code;

/// `cargo` runs `cargo-ying ying ...`: the outer level is cargo's.
#[derive(Debug, Parser)]
#[command(name = "cargo-ying", bin_name = "cargo", version, styles = clap::builder::Styles::plain())]
pub(crate) struct Cargo {
    /// The subcommand cargo ran.
    #[command(subcommand)]
    pub command: CargoCommand,
}

/// The cargo subcommand.
#[derive(Debug, Subcommand)]
pub(crate) enum CargoCommand {
    /// Memory-leak regression testing with ying
    #[command(version, display_name = "cargo-ying", after_help = ying_report::exit_code::help())]
    Ying(Ying),
}

/// `cargo ying`'s own subcommands.
#[derive(Debug, Args)]
pub(crate) struct Ying {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// A `cargo ying` subcommand.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Build the tests, run each in its own process, and report their memory
    ///
    /// Every test runs alone in a process of its own, several at once, with process attribution
    /// (YING_ATTRIBUTION=process) and YING_REPORT_DIR set, so that each leak test counts every allocation of its
    /// process and writes a report. Reports, flamegraphs, summary.json and index.html go to <target-dir>/ying/.
    #[command(after_help = ying_report::exit_code::help())]
    Test(Box<TestArgs>),
    /// Build the tests and list those `cargo ying test` would run with the same options; runs none
    #[command(after_help = ying_report::exit_code::help())]
    List(Box<ListArgs>),
    /// Write the baseline from the last run's results, without running the tests again
    #[command(after_help = ying_report::exit_code::help())]
    Accept(AcceptArgs),
    /// Compare two saved baselines or summary.json files, as the gate compares a run with the baseline
    #[command(after_help = ying_report::exit_code::help())]
    Diff(DiffArgs),
    /// Join the summary.json files of partitioned runs into one summary and gate them against the baseline as one
    #[command(after_help = ying_report::exit_code::help())]
    Merge(MergeArgs),
    /// Set up another test runner to measure the tests it runs: `cargo ying setup nextest`
    #[command(subcommand)]
    Setup(SetupCommand),
    /// Judge what a nextest run with the profile `ying` measured, as `cargo ying test --measure all` judges its run
    ///
    /// Reads the records the wrapper left of each test of the last `cargo nextest run --profile ying` (or of
    /// `--run-id`), then writes the reports, flamegraphs, summary.json and index.html, compares with the baseline,
    /// saves it when asked, and exits with the run's verdict. nextest has judged the tests' outcomes; this judges
    /// their memory.
    #[command(after_help = ying_report::exit_code::help())]
    Gate(Box<GateArgs>),
    /// nextest's wrapper script for the profile `ying`: runs one test measured and records it (nextest runs it)
    #[command(hide = true)]
    Wrap(WrapArgs),
}

/// `cargo ying setup`'s runners.
#[derive(Debug, Subcommand)]
pub(crate) enum SetupCommand {
    /// Add the profile `ying` to .config/nextest.toml: every test of `cargo nextest run --profile ying` then runs
    /// measured, and `cargo ying gate` judges the run
    ///
    /// The profile runs each test through cargo-ying as a wrapper script (nextest's experimental `wrapper-scripts`)
    /// and adds the allocation interposer to the profile's archives. What the file holds already stays as it was.
    /// The interposer is built into the target directory now, so that no test waits for it.
    #[command(after_help = ying_report::exit_code::help())]
    Nextest(SetupNextestArgs),
}

/// Options of `cargo ying setup nextest`.
#[derive(Debug, Args)]
pub(crate) struct SetupNextestArgs {
    /// Print the file as it would be written, and write nothing (and build nothing)
    #[arg(long)]
    pub print: bool,
    /// Path to Cargo.toml
    #[arg(long, value_name = "PATH")]
    pub manifest_path: Option<PathBuf>,
}

/// Options of `cargo ying gate`.
#[derive(Debug, Args)]
pub(crate) struct GateArgs {
    /// Path to Cargo.toml
    #[arg(long, value_name = "PATH")]
    pub manifest_path: Option<PathBuf>,
    /// The target directory the run used [default: the workspace's]
    #[arg(long, value_name = "DIRECTORY")]
    pub target_dir: Option<PathBuf>,
    /// The run was of this nextest archive: the workspace is read from its Cargo.toml alone (that of
    /// --manifest-path, else of the current directory), as its sources need not be there; a test of the baseline in
    /// a binary of the archive that the run has no record of is missing
    #[arg(long, value_name = "PATH", help_heading = "Archives")]
    pub archive_file: Option<PathBuf>,
    /// The workspace's root, as given to `cargo nextest run --workspace-remap` [default: the current directory]
    #[arg(long, value_name = "PATH", help_heading = "Archives")]
    pub workspace_remap: Option<PathBuf>,
    /// The nextest run to judge, by its id (NEXTEST_RUN_ID) [default: the last]
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,
    /// The baseline, and whether to save the run into it.
    #[command(flatten)]
    pub saving: BaselineArgs,
    /// How the gate judges growth.
    #[command(flatten)]
    pub gating: GateOptions,
    /// JUnit and colour.
    #[command(flatten)]
    pub report: ReportArgs,
    /// Show every test's line and every measured test's figures
    #[arg(short = 'v', long, help_heading = "Output")]
    pub verbose: bool,
}

/// The arguments nextest gives its wrapper script, or `--setup` for its setup script.
#[derive(Debug, Args)]
pub(crate) struct WrapArgs {
    /// Run as the profile's setup script: give every test of the run what it needs to measure itself
    #[arg(long, exclusive = true)]
    pub setup: bool,
    /// The test binary and its arguments
    #[arg(required_unless_present = "setup", trailing_var_arg = true, allow_hyphen_values = true, value_name = "TEST")]
    pub command: Vec<std::ffi::OsString>,
}

/// Options of `cargo ying merge`.
#[derive(Debug, Args)]
pub(crate) struct MergeArgs {
    /// The shards' summary.json files (their reports beside them, as `cargo ying test` left them)
    #[arg(required = true, value_name = "SUMMARY")]
    pub summaries: Vec<PathBuf>,
    /// Where to write the merged summary.json; the run's other files (index.html, reports, flamegraphs) go beside it
    /// [default: <target-dir>/ying/summary.json]
    #[arg(long, value_name = "PATH")]
    pub output: Option<PathBuf>,
    /// Path to Cargo.toml (for the baseline and the configuration)
    #[arg(long, value_name = "PATH")]
    pub manifest_path: Option<PathBuf>,
    /// The baseline to gate against [default: ying-baseline.json at the workspace root]
    #[arg(long, value_name = "PATH")]
    pub baseline: Option<PathBuf>,
    /// How the gate judges growth.
    #[command(flatten)]
    pub gating: GateOptions,
    /// JUnit and colour.
    #[command(flatten)]
    pub report: ReportArgs,
}

/// Options of `cargo ying diff`.
#[derive(Debug, Args)]
pub(crate) struct DiffArgs {
    /// The earlier baseline or summary.json
    pub old: PathBuf,
    /// The later baseline or summary.json
    pub new: PathBuf,
    /// How the gate judges growth (OLD is the baseline).
    #[command(flatten)]
    pub gating: GateOptions,
}

/// Options of `cargo ying accept`.
#[derive(Debug, Args)]
pub(crate) struct AcceptArgs {
    /// Path to Cargo.toml
    #[arg(long, value_name = "PATH")]
    pub manifest_path: Option<PathBuf>,
    /// Directory for all generated artifacts (where the last run wrote ying/summary.json)
    #[arg(long, value_name = "DIRECTORY")]
    pub target_dir: Option<PathBuf>,
    /// The baseline to write [default: ying-baseline.json at the workspace root]
    #[arg(long, value_name = "PATH")]
    pub baseline: Option<PathBuf>,
}

/// Which tests: the options `cargo ying test` and `cargo ying list` share.
#[derive(Debug, Default, Args)]
pub(crate) struct TestFilter {
    /// Options for building the tests.
    #[command(flatten)]
    pub cargo: CargoOptions,

    /// Run only the tests in this filterset (nextest's syntax: test(), package(), binary(), binary_id(), kind(),
    /// all(), none(); and, or, not, -); a test in any of several runs
    #[arg(short = 'E', long = "filterset", value_name = "EXPR", value_parser = parse_filterset, help_heading = "Filter options")]
    pub filtersets: Vec<Filterset>,

    /// Which tests to run by their #[ignore]: default (not ignored), only (ignored ones), all
    #[arg(long, value_enum, value_name = "WHICH", help_heading = "Filter options")]
    pub run_ignored: Option<RunIgnored>,

    /// Run only this shard of the tests, as cargo-nextest shares them out: slice:M/N (round-robin across binaries),
    /// hash:M/N (by the test's name, stable as tests come and go) or count:M/N (round-robin within each binary)
    #[arg(long, value_name = "SCHEME:M/N", value_parser = Partition::parse, help_heading = "Filter options")]
    pub partition: Option<Partition>,

    /// Run only the tests whose names contain one of these
    #[arg(value_name = "TESTNAME")]
    pub filters: Vec<String>,

    /// Arguments for the test harness, as with cargo test: --exact, --skip NAME, --ignored, --include-ignored, and
    /// more filters; --list lists, --nocapture and --test-threads N are honoured by cargo ying; anything else is
    /// passed to every test process
    #[arg(last = true, value_name = "TEST ARGS")]
    pub test_args: Vec<String>,
}

/// Options of `cargo ying list`.
#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    /// Which tests.
    #[command(flatten)]
    pub filter: TestFilter,
    /// Output format: human (each binary's tests under it), oneline (one test per line), or cargo-nextest's JSON
    /// test list (json, json-pretty)
    #[arg(short = 'T', long, value_enum, value_name = "FORMAT", default_value_t, help_heading = "Output")]
    pub message_format: ListFormat,
    /// Type of listing: full (the binaries and their tests), or binaries-only (the binaries, none of them run)
    #[arg(long, value_enum, value_name = "TYPE", default_value_t, help_heading = "Output")]
    pub list_type: ListType,
}

/// Options of `cargo ying test`.
#[derive(Debug, Args)]
pub(crate) struct TestArgs {
    /// Which tests.
    #[command(flatten)]
    pub filter: TestFilter,

    /// The nextest profile to use: its retries, slow-timeout (period × terminate-after), test-threads and fail-fast,
    /// from .config/nextest.toml (flags win over it; it wins over [workspace.metadata.ying])
    #[arg(short = 'P', long, env = "NEXTEST_PROFILE", value_name = "PROFILE", help_heading = "Running")]
    pub profile: Option<String>,

    /// Number of tests to run simultaneously: N, "num-cpus", or -N (that many fewer than the cores) [default: the
    /// number of available cores]
    #[arg(
        short = 'j',
        long,
        visible_alias = "test-threads",
        value_name = "N",
        env = "NEXTEST_TEST_THREADS",
        allow_negative_numbers = true,
        value_parser = parse_test_threads,
        help_heading = "Running"
    )]
    pub jobs: Option<usize>,

    /// Stop a test that runs longer than this and count it as failed (e.g. 90s, 1m 30s, 500ms) [default: 5m]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, help_heading = "Running")]
    pub timeout: Option<std::time::Duration>,

    /// Stop running tests after the first failure [default, unless the configuration or the profile says otherwise]
    #[arg(
        long,
        visible_alias = "ff",
        overrides_with = "no_fail_fast",
        conflicts_with = "no_run",
        help_heading = "Running"
    )]
    pub fail_fast: bool,

    /// Run all tests regardless of failure
    #[arg(
        long,
        visible_alias = "nff",
        overrides_with = "fail_fast",
        conflicts_with = "no_run",
        help_heading = "Running"
    )]
    pub no_fail_fast: bool,

    /// Number of failures after which to stop running tests: N, N:wait (the tests running finish; the default),
    /// N:immediate (the tests running are stopped, and fail), or all
    #[arg(
        long,
        value_name = "N[:MODE]",
        value_parser = MaxFail::parse,
        conflicts_with_all = ["no_run", "fail_fast", "no_fail_fast"],
        help_heading = "Running"
    )]
    pub max_fail: Option<MaxFail>,

    /// Compile, but don't run tests (under --measure all, the interposer is built too)
    #[arg(long, help_heading = "Running")]
    pub no_run: bool,

    /// Number of retries for failing tests: a test that fails and then passes is flaky [default: 0]
    #[arg(long, env = "NEXTEST_RETRIES", value_name = "N", help_heading = "Running")]
    pub retries: Option<u32>,

    /// Let tests print straight to the terminal, one test at a time
    #[arg(long, visible_alias = "nocapture", help_heading = "Running")]
    pub no_capture: bool,

    /// Which tests to measure: leak-tests (those with #[ying::leak_test]), or all: every test, through an
    /// allocation interposer cargo ying builds and preloads (Linux with glibc) [default: leak-tests]
    #[arg(long, value_enum, value_name = "WHICH", help_heading = "Running")]
    pub measure: Option<Measure>,

    /// What to do when no test is selected to run: fail (exit code 4), warn or pass [default: fail]
    #[arg(long, value_enum, value_name = "ACTION", help_heading = "Running")]
    pub no_tests: Option<NoTests>,

    /// Say more: cargo's build commands and each test's command line
    #[arg(short = 'v', long, conflicts_with = "quiet", help_heading = "Output")]
    pub verbose: bool,

    /// Say less: no build progress, and no line for a test that passed
    #[arg(short = 'q', long, help_heading = "Output")]
    pub quiet: bool,

    /// The baseline, and whether to save the run into it.
    #[command(flatten)]
    pub saving: BaselineArgs,

    /// How the gate judges growth.
    #[command(flatten)]
    pub gating: GateOptions,

    /// JUnit and colour.
    #[command(flatten)]
    pub report: ReportArgs,

    /// Write the run's events on standard output: libtest-json (libtest's JSON, as cargo-nextest writes it, a
    /// binary's events together) or libtest-json-plus (each as it comes, with nextest's `nextest` object)
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t, help_heading = "Output")]
    pub message_format: MessageFormat,

    /// The version of --message-format's format (there is one: 0.1)
    #[arg(long, value_name = "VERSION", value_parser = [FORMAT_VERSION], help_heading = "Output")]
    pub message_format_version: Option<String>,
}

/// Which baseline a run is compared with, and whether it is saved into it; shared by `test` and `gate`.
#[derive(Debug, Default, Args)]
pub(crate) struct BaselineArgs {
    /// The baseline to compare with and save to [default: ying-baseline.json at the workspace root]
    #[arg(long, value_name = "PATH", help_heading = "Baseline")]
    pub baseline: Option<PathBuf>,

    /// Write the run's figures into the baseline (only the tests the run measured change)
    #[arg(long, help_heading = "Baseline")]
    pub save_baseline: bool,
}

/// The files and colours of a run's report beyond its own files; shared by `test`, `gate` and `merge`.
#[derive(Debug, Default, Args)]
pub(crate) struct ReportArgs {
    /// Write the results as JUnit XML to this file
    #[arg(long, value_name = "PATH", help_heading = "Output")]
    pub junit: Option<PathBuf>,

    /// When to color the output
    #[arg(long, value_enum, value_name = "WHEN", help_heading = "Output")]
    pub color: Option<ColorChoice>,
}

/// How the gate judges a run against the baseline; shared by `test`, `diff` and `merge`.
#[derive(Debug, Default, Args)]
pub(crate) struct GateOptions {
    /// Growth of retained memory, relative to the baseline, that does not fail the gate [default: 10%]
    #[arg(long, value_name = "PERCENT", help_heading = "Baseline")]
    pub max_growth: Option<Growth>,

    /// Growth of retained memory that never fails the gate, as a size (e.g. "4 KiB") [default: 1 KiB]
    #[arg(long, value_name = "SIZE", help_heading = "Baseline")]
    pub min_growth: Option<ying_report::ByteSize>,

    /// Growth of what statics and thread-locals hold that never fails the gate, as a size; no relative tolerance,
    /// and never more than --min-growth [default: 512 B]
    #[arg(long, value_name = "SIZE", help_heading = "Baseline")]
    pub held_growth: Option<ying_report::ByteSize>,

    /// Also gate on these figures, with the same tolerance (retained bytes are always gated; lost bytes by their
    /// growth alone, 256 B at most, and held bytes by --held-growth)
    #[arg(long, value_name = "FIGURE", value_delimiter = ',', value_parser = figure_parser(), help_heading = "Baseline")]
    pub gate: Vec<ying_report::Figure>,

    /// Also fail when a leak test is new to the baseline or missing from a complete run
    #[arg(long, help_heading = "Baseline")]
    pub check: bool,

    /// Runs again a leak test that crossed the tolerance this many times: it regresses unless a rerun measures it
    /// within the tolerance, when it is unstable (reported, not failing the run); a rerun that fails measures
    /// nothing [default: 2]
    #[arg(long, value_name = "N", help_heading = "Baseline")]
    pub reruns: Option<u32>,
}

/// The options passed through to `cargo test --no-run`.
#[derive(Debug, Default, Args)]
pub(crate) struct CargoOptions {
    /// Path to Cargo.toml
    #[arg(long, value_name = "PATH", help_heading = "Package selection")]
    pub manifest_path: Option<PathBuf>,
    /// Package(s) to test
    #[arg(short = 'p', long = "package", value_name = "SPEC", help_heading = "Package selection")]
    pub packages: Vec<String>,
    /// Test all packages in the workspace
    #[arg(long, help_heading = "Package selection")]
    pub workspace: bool,
    /// Exclude packages from the test
    #[arg(long, value_name = "SPEC", help_heading = "Package selection")]
    pub exclude: Vec<String>,
    /// Test only this package's library
    #[arg(long, help_heading = "Target selection")]
    pub lib: bool,
    /// Test all test targets
    #[arg(long, help_heading = "Target selection")]
    pub tests: bool,
    /// Test only the named test target
    #[arg(long = "test", value_name = "NAME", help_heading = "Target selection")]
    pub test_targets: Vec<String>,
    /// Test all binaries
    #[arg(long, help_heading = "Target selection")]
    pub bins: bool,
    /// Test only the named binary
    #[arg(long = "bin", value_name = "NAME", help_heading = "Target selection")]
    pub bin_targets: Vec<String>,
    /// Test all examples
    #[arg(long, help_heading = "Target selection")]
    pub examples: bool,
    /// Test only the named example
    #[arg(long = "example", value_name = "NAME", help_heading = "Target selection")]
    pub example_targets: Vec<String>,
    /// Test all benches (built in test mode, their tests run as tests)
    #[arg(long, help_heading = "Target selection")]
    pub benches: bool,
    /// Test only the named bench
    #[arg(long = "bench", value_name = "NAME", help_heading = "Target selection")]
    pub bench_targets: Vec<String>,
    /// Test all targets (benches built in test mode included)
    #[arg(long, help_heading = "Target selection")]
    pub all_targets: bool,
    /// Space or comma separated list of features to activate
    #[arg(short = 'F', long, value_name = "FEATURES", help_heading = "Feature selection")]
    pub features: Vec<String>,
    /// Activate all available features
    #[arg(long, help_heading = "Feature selection")]
    pub all_features: bool,
    /// Do not activate the `default` feature
    #[arg(long, help_heading = "Feature selection")]
    pub no_default_features: bool,
    /// Build for the target triple (its tests must run on this machine)
    #[arg(long, value_name = "TRIPLE", help_heading = "Compilation options")]
    pub target: Option<String>,
    /// Build in release mode, with optimizations
    #[arg(short = 'r', long, help_heading = "Compilation options")]
    pub release: bool,
    /// Build with the given profile
    #[arg(long, value_name = "PROFILE-NAME", help_heading = "Compilation options")]
    pub cargo_profile: Option<String>,
    /// Directory for all generated artifacts
    #[arg(long, value_name = "DIRECTORY", help_heading = "Compilation options")]
    pub target_dir: Option<PathBuf>,
    /// Assert that Cargo.lock will remain unchanged
    #[arg(long, help_heading = "Manifest options")]
    pub locked: bool,
    /// Run without accessing the network
    #[arg(long, help_heading = "Manifest options")]
    pub offline: bool,
    /// Equivalent to specifying both --locked and --offline
    #[arg(long, help_heading = "Manifest options")]
    pub frozen: bool,
}

impl CargoOptions {
    /// What cargo is asked for: the arguments for `cargo test --no-run` (and `cargo metadata`, for the manifest
    /// path and the lock file flags), and what cargo ying reads of them.
    pub(crate) fn to_args(&self) -> CargoArgs {
        let mut args = Vec::new();
        let mut lock_flags = Vec::new();
        let mut flag = |condition: bool, name: &'static str| {
            if condition {
                args.push(name.to_owned());
            }
        };
        flag(self.workspace, "--workspace");
        flag(self.lib, "--lib");
        flag(self.tests, "--tests");
        flag(self.bins, "--bins");
        flag(self.examples, "--examples");
        flag(self.benches, "--benches");
        flag(self.all_targets, "--all-targets");
        flag(self.all_features, "--all-features");
        flag(self.no_default_features, "--no-default-features");
        flag(self.release, "--release");
        for (on, name) in [(self.locked, "--locked"), (self.offline, "--offline"), (self.frozen, "--frozen")] {
            flag(on, name);
            if on {
                lock_flags.push(name);
            }
        }
        let mut valued = |name: &str, values: &[String]| {
            for value in values {
                args.push(name.to_owned());
                args.push(value.clone());
            }
        };
        valued("--package", &self.packages);
        valued("--exclude", &self.exclude);
        valued("--test", &self.test_targets);
        valued("--bin", &self.bin_targets);
        valued("--example", &self.example_targets);
        valued("--bench", &self.bench_targets);
        valued("--features", &self.features);
        if let Some(profile) = &self.cargo_profile {
            args.extend(["--profile".to_owned(), profile.clone()]);
        }
        if let Some(target) = &self.target {
            args.extend(["--target".to_owned(), target.clone()]);
        }
        if let Some(path) = &self.manifest_path {
            args.extend(["--manifest-path".to_owned(), path.display().to_string()]);
        }
        if let Some(dir) = &self.target_dir {
            args.extend(["--target-dir".to_owned(), dir.display().to_string()]);
        }
        let targets = [self.lib, self.tests, self.bins, self.examples, self.benches, self.all_targets];
        let selects_targets = targets.into_iter().any(|flag| flag)
            || !self.test_targets.is_empty()
            || !self.bin_targets.is_empty()
            || !self.example_targets.is_empty()
            || !self.bench_targets.is_empty();
        CargoArgs {
            args,
            manifest_path: self.manifest_path.clone(),
            target_dir: self.target_dir.clone(),
            lock_flags,
            selects_targets,
            selects_packages: !self.packages.is_empty(),
            target: self.target.clone(),
        }
    }
}

/// The figures `--gate` takes, by their keys.
fn figure_parser() -> impl clap::builder::TypedValueParser<Value = ying_report::Figure> {
    use clap::builder::TypedValueParser as _;
    let keys = ying_report::Figure::ALL.map(ying_report::Figure::key);
    clap::builder::PossibleValuesParser::new(keys).map(|key| {
        ying_report::Figure::ALL.into_iter().find(|figure| figure.key() == key).expect("one of the possible values")
    })
}

/// The exit code of a command line clap did not take: 0 for `--help` and `--version`, nextest's for a filterset
/// that does not parse, and the usage error's otherwise.
pub(crate) fn exit_code(error: &clap::Error) -> u8 {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let filterset = matches!(
        error.get(ContextKind::InvalidArg),
        Some(ContextValue::String(arg)) if arg.starts_with("--filterset")
    );
    match error.kind() {
        _ if !error.use_stderr() => exit_code::OK,
        ErrorKind::ValueValidation if filterset => exit_code::INVALID_FILTERSET,
        _ => exit_code::USAGE,
    }
}

/// The longest value an error about it repeats: a longer one (a generated filterset of 100,000 characters) is not
/// repeated, its error shows where it went wrong.
const REPEATED_MAX: usize = 200;

/// What clap's `error` says, as cargo ying says it: clap's words, but for a value too long to repeat
/// ([`REPEATED_MAX`]), which is named by its length.
pub(crate) fn message(error: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let (kind, arg, value) = (error.kind(), error.get(ContextKind::InvalidArg), error.get(ContextKind::InvalidValue));
    if let (ErrorKind::ValueValidation, Some(ContextValue::String(arg)), Some(ContextValue::String(value))) =
        (kind, arg, value)
    {
        let length = value.chars().count();
        if length > REPEATED_MAX {
            let why = std::error::Error::source(error).map(ToString::to_string).unwrap_or_default();
            return format!(
                "error: invalid value of {length} characters for '{arg}': {}\n\nFor more information, try '--help'.\n",
                why.trim_start_matches('\n')
            );
        }
    }
    error.render().to_string()
}

/// Parses `-j`: a count, `num-cpus`, or a negative count, with the machine's cores.
fn parse_test_threads(text: &str) -> Result<usize, String> {
    crate::config::test_threads(text, crate::config::cores())
}

/// Parses an `-E` filterset; the error shows where it went wrong.
fn parse_filterset(text: &str) -> Result<Filterset, String> {
    Filterset::parse(text).map_err(|error| format!("\n{error}"))
}

#[cfg(test)]
mod tests {
    use super::{Cargo, CargoCommand, Command};
    use clap::{CommandFactory, Parser};

    #[test]
    fn the_command_line_is_consistent() {
        Cargo::command().debug_assert();
    }

    #[test]
    fn the_version_names_the_program() {
        for args in [&["cargo", "ying", "--version"][..], &["cargo", "--version"]] {
            let error = Cargo::try_parse_from(args).unwrap_err();
            assert_eq!(error.kind(), clap::error::ErrorKind::DisplayVersion);
            assert_eq!(error.to_string(), concat!("cargo-ying ", env!("CARGO_PKG_VERSION"), "\n"), "{args:?}");
        }
    }

    /// `cargo ying test <args>`, parsed.
    fn test_args(args: &[&str]) -> super::TestArgs {
        let cli = Cargo::parse_from(["cargo", "ying", "test"].iter().chain(args));
        let CargoCommand::Ying(ying) = cli.command;
        let Command::Test(args) = ying.command else { panic!("parsed as test") };
        *args
    }

    #[test]
    fn cargo_options_pass_through() {
        let args = test_args(&["-p", "a", "--features", "x", "--release", "--test", "leaks", "box", "--", "--exact"]);
        assert_eq!(
            args.filter.cargo.to_args().args,
            ["--release", "--package", "a", "--test", "leaks", "--features", "x"].map(String::from)
        );
        assert_eq!(args.filter.filters, ["box"]);
        assert_eq!(args.filter.test_args, ["--exact"]);
        assert!(!args.filter.cargo.to_args().builds_default_targets(), "one package");
        let targets = test_args(&["--bins", "--examples", "--bin", "tool", "--target", "x86_64-unknown-linux-gnu"]);
        assert_eq!(
            targets.filter.cargo.to_args().args,
            ["--bins", "--examples", "--bin", "tool", "--target", "x86_64-unknown-linux-gnu"].map(String::from)
        );
        assert!(!targets.filter.cargo.to_args().builds_default_targets());
        let all = test_args(&["--all-targets", "--frozen", "--workspace"]);
        assert_eq!(all.filter.cargo.to_args().args, ["--workspace", "--all-targets", "--frozen"].map(String::from));
        assert!(test_args(&["--workspace", "--release"]).filter.cargo.to_args().builds_default_targets());
    }

    #[test]
    fn nextest_names_for_running_options() {
        let args = test_args(&["--test-threads", "3", "--nocapture", "--retries", "2", "--no-tests", "warn", "-q"]);
        assert_eq!(args.jobs, Some(3));
        assert!(args.no_capture && args.quiet);
        assert_eq!(args.retries, Some(2));
        assert_eq!(args.no_tests, Some(crate::config::NoTests::Warn));
        let sets = test_args(&["-E", "test(a)", "--filterset", "package(b) - kind(lib)"]);
        assert_eq!(
            sets.filter.filtersets.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["test(a)", "package(b) - kind(lib)"]
        );
        let error =
            Cargo::try_parse_from(["cargo", "ying", "test", "-E", "test(a) & tset(b)"]).unwrap_err().to_string();
        assert!(error.contains("unknown predicate `tset`") && error.contains("column 11"), "{error}");
        assert!(Cargo::try_parse_from(["cargo", "ying", "test", "-v", "-q"]).is_err(), "verbose and quiet conflict");
    }

    #[test]
    fn fail_fast_options_take_the_last_and_conflict_as_nextests_do() {
        let last = test_args(&["--no-fail-fast", "--fail-fast"]);
        assert!(last.fail_fast && !last.no_fail_fast);
        let last = test_args(&["--ff", "--nff"]);
        assert!(!last.fail_fast && last.no_fail_fast);
        assert_eq!(test_args(&["--max-fail=all"]).max_fail, Some(crate::config::MaxFail::Never));
        for args in [
            &["--fail-fast", "--max-fail", "2"][..],
            &["--max-fail=2", "--no-fail-fast"],
            &["--no-run", "--max-fail=2"],
            &["--no-run", "--fail-fast"],
            &["--no-fail-fast", "--no-run"],
        ] {
            let line = ["cargo", "ying", "test"].iter().chain(args);
            let error = Cargo::try_parse_from(line).unwrap_err();
            assert_eq!(error.kind(), clap::error::ErrorKind::ArgumentConflict, "{args:?}");
            assert_eq!(super::exit_code(&error), ying_report::exit_code::USAGE);
        }
    }

    #[test]
    fn test_threads_take_num_cpus_and_a_negative_count() {
        let cores = crate::config::cores();
        assert_eq!(test_args(&["-j", "num-cpus"]).jobs, Some(cores));
        assert_eq!(test_args(&["--test-threads", "-1"]).jobs, Some(cores.saturating_sub(1).max(1)));
        assert_eq!(test_args(&["--jobs=2"]).jobs, Some(2));
        assert!(Cargo::try_parse_from(["cargo", "ying", "test", "-j", "0"]).is_err());
    }

    #[test]
    fn a_filterset_that_does_not_parse_ends_with_nextests_exit_code() {
        let code = |args: &[&str]| super::exit_code(&Cargo::try_parse_from(args).unwrap_err());
        assert_eq!(code(&["cargo", "ying", "test", "-E", "test(a) &"]), ying_report::exit_code::INVALID_FILTERSET);
        assert_eq!(code(&["cargo", "ying", "list", "--filterset", "tset(a)"]), 94);
        assert_eq!(code(&["cargo", "ying", "test", "--jobs", "many"]), ying_report::exit_code::USAGE);
        assert_eq!(code(&["cargo", "ying", "test", "--help"]), ying_report::exit_code::OK);
    }

    #[test]
    fn a_long_filterset_that_does_not_parse_is_not_repeated_whole() {
        let long = format!("{}test(", "test(a) | ".repeat(10_000));
        let error = Cargo::try_parse_from(["cargo", "ying", "test", "-E", &long]).unwrap_err();
        let message = super::message(&error);
        let longest = message.lines().map(str::len).max().unwrap();
        assert!(longest < 200, "{longest}: {message}");
        assert!(
            message.starts_with(
                "error: invalid value of 100005 characters for '--filterset <EXPR>': more than 4096 operators"
            ),
            "{message}"
        );
        assert!(message.contains("  ^"), "where it went wrong is shown: {message}");
        // A short one is repeated, as clap says it.
        let short = Cargo::try_parse_from(["cargo", "ying", "test", "-E", "test(a) &"]).unwrap_err();
        assert!(super::message(&short).contains("invalid value 'test(a) &' for '--filterset <EXPR>'"));
    }

    /// The gate options of `cargo ying test <args>`, or clap's error.
    fn gating(args: &[&str]) -> Result<super::GateOptions, String> {
        let line = ["cargo", "ying", "test"].iter().chain(args);
        let cli = Cargo::try_parse_from(line).map_err(|error| error.to_string())?;
        let CargoCommand::Ying(ying) = cli.command;
        let Command::Test(args) = ying.command else { panic!("parsed as test") };
        Ok(args.gating)
    }

    #[test]
    fn min_growth_reads_the_one_size_grammar() {
        for &(text, expected) in ying_report::size::EXAMPLES {
            // `--min-growth=...`: a value like `-1 B` would otherwise be taken for a flag.
            match (gating(&[&format!("--min-growth={text}")]), expected) {
                (Ok(gating), Ok(bytes)) => assert_eq!(gating.min_growth.unwrap().bytes(), bytes, "{text:?}"),
                (Err(error), Err(part)) => assert!(error.contains(part), "{text:?}: {error}"),
                (got, expected) => panic!("{text:?}: got {got:?}, expected {expected:?}"),
            }
        }
    }

    #[test]
    fn gated_figures_and_growth_parse() {
        let options = gating(&["--gate", "peak,allocations", "--max-growth", "5%"]).unwrap();
        assert_eq!(options.gate, [ying_report::Figure::Peak, ying_report::Figure::Allocations]);
        assert_eq!(options.max_growth.unwrap().fraction(), 0.05);
        assert!(
            gating(&["--gate", "heap"])
                .unwrap_err()
                .contains("[possible values: retained, lost, held, peak, allocated, allocations, leaked-tasks, lingering-tasks, unclaimed-tasks]")
        );
    }
}
