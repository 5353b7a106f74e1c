//! `[workspace.metadata.ying]`: defaults for `cargo ying`, overridden by flags. Parsed once, key by key, into
//! typed values; an error names its key.

use crate::error::ConfigError;
use crate::gate::Growth;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;
use ying_report::{ByteSize, Figure};

/// The configuration table, typed.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Config {
    /// Tests run at once (`jobs`).
    pub jobs: Option<NonZeroUsize>,
    /// Per-test timeout (`timeout = "90s"`).
    pub timeout: Option<Duration>,
    /// Stop scheduling tests after the first failure (`fail-fast`).
    pub fail_fast: Option<bool>,
    /// The baseline file, relative to the workspace root (`baseline`).
    pub baseline: Option<PathBuf>,
    /// Tolerated relative growth (`max-growth = "10%"`).
    pub max_growth: Option<Growth>,
    /// Tolerated absolute growth (`min-growth = "1 KiB"`).
    pub min_growth: Option<ByteSize>,
    /// Tolerated growth of what statics and thread-locals hold (`held-growth = "512 B"`).
    pub held_growth: Option<ByteSize>,
    /// Figures gated besides retained bytes (`gate = ["peak", "allocations"]`).
    pub gate: Option<Vec<Figure>>,
    /// Reruns of a leak test that crossed the tolerance (`reruns = 2`).
    pub reruns: Option<u32>,
    /// Retries of a failing test (`retries = 2`).
    pub retries: Option<u32>,
    /// What a run with no test to run does (`no-tests = "warn"`).
    pub no_tests: Option<NoTests>,
    /// Which tests a run measures (`measure = "all"`).
    pub measure: Option<Measure>,
    /// Patterns of the function names whose retained memory is excused in every measured test, as the attribute's
    /// `allow` (`allow = ["tokio::signal::"]`).
    pub allow: Option<Vec<String>>,
    /// Async tasks a leak test may leave leaked, where its attribute writes no `max_leaked_tasks`
    /// (`max-leaked-tasks = 1`).
    pub max_leaked_tasks: Option<u64>,
    /// Async tasks a leak test may leave lingering, where its attribute writes no `max_lingering_tasks`
    /// (`max-lingering-tasks = 0`).
    pub max_lingering_tasks: Option<u64>,
}

/// `measure`, and `--measure`: which tests a run measures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Measure {
    /// The leak tests: those with `#[ying::leak_test]`
    #[default]
    LeakTests,
    /// Every test, through the allocation interposer
    All,
}

impl Measure {
    /// Which tests a run that measures so measured, as the baseline and summary.json record it.
    pub(crate) fn recorded(self) -> ying_report::Measured {
        match self {
            Self::LeakTests => ying_report::Measured::LeakTests,
            Self::All => ying_report::Measured::All,
        }
    }
}

/// `no-tests`, and `--no-tests`: what a run with no test to run does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum NoTests {
    /// Stop with exit code 4
    #[default]
    Fail,
    /// Say so, and exit 0
    Warn,
    /// Exit 0
    Pass,
}

/// `--max-fail`, `--fail-fast` and `--no-fail-fast`, and `fail-fast` (here and in a nextest profile): after how many
/// failed tests a run stops starting tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MaxFail {
    /// After this many (1: fail-fast).
    After {
        /// The failures.
        count: std::num::NonZeroUsize,
        /// The tests running then are stopped too (`N:immediate`), rather than left to finish (`N:wait`).
        immediate: bool,
    },
    /// Never: every test runs.
    Never,
}

impl MaxFail {
    /// Fail-fast: after the first failure, the tests running left to finish.
    pub(crate) const FIRST: Self = Self::After { count: std::num::NonZeroUsize::MIN, immediate: false };

