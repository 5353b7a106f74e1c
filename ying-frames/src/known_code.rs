//! The code of a test executable that the runtime knows by its addresses, without reading debug information:
//! found in the executable's symbol table by name, once per executable.
//!
//! A test process would otherwise search its executable's symbol table itself (a string table of a megabyte or more
//! in a test binary built without optimisation), for every test. `cargo ying` reads it once per test binary
//! ([`KnownCode::read`], with the `elf` feature) and hands it to each of the binary's test processes in
//! [`KNOWN_CODE_ENV`](ying_report::KNOWN_CODE_ENV), stamped with the executable's identity; a process whose
//! executable is not the one stamped (a program the test starts inherits the environment) reads its own.

use serde::{Deserialize, Serialize};

pub use ying_report::ExecutableStamp;

/// What an executable's symbol table says of the code the runtime must know by address. Each range is a function's
/// (start, end) as the executable file places it (its symbol's value and size): a process adds its load bias.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnownCode {
    /// Whether the executable has the standard library's default global allocator (`__rdl_alloc`, `System` over
    /// `malloc`); `None` when it has no symbol table to tell (stripped, or not an ELF file).
    pub default_allocator: Option<bool>,
    /// The standard library's thread entries (`__rust_begin_short_backtrace`, see [`is_thread_entry`](crate::trim::is_thread_entry)), one
    /// copy for each kind of thread: stacks end there.
    pub thread_entries: Vec<(u64, u64)>,
    /// libtest's functions that run a test on the test's thread (`test::run_test_in_process`, inlined into a
    /// closure of `test::run_test` where it has no symbol of its own).
    pub run_test: Vec<(u64, u64)>,
    /// libtest's frame through which it calls the test function (`test::__rust_begin_short_backtrace`).
    pub test_entry: Vec<(u64, u64)>,
    /// The functions of the standard library's backtraces (`std::backtrace_rs::`): what they allocate (the debug
    /// information a panic's backtrace reads, cached for the process's life) is excused, as
    /// [`frames_are_excused`](crate::excuses::frames_are_excused) excuses it by name.
    #[serde(default)]
    pub std_backtrace: Vec<(u64, u64)>,
    /// The statics of ying's own code and of the symbolisers it and the standard library use (see
    /// [`is_own_static`]): the reachability scan does not read them as roots. Data symbols, `(start, end)` as the
    /// file places them; `None` when whoever read the symbol table did not look for them (a `cargo ying` of an
    /// older version): the process then looks itself.
    #[serde(default)]
    pub own_statics: Option<Vec<(u64, u64)>>,
    /// The thread-locals of ying's own code (a thread's remembered stack walks, its state): the reachability scan
    /// does not read them as roots, as it does not read [`own_statics`](Self::own_statics). Offsets in the
    /// executable's thread-local block, `(start, end)` (the file's values of its thread-local symbols); `None` when
    /// whoever read the symbol table did not look for them: the process then looks itself.
    #[serde(default)]
    pub own_thread_locals: Option<Vec<(u64, u64)>>,
    /// The constructors of tokio's task cells (`tokio::runtime::task::core::Cell<T, S>::new`, one for each future
    /// spawned): a block allocated under one of them is a task's cell, which begins with the task's state word.
    /// Where the optimiser inlined the constructor there is none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub task_cells: Vec<(u64, u64)>,
    /// tokio's vtable of its tasks' wakers (`tokio::runtime::task::waker::WAKER_VTABLE`, a data symbol): a waker of a
    /// task is the address of the task's cell beside the address of this vtable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub task_wakers: Vec<(u64, u64)>,
}

/// The path of tokio's task cell's constructors, as [`KnownCode::task_cells`] lists them.
pub(crate) const TASK_CELL: &str = "tokio::runtime::task::core::Cell<";
/// The path of tokio's task wakers' vtable, as [`KnownCode::task_wakers`] lists it.
const TASK_WAKER: &str = "tokio::runtime::task::waker::WAKER_VTABLE";

