//! The rules that trim a symbolised allocation stack to what reports show, as pure functions of its frames: the
//! runtime trims the stacks it symbolises itself, and `cargo ying` the ones a test left to it as addresses, with
//! the same rules.
//!
//! A captured stack starts inside the profiler (the unwinder, the allocator, the allocator entry shims), goes
//! through the standard library's allocation plumbing, reaches the allocating code, and ends in the thread's
//! start-up frames or, in a leak test, in the test harness beyond ying's leak-test runner. Reports keep the part
//! from the allocating code to the thread's entry (or to the runner), without async `poll` plumbing.

use crate::names;
use ying_report::Frame;

/// The function of ying's leak-test runner that calls a test's body. Frames from it outwards are the test
/// harness's, the same for every test.
pub const LEAK_TEST_RUNNER: &str = "ying::products::leak_test::runner::run";

/// The trimming rules, for stacks captured by a runtime whose source lies under `runtime_source`.
///
/// The runtime's source directory tells its frames apart where debug information gives only short names
/// (`debug = "line-tables-only"` names an inlined function `alloc<std::alloc::System>`, not by its path).
///
/// ```
/// use ying_frames::Trim;
/// use ying_report::Frame;
///
/// let frame = |name: &str| Frame::new(name, None, None);
/// let stack = vec![
///     frame("ying::stacks::capture"),
///     frame("__rustc::__rust_alloc"),
///     frame("alloc::alloc::alloc"),
///     frame("alloc::boxed::Box<T>::new"),
///     frame("app::cache::insert"),
///     frame("<F as core::future::future::Future>::poll"),
///     frame("app::main"),
///     frame("std::sys::backtrace::__rust_begin_short_backtrace"),
///     frame("std::rt::lang_start"),
/// ];
/// let kept: Vec<String> = Trim::new("/src/ying-runtime/src/").tidy(stack).into_iter().map(|f| f.function).collect();
/// assert_eq!(kept, ["alloc::boxed::Box<T>::new", "app::cache::insert", "app::main"]);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Trim<'a> {
    runtime_source: &'a str,
}

impl<'a> Trim<'a> {
    /// The rules for a runtime whose source files lie under `runtime_source` (a directory, with its trailing `/`).
    pub const fn new(runtime_source: &'a str) -> Self {
        Self { runtime_source }
    }

    /// Whether `file` lies in the runtime's source.
    fn in_runtime_source(&self, file: &str) -> bool {
        !self.runtime_source.is_empty() && file.replace('\\', "/").starts_with(self.runtime_source)
    }

    /// A frame of the profiler's own machinery between the allocating code and the stack capture: the profiler
    /// (whose inlined frames may carry short names only, so its source path tells), the unwinder, the
    /// thread-local access around the bookkeeping, and the allocator entry shims (`__rust_alloc`, `__rg_alloc`).
    pub fn is_profiler_frame(&self, frame: &Frame) -> bool {
        const NAMES: &[&str] = &[
            "ying::",
            "<ying::",
            "ying_preload::",
            "backtrace::",
            "<backtrace::",
            "std::thread::local::",
            "<std::thread::local::",
            "__rustc::",
            "__rust_",
            "__rg_",
            "__rdl_",
        ];
        let name = frame.function.as_str();
        NAMES.iter().any(|prefix| name.starts_with(prefix))
            || frame.file.as_deref().is_some_and(|file| {
                self.in_runtime_source(file) || {
                    let file = file.replace('\\', "/");
                    file.contains("/backtrace-0.3") || file.ends_with("/std/src/thread/local.rs")
                }
            })
    }

    /// A frame of the runtime's products (the leak-test runner, `measure`): the caller's context around the
    /// allocating code, never the profiler's machinery between that code and the stack capture.
    fn is_product_frame(&self, frame: &Frame) -> bool {
        const PRODUCTS: &str = "ying::products::";
        let name = frame.function.as_str();
        name.starts_with(PRODUCTS)
            || name.strip_prefix('<').is_some_and(|name| name.starts_with(PRODUCTS))
            || frame.file.as_deref().is_some_and(|file| {
                self.in_runtime_source(file)
                    && file.replace('\\', "/")[self.runtime_source.len()..].starts_with("products/")
            })
    }

    /// A frame of the runtime's own code (a runner around a measured body, for instance), by name or source path.
    pub fn is_runtime_frame(&self, frame: &Frame) -> bool {
        frame.function.starts_with("ying::")
            || frame.function.starts_with("<ying::")
            || frame.file.as_deref().is_some_and(|file| self.in_runtime_source(file))
    }