    /// Parses `--max-fail`'s `N`, `N:wait`, `N:immediate` or `all`, as cargo-nextest writes it.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        if text.eq_ignore_ascii_case("all") {
            return Ok(Self::Never);
        }
        let (count, mode) = text.split_once(':').unwrap_or((text, "wait"));
        let immediate = Self::immediate(mode)?;
        let count: usize = count
            .parse()
            .map_err(|_| format!("`{text}` is not a number of failures; write N, N:wait, N:immediate or all"))?;
        std::num::NonZeroUsize::new(count)
            .map(|count| Self::After { count, immediate })
            .ok_or_else(|| "--max-fail 0 would stop before the first test; write 1 or more, or `all`".to_owned())
    }

    /// Whether the mode `wait` or `immediate` (nextest's `terminate`) stops the tests running.
    pub(crate) fn immediate(mode: &str) -> Result<bool, String> {
        match mode {
            "wait" => Ok(false),
            "immediate" => Ok(true),
            _ => Err(format!("`{mode}` is no mode of --max-fail; write wait or immediate")),
        }
    }

    /// The most failed tests a run takes before it stops starting tests; `None`: no limit.
    pub(crate) fn count(self) -> Option<usize> {
        match self {
            Self::After { count, .. } => Some(count.get()),
            Self::Never => None,
        }
    }

    /// Whether reaching the count stops the tests running too.
    pub(crate) fn stops_running(self) -> bool {
        matches!(self, Self::After { immediate: true, .. })
    }
}

/// The cores available to the tests: `-j`'s default, and what `num-cpus` and `-N` count from.
pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Parses `-j` and nextest's `test-threads` as nextest does: a count of tests at once, `num-cpus` (`cores`), or a
/// negative count (that many fewer than `cores`, and at least one).
pub(crate) fn test_threads(text: &str, cores: usize) -> Result<usize, String> {
    if text == "num-cpus" {
        return Ok(cores);
    }
    match text.parse::<isize>() {
        Ok(0) => Err("0 tests at once would run none; write 1 or more, num-cpus, or -N".to_owned()),
        Ok(fewer) if fewer < 0 => Ok(cores.saturating_sub(fewer.unsigned_abs()).max(1)),
        Ok(count) => Ok(count.unsigned_abs()),
        Err(_) => Err(format!("`{text}` is not a number of tests at once; write N, num-cpus or -N")),
    }
}

/// `--run-ignored`: which tests run, by their `#[ignore]`, as cargo-nextest's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum RunIgnored {
    /// The tests not marked #[ignore]
    #[default]
    Default,
    /// Only the tests marked #[ignore]
    #[value(alias = "ignored-only")]
    Only,
    /// Every test, #[ignore] or not
    All,
}

/// The keys, as written in the table.
const KEYS: &[&str] = &[
    "jobs",
    "timeout",
    "fail-fast",
    "retries",
    "no-tests",
    "measure",
    "baseline",
    "max-growth",
    "min-growth",
    "held-growth",
    "gate",
    "reruns",
    "allow",
    "max-leaked-tasks",
    "max-lingering-tasks",
];

impl Config {
    /// Reads the `ying` table of the workspace metadata (none: the defaults).
    pub(crate) fn from_metadata(metadata: &serde_json::Value) -> Result<Self, ConfigError> {
        let table = match metadata.get("ying") {
            None | Some(serde_json::Value::Null) => return Ok(Self::default()),
            Some(serde_json::Value::Object(table)) => table,
            Some(other) => {
                let message = format!("expected a table of settings, found {}", describe(other));
                return Err(ConfigError { key: None, message });
            }
        };
        let mut config = Self::default();
        for (key, value) in table {
            let error = |message: String| ConfigError { key: Some(key.clone()), message };
            match key.as_str() {
                "jobs" => config.jobs = Some(jobs(value).map_err(error)?),
                "timeout" => config.timeout = Some(timeout(value).map_err(error)?),
                "fail-fast" => {
                    let fail_fast = value.as_bool().ok_or_else(|| expected("true or false", value));
                    config.fail_fast = Some(fail_fast.map_err(error)?);
                }
                "baseline" => {
                    let path = value.as_str().filter(|path| !path.is_empty());
                    let path = path.ok_or_else(|| expected("a path relative to the workspace root", value));
                    config.baseline = Some(PathBuf::from(path.map_err(error)?));
                }
                "max-growth" => config.max_growth = Some(max_growth(value).map_err(error)?),
                "min-growth" => {
                    let size = serde_json::from_value::<ByteSize>(value.clone()).map_err(|why| why.to_string());
                    config.min_growth = Some(size.map_err(error)?);
                }
                "held-growth" => {
                    let size = serde_json::from_value::<ByteSize>(value.clone()).map_err(|why| why.to_string());
                    config.held_growth = Some(size.map_err(error)?);
                }
                "gate" => config.gate = Some(gate(value).map_err(error)?),
                "reruns" => config.reruns = Some(count(value, "reruns").map_err(error)?),
                "retries" => config.retries = Some(count(value, "retries").map_err(error)?),
                "no-tests" => {
                    config.no_tests = Some(choice(value, "\"fail\", \"warn\" or \"pass\"").map_err(error)?);
                }
                "measure" => config.measure = Some(choice(value, "\"all\" or \"leak-tests\"").map_err(error)?),
                "allow" => config.allow = Some(allow(value).map_err(error)?),
                "max-leaked-tasks" => config.max_leaked_tasks = Some(tasks(value).map_err(error)?),
                "max-lingering-tasks" => config.max_lingering_tasks = Some(tasks(value).map_err(error)?),
                unknown => {
                    return Err(ConfigError { key: None, message: unknown_key(unknown) });
                }
            }
        }
        Ok(config)
    }

