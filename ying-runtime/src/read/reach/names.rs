//! The names of roots: the static (a data symbol of the loaded object whose writable data holds the root word) or
//! the thread-local (a thread-local symbol of the executable, by its offset in the thread's block), demangled and
//! without its hash.

use core::ops::ControlFlow;
use object::read::elf::{ElfFile64, Sym as _};
use object::read::{StringTable, elf::SymbolTable};
use std::collections::HashMap;
use std::sync::Mutex;
use ying_frames::OWN_CRATES;

/// Where a symbol's name lies: the table it is in (0: `.symtab`, 1: `.dynsym`) and its offset in that table's
/// strings.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Name {
    table: u8,
    offset: u32,
}

/// The data symbols of one object file: `(address in the file, size, name)`, sorted. A name is read from the string
/// table only when a root is named: the symbols are read without touching their names (a test binary's names are a
/// megabyte or more).
struct Symbols {
    data: Vec<(u64, u64, Name)>,
    thread_locals: Vec<(u64, u64, Name)>,
    strings: [StringTable<'static>; 2],
}

impl Symbols {
    fn read(bytes: &'static [u8]) -> Option<Self> {
        let file = ElfFile64::<object::Endianness>::parse(bytes).ok()?;
        let endian = file.endian();
        let (mut data, mut thread_locals) = (Vec::new(), Vec::new());
        let tables: [&SymbolTable<'static, _>; 2] = [file.elf_symbol_table(), file.elf_dynamic_symbol_table()];
        for (table, symbols) in tables.iter().enumerate() {
            for symbol in symbols.iter() {
                if symbol.is_undefined(endian) || symbol.st_size(endian) == 0 {
                    continue;
                }
                let list = match symbol.st_type() {
                    object::elf::STT_OBJECT | object::elf::STT_COMMON => &mut data,
                    object::elf::STT_TLS => &mut thread_locals,
                    _ => continue,
                };
                let name = Name { table: table as u8, offset: symbol.st_name(endian) };
                list.push((symbol.st_value(endian), symbol.st_size(endian), name));
            }
        }
        data.sort_unstable();
        data.dedup_by_key(|symbol| symbol.0);
        thread_locals.sort_unstable();
        thread_locals.dedup_by_key(|symbol| symbol.0);
        Some(Self { data, thread_locals, strings: tables.map(|symbols| symbols.strings()) })
    }

    /// The name of a symbol, as written in the file.
    fn name(&self, name: Name) -> &'static [u8] {
        self.strings[usize::from(name.table)].get(name.offset).unwrap_or_default()
    }

    /// The symbol of `symbols` (one of this file's lists, sorted by address) that covers `address`, demangled.
    fn covering(&self, symbols: &[(u64, u64, Name)], address: u64) -> Option<String> {
        let index = symbols.partition_point(|&(start, _, _)| start <= address).checked_sub(1)?;
        let (start, size, name) = symbols[index];
        (address < start + size).then(|| demangle(self.name(name)))
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
        let named = Symbols::of(&path)
            .and_then(|symbols| symbols.covering(&symbols.data, (address - bias) as u64).map(|name| user_path(&name)));
        // A library's data no symbol of it covers (the C library's own state, its symbols stripped): the library.
        named.or_else(|| {
            let file = path.rsplit('/').next().filter(|_| path != EXECUTABLE)?;
            Some(format!("data of {file}"))
        })
    }

    /// The statics of ying's own code and of the symbolisers it and the standard library use (their caches, their
    /// tables) in the object loaded at `bias` from `path`, as `(start, end)` in the process: not roots of the
    /// program's memory, and the empty slots of their tables hold stale words ([`ying_frames::is_own_static`]).
    /// The executable's are known without reading its symbols when the known code has them (`cargo ying` read them
    /// once for the binary); otherwise only the names that mention those crates are demangled.
    pub(super) fn own_statics(&mut self, path: &str, bias: usize) -> Vec<(usize, usize)> {
        if is_c_runtime(path) {
            return Vec::new();
        }
        known_own_statics(path, bias).unwrap_or_else(|| own_statics_by_name(path, bias))
    }

    /// The thread-locals of ying's own code and of the symbolisers in the executable (see
    /// [`ying_frames::KnownCode::own_thread_locals`]), as `(start, end)` offsets in its thread-local block: not roots
    /// of the program's memory (a thread's remembered walks keep words read from its stack, addresses of blocks
    /// among them). From the known code when it has them, else from the executable's symbols.
    pub(super) fn own_thread_locals(&mut self) -> Vec<(usize, usize)> {
        let offsets = |ranges: &[(u64, u64)]| -> Vec<(usize, usize)> {
            let offset = |at: u64| usize::try_from(at).ok();
            ranges.iter().filter_map(|&(start, end)| Some((offset(start)?, offset(end)?))).collect()
        };
        if let Some(known) = &crate::read::symbol_table::known_code().own_thread_locals {
            return offsets(known);
        }
        let Some(symbols) = Symbols::of(EXECUTABLE) else { return Vec::new() };
        let own: Vec<(u64, u64)> =
            own_by_name(symbols, &symbols.thread_locals, ying_frames::is_own_thread_local).collect();
        offsets(&own)
    }

