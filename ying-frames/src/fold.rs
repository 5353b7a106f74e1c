//! Folding: the [`FoldedStack`] a flamegraph draws a stack as, ending at the user's code, and the key a retained
//! site keeps across runs (the functions of the package that allocated it, without lines), as baselines record
//! sites and differential flamegraphs match them.

use crate::trim::{is_allocator_entry, is_in_leak_test_runner, is_package_code, is_thread_entry, leak_site};
use crate::types::is_standard_library;
use ying_report::{FoldedStack, Frame, LeakReport};

/// The most characters of a site's key ([`site_key`]): a longer path keeps its outermost and innermost functions,
/// with `..` between them.
pub const MAX_KEY: usize = 160;

/// libtest's frame through which it calls a test function (`test::__rust_begin_short_backtrace`).
const LIBTEST_ENTRY: &str = "test::__rust_begin_short_backtrace";

/// Where the frames of `frames` (innermost first) stop being the test's: at ying's leak-test runner, or, for a test
/// measured from outside, at libtest's call of the test function (or the standard library's entry of a thread),
/// from which frames outwards are the test harness's, the same for every test.
fn harness_start(frames: &[Frame]) -> usize {
    frames
        .iter()
        .position(|frame| {
            is_in_leak_test_runner(frame) || is_thread_entry(frame) || frame.function.starts_with(LIBTEST_ENTRY)
        })
        .unwrap_or(frames.len())
}

/// Whether `frame` is the standard library's (its source under `/rustc/`, or a path of `std`, `core` or `alloc`)
/// or an allocator's entry: plumbing between the code that allocated and the allocator.
fn is_plumbing(frame: &Frame) -> bool {
    frame.file.as_deref().is_some_and(|file| file.replace('\\', "/").starts_with("/rustc/"))
        || is_standard_library(&frame.function)
        || frame.function.starts_with("__rust")
        || is_allocator_entry(frame)
}

/// The frame of a stack (innermost first) that stands for the user's code: its leak site, the innermost frame of
/// the package's own code ([`leak_site`]); without one (a dependency allocated on its own, on a thread of its own),
/// the innermost frame that is not the standard library's or an allocator's. `None` when every frame is.
///
/// ```
/// use ying_report::Frame;
///
/// let frames = [
///     Frame::new("alloc::vec::from_elem", Some("/rustc/0/library/alloc/src/vec/mod.rs".into()), Some(3)),
///     Frame::new("app::fill", Some("src/lib.rs".into()), Some(12)),
///     Frame::new("tests::fills", Some("tests/fill.rs".into()), Some(5)),
/// ];
/// assert_eq!(ying_frames::user_frame(&frames), Some(1));
/// let dependency = [frames[0].clone(), Frame::new("tokio::spawn", Some("/cargo/tokio/src/lib.rs".into()), Some(1))];
/// assert_eq!(ying_frames::user_frame(&dependency), Some(1));
/// ```
pub fn user_frame(frames: &[Frame]) -> Option<usize> {
    // The test's frames only: a `tracing` span's frame, kept beyond the harness's, is never the user's code.
    let test = &frames[..harness_start(frames)];
    leak_site(test).or_else(|| test.iter().position(|frame| !is_plumbing(frame)))
}

/// The folded stack of `frames` (innermost first) with `bytes`, as a flamegraph of the run draws it: from the root
/// to the user's code ([`user_frame`]), then one frame for everything it called down to the allocator (named by
/// the function it called: `alloc::vec::from_elem`). Frames of the package's own code keep their locations
/// (`app::fill at src/lib.rs:12`), so two sites in one function are two frames. Frames from ying's leak-test
/// runner (or libtest's call of the test function) outwards are the test harness's and are left out, except the
/// frames of `tracing` spans (`span:<name>`), which stay at the root. `None` for zero bytes.
///
/// ```
/// use ying_report::Frame;
///
/// // Frames come innermost first, as stacks are captured; the folded stack runs from the root.
/// let frames = [
///     Frame::new("alloc::raw_vec::finish_grow", Some("/rustc/0/library/alloc/src/raw_vec.rs".into()), Some(9)),
///     Frame::new("alloc::vec::Vec<T>::with_capacity", Some("/rustc/0/library/alloc/src/vec.rs".into()), Some(4)),
///     Frame::new("app::fill", Some("src/lib.rs".into()), Some(12)),
///     Frame::new("tests::fills", Some("tests/fill.rs".into()), Some(5)),
/// ];
/// let folded = ying_frames::fold(&frames, 1000).unwrap();
/// assert_eq!(
///     folded.to_string(),
///     "tests::fills at tests/fill.rs:5;app::fill at src/lib.rs:12;alloc::vec::Vec<T>::with_capacity 1000"
/// );
/// ```
pub fn fold(frames: &[Frame], bytes: u64) -> Option<FoldedStack> {
    if bytes == 0 {
        return None;
    }
    let inner = harness_start(frames);
    // The user's frame and the one frame below it; without a frame of the user's, the whole stack.
    let first = user_frame(frames).map_or(0, |user| user.saturating_sub(1));
    let spans = frames[inner..].iter().filter(|frame| frame.function.starts_with("span:"));
    let functions: Vec<String> = frames[first..inner]
        .iter()
        .map(|frame| if is_package_code(frame) { frame.to_string() } else { frame.function.clone() })
        .chain(spans.map(|frame| frame.function.clone()))
        .rev()
        .collect();
    Some(FoldedStack::new(functions, bytes))
}

