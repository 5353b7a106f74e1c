//! `cargo ying test -P NAME`: the nextest profile `NAME` of `.config/nextest.toml`, read for what cargo ying has an
//! equivalent of. A profile inherits from the one its `inherits` names, else from `default`, as nextest's do; a key
//! none of them sets is left to cargo ying's own configuration and defaults. The rest of the file (overrides,
//! scripts, test groups, ...) is nextest's alone and is not read.
//!
//! | nextest | cargo ying |
//! |---|---|
//! | `retries = N`, `retries = { count = N, ... }` | `--retries N` |
//! | `slow-timeout = { period = "60s", terminate-after = N }` | `--timeout` of `period` × `N` (without `terminate-after`, nextest only warns: no timeout) |
//! | `test-threads = N`, `"num-cpus"`, `-N` (that many fewer than the cores) | `-j` |
//! | `fail-fast = true`, `false`, `{ max-fail = N, terminate = "wait" \| "immediate" }`, `{ max-fail = "all" }` | `--fail-fast`, `--no-fail-fast`, `--max-fail N[:MODE]` |
//! | `junit = { path = "junit.xml" }` | `--junit <target-dir>/nextest/<profile>/junit.xml` |

use crate::config::MaxFail;
use crate::error::NextestProfileError;
use std::time::Duration;

/// The profiles nextest has of its own, with nothing cargo ying takes set in them beyond `default`'s.
const BUILT_IN: [&str; 2] = ["default", "default-miri"];

/// What a nextest profile sets that cargo ying takes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Profile {
    /// Runs of a failing test after its first.
    pub retries: Option<u32>,
    /// Longest a test may run.
    pub timeout: Option<Duration>,
    /// Tests at once.
    pub test_threads: Option<usize>,
    /// After how many failures the run stops starting tests.
    pub max_fail: Option<MaxFail>,
    /// Where the JUnit file goes, relative to the profile's directory under the target directory
    /// (`<target-dir>/nextest/<profile>/`), as nextest writes it (`junit = { path = "junit.xml" }`).
    pub junit: Option<std::path::PathBuf>,
}

/// Reads profile `name` from the text of `.config/nextest.toml`. `cores`: the machine's, for `test-threads` given
/// relative to them.
pub(crate) fn profile(text: &str, name: &str, cores: usize) -> Result<Profile, NextestProfileError> {
    let file: toml::Table = text
        .parse()
        .map_err(|error: toml::de::Error| NextestProfileError::Toml(error.to_string().trim_end().to_owned()))?;
    let profiles = file.get("profile").and_then(toml::Value::as_table);
    let lookup = |name: &str| profiles.and_then(|profiles| profiles.get(name)).and_then(toml::Value::as_table);
    // The chain from `name` to `default`, nearest first.
    let mut chain = Vec::new();
    let mut next = Some(name.to_owned());
    while let Some(current) = next.take() {
        if chain.iter().any(|(seen, _): &(String, _)| *seen == current) {
            return Err(NextestProfileError::Cycle(current));
        }
        let table = match lookup(&current) {
            Some(table) => Some(table),
            // nextest's own profiles are there whether or not the file names them.
            None if BUILT_IN.contains(&current.as_str()) => None,
            None => {
                let mut known: Vec<String> = BUILT_IN.iter().map(|name| (*name).to_owned()).collect();
                known.extend(profiles.into_iter().flat_map(|profiles| profiles.keys().cloned()));
                known.sort();
                known.dedup();
                return Err(NextestProfileError::Unknown { name: current, known });
            }
        };
        next = match table.and_then(|table| table.get("inherits")).and_then(toml::Value::as_str) {
            Some(parent) => Some(parent.to_owned()),
            None if current != "default" => Some("default".to_owned()),
            None => None,
        };
        chain.push((current, table));
    }
    let mut profile = Profile::default();
    for (name, table) in chain.iter().rev() {
        let Some(table) = table else { continue };
        let invalid =
            |key: &str, message: String| NextestProfileError::Value { key: format!("profile.{name}.{key}"), message };
        if let Some(value) = table.get("retries") {
            let count = value.as_integer().or_else(|| value.get("count").and_then(toml::Value::as_integer));
            let count = count.and_then(|count| u32::try_from(count).ok());
            profile.retries =
                Some(count.ok_or_else(|| invalid("retries", format!("expected a count, found {value}")))?);
        }
        if let Some(value) = table.get("slow-timeout") {
            profile.timeout = slow_timeout(value).map_err(|message| invalid("slow-timeout", message))?;
        }
        if let Some(value) = table.get("test-threads") {
            profile.test_threads =
                Some(test_threads(value, cores).map_err(|message| invalid("test-threads", message))?);
        }
        if let Some(value) = table.get("fail-fast") {
            profile.max_fail = Some(fail_fast(value).map_err(|message| invalid("fail-fast", message))?);
        }
        if let Some(value) = table.get("junit").and_then(|junit| junit.get("path")) {
            let path = value.as_str().filter(|path| !path.is_empty());
            let path = path.ok_or_else(|| invalid("junit.path", format!("expected a path, found {value}")))?;
            profile.junit = Some(path.into());
        }
    }
    Ok(profile)
}