/// Whether the function demangled (without its hash) as `name` constructs a tokio task's cell (see
/// [`KnownCode::task_cells`]): `tokio::runtime::task::core::Cell<T,S>::new` as the legacy mangling names it,
/// `<tokio::runtime::task::core::Cell<F, S>>::new` as v0 does.
pub fn is_task_cell_constructor(name: &str) -> bool {
    let name = name.strip_prefix('<').unwrap_or(name);
    name.starts_with(TASK_CELL) && (name.ends_with(">::new") || name.ends_with(">>::new"))
}

/// The paths of the statics that are not the program's roots: ying's own (its tables, whose empty slots hold stale
/// words), and the caches of the symbolisers ying and the standard library use.
const OWN_STATICS: [&str; 4] = ["ying::", "ying_preload::", "backtrace::", "std::backtrace_rs::"];

/// What the mangled names of [`OWN_STATICS`] contain.
pub const OWN_CRATES: [&str; 2] = ["ying", "backtrace"];

/// Whether the static demangled (without its hash) as `name` is one of ying's own or of a symboliser's (see
/// [`KnownCode::own_statics`]).
pub fn is_own_static(name: &str) -> bool {
    OWN_STATICS.iter().any(|prefix| name.starts_with(prefix))
}

/// Whether the thread-local demangled (without its hash) as `name` is one of ying's own or of a symboliser's (see
/// [`KnownCode::own_thread_locals`]): named as [`is_own_static`] names statics, but for those of ying's unit tests,
/// which stand for a program's own.
pub fn is_own_thread_local(name: &str) -> bool {
    is_own_static(name) && !name.contains("::tests::")
}

/// [`KnownCode`] with the identity of the executable it was read from, as
/// [`KNOWN_CODE_ENV`](ying_report::KNOWN_CODE_ENV) carries it.
#[derive(Serialize, Deserialize)]
struct Stamped {
    executable: ExecutableStamp,
    code: KnownCode,
}

impl KnownCode {
    /// The value of [`KNOWN_CODE_ENV`](ying_report::KNOWN_CODE_ENV) for the executable stamped `executable`.
    pub fn to_env(&self, executable: ExecutableStamp) -> String {
        serde_json::to_string(&Stamped { executable, code: self.clone() }).expect("known code is JSON")
    }

    /// The known code in `value` (of [`KNOWN_CODE_ENV`](ying_report::KNOWN_CODE_ENV)) when it was read from the
    /// executable stamped `executable`; `None` when it is another's, or not such a value.
    pub fn from_env(value: &str, executable: ExecutableStamp) -> Option<Self> {
        let stamped: Stamped = serde_json::from_str(value).ok()?;
        (stamped.executable == executable).then_some(stamped.code)
    }
}

