//! `--message-format libtest-json` and `libtest-json-plus`: the run's events on standard output, a JSON object a
//! line, as cargo-nextest writes them (its format 0.1, the unstable libtest JSON of `cargo test -- --format json
//! --report-time` as of late 2023), so that tools that read nextest's read ours.
//!
//! A test binary is a suite: `{"type":"suite","event":"started","test_count":N}`, then each test's `started`, the
//! ignored tests' `ignored`, each test's `ok` or `failed` (with its `exec_time` in seconds, and a failed test's output
//! as `stdout`, libtest's own lines around it left out), and the suite's `ok` or `failed` with its counts. A test is
//! named `package::binary$test`, and `#N` follows the name of a test that took N attempts (`--retries`).
//!
//! `libtest-json` writes a binary's events together once its last test has finished, as `cargo test` would have
//! written them; `libtest-json-plus` writes each as it comes, and adds to the suite's events a `nextest` object naming
//! the crate, the test binary and its kind, as nextest does. Tests the filters left out, and those fail-fast left
//! unstarted, count as filtered out. Memory is not in these events: the gate's verdict comes after every test, and summary.json has it.

use crate::model::{Outcome, TestRecord};
use crate::run::select::discover::TestCase;
use std::collections::BTreeMap;
use std::io::Write as _;
use std::time::Duration;
use ying_report::TestId;

/// `--message-format`: how the run's events are written on standard output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum MessageFormat {
    /// None: the run speaks to a person, on standard error
    #[default]
    Human,
    /// libtest's JSON events, as cargo-nextest writes them, a binary's together
    LibtestJson,
    /// libtest's JSON events as they come, with cargo-nextest's `nextest` object on each suite's
    LibtestJsonPlus,
}

/// The one version of the format, and what `--message-format-version` takes.
pub(crate) const FORMAT_VERSION: &str = "0.1";

/// One test binary's events so far.
#[derive(Debug)]
struct Suite {
    /// `package::binary`, as the tests' names begin.
    prefix: String,
    /// The `nextest` object of its suite events.
    nextest: NextestBinary,
    /// Its tests that run and have not finished.
    running: usize,
    passed: usize,
    failed: usize,
    ignored: usize,
    /// Tests that fail-fast left unstarted.
    filtered: usize,
    /// The time of every test that finished.
    total: Duration,
    /// The events not written yet: `started`, then results, as they come.
    events: String,
    /// The `ignored` events, written before the first result, as libtest orders them.
    ignored_events: Option<String>,
    /// Whether the suite's `started` event was written.
    started: bool,
}

/// The `nextest` object of a suite's events in `libtest-json-plus`: the crate, the test binary and its kind.
#[derive(Clone, Debug, serde::Serialize)]
struct NextestBinary {
    #[serde(rename = "crate")]
    krate: String,
    test_binary: String,
    kind: String,
}

/// A suite's `started` event.
#[derive(serde::Serialize)]
struct SuiteStarted<'a> {
    r#type: &'static str,
    event: &'static str,
    test_count: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    nextest: Option<&'a NextestBinary>,
}

/// A suite's end: `ok` or `failed`, with its counts.
#[derive(serde::Serialize)]
struct SuiteEnded<'a> {
    r#type: &'static str,
    event: &'static str,
    passed: usize,
    failed: usize,
    ignored: usize,
    measured: usize,
    filtered_out: usize,
    exec_time: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    nextest: Option<&'a NextestBinary>,
}

/// A test's event: `started`, `ignored`, `ok` or `failed`.
#[derive(serde::Serialize)]
struct TestEvent<'a> {
    r#type: &'static str,
    event: &'static str,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    exec_time: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stdout: Option<&'a str>,
}

impl<'a> TestEvent<'a> {
    /// The event `event` of the test `name`, nothing else said.
    fn of(event: &'static str, name: &'a str) -> Self {
        Self { r#type: "test", event, name, exec_time: None, reason: None, stdout: None }
    }
}

/// `event` as one line of JSON.
fn line(event: &impl serde::Serialize) -> String {
    let mut line = serde_json::to_string(event).unwrap_or_default();
    line.push('\n');
    line
}

/// Writes the events of a run on standard output.
#[derive(Debug)]
pub(crate) struct LibtestJson {
    plus: bool,
    /// Each binary's suite, by its id.
    suites: BTreeMap<String, Suite>,
    /// Which suite each test is in.
    suite_of: BTreeMap<TestId, String>,
}

impl LibtestJson {
    /// The writer of `format` for a run of `tests` (each with whether it runs) of the binaries' `listed` tests;
    /// `None` for the human format.
    pub(crate) fn new(format: MessageFormat, tests: &[(TestCase, bool)], listed: &[TestCase]) -> Option<Self> {
        let plus = match format {
            MessageFormat::Human => return None,
            MessageFormat::LibtestJson => false,
            MessageFormat::LibtestJsonPlus => true,
        };
        let mut suites: BTreeMap<String, Suite> = BTreeMap::new();
        let mut suite_of = BTreeMap::new();
        for (test, runs) in tests {
            let binary = &test.binary;
            let id = binary.binary_id();
            let suite = suites.entry(id.clone()).or_insert_with(|| Suite {
                prefix: format!("{}::{}", binary.package, binary.name),
                nextest: NextestBinary {
                    krate: binary.package.clone(),
                    test_binary: binary.name.clone(),
                    kind: binary.kind.to_string(),
                },
                running: 0,
                passed: 0,
                failed: 0,
                ignored: 0,
                filtered: 0,
                total: Duration::ZERO,
                events: String::new(),
                ignored_events: None,
                started: false,
            });
            if *runs {
                suite.running += 1;
            } else {
                suite.ignored += 1;
                let events = suite.ignored_events.get_or_insert_with(String::new);
                events.push_str(&line(&TestEvent::of("ignored", &format!("{}${}", suite.prefix, test.name))));
            }
            suite_of.insert(test.id(), id);
        }
        // The binary's tests the filters (or the partition) left out, as libtest counts them.
        for test in listed {
            if let Some(suite) = suites.get_mut(&test.binary.binary_id())
                && !suite_of.contains_key(&test.id())
            {
                suite.filtered += 1;
            }
        }
        Some(Self { plus, suites, suite_of })
    }