/// The key of the site `frames` (innermost first) allocated at, the same from run to run while the code that
/// allocated stays: the functions of the package's own code on the stack, root first, without lines (a closure
/// through which the test harness calls the function of the same name left out), joined by `;`. Without a frame
/// of the package's, the [`user_frame`]'s function; without that, the innermost frame's. At most [`MAX_KEY`]
/// characters. `tracing` spans outside the runner stay at the root, as [`fold`] keeps them.
///
/// ```
/// use ying_report::Frame;
///
/// let at = |function: &str, file: &str, line| Frame::new(function, Some(file.into()), Some(line));
/// let frames = [
///     at("alloc::vec::from_elem", "/rustc/0/library/alloc/src/vec/mod.rs", 3),
///     at("app::fill", "src/lib.rs", 12),
///     at("tokio::runtime::Runtime::block_on", "/cargo/tokio/src/runtime.rs", 80),
///     at("tests::fills", "tests/fill.rs", 5),
///     at("tests::fills::{{closure}}", "tests/fill.rs", 4),
/// ];
/// assert_eq!(ying_frames::site_key(&frames), "tests::fills;app::fill");
/// ```
pub fn site_key(frames: &[Frame]) -> String {
    shorten(&key_frames(frames, false))
}

/// [`site_key`] as the run that captured `frames` shows it: the package's frames with their locations (`app::fill
/// at src/lib.rs:12`), and never shortened. Two sites of one key can show two ways.
pub fn shown_site_key(frames: &[Frame]) -> String {
    key_frames(frames, true).join(";")
}

/// The frames of [`site_key`], by name, or with `lines`, with the locations of the package's frames.
fn key_frames(frames: &[Frame], lines: bool) -> Vec<String> {
    let inner = harness_start(frames);
    let spans = frames[inner..].iter().rev().filter(|frame| frame.function.starts_with("span:"));
    let package: Vec<&Frame> = frames[..inner].iter().rev().filter(|frame| is_package_code(frame)).collect();
    let mut names: Vec<String> = spans.map(|frame| frame.function.clone()).collect();
    let mut last: Option<&str> = None;
    for (index, frame) in package.iter().enumerate() {
        let function = frame.function.as_str();
        let calls_its_own = package.get(index + 1).is_some_and(|next| {
            function.strip_suffix("::{{closure}}").is_some_and(|enclosing| enclosing == next.function)
        });
        if calls_its_own {
            continue;
        }
        let name = if lines { frame.to_string() } else { function.to_owned() };
        // Recursion, or the test harness's closure named as the function it calls, is one step of the path, shown
        // at its innermost line.
        if last == Some(function) {
            names.pop();
        }
        names.push(name);
        last = Some(function);
    }
    if package.is_empty() {
        let frame = user_frame(frames).map(|user| &frames[user]).or_else(|| frames.first());
        names.push(frame.map_or_else(|| FoldedStack::UNKNOWN.to_owned(), |frame| frame.function.clone()));
    }
    names.iter().map(|name| name.replace(';', ":")).collect()
}

/// `names` joined by `;`, at most [`MAX_KEY`] characters: the outermost and innermost with `..` between them when
/// the whole is longer, the innermost alone when even that is.
fn shorten(names: &[String]) -> String {
    let whole = names.join(";");
    if whole.chars().count() <= MAX_KEY {
        return whole;
    }
    let (Some(outer), Some(inner)) = (names.first(), names.last()) else { return whole };
    let ends = format!("{outer};..;{inner}");
    if ends.chars().count() <= MAX_KEY { ends } else { inner.chars().take(MAX_KEY).collect() }
}