#[cfg(feature = "elf")]
impl KnownCode {
    /// What the symbol table of the ELF executable `bytes` tells; nothing known without one.
    ///
    /// Test binaries are often built without optimisation and hold tens of thousands of symbols or more: the string
    /// table is searched once for each name fragment (`memchr`'s vectorised search), only the names found there are
    /// demangled, and the symbols are then read once, each compared by its name's offset alone.
    pub fn read(bytes: &[u8]) -> Self {
        use object::read::elf::{ElfFile64, SectionHeader, Sym as _};
        let Ok(file) = ElfFile64::<object::Endianness>::parse(bytes) else { return Self::default() };
        let endian = file.endian();
        let symbols = file.elf_symbol_table();
        let names = file
            .elf_section_table()
            .section(symbols.string_section())
            .ok()
            .and_then(|section| section.data(endian, bytes).ok())
            .filter(|names| !names.is_empty());
        let Some(names) = names else { return Self::default() };

        // Where each name of each kind starts in the string table, sorted.
        let mut starts: [Vec<u32>; KINDS] = Default::default();
        for (fragment, kinds) in [
            (THREAD_ENTRY, &[Kind::ThreadEntry, Kind::TestEntry][..]),
            ("run_test", &[Kind::RunTest]),
            ("backtrace_rs", &[Kind::StdBacktrace]),
            (OWN_CRATES[0], &[Kind::OwnStatic, Kind::OwnThreadLocal]),
            (OWN_CRATES[1], &[Kind::OwnStatic, Kind::OwnThreadLocal]),
            ("4task4core", &[Kind::TaskCell]),
            ("12WAKER_VTABLE", &[Kind::TaskWaker]),
        ] {
            for at in memchr::memmem::find_iter(names, fragment.as_bytes()) {
                let start = names[..at].iter().rposition(|&byte| byte == 0).map_or(0, |nul| nul + 1);
                let end = names[at..].iter().position(|&byte| byte == 0).map_or(names.len(), |nul| at + nul);
                let Ok(name) = std::str::from_utf8(&names[start..end]) else { continue };
                let name = format!("{:#}", rustc_demangle::demangle(name));
                for &kind in kinds {
                    if kind.accepts(&name)
                        && let Ok(start) = u32::try_from(start)
                    {
                        starts[kind as usize].push(start);
                    }
                }
            }
        }
        for starts in &mut starts {
            starts.sort_unstable();
            starts.dedup();
        }

        let mut code = Self {
            default_allocator: Some(memchr::memmem::find(names, b"__rdl_alloc").is_some()),
            own_statics: Some(Vec::new()),
            own_thread_locals: Some(Vec::new()),
            ..Self::default()
        };
        if starts.iter().all(Vec::is_empty) {
            return code;
        }
        for symbol in symbols.symbols().iter() {
            let kinds: &[Kind] = match symbol.st_type() {
                object::elf::STT_FUNC => {
                    &[Kind::ThreadEntry, Kind::RunTest, Kind::TestEntry, Kind::StdBacktrace, Kind::TaskCell]
                }
                object::elf::STT_OBJECT | object::elf::STT_COMMON if !symbol.is_undefined(endian) => {
                    &[Kind::OwnStatic, Kind::TaskWaker]
                }
                object::elf::STT_TLS if !symbol.is_undefined(endian) => &[Kind::OwnThreadLocal],
                _ => continue,
            };
            let name = symbol.st_name(endian);
            let start = symbol.st_value(endian);
            let range = (start, start.saturating_add(symbol.st_size(endian)));
            if range.0 >= range.1 {
                continue;
            }
            for &kind in kinds {
                if starts[kind as usize].binary_search(&name).is_ok() {
                    code.ranges_mut(kind).push(range);
                }
            }
        }
        code
    }

    fn ranges_mut(&mut self, kind: Kind) -> &mut Vec<(u64, u64)> {
        match kind {
            Kind::ThreadEntry => &mut self.thread_entries,
            Kind::RunTest => &mut self.run_test,
            Kind::TestEntry => &mut self.test_entry,
            Kind::StdBacktrace => &mut self.std_backtrace,
            Kind::OwnStatic => self.own_statics.get_or_insert_with(Vec::new),
            Kind::OwnThreadLocal => self.own_thread_locals.get_or_insert_with(Vec::new),
            Kind::TaskCell => &mut self.task_cells,
            Kind::TaskWaker => &mut self.task_wakers,
        }
    }
}

/// The name of the standard library's thread entry (and of libtest's test entry), as mangled names spell it.
#[cfg(feature = "elf")]
const THREAD_ENTRY: &str = "__rust_begin_short_backtrace";

/// The kinds of known functions that [`KnownCode::read`] looks for by name.
#[cfg(feature = "elf")]
#[derive(Clone, Copy)]
enum Kind {
    ThreadEntry = 0,
    RunTest = 1,
    TestEntry = 2,
    StdBacktrace = 3,
    OwnStatic = 4,
    OwnThreadLocal = 5,
    TaskCell = 6,
    TaskWaker = 7,
}

/// How many kinds there are.
#[cfg(feature = "elf")]
const KINDS: usize = 8;

