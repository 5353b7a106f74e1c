//! The debug information a test executable's types are read from: the executable mapped, read by
//! [`DebugTypes`] (`ying-frames`, which the runtime reads its own executable with too) at the entries addr2line
//! gives the frames.

use std::path::Path;
use ying_frames::debug_types::DebugTypes;

/// The debug information of `executable`, mapped; `None` when it cannot be read or has none.
pub(crate) fn open(executable: &Path) -> Option<DebugTypes<memmap2::Mmap>> {
    let (_, map) = super::executable::map_executable(executable)?;
    DebugTypes::new(map)
}

#[cfg(test)]
mod tests {
    use super::open;
    use std::cell::RefCell;
    use std::hint::black_box;

    /// A type of this test's own.
    #[derive(Default)]
    struct Session {
        _id: u32,
    }

    /// Generic functions, one instance of each: their symbols name them without their arguments.
    #[inline(never)]
    fn open_session<T: Default>() -> Box<T> {
        Box::new(T::default())
    }

    #[inline(never)]
    fn open_cell<T: Default>() -> Box<T> {
        Box::new(T::default())
    }

    #[inline(never)]
    fn open_array<T: Default>() -> Box<T> {
        Box::new(T::default())
    }

    #[inline(never)]
    fn open_vector<T: Default>() -> Box<T> {
        Box::new(T::default())
    }

    /// The address of the function of this module named `name` in this test binary, and its entry in the debug
    /// information.
    fn function(name: &str) -> (u64, usize) {
        use object::{Object, ObjectSymbol};
        let executable = std::env::current_exe().unwrap();
        let (_, map) = crate::run::names::executable::map_executable(&executable).unwrap();
        let object = object::File::parse(&*map).unwrap();
        let path = format!("run::names::types::tests::{name}");
        let address = object
            .symbols()
            .find(|symbol| {
                symbol.name().is_ok_and(|symbol| format!("{:#}", rustc_demangle::demangle(symbol)).ends_with(&path))
            })
            .unwrap_or_else(|| panic!("{path} in the symbol table"))
            .address();
        let loader = addr2line::Loader::new(&executable).unwrap();
        let frame = loader.find_frames(address).unwrap().next().unwrap().unwrap();
        let entry = frame.dw_die_offset.unwrap().0;
        (address, usize::try_from(gimli::ReaderOffset::into_u64(entry)).unwrap())
    }

    #[test]
    fn a_generic_argument_is_named_as_rust_writes_it() {
        black_box((
            open_session::<Session>(),
            open_cell::<RefCell<Session>>(),
            open_array::<[u8; 16]>(),
            open_vector::<Vec<u8>>(),
        ));
        let types = open(&std::env::current_exe().unwrap()).unwrap();
        let argument = |name: &str, parameter: &str| {
            let (address, entry) = function(name);
            types.argument(address, entry, parameter)
        };
        assert_eq!(argument("open_session", "T").as_deref(), Some("cargo_ying::run::names::types::tests::Session"));
        assert_eq!(
            argument("open_cell", "T").as_deref(),
            Some("core::cell::RefCell<cargo_ying::run::names::types::tests::Session>")
        );
        assert_eq!(argument("open_array", "T").as_deref(), Some("[u8; 16]"));
        assert_eq!(argument("open_vector", "T").as_deref(), Some("alloc::vec::Vec<u8>"));
        assert_eq!(argument("open_session", "U"), None, "no such parameter");
    }
}