/// Where `report`'s judged retained memory was allocated (excused sites left out): each site's key
/// ([`site_key`]) with its bytes, sites of one key added up, the largest first (then by key).
pub fn retained_sites(report: &LeakReport) -> Vec<(String, u64)> {
    let mut by_key: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
    for site in report.retained_sites.iter().filter(|site| !site.excused && site.bytes > 0) {
        *by_key.entry(site_key(&site.frames)).or_default() += site.bytes;
    }
    let mut sites: Vec<(String, u64)> = by_key.into_iter().collect();
    sites.sort_by(|(a, a_bytes), (b, b_bytes)| b_bytes.cmp(a_bytes).then_with(|| a.cmp(b)));
    sites
}

/// `report`'s sampled stacks by estimated allocated bytes (rounded once, here), as folded stacks ([`fold`]),
/// sorted.
pub fn allocated_stacks(report: &LeakReport) -> Vec<FoldedStack> {
    let mut stacks: Vec<FoldedStack> = report
        .sampled_stacks
        .iter()
        .filter_map(|stack| fold(&stack.frames, stack.allocated_bytes.round() as u64))
        .collect();
    stacks.sort();
    stacks
}

#[cfg(test)]
mod tests {
    use super::{MAX_KEY, fold, retained_sites, site_key};
    use crate::trim::LEAK_TEST_RUNNER;
    use ying_report::report::{Attribution, Budgets, RetainedSite, TestIdentity};
    use ying_report::{FoldedStack, Frame, LeakReport};

    fn at(function: &str, file: &str, line: u32) -> Frame {
        Frame::new(function, Some(file.into()), Some(line))
    }

    /// A stack allocating a vector in `app::leak` at `line` of src/lib.rs, called by the test at `test_line`.
    fn stack(line: u32, test_line: u32) -> Vec<Frame> {
        vec![
            at("alloc::raw_vec::finish_grow", "/rustc/0/library/alloc/src/raw_vec.rs", 400),
            at("alloc::vec::from_elem", "/rustc/0/library/alloc/src/vec/mod.rs", 3000),
            at("app::leak", "src/lib.rs", line),
            at("tests::leaks", "tests/leaks.rs", test_line),
            at(LEAK_TEST_RUNNER, "/src/ying-runtime/src/runner.rs", 9),
            Frame::new("test::run_test", None, None),
            Frame::new("span:request", None, None),
        ]
    }

    #[test]
    fn folded_stacks_end_one_frame_below_the_users_code_and_stop_at_the_runner() {
        assert_eq!(
            fold(&stack(7, 3), 1000).unwrap().to_string(),
            "span:request;tests::leaks at tests/leaks.rs:3;app::leak at src/lib.rs:7;alloc::vec::from_elem 1000"
        );
        assert_ne!(fold(&stack(7, 3), 10), fold(&stack(8, 3), 10), "two sites in one function are two frames");
        assert_eq!(fold(&stack(7, 3), 0), None);
        assert_eq!(fold(&[], 5).unwrap().to_string(), "[unknown] 5");
        // Without a frame of the package's own code, the innermost of another crate's, and the frame below it.
        let dependency = [
            at("alloc::alloc::alloc", "/rustc/0/library/alloc/src/alloc.rs", 1),
            at("alloc::boxed::Box<T>::new", "/rustc/0/library/alloc/src/boxed.rs", 2),
            at("tokio::signal::registry::globals", "/cargo/tokio/src/signal/registry.rs", 3),
            at("std::sync::once::Once::call_once", "/rustc/0/library/std/src/sync/once.rs", 4),
        ];
        assert_eq!(
            fold(&dependency, 4).unwrap().to_string(),
            "std::sync::once::Once::call_once;tokio::signal::registry::globals;alloc::boxed::Box<T>::new 4"
        );
        // A test measured from outside: libtest's frames from its call of the test function outwards are left out.
        let libtest = [
            at("alloc::vec::from_elem", "/rustc/0/library/alloc/src/vec/mod.rs", 3000),
            at("plain::caches", "tests/plain.rs", 38),
            at("core::ops::function::FnOnce::call_once", "/rustc/0/library/core/src/ops/function.rs", 250),
            at("test::__rust_begin_short_backtrace::<fn()>", "/rustc/0/library/test/src/lib.rs", 663),
            at("test::run_test_in_process", "/rustc/0/library/test/src/lib.rs", 686),
        ];
        assert_eq!(
            fold(&libtest, 4).unwrap().to_string(),
            "core::ops::function::FnOnce::call_once;plain::caches at tests/plain.rs:38;alloc::vec::from_elem 4"
        );
        // A thread's stack ends at its entry; a span's frame beyond it, with the package's file, stays at the root.
        let thread = [
            at("alloc::vec::from_elem", "/rustc/0/library/alloc/src/vec/mod.rs", 3000),
            at("app::fill", "/home/app/src/lib.rs", 9),
            at("std::sys::backtrace::__rust_begin_short_backtrace", "/rustc/0/library/std/src/sys/backtrace.rs", 1),
            at("std::thread::lifecycle::spawn_unchecked::{{closure}}", "/rustc/0/library/std/src/thread.rs", 2),
            at("span:startup", "tests/spans.rs", 108),
        ];
        assert_eq!(super::user_frame(&thread), Some(1));
        assert_eq!(fold(&thread, 4).unwrap().to_string(), "span:startup;app::fill;alloc::vec::from_elem 4");
        let library = [at("std::io::stdio::_print", "/rustc/0/library/std/src/io/stdio.rs", 1)];
        assert_eq!(fold(&library, 4).unwrap().to_string(), "std::io::stdio::_print 4");
    }

