//! `--measure all`: a suite with no ying dependency, attribute or global allocator (`fixtures/plain-tests`),
//! measured through the allocation interposer cargo ying builds and preloads.

use super::{Fixture, REGRESSED, TEST_FAILED, entry, stderr, stdout, summary};
use std::path::Path;
use ying_report::report::LeakReport;
use ying_report::{TargetKind, TestId};

/// What each test of the plain fixture retains, by (target, test): its own leak, exactly.
const RETAINED: [(&str, &str, u64); 9] = [
    ("plain", "leaks_a_box", 1000),
    ("plain", "clean", 0),
    ("plain", "panics", 0),
    ("plain", "leaks_from_c", 500),
    ("plain", "thread_leaks", 2000),
    ("plain", "caches_4000_bytes", 4000),
    ("plain", "leaves_a_thread_running", 0),
    ("plain-fixtures", "tests::keeps_300_bytes", 300),
    ("own_allocator", "leaks_through_its_allocator", 1000),
];

/// The report of the last run of test `name` of the plain fixture's `plain` target in `fixture`.
fn plain_report(fixture: &Fixture, name: &str) -> LeakReport {
    let summary = summary(&fixture.target_dir());
    let test = entry(&summary, "plain", name);
    let id = TestId::new("plain-fixtures", TargetKind::Test, "plain", name);
    LeakReport::read(&fixture.target_dir().join("ying").join(test["report"].as_str().unwrap()), &id).unwrap()
}

/// The figures of each test of the last run in `fixture`, in [`RETAINED`]'s order: retained, peak, allocated,
/// allocations.
fn figures(fixture: &Fixture) -> Vec<[u64; 4]> {
    let summary = summary(&fixture.target_dir());
    RETAINED
        .iter()
        .map(|(target, name, _)| {
            let test = entry(&summary, target, name);
            ["retained_bytes", "peak_bytes", "allocated_bytes", "allocations"]
                .map(|key| test[key].as_u64().unwrap_or_else(|| panic!("{target} {name} has its {key}: {test}")))
        })
        .collect()
}

/// What each test of the last run in `fixture` says of where it retained memory, in [`RETAINED`]'s order: its
/// sites by key (summary.json), the frames of its report's retained sites (function, file, line) and its retained
/// flamegraph.
fn sites(fixture: &Fixture) -> Vec<(serde_json::Value, Vec<String>, Option<String>)> {
    let summary = summary(&fixture.target_dir());
    let out = fixture.target_dir().join("ying");
    RETAINED
        .iter()
        .map(|(target, name, _)| {
            let test = entry(&summary, target, name);
            let report: serde_json::Value =
                serde_json::from_slice(&std::fs::read(out.join(test["report"].as_str().unwrap())).unwrap()).unwrap();
            let frames = report["retained_sites"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|site| site["frames"].as_array().unwrap())
                .map(|frame| format!("{} at {}:{}", frame["function"], frame["file"], frame["line"]))
                .collect();
            let flamegraph =
                test["retained_flamegraph"].as_str().map(|svg| std::fs::read_to_string(out.join(svg)).unwrap());
            (test["sites"].clone(), frames, flamegraph)
        })
        .collect()
}

#[test]
fn every_test_of_a_suite_without_ying_is_measured_exactly() {
    let fixture = Fixture::plain();

    // As before: no test of the suite is a leak test, so nothing is measured, and the run says so and how to
    // measure, instead of how to save a baseline.
    let output = fixture.cargo_ying(&[], &[]);
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), stderr(&output));
    assert_eq!(output.status.code(), Some(0), "{said}");
    assert!(entry(&summary(&fixture.target_dir()), "plain", "leaks_a_box")["retained_bytes"].is_null());
    let nothing = "0 tests measured: add #[ying::leak_test] or run with --measure all";
    assert_eq!(said.matches(nothing).count(), 1, "{said}");
    assert!(!said.contains("--save-baseline (or cargo ying accept) writes one"), "{said}");
    // A baseline of nothing is not saved, by the run or by `accept` after it: exit 2, no file.
    let baseline = fixture.path().join("ying-baseline.json");
    for (subcommand, args) in [("test", &["--save-baseline"][..]), ("accept", &[])] {
        let output = fixture.subcommand(subcommand, args, &[]).output().unwrap();
        let stderr = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{subcommand}: {stderr}");
        let error = format!("error: failed to save the baseline {}: {nothing}", baseline.display());
        assert!(stderr.contains(&error), "{subcommand}: {stderr}");
        assert!(!baseline.exists(), "{subcommand}");
    }

    let output = fixture.cargo_ying(&["--measure", "all"], &[]);
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "no budgets: every test passes\n{stderr}");
    let retained: Vec<u64> = figures(&fixture).iter().map(|figures| figures[0]).collect();
    assert_eq!(retained, RETAINED.map(|(_, _, bytes)| bytes), "{stderr}");

    // A binary with a global allocator of its own is measured for what reaches `malloc`, and says so, once.
    let note = "note plain-fixtures::own_allocator: the test binary has a global allocator of its own";
    assert_eq!(stderr.matches(note).count(), 1, "{stderr}");
    assert_eq!(stderr.matches("note ").count(), 1, "{stderr}");

    // The C library's block is named at the line that called `malloc`, the interposer's frames cut.
    let report = plain_report(&fixture, "leaks_from_c");
    let sites: Vec<_> = report.retained_sites.iter().filter(|site| !site.excused).collect();
    assert_eq!(sites.len(), 1, "{sites:#?}");
    let first = &sites[0].frames[0];
    assert_eq!((sites[0].bytes, first.function.as_str()), (500, "plain::leaks_from_c"), "{sites:#?}");
    assert_eq!(first.file.as_deref(), Some("tests/plain.rs"));

    // A Rust allocation's site, named by cargo ying from the executable's frames alone (the interposer's `malloc`,
    // the allocator entry, is not among them), starts where the code allocates, not in the allocation plumbing.
    let report = plain_report(&fixture, "leaks_a_box");
    let site = report.retained_sites.iter().find(|site| !site.excused).unwrap();
    let kinds: Vec<_> = site.why.iter().map(|why| why.kind).collect();
    assert_eq!(kinds, [ying_report::report::Reach::Lost], "a leaked box nothing points to is lost: {site:#?}");
    assert!(!ying_frames::is_allocation_plumbing(&site.frames[0]), "{site:#?}");
    assert!(site.frames.iter().take(4).any(|frame| frame.function == "plain::leaks_a_box"), "{site:#?}");
}