/// The timeout of a `slow-timeout`: its period times its `terminate-after`, or none.
fn slow_timeout(value: &toml::Value) -> Result<Option<Duration>, String> {
    let period = |text: &toml::Value| {
        let text = text.as_str().ok_or_else(|| format!("expected a duration such as \"60s\", found {text}"))?;
        crate::config::parse_duration(text)
    };
    match value {
        toml::Value::String(_) => period(value).map(|_| None),
        toml::Value::Table(table) => {
            let period = period(table.get("period").ok_or("expected a `period`")?)?;
            match table.get("terminate-after") {
                None => Ok(None),
                Some(after) => {
                    let after = after.as_integer().and_then(|after| u32::try_from(after).ok()).filter(|n| *n > 0);
                    let after = after.ok_or_else(|| format!("`terminate-after` is a count of periods, not {value}"))?;
                    Ok(Some(period * after))
                }
            }
        }
        other => Err(format!("expected a duration or a table with `period`, found {other}")),
    }
}

/// `test-threads`: a count, `"num-cpus"`, or a negative count (that many fewer than the cores, at least one), as
/// `-j` takes them.
fn test_threads(value: &toml::Value, cores: usize) -> Result<usize, String> {
    match value {
        toml::Value::String(text) if text == "num-cpus" => Ok(cores),
        toml::Value::Integer(count) => crate::config::test_threads(&count.to_string(), cores),
        other => Err(format!("expected a count of threads or \"num-cpus\", found {other}")),
    }
}

/// `fail-fast`: a boolean, or `{ max-fail = N }` / `{ max-fail = "all" }`, with `terminate = "wait"` (the
/// default) or `"immediate"`.
fn fail_fast(value: &toml::Value) -> Result<MaxFail, String> {
    match value {
        toml::Value::Boolean(true) => Ok(MaxFail::FIRST),
        toml::Value::Boolean(false) => Ok(MaxFail::Never),
        toml::Value::Table(table) => {
            let terminate = match table.get("terminate") {
                None => "wait",
                Some(toml::Value::String(mode)) => mode,
                Some(other) => {
                    return Err(format!("expected `terminate = \"wait\"` or `\"immediate\"`, found {other}"));
                }
            };
            let count = match table.get("max-fail") {
                Some(toml::Value::Integer(count)) => count.to_string(),
                Some(toml::Value::String(text)) if text == "all" => return Ok(MaxFail::Never),
                _ => return Err(format!("expected `max-fail = N` or `max-fail = \"all\"`, found {value}")),
            };
            MaxFail::parse(&format!("{count}:{terminate}"))
        }
        other => Err(format!("expected true, false or {{ max-fail = N }}, found {other}")),
    }
}

