//! Symbol resolution, outside the allocator: instruction pointers to demangled frames with inlined frames expanded,
//! the profiler's own frames and async `poll` plumbing filtered.

use crate::stacks::Ips;
use crate::thread::as_profiler;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One symbolised frame of an allocation stack.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Frame {
    /// The demangled function name, without the hash suffix (`my_crate::cache::insert`).
    pub function: String,
    /// The source file, as recorded in the debug information.
    pub file: Option<String>,
    /// The line in `file`.
    pub line: Option<u32>,
    /// The function was inlined into the frame that follows (both are at the same machine instruction).
    #[serde(default, skip_serializing_if = "core::ops::Not::not")]
    pub inlined: bool,
}

impl Frame {
    /// A frame with the given function name and source location.
    pub fn new(function: impl Into<String>, file: Option<String>, line: Option<u32>) -> Self {
        Self { function: function.into(), file, line, inlined: false }
    }
}

impl AsRef<Frame> for Frame {
    fn as_ref(&self) -> &Frame {
        self
    }
}

impl core::fmt::Display for Frame {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.function)?;
        match (&self.file, self.line) {
            (Some(file), Some(line)) => write!(f, " at {file}:{line}"),
            (Some(file), None) => write!(f, " at {file}"),
            _ => Ok(()),
        }
    }
}

/// Resolved frames per instruction pointer, innermost (inlined) first. Resolution is slow, stacks share most of
/// their pointers, and the profiler resolves the same stacks at every report.
static CACHE: Mutex<Option<HashMap<usize, Arc<[Frame]>>>> = Mutex::new(None);

/// Resolves one instruction pointer to its frames, inlined callees first.
fn resolve_ip(ip: usize) -> Arc<[Frame]> {
    let mut cache = CACHE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let cache = cache.get_or_insert_with(HashMap::new);
    if let Some(frames) = cache.get(&ip) {
        return Arc::clone(frames);
    }
    let mut frames = Vec::new();
    // The return address points after the call; step back into the call instruction so the line is the call's.
    backtrace::resolve(ip.saturating_sub(1) as *mut core::ffi::c_void, |symbol| {
        let function = match symbol.name() {
            Some(name) => format!("{name:#}"),
            None => format!("{ip:#x}"),
        };
        let file = symbol.filename().map(|path| path.display().to_string());
        frames.push(Frame { function, file, line: symbol.lineno(), inlined: true });
    });
    match frames.last_mut() {
        // The outermost function at an instruction is the one really there; the others were inlined into it.
        Some(outermost) => outermost.inlined = false,
        None => frames.push(Frame::new(format!("{ip:#x}"), None, None)),
    }
    let frames: Arc<[Frame]> = frames.into();
    cache.insert(ip, Arc::clone(&frames));
    frames
}

/// Where the profiler's own source lives, as debug information records it.
const OWN_SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/");

/// A frame of the profiler's own machinery between the allocating code and the stack capture: the profiler
/// (whose inlined frames may carry short names only, so its source path tells), the unwinder, the thread-local
/// access around the bookkeeping, and the allocator entry shims (`__rust_alloc`, `__rg_alloc`, ...).
fn is_profiler_frame(frame: &Frame) -> bool {
    const NAMES: &[&str] = &[
        "ying::",
        "<ying::",
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
            let file = file.replace('\\', "/");
            file.starts_with(OWN_SOURCE)
                || file.contains("/backtrace-0.3")
                || file.ends_with("/std/src/thread/local.rs")
        })
}

/// The shims through which Rust code calls the global allocator (`__rust_alloc`, `__rg_realloc`, ...): the
/// outermost frames of the allocator's side of a captured stack.
fn is_allocator_entry(frame: &Frame) -> bool {
    const SHIMS: &[&str] = &["__rust_alloc", "__rust_dealloc", "__rust_realloc", "__rg_", "__rdl_"];
    let name = frame.function.strip_prefix("__rustc::").unwrap_or(&frame.function);
    SHIMS.iter().any(|shim| name.starts_with(shim))
}

/// A frame of ying's own code (a runner around a measured body, for instance), by name or source path.
pub(crate) fn is_own_frame(frame: &Frame) -> bool {
    frame.function.starts_with("ying::")
        || frame.function.starts_with("<ying::")
        || frame.file.as_deref().is_some_and(|file| file.replace('\\', "/").starts_with(OWN_SOURCE))
}

