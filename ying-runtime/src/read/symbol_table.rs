//! The executable's symbol table: the full path of the function at an address, for frames whose debug information
//! names them bare (`debug = "line-tables-only"`), and the code known by address ([`KnownCode`]). Read once, on
//! first need, from the executable file. And where the executable lies in the process: an address's place in the
//! executable's file ([`executable_address`]) and the load bias between the two ([`executable_bias`]).

#[cfg(target_os = "linux")]
use ying_frames::ExecutableStamp;
use ying_frames::KnownCode;
use ying_report::KNOWN_CODE_ENV;

/// The demangled name (without hash) of the function the symbol table places at `ip`, an address in this
/// process's executable; `None` outside it, where the platform is not supported, or without a symbol table.
pub(crate) fn function_at(ip: usize) -> Option<String> {
    #[cfg(target_os = "linux")]
    {
        use object::read::{Object, SymbolMap, SymbolMapName};
        static SYMBOLS: std::sync::OnceLock<Option<SymbolMap<SymbolMapName<'static>>>> = std::sync::OnceLock::new();
        let address = executable_address(ip)?;
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
    map_file("/proc/self/exe")
}

/// The file at `path`, mapped for reading for the rest of the process; `None` when it cannot be (or is empty).
#[cfg(target_os = "linux")]
pub(crate) fn map_file(path: &str) -> Option<&'static [u8]> {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(path).ok()?;
    let len = usize::try_from(file.metadata().ok()?.len()).ok().filter(|&len| len > 0)?;
    // SAFETY: a fresh read-only private mapping of an open file descriptor, at an address the system chooses: it
    // aliases no memory of the program. The mapping outlives the descriptor, which is closed on return.
    let mapped =
        unsafe { libc::mmap(core::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE, file.as_raw_fd(), 0) };
    if mapped == libc::MAP_FAILED {
        return None;
    }
    // SAFETY: the mapping is `len` readable bytes and is never unmapped. A running executable or a loaded library
    // cannot be written (`ETXTBSY`), so the bytes do not change under the reader.
    Some(unsafe { core::slice::from_raw_parts(mapped.cast::<u8>(), len) })
}

/// The executable file, mapped (once), where the platform allows.
#[cfg(target_os = "linux")]
pub(crate) fn executable_bytes() -> Option<&'static [u8]> {
    executable_file()
}

/// Ends the stacks captured from now on at their thread's entry ([`ying_frames::is_thread_entry`]: the standard
/// library's `__rust_begin_short_backtrace`, one copy per kind of thread in the executable), as reports trim them:
/// a spawned thread's captures then neither walk nor replay the start-up frames past it. Looks the entries up on
/// the first call; does nothing more on later ones, where the platform is not supported, or without a symbol table.
pub(crate) fn end_stacks_at_thread_entries() {
    static DONE: std::sync::Once = std::sync::Once::new();
    DONE.call_once(|| {
        crate::base::thread::as_profiler(|| {
            crate::hot::unwind::end_stacks_at(in_process(&known_code().thread_entries));
            // The table was just emptied: the rules earlier processes of the run kept fill it again.
            crate::hot::unwind::load_kept_rules();
        });
    });
}

/// The code of this process's executable known by its symbols' addresses: as `cargo ying` passed it in
/// [`KNOWN_CODE_ENV`] for this executable, else read from the executable's symbol table (once); nothing known where
/// the platform is not supported.
pub(crate) fn known_code() -> &'static KnownCode {
    static KNOWN: std::sync::OnceLock<KnownCode> = std::sync::OnceLock::new();
    KNOWN.get_or_init(|| {
        #[cfg(target_os = "linux")]
        {
            let passed = std::env::var(KNOWN_CODE_ENV).ok().and_then(|value| {
                let executable = ExecutableStamp::of(&std::fs::metadata("/proc/self/exe").ok()?)?;
                KnownCode::from_env(&value, executable)
            });
            passed.or_else(|| executable_file().map(KnownCode::read)).unwrap_or_default()
        }
        #[cfg(not(target_os = "linux"))]
        {
            KnownCode::default()
        }
    })
}

/// `ranges` of the executable file (its symbols' values), where this process has them; none when the executable's
/// place is unknown.
pub(crate) fn in_process(ranges: &[(u64, u64)]) -> Vec<(usize, usize)> {
    #[cfg(target_os = "linux")]
    {
        let Some(bias) = executable_bias() else { return Vec::new() };
        ranges
            .iter()
            .filter_map(|&(start, end)| {
                let start = usize::try_from(start).ok()?.checked_add(bias)?;
                let end = usize::try_from(end).ok()?.checked_add(bias)?;
                Some((start, end))
            })
            .collect()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = ranges;
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

/// The executable's load bias (its addresses in this process less those in its file), when known.
#[cfg(target_os = "linux")]
pub(crate) fn executable_bias() -> Option<usize> {
    let (start, end, bias) = *executable_range();
    (start < end).then_some(bias)
}

/// The executable's mapped range and load bias: (start, end, bias); empty when unknown.
#[cfg(target_os = "linux")]
fn executable_range() -> &'static (usize, usize, usize) {
    static RANGE: std::sync::OnceLock<(usize, usize, usize)> = std::sync::OnceLock::new();
    RANGE.get_or_init(|| {
        // The first object is the executable.
        crate::base::loaded::find_map(|object| {
            let (start, end) = object.loaded_range();
            core::ops::ControlFlow::Break(if start < end { (start, end, object.bias) } else { (0, 0, 0) })
        })
        .unwrap_or_default()
    })
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