/// The nextest profile the current run is of (`NEXTEST_PROFILE`), as `.config/nextest.toml` under `root` sets it
/// (a wrapper's or a setup script's view): its timeout (a test stopped that long after it started timed out) and
/// its JUnit file. `None` when it does not read.
pub(crate) fn profile_of_run(root: &std::path::Path) -> Option<Profile> {
    let name = std::env::var("NEXTEST_PROFILE").ok()?;
    let text = ying_report::read_text(&root.join(".config").join("nextest.toml")).ok()?;
    profile(&text, &name, crate::config::cores()).ok()
}

#[cfg(test)]
mod tests {
    use super::{Profile, profile};
    use crate::config::MaxFail;
    use crate::error::NextestProfileError;
    use std::time::Duration;

    const FILE: &str = r#"
experimental = ["wrapper-scripts"]

[profile.default]
retries = 1
slow-timeout = { period = "30s", terminate-after = 4 }
test-threads = "num-cpus"

[profile.ci]
retries = { backoff = "exponential", count = 3, delay = "1s" }
fail-fast = { max-fail = 5 }
junit = { path = "junit.xml" }

[profile.nightly]
inherits = "ci"
slow-timeout = "2m"
test-threads = -1
fail-fast = false

[profile.strict]
fail-fast = { max-fail = 2, terminate = "immediate" }

[[profile.ci.overrides]]
filter = "test(slow)"
retries = 9
"#;

    #[test]
    fn a_profile_takes_what_it_sets_over_what_it_inherits() {
        let ci = profile(FILE, "ci", 8).unwrap();
        assert_eq!(
            ci,
            Profile {
                retries: Some(3),
                timeout: Some(Duration::from_secs(120)),
                test_threads: Some(8),
                max_fail: Some(MaxFail::parse("5").unwrap()),
                junit: Some("junit.xml".into()),
            }
        );
        let nightly = profile(FILE, "nightly", 8).unwrap();
        assert_eq!(
            nightly,
            Profile {
                retries: Some(3),
                timeout: None,
                test_threads: Some(7),
                max_fail: Some(MaxFail::Never),
                junit: Some("junit.xml".into()),
            }
        );
        assert_eq!(profile(FILE, "default", 2).unwrap().junit, None, "the default profile writes no JUnit");
        let error = profile("[profile.ci]\njunit = { path = 3 }\n", "ci", 2).unwrap_err().to_string();
        assert!(error.contains("profile.ci.junit.path"), "{error}");
        assert_eq!(profile(FILE, "default", 2).unwrap().retries, Some(1));
        assert_eq!(profile(FILE, "strict", 2).unwrap().max_fail, Some(MaxFail::parse("2:immediate").unwrap()));
        assert_eq!(profile("", "default", 2).unwrap(), Profile::default(), "nextest always has a default profile");
    }

    #[test]
    fn an_unknown_profile_a_bad_value_and_a_file_that_is_not_toml_are_errors_that_say_where() {
        match profile(FILE, "nightyl", 2) {
            Err(NextestProfileError::Unknown { name, known }) => {
                assert_eq!(name, "nightyl");
                assert_eq!(known, ["ci", "default", "default-miri", "nightly", "strict"]);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            profile("", "ci", 2).unwrap_err().to_string(),
            "profile `ci` not found (known profiles: default, default-miri)",
            "nextest's words"
        );
        assert_eq!(profile(FILE, "default-miri", 2).unwrap().retries, Some(1), "nextest's own, from default");
        let bad = "[profile.default]\nslow-timeout = { period = \"soon\", terminate-after = 2 }\n";
        let error = profile(bad, "default", 2).unwrap_err().to_string();
        assert!(error.contains("profile.default.slow-timeout") && error.contains("soon"), "{error}");
        let error = profile("[profile.ci\nretries = 1\n", "ci", 2).unwrap_err().to_string();
        assert!(error.contains("line 1"), "{error}");
        let cycle = "[profile.a]\ninherits = \"b\"\n[profile.b]\ninherits = \"a\"\n";
        assert!(matches!(profile(cycle, "a", 2), Err(NextestProfileError::Cycle(_))));
    }
}
