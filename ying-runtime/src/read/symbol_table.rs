//! The executable's symbol table: the full path of the function at an address, for frames whose debug information
//! names them bare (`debug = "line-tables-only"`). Read once, on first need, from the executable file.

/// The demangled name (without hash) of the function the symbol table places at `ip`, an address in this
/// process's executable; `None` outside it, where the platform is not supported, or without a symbol table.
pub(crate) fn function_at(ip: usize) -> Option<String> {
    #[cfg(target_os = "linux")]
    {
        use object::read::{Object, SymbolMap, SymbolMapName};
        static SYMBOLS: std::sync::OnceLock<Option<SymbolMap<SymbolMapName<'static>>>> = std::sync::OnceLock::new();
        let address = super::symbolize::executable_address(ip)?;
        let symbols =
            SYMBOLS.get_or_init(|| object::File::parse(executable_file()?).ok().map(|file| file.symbol_map()));
        let name = symbols.as_ref()?.containing(address)?.name();
        Some(format!("{:#}", backtrace::SymbolName::new(name.as_bytes())))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = ip;
        None
    }
}

/// The executable file, mapped for reading for the rest of the process (once).
#[cfg(target_os = "linux")]
fn executable_file() -> Option<&'static [u8]> {
    static FILE: std::sync::OnceLock<Option<&'static [u8]>> = std::sync::OnceLock::new();
    *FILE.get_or_init(map_executable)
}

#[cfg(target_os = "linux")]
fn map_executable() -> Option<&'static [u8]> {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open("/proc/self/exe").ok()?;
    let len = usize::try_from(file.metadata().ok()?.len()).ok().filter(|&len| len > 0)?;
    // SAFETY: a fresh read-only private mapping of an open file descriptor, at an address the system chooses: it
    // aliases no memory of the program. The mapping outlives the descriptor, which is closed on return.
    let mapped =
        unsafe { libc::mmap(core::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE, file.as_raw_fd(), 0) };
    if mapped == libc::MAP_FAILED {
        return None;
    }
    // SAFETY: the mapping is `len` readable bytes and is never unmapped. A running executable cannot be written
    // (`ETXTBSY`), so the bytes do not change under the reader.
    Some(unsafe { core::slice::from_raw_parts(mapped.cast::<u8>(), len) })
}

/// Ends the stacks captured from now on at their thread's entry ([`ying_report::is_thread_entry`]: the standard
/// library's `__rust_begin_short_backtrace`, one copy per kind of thread in the executable), as reports trim them:
/// a spawned thread's captures then neither walk nor replay the start-up frames past it. Reads the symbol table on
/// the first call; does nothing more on later ones, where the platform is not supported, or without a symbol table.
pub(crate) fn end_stacks_at_thread_entries() {
    static DONE: std::sync::Once = std::sync::Once::new();
    DONE.call_once(|| crate::base::thread::as_profiler(|| crate::hot::unwind::end_stacks_at(thread_entries())));
}

/// The string table of `file`'s symbols (`bytes`), if it has one.
#[cfg(target_os = "linux")]
fn symbol_names<'a>(file: &object::read::elf::ElfFile64<'a, object::Endianness>, bytes: &'a [u8]) -> Option<&'a [u8]> {
    use object::read::elf::SectionHeader;
    let section = file.elf_section_table().section(file.elf_symbol_table().string_section()).ok()?;
    section.data(file.endian(), bytes).ok().filter(|names| !names.is_empty())
}

/// Whether a symbol of the executable has `fragment` in its (mangled) name; `None` when the executable has no
/// symbol table to tell (stripped, or not an ELF file).
pub(crate) fn executable_names(fragment: &str) -> Option<bool> {
    #[cfg(target_os = "linux")]
    {
        let bytes = executable_file()?;
        let file = object::read::elf::ElfFile64::<object::Endianness>::parse(bytes).ok()?;
        let names = symbol_names(&file, bytes)?;
        Some(memchr::memmem::find(names, fragment.as_bytes()).is_some())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = fragment;
        None
    }
}

/// The address ranges (start, end) in this process of the executable's thread entries.
fn thread_entries() -> Vec<(usize, usize)> {
    executable_functions(ENTRY, |name| ying_report::is_thread_entry(&ying_report::Frame::new(name, None, None)))
}