#[test]
fn a_panicking_tests_figures_do_not_depend_on_rust_backtrace() {
    let fixture = Fixture::plain_shared();
    // The panic hook's work (the message, and under RUST_BACKTRACE=1 a backtrace whose naming reads and keeps the
    // executable's debug information, megabytes) is not the test's, as in a leak test.
    let figures = |backtrace: &str| {
        let args = ["--measure", "all", "--test", "plain", "panics"];
        let output = fixture.cargo_ying(&args, &[("RUST_BACKTRACE", backtrace)]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let summary = summary(&fixture.target_dir());
        let test = entry(&summary, "plain", "panics");
        assert_eq!(test["retained_bytes"], 0, "{test}");
        let report = plain_report(&fixture, "panics");
        let figures = report.figures;
        [figures.retained_bytes, figures.peak_bytes, figures.allocated_bytes, figures.allocations, report.excused_bytes]
    };
    let without = figures("0");
    assert!(without[1] < 1 << 20, "no debug information read: {without:?}");
    for backtrace in ["1", "full"] {
        let with = figures(backtrace);
        // Retained, peak and excused bytes are the same; the hook, outside the walk, also reads the working
        // directory to print the frames' paths from it: one buffer, allocated and freed.
        assert_eq!([with[0], with[1], with[4]], [without[0], without[1], without[4]], "RUST_BACKTRACE={backtrace}");
        assert!(with[2] - without[2] <= 1024 && with[3] - without[3] <= 1, "{with:?} against {without:?}");
    }
}

#[test]
fn a_deterministic_tests_figures_are_the_same_in_ten_runs() {
    let fixture = Fixture::plain_shared();
    let mut runs = Vec::new();
    for _ in 0..10 {
        let output = fixture.cargo_ying(&["--measure", "all"], &[]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        runs.push(figures(&fixture));
    }
    for run in &runs[1..] {
        assert_eq!(run, &runs[0]);
    }
}

#[test]
fn a_baseline_is_a_line_a_test_that_moved_lines_leave_as_it_was_and_a_grown_leak_regresses_in_its_function() {
    let fixture = Fixture::plain();
    let path = fixture.path().join("ying-baseline.json");
    let output = fixture.cargo_ying(&["--measure", "all", "--save-baseline"], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let saved = std::fs::read_to_string(&path).unwrap();

    // A line a test, each at most 400 characters, at most 300 bytes a test, and no line of the sources in it.
    let lines: Vec<&str> = saved.lines().filter(|line| line.starts_with("    \"")).collect();
    assert_eq!(lines.len(), RETAINED.len(), "{saved}");
    assert!(lines.iter().all(|line| line.chars().count() <= 400), "{saved}");
    assert!(saved.len() <= 300 * lines.len(), "{} bytes for {} tests: {saved}", saved.len(), lines.len());
    let has_line_number =
        |text: &str| text.split(".rs:").skip(1).any(|after| after.starts_with(|c: char| c.is_ascii_digit()));
    assert!(!has_line_number(&saved), "{saved}");
    assert!(saved.contains("\"measured\": \"all\""), "{saved}");
    let caches = lines.iter().find(|line| line.contains("caches_4000_bytes\":")).unwrap();
    assert!(caches.contains("\"sites\": {\"plain::caches_4000_bytes\": 4000}"), "keyed by its function: {caches}");

    // Every line of the sources moved down: saved anew, the baseline is the same, byte for byte.
    for file in ["tests/plain.rs", "tests/own_allocator.rs", "src/lib.rs"] {
        let source = fixture.path().join(file);
        let text = std::fs::read_to_string(&source).unwrap();
        std::fs::write(&source, format!("// Moved.\n\n\n{text}")).unwrap();
    }
    std::fs::remove_file(&path).unwrap();
    let output = fixture.cargo_ying(&["--measure", "all", "--save-baseline"], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), saved, "lines moved: no byte of the baseline changed");

    // Checked by a run that measures leak tests only (there are none): one line says so, and --check fails.
    let output = fixture.cargo_ying(&[], &[]);
    let said = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{said}");
    assert!(!said.contains("missing"), "{said}");
    let line = "was saved with --measure all and this run measured leak tests only: 9 of its tests not compared";
    assert_eq!(said.matches(line).count(), 1, "{said}");
    assert_eq!(fixture.cargo_ying(&["--check"], &[]).status.code(), REGRESSED);

    // One leak grows: the test regresses, and the diff flamegraph gives its function, at its line now, the change.
    let tests = fixture.path().join("tests/plain.rs");
    let source = std::fs::read_to_string(&tests).unwrap();
    let grown = source.replacen("vec![0u8; 4000]", "vec![0u8; 8000]", 1);
    assert_ne!(grown, source);
    std::fs::write(&tests, grown).unwrap();
    let output = fixture.cargo_ying(&["--measure", "all"], &[]);
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), REGRESSED, "the gate fails the run\n{stderr}");
    let summary = summary(&fixture.target_dir());
    let grown = entry(&summary, "plain", "caches_4000_bytes");
    assert_eq!((grown["gate"].as_str(), grown["retained_bytes"].as_u64()), (Some("regressed"), Some(8000)));
    assert_eq!(entry(&summary, "plain", "leaks_a_box")["gate"], "unchanged", "{stderr}");
    let diff = fixture.target_dir().join("ying").join(grown["retained_diff_flamegraph"].as_str().unwrap());
    let svg = std::fs::read_to_string(diff).unwrap();
    let line = source.lines().position(|line| line.contains("vec![0u8; 4000]")).unwrap() + 1;
    let title = format!("<title>plain::caches_4000_bytes at tests/plain.rs:{line} (8,000 bytes, 100.00%; +50.00%)");
    assert!(svg.contains(&title), "{title} in {svg}");
}

#[test]
fn a_leak_test_keeps_its_own_figures_and_verdict() {
    let fixture = Fixture::shared();
    let output = fixture.cargo_ying(&["--measure", "all", "--test", "leaks", "box_leak"], &[]);
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), TEST_FAILED, "its budget fails it\n{stderr}");
    let summary = summary(&fixture.target_dir());
    let box_leak = entry(&summary, "leaks", "box_leak");
    assert_eq!((box_leak["outcome"].as_str(), box_leak["retained_bytes"].as_u64()), (Some("failed"), Some(1000)));
    assert_eq!(box_leak["allocations"], 1, "the leak test's own scope, not the interposer's window: {box_leak}");
}

/// A plain test that fills a 24 KiB table once, for the rest of the process: a floor of reachable memory under it.
const STATIC_FLOOR: &str = r#"
static TABLE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();

#[test]
fn fills_a_table_once() {
    assert_eq!(TABLE.get_or_init(|| vec![1u8; 24 * 1024]).len(), 24 * 1024);
}
"#;

#[test]
fn a_small_lost_leak_beside_a_static_floor_regresses_every_time_and_says_where() {
    let fixture = Fixture::plain();
    let tests = fixture.path().join("tests/plain.rs");
    let source = std::fs::read_to_string(&tests).unwrap() + STATIC_FLOOR;
    std::fs::write(&tests, &source).unwrap();
    let only = ["--measure", "all", "--test", "plain", "fills_a_table_once"];
    let output = fixture.cargo_ying(&[&only[..], &["--save-baseline"]].concat(), &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));

    // The floor is held by its static, and nothing of it is lost.
    let report = plain_report(&fixture, "fills_a_table_once");
    let floor = report.retained_sites.iter().find(|site| site.bytes == 24 * 1024).expect("the table's site");
    let kinds: Vec<_> = floor.why.iter().map(|why| (why.kind, why.root.as_deref())).collect();
    assert_eq!(kinds, [(ying_report::report::Reach::Static, Some("plain::TABLE"))], "{floor:#?}");
    assert_eq!(report.lost_bytes(), 0, "{:#?}", report.retained_sites);

    // Unchanged, the test passes the gate.
    for _ in 0..2 {
        let output = fixture.cargo_ying(&only, &[]);
        assert_eq!(output.status.code(), Some(0), "an unchanged run passes\n{}", stderr(&output));
    }

    // 512 B forgotten beside it: 2% more retained, within the tolerance, but lost.
    let leaking = source.replace(
        "    assert_eq!(TABLE.get_or_init(|| vec![1u8; 24 * 1024]).len(), 24 * 1024);\n",
        "    assert_eq!(TABLE.get_or_init(|| vec![1u8; 24 * 1024]).len(), 24 * 1024);\n    \
         std::mem::forget(std::hint::black_box(vec![0u8; 512]));\n",
    );
    assert_ne!(leaking, source);
    std::fs::write(&tests, &leaking).unwrap();
    let line = leaking.lines().position(|line| line.contains("std::mem::forget")).unwrap() + 1;
    let site = format!("lost (nothing points to it), at tests/plain.rs:{line} in plain::fills_a_table_once");
    let junit = fixture.path().join("junit.xml");
    for run in 0..3 {
        let output = fixture.cargo_ying(&[&only[..], &["--junit", junit.to_str().unwrap()]].concat(), &[]);
        let stderr = stderr(&output);
        assert_eq!(output.status.code(), REGRESSED, "run {run}: the gate fails the run\n{stderr}");
        assert!(stderr.contains("lost bytes 0 -> 512"), "run {run}\n{stderr}");
        assert!(stderr.contains(&format!("512 B in 1 block of u8, {site}")), "run {run}\n{stderr}");
        let xml = std::fs::read_to_string(&junit).unwrap();
        assert!(xml.contains(&site), "run {run}\n{xml}");
    }
}