    /// Drops the frames above the allocating code: the run of the profiler's own frames every captured stack
    /// starts with (up to and including the allocator entry), then the standard library's allocation plumbing.
    /// A stack that starts with the plumbing, its entry frames left out (a stack deferred under the allocation
    /// interposer keeps only the executable's frames, and the entry, `malloc`, is the interposer's), loses the
    /// plumbing all the same. Frames of the profiler further out (`ying::measure` around a measured body) are the
    /// caller's context and stay, also where the allocator's entry was inlined into them (an optimised build may
    /// inline the global allocator's entry into code of the crate that declares it, a leak test's body with the
    /// runner it was inlined into among them): the run of the profiler's frames then ends at the first of the
    /// runtime's products.
    pub fn strip_allocator_frames<T: AsRef<Frame>>(&self, frames: &mut Vec<T>) {
        // The outermost entry: under the allocation interposer a stack passes `malloc` first, then the global
        // allocator's entry when Rust code allocated, with the program's own global allocator between them.
        let own = match frames.iter().rposition(|frame| is_allocator_entry(frame.as_ref())) {
            // Up to the allocator entry shims every frame is the profiler's (or an allocator's), including helpers
            // of the standard library that unoptimised builds leave between its frames (a closure's `bool::then`,
            // say).
            Some(entry) => entry + 1,
            None => frames
                .iter()
                .position(|frame| !self.is_profiler_frame(frame.as_ref()) || self.is_product_frame(frame.as_ref()))
                .unwrap_or(frames.len()),
        };
        let plumbing = frames[own..]
            .iter()
            .position(|frame| !is_allocation_plumbing(frame.as_ref()))
            .unwrap_or(frames.len() - own);
        frames.drain(..own + plumbing);
    }

    /// Names the frame of a leak test's body after the test function, `function` (`module::test`), in a stack
    /// trimmed at the leak-test runner (see [`tidy`](Self::tidy)). The body is a closure the runner calls, whose
    /// name depends on the debug information: `module::test::{{closure}}` (an async block in it adds closures),
    /// bare `{closure#0}` with line tables only, where it is inlined into the runner; and no frame at all without
    /// debug information, where the runner's frame stands for it: a frame named after the test, without a
    /// location, is put before the runner's.
    ///
    /// ```
    /// use ying_frames::{LEAK_TEST_RUNNER, Trim};
    /// use ying_report::Frame;
    ///
    /// let frame = |name: &str| Frame::new(name, None, None);
    /// let trim = Trim::new("/src/ying-runtime/src/");
    /// let named = |frames| -> Vec<String> {
    ///     trim.name_test_body(frames, "leaks::box_leak").into_iter().map(|frame| frame.function).collect()
    /// };
    /// let expected = ["leaks::box_leak", LEAK_TEST_RUNNER];
    /// assert_eq!(named(vec![frame("leaks::box_leak::{{closure}}"), frame(LEAK_TEST_RUNNER)]), expected);
    /// assert_eq!(named(vec![frame("{closure#0}"), frame(LEAK_TEST_RUNNER)]), expected);
    /// assert_eq!(named(vec![frame(LEAK_TEST_RUNNER)]), expected);
    /// ```
    pub fn name_test_body(&self, mut frames: Vec<Frame>, function: &str) -> Vec<Frame> {
        let is_body_path = |name: &str| {
            name.strip_prefix(function).is_some_and(|rest| {
                rest.is_empty() || (rest.starts_with("::") && names::segments(rest).iter().all(|s| s.starts_with('{')))
            })
        };
        let mut named = false;
        for frame in &mut frames {
            if is_body_path(&frame.function) {
                frame.function = function.to_owned();
                named = true;
            }
        }
        if named {
            return frames;
        }
        let Some(runtime) = frames.iter().position(|frame| self.is_runtime_frame(frame)) else { return frames };
        // With line tables only, the body's closure is inlined into the runner and named bare.
        if let Some(body) = runtime.checked_sub(1).map(|index| &mut frames[index])
            && names::is_bare(&body.function)
            && names::is_closure(&body.function)
        {
            body.function = function.to_owned();
            return frames;
        }
        // Without debug information, the body inlined into the runner has no frame of its own.
        if is_leak_test_runner(&frames[runtime]) {
            frames.insert(runtime, Frame::new(function, None, None));
        }
        frames
    }