#[cfg(feature = "elf")]
impl Kind {
    /// Whether the function demangled (without its hash) as `name` is of this kind.
    fn accepts(self, name: &str) -> bool {
        match self {
            Self::ThreadEntry => crate::trim::is_thread_entry(&ying_report::Frame::new(name, None, None)),
            // `run_test_in_process` is inlined into the closure `run_test` runs on the test's thread (its own
            // symbol where it is not).
            Self::RunTest => {
                name.starts_with("test::run_test_in_process") || name.starts_with("test::run_test::{closure")
            }
            Self::TestEntry => name.starts_with("test::__rust_begin_short_backtrace"),
            Self::StdBacktrace => crate::excuses::is_std_backtrace(name),
            Self::OwnStatic => is_own_static(name),
            Self::OwnThreadLocal => is_own_thread_local(name),
            Self::TaskCell => is_task_cell_constructor(name),
            Self::TaskWaker => name == TASK_WAKER,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ExecutableStamp, KnownCode};

    fn stamp(len: u64) -> ExecutableStamp {
        serde_json::from_value(serde_json::json!({"device": 1, "inode": 2, "len": len, "modified_ns": 3})).unwrap()
    }

    #[test]
    fn known_code_passed_in_the_environment_holds_for_its_executable_alone() {
        let code = KnownCode {
            default_allocator: Some(true),
            thread_entries: vec![(16, 32)],
            run_test: vec![(64, 128), (256, 300)],
            test_entry: vec![(400, 410)],
            std_backtrace: vec![(500, 600)],
            own_statics: Some(vec![(700, 720)]),
            own_thread_locals: Some(vec![(8, 24)]),
            task_cells: vec![(800, 900)],
            task_wakers: vec![(1000, 1032)],
        };
        let value = code.to_env(stamp(1000));
        assert_eq!(KnownCode::from_env(&value, stamp(1000)), Some(code));
        assert_eq!(KnownCode::from_env(&value, stamp(1001)), None, "another executable");
        assert_eq!(KnownCode::from_env("{\"code\": 1}", stamp(1000)), None);
    }

    #[cfg(unix)]
    #[test]
    fn a_files_stamp_changes_with_its_contents() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("executable");
        let stamp_now = || ExecutableStamp::of(&std::fs::metadata(&path).unwrap()).unwrap();
        std::fs::write(&path, "one").unwrap();
        let first = stamp_now();
        assert_eq!(stamp_now(), first);
        std::fs::write(&path, "three").unwrap();
        assert_ne!(stamp_now(), first);
    }

    #[cfg(all(feature = "elf", target_os = "linux"))]
    #[test]
    fn this_test_executables_thread_entries_and_test_harness_are_found() {
        let bytes = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let code = KnownCode::read(&bytes);
        assert_eq!(code.default_allocator, Some(true), "a test binary has the default global allocator");
        assert!(!code.thread_entries.is_empty(), "{code:?}");
        assert!(!code.run_test.is_empty(), "{code:?}");
        assert!(!code.test_entry.is_empty(), "{code:?}");
        assert!(code.thread_entries.iter().all(|entry| !code.test_entry.contains(entry)), "{code:?}");
        // The default panic hook's backtrace, `<std::backtrace_rs::symbolize::gimli::Cache>::with_global` among
        // its functions.
        assert!(!code.std_backtrace.is_empty(), "{code:?}");
        assert!(code.std_backtrace.iter().all(|range| !code.thread_entries.contains(range)), "{code:?}");
        assert_eq!(KnownCode::read(b"not an executable"), KnownCode::default());
    }