/// Tests of a static registry three of them fill (as tokio's signal handlers), and of a static cache.
const STATIC_TESTS: &str = r#"
mod registry {
    static REGISTRY: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();

    pub fn globals() -> &'static [u8] {
        REGISTRY.get_or_init(|| vec![7u8; 2048])
    }
}

#[test]
fn registers_first() {
    assert_eq!(std::hint::black_box(registry::globals()).len(), 2048);
}

#[test]
fn registers_second() {
    assert_eq!(std::hint::black_box(registry::globals()).len(), 2048);
}

#[test]
fn registers_third() {
    assert_eq!(std::hint::black_box(registry::globals()).len(), 2048);
}

static CACHE: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());

#[test]
fn caches_entries() {
    CACHE.lock().unwrap().push(std::hint::black_box(vec![1u8; 728]));
}
"#;

#[test]
fn a_static_cache_grown_within_the_tolerance_regresses_by_the_held_floor_and_a_shared_static_is_named_once() {
    let fixture = Fixture::plain();
    let tests = fixture.path().join("tests/plain.rs");
    let source = std::fs::read_to_string(&tests).unwrap() + STATIC_TESTS;
    std::fs::write(&tests, &source).unwrap();
    let only = ["--measure", "all", "--test", "plain", "registers_", "caches_entries"];
    let output = fixture.cargo_ying(&[&only[..], &["--save-baseline"]].concat(), &[]);
    let said = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{said}");
    // Named once, with the line that excuses it: its module, which the frames that filled it read.
    assert!(
        said.contains(
            "note 3 tests retain memory held by static plain::registry::REGISTRY (at most 2.0 KiB in one); if it is \
             the process's own state, `allow = [\"plain::registry::\"]` under [workspace.metadata.ying] excuses it \
             in every test"
        ),
        "{said}"
    );
    let html = std::fs::read_to_string(fixture.path().join("target/ying/index.html")).unwrap();
    assert!(html.contains("<td><code>plain::registry::REGISTRY</code></td><td class=\"n\">3</td>"), "{html}");
    let baseline = std::fs::read_to_string(fixture.path().join("ying-baseline.json")).unwrap();
    let line = baseline.lines().find(|line| line.contains("caches_entries")).unwrap();
    assert!(line.contains("\"retained\": 824, \"lost\": 0, \"held\": 824"), "{line}");

    // One more entry of 600 B: within the tolerance of the retained bytes (1 KiB), past the held floor (512 B).
    let grown = source.replace(
        "    CACHE.lock().unwrap().push(std::hint::black_box(vec![1u8; 728]));\n",
        "    CACHE.lock().unwrap().push(std::hint::black_box(vec![1u8; 728]));\n    \
         CACHE.lock().unwrap().push(std::hint::black_box(vec![1u8; 600]));\n",
    );
    assert_ne!(grown, source);
    std::fs::write(&tests, &grown).unwrap();
    let output = fixture.cargo_ying(&only, &[]);
    let said = stderr(&output);
    assert_eq!(output.status.code(), REGRESSED, "{said}");
    assert!(said.contains("caches_entries: held bytes 824 -> 1424 (past the held floor)"), "{said}");
    assert!(!said.contains("retained bytes 824 -> 1424"), "the tolerance let the retained bytes through\n{said}");
}

/// A plain test whose allocation is made by a Rust callback that the C library calls (`qsort` calling a
/// comparator), as zlib calls flate2's `zalloc`.
const C_CALLS_BACK: &str = r#"
unsafe extern "C" {
    fn qsort(
        base: *mut core::ffi::c_void,
        count: usize,
        size: usize,
        compare: extern "C" fn(*const core::ffi::c_void, *const core::ffi::c_void) -> i32,
    );
}

extern "C" fn compare_and_leak(a: *const core::ffi::c_void, b: *const core::ffi::c_void) -> i32 {
    std::mem::forget(std::hint::black_box(vec![0u8; 64]));
    // SAFETY: qsort passes pointers to two elements of the array below, each a `u32`.
    unsafe { (*a.cast::<u32>()).cmp(&*b.cast::<u32>()) as i32 }
}

#[test]
fn sorts_through_the_c_library() {
    let mut numbers = [3u32, 1, 2];
    // SAFETY: three `u32`s, sorted in place with a comparator of `u32`s.
    unsafe { qsort(numbers.as_mut_ptr().cast(), 3, 4, compare_and_leak) };
    assert_eq!(numbers, [1, 2, 3]);
}
"#;

#[test]
fn a_stack_through_a_shared_library_keeps_its_c_frames() {
    let fixture = Fixture::plain();
    let tests = fixture.path().join("tests/plain.rs");
    std::fs::write(&tests, std::fs::read_to_string(&tests).unwrap() + C_CALLS_BACK).unwrap();
    let output = fixture.cargo_ying(&["--measure", "all", "--test", "plain", "sorts_through_the_c_library"], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report = plain_report(&fixture, "sorts_through_the_c_library");
    let site = report.retained_sites.iter().find(|site| site.bytes % 64 == 0 && !site.excused).expect("the leak");
    let functions: Vec<&str> = site.frames.iter().map(|frame| frame.function.as_str()).collect();
    let callback = functions.iter().position(|f| *f == "plain::compare_and_leak").expect("the callback");
    let test_frame = functions.iter().position(|f| *f == "plain::sorts_through_the_c_library").expect("the test");
    // Between the callback and the test, the C library's frames (`msort_with_tmp`, `qsort_r`), named by the
    // process from its symbols.
    let between = &functions[callback + 1..test_frame];
    assert!(!between.is_empty() && between.iter().all(|f| !f.starts_with("plain::")), "{functions:#?}");
    assert!(between.iter().any(|function| function.contains("sort")), "{functions:#?}");
}

/// A test of a registry kept in a static, as tokio keeps its signal handlers: filled once, for the process's life.
const REGISTRY_TESTS: &str = r#"
static REGISTRY: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();

fn globals() -> &'static [u8] {
    REGISTRY.get_or_init(|| vec![7u8; 2048])
}

#[test]
fn registers() {
    assert_eq!(std::hint::black_box(globals()).len(), 2048);
}
"#;