    /// The executable's thread-local at `offset` in its thread-local block.
    pub(super) fn thread_local_at(&mut self, offset: usize) -> Option<String> {
        let symbols = Symbols::of(EXECUTABLE)?;
        symbols.covering(&symbols.thread_locals, offset as u64).map(|name| user_path(&name))
    }
}

/// Whether the object at `path` is the C library, its loader, the kernel's vDSO or one of the toolchain's runtime
/// libraries: no Rust code is linked into those, so none holds a static of ying's or of a symboliser's, and
/// [`Namer::own_statics`] does not read their symbols (four files opened, mapped and parsed in every test process).
fn is_c_runtime(path: &str) -> bool {
    const PREFIXES: [&str; 9] = [
        "libc.so.",
        "libm.so.",
        "libgcc_s.so.",
        "libpthread.so.",
        "libdl.so.",
        "librt.so.",
        "libstdc++.so.",
        "ld-linux",
        "linux-vdso.so.",
    ];
    let file = path.rsplit('/').next().unwrap_or(path);
    PREFIXES.iter().any(|prefix| file.starts_with(prefix))
}

/// [`Namer::own_statics`] of the executable from its known code, when that has them.
fn known_own_statics(path: &str, bias: usize) -> Option<Vec<(usize, usize)>> {
    let ranges = (path == EXECUTABLE).then(|| crate::read::symbol_table::known_code().own_statics.as_ref())??;
    let in_process = |at: u64| usize::try_from(at).ok()?.checked_add(bias);
    Some(ranges.iter().filter_map(|&(start, end)| Some((in_process(start)?, in_process(end)?))).collect())
}

/// [`Namer::own_statics`] from the object's symbols, read by name.
fn own_statics_by_name(path: &str, bias: usize) -> Vec<(usize, usize)> {
    let Some(symbols) = Symbols::of(path) else { return Vec::new() };
    own_by_name(symbols, &symbols.data, ying_frames::is_own_static)
        .map(|(start, end)| (start as usize + bias, end as usize + bias))
        .collect()
}

/// The symbols of `list` (one of `symbols`' lists) that are ying's own or a symboliser's (`own` says which by the
/// demangled name), as `(start, end)` in the file; only the names that mention those crates are demangled.
fn own_by_name<'s>(
    symbols: &'s Symbols,
    list: &'s [(u64, u64, Name)],
    own: fn(&str) -> bool,
) -> impl Iterator<Item = (u64, u64)> + 's {
    let mentions = |name: &[u8], part: &str| name.windows(part.len()).any(|window| window == part.as_bytes());
    list.iter()
        .filter(move |&&(_, _, name)| OWN_CRATES.iter().any(|part| mentions(symbols.name(name), part)))
        .filter(move |&&(_, _, name)| own(&demangle(symbols.name(name))))
        .map(|&(start, size, _)| (start, start + size))
}

#[cfg(test)]
mod tests {
    use super::{EXECUTABLE, Namer, Symbols, known_own_statics, own_by_name, own_statics_by_name, user_path};
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
    fn the_executables_own_statics_are_its_known_codes_the_same_as_its_symbols_name() {
        // This test binary holds the runtime: ying's statics are among its own.
        let mut known = known_own_statics(EXECUTABLE, 0x1000).expect("the known code has them");
        let mut named = own_statics_by_name(EXECUTABLE, 0x1000);
        for ranges in [&mut known, &mut named] {
            ranges.sort_unstable();
            ranges.dedup();
        }
        assert!(named.len() > 10, "{named:x?}");
        assert_eq!(known, named);
        assert_eq!(known_own_statics("/usr/lib/another.so", 0x1000), None, "only the executable's are known");
    }

    #[test]
    fn the_executables_own_thread_locals_are_its_known_codes_the_same_as_its_symbols_name() {
        let known = crate::read::symbol_table::known_code().own_thread_locals.clone();
        let mut known = known.expect("the known code has them");
        let symbols = Symbols::of(EXECUTABLE).unwrap();
        let mut named: Vec<(u64, u64)> =
            own_by_name(symbols, &symbols.thread_locals, ying_frames::is_own_thread_local).collect();
        for ranges in [&mut known, &mut named] {
            ranges.sort_unstable();
            ranges.dedup();
        }
        // The thread's state and its remembered walks at least; the tests' own thread-locals are not among them.
        assert!(named.len() >= 2, "{named:x?}");
        assert_eq!(known, named);
        let all = symbols.thread_locals.len();
        assert!(named.len() < all, "{} of {all}: a test's thread-locals stand for a program's", named.len());
        let names: Vec<String> = named
            .iter()
            .filter_map(|&(start, _)| Namer::default().thread_local_at(usize::try_from(start).ok()?))
            .collect();
        assert!(names.iter().any(|name| name == "ying::hot::unwind::remembered::TRACES"), "{names:?}");
        assert!(names.iter().all(|name| !name.contains("::tests::")), "{names:?}");
    }

    #[test]
    fn the_c_runtimes_libraries_hold_no_own_statics_and_are_not_read_for_them() {
        for path in ["/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib64/libm.so.6", "/lib/x86_64-linux-gnu/libgcc_s.so.1"]
            .into_iter()
            .chain(["/lib64/ld-linux-x86-64.so.2", "linux-vdso.so.1", "libstdc++.so.6"])
        {
            assert!(super::is_c_runtime(path), "{path}");
            assert_eq!(Namer::default().own_statics(path, 0x1000), []);
        }
        for path in [EXECUTABLE, "/usr/lib/libcrypto.so.3", "/opt/app/libcore_ffi.so", "/usr/lib/libc_rust.so"] {
            assert!(!super::is_c_runtime(path), "{path}");
        }
    }

    #[test]
    fn a_thread_locals_path_is_what_its_macro_was_given() {
        assert_eq!(user_path("app::BUFFER::{{constant}}::{{closure}}::VAL"), "app::BUFFER");
        assert_eq!(user_path("app::cache::CACHE::__RUST_STD_INTERNAL_VAL"), "app::cache::CACHE");
        assert_eq!(user_path("app::CACHE"), "app::CACHE");
    }
}
