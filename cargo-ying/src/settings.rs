//! What a command runs with, resolved once: each setting from its flag, else from `[workspace.metadata.ying]`,
//! else its default. This is where the command line ends: the rest of cargo ying takes these values, never clap's
//! structs.

use crate::cli::{GateOptions, TestArgs, TestFilter};
use crate::config::{Config, MaxFail, Measure, NoTests};
use crate::error::{Error, NextestProfileError, Result};
use crate::gate::{Gating, Tolerance};
use crate::nextest::config::Profile;
use crate::outputs::libtest_json::MessageFormat;
use crate::outputs::terminal;
use crate::run::select::build::CargoArgs;
use crate::run::select::discover::Selection;
use crate::run::select::plan::Request;
use crate::workspace::Workspace;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The timeout when neither `--timeout` nor the configuration sets one: generous, for slow debug builds.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// The settings of `cargo ying test`.
#[derive(Debug)]
pub(crate) struct Settings {
    /// Which tests.
    pub request: Request,
    /// `<target-dir>/ying`, where the run's files go.
    pub out_dir: PathBuf,
    /// The baseline file.
    pub baseline: PathBuf,
    /// Write this run's figures into the baseline.
    pub save_baseline: bool,
    /// How the gate judges.
    pub gating: Gating,
    /// New and missing tests fail the gate too.
    pub check: bool,
    /// Which tests are measured.
    pub measure: Measure,
    /// Patterns of the function names whose retained memory is excused in every measured test (`allow`).
    pub allow: Vec<String>,
    /// The workspace's budgets of async tasks, as every test process is passed them (`max-leaked-tasks`,
    /// `max-lingering-tasks`).
    pub task_budgets: Option<String>,
    /// What a run with no test to run does.
    pub no_tests: NoTests,
    /// Tests run at once (1 when they print straight to the terminal).
    pub jobs: usize,
    /// Longest a test may run.
    pub timeout: Duration,
    /// Stop starting tests after this many failures (1: fail-fast); `None`: never.
    pub max_fail: Option<usize>,
    /// Reaching `max_fail` stops the tests running too (`N:immediate`).
    pub stop_running: bool,
    /// Build, and run no test.
    pub no_run: bool,
    /// Runs of a failing test after its first.
    pub retries: u32,
    /// Tests print straight to the terminal.
    pub no_capture: bool,
    /// Color the output.
    pub color: bool,
    /// No line for a test that passed, no build progress.
    pub quiet: bool,
    /// Cargo's build commands and each test's command line.
    pub verbose: bool,
    /// Where to write JUnit XML, if anywhere.
    pub junit: Option<PathBuf>,
    /// How the run's events are written on standard output.
    pub message_format: MessageFormat,
    /// What was asked for that the run does not do, said before it starts (`ignoring --retries because --no-run
    /// is specified`), as nextest says it.
    pub warnings: Vec<String>,
}

impl Settings {
    /// The settings of `cargo ying test` run with `args` in `workspace`; `cargo`: what `args` ask cargo for
    /// (`CargoOptions::to_args`), which opened the workspace.
    pub(crate) fn resolve(args: &TestArgs, cargo: CargoArgs, workspace: &Workspace) -> Result<Self> {
        let config = &workspace.place.config;
        let request = request(&args.filter, cargo)?;
        let cores = crate::config::cores();
        let profile = match &args.profile {
            Some(name) => nextest_profile(workspace.root(), name, cores)?,
            None => Profile::default(),
        };
        let selection = &request.selection;
        // Output straight to the terminal is readable one test at a time, as under cargo-nextest.
        let no_capture = args.no_capture || selection.no_capture;
        let jobs = if no_capture {
            Some(1)
        } else {
            args.jobs.or(selection.test_threads).or(profile.test_threads).or(config.jobs.map(usize::from))
        }
        .unwrap_or(cores)
        .max(1);
        Ok(Self {
            out_dir: workspace.out_dir(request.cargo.target_dir.as_deref()),
            baseline: workspace.baseline_path(args.saving.baseline.as_deref()),
            save_baseline: args.saving.save_baseline,
            gating: gating(&args.gating, config),
            check: args.gating.check,
            measure: args.measure.or(config.measure).unwrap_or_default(),
            allow: config.allow.clone().unwrap_or_default(),
            task_budgets: config.task_budgets_value(),
            no_tests: args.no_tests.or(config.no_tests).unwrap_or_default(),
            jobs,
            timeout: args.timeout.or(profile.timeout).or(config.timeout).unwrap_or(DEFAULT_TIMEOUT),
            max_fail: max_fail(args, profile.max_fail, config).count(),
            stop_running: max_fail(args, profile.max_fail, config).stops_running(),
            no_run: args.no_run,
            retries: args.retries.or(profile.retries).or(config.retries).unwrap_or(0),
            no_capture,
            color: terminal::use_color(args.report.color),
            quiet: args.quiet,
            verbose: args.verbose,
            // As nextest writes its profile's JUnit file: under the profile's directory of the target directory.
            junit: args.report.junit.clone().or_else(|| {
                let (name, path) = (args.profile.as_deref()?, profile.junit.as_deref()?);
                let target = request.cargo.target_dir.as_deref().unwrap_or(&workspace.place.target_directory);
                Some(target.join("nextest").join(name).join(path))
            }),
            message_format: args.message_format,
            warnings: ignored(args, no_capture),
            request,
        })
    }

