//! Folding: the [`FoldedStack`] of a symbolised stack, and the folded stacks of a report, as baselines keep
//! retained memory and flamegraphs are drawn.

use crate::trim::{is_in_leak_test_runner, is_package_code, leak_site};
use ying_report::{FoldedStack, Frame, LeakReport};

/// The folded stack of `frames` (innermost first) with `bytes`: function names, the leak site's ([`leak_site`])
/// with its location as reports show it (`app::fill at src/lib.rs:12`), so two sites in one function are two
/// frames; frames from ying's leak-test runner outwards are the test harness's, the same for every test, and are
/// left out, except the frames of `tracing` spans (`span:<name>`), which stay at the root. `None` for zero bytes.
///
/// ```
/// use ying_report::Frame;
///
/// // Frames come innermost first, as stacks are captured; the folded stack runs from the root.
/// let frames = [Frame::new("alloc::vec::Vec<T>::with_capacity", None, None), Frame::new("app::fill", None, None)];
/// let folded = ying_frames::fold(&frames, 1000).unwrap();
/// assert_eq!(folded.to_string(), "app::fill;alloc::vec::Vec<T>::with_capacity 1000");
/// ```
pub fn fold(frames: &[Frame], bytes: u64) -> Option<FoldedStack> {
    fold_with_lines(frames, bytes, &[leak_site(frames)])
}

/// [`fold`] for a reader of the current run's flamegraph: the test's own frame (the outermost of the package's code
/// before the harness) keeps its location too, where the leak site is another function (a library's, or a helper
/// of the test). Baselines and differential flamegraphs keep [`fold`]'s stacks.
///
/// ```
/// use ying_report::Frame;
///
/// let frames = [
///     Frame::new("app::open", Some("src/lib.rs".into()), Some(12)),
///     Frame::new("tests::opens", Some("tests/open.rs".into()), Some(5)),
///     Frame::new("test::run_test", Some("/rustc/library/test/src/lib.rs".into()), Some(600)),
/// ];
/// let folded = ying_frames::fold_for_reading(&frames, 64).unwrap();
/// assert_eq!(
///     folded.to_string(),
///     "test::run_test;tests::opens at tests/open.rs:5;app::open at src/lib.rs:12 64"
/// );
/// ```
pub fn fold_for_reading(frames: &[Frame], bytes: u64) -> Option<FoldedStack> {
    let inner = frames.iter().position(is_in_leak_test_runner).unwrap_or(frames.len());
    let test = frames[..inner].iter().rposition(is_package_code);
    fold_with_lines(frames, bytes, &[leak_site(frames), test])
}

/// [`fold`], the frames at `lines` keeping their locations.
fn fold_with_lines(frames: &[Frame], bytes: u64, lines: &[Option<usize>]) -> Option<FoldedStack> {
    if bytes == 0 {
        return None;
    }
    let inner = frames.iter().position(is_in_leak_test_runner).unwrap_or(frames.len());
    let spans = frames[inner..].iter().filter(|frame| frame.function.starts_with("span:"));
    let functions: Vec<String> = frames[..inner]
        .iter()
        .enumerate()
        .map(|(index, frame)| if lines.contains(&Some(index)) { frame.to_string() } else { frame.function.clone() })
        .chain(spans.map(|frame| frame.function.clone()))
        .rev()
        .collect();
    Some(FoldedStack::new(functions, bytes))
}

/// Where `report`'s judged retained memory was allocated (excused sites left out), as folded stacks, sorted.
pub fn retained_stacks(report: &LeakReport) -> Vec<FoldedStack> {
    let mut stacks: Vec<FoldedStack> = report
        .retained_sites
        .iter()
        .filter(|site| !site.excused)
        .filter_map(|site| fold(&site.frames, site.bytes))
        .collect();
    stacks.sort();
    stacks
}

/// `report`'s sampled stacks by estimated allocated bytes (rounded once, here), as folded stacks, sorted.
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
    use super::{fold, retained_stacks};
    use crate::trim::LEAK_TEST_RUNNER;
    use ying_report::report::{Attribution, Budgets, RetainedSite, TestIdentity};
    use ying_report::{FoldedStack, Frame, LeakReport};

    #[test]
    fn folded_stacks_run_root_to_leaf_and_stop_at_the_runner() {
        let frames = [
            Frame::new("alloc::boxed::Box<T>::new", None, None),
            Frame::new("app::leak;it", None, None),
            Frame::new(format!("{LEAK_TEST_RUNNER}::{{{{closure}}}}"), None, None),
            Frame::new("test::run_test", None, None),
            Frame::new("span:request", None, None),
        ];
        let folded = fold(&frames, 1000).unwrap();
        assert_eq!(folded.to_string(), "span:request;app::leak:it;alloc::boxed::Box<T>::new 1000");
        assert_eq!(fold(&frames, 0), None);
        assert_eq!(fold(&[], 5).unwrap().to_string(), "[unknown] 5");
    }

    #[test]
    fn the_leak_site_keeps_its_line_so_two_sites_in_one_function_are_two_frames() {
        let stack = |line: u32| {
            [
                Frame::new("alloc::boxed::Box<T>::new", Some("/rustc/library/alloc/src/boxed.rs".into()), Some(260)),
                Frame::new("app::leak", Some("src/lib.rs".into()), Some(line)),
                Frame::new("app::caller", Some("src/main.rs".into()), Some(3)),
                Frame::new(LEAK_TEST_RUNNER, Some("/src/ying-runtime/src/runner.rs".into()), Some(9)),
            ]
        };
        let folded = |line: u32| fold(&stack(line), 10).unwrap().to_string();
        assert_eq!(folded(7), "app::caller;app::leak at src/lib.rs:7;alloc::boxed::Box<T>::new 10");
        assert_ne!(folded(7), folded(8));
        assert_eq!(folded(8).parse::<FoldedStack>().unwrap().to_string(), folded(8));
        // Without a frame of the package's own code (absolute paths only), names alone.
        let library =
            [Frame::new("std::io::stdio::_print", Some("/rustc/library/std/src/io/stdio.rs".into()), Some(1))];
        assert_eq!(fold(&library, 4).unwrap().to_string(), "std::io::stdio::_print 4");
    }

    #[test]
    fn a_reports_retained_stacks_leave_its_excused_sites_out() {
        let identity = TestIdentity::new("app", None, "app::tests", "same_unit", "src/lib.rs", 7);
        let mut report = LeakReport::new(identity, Attribution::Process, Budgets::default());
        report.retained_sites = vec![
            RetainedSite::new(1000, 1, false, vec![Frame::new("app::leak", None, None)]),
            RetainedSite::new(500, 1, true, vec![Frame::new("std::io::stdio::_print", None, None)]),
        ];
        let stacks: Vec<String> = retained_stacks(&report).iter().map(ToString::to_string).collect();
        assert_eq!(stacks, ["app::leak 1000"]);
    }
}
