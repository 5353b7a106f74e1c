//! The names of roots: the static (a data symbol of the loaded object whose writable data holds the root word) or
//! the thread-local (a thread-local symbol of the executable, by its offset in the thread's block), demangled and
//! without its hash.

use core::ops::ControlFlow;
use object::read::{Object, ObjectSymbol};
use std::collections::HashMap;
use std::sync::Mutex;

/// The data symbols of one object file: `(address in the file, size, name as written in the file)`, sorted; names
/// are demangled only when a root is named.
struct Symbols {
    data: Vec<(u64, u64, &'static [u8])>,
    thread_locals: Vec<(u64, u64, &'static [u8])>,
}

impl Symbols {
    fn read(bytes: &'static [u8]) -> Option<Self> {
        let file = object::File::parse(bytes).ok()?;
        let (mut data, mut thread_locals) = (Vec::new(), Vec::new());
        let all = file.symbols().chain(file.dynamic_symbols());
        for symbol in all.filter(|symbol| !symbol.is_undefined() && symbol.size() > 0) {
            let list = match symbol.kind() {
                object::SymbolKind::Data => &mut data,
                object::SymbolKind::Tls => &mut thread_locals,
                _ => continue,
            };
            if let Ok(name) = symbol.name_bytes() {
                list.push((symbol.address(), symbol.size(), name));
            }
        }
        data.sort_unstable();
        data.dedup_by_key(|symbol| symbol.0);
        thread_locals.sort_unstable();
        thread_locals.dedup_by_key(|symbol| symbol.0);
        Some(Self { data, thread_locals })
    }

    /// The symbols of the object file at `path`, read once per process.
    fn of(path: &str) -> Option<&'static Self> {
        static OBJECTS: Mutex<Option<HashMap<String, Option<&'static Symbols>>>> = Mutex::new(None);
        let mut objects = OBJECTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *objects.get_or_insert_with(HashMap::new).entry(path.to_owned()).or_insert_with(|| {
            let bytes = if path == EXECUTABLE {
                crate::read::symbol_table::executable_bytes()
            } else {
                crate::read::symbol_table::map_file(path)
            };
            Some(&*Box::leak(Box::new(Self::read(bytes?)?)))
        })
    }
}

/// The path the executable is read at.
pub(super) const EXECUTABLE: &str = "/proc/self/exe";

/// The symbol of `symbols` (sorted by address) that covers `address`, demangled.
fn covering(symbols: &[(u64, u64, &[u8])], address: u64) -> Option<String> {
    let index = symbols.partition_point(|&(start, _, _)| start <= address).checked_sub(1)?;
    let (start, size, name) = symbols[index];
    (address < start + size).then(|| demangle(name))
}

/// A symbol's name demangled, without its hash.
fn demangle(name: &[u8]) -> String {
    format!("{:#}", backtrace::SymbolName::new(name))
}

/// The path a user knows a static or thread-local by: the standard library's wrappers around a `thread_local!`'s
/// value (`CACHE::{{constant}}::{{closure}}::VAL`, `__RUST_STD_INTERNAL_VAL`) cut off.
pub(super) fn user_path(name: &str) -> String {
    let cut = ["::{{constant}}", "::{{closure}}", "::__RUST_STD_INTERNAL", "::__getit", "::VAL"]
        .iter()
        .filter_map(|marker| name.find(marker))
        .min();
    cut.map_or(name, |cut| &name[..cut]).to_owned()
}

/// The paths of the statics that are not the program's roots (see [`Namer::own_statics`]).
const OWN_STATICS: [&str; 4] = ["ying::", "ying_preload::", "backtrace::", "std::backtrace_rs::"];

/// Names roots, reading each object's symbols once per process.
#[derive(Default)]
pub(super) struct Namer(());

impl Namer {
    /// The static holding the root word at `address`.
    pub(super) fn static_at(&mut self, address: usize) -> Option<String> {
        let (path, bias) = crate::base::loaded::find_map(|object| {
            if object.holds(address) {
                let name = object.name.to_string_lossy();
                let path = if name.is_empty() { EXECUTABLE.to_owned() } else { name.into_owned() };
                ControlFlow::Break((path, object.bias))
            } else {
                ControlFlow::Continue(())
            }
        })?;
        covering(&Symbols::of(&path)?.data, (address - bias) as u64).map(|name| user_path(&name))
    }

    /// The statics of ying's own code and of the symbolisers it and the standard library use (their caches, their
    /// tables) in the object loaded at `bias` from `path`, as `(start, end)` in the process: not roots of the
    /// program's memory, and the empty slots of their tables hold stale words. Only the names that mention those
    /// crates are demangled.
    pub(super) fn own_statics(&mut self, path: &str, bias: usize) -> Vec<(usize, usize)> {
        let Some(symbols) = Symbols::of(path) else { return Vec::new() };
        let mentions = |name: &[u8], part: &str| name.windows(part.len()).any(|window| window == part.as_bytes());
        symbols
            .data
            .iter()
            .filter(|(_, _, name)| OWN_CRATES.iter().any(|part| mentions(name, part)))
            .filter(|(_, _, name)| {
                let name = demangle(name);
                OWN_STATICS.iter().any(|prefix| name.starts_with(prefix))
            })
            .map(|&(start, size, _)| (start as usize + bias, (start + size) as usize + bias))
            .collect()
    }

    /// The executable's thread-local at `offset` in its thread-local block.
    pub(super) fn thread_local_at(&mut self, offset: usize) -> Option<String> {
        covering(&Symbols::of(EXECUTABLE)?.thread_locals, offset as u64).map(|name| user_path(&name))
    }
}

/// What the mangled names of [`OWN_STATICS`] contain.
const OWN_CRATES: [&str; 2] = ["ying", "backtrace"];

#[cfg(test)]
mod tests {
    use super::{Namer, user_path};
    use std::sync::Mutex;

    static A_STATIC_OF_THE_TEST: Mutex<Vec<u8>> = Mutex::new(Vec::new());

    #[test]
    fn a_static_is_named_by_the_symbol_holding_the_word() {
        let inside = (&raw const A_STATIC_OF_THE_TEST) as usize + 8;
        assert_eq!(A_STATIC_OF_THE_TEST.lock().unwrap().len(), 0);
        let name = Namer::default().static_at(inside);
        assert_eq!(name.as_deref(), Some("ying::read::reach::names::tests::A_STATIC_OF_THE_TEST"));
    }

    #[test]
    fn a_thread_locals_path_is_what_its_macro_was_given() {
        assert_eq!(user_path("app::BUFFER::{{constant}}::{{closure}}::VAL"), "app::BUFFER");
        assert_eq!(user_path("app::cache::CACHE::__RUST_STD_INTERNAL_VAL"), "app::cache::CACHE");
        assert_eq!(user_path("app::CACHE"), "app::CACHE");
    }
}