    #[test]
    fn a_task_cells_constructor_is_named_as_either_mangling_demangles_it() {
        use super::is_task_cell_constructor;
        assert!(is_task_cell_constructor("tokio::runtime::task::core::Cell<T,S>::new"));
        assert!(is_task_cell_constructor(
            "<tokio::runtime::task::core::Cell<my_crate::work::{closure#0}, alloc::sync::Arc<tokio::runtime::\
             scheduler::current_thread::Handle>>>::new"
        ));
        assert!(!is_task_cell_constructor("tokio::runtime::task::core::Cell<T,S>::new::new_header"));
        assert!(!is_task_cell_constructor("tokio::runtime::task::core::Core<T,S>::poll"));
        assert!(!is_task_cell_constructor("my_crate::Cell<T>::new"));
    }

    /// What a task of this executable's sees of its own waker: the address of its vtable.
    #[cfg(all(feature = "elf", target_os = "linux"))]
    fn a_task_wakers_vtable() -> usize {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let task = std::future::poll_fn(|cx| std::task::Poll::Ready(core::ptr::from_ref(cx.waker().vtable()).addr()));
        runtime.block_on(async { tokio::spawn(task).await.unwrap() })
    }

    #[cfg(all(feature = "elf", target_os = "linux"))]
    #[test]
    fn this_test_executables_task_cells_and_task_wakers_vtable_are_found() {
        use object::read::{Object, ObjectSymbol};
        // A task spawned, so that this executable has a cell of its own future's, and its waker's vtable read.
        let vtable = a_task_wakers_vtable();
        let bytes = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let code = KnownCode::read(&bytes);
        let file = object::File::parse(&*bytes).unwrap();
        let named = |range: (u64, u64)| {
            let symbol = file.symbols().find(|symbol| (symbol.address(), symbol.address() + symbol.size()) == range);
            symbol.map(|symbol| format!("{:#}", rustc_demangle::demangle(symbol.name().unwrap_or_default())))
        };
        assert!(!code.task_cells.is_empty(), "{code:?}");
        for &range in &code.task_cells {
            let name = named(range).unwrap_or_default();
            assert!(name.starts_with("tokio::runtime::task::core::Cell<") && name.ends_with(">::new"), "{name}");
        }
        // The vtable the waker named, where this executable was loaded (its address less the load's bias, which
        // this very function's address gives).
        let this = file
            .symbols()
            .find(|symbol| {
                named((symbol.address(), symbol.address() + symbol.size()))
                    .is_some_and(|name| name == "ying_frames::known_code::tests::a_task_wakers_vtable")
            })
            .expect("this function has a symbol");
        let bias = (a_task_wakers_vtable as fn() -> usize as usize).wrapping_sub(this.address() as usize);
        let vtable = vtable.wrapping_sub(bias) as u64;
        assert_eq!(code.task_wakers.len(), 1, "{code:?}");
        let (start, end) = code.task_wakers[0];
        assert!((start..end).contains(&vtable), "{vtable:#x} is not in {start:#x}..{end:#x}");
        assert_eq!(named((start, end)).as_deref(), Some("tokio::runtime::task::waker::WAKER_VTABLE"));
    }

    #[cfg(all(feature = "elf", target_os = "linux"))]
    #[test]
    fn this_test_executables_own_statics_are_the_data_symbols_so_named() {
        use object::read::{Object, ObjectSymbol};
        let bytes = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let mut found = KnownCode::read(&bytes).own_statics.expect("looked for");
        // Every data symbol of the symbol table, demangled and tested one by one.
        let file = object::File::parse(&*bytes).unwrap();
        let mut named: Vec<(u64, u64)> = file
            .symbols()
            .filter(|symbol| symbol.kind() == object::SymbolKind::Data && !symbol.is_undefined() && symbol.size() > 0)
            .filter(|symbol| {
                let name = format!("{:#}", rustc_demangle::demangle(symbol.name().unwrap_or_default()));
                super::is_own_static(&name)
            })
            .map(|symbol| (symbol.address(), symbol.address() + symbol.size()))
            .collect();
        found.sort_unstable();
        named.sort_unstable();
        named.dedup();
        found.dedup();
        // The standard library's backtrace keeps a few (`debug_path_exists::DEBUG_PATH_EXISTS`).
        assert!(!named.is_empty());
        assert_eq!(found, named);
    }
}
