//! Symbol resolution, outside the allocator: instruction pointers to demangled frames with inlined frames expanded,
//! the profiler's own frames and async `poll` plumbing filtered.

#[cfg(target_os = "linux")]
use super::symbol_table::executable_address;
use crate::base::thread::as_profiler;
use crate::hot::stacks::Ips;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use ying_frames::Trim;
use ying_frames::names::{DebugFrame, frames_at_address};
use ying_report::Frame;

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
    let mut debug = Vec::new();
    // The return address points after the call; step back into the call instruction so the line is the call's.
    let call = ip.saturating_sub(1);
    backtrace::resolve(call as *mut core::ffi::c_void, |symbol| {
        let function = symbol.name().map(|name| format!("{name:#}"));
        let file = symbol.filename().map(|path| path.display().to_string());
        debug.push(DebugFrame::new(function, file, symbol.lineno()));
    });
    // The outermost function at an instruction is the one really there; the others were inlined into it. Where
    // debug information names it bare, or not at all, the symbol table gives its path.
    let frames = frames_at_address(ip as u64, debug, || super::symbol_table::function_at(call));
    let frames: Arc<[Frame]> = frames.into();
    cache.insert(ip, Arc::clone(&frames));
    frames
}

/// Where the profiler's own source lives, as debug information records it: its package's directory, or, in a build
/// whose paths are remapped (`--remap-path-prefix`, as cargo-ying's build of the allocation interposer does, so
/// that the installed binary names no directory of the machine it was built on), the remapped directory that build
/// gives in `YING_REMAPPED_RUNTIME_SOURCE`.
pub(crate) const OWN_SOURCE: &str = match option_env!("YING_REMAPPED_RUNTIME_SOURCE") {
    Some(remapped) => remapped,
    None => concat!(env!("CARGO_MANIFEST_DIR"), "/src/"),
};

/// The trimming rules for stacks this runtime captures.
pub(crate) const TRIM: Trim<'static> = Trim::new(OWN_SOURCE);

/// A frame of ying's own code (a runner around a measured body, for instance), by name or source path.
pub(crate) fn is_own_frame(frame: &Frame) -> bool {
    TRIM.is_runtime_frame(frame)
}

/// Names the frame of a leak test's body after the test function (see [`Trim::name_test_body`]).
pub(crate) fn name_test_body(frames: Vec<Frame>, function: &str) -> Vec<Frame> {
    TRIM.name_test_body(frames, function)
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
        stack.spans().iter().map(|&span| span_frame(span)).collect()
    }
    #[cfg(not(feature = "profile-spans"))]
    {
        let _ = stack;
        Vec::new()
    }
}