    #[test]
    fn a_sites_key_is_its_packages_functions_without_lines() {
        assert_eq!(site_key(&stack(7, 3)), "span:request;tests::leaks;app::leak");
        assert_eq!(site_key(&stack(7, 3)), site_key(&stack(12, 9)), "lines moved: the same key");
        assert_eq!(
            super::shown_site_key(&stack(7, 3)),
            "span:request;tests::leaks at tests/leaks.rs:3;app::leak at src/lib.rs:7"
        );
        // Under `--measure all`: libtest calls the test through a closure of the same name, left out.
        let unannotated = [
            at("alloc::vec::from_elem", "/rustc/0/library/alloc/src/vec/mod.rs", 3000),
            at("plain::caches", "tests/plain.rs", 38),
            at("plain::caches::{{closure}}", "tests/plain.rs", 36),
            at("core::ops::function::FnOnce::call_once", "/rustc/0/library/core/src/ops/function.rs", 250),
            at("plain::helper", "tests/plain.rs", 4),
            at("plain::helper", "tests/plain.rs", 5),
        ];
        assert_eq!(site_key(&unannotated), "plain::helper;plain::caches");
        // The closure libtest calls may be named as the function itself: one step, at the line that allocated.
        let named_alike = [unannotated[0].clone(), unannotated[1].clone(), at("plain::caches", "tests/plain.rs", 36)];
        assert_eq!(super::shown_site_key(&named_alike), "plain::caches at tests/plain.rs:38");
        let dependency = [
            at("alloc::alloc::alloc", "/rustc/0/library/alloc/src/alloc.rs", 1),
            at("tokio::signal::registry::globals", "/cargo/tokio/src/signal/registry.rs", 3),
        ];
        assert_eq!(site_key(&dependency), "tokio::signal::registry::globals");
        assert_eq!(site_key(&[at("malloc", "./malloc.c", 1)]), "malloc");
        assert_eq!(site_key(&[]), FoldedStack::UNKNOWN);
        let long: Vec<Frame> =
            (0..12).map(|n| at(&format!("app::module_{n}::a_long_function_name"), "src/lib.rs", n)).collect();
        let key = site_key(&long);
        assert_eq!(key, "app::module_11::a_long_function_name;..;app::module_0::a_long_function_name");
        assert!(key.chars().count() <= MAX_KEY);
    }

    #[test]
    fn a_reports_retained_sites_add_up_by_key_leaving_its_excused_sites_out() {
        let identity = TestIdentity::new("app", None, "app::tests", "same_unit", "src/lib.rs", 7);
        let mut report = LeakReport::new(identity, Attribution::Process, Budgets::default());
        report.retained_sites = vec![
            RetainedSite::new(1000, 1, false, stack(7, 3)),
            RetainedSite::new(24, 1, false, stack(8, 3)),
            RetainedSite::new(2000, 1, false, vec![at("app::other", "src/lib.rs", 1)]),
            RetainedSite::new(500, 1, true, vec![Frame::new("std::io::stdio::_print", None, None)]),
        ];
        let sites = retained_sites(&report);
        assert_eq!(sites, [("app::other".to_owned(), 2000), ("span:request;tests::leaks;app::leak".to_owned(), 1024)]);
    }
}