    /// The workspace's budgets of async tasks as every test process is passed them
    /// ([`TASK_BUDGETS_ENV`](ying_report::report::TASK_BUDGETS_ENV)): `None` when neither is written.
    pub(crate) fn task_budgets_value(&self) -> Option<String> {
        let budgets: Vec<String> = [("leaked", self.max_leaked_tasks), ("lingering", self.max_lingering_tasks)]
            .into_iter()
            .filter_map(|(kind, count)| Some(format!("{kind}={}", count?)))
            .collect();
        (!budgets.is_empty()).then(|| budgets.join(","))
    }
}

fn describe(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(text) => format!("the string {text:?}"),
        serde_json::Value::Array(_) => "a list".to_owned(),
        serde_json::Value::Object(_) => "a table".to_owned(),
        other => other.to_string(),
    }
}

fn expected(what: &str, value: &serde_json::Value) -> String {
    format!("expected {what}, found {}", describe(value))
}

/// `allow`: a list of patterns, in the grammar of the attribute's `allow` (non-empty strings, each a part of the
/// function names to excuse).
fn allow(value: &serde_json::Value) -> Result<Vec<String>, String> {
    let serde_json::Value::Array(items) = value else {
        return Err(expected("a list of patterns, like [\"regex::\", \"my_crate::interner\"]", value));
    };
    items
        .iter()
        .enumerate()
        .map(|(index, item)| match item.as_str() {
            Some("") => Err(format!("pattern {} is empty, which would excuse everything", index + 1)),
            Some(pattern) => match ying_report::excuses_every_test(pattern) {
                Some(why) => Err(format!("pattern {}: {why}", index + 1)),
                None => Ok(pattern.to_owned()),
            },
            None => Err(format!(
                "pattern {}: expected a string, a part of the function names to excuse like \"regex::\", found {}",
                index + 1,
                describe(item)
            )),
        })
        .collect()
}

fn jobs(value: &serde_json::Value) -> Result<NonZeroUsize, String> {
    value
        .as_u64()
        .and_then(|jobs| usize::try_from(jobs).ok())
        .and_then(NonZeroUsize::new)
        .ok_or_else(|| expected("a whole number of tests to run at once, 1 or more", value))
}

/// `max-leaked-tasks`, `max-lingering-tasks`: a whole number of tasks, 0 or more.
fn tasks(value: &serde_json::Value) -> Result<u64, String> {
    value.as_u64().ok_or_else(|| expected("a whole number of tasks, 0 or more", value))
}

/// A whole number of `what` (reruns, retries), 0 or more.
fn count(value: &serde_json::Value, what: &str) -> Result<u32, String> {
    value
        .as_u64()
        .and_then(|count| u32::try_from(count).ok())
        .ok_or_else(|| expected(&format!("a whole number of {what} from 0 to {}", u32::MAX), value))
}

/// One of the values of the flag `T` stands for, written as on the command line; `names` lists them for the error.
fn choice<T: clap::ValueEnum>(value: &serde_json::Value, names: &str) -> Result<T, String> {
    let fail = || expected(names, value);
    let text = value.as_str().ok_or_else(fail)?;
    T::from_str(text, false).map_err(|_| fail())
}