    /// Cargo's `--quiet` or `--verbose`, for the builds.
    pub(crate) fn verbosity(&self) -> Option<&'static str> {
        if self.quiet {
            Some("--quiet")
        } else if self.verbose {
            Some("--verbose")
        } else {
            None
        }
    }
}

/// The options given that the run will not use, each as a warning: what `--no-run` does not do (nextest warns of
/// `--test-threads`, `--retries` and `--no-tests`; the options of cargo ying's own that only a run uses likewise),
/// and `-j` beside `--no-capture`, which runs one test at a time.
fn ignored(args: &TestArgs, no_capture: bool) -> Vec<String> {
    let because = if args.no_run {
        "--no-run is specified"
    } else if no_capture {
        "--no-capture is specified"
    } else {
        return Vec::new();
    };
    let mut given = vec![("--test-threads", args.jobs.is_some())];
    if args.no_run {
        given.extend([
            ("--retries", args.retries.is_some()),
            ("--no-tests", args.no_tests.is_some()),
            ("--timeout", args.timeout.is_some()),
            ("--save-baseline", args.saving.save_baseline),
            ("--junit", args.report.junit.is_some()),
        ]);
    }
    given
        .into_iter()
        .filter(|(_, given)| *given)
        .map(|(flag, _)| format!("ignoring {flag} because {because}"))
        .collect()
}

/// After how many failures a run stops starting tests: the flags (the last of `--fail-fast`, `--no-fail-fast` and
/// `--max-fail` given), else the nextest profile's, else the configuration's `fail-fast`, else fail-fast.
fn max_fail(args: &TestArgs, profile: Option<MaxFail>, config: &Config) -> MaxFail {
    if let Some(max_fail) = args.max_fail {
        max_fail
    } else if args.no_fail_fast {
        MaxFail::Never
    } else if args.fail_fast {
        MaxFail::FIRST
    } else if let Some(max_fail) = profile {
        max_fail
    } else if config.fail_fast.unwrap_or(true) {
        MaxFail::FIRST
    } else {
        MaxFail::Never
    }
}

/// The nextest profile `name` of the workspace's `.config/nextest.toml` (a file that is not there has only the
/// default profile, with nothing set).
fn nextest_profile(root: &Path, name: &str, cores: usize) -> Result<Profile> {
    let path = root.join(".config").join("nextest.toml");
    let error = |source| Error::NextestProfile { path: path.clone(), profile: name.to_owned(), source };
    let text = match ying_report::read_text(&path).map_err(std::io::Error::from) {
        Ok(text) => text,
        Err(why) if why.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(why) => return Err(error(NextestProfileError::Io(why))),
    };
    crate::nextest::config::profile(&text, name, cores).map_err(error)
}

/// Which tests `filter` asks for, built by `cargo` (`filter.cargo`, converted); the arguments after `--` must be a
/// test harness's.
pub(crate) fn request(filter: &TestFilter, cargo: CargoArgs) -> Result<Request> {
    Ok(Request {
        cargo,
        selection: Selection::new(&filter.filters, &filter.filtersets, &filter.test_args)?
            .running_ignored(filter.run_ignored),
        partition: filter.partition,
    })
}

