//! The names of roots: the static (a data symbol of the loaded object whose writable data holds the root word) or
//! the thread-local (a thread-local symbol of the executable, by its offset in the thread's block), demangled and
//! without its hash.

use core::ops::ControlFlow;
use object::read::{Object, ObjectSymbol};
use std::collections::HashMap;

/// The data symbols of one object file: `(address in the file, size, name)`, sorted.
struct Symbols {
    data: Vec<(u64, u64, String)>,
    thread_locals: Vec<(u64, u64, String)>,
}

impl Symbols {
    fn read(bytes: &[u8]) -> Option<Self> {
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
                list.push((symbol.address(), symbol.size(), demangle(name)));
            }
        }
        data.sort();
        data.dedup_by_key(|symbol| symbol.0);
        thread_locals.sort();
        thread_locals.dedup_by_key(|symbol| symbol.0);
        Some(Self { data, thread_locals })
    }
}

/// The symbol of `symbols` (sorted by address) that covers `address`.
fn covering(symbols: &[(u64, u64, String)], address: u64) -> Option<&str> {
    let index = symbols.partition_point(|&(start, _, _)| start <= address).checked_sub(1)?;
    let (start, size, name) = &symbols[index];
    (address < start + size).then_some(name.as_str())
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

/// Names roots, reading each object's symbols once.
#[derive(Default)]
pub(super) struct Namer {
    objects: HashMap<String, Option<Symbols>>,
}

impl Namer {
    /// The static holding the root word at `address`.
    pub(super) fn static_at(&mut self, address: usize) -> Option<String> {
        let (path, bias) = crate::base::loaded::find_map(|object| {
            if object.holds(address) {
                let name = object.name.to_string_lossy();
                let path = if name.is_empty() { "/proc/self/exe".to_owned() } else { name.into_owned() };
                ControlFlow::Break((path, object.bias))
            } else {
                ControlFlow::Continue(())
            }
        })?;
        let symbols = self.symbols(&path)?;
        covering(&symbols.data, (address - bias) as u64).map(user_path)
    }

    /// The statics of ying's own code and of the symbolisers it and the standard library use (their caches, their
    /// tables) in the object loaded at `bias` from `path`, as `(start, end)` in the process: not roots of the
    /// program's memory, and the empty slots of their tables hold stale words.
    pub(super) fn own_statics(&mut self, path: &str, bias: usize) -> Vec<(usize, usize)> {
        let Some(symbols) = self.symbols(path) else { return Vec::new() };
        symbols
            .data
            .iter()
            .filter(|(_, _, name)| OWN_STATICS.iter().any(|prefix| name.starts_with(prefix)))
            .map(|&(start, size, _)| (start as usize + bias, (start + size) as usize + bias))
            .collect()
    }

    /// The executable's thread-local at `offset` in its thread-local block.
    pub(super) fn thread_local_at(&mut self, offset: usize) -> Option<String> {
        let symbols = self.symbols("/proc/self/exe")?;
        covering(&symbols.thread_locals, offset as u64).map(user_path)
    }

    fn symbols(&mut self, path: &str) -> Option<&Symbols> {
        self.objects.entry(path.to_owned()).or_insert_with(|| Symbols::read(&std::fs::read(path).ok()?)).as_ref()
    }
}

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
