//! Finding the tests: each binary's `--list --format terse` (and `--ignored` to know which are ignored), filtered
//! the way libtest filters them.

use crate::config::RunIgnored;
use crate::error::{Error, ListError, Result, SelectionError};
use crate::run::process::{self, Waited};
use crate::run::select::build::TestBinary;
use crate::run::select::filterset::Filterset;
use crate::signals;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use ying_report::TestId;

/// One test of one binary.
#[derive(Clone, Debug)]
pub(crate) struct TestCase {
    /// The binary it is in.
    pub binary: Arc<TestBinary>,
    /// Its name as libtest lists it (`module::name`).
    pub name: String,
    /// Marked `#[ignore]`.
    pub ignored: bool,
}

impl TestCase {
    /// The test's id.
    pub(crate) fn id(&self) -> TestId {
        self.binary.test_id(&self.name)
    }
}

/// Why a listed test is not run, as nextest's test list says it (`filter-match`'s `reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mismatch {
    /// Its `#[ignore]`, against `--run-ignored`.
    Ignored,
    /// Its name, against the filters and skips.
    String,
    /// The filtersets.
    Expression,
    /// Another shard has it.
    Partition,
}

/// Which tests run, from the positional filters, `-E` filtersets and libtest's arguments after `--`: filters,
/// `--exact`, `--skip`, `--ignored`, `--include-ignored`. `--list`, `--nocapture` and `--test-threads` are cargo
/// ying's to honour (listing, not capturing, running that many at once), never passed on; other arguments go to
/// every test process.
#[derive(Debug, Default)]
pub(crate) struct Selection {
    /// Names (or parts of names) to run; all tests when empty.
    pub filters: Vec<String>,
    /// Filters and skips match whole names.
    pub exact: bool,
    /// Names (or parts of names) not to run.
    pub skip: Vec<String>,
    /// `-E` filtersets: a test runs when it is in one of them (and passes the name filters).
    pub filtersets: Vec<Filterset>,
    /// Run only ignored tests.
    pub ignored_only: bool,
    /// Run ignored tests too.
    pub include_ignored: bool,
    /// `--list`: list the tests, run none.
    pub list: bool,
    /// `--nocapture` (or `--no-capture`): tests print straight to the terminal.
    pub no_capture: bool,
    /// `--test-threads N`: how many tests run at once.
    pub test_threads: Option<usize>,
    /// Other arguments, for every test process.
    pub passthrough: Vec<String>,
}

/// libtest's options that take a value, passed on with it.
const PASSED_WITH_VALUE: [&str; 5] = ["--color", "--format", "--logfile", "--shuffle-seed", "-Z"];

impl Selection {
    /// Reads the positional filters, the `-E` filtersets and the arguments after `--`.
    pub(crate) fn new(filters: &[String], filtersets: &[Filterset], test_args: &[String]) -> Result<Self> {
        let mut selection = Self::parse(filters, test_args).map_err(Error::TestArgs)?;
        selection.filtersets = filtersets.to_vec();
        Ok(selection)
    }

    /// The selection with `--run-ignored`'s choice, when given: `only` as libtest's `--ignored`, `all` as its
    /// `--include-ignored`, `default` as neither.
    #[must_use]
    pub(crate) fn running_ignored(mut self, which: Option<RunIgnored>) -> Self {
        match which {
            None => {}
            Some(RunIgnored::Default) => (self.ignored_only, self.include_ignored) = (false, false),
            Some(RunIgnored::Only) => (self.ignored_only, self.include_ignored) = (true, false),
            Some(RunIgnored::All) => (self.ignored_only, self.include_ignored) = (false, true),
        }
        self
    }