/// The standard library's allocation plumbing between user code and the allocator entry.
fn is_allocation_plumbing(frame: &Frame) -> bool {
    const NAMES: &[&str] = &["alloc::alloc::", "<alloc::alloc::Global", "core::alloc::", "std::alloc::"];
    const FILES: &[&str] = &["/alloc/src/alloc.rs", "/std/src/alloc.rs", "/core/src/alloc/global.rs"];
    NAMES.iter().any(|prefix| frame.function.starts_with(prefix))
        || frame
            .file
            .as_deref()
            .is_some_and(|file| FILES.iter().any(|suffix| file.replace('\\', "/").ends_with(suffix)))
}

/// Drops the frames above the allocating code: the run of the profiler's own frames every captured stack starts
/// with (up to and including the allocator entry), then the standard library's allocation plumbing. Frames of
/// the profiler further out (`ying::measure` around a measured body) are the caller's context and stay.
fn strip_allocator_frames<T: AsRef<Frame>>(frames: &mut Vec<T>) {
    let own = match frames.iter().position(|frame| is_allocator_entry(frame.as_ref())) {
        // Up to the allocator entry shims every frame is the profiler's, including helpers of the standard library
        // that unoptimised builds leave between its frames (a closure's `bool::then`, say).
        Some(entry) => entry + frames[entry..].iter().take_while(|frame| is_allocator_entry(frame.as_ref())).count(),
        None => frames.iter().position(|frame| !is_profiler_frame(frame.as_ref())).unwrap_or(frames.len()),
    };
    if own == 0 {
        return;
    }
    let plumbing =
        frames[own..].iter().position(|frame| !is_allocation_plumbing(frame.as_ref())).unwrap_or(frames.len() - own);
    frames.drain(..own + plumbing);
}

/// The frame through which the standard library enters a thread's (or `main`'s) code.
fn is_thread_entry(frame: &Frame) -> bool {
    // Full (`std::sys::backtrace::__rust_begin_short_backtrace`) or, with line tables only, short.
    let name = frame.function.as_str();
    name.starts_with("std::sys::backtrace::__rust_begin_short_backtrace")
        || name.starts_with("__rust_begin_short_backtrace<")
}

/// The function of ying's leak-test runner that calls the test's body (not the closure inside it).
fn is_leak_test_runner(frame: &Frame) -> bool {
    let name = frame.function.as_str();
    name == "ying::leak_test::run" || name.starts_with("ying::leak_test::run::<")
}

/// `<F as core::future::Future>::poll` and similar: plumbing between the async functions that matter.
fn is_poll_frame(function: &str) -> bool {
    function.starts_with('<') && function.ends_with(">::poll")
}

/// Symbolises a captured stack: its code frames (see [`symbolize_ips`]), then the spans it was captured in.
pub(crate) fn symbolize(stack: &Ips) -> Vec<Frame> {
    let mut frames = symbolize_ips(stack.as_slice());
    frames.extend(span_frames(stack));
    frames
}

/// The frames standing for the `tracing` spans `stack` was captured in, innermost first (`profile-spans`).
pub(crate) fn span_frames(stack: &Ips) -> Vec<Frame> {
    #[cfg(feature = "profile-spans")]
    {
        stack.spans().iter().map(|&span| crate::spans::frame(span)).collect()
    }
    #[cfg(not(feature = "profile-spans"))]
    {
        let _ = stack;
        Vec::new()
    }
}

/// Symbolises instruction pointers: inlined frames expanded, then [`tidy`].
fn symbolize_ips(ips: &[usize]) -> Vec<Frame> {
    resolve_ips(ips).into_iter().map(|located| located.frame).collect()
}

/// A frame with the instruction pointer it was resolved from.
struct Located {
    #[cfg_attr(not(feature = "pprof"), expect(dead_code, reason = "read by the pprof encoder only"))]
    ip: usize,
    frame: Frame,
}

impl AsRef<Frame> for Located {
    fn as_ref(&self) -> &Frame {
        &self.frame
    }
}

/// Resolves instruction pointers to frames (inlined frames expanded), each with its pointer, then [`tidy`]s them.
fn resolve_ips(ips: &[usize]) -> Vec<Located> {
    as_profiler(|| {
        let mut frames = Vec::new();
        for &ip in ips {
            let resolved = resolve_ip(ip);
            frames.extend(resolved.iter().map(|frame| Located { ip, frame: frame.clone() }));
            // Past a thread's entry lie only the runtime's and the C library's start-up frames, and past the
            // leak-test runner only the test harness: resolving them would load debug information for nothing.
            if resolved.iter().any(|frame| is_thread_entry(frame) || is_leak_test_runner(frame)) {
                break;
            }
        }
        tidy(frames)
    })
}

