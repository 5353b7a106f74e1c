//! Excuses: retained memory that a test keeps without leaking it, told apart by the stack that allocated it.

use crate::base::ids::{ScopeId, StackId};
use crate::base::thread::as_profiler;
use crate::hot::{live, stacks};
use crate::read::symbol_table;
use crate::read::symbolize::{name_test_body, symbolize};
use std::collections::HashMap;
use ying_report::Frame;
use ying_report::names::last_segment;

/// Frames of the standard library's output functions: memory they retain is libtest's captured output.
const CAPTURED_OUTPUT: &[&str] = &["std::io::stdio::print_to", "std::io::stdio::_print", "std::io::stdio::_eprint"];

/// The initialiser `thread_local!` generates (current and earlier toolchains), by its last segment, bare where
/// debug information names an inlined function bare: memory it allocates is the thread-local's value, which lives
/// until its thread exits.
const THREAD_LOCAL_INIT: &[&str] = &["__rust_std_internal_init_fn", "__init"];

/// The standard library's thread-local storage (current and earlier toolchains) and its functions that run a
/// thread-local's initialiser the first time a thread reads it (`Storage::get_or_init_slow`, earlier `initialize`
/// and `try_initialize`). They are cold and never inlined: where the initialiser is inlined into them and there is
/// no debug information (`debug = 0`), they are what the stack shows of it.
const THREAD_LOCAL_STORAGE: &[&str] =
    &["std::sys::thread_local::", "std::sys::common::thread_local::", "std::thread::local::"];
const THREAD_LOCAL_LAZY_INIT: &[&str] = &["get_or_init_slow", "initialize", "try_initialize"];

/// Whether `frame` initialises a thread-local: the initialiser `thread_local!` generates, or the standard library
/// running it.
fn initialises_a_thread_local(frame: &Frame) -> bool {
    let name = frame.function.trim_start_matches('<');
    let last = last_segment(name);
    THREAD_LOCAL_INIT.contains(&last)
        || (THREAD_LOCAL_STORAGE.iter().any(|storage| name.starts_with(storage))
            && THREAD_LOCAL_LAZY_INIT.contains(&last))
}

/// The standard library's backtraces (its copy of the `backtrace` crate): what the default panic hook's backtrace
/// reads of the debug information stays cached for the process's life. A leak test runs the hook outside its
/// figures (see `hook`); a test measured from outside cannot.
const STD_BACKTRACE: &str = "std::backtrace_rs::";

/// Whether memory allocated at `frames` is excused: libtest's captured output, a thread-local's initial value, the
/// standard library's cache of debug information for backtraces, or matched by one of the test's `allow` patterns.
pub(super) fn frames_are_excused(frames: &[Frame], patterns: &[&str]) -> bool {
    frames.iter().any(|frame| {
        CAPTURED_OUTPUT.iter().any(|name| frame.function.starts_with(name))
            || frame.function.trim_start_matches('<').starts_with(STD_BACKTRACE)
            || initialises_a_thread_local(frame)
            || patterns.iter().any(|pattern| frame.function.contains(pattern))
    })
}

/// Code known by its addresses, without reading debug information: where the test harness and the C library
/// allocate what they keep on a test's behalf. A test measured from outside (see `unannotated`) sees the whole of
/// its thread and the C library's allocations, and retains some of these in nearly every run: telling them apart
/// must not cost a symbolisation.
struct KnownCode {
    /// libtest's functions that run a test on the test's thread.
    run_test: Vec<(usize, usize)>,
    /// libtest's frame through which it calls the test function.
    test_entry: Vec<(usize, usize)>,
    /// glibc's allocation of a new thread's thread-local storage (its dynamic thread vector), which stays with the
    /// thread's stack, kept by glibc for the next thread when this one exits.
    thread_storage: Option<(usize, usize)>,
}

/// What [`KnownCode`] excuses, as the one frame a report shows of it.
const LIBTEST_BOOKKEEPING: &str = "test::run_test_in_process";
const C_THREAD_STORAGE: &str = "_dl_allocate_tls";

impl KnownCode {
    /// The code of this process, looked up on first use.
    fn get() -> &'static Self {
        static KNOWN: std::sync::OnceLock<KnownCode> = std::sync::OnceLock::new();
        KNOWN.get_or_init(|| Self {
            // `run_test_in_process` is inlined into the closure `run_test` runs on the test's thread (its own
            // symbol where it is not).
            run_test: symbol_table::executable_functions("run_test", |name| {
                name.starts_with(LIBTEST_BOOKKEEPING) || name.starts_with("test::run_test::{closure")
            }),
            test_entry: symbol_table::executable_functions("__rust_begin_short_backtrace", |name| {
                name.starts_with("test::__rust_begin_short_backtrace")
            }),
            thread_storage: symbol_table::shared_function(c"_dl_allocate_tls"),
        })
    }

    /// The frame that excuses memory allocated at `ips` (return addresses, innermost first), if its addresses
    /// tell: libtest's work on the test's thread outside the test function (the result it sends to its main
    /// thread), or the C library's storage for a new thread.
    fn excuse(&self, ips: &[usize]) -> Option<&'static str> {
        // A return address follows its call: the instruction before it is the caller's.
        let within = |ranges: &[(usize, usize)]| {
            ips.iter().any(|&ip| ranges.iter().any(|&(start, end)| (start..end).contains(&ip.wrapping_sub(1))))
        };
        if self.thread_storage.is_some_and(|range| within(&[range])) {
            Some(C_THREAD_STORAGE)
        } else if within(&self.run_test) && !within(&self.test_entry) {
            Some(LIBTEST_BOOKKEEPING)
        } else {
            None
        }
    }
}

