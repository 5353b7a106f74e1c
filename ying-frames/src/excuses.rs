//! Excuses by name: retained memory that a test keeps without leaking it, told apart by the frames of the stack
//! that allocated it. The runtime judges a leak test's stacks with these rules; `cargo ying` judges the stacks a
//! test measured from outside left for it to symbolise ([`RetainedSite::addresses`](ying_report::report::RetainedSite::addresses)).

use crate::names::last_segment;
use ying_report::Frame;

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

/// Whether `function` (a demangled name) is of the standard library's backtraces: a function of
/// `std::backtrace_rs` or a method of one of its types.
pub(crate) fn is_std_backtrace(function: &str) -> bool {
    function.trim_start_matches('<').starts_with(STD_BACKTRACE)
}

/// The standard library's bookkeeping of its threads for the stack-overflow handler: a map from each live
/// thread to its guard page (`stack_overflow::thread_info`), filled as each thread starts. An entry leaves with its
/// thread, but the map keeps nodes sized by how many threads lived at once, so a test that spawns and joins
/// threads would retain some of them depending on its threads' timing.
const STD_THREAD_BOOKKEEPING: &str = "std::sys::pal::unix::stack_overflow::";

/// Whether `function` (a demangled name) is of the standard library's bookkeeping for its stack-overflow handler.
fn is_std_thread_bookkeeping(function: &str) -> bool {
    function.trim_start_matches('<').starts_with(STD_THREAD_BOOKKEEPING)
}

/// Whether memory allocated at `frames` is excused: libtest's captured output, a thread-local's initial value, the
/// standard library's cache of debug information for backtraces or its bookkeeping of threads, or matched by one
/// of the test's `allow` patterns.
pub fn frames_are_excused(frames: &[Frame], patterns: &[&str]) -> bool {
    frames.iter().any(|frame| {
        CAPTURED_OUTPUT.iter().any(|name| frame.function.starts_with(name))
            || is_std_backtrace(&frame.function)
            || is_std_thread_bookkeeping(&frame.function)
            || initialises_a_thread_local(frame)
            || patterns.iter().any(|pattern| frame.function.contains(pattern))
    })
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
    fn the_standard_librarys_bookkeeping_of_threads_is_excused() {
        // A thread's start inserting into the map behind the stack-overflow handler, which grows a node.
        let node = "alloc::collections::btree::node::LeafNode<usize, std::sys::pal::unix::stack_overflow::thread_info::\
                    ThreadInfo>";
        let starts = [
            format!("<alloc::boxed::Box<{node}>>::try_new_uninit_in"),
            "std::sys::pal::unix::stack_overflow::thread_info::set_current_info".to_owned(),
            "std::sys::pal::unix::stack_overflow::imp::make_handler".to_owned(),
            "<std::sys::pal::unix::stack_overflow::Handler>::new".to_owned(),
            "<std::sys::thread::unix::Thread>::new::thread_start".to_owned(),
        ];
        let stack: Vec<&str> = starts.iter().map(String::as_str).collect();
        assert!(frames_are_excused(&frames(&stack), &[]));
        // The handler inlined into the thread's start: its frame is still the module's.
        assert!(frames_are_excused(&frames(&[stack[0], stack[4], stack[3]]), &[]));
        // A thread the test spawns, still running, keeps what the spawn allocated: not excused.
        let spawn = ["<std::thread::thread::Thread>::new", "std::thread::lifecycle::spawn_unchecked", "app::t"];
        assert!(!frames_are_excused(&frames(&spawn), &[]));
    }

    #[test]
    fn captured_output_thread_locals_and_allowed_sites_are_excused() {
        assert!(frames_are_excused(&frames(&["alloc::vec::Vec<T>::reserve", "std::io::stdio::_print"]), &[]));
        assert!(frames_are_excused(&frames(&["app::CACHE::__rust_std_internal_init_fn"]), &[]));
        assert!(frames_are_excused(&frames(&["regex::compile", "app::parse"]), &["regex::"]));
        assert!(!frames_are_excused(&frames(&["app::leak", "app::parse"]), &["regex::"]));
    }
}