/// The frame that stands for a recorded span.
#[cfg(feature = "profile-spans")]
fn span_frame(span: usize) -> Frame {
    // SAFETY: `span` was stored by `SpanLayer::on_enter` (see `products::spans`) from a `&'static Metadata<'static>`:
    // it points to metadata that lives as long as the program and is only ever read.
    let metadata = unsafe { &*(span as *const tracing_core::Metadata<'static>) };
    Frame::new(format!("span:{}", metadata.name()), metadata.file().map(str::to_owned), metadata.line())
}

/// Symbolises instruction pointers: inlined frames expanded, then trimmed ([`Trim::tidy`]).
fn symbolize_ips(ips: &[usize]) -> Vec<Frame> {
    resolve_ips(ips).into_iter().map(|located| located.frame).collect()
}

/// A frame with the instruction pointer it was resolved from, and its index among that pointer's frames.
struct Located {
    ip: usize,
    index: usize,
    frame: Frame,
}

impl AsRef<Frame> for Located {
    fn as_ref(&self) -> &Frame {
        &self.frame
    }
}

/// Resolves instruction pointers to frames (inlined frames expanded), each with its pointer, then trims them
/// ([`Trim::tidy`]).
fn resolve_ips(ips: &[usize]) -> Vec<Located> {
    as_profiler(|| TRIM.tidy(resolve_untrimmed(ips)))
}

/// Resolves instruction pointers to frames (inlined frames expanded), each with its pointer and its index among the
/// pointer's frames, up to a thread's entry or the leak-test runner.
fn resolve_untrimmed(ips: &[usize]) -> Vec<Located> {
    let mut frames = Vec::new();
    for &ip in ips {
        let resolved = resolve_ip(ip);
        frames.extend(resolved.iter().enumerate().map(|(index, frame)| Located { ip, index, frame: frame.clone() }));
        // Past a thread's entry lie only the runtime's and the C library's start-up frames, and past the
        // leak-test runner only the test harness: resolving them would load debug information for nothing.
        if resolved.iter().any(|frame| ying_frames::is_thread_entry(frame) || ying_frames::is_leak_test_runner(frame)) {
            break;
        }
    }
    frames
}

/// The type a captured stack allocated, as `cargo ying` names it for the stacks it symbolises: read at the frame
/// the frame rules pick ([`ying_frames::types::allocated_type`]) after the allocator's frames
/// ([`Trim::strip_allocator_frames`]), from the executable's debug information (see [`super::types`]). `None` where
/// the rules pick no frame, the frame is not the executable's, or its debug information does not tell.
pub(crate) fn allocated_type(stack: &Ips) -> Option<String> {
    as_profiler(|| {
        let mut frames = resolve_untrimmed(stack.as_slice());
        TRIM.strip_allocator_frames(&mut frames);
        let allocated = ying_frames::types::allocated_type(&frames)?;
        let at = &frames[allocated.frame()];
        super::types::read(at.ip, at.index, resolve_ip(at.ip).len(), allocated)
    })
}

/// What a block allocated at `stack` holds, and how: the layout of the type it allocated (see [`allocated_type`]),
/// and where in the block its values lie.
pub(crate) fn allocated_layout(
    stack: &Ips,
) -> Option<(ying_frames::debug_types::layout::Layout, ying_frames::types::Holding)> {
    as_profiler(|| {
        let mut frames = resolve_untrimmed(stack.as_slice());
        TRIM.strip_allocator_frames(&mut frames);
        let allocated = ying_frames::types::allocated_type(&frames)?;
        let holding = ying_frames::types::holding(&frames, allocated);
        let at = &frames[allocated.frame()];
        let layout = super::types::layout(at.ip, at.index, resolve_ip(at.ip).len(), allocated)?;
        Some((layout, holding))
    })
}

/// One place of a stack, innermost first: a machine instruction with its frames (inlined callees first), or a
/// `tracing` span, which has no address.
#[cfg(feature = "pprof")]
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Place {
    /// The instruction's address (the return address of a call), `None` for a span.
    pub(crate) address: Option<u64>,
    /// Its frames, inlined callees first, the function really at the address last.
    pub(crate) frames: Vec<Frame>,
}

/// A captured stack as profile places, innermost first: one per instruction with its frames (inlined callees
/// first), trimmed as [`Trim::tidy`] trims, then one per `tracing` span.
#[cfg(feature = "pprof")]
pub(crate) fn places(stack: &Ips) -> Vec<Place> {
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

/// `ips` as addresses in the process's executable file, for another process to symbolise, when that names the
/// allocation: the first frame outside this runtime's own object (the allocation interposer's library, whose frames
/// a report trims) is the executable's. The frames of the unwinder (`_Unwind_Backtrace` around the standard
/// library's backtraces) are left out, as in deferred sampled stacks. `None` when a shared library made the
/// allocation or calls the code that did (a C library allocating through a Rust callback, as zlib does through
/// flate2's `zalloc`): only this process can name its code, and its frames stay in the stack. `None` too where the
/// platform is not supported.
pub(crate) fn deferrable_addresses(ips: &[usize]) -> Option<Vec<u64>> {
    #[cfg(target_os = "linux")]
    {
        let (start, end) = *own_object_range();
        let mut outside = ips.iter().filter(|&&ip| !(start..end).contains(&ip) || executable_address(ip).is_some());
        if outside.next().is_some_and(|&ip| executable_address(ip).is_none()) {
            return None;
        }
        // A shared library's frame between two of the executable's, other than the unwinder's.
        let first = ips.iter().position(|&ip| executable_address(ip).is_some())?;
        let last = ips.iter().rposition(|&ip| executable_address(ip).is_some())?;
        if ips[first..last].iter().any(|&ip| executable_address(ip).is_none() && !is_pass_through(ip)) {
            return None;
        }
        Some(ips.iter().filter_map(|&ip| executable_address(ip)).collect())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = ips;
        None
    }
}

/// Whether `ip` lies where the standard library's backtraces pass through a shared library: the unwinder's
/// (`libgcc_s`: `_Unwind_Backtrace`) and the loader's walk of the loaded objects (`dl_iterate_phdr`), which call back
/// into the executable. Their frames say nothing of an allocation, and naming every site of a panic's backtrace in
/// the test's process (its debug information read there) would cost each panicking test a third of a second.
#[cfg(target_os = "linux")]
fn is_pass_through(ip: usize) -> bool {
    let unwinder = crate::base::loaded::find_map(|object| {
        if object.holds(ip) {
            let name = object.name.to_bytes();
            let file = name.rsplit(|&byte| byte == b'/').next().unwrap_or(name);
            core::ops::ControlFlow::Break(file.starts_with(b"libgcc_s"))
        } else {
            core::ops::ControlFlow::Continue(())
        }
    })
    .unwrap_or(false);
    unwinder || in_loaders_walk(ip)
}

/// Whether `ip` lies in the loader's walk of the loaded objects (`dl_iterate_phdr`), by the symbol the loader
/// names there (`dladdr`).
#[cfg(target_os = "linux")]
fn in_loaders_walk(ip: usize) -> bool {
    let mut info = core::mem::MaybeUninit::<libc::Dl_info>::uninit();
    // SAFETY: `dladdr` fills `info` for any address, returning 0 when no loaded object holds it.
    let found = unsafe { libc::dladdr(ip as *const libc::c_void, info.as_mut_ptr()) };
    if found == 0 {
        return false;
    }
    // SAFETY: `dladdr` returned non-zero, so it filled `info`.
    let info = unsafe { info.assume_init() };
    // SAFETY: a non-null `dli_sname` is a C string of the symbol table of an object loaded now, read before
    // returning.
    !info.dli_sname.is_null()
        && unsafe { core::ffi::CStr::from_ptr(info.dli_sname) }.to_bytes().ends_with(b"dl_iterate_phdr")
}

/// The mapped range of the object this runtime's code lies in: the executable, or the allocation interposer's
/// library; empty when unknown.
#[cfg(target_os = "linux")]
fn own_object_range() -> &'static (usize, usize) {
    static RANGE: std::sync::OnceLock<(usize, usize)> = std::sync::OnceLock::new();
    RANGE.get_or_init(|| {
        let own = deferrable_addresses as *const () as usize;
        crate::base::loaded::find_map(|object| {
            if !object.holds(own) {
                return core::ops::ControlFlow::Continue(());
            }
            core::ops::ControlFlow::Break(object.loaded_range())
        })
        .filter(|(start, end)| start < end)
        .unwrap_or_default()
    })
}