    fn parse(filters: &[String], test_args: &[String]) -> std::result::Result<Self, SelectionError> {
        let mut selection = Self { filters: filters.to_vec(), ..Self::default() };
        let mut args = test_args.iter();
        let value = |args: &mut std::slice::Iter<'_, String>, name: &str| {
            args.next().cloned().ok_or_else(|| SelectionError::MissingValue(name.to_owned()))
        };
        while let Some(arg) = args.next() {
            let (name, inline) = match arg.split_once('=') {
                Some((name, value)) if name.starts_with("--") => (name, Some(value.to_owned())),
                _ => (arg.as_str(), None),
            };
            match name {
                "--exact" => selection.exact = true,
                "--ignored" => selection.ignored_only = true,
                "--include-ignored" => selection.include_ignored = true,
                "--list" => selection.list = true,
                "--nocapture" | "--no-capture" => selection.no_capture = true,
                "--skip" => {
                    let skip = match inline {
                        Some(skip) => skip,
                        None => value(&mut args, name)?,
                    };
                    selection.skip.push(skip);
                }
                "--test-threads" => {
                    let threads = match inline {
                        Some(threads) => threads,
                        None => value(&mut args, name)?,
                    };
                    let parsed = threads.parse().ok().filter(|threads| *threads > 0);
                    selection.test_threads = Some(parsed.ok_or(SelectionError::TestThreads(threads))?);
                }
                name if PASSED_WITH_VALUE.contains(&name) => {
                    selection.passthrough.push(arg.clone());
                    if inline.is_none() {
                        selection.passthrough.push(value(&mut args, name)?);
                    }
                }
                other if !other.starts_with('-') => selection.filters.push(arg.clone()),
                _ => selection.passthrough.push(arg.clone()),
            }
        }
        Ok(selection)
    }

    fn matches(&self, pattern: &str, name: &str) -> bool {
        if self.exact { name == pattern } else { name.contains(pattern) }
    }

    /// Whether the test `id` passes the name filters, the skips and the filtersets (as in nextest: the union of
    /// the filtersets intersected with the union of the name filters).
    pub(crate) fn selects(&self, id: &TestId) -> bool {
        self.unnamed(id).is_none()
    }

    /// Why the test `id` (marked `#[ignore]` or not: `ignored`) is not selected, in the order nextest asks: its
    /// `#[ignore]` against `--run-ignored`, then its name against the filters and skips, then the filtersets; `None`
    /// when it is selected. Ignored tests a run reports as ignored (`--run-ignored default`) count as not selected
    /// here, as in nextest's list.
    pub(crate) fn mismatch(&self, id: &TestId, ignored: bool) -> Option<Mismatch> {
        if ignored != self.ignored_only && !(ignored && self.include_ignored) {
            return Some(Mismatch::Ignored);
        }
        self.unnamed(id)
    }

    /// Why the test `id` fails the name filters and skips (`String`) or the filtersets (`Expression`).
    fn unnamed(&self, id: &TestId) -> Option<Mismatch> {
        let name = id.name.as_str();
        let named = (self.filters.is_empty() || self.filters.iter().any(|filter| self.matches(filter, name)))
            && !self.skip.iter().any(|skip| self.matches(skip, name));
        if !named {
            return Some(Mismatch::String);
        }
        if !self.filtersets.is_empty() && !self.filtersets.iter().any(|set| set.matches(id)) {
            return Some(Mismatch::Expression);
        }
        None
    }

    /// Whether every test of the built binaries is selected (ignored ones as ignored): only then is a test of the
    /// baseline that did not run missing, rather than filtered out.
    pub(crate) fn selects_everything(&self) -> bool {
        self.filters.is_empty() && self.skip.is_empty() && self.filtersets.is_empty() && !self.ignored_only
    }

    /// Whether a test with this ignored flag runs (rather than being reported as ignored).
    pub(crate) fn runs(&self, ignored: bool) -> bool {
        if self.ignored_only { ignored } else { self.include_ignored || !ignored }
    }
}