fn timeout(value: &serde_json::Value) -> Result<Duration, String> {
    match value {
        serde_json::Value::String(text) => parse_duration(text),
        // Written out in full (`1e30` would read as 1 with the unit `e30`).
        serde_json::Value::Number(seconds) => match seconds.as_f64() {
            Some(seconds) if seconds.is_finite() => parse_duration(&format!("{seconds}")),
            _ => Err(expected("a duration like \"90s\" or \"5m\"", value)),
        },
        other => Err(expected("a duration like \"90s\" or \"5m\"", other)),
    }
}

/// Parses a duration as the configuration, the command line and nextest's profiles write it: humantime's grammar
/// (`90s`, `5m`, `500ms`, `1h`, `1m 30s`, `1m30s`), or a plain number of seconds (`2`, `2.5`).
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let duration = match text.parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && seconds > 0.0 => {
            Duration::try_from_secs_f64(seconds).map_err(|_| format!("`{text}` is too long a duration"))?
        }
        Ok(_) => return Err(format!("`{text}` is not a positive duration")),
        Err(_) => humantime::parse_duration(text).map_err(|error| match error {
            humantime::DurationError::NumberOverflow => format!("`{text}` is too long a duration"),
            error => format!("`{text}` is not a duration ({error}); write e.g. 90s, 1m 30s or 500ms"),
        })?,
    };
    if duration.is_zero() {
        return Err(format!("`{text}` is not a positive duration"));
    }
    Ok(duration)
}

fn max_growth(value: &serde_json::Value) -> Result<Growth, String> {
    match value {
        serde_json::Value::String(text) => text.parse(),
        serde_json::Value::Number(fraction) => fraction.to_string().parse(),
        other => Err(expected("a percentage like \"10%\"", other)),
    }
}

fn gate(value: &serde_json::Value) -> Result<Vec<Figure>, String> {
    let names = value.as_array().ok_or_else(|| expected("a list of figures, like [\"peak\"]", value))?;
    names
        .iter()
        .map(|name| {
            let known = name.as_str().and_then(|name| Figure::ALL.into_iter().find(|figure| figure.key() == name));
            known.ok_or_else(|| {
                let keys: Vec<&str> = Figure::ALL.iter().map(|figure| figure.key()).collect();
                format!("{} is not a figure; use {}", describe(name), keys.join(", "))
            })
        })
        .collect()
}

fn unknown_key(key: &str) -> String {
    let hint = ying_report::closest_key(key, KEYS).map_or_else(String::new, |name| format!("did you mean `{name}`? "));
    format!("unknown field `{key}`; {hint}expected one of: {}", KEYS.join(", "))
}

#[cfg(test)]
mod tests {
    use super::{Config, parse_duration};
    use serde_json::json;
    use std::time::Duration;
    use ying_report::Figure;

    fn config(table: serde_json::Value) -> Result<Config, String> {
        Config::from_metadata(&json!({ "ying": table })).map_err(|error| error.to_string())
    }

    #[test]
    fn reads_every_key_into_its_type() {
        let read = config(json!({
            "jobs": 3, "timeout": "90s", "fail-fast": false, "baseline": "mem.json",
            "max-growth": "5%", "min-growth": "4 KiB", "held-growth": "300 B", "gate": ["peak", "allocations"],
            "reruns": 4
        }))
        .unwrap();
        assert_eq!(read.reruns, Some(4));
        assert_eq!(config(json!({"retries": 3, "no-tests": "warn"})).unwrap().retries, Some(3));
        assert_eq!(config(json!({"measure": "all"})).unwrap().measure, Some(super::Measure::All));
        assert_eq!(
            config(json!({"measure": "everything"})).unwrap_err().to_string(),
            "`measure`: expected \"all\" or \"leak-tests\", found the string \"everything\""
        );
        assert_eq!(config(json!({"no-tests": "warn"})).unwrap().no_tests, Some(super::NoTests::Warn));
        assert_eq!(
            config(json!({"no-tests": "never"})).unwrap_err().to_string(),
            "`no-tests`: expected \"fail\", \"warn\" or \"pass\", found the string \"never\""
        );
        assert!(config(json!({"retries": "two"})).unwrap_err().to_string().contains("a whole number of retries"));
        assert_eq!(read.jobs.map(usize::from), Some(3));
        assert_eq!(read.timeout, Some(Duration::from_secs(90)));
        assert_eq!(read.fail_fast, Some(false));
        assert_eq!(read.baseline.as_deref(), Some(std::path::Path::new("mem.json")));
        assert_eq!(read.max_growth.map(|growth| growth.fraction()), Some(0.05));
        assert_eq!(read.min_growth.map(|size| size.bytes()), Some(4096));
        assert_eq!(read.held_growth.map(|size| size.bytes()), Some(300));
        assert_eq!(read.gate, Some(vec![Figure::Peak, Figure::Allocations]));
        assert_eq!(Config::from_metadata(&json!(null)).unwrap(), Config::default());
        assert_eq!(config(json!({"timeout": 30})).unwrap().timeout, Some(Duration::from_secs(30)));
    }

