//! Function names as symbolisers give them, whatever the debug-information level: the rule that picks the name of
//! the function really at an address, and the pieces of a demangled name the other rules look at.
//!
//! Full debug information names a function by its path (`leak_fixtures::open_session`). With
//! `debug = "line-tables-only"` it keeps only the bare name (`open_session`, `{closure#0}`,
//! `get_or_init_slow<T, (), F>`); with `debug = 0` there is none, and symbolisers fall back on the symbol table,
//! which names the functions that really exist in the machine code (not the inlined ones) by their full path. So
//! does [`function_at_address`] where debug information has only a bare name, as `addr2line -f` and valgrind do:
//! the runtime and `cargo ying` name frames by this one rule ([`frames_at_address`]).

use ying_report::Frame;

/// The name of the function really at an address (the outermost of its frames, the others being inlined into
/// it), from the debug information's name and the symbol table's (both demangled, without hash): the debug
/// information's when it is a path, the symbol table's when debug information gives a bare name or none.
///
/// ```
/// use ying_frames::names::function_at_address;
///
/// let symbol = Some("leak_fixtures::open_session");
/// assert_eq!(function_at_address(Some("open_session"), symbol).as_deref(), Some("leak_fixtures::open_session"));
/// assert_eq!(function_at_address(None, symbol).as_deref(), Some("leak_fixtures::open_session"));
/// assert_eq!(function_at_address(Some("app::main"), Some("app::other")).as_deref(), Some("app::main"));
/// ```
pub fn function_at_address(debug_name: Option<&str>, symbol_name: Option<&str>) -> Option<String> {
    match (debug_name, symbol_name) {
        (Some(debug), Some(symbol)) if is_bare(debug) && !is_bare(symbol) && names_the_same(debug, symbol) => {
            Some(symbol.to_owned())
        }
        (Some(debug), _) => Some(debug.to_owned()),
        (None, symbol) => symbol.map(str::to_owned),
    }
}

/// The frames of the instruction at `address`, innermost (inlined) first, from what debug information gives there
/// (`debug`, each with its demangled name if it has one, innermost first) and the symbol table's demangled name of
/// the function at the address (`symbol`, asked only when needed): the rule both symbolisers (the runtime's and
/// `cargo ying`'s) apply, so a frame is named alike wherever its stack was symbolised.
///
/// - the outermost frame is the function really at the address: named by [`function_at_address`], marked not
///   inlined; with no debug information at the address, the symbol table's name stands alone;
/// - an inlined frame without a name is left out: only the function it was inlined into has a symbol;
/// - the address itself (`0x2a7047`) names a frame only where neither debug information nor the symbol table does.
///
/// ```
/// use ying_report::Frame;
/// use ying_frames::names::{DebugFrame, frames_at_address};
///
/// let debug = vec![
///     DebugFrame::new(Some("alloc::boxed::Box<T>::new".into()), Some("boxed.rs".into()), Some(7)),
///     DebugFrame::new(None, Some("src/lib.rs".into()), Some(3)),
///     DebugFrame::new(Some("open_session".into()), Some("src/lib.rs".into()), Some(9)),
/// ];
/// let frames = frames_at_address(0x2a7047, debug, || Some("app::open_session".into()));
/// let names: Vec<&str> = frames.iter().map(|frame| frame.function.as_str()).collect();
/// assert_eq!(names, ["alloc::boxed::Box<T>::new", "app::open_session"]);
/// assert_eq!((frames[1].line, frames[1].inlined), (Some(9), false));
/// assert_eq!(frames_at_address(0x2a7047, Vec::new(), || Some("app::main".into()))[0].function, "app::main");
/// assert_eq!(frames_at_address(0x2a7047, Vec::new(), || None)[0].function, "0x2a7047");
/// ```
pub fn frames_at_address(address: u64, debug: Vec<DebugFrame>, symbol: impl FnOnce() -> Option<String>) -> Vec<Frame> {
    let mut debug = debug;
    let outermost = debug.pop().unwrap_or_default();
    let symbol = match outermost.function.as_deref() {
        Some(name) if !is_bare(name) => None,
        _ => symbol(),
    };
    let function = function_at_address(outermost.function.as_deref(), symbol.as_deref())
        .unwrap_or_else(|| format!("{address:#x}"));
    let mut frames: Vec<Frame> = debug
        .into_iter()
        .filter_map(|frame| Some(Frame::new(frame.function?, frame.file, frame.line).inlined(true)))
        .collect();
    frames.push(Frame::new(function, outermost.file, outermost.line));
    frames
}

/// What debug information gives for one frame at an address: the function's demangled name (none where it has
/// no name for it) and the source location.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DebugFrame {
    /// The demangled name, without hash.
    pub function: Option<String>,
    /// The source file.
    pub file: Option<String>,
    /// The line in `file`.
    pub line: Option<u32>,
}

impl DebugFrame {
    /// A frame of `function` (if named) at `file`:`line`.
    pub fn new(function: Option<String>, file: Option<String>, line: Option<u32>) -> Self {
        Self { function, file, line }
    }
}

/// Whether the symbol table's name can be the one debug information gives bare: the same last segment, or both
/// a closure or an async block (whose names differ between manglings: `{{closure}}`, `{closure#0}`,
/// `{async_block#0}`).
fn names_the_same(bare: &str, symbol: &str) -> bool {
    let (bare, symbol) = (last_segment(bare), last_segment(symbol));
    bare == symbol || (bare.starts_with('{') && symbol.starts_with('{'))
}