/// The longest a test binary may take to list its tests.
pub(crate) const LIST_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `command` (a binary's `--list`) to the end, in its own process group, for at most `timeout`
/// ([`LIST_TIMEOUT`]): a binary that blocks is ended with its group.
fn list_output(mut command: Command, timeout: Duration) -> std::result::Result<Output, ListError> {
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = process::spawn(&mut command).map_err(ListError::Spawn)?;
    let (stdout, stderr) = (drain(child.stdout.take()), drain(child.stderr.take()));
    let status = match process::wait(&mut child, started, timeout) {
        Waited::Exited(status) => status,
        Waited::TimedOut => return Err(ListError::TimedOut(timeout)),
        Waited::Interrupted(signal) => return Err(ListError::Interrupted(signals::name(signal))),
        Waited::Failed(error) => return Err(ListError::Spawn(error)),
        Waited::Cancelled => unreachable!("`wait` is never cancelled: only a test's run is"),
    };
    let (stdout, stderr) = (stdout.join().unwrap_or_default(), stderr.join().unwrap_or_default());
    Ok(Output { status, stdout, stderr })
}

/// Reads `pipe` to its end on a thread of its own, so that a child filling one pipe never blocks on it.
fn drain(pipe: Option<impl std::io::Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        bytes
    })
}

fn list(binary: &TestBinary, ignored: bool) -> Result<Vec<String>> {
    let mut command = Command::new(&binary.path);
    command.args(["--list", "--format", "terse"]).current_dir(&binary.package_dir);
    if ignored {
        command.arg("--ignored");
    }
    let error = |source| Error::List { binary: binary.path.clone(), source };
    let output = list_output(command, LIST_TIMEOUT).map_err(error)?;
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

/// Lists every test of every binary, each marked ignored or not; which of them run is the plan's to decide
/// (`Selection`). The binaries list at once, as many as the machine has cores (two at least, as cargo-nextest's
/// list threads): a listing is mostly a process starting, and a suite of many short binaries would otherwise wait
/// for each in turn. The first binary (in order) that cannot list is the error.
pub(crate) fn discover(binaries: &[Arc<TestBinary>]) -> Result<Vec<TestCase>> {
    // Each binary is listed twice: its ignored tests, then all of them.
    let jobs = binaries.len() * 2;
    let threads = std::thread::available_parallelism().map_or(2, |cores| cores.get().max(2)).min(jobs);
    let next = AtomicUsize::new(0);
    let listed: Mutex<Vec<Option<Result<Vec<String>>>>> = Mutex::new((0..jobs).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let job = next.fetch_add(1, Ordering::Relaxed);
                    let Some(binary) = binaries.get(job / 2) else { break };
                    let names = list(binary, job.is_multiple_of(2));
                    listed.lock().unwrap_or_else(PoisonError::into_inner)[job] = Some(names);
                }
            });
        }
    });
    let mut listed = listed.into_inner().unwrap_or_else(PoisonError::into_inner).into_iter();
    let mut tests = Vec::new();
    for binary in binaries {
        let mut take = || listed.next().flatten().expect("every job was listed");
        let ignored = take()?;
        for name in take()? {
            let ignored = ignored.contains(&name);
            tests.push(TestCase { binary: Arc::clone(binary), name, ignored });
        }
    }
    Ok(tests)
}

#[cfg(test)]
mod tests {
    use super::{ListError, Mismatch, Selection, list_output};
    use crate::run::select::filterset::Filterset;
    use ying_report::{TargetKind, TestId};