    #[test]
    fn task_budgets_are_counts_passed_on_as_one_value() {
        let both = config(json!({"max-leaked-tasks": 1, "max-lingering-tasks": 0})).unwrap();
        assert_eq!((both.max_leaked_tasks, both.max_lingering_tasks), (Some(1), Some(0)));
        assert_eq!(both.task_budgets_value().as_deref(), Some("leaked=1,lingering=0"));
        let parsed = ying_report::report::parse_task_budgets(&both.task_budgets_value().unwrap());
        assert_eq!(parsed, Ok((Some(1), Some(0))));
        let lingering = config(json!({"max-lingering-tasks": 3})).unwrap();
        assert_eq!(lingering.task_budgets_value().as_deref(), Some("lingering=3"));
        assert_eq!(config(json!({})).unwrap().task_budgets_value(), None);
        assert_eq!(
            config(json!({"max-leaked-tasks": "1"})).unwrap_err(),
            "`max-leaked-tasks`: expected a whole number of tasks, 0 or more, found the string \"1\""
        );
    }

    #[test]
    fn allow_takes_the_attributes_patterns_and_refuses_what_it_refuses() {
        let read = config(json!({"allow": ["tokio::signal::", "my_crate::interner"]})).unwrap();
        assert_eq!(read.allow, Some(vec!["tokio::signal::".to_owned(), "my_crate::interner".to_owned()]));
        assert_eq!(
            config(json!({"allow": "tokio::"})).unwrap_err(),
            "`allow`: expected a list of patterns, like [\"regex::\", \"my_crate::interner\"], found the string \
             \"tokio::\""
        );
        assert_eq!(
            config(json!({"allow": ["regex::", "::"]})).unwrap_err(),
            format!("`allow`: pattern 2: {}", ying_report::excuses_every_test("::").unwrap())
        );
        assert_eq!(
            config(json!({"allow": ["regex::", ""]})).unwrap_err(),
            "`allow`: pattern 2 is empty, which would excuse everything"
        );
        assert_eq!(
            config(json!({"allow": [3]})).unwrap_err(),
            "`allow`: pattern 1: expected a string, a part of the function names to excuse like \"regex::\", found 3"
        );
    }

    #[test]
    fn max_fail_takes_nextests_forms() {
        use super::MaxFail;
        let after = |count, immediate| MaxFail::After { count: std::num::NonZeroUsize::new(count).unwrap(), immediate };
        assert_eq!(MaxFail::parse("3"), Ok(after(3, false)));
        assert_eq!(MaxFail::parse("3:wait"), Ok(after(3, false)));
        assert_eq!(MaxFail::parse("1:immediate"), Ok(after(1, true)));
        assert!(MaxFail::parse("1:immediate").unwrap().stops_running() && !MaxFail::FIRST.stops_running());
        assert_eq!(MaxFail::parse("all"), Ok(MaxFail::Never));
        assert_eq!(MaxFail::parse("ALL"), Ok(MaxFail::Never), "as nextest, in any case");
        assert_eq!(MaxFail::FIRST.count(), Some(1));
        assert_eq!(MaxFail::Never.count(), None);
        assert!(MaxFail::parse("0").unwrap_err().contains("before the first test"));
        assert!(MaxFail::parse("-1").unwrap_err().contains("not a number of failures"));
        assert!(MaxFail::parse("2:never").unwrap_err().contains("`never` is no mode"));
    }

