//! The production profiler (`profiler` feature): the runner's reports and flamegraphs, on a schedule and on demand.

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;
use ying::utils::{ProfilerRunnerBuilder, gen_flamegraph};

#[global_allocator]
static YING_ALLOC: ying::YingProfiler = ying::YingProfiler::new().sample_interval(4096);

/// The profiler reads process-wide figures: the tests here take turns, so that none sees another's memory move.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Report and flamegraph files in `dir`, sorted.
fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = match std::fs::read_dir(dir) {
        Ok(entries) => entries.map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned()).collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
}

/// `ying.<RFC 3339 time>.<N>MB.<extension>`.
fn is_report_name(name: &str, extension: &str) -> bool {
    let Some(rest) = name.strip_prefix("ying.").and_then(|rest| rest.strip_suffix(&format!("MB.{extension}"))) else {
        return false;
    };
    let Some((stamp, megabytes)) = rest.rsplit_once('.') else { return false };
    megabytes.chars().all(|c| c.is_ascii_digit()) && humantime_like(stamp)
}

/// `2026-11-29T10:45:00Z`.
fn humantime_like(stamp: &str) -> bool {
    let bytes = stamp.as_bytes();
    stamp.len() == 20
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && bytes[10] == b'T'
        && bytes[13] == b':'
        && bytes[16] == b':'
        && bytes[19] == b'Z'
}

#[inline(never)]
fn hold_megabytes(megabytes: usize) -> Vec<Box<[u8]>> {
    (0..megabytes).map(|_| black_box(vec![1u8; 1 << 20]).into_boxed_slice()).collect()
}

#[test]
fn the_runner_reports_when_memory_moves_and_not_when_it_is_flat() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let reports = dir.path().join("profiles");
    let runner = ProfilerRunnerBuilder::default()
        .check_interval_secs(1usize)
        .report_pct_change_trigger(10usize)
        .reporting_path(&reports)
        .gen_flamegraphs(true)
        .build()
        .unwrap();
    let held = hold_megabytes(20);
    let handle = runner.spawn(&YING_ALLOC);
    std::thread::sleep(Duration::from_millis(3500));
    let first = files(&reports);
    assert_eq!(first.len(), 2, "one report and its flamegraph for the first check: {first:?}");
    assert!(is_report_name(&first[0], "report") && is_report_name(&first[1], "svg"), "{first:?}");
    assert_eq!(first[0].trim_end_matches(".report"), first[1].trim_end_matches(".svg"), "the svg sits beside");

    // Flat: nothing new.
    std::thread::sleep(Duration::from_millis(3500));
    assert_eq!(files(&reports), first, "memory did not move: no new report");

    // Grows by far more than 10% of the last report: a new report.
    let more = hold_megabytes(20);
    std::thread::sleep(Duration::from_millis(3500));
    handle.stop();
    let after = files(&reports);
    // At least one new report (a check may land while the memory is still being filled, and report twice).
    assert!(after.len() >= 4, "{after:?}");
    for pair in after.chunks(2) {
        assert!(is_report_name(&pair[0], "report") && is_report_name(&pair[1], "svg"), "{after:?}");
        assert_eq!(pair[0].trim_end_matches(".report"), pair[1].trim_end_matches(".svg"), "{after:?}");
    }
    let report = std::fs::read_to_string(reports.join(&after[0])).unwrap();
    assert!(report.starts_with("ying memory report: "), "{report}");
    assert!(report.contains("profiler::hold_megabytes"), "the holding site is named:\n{report}");
    drop((held, more));
}

#[inline(never)]
fn churn_short_lived() {
    for _ in 0..200 {
        drop(black_box(vec![0u8; 8192]));
    }
}