    /// Trims a symbolised stack (innermost first, inlined frames expanded) to what reports show: the frames above
    /// the allocating code dropped, `poll` plumbing dropped, and nothing past a thread's entry or the leak-test
    /// runner. Frames that carry more than the frame (their instruction pointer, say) are trimmed the same way.
    pub fn tidy<T: AsRef<Frame>>(&self, mut frames: Vec<T>) -> Vec<T> {
        if let Some(entry) = frames.iter().position(|frame| is_thread_entry(frame.as_ref())) {
            frames.truncate(entry);
        }
        if let Some(runner) = frames.iter().position(|frame| is_leak_test_runner(frame.as_ref())) {
            frames.truncate(runner + 1);
        }
        self.strip_allocator_frames(&mut frames);
        frames.retain(|frame| !is_poll_frame(&frame.as_ref().function));
        frames
    }
}

/// The shims through which Rust code calls the global allocator (`__rust_alloc`, `__rg_realloc`, ...): the
/// outermost frames of the allocator's side of a captured stack.
pub fn is_allocator_entry(frame: &Frame) -> bool {
    const SHIMS: &[&str] = &["__rust_alloc", "__rust_dealloc", "__rust_realloc", "__rg_", "__rdl_"];
    let name = frame.function.strip_prefix("__rustc::").unwrap_or(&frame.function);
    SHIMS.iter().any(|shim| name.starts_with(shim)) || C_ALLOCATOR.contains(&name)
}

/// The C library's allocation functions, which the allocation interposer (`ying-preload`) defines: on a stack the
/// profiler captured they are its entry, as `__rust_alloc` is the global allocator's.
const C_ALLOCATOR: &[&str] = &[
    "malloc",
    "calloc",
    "realloc",
    "reallocarray",
    "posix_memalign",
    "aligned_alloc",
    "memalign",
    "valloc",
    "pvalloc",
];

/// The standard library's allocation plumbing between user code and the allocator entry.
pub fn is_allocation_plumbing(frame: &Frame) -> bool {
    const NAMES: &[&str] =
        &["alloc::alloc::", "<alloc::alloc::Global", "core::alloc::", "std::alloc::", "<std::alloc::System"];
    const FILES: &[&str] = &["/alloc/src/alloc.rs", "/std/src/alloc.rs", "/core/src/alloc/global.rs"];
    /// `System` on each platform.
    const SYSTEM: &str = "/std/src/sys/alloc/";
    NAMES.iter().any(|prefix| frame.function.starts_with(prefix))
        || frame.file.as_deref().is_some_and(|file| {
            let file = file.replace('\\', "/");
            FILES.iter().any(|suffix| file.ends_with(suffix)) || file.contains(SYSTEM)
        })
}

/// The frame through which the standard library enters a thread's (or `main`'s) code.
pub fn is_thread_entry(frame: &Frame) -> bool {
    // Full (`std::sys::backtrace::__rust_begin_short_backtrace`) or, with line tables only, short.
    let name = frame.function.as_str();
    name.starts_with("std::sys::backtrace::__rust_begin_short_backtrace")
        || name.starts_with("__rust_begin_short_backtrace<")
}

/// The function of ying's leak-test runner that calls the test's body (not the closure inside it).
pub fn is_leak_test_runner(frame: &Frame) -> bool {
    let name = frame.function.as_str();
    name.strip_prefix(LEAK_TEST_RUNNER).is_some_and(|rest| rest.is_empty() || rest.starts_with("::<"))
}

/// A frame inside the leak-test runner's call of the body, or the runner itself: the runner and the test
/// harness beyond it.
pub fn is_in_leak_test_runner(frame: &Frame) -> bool {
    frame.function.starts_with(LEAK_TEST_RUNNER)
        && frame.function[LEAK_TEST_RUNNER.len()..].chars().next().is_none_or(|next| next == ':')
}

/// Whether `frame` is code of the package under test: its source path was made relative to the package
/// ([`relative_paths`]), where the standard library's and dependencies' stay absolute and the C library's are
/// relative to its own build (`./nptl/pthread_create.c`); the allocator entry shims (`__rust_alloc`) are not.
pub fn is_package_code(frame: &Frame) -> bool {
    frame.file.as_deref().is_some_and(|file| !std::path::Path::new(file).is_absolute() && !file.starts_with('.'))
        && !frame.function.starts_with("__rust")
}

