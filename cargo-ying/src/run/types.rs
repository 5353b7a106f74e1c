//! The Rust type a generic argument of a test executable's function names, read from its debug information: the
//! argument of a generic parameter (`T`) of the function a frame is in, as Rust writes the type
//! (`core::cell::RefCell<my_crate::Node>`, `u8`, `[u8; 1000]`).
//!
//! A monomorphised function's entry (or the entry its inlined copies and out-of-line body refer to, through
//! `DW_AT_abstract_origin` or `DW_AT_specification`) has a `DW_TAG_template_type_parameter` for each generic
//! parameter, whose `DW_AT_type` is the argument. Builds without that information (`debug = 0`, line tables
//! only) have none, and no type is named.

use gimli::{AttributeValue, DebugInfoOffset, EndianSlice, RunTimeEndian, UnitOffset};
use std::path::Path;

type Reader<'a> = EndianSlice<'a, RunTimeEndian>;
type Dwarf<'a> = gimli::Dwarf<Reader<'a>>;
type Unit<'a> = gimli::Unit<Reader<'a>>;

/// How many references (`DW_AT_abstract_origin`, `DW_AT_specification`) lead from a frame's entry to the one with
/// its generic parameters, at most; and how deep a type's elements nest in its name, at most.
const MAX_HOPS: usize = 8;

/// A test executable's debug information, mapped, with where each unit's code lies.
pub(crate) struct DebugTypes {
    map: memmap2::Mmap,
    endian: RunTimeEndian,
    /// Each unit's ranges of code, `(begin, end, the unit's offset)`, by their beginning.
    ranges: Vec<(u64, u64, usize)>,
    /// Each unit's offset in `.debug_info`, in order.
    units: Vec<usize>,
}

impl DebugTypes {
    /// The debug information of `executable`; `None` when it cannot be read or has none.
    pub(crate) fn open(executable: &Path) -> Option<Self> {
        use object::Object;
        let (_, map) = super::symbols::map_executable(executable)?;
        let endian = {
            let object = object::File::parse(&*map).ok()?;
            if object.is_little_endian() { RunTimeEndian::Little } else { RunTimeEndian::Big }
        };
        let mut types = Self { map, endian, ranges: Vec::new(), units: Vec::new() };
        let (mut ranges, mut units) = (Vec::new(), Vec::new());
        {
            let dwarf = types.dwarf()?;
            let mut headers = dwarf.units();
            while let Ok(Some(header)) = headers.next() {
                let Some(offset) = header.debug_info_offset() else { continue };
                units.push(offset.0);
                let Ok(unit) = dwarf.unit(header) else { continue };
                let Ok(mut unit_ranges) = dwarf.unit_ranges(&unit) else { continue };
                while let Ok(Some(range)) = unit_ranges.next() {
                    if range.begin < range.end {
                        ranges.push((range.begin, range.end, offset.0));
                    }
                }
            }
        }
        if units.is_empty() {
            return None;
        }
        ranges.sort_unstable();
        types.ranges = ranges;
        types.units = units;
        Some(types)
    }