#[test]
fn reports_carry_lifetimes_and_checks_compare_with_the_last_report() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let runner = ProfilerRunnerBuilder::default()
        .reporting_path(dir.path())
        .measure_allocated_not_retained(true)
        .build()
        .unwrap();
    churn_short_lived();
    let reported = runner.check(&YING_ALLOC, 0).unwrap().expect("the first check reports");
    assert_eq!(files(dir.path()).len(), 1, "no flamegraph unless asked");
    let report = std::fs::read_to_string(dir.path().join(&files(dir.path())[0])).unwrap();
    assert!(report.contains("bytes allocated, top"), "{report}");
    assert!(report.contains("freed allocations by lifetime: <1ms"), "{report}");
    // Compared with the last reported figure: within the trigger, no report.
    assert_eq!(runner.check(&YING_ALLOC, reported).unwrap(), None);
    assert_eq!(files(dir.path()).len(), 1);
}

#[inline(always)]
fn inlined_leak() -> &'static mut [u8] {
    Box::leak(black_box(vec![2u8; 64 * 1024]).into_boxed_slice())
}

#[inline(never)]
fn calls_inlined_leak() -> usize {
    inlined_leak().len()
}

#[test]
fn expand_frames_lists_inlined_functions() {
    let _alone = alone();
    calls_inlined_leak();
    let report_of = |expand: bool| {
        let dir = tempfile::tempdir().unwrap();
        let runner = ProfilerRunnerBuilder::default().reporting_path(dir.path()).expand_frames(expand).build().unwrap();
        runner.check(&YING_ALLOC, 0).unwrap();
        std::fs::read_to_string(dir.path().join(&files(dir.path())[0])).unwrap()
    };
    let (expanded, folded) = (report_of(true), report_of(false));
    assert!(
        expanded.contains("profiler::inlined_leak") && expanded.contains("profiler::calls_inlined_leak"),
        "{expanded}"
    );
    assert!(!folded.contains("profiler::inlined_leak ") && folded.contains("profiler::calls_inlined_leak"), "{folded}");
}

#[test]
fn a_flamegraph_on_demand() {
    let _alone = alone();
    calls_inlined_leak();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("retained.svg");
    gen_flamegraph(&YING_ALLOC, ying::Measurement::RetainedBytes, &path).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.starts_with("<?xml") && svg.contains("profiler::calls_inlined_leak"), "the leak is in the graph");
    let allocated = dir.path().join("allocated.svg");
    gen_flamegraph(&YING_ALLOC, ying::callstack::Measurement::AllocatedBytes, &allocated).unwrap();
    assert!(std::fs::read_to_string(&allocated).unwrap().contains("ying: allocated bytes"));
}

#[test]
fn a_write_error_names_the_path() {
    let _alone = alone();
    calls_inlined_leak();
    let dir = tempfile::tempdir().unwrap();
    // A file where the reports' directory should be.
    let blocked = dir.path().join("reports");
    std::fs::write(&blocked, "").unwrap();
    let runner = ProfilerRunnerBuilder::default().reporting_path(&blocked).build().unwrap();
    let error = runner.check(&YING_ALLOC, 0).unwrap_err().to_string();
    assert!(error.starts_with(&format!("could not create the directory {}: ", blocked.display())), "{error}");
    let svg = blocked.join("retained.svg");
    let error = gen_flamegraph(&YING_ALLOC, ying::Measurement::RetainedBytes, &svg).unwrap_err().to_string();
    assert!(error.starts_with(&format!("could not write {}: ", svg.display())), "{error}");
}

#[test]
fn start_profiling_is_the_runner_with_the_seeds_settings() {
    let _alone = alone();
    let handle = YING_ALLOC.start_profiling();
    let runner = handle.runner();
    assert_eq!(runner.check_interval_secs(), 300);
    assert_eq!(runner.report_pct_change_trigger(), 10);
    assert_eq!(runner.reporting_path(), Path::new("ying-profiles"));
    assert!(runner.gen_flamegraphs() && !runner.expand_frames());
    assert_eq!(runner.measurement(), ying::Measurement::RetainedBytes);
    handle.stop();
    assert!(ProfilerRunnerBuilder::default().check_interval_secs(0usize).build().is_err());
}
