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

/// The executable file, mapped for reading for the rest of the process.
#[cfg(target_os = "linux")]
fn executable_file() -> Option<&'static [u8]> {
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