    /// The executable's debug information, its sections read in place; `None` where a section is compressed.
    fn dwarf(&self) -> Option<Dwarf<'_>> {
        use object::{Object, ObjectSection};
        let object = object::File::parse(&*self.map).ok()?;
        let mut compressed = false;
        let dwarf = gimli::Dwarf::load(|id| -> Result<Reader<'_>, gimli::Error> {
            let section = object.section_by_name(id.name());
            let data = match &section {
                Some(section)
                    if section
                        .compressed_file_range()
                        .is_ok_and(|range| range.format != object::CompressionFormat::None) =>
                {
                    compressed = true;
                    &[]
                }
                Some(section) => section.data().unwrap_or(&[]),
                None => &[],
            };
            Ok(EndianSlice::new(data, self.endian))
        })
        .ok()?;
        (!compressed).then_some(dwarf)
    }

    /// The argument of generic parameter `parameter` of the function whose entry is at `entry` in the unit whose
    /// code holds the instruction at `address`: a frame there, as the debug information's frames give it.
    pub(crate) fn argument(&self, address: u64, entry: usize, parameter: &str) -> Option<String> {
        let dwarf = self.dwarf()?;
        let first = self.ranges.partition_point(|&(begin, _, _)| begin <= address);
        self.ranges[..first].iter().rev().filter(|&&(_, end, _)| address < end).find_map(|&(_, _, unit)| {
            let unit = self.unit(&dwarf, unit)?;
            let function = unit.entry(UnitOffset(entry)).ok()?;
            [gimli::DW_TAG_subprogram, gimli::DW_TAG_inlined_subroutine]
                .contains(&function.tag())
                .then(|| self.template_argument(&dwarf, &unit, UnitOffset(entry), parameter, 0))
                .flatten()
        })
    }

    /// The unit at `offset` of `.debug_info`.
    fn unit<'a>(&self, dwarf: &Dwarf<'a>, offset: usize) -> Option<Unit<'a>> {
        let header = dwarf.debug_info.header_from_offset(DebugInfoOffset(offset)).ok()?;
        dwarf.unit(header).ok()
    }

    /// The unit an entry of `reference` is in, and the entry's offset in it: `unit` itself for an offset in it,
    /// else the unit of `.debug_info` that holds it.
    fn follow<'a>(
        &self,
        dwarf: &Dwarf<'a>,
        unit: &Unit<'a>,
        reference: AttributeValue<Reader<'a>>,
    ) -> Option<(Option<Unit<'a>>, UnitOffset)> {
        match reference {
            AttributeValue::UnitRef(offset) => Some((None, offset)),
            AttributeValue::DebugInfoRef(offset) => {
                if let Some(local) = offset.to_unit_offset(&unit.header) {
                    return Some((None, local));
                }
                let index = self.units.partition_point(|&start| start <= offset.0).checked_sub(1)?;
                let other = self.unit(dwarf, self.units[index])?;
                let local = offset.to_unit_offset(&other.header)?;
                Some((Some(other), local))
            }
            _ => None,
        }
    }

    /// The argument of `parameter` among the template parameters of the entry at `offset`, or of the entries it
    /// refers to as its origin or declaration.
    fn template_argument<'a>(
        &self,
        dwarf: &Dwarf<'a>,
        unit: &Unit<'a>,
        offset: UnitOffset,
        parameter: &str,
        hops: usize,
    ) -> Option<String> {
        if hops > MAX_HOPS {
            return None;
        }
        let mut tree = unit.entries_tree(Some(offset)).ok()?;
        let root = tree.root().ok()?;
        let mut origin = None;
        for attribute in [gimli::DW_AT_abstract_origin, gimli::DW_AT_specification] {
            if origin.is_none() {
                origin = root.entry().attr_value(attribute);
            }
        }
        let mut children = root.children();
        while let Ok(Some(child)) = children.next() {
            let entry = child.entry();
            if entry.tag() != gimli::DW_TAG_template_type_parameter {
                continue;
            }
            let name = entry.attr_value(gimli::DW_AT_name).and_then(|name| dwarf.attr_string(unit, name).ok());
            if name.is_some_and(|name| name.slice() == parameter.as_bytes()) {
                let argument = entry.attr_value(gimli::DW_AT_type)?;
                return self.type_name_at(dwarf, unit, argument, 0);
            }
        }
        let (other, offset) = self.follow(dwarf, unit, origin?)?;
        self.template_argument(dwarf, other.as_ref().unwrap_or(unit), offset, parameter, hops + 1)
    }

    /// The name of the type `reference` refers to.
    fn type_name_at<'a>(
        &self,
        dwarf: &Dwarf<'a>,
        unit: &Unit<'a>,
        reference: AttributeValue<Reader<'a>>,
        depth: usize,
    ) -> Option<String> {
        let (other, offset) = self.follow(dwarf, unit, reference)?;
        let unit = other.as_ref().unwrap_or(unit);
        self.type_name(dwarf, unit, offset, depth).map(|name| without_default_allocator(&name))
    }

    /// The name of the type whose entry is at `offset` of `unit`, as Rust writes it: its path (the namespaces it
    /// is in, then its name, whose generic arguments the debug information writes as paths); an array as
    /// `[element; length]`.
    fn type_name<'a>(&self, dwarf: &Dwarf<'a>, unit: &Unit<'a>, offset: UnitOffset, depth: usize) -> Option<String> {
        if depth > MAX_HOPS {
            return None;
        }
        let entry = unit.entry(offset).ok()?;
        let string = |value| dwarf.attr_string(unit, value).ok().map(|name| name.to_string_lossy().into_owned());
        if entry.tag() == gimli::DW_TAG_array_type {
            let element = self.type_name_at(dwarf, unit, entry.attr_value(gimli::DW_AT_type)?, depth + 1)?;
            let mut tree = unit.entries_tree(Some(offset)).ok()?;
            let root = tree.root().ok()?;
            let mut children = root.children();
            let mut length = None;
            while let Ok(Some(child)) = children.next() {
                let entry = child.entry();
                if entry.tag() == gimli::DW_TAG_subrange_type {
                    length = entry.attr_value(gimli::DW_AT_count).and_then(|count| count.udata_value()).or_else(|| {
                        entry.attr_value(gimli::DW_AT_upper_bound).and_then(|bound| bound.udata_value()).map(|b| b + 1)
                    });
                }
            }
            return Some(match length {
                Some(length) => format!("[{element}; {length}]"),
                None => format!("[{element}]"),
            });
        }
        let name = string(entry.attr_value(gimli::DW_AT_name)?)?;
        let scoped = [
            gimli::DW_TAG_structure_type,
            gimli::DW_TAG_enumeration_type,
            gimli::DW_TAG_union_type,
            gimli::DW_TAG_typedef,
        ];
        if !scoped.contains(&entry.tag()) || name.starts_with('(') {
            return Some(name);
        }
        let mut path = scope(dwarf, unit, offset)?;
        path.push(name);
        Some(path.join("::"))
    }
}