/// Whether `name` is bare: a single segment (generic arguments aside), not a path.
///
/// ```
/// use ying_frames::names::is_bare;
///
/// assert!(is_bare("open_session") && is_bare("{closure#0}") && is_bare("new<alloc::string::String>"));
/// assert!(!is_bare("leak_fixtures::open_session") && !is_bare("<alloc::vec::Vec<u8>>::push"));
/// ```
pub fn is_bare(name: &str) -> bool {
    segments(name).len() == 1 && !name.starts_with('<')
}

/// The last segment of a demangled path, without its generic arguments: `get_or_init_slow` for
/// `<std::sys::thread_local::native::lazy::Storage<T, ()>>::get_or_init_slow::<F>` and for
/// `std::sys::thread_local::native::lazy::Storage<T,D>::get_or_init_slow` alike.
pub fn last_segment(name: &str) -> &str {
    segments(name).last().copied().unwrap_or_default()
}

/// The segments of a demangled path, without generic arguments (`<...>` groups, including a qualified self type
/// `<T as Trait>` and a turbofish `::<F>`): `["Storage", "get_or_init_slow"]`, say, with the self type's own path
/// left out.
pub fn segments(name: &str) -> Vec<&str> {
    let mut segments = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    let bytes = name.as_bytes();
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'<' => {
                if depth == 0 {
                    push_segment(&mut segments, &name[start..index]);
                }
                depth += 1;
            }
            // `->` in a function pointer type is not the end of a group.
            b'>' if index > 0 && bytes[index - 1] == b'-' => {}
            b'>' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    start = index + 1;
                }
            }
            b':' if depth == 0 && bytes.get(index + 1) == Some(&b':') => {
                push_segment(&mut segments, &name[start..index]);
                index += 1;
                start = index + 1;
            }
            _ => {}
        }
        index += 1;
    }
    if depth == 0 {
        push_segment(&mut segments, &name[start..]);
    }
    segments
}

fn push_segment<'a>(segments: &mut Vec<&'a str>, segment: &'a str) {
    let segment = segment.trim();
    if !segment.is_empty() {
        segments.push(segment);
    }
}

/// Whether `name` is a closure's or an async block's (`{{closure}}`, `{closure#0}`, `{async_block#0}`, or a path
/// ending in one).
pub fn is_closure(name: &str) -> bool {
    last_segment(name).starts_with('{')
}

#[cfg(test)]
mod tests {
    use super::{function_at_address, is_bare, is_closure, last_segment, segments};

    #[test]
    fn segments_leave_generic_arguments_and_self_types_out() {
        assert_eq!(segments("leak_fixtures::open_session"), ["leak_fixtures", "open_session"]);
        assert_eq!(
            segments("<std::sys::thread_local::native::lazy::Storage<T, ()>>::get_or_init_slow::<F>"),
            ["get_or_init_slow"]
        );
        assert_eq!(
            segments("std::sys::thread_local::native::lazy::Storage<T,D>::get_or_init_slow"),
            ["std", "sys", "thread_local", "native", "lazy", "Storage", "get_or_init_slow"]
        );
        assert_eq!(
            segments("unwrap_or_else<tokio::runtime::park::ParkThread, fn() -> tokio::runtime::park::ParkThread>"),
            ["unwrap_or_else"]
        );
        assert_eq!(segments("leaks::box_leak::{{closure}}"), ["leaks", "box_leak", "{{closure}}"]);
        assert_eq!(last_segment("<alloc::vec::Vec<u8> as core::clone::Clone>::clone"), "clone");
    }

    #[test]
    fn bare_names_are_single_segments() {
        for bare in ["open_session", "{closure#0}", "{async_block#0}", "get_or_init_slow<T, (), F>", "__rust_try"] {
            assert!(is_bare(bare), "{bare}");
        }
        for path in ["leaks::box_leak::{{closure}}", "<alloc::vec::Vec<u8>>::push", "<T as core::clone::Clone>::clone"]
        {
            assert!(!is_bare(path), "{path}");
        }
        assert!(is_closure("{closure#0}") && is_closure("leaks::box_leak::{{closure}}::{{closure}}"));
        assert!(!is_closure("leaks::box_leak"));
    }

    #[test]
    fn a_bare_name_takes_the_symbol_tables_path() {
        let qualified = |debug: &str, symbol: &str| function_at_address(Some(debug), Some(symbol)).unwrap();
        assert_eq!(qualified("open_session", "leak_fixtures::open_session"), "leak_fixtures::open_session");
        assert_eq!(qualified("{closure#0}", "leaks::box_leak::{{closure}}"), "leaks::box_leak::{{closure}}");
        assert_eq!(
            qualified(
                "get_or_init_slow<u8, (), fn() -> u8>",
                "std::sys::thread_local::native::lazy::Storage<T,D>::get_or_init_slow"
            ),
            "std::sys::thread_local::native::lazy::Storage<T,D>::get_or_init_slow"
        );
        // A path is kept; a symbol of another function (the nearest symbol below an address in code the symbol
        // table does not cover) does not rename the frame; a bare symbol adds nothing.
        assert_eq!(qualified("app::cache::insert", "app::cache::insert_slow"), "app::cache::insert");
        assert_eq!(qualified("open_session", "app::close_session"), "open_session");
        assert_eq!(qualified("__rust_try", "__rust_try"), "__rust_try");
        assert_eq!(function_at_address(None, Some("app::main")).as_deref(), Some("app::main"));
        assert_eq!(function_at_address(Some("main"), None).as_deref(), Some("main"));
        assert_eq!(function_at_address(None, None), None);
    }
}