    #[test]
    fn test_threads_are_a_count_num_cpus_or_fewer_than_the_cores() {
        use super::test_threads;
        assert_eq!(test_threads("3", 8), Ok(3));
        assert_eq!(test_threads("num-cpus", 8), Ok(8));
        assert_eq!(test_threads("-2", 8), Ok(6));
        assert_eq!(test_threads("-20", 8), Ok(1), "at least one");
        assert!(test_threads("0", 8).unwrap_err().contains("would run none"));
        assert!(test_threads("many", 8).unwrap_err().contains("`many` is not a number"));
    }

    #[test]
    fn durations_with_units() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("2.5"), Ok(Duration::from_millis(2500)));
        // nextest's own forms.
        assert_eq!(parse_duration("1m 30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("5min"), Ok(Duration::from_secs(300)));
        assert!(parse_duration("soon").unwrap_err().contains("`soon` is not a duration"));
        let unknown = parse_duration("3 fortnights").unwrap_err();
        assert!(unknown.contains("is not a duration") && unknown.contains("fortnights"), "{unknown}");
        assert!(parse_duration("0").unwrap_err().contains("not a positive duration"));
        assert!(parse_duration("0s").unwrap_err().contains("not a positive duration"));
        assert!(parse_duration("-5").unwrap_err().contains("not a positive duration"));
        assert!(parse_duration("99999999999999999999h").unwrap_err().contains("too long"));
        assert!(parse_duration("1e300").unwrap_err().contains("too long"));
    }

    #[test]
    fn errors_name_the_key_and_what_it_takes() {
        assert_eq!(
            config(json!({"jobs": "four"})).unwrap_err(),
            "`jobs`: expected a whole number of tests to run at once, 1 or more, found the string \"four\""
        );
        assert!(config(json!({"jobs": 0})).unwrap_err().starts_with("`jobs`: expected"));
        assert_eq!(
            config(json!({"reruns": -1})).unwrap_err(),
            "`reruns`: expected a whole number of reruns from 0 to 4294967295, found -1"
        );
        // Too large for its type: the key, the value and the limit.
        assert_eq!(
            config(json!({"retries": 5_000_000_000u64})).unwrap_err(),
            "`retries`: expected a whole number of retries from 0 to 4294967295, found 5000000000"
        );
        assert_eq!(
            config(json!({"timeout": "99999999999999999999h"})).unwrap_err(),
            "`timeout`: `99999999999999999999h` is too long a duration"
        );
        assert_eq!(
            config(json!({"timeout": 1e30})).unwrap_err(),
            "`timeout`: `1000000000000000000000000000000` is too long a duration"
        );
        let unknown = config(json!({"jbos": 3})).unwrap_err();
        assert!(unknown.starts_with("unknown field `jbos`; did you mean `jobs`?"), "{unknown}");
        assert!(config(json!({"timeout": "soon"})).unwrap_err().starts_with("`timeout`: `soon` is not a duration"));
        assert!(config(json!({"min-growth": "-1 B"})).unwrap_err().starts_with("`min-growth`: `-1 B` is negative"));
        assert!(
            config(json!({"max-growth": "lots"})).unwrap_err().starts_with("`max-growth`: `lots` is not a percentage")
        );
        assert!(
            config(json!({"gate": ["heap"]}))
                .unwrap_err()
                .contains("the string \"heap\" is not a figure; use retained")
        );
        assert!(config(json!({"fail-fast": "no"})).unwrap_err().starts_with("`fail-fast`: expected true or false"));
        assert!(Config::from_metadata(&json!({"ying": 3})).unwrap_err().to_string().contains("expected a table"));
    }

    #[test]
    fn min_growth_reads_the_one_size_grammar() {
        for &(text, expected) in ying_report::size::EXAMPLES {
            match (config(json!({ "min-growth": text })), expected) {
                (Ok(read), Ok(bytes)) => assert_eq!(read.min_growth.unwrap().bytes(), bytes, "{text:?}"),
                (Err(error), Err(part)) => assert!(error.contains(part), "{text:?}: {error}"),
                (got, expected) => panic!("{text:?}: got {got:?}, expected {expected:?}"),
            }
        }
        // A whole number of bytes, as TOML writes an integer.
        assert_eq!(config(json!({"min-growth": 4096})).unwrap().min_growth.unwrap().bytes(), 4096);
    }
}