/// The names of the namespaces and types that hold the entry at `offset` of `unit`, outermost first; `None` when
/// the entry is not found.
fn scope(dwarf: &Dwarf<'_>, unit: &Unit<'_>, offset: UnitOffset) -> Option<Vec<String>> {
    let mut cursor = unit.entries();
    // The name of each entry from the unit down to the current one's parent, by depth (`None`: no scope).
    let mut names: Vec<Option<String>> = Vec::new();
    while let Ok(Some(entry)) = cursor.next_dfs() {
        let depth = usize::try_from(entry.depth()).ok()?;
        names.truncate(depth);
        if entry.offset() == offset {
            return Some(names.into_iter().flatten().collect());
        }
        let scoped = [gimli::DW_TAG_namespace, gimli::DW_TAG_structure_type, gimli::DW_TAG_enumeration_type];
        let name = scoped
            .contains(&entry.tag())
            .then(|| entry.attr_value(gimli::DW_AT_name))
            .flatten()
            .and_then(|name| dwarf.attr_string(unit, name).ok())
            .map(|name| name.to_string_lossy().into_owned());
        names.resize(depth, None);
        names.push(name);
    }
    None
}

/// `name` without the global allocator written as a type's argument, as Rust writes the type with its default
/// (`alloc::vec::Vec<u8>`, not `alloc::vec::Vec<u8, alloc::alloc::Global>`).
fn without_default_allocator(name: &str) -> String {
    name.replace(", alloc::alloc::Global>", ">")
}

#[cfg(test)]
mod tests {
    use super::{DebugTypes, without_default_allocator};
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
        let (_, map) = crate::run::symbols::map_executable(&executable).unwrap();
        let object = object::File::parse(&*map).unwrap();
        let path = format!("run::types::tests::{name}");
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
        let types = DebugTypes::open(&std::env::current_exe().unwrap()).unwrap();
        let argument = |name: &str, parameter: &str| {
            let (address, entry) = function(name);
            types.argument(address, entry, parameter)
        };
        assert_eq!(argument("open_session", "T").as_deref(), Some("cargo_ying::run::types::tests::Session"));
        assert_eq!(
            argument("open_cell", "T").as_deref(),
            Some("core::cell::RefCell<cargo_ying::run::types::tests::Session>")
        );
        assert_eq!(argument("open_array", "T").as_deref(), Some("[u8; 16]"));
        assert_eq!(argument("open_vector", "T").as_deref(), Some("alloc::vec::Vec<u8>"));
        assert_eq!(argument("open_session", "U"), None, "no such parameter");
    }

    #[test]
    fn the_default_allocator_is_left_out() {
        assert_eq!(
            without_default_allocator(
                "alloc::vec::Vec<alloc::boxed::Box<u8, alloc::alloc::Global>, alloc::alloc::Global>"
            ),
            "alloc::vec::Vec<alloc::boxed::Box<u8>>"
        );
        assert_eq!(without_default_allocator("app::Session"), "app::Session");
    }
}