/// The leak site of a stack as reports keep it (innermost first, paths made relative to the package): its innermost
/// frame of the package's own code ([`is_package_code`]) inside the leak-test runner. Reports, the terminal and
/// flamegraphs show it with its line (`leaks::box_leak at tests/leaks.rs:22`), so two sites in one function are
/// two places. `None` when the package's code allocated nothing of the stack (a dependency or the standard
/// library allocated on its own).
///
/// ```
/// use ying_frames::{LEAK_TEST_RUNNER, leak_site};
/// use ying_report::Frame;
///
/// let frames = [
///     Frame::new("alloc::boxed::Box<T>::new", Some("/rustc/library/alloc/src/boxed.rs".into()), Some(260)),
///     Frame::new("leaks::box_leak", Some("tests/leaks.rs".into()), Some(22)),
///     Frame::new(LEAK_TEST_RUNNER, Some("/src/ying-runtime/src/runner.rs".into()), Some(9)),
/// ];
/// assert_eq!(leak_site(&frames), Some(1));
/// assert_eq!(leak_site(&frames[..1]), None);
/// ```
pub fn leak_site(frames: &[Frame]) -> Option<usize> {
    frames.iter().take_while(|frame| !is_in_leak_test_runner(frame)).position(is_package_code)
}

/// `<F as core::future::Future>::poll` and similar: plumbing between the async functions that matter.
pub fn is_poll_frame(function: &str) -> bool {
    function.starts_with('<') && function.ends_with(">::poll")
}

/// Source paths that lie under one of `bases` (directories, without a trailing separator), made relative to it:
/// reports hold no absolute path of the build machine where a relative one serves.
pub fn relative_paths(mut frames: Vec<Frame>, bases: &[&str]) -> Vec<Frame> {
    for frame in &mut frames {
        if let Some(file) = &frame.file {
            let relative = bases
                .iter()
                .filter(|base| !base.is_empty())
                .find_map(|base| file.strip_prefix(base)?.strip_prefix(['/', '\\']));
            if let Some(relative) = relative {
                frame.file = Some(relative.to_owned());
            }
        }
    }
    frames
}

#[cfg(test)]
mod tests {
    use super::{Frame, LEAK_TEST_RUNNER, Trim, is_in_leak_test_runner, is_leak_test_runner, is_poll_frame};

    const RUNTIME: &str = "/build/ying-runtime/src/";

    fn names(functions: &[&str]) -> Vec<Frame> {
        functions.iter().map(|&function| Frame::new(function, None, None)).collect()
    }

    fn kept(frames: &[Frame]) -> Vec<&str> {
        frames.iter().map(|f| f.function.as_str()).collect()
    }

    #[test]
    fn frames_above_the_allocating_code_are_dropped() {
        let mut frames = names(&[
            "backtrace::backtrace::libunwind::trace",
            "ying::stacks::capture",
            "std::thread::local::LocalKey<T>::try_with",
            "ying::allocator::YingProfiler<A>::on_alloc",
            "<ying::allocator::YingProfiler<A> as core::alloc::global::GlobalAlloc>::alloc",
            "__rustc::__rust_alloc",
            "alloc::alloc::alloc",
            "<alloc::alloc::Global>::alloc_impl",
            "<alloc::alloc::Global as core::alloc::Allocator>::allocate",
            "alloc::boxed::Box<T>::new",
            "app::cache::insert",
            "ying::measure::measure_with",
            "app::main",
        ]);
        Trim::new(RUNTIME).strip_allocator_frames(&mut frames);
        assert_eq!(
            kept(&frames),
            ["alloc::boxed::Box<T>::new", "app::cache::insert", "ying::measure::measure_with", "app::main"]
        );
    }