/// Which recorded stacks are excused, each judged once.
pub(super) struct Excuses {
    patterns: &'static [&'static str],
    /// The test function's path, which names the frame of its body.
    function: String,
    verdicts: HashMap<StackId, bool>,
}

impl Excuses {
    pub(super) fn new(patterns: &'static [&'static str], function: String) -> Self {
        Self { patterns, function, verdicts: HashMap::new() }
    }

    /// Whether memory allocated from recorded stack `stack` is excused.
    pub(super) fn is_excused(&mut self, stack: StackId) -> bool {
        if let Some(&verdict) = self.verdicts.get(&stack) {
            return verdict;
        }
        let verdict = self.known(stack).is_some() || {
            let frames = stacks::ips(stack).map(|ips| name_test_body(symbolize(&ips), &self.function));
            frames_are_excused(&frames.unwrap_or_default(), self.patterns)
        };
        self.verdicts.insert(stack, verdict);
        verdict
    }

    /// The frame that excuses memory allocated from recorded stack `stack` by its addresses alone (see
    /// [`KnownCode`]), if they do: its report shows that frame, and nothing is symbolised.
    pub(super) fn known(&self, stack: StackId) -> Option<&'static str> {
        stacks::ips(stack).and_then(|ips| KnownCode::get().excuse(ips.as_slice()))
    }

    /// Bytes and blocks scope `id` owns whose stacks are excused.
    pub(super) fn owned(&mut self, id: ScopeId) -> (u64, u64) {
        as_profiler(|| {
            let mut excused = (0, 0);
            for block in live::owned_by(id).iter() {
                if block.stack.is_some_and(|stack| self.is_excused(stack)) {
                    excused.0 += block.owned as u64;
                    excused.1 += u64::from(block.owns_block);
                }
            }
            excused
        })
    }
}

#[cfg(test)]
mod tests {
    use super::frames_are_excused;
    use ying_report::Frame;

    fn frames(names: &[&str]) -> Vec<Frame> {
        names.iter().map(|name| Frame::new(*name, None, None)).collect()
    }

    /// Stacks of a thread-local's initial value (tokio's parker) as each profile symbolises them, innermost first.
    const THREAD_LOCAL_VALUES: &[&[&str]] = &[
        // Full debug information.
        &[
            "alloc::sync::Arc<T>::new",
            "tokio::runtime::park::ParkThread::new",
            "tokio::runtime::park::CURRENT_PARKER::__rust_std_internal_init_fn",
            "core::ops::function::FnOnce::call_once",
        ],
        // Line tables only, where nothing gives the inlined initialiser's path (and the storage is left out).
        &["new<tokio::runtime::park::Inner>", "new", "__rust_std_internal_init_fn", "{closure#0}"],
        // No debug information: the initialiser is inlined into the standard library's cold initialisation.
        &[
            "std::sys::thread_local::native::lazy::Storage<T,D>::get_or_init_slow",
            "tokio::runtime::park::CachedParkThread::waker",
        ],
        // The same, mangled v0.
        &["<std::sys::thread_local::native::lazy::Storage<core::cell::Cell<u8>, ()>>::get_or_init_slow::<fn() -> u8>"],
        // Earlier toolchains.
        &["std::thread::local::fast::Key<T>::try_initialize"],
        &["std::thread::local::lazy::LazyKeyInner<T>::initialize", "app::CACHE::__getit"],
        &["std::sys::common::thread_local::fast_local::Key<T>::try_initialize"],
        &["app::CACHE::__init"],
    ];

    /// Stacks that only use a thread-local, or initialise something else, under each profile.
    const NOT_THREAD_LOCAL_VALUES: &[&[&str]] = &[
        &[
            "leaks::t::{{closure}}::{{closure}}",
            "std::thread::local::LocalKey<T>::try_with",
            "std::thread::local::LocalKey<T>::with",
            "leaks::t::{{closure}}",
        ],
        &["{closure#0}", "try_with<alloc::vec::Vec<u8>>", "with<alloc::vec::Vec<u8>>", "leaks::t::{{closure}}"],
        &["ying::products::leak_test::runner::run"],
        &["std::sync::once_lock::OnceLock<T>::initialize", "app::config"],
        &["app::pool::initialize", "app::pool::try_initialize", "app::get_or_init_slow"],
        &["std::thread::local::LocalKey<T>::initialize_with"],
    ];

    #[test]
    fn a_thread_locals_initial_value_is_excused_under_every_profile_and_nothing_else_is() {
        for stack in THREAD_LOCAL_VALUES {
            assert!(frames_are_excused(&frames(stack), &[]), "{stack:?}");
        }
        for stack in NOT_THREAD_LOCAL_VALUES {
            assert!(!frames_are_excused(&frames(stack), &[]), "{stack:?}");
        }
    }

    #[test]
    fn captured_output_thread_locals_and_allowed_sites_are_excused() {
        assert!(frames_are_excused(&frames(&["alloc::vec::Vec<T>::reserve", "std::io::stdio::_print"]), &[]));
        assert!(frames_are_excused(&frames(&["app::CACHE::__rust_std_internal_init_fn"]), &[]));
        assert!(frames_are_excused(&frames(&["regex::compile", "app::parse"]), &["regex::"]));
        assert!(!frames_are_excused(&frames(&["app::leak", "app::parse"]), &["regex::"]));
    }
}
