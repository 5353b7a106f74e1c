//! Finishing, in `cargo ying gate`, the records of the tests the wrapper ran in its own place (`exec`,
//! [`Exec`]): the wrapper wrote each as the test started and was gone. How the process ended is the line the
//! interposer in it left (`ying_report::end_mark`: its exit code, or the signal that ended it, the processes it
//! ended on its way out, and when); its report is taken from its directory as the wrapper
//! takes one; why a failed test failed (its panic's message, its output's last lines) is what nextest captured, in
//! the JUnit file of the run's profile. A test that left no line crashed if nextest saw a signal end it (`SIGSEGV`,
//! whose handler is the standard library's), was unmeasured if nextest saw it pass (no interposer was there to say
//! so), and else stays `running`: killed (nextest's `SIGKILL` after a timeout's grace period). Each a failure.

use crate::model::Outcome;
use crate::nextest::record::{Exec, Record};
use crate::run::exec::attempt::{Attempt, TIMEOUT_SLACK};
use crate::run::exec::collect::take_report;
use crate::run::exec::relay::Kept;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};
use ying_report::TestOutcome;
use ying_report::end_mark::{END_MARK_MAX, EndMark, Ending};

/// The signals with which nextest stops a test (at its timeout, or when the run is stopped).
const STOPS: [i32; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

/// Finishes every record of `records` (and of their earlier attempts) that a wrapper left to the gate, from what
/// their processes left under `run_dir`.
pub(crate) fn finish_all(records: &mut [Record], run_dir: &Path) {
    let mut junits = Junits::default();
    for record in records {
        finish(record, run_dir, &mut junits);
    }
}

fn finish(record: &mut Record, run_dir: &Path, junits: &mut Junits) {
    for earlier in &mut record.earlier {
        finish(earlier, run_dir, junits);
    }
    let Some(exec) = record.exec.clone().filter(|_| record.running) else { return };
    let mark_path = exec.end_mark(run_dir);
    let started_at = humantime::parse_rfc3339(&record.started_at).unwrap_or(SystemTime::UNIX_EPOCH);
    let marked = ying_report::read_bounded(&mark_path, END_MARK_MAX as u64)
        .ok()
        .and_then(|bytes| EndMark::parse(std::str::from_utf8(&bytes).ok()?));
    let (ending, ended_at) = match (marked, junits.failed(&exec, record)) {
        (Some(mark), _) => (mark.ending, SystemTime::UNIX_EPOCH + Duration::from_nanos(mark.at_ns)),
        // No word from the interposer, but nextest saw a signal end the process (SIGSEGV, whose handler is the
        // standard library's; SIGKILL from outside): it crashed.
        (None, Some(Failed { aborted: Some((signal, seconds)), .. })) => {
            (Ending::Signalled(signal), started_at + Duration::from_secs_f64(seconds))
        }
        (None, failed) => {
            if junits.passed(&exec, record) {
                // No word, though nextest saw the test pass: its process never had the interposer, or ran another
                // program in its place.
                record.running = false;
                record.unmeasured = true;
                record.outcome = TestOutcome::Passed;
            } else if let Some(failed) = failed {
                // What nextest saw of its end, for the reason of a test that stays `running`.
                let kept = Kept::of_output(&failed.output);
                record.panic = kept.panic;
                record.output_tail = Some(kept.tail).filter(|tail| !tail.is_empty());
            }
            return;
        }
    };
    let duration = ended_at.duration_since(started_at).unwrap_or_default();
    let name = crate::signals::name;
    let (ended, exit_code, killed_by, stopped_by, left) = match ending {
        Ending::Exited { code, ended } => {
            (if code == 0 { Outcome::Passed } else { Outcome::Failed }, Some(code), None, None, ended)
        }
        Ending::Signalled(signal) if STOPS.contains(&signal) => {
            let outcome = match exec.timeout.map(|timeout| Duration::from_secs_f64(timeout.max(0.0))) {
                // nextest's clock started a moment before the record's.
                Some(timeout) if duration + TIMEOUT_SLACK >= timeout => Outcome::TimedOut(timeout),
                _ => Outcome::Stopped(Some(name(signal))),
            };
            (outcome, None, Some(signal), Some(signal), 0)
        }
        Ending::Signalled(signal) => (Outcome::Crashed(name(signal)), None, Some(signal), None, 0),
    };
    let collected = take_report(&record.id, &exec.report_dir(run_dir), run_dir, &exec.token, |_| false);
    let outcome = Outcome::of_process(ended, exit_code, collected.started, collected.leak.is_some(), true);
    let kept =
        junits.failed(&exec, record).filter(|_| outcome.is_failure()).map(|failed| Kept::of_output(&failed.output));
    let attempt = Attempt {
        outcome,
        exit_code,
        killed_by,
        stopped_by,
        started_at,
        duration,
        leak: collected.leak,
        warnings: collected.warnings,
        kept,
    };
    record_ending(record, attempt, usize::try_from(left).unwrap_or(usize::MAX));
}

/// Fills in how the attempt `record` is of ended, as `attempt` says, with `left` processes the test left running
/// ended when it did: the record is no longer `running`. Done by the wrapper of an archive's test, by the gate for
/// the others.
pub(crate) fn record_ending(record: &mut Record, attempt: Attempt, left: usize) {
    record.unreported = matches!(attempt.outcome, Outcome::Unreported { .. });
    record.unmeasured = attempt.outcome == Outcome::Unmeasured;
    record.outcome = attempt.outcome.kind();
    record.signal = match &attempt.outcome {
        Outcome::Crashed(signal) => Some(signal.clone()),
        _ => None,
    };
    record.stopped_by = attempt.stopped_by.map(crate::signals::name);
    record.timeout = match attempt.outcome {
        Outcome::TimedOut(timeout) => Some(timeout.as_secs_f64()),
        _ => None,
    };
    record.exit_code = attempt.exit_code;
    record.duration = attempt.duration.as_secs_f64();
    record.started_at = humantime::format_rfc3339_millis(attempt.started_at).to_string();
    record.report = attempt.leak.map(|leak| leak.path);
    record.warnings = attempt.warnings;
    if left > 0 {
        let processes = if left == 1 { "process" } else { "processes" };
        record
            .warnings
            .push(format!("it left {left} {processes} running outside its process group, ended when it did"));
    }
    if let Some(kept) = attempt.kept.filter(|_| attempt.outcome.is_failure()) {
        record.panic = kept.panic;
        record.output_tail = Some(kept.tail).filter(|tail| !tail.is_empty());
    }
    record.running = false;
}

/// nextest's JUnit files, each read once: the output it captured of each attempt of each test that failed.
#[derive(Default)]
struct Junits {
    read: HashMap<PathBuf, Option<Cases>>,
}

/// What a JUnit file says of each test case it holds, by (binary id, test name).
type Cases = HashMap<(String, String), Case>;

/// What nextest's JUnit says of one test.
struct Case {
    /// Its last attempt passed.
    passed: bool,
    /// Its failed attempts, first first (see [`read_junit`]).
    failed: Vec<Failed>,
}

/// What nextest's JUnit says of one failed attempt.
#[derive(Clone)]
struct Failed {
    /// Its standard output then its standard error, or nextest's words for why it failed.
    output: String,
    /// The signal that ended its process (a `test abort`: `process aborted with signal 11 (SIGSEGV)`), and how many
    /// seconds it ran.
    aborted: Option<(i32, f64)>,
}

impl Junits {
    /// The test cases of the JUnit file `exec` names.
    fn cases(&mut self, exec: &Exec) -> Option<&Cases> {
        let path = exec.junit.as_ref()?;
        self.read.entry(path.clone()).or_insert_with(|| read_junit(path)).as_ref()
    }

    /// Whether nextest says that the attempt `record` is of, the last, passed.
    fn passed(&mut self, exec: &Exec, record: &Record) -> bool {
        let attempts = record.earlier.len() + 1;
        self.cases(exec)
            .and_then(|cases| cases.get(&(exec.binary_id.clone(), exec.test_name.clone())))
            .is_some_and(|case| case.passed && case.failed.len() + 1 == attempts)
    }

    /// What nextest says of the failed attempt `record` is of, the test the wrapper ran as `exec` says, when its
    /// profile wrote a JUnit file that has it.
    fn failed(&mut self, exec: &Exec, record: &Record) -> Option<Failed> {
        let case = self.cases(exec)?.get(&(exec.binary_id.clone(), exec.test_name.clone()))?;
        // One per failed attempt, first first: none for an attempt that passed.
        case.failed.get(usize::try_from(record.attempt.checked_sub(1)?).ok()?).cloned()
    }
}

/// Each test case of nextest's JUnit file at `path`: whether it passed at last, and its outputs, one per failed
/// attempt, first first (`rerunFailure` or `flakyFailure` for those before the last, then `failure` or `error`),
/// each its standard output then its standard error. `None` when the file does not read.
fn read_junit(path: &Path) -> Option<Cases> {
    let text = ying_report::read_text(path).ok()?;
    let document = roxmltree::Document::parse(&text).ok()?;
    let mut cases = HashMap::new();
    for case in document.descendants().filter(|node| node.has_tag_name("testcase")) {
        let (Some(class), Some(name)) = (case.attribute("classname"), case.attribute("name")) else { continue };
        let mut failed: Vec<Failed> = case
            .children()
            .filter(|child| child.has_tag_name("rerunFailure") || child.has_tag_name("flakyFailure"))
            .map(|attempt| Failed { output: output(attempt, attempt), aborted: aborted(attempt, attempt) })
            .collect();
        let failure = case.children().find(|child| child.has_tag_name("failure") || child.has_tag_name("error"));
        if let Some(failure) = failure {
            // The last attempt's output and time are the test case's own.
            failed.push(Failed { output: output(failure, case), aborted: aborted(failure, case) });
        }
        let passed = failure.is_none() && !case.children().any(|child| child.has_tag_name("skipped"));
        cases.insert((class.to_owned(), name.to_owned()), Case { passed, failed });
    }
    Some(cases)
}

/// The output of one failed attempt: `outputs`' `system-out` then `system-err`, or, when nextest kept neither,
/// `failure`'s message (nextest's own words for why it failed, a panic's message among them).
fn output(failure: roxmltree::Node<'_, '_>, outputs: roxmltree::Node<'_, '_>) -> String {
    let text_of = |tag: &str| {
        outputs.children().find(|child| child.has_tag_name(tag)).and_then(|child| child.text()).unwrap_or_default()
    };
    let (out, err) = (text_of("system-out"), text_of("system-err"));
    if out.is_empty() && err.is_empty() {
        return failure.attribute("message").unwrap_or_default().to_owned();
    }
    let between = if out.is_empty() || out.ends_with('\n') { "" } else { "\n" };
    format!("{out}{between}{err}")
}

/// The signal that ended an attempt nextest calls a `test abort` (`failure`, its message `process aborted with
/// signal 11 (SIGSEGV)`), with the seconds `timed` (the element with its `time`) says it ran.
fn aborted(failure: roxmltree::Node<'_, '_>, timed: roxmltree::Node<'_, '_>) -> Option<(i32, f64)> {
    failure.attribute("type").filter(|kind| kind.starts_with("test abort"))?;
    let (_, after) = failure.attribute("message")?.split_once("with signal ")?;
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    let seconds = timed.attribute("time").and_then(|time| time.parse::<f64>().ok()).filter(|time| time.is_finite());
    Some((digits.parse().ok().filter(|signal| *signal > 0)?, seconds.unwrap_or(0.0).clamp(0.0, 1e9)))
}

#[cfg(test)]
mod tests {
    use super::finish_all;
    use crate::nextest::record::Record;
    use std::path::Path;
    use std::time::{Duration, SystemTime};
    use ying_report::TestOutcome;

    /// The record a wrapper writes before it `exec`s test `name` (attempt `attempt`) as process `pid`, started
    /// `ago` before now; the profile's timeout 1 s, its JUnit `junit`.
    fn started(name: &str, attempt: u32, pid: u32, ago: Duration, junit: &Path) -> Record {
        let started_at = humantime::format_rfc3339_millis(SystemTime::now() - ago).to_string();
        serde_json::from_value(serde_json::json!({
            "package": "p", "kind": "test", "target": "t", "name": name,
            "outcome": "not-run", "duration": 0.0, "started_at": started_at, "attempt": attempt, "running": true,
            "exec": { "pid": pid, "token": "token", "binary_id": "p::t", "test_name": name, "timeout": 1.0,
                      "junit": junit },
        }))
        .unwrap()
    }

    /// Writes end mark `line` of process `pid` into `run_dir`, ended now (`<now>` in `line`).
    fn mark(run_dir: &Path, pid: u32, line: &str) {
        let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_nanos();
        std::fs::create_dir_all(run_dir.join("tmp")).unwrap();
        std::fs::write(run_dir.join(format!("tmp/{pid}.end")), line.replace("<now>", &now.to_string())).unwrap();
    }

    const JUNIT: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="nextest-run" tests="2" failures="1" errors="0">
  <testsuite name="p::t" tests="2" disabled="0" errors="0" failures="1">
    <testcase name="fails" classname="p::t" time="0.010">
      <failure type="test failure with exit code 101">thread 'fails' panicked at tests/a.rs:9:5:
second</failure>
      <rerunFailure type="test failure with exit code 101" timestamp="2026-12-07T00:00:00Z" time="0.01">
        <system-out>running 1 test
</system-out>
        <system-err>thread 'fails' (7) panicked at tests/a.rs:9:5:
first
</system-err>
      </rerunFailure>
      <system-out>running 1 test
</system-out>
      <system-err>thread 'fails' (8) panicked at tests/a.rs:9:5:
second
note: run with `RUST_BACKTRACE=1`
</system-err>
    </testcase>
    <testcase name="unmeasured" classname="p::t" time="0.010"/>
    <testcase name="flaky" classname="p::t" time="0.010">
      <flakyFailure type="test abort" message="process aborted with signal 6 (SIGABRT)" time="0.01"/>
    </testcase>
    <testcase name="segfaults" classname="p::t" time="0.250">
      <failure message="process aborted with signal 11 (SIGSEGV)" type="test abort">process aborted with signal 11 (SIGSEGV)</failure>
      <system-out>running 1 test
</system-out>
    </testcase>
    <testcase name="killed" classname="p::t" time="0.010">
      <failure type="test abort" message="killed with SIGKILL"/>
    </testcase>
    <testcase name="crashes" classname="p::t" time="0.010">
      <failure type="test abort with SIGABRT" message="process aborted with signal 6"/>
    </testcase>
  </testsuite>
</testsuites>
"#;

    #[test]
    fn each_end_mark_finishes_its_record_as_the_wrapper_would_have() {
        let dir = tempfile::tempdir().unwrap();
        let (run_dir, junit) = (dir.path(), dir.path().join("junit.xml"));
        std::fs::write(&junit, JUNIT).unwrap();
        let second = Duration::from_secs(1);
        let mut records = vec![
            started("passes", 1, 10, second, &junit),
            started("times_out", 1, 11, 3 * second, &junit),
            started("stopped", 1, 12, Duration::ZERO, &junit),
            started("crashes", 1, 13, second, &junit),
            started("killed", 1, 14, second, &junit),
            started("leaves_children", 1, 15, second, &junit),
            started("unmeasured", 1, 18, second, &junit),
            started("segfaults", 1, 19, second, &junit),
            {
                let mut second_attempt = started("flaky", 2, 21, second, &junit);
                second_attempt.earlier.push(started("flaky", 1, 22, 2 * second, &junit));
                second_attempt
            },
        ];
        let mut retried = started("fails", 2, 17, second, &junit);
        retried.earlier.push(started("fails", 1, 16, second, &junit));
        records.push(retried);
        for (pid, line) in
            [(10, "exit 0"), (11, "signal 15"), (12, "signal 15"), (13, "signal 6"), (15, "exit 0 ended 2")]
        {
            mark(run_dir, pid, &format!("{line} at <now>\n"));
        }
        mark(run_dir, 16, "exit 101 at <now>\n");
        mark(run_dir, 17, "exit 101 at <now>\n");
        finish_all(&mut records, run_dir);
        let [passes, times_out, stopped, crashes, killed, leaves_children, unmeasured, segfaults, flaky, fails] =
            &records[..]
        else {
            panic!()
        };

        // Exit code 0 and no report from a process measured from outside: nothing measured it, a failure.
        assert!(!passes.running && passes.unmeasured && passes.exit_code == Some(0), "{passes:?}");
        assert!((0.9..1.5).contains(&passes.duration), "its end is its mark's: {passes:?}");
        assert_eq!((times_out.outcome, times_out.timeout), (TestOutcome::TimedOut, Some(1.0)), "{times_out:?}");
        assert_eq!(
            (stopped.outcome, stopped.stopped_by.as_deref()),
            (TestOutcome::Crashed, Some("SIGTERM")),
            "stopped before its timeout: {stopped:?}"
        );
        assert_eq!((crashes.outcome, crashes.signal.as_deref()), (TestOutcome::Crashed, Some("SIGABRT")));
        assert!(killed.running, "no mark: killed before it ended, left running for the gate: {killed:?}");
        assert_eq!(killed.output_tail.as_deref(), Some("killed with SIGKILL\n"), "nextest's words: {killed:?}");
        assert!(!unmeasured.running && unmeasured.unmeasured, "no mark, and nextest saw it pass: {unmeasured:?}");
        // No mark, and nextest saw a signal end it: crashed, for as long as nextest says it ran.
        assert_eq!((segfaults.outcome, segfaults.signal.as_deref()), (TestOutcome::Crashed, Some("SIGSEGV")));
        assert!(!segfaults.running && (segfaults.duration - 0.25).abs() < 1e-6, "{segfaults:?}");
        // Its first attempt's abort is not its second's: nextest saw the second pass, unmeasured.
        assert!(flaky.unmeasured && flaky.signal.is_none(), "{flaky:?}");
        assert_eq!(flaky.earlier[0].signal.as_deref(), Some("SIGABRT"), "the first attempt's: {flaky:?}");
        assert!(leaves_children.warnings.iter().any(|warning| warning.contains("it left 2 processes running")));

        // nextest's words for each attempt of a failed test.
        assert_eq!(fails.outcome, TestOutcome::Failed);
        assert_eq!(fails.panic.as_deref(), Some("panicked at tests/a.rs:9:5: second"), "{fails:?}");
        assert!(fails.output_tail.as_deref().is_some_and(|tail| tail.contains("RUST_BACKTRACE")), "{fails:?}");
        assert_eq!(fails.earlier[0].panic.as_deref(), Some("panicked at tests/a.rs:9:5: first"), "{fails:?}");
        assert_eq!(crashes.output_tail.as_deref(), Some("process aborted with signal 6\n"), "{crashes:?}");
    }

    #[test]
    fn a_mark_that_is_not_one_or_a_record_already_finished_is_left_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let junit = dir.path().join("junit.xml");
        let mut records =
            vec![started("a", 1, 20, Duration::ZERO, &junit), started("b", 1, 21, Duration::ZERO, &junit)];
        records[1].running = false;
        records[1].outcome = TestOutcome::Passed;
        let before = records.clone();
        mark(dir.path(), 20, "exit 0 at <now>");
        mark(dir.path(), 21, "signal 6 at <now>\n");
        finish_all(&mut records, dir.path());
        assert_eq!(records, before);
    }
}