/// A captured stack as profile places, innermost first: one per instruction with its frames (inlined callees
/// first), trimmed as [`tidy`] trims, then one per `tracing` span.
#[cfg(feature = "pprof")]
pub(crate) fn places(stack: &Ips) -> Vec<crate::pprof::Place> {
    use crate::pprof::Place;
    let mut places: Vec<Place> = Vec::new();
    for located in resolve_ips(stack.as_slice()) {
        // The return address is past the call; the call instruction is the one before it.
        let address = Some(located.ip.saturating_sub(1) as u64);
        match places.last_mut() {
            Some(last) if last.address == address => last.frames.push(located.frame),
            _ => places.push(Place { address, frames: vec![located.frame] }),
        }
    }
    places.extend(span_frames(stack).into_iter().map(|frame| Place { address: None, frames: vec![frame] }));
    places
}

/// Trims a symbolised stack (innermost first, inlined frames expanded) to what reports show: the frames above the
/// allocating code dropped, `poll` plumbing dropped, and nothing past a thread's entry or the leak-test runner.
/// Frames that carry more than the frame (their instruction pointer, say) are trimmed the same way.
pub fn tidy<T: AsRef<Frame>>(mut frames: Vec<T>) -> Vec<T> {
    if let Some(entry) = frames.iter().position(|frame| is_thread_entry(frame.as_ref())) {
        frames.truncate(entry);
    }
    if let Some(runner) = frames.iter().position(|frame| is_leak_test_runner(frame.as_ref())) {
        frames.truncate(runner + 1);
    }
    strip_allocator_frames(&mut frames);
    frames.retain(|frame| !is_poll_frame(&frame.as_ref().function));
    frames
}

/// The address of `ip` in the process's executable file (as its debug information counts addresses), or `None`
/// when `ip` lies outside the executable or the platform is not supported. Lets another process symbolise.
pub(crate) fn executable_address(ip: usize) -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let (start, end, bias) = *executable_range();
        (start..end).contains(&ip).then(|| (ip - bias) as u64)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = ip;
        None
    }
}

/// The executable's mapped range and load bias: (start, end, bias); empty when unknown.
#[cfg(target_os = "linux")]
fn executable_range() -> &'static (usize, usize, usize) {
    static RANGE: std::sync::OnceLock<(usize, usize, usize)> = std::sync::OnceLock::new();
    RANGE.get_or_init(|| {
        // The first object is the executable.
        crate::loaded::find_map(|object| {
            let (start, end) = object
                .segments(libc::PT_LOAD)
                .fold((usize::MAX, 0), |(start, end), segment| (start.min(segment.0), end.max(segment.1)));
            core::ops::ControlFlow::Break(if start < end { (start, end, object.bias) } else { (0, 0, 0) })
        })
        .unwrap_or_default()
    })
}

#[cfg(test)]
mod tests {
    use super::{Frame, is_poll_frame, strip_allocator_frames};

    fn names(functions: &[&str]) -> Vec<Frame> {
        functions.iter().map(|&function| Frame::new(function, None, None)).collect()
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
        strip_allocator_frames(&mut frames);
        let kept: Vec<_> = frames.iter().map(|f| f.function.as_str()).collect();
        assert_eq!(
            kept,
            ["alloc::boxed::Box<T>::new", "app::cache::insert", "ying::measure::measure_with", "app::main"]
        );
    }

    #[test]
    fn short_inlined_names_are_recognised_by_their_source() {
        let own = |name: &str, file: &str| Frame::new(name, Some(format!("{}{file}", super::OWN_SOURCE)), Some(1));
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
        strip_allocator_frames(&mut frames);
        let kept: Vec<_> = frames.iter().map(|f| f.function.as_str()).collect();
        assert_eq!(kept, ["try_allocate_in<alloc::alloc::Global>", "remember", "measure_with<()>"]);
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
        strip_allocator_frames(&mut frames);
        let kept: Vec<_> = frames.iter().map(|f| f.function.as_str()).collect();
        assert_eq!(kept, ["alloc::vec::Vec<T>::with_capacity", "app::fill"]);
    }

    #[test]
    fn a_stack_without_an_allocator_entry_is_kept_whole() {
        let mut frames = names(&["app::a", "app::b"]);
        strip_allocator_frames(&mut frames);
        assert_eq!(frames.len(), 2);
    }

    #[test]
    fn poll_plumbing_is_recognised() {
        assert!(is_poll_frame("<core::future::from_generator::GenFuture<T> as core::future::future::Future>::poll"));
        assert!(!is_poll_frame("my_app::poll_queue"));
        assert!(!is_poll_frame("my_app::handler::{{closure}}"));
    }
}