/// Refuses `--reruns` for `command`, which runs no test (`gate`, `merge`, `diff`): given, it would do nothing.
pub(crate) fn refuse_reruns(flags: &GateOptions, command: &'static str) -> Result<()> {
    match flags.reruns {
        Some(_) => Err(Error::RerunsWithoutRunning(command)),
        None => Ok(()),
    }
}

/// How the gate judges: the flags first, then the configuration, then the defaults.
pub(crate) fn gating(flags: &GateOptions, config: &Config) -> Gating {
    let defaults = Tolerance::default();
    let tolerance = Tolerance {
        relative: flags.max_growth.or(config.max_growth).unwrap_or(defaults.relative),
        absolute: flags.min_growth.or(config.min_growth).unwrap_or(defaults.absolute),
        held: flags.held_growth.or(config.held_growth).unwrap_or(defaults.held),
    };
    let also = if flags.gate.is_empty() { config.gate.clone().unwrap_or_default() } else { flags.gate.clone() };
    let mut gating = Gating::new(tolerance, &also);
    gating.reruns = flags.reruns.or(config.reruns).unwrap_or(gating.reruns);
    gating
}

#[cfg(test)]
mod tests {
    use super::{gating, ignored, max_fail};
    use crate::cli::{Cargo, CargoCommand, Command, GateOptions, TestArgs};
    use crate::config::{Config, MaxFail};
    use crate::gate::{Gating, Tolerance};
    use clap::Parser as _;
    use ying_report::{ByteSize, Figure};

    /// `cargo ying test <args>`, parsed.
    fn test_args(args: &[&str]) -> TestArgs {
        let CargoCommand::Ying(ying) = Cargo::parse_from(["cargo", "ying", "test"].iter().chain(args)).command;
        let Command::Test(args) = ying.command else { panic!("parsed as test") };
        *args
    }

    #[test]
    fn fail_fast_is_the_flags_then_the_profiles_then_the_configurations_then_the_first_failure() {
        let two = MaxFail::parse("2").unwrap();
        let config = Config { fail_fast: Some(false), ..Config::default() };
        assert_eq!(max_fail(&test_args(&[]), None, &Config::default()), MaxFail::FIRST);
        assert_eq!(max_fail(&test_args(&[]), None, &config), MaxFail::Never);
        assert_eq!(max_fail(&test_args(&[]), Some(two), &config), two, "the profile over the configuration");
        assert_eq!(max_fail(&test_args(&["--ff"]), Some(two), &config), MaxFail::FIRST, "a flag over both");
        assert_eq!(max_fail(&test_args(&["--max-fail", "all"]), Some(two), &Config::default()), MaxFail::Never);
        assert_eq!(max_fail(&test_args(&["--nff"]), Some(MaxFail::FIRST), &Config::default()), MaxFail::Never);
    }

    #[test]
    fn what_no_run_and_no_capture_leave_unused_is_named_as_nextest_names_it() {
        assert_eq!(
            ignored(&test_args(&["--no-run", "--retries", "2", "-j", "3", "--save-baseline"]), false),
            [
                "ignoring --test-threads because --no-run is specified",
                "ignoring --retries because --no-run is specified",
                "ignoring --save-baseline because --no-run is specified"
            ]
        );
        assert_eq!(
            ignored(&test_args(&["-j", "3"]), true),
            ["ignoring --test-threads because --no-capture is specified"]
        );
        assert!(ignored(&test_args(&["-j", "3", "--retries", "1"]), false).is_empty());
    }

    #[test]
    fn the_gate_takes_each_flag_before_the_configuration_and_the_configuration_before_the_default() {
        let config = Config {
            reruns: Some(4),
            min_growth: Some(ByteSize::new(4096)),
            gate: Some(vec![Figure::Peak]),
            ..Config::default()
        };
        let expected = |absolute: u64, also: Figure, reruns: u32| {
            let tolerance = Tolerance { absolute: ByteSize::new(absolute), ..Tolerance::default() };
            let mut gating = Gating::new(tolerance, &[also]);
            gating.reruns = reruns;
            gating
        };
        assert_eq!(gating(&GateOptions::default(), &config), expected(4096, Figure::Peak, 4));
        assert_eq!(gating(&GateOptions::default(), &Config::default()), expected(1024, Figure::Retained, 2));
        let flags = GateOptions { reruns: Some(0), gate: vec![Figure::Allocations], ..GateOptions::default() };
        assert_eq!(gating(&flags, &config), expected(4096, Figure::Allocations, 0));
    }
}