    fn owned(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn selection(filters: &[&str], args: &[&str]) -> Selection {
        Selection::new(&owned(filters), &[], &owned(args)).unwrap()
    }

    fn id(name: &str) -> TestId {
        TestId::new("pkg", TargetKind::Test, "leaks", name)
    }

    #[test]
    fn filters_skips_and_exact_behave_like_libtest() {
        let all = selection(&[], &[]);
        assert!(all.selects(&id("cache::evicts")));
        let some = selection(&["cache"], &["--skip", "slow"]);
        assert!(some.selects(&id("cache::evicts")) && !some.selects(&id("cache::slow_fill")));
        assert!(!some.selects(&id("index::build")));
        let exact = selection(&["cache::evicts"], &["--exact"]);
        assert!(exact.selects(&id("cache::evicts")) && !exact.selects(&id("cache::evicts_twice")));
        let after_dashes = selection(&[], &["index", "--skip=build_fast", "--show-output"]);
        assert!(after_dashes.selects(&id("index::build")) && !after_dashes.selects(&id("cache::evicts")));
        assert!(!after_dashes.selects(&id("index::build_fast")));
        assert_eq!(after_dashes.passthrough, ["--show-output"]);
    }

    #[test]
    fn options_cargo_ying_honours_are_not_passed_on() {
        let args = selection(&[], &["--nocapture", "--test-threads", "3", "--list", "--format", "terse"]);
        assert!(args.no_capture && args.list);
        assert_eq!(args.test_threads, Some(3));
        assert!(args.filters.is_empty(), "the thread count is not a filter: {:?}", args.filters);
        assert_eq!(args.passthrough, ["--format", "terse"], "a value is passed on with its option");
        assert_eq!(selection(&[], &["--test-threads=2"]).test_threads, Some(2));
        assert!(selection(&[], &["--no-capture"]).no_capture);
        let error = |args: &[&str]| Selection::new(&[], &[], &owned(args)).unwrap_err().chain().to_string();
        assert!(error(&["--test-threads", "many"]).contains("`--test-threads many` is not a number"));
        assert!(error(&["--test-threads=0"]).contains("at least 1"));
        assert!(error(&["--test-threads"]).contains("`--test-threads` needs a value"));
        assert!(error(&["--skip"]).contains("`--skip` needs a value"));
    }

    #[test]
    fn filtersets_are_intersected_with_the_name_filters() {
        let sets = [Filterset::parse("test(cache)").unwrap(), Filterset::parse("test(index)").unwrap()];
        let both = Selection::new(&owned(&["evicts", "build"]), &sets, &[]).unwrap();
        assert!(both.selects(&id("cache::evicts")) && both.selects(&id("index::build")));
        assert!(!both.selects(&id("cache::fills")) && !both.selects(&id("other::evicts")));
        assert!(!both.selects_everything() && selection(&[], &[]).selects_everything());
    }

    /// A test binary `name` in `dir` that lists its one test only once the binary `other` has started listing
    /// its own (or alone, after five seconds), and no ignored test.
    fn waiting_binary(
        dir: &std::path::Path,
        name: &str,
        other: &str,
    ) -> std::sync::Arc<crate::run::select::build::TestBinary> {
        use std::os::unix::fs::PermissionsExt as _;
        let path = dir.join(name);
        let (mine, theirs) = (dir.join(format!("{name}.listing")), dir.join(format!("{other}.listing")));
        let script = format!(
            "#!/bin/sh\nfor arg; do [ \"$arg\" = --ignored ] && exit 0; done\ntouch '{}'\ni=0\n\
             while [ ! -e '{}' ]; do i=$((i + 1)); [ $i -gt 500 ] && {{ echo 'alone: test'; exit 0; }}; sleep 0.01; \
             done\necho 'together: test'\n",
            mine.display(),
            theirs.display()
        );
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::sync::Arc::new(crate::run::select::build::TestBinary {
            package: "pkg".to_owned(),
            name: name.to_owned(),
            kind: TargetKind::Test,
            path,
            package_dir: dir.to_owned(),
        })
    }

    #[test]
    fn binaries_list_their_tests_at_once_and_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let binaries = [waiting_binary(dir.path(), "first", "second"), waiting_binary(dir.path(), "second", "first")];
        let tests = super::discover(&binaries).unwrap();
        let listed: Vec<_> = tests.iter().map(|test| (test.binary.name.as_str(), test.name.as_str())).collect();
        // Listed one after the other, the first would have waited for the second in vain.
        assert_eq!(listed, [("first", "together"), ("second", "together")]);
        assert!(tests.iter().all(|test| !test.ignored));
    }