    #[test]
    fn short_inlined_names_are_recognised_by_their_source() {
        let own = |name: &str, file: &str| Frame::new(name, Some(format!("{RUNTIME}{file}")), Some(1));
        let std = |name: &str, file: &str| Frame::new(name, Some(format!("/rustc/0/library/{file}")), Some(1));
        let mut frames = vec![
            Frame::new("trace", Some("/registry/backtrace-0.3.77/src/backtrace/libunwind.rs".into()), Some(117)),
            own("capture", "stacks.rs"),
            own("{closure#0}<std::alloc::System>", "allocator.rs"),
            std("try_with<ying::thread::ThreadState>", "std/src/thread/local.rs"),
            own("alloc<std::alloc::System>", "allocator.rs"),
            std("alloc_impl", "alloc/src/alloc.rs"),
            std("try_allocate_in<alloc::alloc::Global>", "alloc/src/raw_vec/mod.rs"),
            Frame::new("remember", Some("/app/src/main.rs".into()), Some(38)),
            own("measure_with<()>", "measure.rs"),
        ];
        let trim = Trim::new(RUNTIME);
        assert!(trim.is_runtime_frame(&frames[8]) && !trim.is_runtime_frame(&frames[7]));
        trim.strip_allocator_frames(&mut frames);
        assert_eq!(kept(&frames), ["try_allocate_in<alloc::alloc::Global>", "remember", "measure_with<()>"]);
        // Without the runtime's source, short names are not the profiler's.
        assert!(!Trim::new("").is_profiler_frame(&Frame::new("capture", Some(format!("{RUNTIME}stacks.rs")), None)));
    }

    #[test]
    fn library_helpers_between_the_profilers_frames_are_dropped_with_them() {
        let mut frames = names(&[
            "ying::unwind::capture",
            "ying::stacks::capture_with::{{closure}}",
            "core::bool::<impl bool>::then",
            "ying::stacks::capture_with",
            "ying::allocator::YingProfiler<A>::on_alloc_full",
            "__rustc::__rg_alloc",
            "__rustc::__rust_alloc",
            "alloc::alloc::alloc",
            "alloc::vec::Vec<T>::with_capacity",
            "app::fill",
        ]);
        Trim::new(RUNTIME).strip_allocator_frames(&mut frames);
        assert_eq!(kept(&frames), ["alloc::vec::Vec<T>::with_capacity", "app::fill"]);
    }

    #[test]
    fn a_deferred_stack_without_its_entry_starts_at_the_allocating_code() {
        // Under the interposer, `__rust_alloc` and `__rdl_alloc` jump to `malloc` without a frame, and `malloc` is
        // the interposer's, not the executable's: the stack begins in the plumbing.
        let mut frames = names(&[
            "alloc::alloc::alloc",
            "alloc::alloc::Global::alloc_impl_runtime",
            "<alloc::alloc::Global as core::alloc::Allocator>::allocate",
            "alloc::boxed::Box<T>::new",
            "app::leak",
        ]);
        Trim::new(RUNTIME).strip_allocator_frames(&mut frames);
        assert_eq!(kept(&frames), ["alloc::boxed::Box<T>::new", "app::leak"]);
    }

    #[test]
    fn an_allocator_entry_inlined_into_the_runner_leaves_the_runner() {
        // A release build inlined the global allocator's entry into the runner, with the test's body: no entry
        // frame, and the runner is the first frame past the profiler's.
        let runner = format!("{LEAK_TEST_RUNNER}::<leaks::box_leak::{{{{closure}}}}>");
        let trim = Trim::new(RUNTIME);
        let mut frames = names(&[
            "ying::hot::stacks::record_sample",
            "ying::hot::allocator::YingProfiler<A>::on_alloc_full",
            &runner,
            "test::run_test",
        ]);
        trim.strip_allocator_frames(&mut frames);
        assert_eq!(kept(&frames), [runner.as_str(), "test::run_test"]);
        let named = trim.name_test_body(trim.tidy(frames), "leaks::box_leak");
        assert_eq!(kept(&named), ["leaks::box_leak", runner.as_str()]);
        // The same with short names, told by their source.
        let own = |name: &str, file: &str| Frame::new(name, Some(format!("{RUNTIME}{file}")), Some(1));
        let mut frames = vec![
            own("record_sample", "hot/stacks.rs"),
            own("on_alloc_full", "hot/allocator.rs"),
            own("run<F>", "products/leak_test/runner.rs"),
        ];
        trim.strip_allocator_frames(&mut frames);
        assert_eq!(kept(&frames), ["run<F>"]);
    }

    #[test]
    fn a_stack_without_an_allocator_entry_is_kept_whole() {
        let mut frames = names(&["app::a", "app::b"]);
        Trim::new(RUNTIME).strip_allocator_frames(&mut frames);
        assert_eq!(frames.len(), 2);
    }