    /// The events of a test that finished: its `started` and its result; the suite's end after its last test.
    pub(crate) fn finished(&mut self, record: &TestRecord) {
        let Some(id) = self.suite_of.get(&record.id).cloned() else { return };
        self.start(&id);
        let Some(suite) = self.suites.get_mut(&id) else { return };
        let attempts = record.attempts();
        let retries = if attempts > 1 { format!("#{attempts}") } else { String::new() };
        let name = format!("{}${}{retries}", suite.prefix, record.id.name);
        suite.events.push_str(&line(&TestEvent::of("started", &name)));
        if let Some(ignored) = suite.ignored_events.take() {
            suite.events.push_str(&ignored);
        }
        suite.running = suite.running.saturating_sub(1);
        suite.total += record.duration;
        let mut result = TestEvent { exec_time: Some(record.duration.as_secs_f64()), ..TestEvent::of("ok", &name) };
        let stdout;
        match &record.outcome {
            Outcome::Passed => suite.passed += 1,
            Outcome::TimedOut(_) => {
                suite.failed += 1;
                (result.event, result.reason) = ("failed", Some("time limit exceeded"));
            }
            _ => {
                suite.failed += 1;
                stdout = libtest_output(&record.output, &record.id.name);
                (result.event, result.stdout) = ("failed", Some(stdout.as_str()));
            }
        }
        let result = line(&result);
        suite.events.push_str(&result);
        if self.plus {
            let events = std::mem::take(&mut suite.events);
            write_out(&events);
        }
        if suite.running == 0 {
            self.end(&id);
        }
    }

    /// The end of the run: the suites whose tests did not all finish (fail-fast, an interrupt) end, their unstarted
    /// tests filtered out.
    pub(crate) fn finish(&mut self) {
        let ids: Vec<String> = self.suites.keys().cloned().collect();
        for id in ids {
            let Some(suite) = self.suites.get_mut(&id) else { continue };
            suite.filtered += std::mem::take(&mut suite.running);
            self.end(&id);
        }
    }

    /// Puts the `started` event of suite `id` first among its events not written yet, once.
    fn start(&mut self, id: &str) {
        let Some(suite) = self.suites.get_mut(id) else { return };
        if suite.started {
            return;
        }
        suite.started = true;
        let nextest = self.plus.then_some(&suite.nextest);
        let started =
            SuiteStarted { r#type: "suite", event: "started", test_count: suite.running + suite.ignored, nextest };
        suite.events.insert_str(0, &line(&started));
    }

    /// Writes what is left of suite `id` and its end, and forgets it.
    fn end(&mut self, id: &str) {
        self.start(id);
        let Some(mut suite) = self.suites.remove(id) else { return };
        if let Some(ignored) = suite.ignored_events.take() {
            suite.events.push_str(&ignored);
        }
        let ended = SuiteEnded {
            r#type: "suite",
            event: if suite.failed > 0 { "failed" } else { "ok" },
            passed: suite.passed,
            failed: suite.failed,
            ignored: suite.ignored,
            measured: 0,
            filtered_out: suite.filtered,
            exec_time: suite.total.as_secs_f64(),
            nextest: self.plus.then_some(&suite.nextest),
        };
        suite.events.push_str(&line(&ended));
        write_out(&suite.events);
    }
}

/// Writes `text` to standard output in one call, and flushes it: the events of one suite stay together however the
/// output is read. A failed write (a closed pipe) is not an error of the run.
fn write_out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

/// A failed test's output as nextest gives it: what the test printed between libtest's lines (`running 1 test` or
/// `test NAME ... `, and `test NAME ... FAILED` or `FAILED` and the list of failures), when they are there; the whole
/// output otherwise (a crash, a timeout).
fn libtest_output(output: &str, name: &str) -> String {
    if let Some(rest) = output.strip_prefix(&format!("test {name} ... ")) {
        return rest[..rest.rfind("FAILED\n\nfailures:").unwrap_or(rest.len())].to_owned();
    }
    if !output.contains("running 1 test\n") {
        return output.to_owned();
    }
    let end = format!("test {name} ... FAILED");
    let mut text = String::new();
    for line in output.lines().skip_while(|line| *line != "running 1 test").skip(1).take_while(|line| *line != end) {
        text.push_str(line);
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::libtest_output;

    #[test]
    fn a_failed_tests_output_is_what_it_printed_between_libtests_lines() {
        let output = "\nrunning 1 test\nthread 'x' panicked\nassertion failed\ntest m::x ... FAILED\n\nfailures:\n";
        assert_eq!(libtest_output(output, "m::x"), "thread 'x' panicked\nassertion failed\n");
        assert_eq!(libtest_output("killed\n", "m::x"), "killed\n");
        let captured = "test m::x ... \nthread 'x' panicked\nFAILED\n\nfailures:\n\nfailures:\n    m::x\n";
        assert_eq!(libtest_output(captured, "m::x"), "\nthread 'x' panicked\n");
    }
}