/// The address ranges (start, end) in this process of the executable's functions whose mangled name holds
/// `fragment` (legacy and v0 manglings both spell a name out) and whose demangled name, without its hash, `accept`
/// takes: every copy of a generic function. Test binaries are often built without optimisation and hold tens of
/// thousands of symbols or more: the string table is searched for `fragment` once (`memchr`'s vectorised search),
/// only the names found there are demangled, and the symbols are then read once, each compared by its name's
/// offset alone. Nothing where the platform is not supported or the executable has no symbol table.
pub(crate) fn executable_functions(fragment: &str, accept: impl Fn(&str) -> bool) -> Vec<(usize, usize)> {
    #[cfg(target_os = "linux")]
    {
        use object::read::elf::{ElfFile64, Sym};
        let Some((bytes, bias)) = executable_file().zip(super::symbolize::executable_bias()) else {
            return Vec::new();
        };
        let Ok(file) = ElfFile64::<object::Endianness>::parse(bytes) else { return Vec::new() };
        let endian = file.endian();
        let Some(names) = symbol_names(&file, bytes) else { return Vec::new() };
        // Where each accepted name starts in the string table, sorted.
        let mut starts: Vec<u32> = Vec::new();
        for at in memchr::memmem::find_iter(names, fragment.as_bytes()) {
            let start = names[..at].iter().rposition(|&byte| byte == 0).map_or(0, |nul| nul + 1);
            let end = names[at..].iter().position(|&byte| byte == 0).map_or(names.len(), |nul| at + nul);
            let name = format!("{:#}", backtrace::SymbolName::new(&names[start..end]));
            if accept(&name)
                && let Ok(start) = u32::try_from(start)
            {
                starts.push(start);
            }
        }
        if starts.is_empty() {
            return Vec::new();
        }
        starts.sort_unstable();
        starts.dedup();
        file.elf_symbol_table()
            .symbols()
            .iter()
            .filter(|symbol| {
                symbol.st_type() == object::elf::STT_FUNC && starts.binary_search(&symbol.st_name(endian)).is_ok()
            })
            .filter_map(|symbol| {
                let start = usize::try_from(symbol.st_value(endian)).ok()?.checked_add(bias)?;
                let end = start.checked_add(usize::try_from(symbol.st_size(endian)).ok()?)?;
                Some((start, end)).filter(|(start, end)| start < end)
            })
            .collect()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (fragment, accept);
        Vec::new()
    }
}

/// The address range (start, end) of the function a shared library of the process (the C library, the dynamic
/// loader) exports as `name`, as the dynamic loader knows it; `None` where it is not found or the platform does not
/// tell.
pub(crate) fn shared_function(name: &core::ffi::CStr) -> Option<(usize, usize)> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        /// `dladdr1`'s request for the symbol's table entry (glibc's `RTLD_DL_SYMENT`).
        const RTLD_DL_SYMENT: libc::c_int = 1;
        // SAFETY: `dlsym` with the default scope and a NUL-terminated name: null or the symbol's address.
        let address = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
        if address.is_null() {
            return None;
        }
        let mut info = core::mem::MaybeUninit::<libc::Dl_info>::uninit();
        let mut symbol: *mut core::ffi::c_void = core::ptr::null_mut();
        // SAFETY: `dladdr1` fills `info` and points `symbol` at the loader's own `Elf64_Sym` of the symbol at
        // `address`, which stays valid while the library is loaded (the C library and the loader always are).
        let found = unsafe { libc::dladdr1(address, info.as_mut_ptr(), &raw mut symbol, RTLD_DL_SYMENT) };
        if found == 0 || symbol.is_null() {
            return None;
        }
        // SAFETY: a live `Elf64_Sym` (see above).
        let size = unsafe { (*symbol.cast::<libc::Elf64_Sym>()).st_size };
        let start = address as usize;
        Some((start, start.checked_add(usize::try_from(size).ok()?)?)).filter(|(start, end)| start < end)
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = name;
        None
    }
}

/// The name of the standard library's thread entry, as mangled names spell it.
#[cfg(target_os = "linux")]
const ENTRY: &str = "__rust_begin_short_backtrace";

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::function_at;

    #[inline(never)]
    fn a_function_of_its_own() -> usize {
        core::hint::black_box(7)
    }

    #[test]
    fn the_symbol_table_names_a_function_by_its_path() {
        let address = (a_function_of_its_own as fn() -> usize) as usize;
        assert_eq!(a_function_of_its_own(), 7);
        let name = function_at(address + 1).expect("the test executable has a symbol table");
        assert_eq!(name, "ying::read::symbol_table::tests::a_function_of_its_own");
        assert_eq!(function_at(0), None);
    }
}