    #[test]
    fn nothing_is_kept_past_the_runner_or_the_thread_entry() {
        let frames = names(&[
            "__rustc::__rust_alloc",
            "app::leak",
            &format!("{LEAK_TEST_RUNNER}::{{{{closure}}}}"),
            &format!("{LEAK_TEST_RUNNER}::<()>"),
            "test::run_test",
            "std::sys::backtrace::__rust_begin_short_backtrace",
        ]);
        let tidy = Trim::new(RUNTIME).tidy(frames);
        assert_eq!(
            kept(&tidy),
            ["app::leak", &format!("{LEAK_TEST_RUNNER}::{{{{closure}}}}"), &format!("{LEAK_TEST_RUNNER}::<()>")]
        );
        assert!(is_leak_test_runner(&tidy[2]) && !is_leak_test_runner(&tidy[1]));
        assert!(is_in_leak_test_runner(&tidy[1]) && is_in_leak_test_runner(&tidy[2]));
        assert!(!is_in_leak_test_runner(&Frame::new(format!("{LEAK_TEST_RUNNER}ning::x"), None, None)));
    }

    #[test]
    fn the_body_is_named_after_the_test_under_every_profile() {
        let at = |name: &str, file: &str, line: u32| Frame::new(name, Some(file.to_owned()), Some(line));
        let runner = || at(LEAK_TEST_RUNNER, &format!("{RUNTIME}products/leak_test/runner.rs"), 58);
        let named = |frames: Vec<Frame>| Trim::new(RUNTIME).name_test_body(frames, "leaks::box_leak");
        let body = Frame::new("leaks::box_leak", Some("tests/leaks.rs".into()), Some(22));
        // Full debug information: the body's closure, and closures of an async block in it.
        let debug = named(vec![
            at("leaks::box_leak::{{closure}}::{{closure}}", "tests/leaks.rs", 22),
            at("leaks::box_leak::{{closure}}", "tests/leaks.rs", 22),
            at(&format!("{LEAK_TEST_RUNNER}::{{{{closure}}}}"), &format!("{RUNTIME}products/leak_test/runner.rs"), 58),
            runner(),
        ]);
        assert_eq!((&debug[0], &debug[1], debug.len()), (&body, &body, 4));
        // Line tables only: the closure inlined into the runner, named bare.
        let lines = named(vec![
            at("new<[u8; 1000]>", "/rustc/x/library/alloc/src/boxed.rs", 286),
            at("{closure#0}", "tests/leaks.rs", 22).inlined(true),
            runner(),
        ]);
        assert_eq!(lines[1], body.clone().inlined(true));
        assert_eq!(lines[0].function, "new<[u8; 1000]>");
        // No debug information: the body has no frame; the runner's stands for it, after what the body called.
        let bare = named(vec![
            Frame::new("leak_fixtures::open_session", None, None),
            Frame::new(LEAK_TEST_RUNNER, None, None),
        ]);
        assert_eq!(kept(&bare), ["leak_fixtures::open_session", "leaks::box_leak", LEAK_TEST_RUNNER]);
        // Named once: naming a named stack changes nothing.
        assert_eq!(named(bare.clone()), bare);
        // Outside the runner (a helper thread's stack), and other closures, keep their names.
        let other =
            vec![at("{closure#0}", "src/lib.rs", 3), at("leaks::box_leak_more::{{closure}}", "tests/leaks.rs", 9)];
        assert_eq!(named(other.clone()), other);
        let inner = named(vec![
            at("{closure#0}", "src/lib.rs", 3),
            Frame::new("app::helper", None, None),
            Frame::new(LEAK_TEST_RUNNER, None, None),
        ]);
        assert_eq!(kept(&inner), ["{closure#0}", "app::helper", "leaks::box_leak", LEAK_TEST_RUNNER]);
    }

    #[test]
    fn poll_plumbing_is_recognised() {
        assert!(is_poll_frame("<core::future::from_generator::GenFuture<T> as core::future::future::Future>::poll"));
        assert!(!is_poll_frame("my_app::poll_queue"));
        assert!(!is_poll_frame("my_app::handler::{{closure}}"));
    }

    #[test]
    fn paths_under_a_base_become_relative() {
        let frames = vec![
            Frame::new("a", Some("/work/app/src/lib.rs".into()), Some(1)),
            Frame::new("b", Some("/rustc/abc/library/alloc/src/vec.rs".into()), Some(2)),
        ];
        let relative = super::relative_paths(frames, &["", "/work/app"]);
        assert_eq!(relative[0].file.as_deref(), Some("src/lib.rs"));
        assert_eq!(relative[1].file.as_deref(), Some("/rustc/abc/library/alloc/src/vec.rs"));
    }
}