/// Appends `allow` to the `[workspace.metadata.ying]` table of the fixture's manifest (which has none).
fn allow_in_workspace(fixture: &Fixture, patterns: &str) {
    let manifest = fixture.path().join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    assert!(!text.contains("[workspace.metadata.ying]"));
    std::fs::write(&manifest, format!("{text}\n[workspace.metadata.ying]\nallow = {patterns}\n")).unwrap();
}

#[test]
fn the_workspaces_allow_excuses_a_static_under_measure_all_and_a_leak_tests_site_alike() {
    let fixture = Fixture::plain();
    std::fs::write(fixture.path().join("tests/registry.rs"), REGISTRY_TESTS).unwrap();
    let run = || fixture.cargo_ying(&["--measure", "all", "--test", "registry"], &[]);
    let output = run();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let test = entry(&summary(&fixture.target_dir()), "registry", "registers").clone();
    assert_eq!(test["retained_bytes"], 2048, "the static's value is retained: {test}");

    allow_in_workspace(&fixture, r#"["registry::globals"]"#);
    let output = run();
    let said = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{said}");
    let test = entry(&summary(&fixture.target_dir()), "registry", "registers").clone();
    assert_eq!(test["retained_bytes"], 0, "excused by the workspace's pattern: {test}");
    assert!(test["excused_bytes"].as_u64().unwrap() >= 2048, "and shown as excused: {test}");
    let row = said.lines().find(|line| line.starts_with("plain-fixtures::registry registers")).unwrap();
    let columns: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(columns[2], "0", "retained: {said}");
    assert!(columns[3].parse::<u64>().unwrap() >= 2048, "excused: {said}");
    assert!(said.contains(" retained     excused "), "{said}");

    // A pattern the attribute would refuse is refused here too, naming the key: exit 2, nothing run.
    let manifest = fixture.path().join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replace(r#"["registry::globals"]"#, r#"["registry::globals", ""]"#)).unwrap();
    let output = run();
    let said = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{said}");
    assert!(said.contains("`allow`: pattern 2 is empty, which would excuse everything"), "{said}");
    assert!(!said.contains("Starting"), "{said}");

    // A leak test is excused by the same key, beside its attribute's own patterns.
    let leaks = Fixture::new();
    let run = || leaks.cargo_ying(&["--test", "leaks", "session_leak"], &[]);
    assert_eq!(run().status.code(), TEST_FAILED, "the leak fails its test without the pattern");
    allow_in_workspace(&leaks, r#"["leak_fixtures::open_session"]"#);
    let output = run();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let test = entry(&summary(&leaks.target_dir()), "leaks", "session_leak").clone();
    assert_eq!(test["retained_bytes"], 0, "{test}");
    assert!(test["excused_bytes"].as_u64().unwrap() > 0, "{test}");
}

/// cargo-ying's own command line, `cargo-ying ying <args>`, in `dir`, with the tests' cleaned environment and
/// `fixture`'s target directory.
fn cargo_ying_in(fixture: &Fixture, dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    let mut command = super::cleaned(env!("CARGO_BIN_EXE_cargo-ying"), &fixture.target_dir());
    command.arg("ying").args(args).current_dir(dir).output().unwrap()
}

/// `cargo nextest <args>` in `dir`, with the tests' cleaned environment (cargo-ying on the `PATH`) and `fixture`'s
/// target directory.
fn nextest_in(fixture: &Fixture, dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    let mut command = super::cleaned("cargo", &fixture.target_dir());
    command.arg("nextest").args(args).current_dir(dir).output().unwrap()
}

/// nextest measures: `cargo ying setup nextest` adds the profile, `cargo nextest run --profile ying` runs every test
/// through cargo-ying, and `cargo ying gate` gives the figures `cargo ying test --measure all` gives, saves them, and
/// fails a test that then loses 8 KiB, naming it. An archive of the profile runs on a workspace that holds only its
/// manifest, baseline and `.config/`, with the same figures.
#[test]
fn nextests_runs_measured_through_the_profile_setup_writes_are_gated_as_measure_all_gates() {
    let fixture = Fixture::plain();
    let manifest = fixture.path().join("Cargo.toml");
    let manifest = manifest.to_str().unwrap();

    let setup = cargo_ying_in(&fixture, fixture.path(), &["setup", "nextest", "--manifest-path", manifest]);
    assert_eq!(setup.status.code(), Some(0), "{}", stderr(&setup));
    let config = std::fs::read_to_string(fixture.path().join(".config/nextest.toml")).unwrap();
    assert!(config.contains("command = \"ying-wrap\""), "{config}");
    let again = cargo_ying_in(&fixture, fixture.path(), &["setup", "nextest", "--manifest-path", manifest]);
    assert!(stderr(&again).contains("has the profile `ying` already"), "{}", stderr(&again));
    assert_eq!(std::fs::read_to_string(fixture.path().join(".config/nextest.toml")).unwrap(), config);

    let measured = fixture.cargo_ying(&["--measure", "all"], &[]);
    assert_eq!(measured.status.code(), Some(0), "{}", stderr(&measured));
    let expected = figures(&fixture);
    assert_eq!(expected.iter().map(|figures| figures[0]).collect::<Vec<_>>(), RETAINED.map(|(_, _, bytes)| bytes));

    let run = fixture.nextest(&["run", "--profile", "ying"]);
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let gate = fixture.subcommand("gate", &["--save-baseline"], &[]).output().unwrap();
    assert_eq!(gate.status.code(), Some(0), "{}", stderr(&gate));
    assert_eq!(figures(&fixture), expected, "the figures of nextest's run are those of cargo ying's");
    let local_sites = sites(&fixture);
    let in_the_package = |frame: &String| frame.contains(" at \"tests/plain.rs\":");
    assert!(local_sites.iter().any(|(_, frames, _)| frames.iter().any(in_the_package)), "{local_sites:?}");
    let baseline = fixture.path().join("ying-baseline.json");
    let local_baseline = std::fs::read_to_string(&baseline).unwrap();
    let saved = ying_report::Baseline::read(&baseline).unwrap().unwrap();
    assert_eq!((saved.tests.len(), saved.measured), (RETAINED.len(), ying_report::Measured::All));

    // Built once, run where only the manifest, the baseline and nextest's configuration are.
    let archive_dir = tempfile::tempdir().unwrap();
    let archive = archive_dir.path().join("tests.tar.zst");
    let archive = archive.to_str().unwrap();
    let archived = nextest_in(&fixture, fixture.path(), &["archive", "--profile", "ying", "--archive-file", archive]);
    assert_eq!(archived.status.code(), Some(0), "{}", stderr(&archived));
    // The workspace moves: the archive's binaries name its files where they were built.
    let remap = tempfile::tempdir().unwrap();
    std::fs::copy(fixture.path().join("Cargo.toml"), remap.path().join("Cargo.toml")).unwrap();
    std::fs::create_dir(remap.path().join(".config")).unwrap();
    std::fs::write(remap.path().join(".config/nextest.toml"), &config).unwrap();
    let remapped = remap.path().to_str().unwrap();
    let _ = std::fs::remove_file(fixture.target_dir().join("ying/summary.json"));
    let run = nextest_in(
        &fixture,
        remap.path(),
        &["run", "--archive-file", archive, "--workspace-remap", remapped, "--profile", "ying"],
    );
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let gate_args = ["gate", "--archive-file", archive, "--workspace-remap", remapped, "--save-baseline"];
    let gate = cargo_ying_in(&fixture, remap.path(), &gate_args);
    assert_eq!(gate.status.code(), Some(0), "{}", stderr(&gate));
    assert_eq!(figures(&fixture), expected, "the figures of the archive's run are those of cargo ying's");
    assert_eq!(
        sites(&fixture),
        local_sites,
        "its sites' keys, frames and lines, and its flamegraphs, are a local run's"
    );
    let archived_baseline = std::fs::read_to_string(remap.path().join("ying-baseline.json")).unwrap();
    assert_eq!(archived_baseline, local_baseline, "the baseline it saves is the one a local run saves");
    std::fs::copy(&baseline, remap.path().join("ying-baseline.json")).unwrap();
    let gate = cargo_ying_in(&fixture, remap.path(), &gate_args[..5]);
    assert_eq!(gate.status.code(), Some(0), "{}", stderr(&gate));
    assert!(stderr(&gate).contains("no leak test's retained memory changed"), "{}", stderr(&gate));

    // A test loses 8 KiB more: the gate fails, naming it and the line.
    let tests = fixture.path().join("tests/plain.rs");
    let source = std::fs::read_to_string(&tests).unwrap();
    let grown = source.replacen(
        "    assert_eq!(black_box(numbers).len(), 100);\n}",
        "    assert_eq!(black_box(numbers).len(), 100);\n    std::mem::forget(black_box(vec![0u8; 8192]));\n}",
        1,
    );
    assert_ne!(grown, source);
    std::fs::write(&tests, grown).unwrap();
    let run = fixture.nextest(&["run", "--profile", "ying"]);
    assert_eq!(run.status.code(), Some(0), "nextest sees a passing test: {}", stderr(&run));
    let gate = fixture.subcommand("gate", &[], &[]).output().unwrap();
    let said = stderr(&gate);
    assert_eq!(gate.status.code(), REGRESSED, "{said}");
    assert!(said.contains("REGRESSED plain-fixtures::plain clean: retained bytes 0 -> 8192"), "{said}");
    assert!(said.contains("8.0 KiB (8192 bytes) in 1 block of u8, lost"), "{said}");

    // The wrapper outside nextest says what it is for.
    let alone = cargo_ying_in(&fixture, fixture.path(), &["wrap", "/bin/true"]);
    assert_eq!(alone.status.code(), Some(2));
    assert!(stderr(&alone).contains("NEXTEST_RUN_ID is not set"), "{}", stderr(&alone));
}

/// The gate knows every test nextest started, and what it did not run: a test that ran to its timeout is timed
/// out, one killed before it ended (deaf to SIGTERM) is stopped, never absent, and a run whose only test was killed
/// is that run, not the one before; a flaky test reads as nextest reads it, its failed attempt shown; what nextest's
/// filter skipped and what it ignored are named; a test of the baseline that the run's binaries (listed, or those of
/// an archive) do not hold is missing.
#[test]
fn the_gate_knows_every_test_nextest_started_skipped_ignored_or_killed() {
    let fixture = Fixture::plain();
    let manifest = fixture.path().join("Cargo.toml");
    let setup =
        cargo_ying_in(&fixture, fixture.path(), &["setup", "nextest", "--manifest-path", manifest.to_str().unwrap()]);
    assert_eq!(setup.status.code(), Some(0), "{}", stderr(&setup));
    let config = fixture.path().join(".config/nextest.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(
        "\n[profile.ying]\nslow-timeout = { period = \"1s\", terminate-after = 2, grace-period = \"1s\" }\nretries = 1\n",
    );
    std::fs::write(&config, text).unwrap();
    let nextest = |args: &[&str], envs: &[(&str, &str)]| {
        let mut command = super::cleaned("cargo", &fixture.target_dir());
        command.arg("nextest").args(args).arg("--manifest-path").arg(&manifest).envs(envs.iter().copied());
        command.output().unwrap()
    };
    let gate = |args: &[&str]| fixture.subcommand("gate", args, &[]).output().unwrap();

    let run = nextest(
        &["run", "--profile", "ying", "--no-fail-fast", "-E", "not test(=thread_leaks)"],
        &[("YING_FIXTURE_HANG", "1"), ("YING_FIXTURE_FLAKY", "1")],
    );
    assert_eq!(run.status.code(), TEST_FAILED, "{}", stderr(&run));
    let output = gate(&["--save-baseline"]);
    let said = stderr(&output);
    assert_eq!(output.status.code(), TEST_FAILED, "{said}");
    assert!(
        said.contains("TIMEOUT [") && said.contains("plain-fixtures::plain clean (timed out after 2.000s)"),
        "{said}"
    );
    assert!(said.contains("TRY 1 FAIL [") && said.contains("FLAKY 2/2 ["), "as nextest says it: {said}");
    assert!(said.contains("SKIPPED 1 test nextest listed and did not run (its filter)"), "{said}");
    let totals = said.lines().find(|line| line.contains("Summary [")).unwrap_or_default();
    assert!(totals.contains("8 tests run: 7 passed (1 flaky), 1 timed out, 1 ignored"), "{totals}");
    let first = summary(&fixture.target_dir());
    assert_eq!(entry(&first, "plain", "clean")["outcome"], "timed-out", "{first}");
    assert_eq!(entry(&first, "plain", "ignored_unless_asked")["outcome"], "ignored", "{first}");
    assert_eq!(first["skipped"].as_array().map(Vec::len), Some(1), "{first}");
    assert_eq!(
        (&first["skipped"][0]["target"], &first["skipped"][0]["name"]),
        (&"plain".into(), &"thread_leaks".into())
    );
    assert!(first["nextest_run_id"].as_str().is_some_and(|id| said.contains(id)), "{first}");

    // Deaf to SIGTERM: nextest kills it and its wrapper with SIGKILL. That run, its only test, is the one judged.
    let run = nextest(&["run", "--profile", "ying", "-E", "test(=clean)"], &[("YING_FIXTURE_HANG", "stubborn")]);
    assert_eq!(run.status.code(), TEST_FAILED, "{}", stderr(&run));
    let output = gate(&[]);
    let said = stderr(&output);
    assert_eq!(output.status.code(), TEST_FAILED, "{said}");
    assert!(said.contains("Gating 1 tests nextest ran"), "{said}");
    assert!(said.contains("STOPPED [") && said.contains("killed before it ended, without a word"), "{said}");
    let killed = summary(&fixture.target_dir());
    assert_eq!(entry(&killed, "plain", "clean")["outcome"], "crashed", "{killed}");
    // The killed wrapper's scratch directory went with the gate.
    let run_id = killed["nextest_run_id"].as_str().unwrap();
    let run_dir = fixture.target_dir().join("ying/nextest").join(run_id);
    assert!(run_dir.join("tests").is_dir() && !run_dir.join("tmp").exists(), "{}", run_dir.display());

    // nextest captured a failing assert's output; the wrapper kept its message for the gate's outputs.
    let run = nextest(&["run", "--profile", "ying", "-E", "test(=caches_4000_bytes)"], &[("YING_FIXTURE_FAIL", "1")]);
    assert_eq!(run.status.code(), TEST_FAILED, "{}", stderr(&run));
    let junit_dir = tempfile::tempdir().unwrap();
    let junit = junit_dir.path().join("junit.xml");
    let output = gate(&["--junit", junit.to_str().unwrap()]);
    assert_eq!(output.status.code(), TEST_FAILED, "{}", stderr(&output));
    let asserted = "assertion `left == right` failed: the fixture was asked to fail";
    let failed = summary(&fixture.target_dir());
    let reason = entry(&failed, "plain", "caches_4000_bytes")["reason"].as_str().unwrap_or_default().to_owned();
    assert!(reason.starts_with("panicked at tests/plain.rs:") && reason.ends_with(asserted), "{failed}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    super::xsd::assert_valid_junit(&junit);
    assert!(xml.contains(&format!("message=\"{reason}\"")), "{xml}");
    assert!(xml.contains("the fixture was asked to fail"), "the last lines of its output: {xml}");

    // A test of the baseline the run's binaries do not hold is missing; the archive's binaries tell it as well as
    // nextest's listing.
    let baseline = fixture.path().join("ying-baseline.json");
    let saved = std::fs::read_to_string(&baseline).unwrap();
    let gone = saved.replacen("plain-fixtures::plain leaks_from_c", "plain-fixtures::plain renamed_away", 1);
    assert_ne!(gone, saved);
    std::fs::write(&baseline, gone).unwrap();
    let archive_dir = tempfile::tempdir().unwrap();
    let archive = archive_dir.path().join("tests.tar.zst");
    let archive = archive.to_str().unwrap();
    let archived = nextest(&["archive", "--profile", "ying", "--archive-file", archive], &[]);
    assert_eq!(archived.status.code(), Some(0), "{}", stderr(&archived));
    let missing = "missing (in the baseline, not in this run): plain-fixtures::plain renamed_away";
    let last_run = || {
        let runs = std::fs::read_dir(fixture.target_dir().join("ying/nextest")).unwrap().flatten();
        runs.max_by_key(|run| run.metadata().unwrap().modified().unwrap()).unwrap().path()
    };
    // nextest's listing: a test it skipped is not missing.
    let run = nextest(&["run", "--profile", "ying", "-E", "test(=leaks_a_box)"], &[]);
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let said = stderr(&gate(&[]));
    assert!(said.contains(missing), "{said}");
    assert!(!said.contains("plain-fixtures::plain panics"), "a test nextest skipped is not missing: {said}");
    // The archive's binaries, without a listing (a profile set up before it listed).
    let run = nextest(&["run", "--profile", "ying", "-E", "not test(=clean)"], &[]);
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    std::fs::remove_dir_all(last_run().join("listed")).unwrap();
    let said = stderr(&gate(&["--archive-file", archive]));
    assert!(said.contains(missing), "{said}");
    assert_eq!(said.matches("missing (in the baseline").count(), 1, "{said}");
    let output = gate(&[]);
    assert!(!stderr(&output).contains("missing"), "without a listing or an archive, nothing is known missing");
    let broken = archive_dir.path().join("broken.tar.zst");
    std::fs::write(&broken, "not an archive").unwrap();
    let output = gate(&["--archive-file", broken.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("failed to read the nextest archive"), "{}", stderr(&output));
}

/// A test measured from outside is measured or fails saying why, never passes unmeasured: one whose process dropped
/// the interposer before `main` is unmeasured, one that ran another program (`exec`) while it ran never reported;
/// neither is called a leak test.
#[test]
fn a_test_that_drops_the_interposer_or_execs_fails_as_unmeasured() {
    let fixture = Fixture::plain_shared();
    for (env, reason) in [
        (
            "YING_FIXTURE_DROP_PRELOAD",
            "nothing measured it: its process showed no sign of the allocation interposer (LD_PRELOAD dropped or \
             replaced, or the library gone), so what it retained is unknown",
        ),
        (
            "YING_FIXTURE_EXEC",
            "exited with code 0 before its figures were reported: its process ended, or ran another program (exec), \
             while the test ran",
        ),
    ] {
        let output = fixture.cargo_ying(&["--measure", "all", "--test", "plain", "clean"], &[(env, "1")]);
        let said = stderr(&output);
        assert_eq!(output.status.code(), TEST_FAILED, "{env}: {said}");
        assert!(said.contains("FAIL") && said.contains("plain-fixtures::plain clean"), "{env}: {said}");
        assert!(!said.contains("leak test"), "a plain test is no leak test: {said}");
        let summary = summary(&fixture.target_dir());
        let test = entry(&summary, "plain", "clean");
        assert_eq!((test["outcome"].as_str(), test["reason"].as_str()), (Some("failed"), Some(reason)), "{env}");
        assert!(test["retained_bytes"].is_null(), "no figures: {test}");
    }
}

/// Under nextest's profile no wrapper runs between nextest and the test: the profile's setup script preloads the
/// interposer, which records the test in the test's own process as it starts (and fails a test it cannot record,
/// saying why), and says how it ended: a test that moved a child into a session of its own leaves nothing running
/// once nextest's run is over (the interposer ended it as the test exited, and the gate says so); a test that
/// dropped the interposer before `main`, which nextest saw pass, fails the gate as unmeasured. `ying-wrap` lists the
/// binaries (keeping each one's known code), and says what it could not start when a test handed to it needs
/// cargo-ying.
#[test]
fn under_nextest_the_test_runs_in_the_process_nextest_started_and_the_gate_fails_what_it_did_not_measure() {
    let fixture = Fixture::plain();
    let manifest = fixture.path().join("Cargo.toml");
    let setup =
        cargo_ying_in(&fixture, fixture.path(), &["setup", "nextest", "--manifest-path", manifest.to_str().unwrap()]);
    assert_eq!(setup.status.code(), Some(0), "{}", stderr(&setup));
    let interposer = stderr(&setup)
        .lines()
        .find_map(|line| line.trim().strip_prefix("Interposer ").map(str::to_owned))
        .expect("setup names the interposer");
    let nextest = |envs: &[(&str, &str)]| {
        let mut command = super::cleaned("cargo", &fixture.target_dir());
        command.args(["nextest", "run", "--profile", "ying", "-E", "test(=clean)", "--manifest-path"]).arg(&manifest);
        command.envs(envs.iter().copied()).output().unwrap()
    };
    let gate = || fixture.subcommand("gate", &[], &[]).output().unwrap();

    let pid_file = fixture.scratch("pids");
    let run = nextest(&[("YING_FIXTURE_SESSION_CHILD", pid_file.to_str().unwrap())]);
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    assert!(stderr(&run).contains("SETUP PASS") && stderr(&run).contains("ying-measure"), "{}", stderr(&run));
    let text = std::fs::read_to_string(&pid_file).unwrap();
    let pids: Vec<i32> = text.split_whitespace().map(|pid| pid.parse().unwrap()).collect();
    // SAFETY: kill(2) with signal 0 only asks whether the process exists.
    let alive = |pid: i32| unsafe { libc::kill(pid, 0) } == 0;
    assert!(!alive(pids[0]), "the child in a session of its own outlived nextest's run: {pids:?}");
    for gated in ["first", "second"] {
        // The first gate finishes the run's records; a second reads them finished.
        let output = gate();
        let said = stderr(&output);
        assert_eq!(output.status.code(), Some(0), "the {gated} gate: {said}");
        assert!(said.contains("it left 1 process running outside its process group, ended when it did"), "{said}");
    }
    let record = std::fs::read_dir(fixture.target_dir().join("ying/nextest"))
        .unwrap()
        .flatten()
        .map(|run| run.path().join("tests/plain-fixtures/test/plain/clean.json"))
        .find(|path| path.is_file())
        .expect("the run's record of the test");
    let run_dir = record.ancestors().nth(5).unwrap().to_owned();
    let record: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    assert_eq!(record["exec"]["pid"].as_i64(), Some(i64::from(pids[1])), "the test's own process recorded it");
    assert!(!run_dir.join("plans").exists(), "no wrapper worked out a plan: none ran the test");
    let binary = record["unnamed"]["binary"].as_str().unwrap();
    let binary_name = Path::new(binary).file_name().unwrap().to_str().unwrap();
    let known: Vec<_> =
        std::fs::read_dir(run_dir.join("known")).unwrap().flatten().map(|entry| entry.file_name()).collect();
    assert!(
        known.iter().any(|name| name.to_string_lossy().starts_with(binary_name)),
        "the list phase kept the known code of each binary: {known:?}"
    );

    // The test binary as nextest starts it with the profile's setup: the interposer in it records it as it starts
    // and measures it, with no wrapper and no cargo-ying.
    let setup_value = serde_json::json!({"wrapper": "ying-wrap", "interposer": interposer}).to_string();
    let started = |run_id: &std::ffi::OsStr, setup_value: &str| {
        let mut command = super::cleaned(binary, &fixture.target_dir());
        command
            .args(["--exact", "clean", "--nocapture"])
            .current_dir(record["unnamed"]["package_dir"].as_str().unwrap())
            .env("PATH", "/usr/bin:/bin")
            .env("LD_PRELOAD", &interposer)
            .env("YING_NEXTEST", setup_value)
            .env("NEXTEST_RUN_ID", run_id)
            .env("NEXTEST_BINARY_ID", "plain-fixtures::plain")
            .env("NEXTEST_TEST_NAME", "clean")
            .env("NEXTEST_WORKSPACE_ROOT", fixture.path())
            .env("NEXTEST_PROFILE", "ying");
        let child = command.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
        (child.id(), child.wait_with_output().unwrap())
    };
    let (pid, output) = started(run_dir.file_name().unwrap(), &setup_value);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stdout(&output).contains("test clean ... ok"), "{}", stdout(&output));
    let path = run_dir.join("tests/plain-fixtures/test/plain/clean.json");
    let again: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(again["exec"]["pid"].as_u64(), Some(u64::from(pid)), "{again}");
    assert_eq!(again["running"].as_bool(), Some(true), "left for the gate to finish: {again}");
    let reports = run_dir.join(format!("tmp/{pid}"));
    assert_eq!(std::fs::read_dir(&reports).unwrap().count(), 1, "the test's report in {}", reports.display());
    assert!(run_dir.join(format!("tmp/{pid}.end")).is_file(), "the interposer's end mark");
    // What the interposer cannot read fails the test, saying why.
    let (_, output) = started(run_dir.file_name().unwrap(), "{not json");
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).starts_with("ying: failed to read YING_NEXTEST"), "{}", stderr(&output));
    assert!(!stdout(&output).contains("test clean"), "the test did not run: {}", stdout(&output));

    // `ying-wrap` alone, no cargo-ying beside it or on PATH, as nextest starts it.
    let alone = fixture.scratch("alone");
    std::fs::create_dir_all(&alone).unwrap();
    let ying_wrap = alone.join("ying-wrap");
    std::fs::copy(Path::new(env!("CARGO_BIN_EXE_cargo-ying")).with_file_name("ying-wrap"), &ying_wrap).unwrap();
    let wrapped = |phase: &str, run_id: &std::ffi::OsStr| {
        let mut command = super::cleaned(&ying_wrap, &fixture.target_dir());
        command
            .arg(binary)
            .current_dir(record["unnamed"]["package_dir"].as_str().unwrap())
            .env("PATH", "/usr/bin:/bin")
            .env("NEXTEST_RUN_ID", run_id)
            .env("NEXTEST_BINARY_ID", "plain-fixtures::plain")
            .env("NEXTEST_TEST_PHASE", phase)
            .env("NEXTEST_WORKSPACE_ROOT", fixture.path())
            .env("NEXTEST_PROFILE", "ying");
        if phase == "run" {
            command.args(["--exact", "clean", "--nocapture"]).env("NEXTEST_TEST_NAME", "clean");
        }
        command
    };
    // nextest's list phase of the binary is `ying-wrap`'s: the listing passed on, and recorded.
    let listed = run_dir.join("listed");
    std::fs::remove_dir_all(&listed).unwrap();
    let output = wrapped("list", run_dir.file_name().unwrap()).args(["--list", "--format", "terse"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stdout(&output).contains("clean: test"), "{}", stdout(&output));
    let listings: Vec<_> = std::fs::read_dir(&listed).unwrap().flatten().map(|entry| entry.path()).collect();
    assert_eq!(listings.len(), 1, "{listings:?}");
    assert!(std::fs::read_to_string(&listings[0]).unwrap().contains("\"clean\""), "the listing recorded");
    // A test handed to the wrapper (an archive's, or a profile's of an earlier setup) whose binary no wrapper of
    // the run has seen is cargo-ying's: without it, `ying-wrap` says what it could not start.
    let output = wrapped("run", "another-run".as_ref()).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("error: failed to run the test measured: could not start cargo-ying"),
        "{}",
        stderr(&output)
    );

    let run = nextest(&[("YING_FIXTURE_DROP_PRELOAD", "1")]);
    assert_eq!(run.status.code(), Some(0), "nextest saw it pass: {}", stderr(&run));
    let output = gate();
    assert_eq!(output.status.code(), TEST_FAILED, "{}", stderr(&output));
    let summary = summary(&fixture.target_dir());
    let test = entry(&summary, "plain", "clean");
    assert!(test["reason"].as_str().is_some_and(|reason| reason.starts_with("nothing measured it")), "{test}");
}

/// Under nextest's profile a statically linked test binary, which no preload reaches, is refused as nextest lists it:
/// its tests would otherwise run unmeasured, and no record of theirs would tell the gate. The profile is passed with
/// `--config-file` (`setup --print`), so nothing is written into the shared fixture.
#[test]
fn a_statically_linked_suite_under_nextests_profile_is_refused_as_it_is_listed() {
    let fixture = Fixture::plain_shared();
    let manifest = fixture.path().join("Cargo.toml");
    let printed = cargo_ying_in(
        &fixture,
        fixture.path(),
        &["setup", "nextest", "--print", "--manifest-path", manifest.to_str().unwrap()],
    );
    assert_eq!(printed.status.code(), Some(0), "{}", stderr(&printed));
    let config = fixture.scratch("nextest.toml");
    std::fs::write(&config, &printed.stdout).unwrap();
    let rustc = std::process::Command::new("rustc").arg("-vV").output().unwrap();
    let rustc = String::from_utf8_lossy(&rustc.stdout).into_owned();
    let host = rustc.lines().find_map(|line| line.strip_prefix("host: ")).expect("rustc names its host");
    let mut command = super::cleaned("cargo", &fixture.target_dir());
    command
        .args(["nextest", "run", "--profile", "ying", "--target", host, "--test", "plain", "--config-file"])
        .arg(&config)
        .arg("--manifest-path")
        .arg(&manifest)
        .env("RUSTFLAGS", "-C target-feature=+crt-static");
    let output = command.output().unwrap();
    let said = stderr(&output);
    assert_eq!(output.status.code(), Some(nextest_metadata::NextestExitCode::TEST_LIST_CREATION_FAILED), "{said}");
    assert!(said.contains("is statically linked: no dynamic loader reads LD_PRELOAD in it"), "{said}");
    assert!(!said.contains("PASS"), "no test ran: {said}");
}

/// Two workspaces that share a target directory share its `ying/`: there, `gate` and `accept` in one refuse the
/// other's run, naming both workspaces, and write no baseline.
#[test]
fn gate_and_accept_refuse_the_run_of_another_workspace_sharing_the_target_directory() {
    let other = Fixture::plain();
    let this = Fixture::shared();
    let (other_root, this_root) = (other.path().display().to_string(), this.path().display().to_string());
    let manifest = other.path().join("Cargo.toml");
    let setup =
        cargo_ying_in(&other, other.path(), &["setup", "nextest", "--manifest-path", manifest.to_str().unwrap()]);
    assert_eq!(setup.status.code(), Some(0), "{}", stderr(&setup));
    let run = other.nextest(&["run", "--profile", "ying", "-E", "test(=clean)"]);
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let measured = other.cargo_ying(&["--measure", "all", "clean"], &[]);
    assert_eq!(measured.status.code(), Some(0), "{}", stderr(&measured));

    let shared_target = other.target_dir();
    let shared_target = shared_target.to_str().unwrap();
    for (command, args, run) in [
        ("gate", &["--save-baseline", "--target-dir", shared_target][..], "nextest run "),
        ("accept", &["--target-dir", shared_target][..], "the last run's summary.json"),
    ] {
        let output = this.subcommand(command, args, &[]).output().unwrap();
        let said = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{command}: {said}");
        assert!(said.contains(&format!("error: failed to take {run}")), "{command}: {said}");
        let words = format!("it ran the tests of the workspace at {other_root}, not of this one at {this_root}");
        assert!(said.contains(&words), "{command}: {words}\n{said}");
        assert!(!this.path().join("ying-baseline.json").exists(), "{command} wrote a baseline: {said}");
    }
    // In its own workspace, the same run is taken.
    let gate = other.subcommand("gate", &[], &[]).output().unwrap();
    assert_eq!(gate.status.code(), Some(0), "{}", stderr(&gate));
}

/// A statically linked test binary reads no `LD_PRELOAD`: measuring it from outside is refused, naming it, rather
/// than passed with no figures.
#[test]
fn a_statically_linked_suite_under_measure_all_is_refused_with_the_reason() {
    let fixture = Fixture::plain_shared();
    // `--target`, so that only the tests are linked statically (build scripts and proc macros run on the host).
    let rustc = std::process::Command::new("rustc").arg("-vV").output().unwrap();
    let rustc = String::from_utf8_lossy(&rustc.stdout).into_owned();
    let host = rustc.lines().find_map(|line| line.strip_prefix("host: ")).expect("rustc names its host");
    let output = fixture.cargo_ying(
        &["--measure", "all", "--target", host, "--test", "plain"],
        &[("RUSTFLAGS", "-C target-feature=+crt-static")],
    );
    let said = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{said}");
    assert!(said.contains("from outside: it is statically linked") && said.contains("deps/plain-"), "{said}");
    assert!(!said.contains("Starting"), "no test ran: {said}");
}

/// The interposer travels with cargo-ying: a run in a fresh target directory, for a user with an empty cache,
/// builds nothing of it and passes; the library is written to the user's cache, and names no directory of the
/// machine cargo-ying was built on.
#[test]
fn the_interposer_is_carried_by_cargo_ying_and_written_to_the_users_cache_not_built() {
    let fixture = Fixture::plain_shared();
    let cache = tempfile::tempdir().unwrap();
    let target = tempfile::tempdir().unwrap();
    let envs =
        [("XDG_CACHE_HOME", cache.path().to_str().unwrap()), ("CARGO_TARGET_DIR", target.path().to_str().unwrap())];
    let output = fixture.cargo_ying(&["--measure", "all", "--test", "plain", "leaks_a_box", "--", "--exact"], &envs);
    let said = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{said}");
    assert!(!said.contains("ying-interposer") && !target.path().join("ying/interposer").exists(), "{said}");
    let summary = summary(target.path());
    assert_eq!(entry(&summary, "plain", "leaks_a_box")["retained_bytes"], 1000);
    let libraries: Vec<std::path::PathBuf> = std::fs::read_dir(cache.path().join("ying/interposer"))
        .unwrap()
        .flatten()
        .map(|entry| entry.path().join("libying_interposer.so"))
        .collect();
    assert_eq!(libraries.len(), 1, "one library for this version and checksum: {libraries:?}");
    let library = std::fs::read(&libraries[0]).unwrap();
    let repository = super::repository().display().to_string();
    assert!(
        !library.windows(repository.len()).any(|window| window == repository.as_bytes()),
        "the library names {repository}"
    );
}

/// An installed cargo-ying stands alone: `cargo install --path cargo-ying` from a copy of this repository, the copy
/// then deleted, measures the plain fixture in a fresh target directory with an empty cache, building no
/// interposer, and the installed binary names neither the copy's directory nor this repository's.
///
/// The install is cargo's own (`--locked --offline`, the release profile, its optimisation turned off for the
/// time it takes): what it writes is what a user's `cargo install` writes but for the machine code.
#[test]
fn an_installed_cargo_ying_needs_no_clone_no_build_and_names_no_directory_of_the_clone() {
    let work = tempfile::tempdir().unwrap();
    let clone = work.path().join("clone");
    let repository = super::repository();
    // The workspace's own files: its manifests, lock file, documents and member packages (no fixtures, no build).
    std::fs::create_dir_all(&clone).unwrap();
    for entry in std::fs::read_dir(&repository).unwrap().flatten() {
        let name = entry.file_name();
        if [".git", "target", "fixtures"].iter().any(|left_out| name == *left_out) {
            continue;
        }
        if entry.file_type().unwrap().is_dir() {
            super::copy_dir(&entry.path(), &clone.join(&name));
        } else {
            std::fs::copy(entry.path(), clone.join(&name)).unwrap();
        }
    }
    let root = work.path().join("installed");
    let mut install = super::cleaned("cargo", &clone.join("target"));
    install
        .args(["install", "--locked", "--offline", "--path"])
        .arg(clone.join("cargo-ying"))
        .arg("--root")
        .arg(&root)
        .arg("--target-dir")
        .arg(clone.join("target"))
        .env_remove("CARGO_TARGET_DIR")
        .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "0");
    let installed = install.output().unwrap();
    assert!(installed.status.success(), "cargo install failed:\n{}", stderr(&installed));
    std::fs::remove_dir_all(&clone).unwrap();

    let binary = root.join("bin/cargo-ying");
    let bytes = std::fs::read(&binary).unwrap();
    for directory in [clone.display().to_string(), repository.display().to_string()] {
        let named = bytes.windows(directory.len()).filter(|window| *window == directory.as_bytes()).count();
        assert_eq!(named, 0, "the installed cargo-ying names {directory}");
    }

    let fixture = Fixture::plain();
    let cache = work.path().join("cache");
    let target = work.path().join("target");
    let mut run = super::cleaned(&binary, &target);
    run.args(["ying", "test", "--measure", "all", "--manifest-path"])
        .arg(fixture.path().join("Cargo.toml"))
        .env("XDG_CACHE_HOME", &cache);
    let output = run.output().unwrap();
    let said = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{said}");
    assert!(!target.join("ying/interposer").exists(), "an interposer was built in the target directory:\n{said}");
    let summary = summary(&target);
    for (binary, name, retained) in RETAINED {
        assert_eq!(entry(&summary, binary, name)["retained_bytes"], retained, "{binary} {name}\n{said}");
    }
    let written: Vec<_> = std::fs::read_dir(cache.join("ying/interposer")).unwrap().flatten().collect();
    assert_eq!(written.len(), 1, "the carried library is written to the user's cache once");
}