    #[test]
    fn ignored_tests_run_only_when_asked() {
        assert!(selection(&[], &[]).runs(false) && !selection(&[], &[]).runs(true));
        assert!(selection(&[], &["--ignored"]).runs(true) && !selection(&[], &["--ignored"]).runs(false));
        assert!(selection(&[], &["--include-ignored"]).runs(true));
    }

    /// A test binary that lists `a` and `b`, of which only `b` is ignored, as libtest does.
    #[cfg(unix)]
    fn listing_binary(dir: &std::path::Path) -> std::sync::Arc<crate::run::select::build::TestBinary> {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("lists");
        let script =
            "#!/bin/sh\ncase \"$*\" in *--ignored*) echo 'b: test' ;; *) printf 'a: test\\nb: test\\n' ;; esac\n";
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::sync::Arc::new(crate::run::select::build::TestBinary {
            package: "p".to_owned(),
            name: "t".to_owned(),
            kind: ying_report::TargetKind::Test,
            path,
            package_dir: dir.to_owned(),
        })
    }

    #[cfg(unix)]
    #[test]
    fn every_test_is_listed_marked_and_ignore_is_judged_as_nextest_judges_it() {
        let dir = tempfile::tempdir().unwrap();
        let binaries = [listing_binary(dir.path())];
        let found: Vec<(String, bool)> =
            super::discover(&binaries).unwrap().into_iter().map(|test| (test.name, test.ignored)).collect();
        assert_eq!(found, [("a".to_owned(), false), ("b".to_owned(), true)]);
        let mismatch = |args: &[&str], name: &str, ignored: bool| selection(&[], args).mismatch(&id(name), ignored);
        assert_eq!((mismatch(&[], "a", false), mismatch(&[], "b", true)), (None, Some(Mismatch::Ignored)));
        // Under `--ignored`, `a` is not ignored: it is not part of the run.
        assert_eq!(mismatch(&["--ignored"], "a", false), Some(Mismatch::Ignored));
        assert_eq!(mismatch(&["--ignored"], "b", true), None);
        assert_eq!(mismatch(&["--include-ignored"], "b", true), None);
        // The ignore is asked first, then the name, then the filtersets.
        assert_eq!(selection(&["zzz"], &[]).mismatch(&id("b"), true), Some(Mismatch::Ignored));
        assert_eq!(selection(&["zzz"], &[]).mismatch(&id("a"), false), Some(Mismatch::String));
        let sets = [Filterset::parse("test(=c)").unwrap()];
        let by_set = Selection::new(&[], &sets, &[]).unwrap();
        assert_eq!(by_set.mismatch(&id("a"), false), Some(Mismatch::Expression));
    }

    /// A binary that never ends its listing (a libtest binary blocked in a constructor, say) is ended at the
    /// listing's timeout with everything in its group, and the listing fails naming the timeout.
    #[test]
    #[cfg(unix)]
    fn a_listing_that_blocks_is_ended_at_its_timeout_with_its_group() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let mut command = std::process::Command::new("sh");
        command.arg("-c").arg(format!("sleep 30 & echo $! > {}; wait", pid_file.display()));
        let timeout = std::time::Duration::from_millis(500);
        let started = std::time::Instant::now();
        let result = list_output(command, timeout);
        assert!(matches!(result, Err(ListError::TimedOut(after)) if after == timeout), "{result:?}");
        assert!(started.elapsed() < std::time::Duration::from_secs(20), "it waited for the listing's end");
        let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
        let gone = (0..100).any(|_| {
            // SAFETY: kill(2) with signal 0 only asks whether the process exists.
            let alive = unsafe { libc::kill(pid, 0) } == 0
                && !std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default().contains(") Z ");
            if alive {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            !alive
        });
        assert!(gone, "the listing's child {pid} outlived it");
    }
}
