//! The Rust type a generic argument of an executable's function names, read from its debug information (with the
//! `dwarf` feature): the argument of a generic parameter (`T`) of the function a frame is in, as Rust writes the type
//! (`core::cell::RefCell<my_crate::Node>`, `u8`, `[u8; 1000]`). The runtime reads it for the stacks it names itself,
//! `cargo ying` for the stacks a test left to it as addresses; [`types`](crate::types) picks the frame and the
//! parameter.
//!
//! A monomorphised function's entry (or the entry its inlined copies and out-of-line body refer to, through
//! `DW_AT_abstract_origin` or `DW_AT_specification`) has a `DW_TAG_template_type_parameter` for each generic
//! parameter, whose `DW_AT_type` is the argument. Builds without that information (`debug = 0`, line tables
//! only) have none, and no type is named; nor where the debug information is compressed.
//!
//! A frame's entry is its offset in its unit: what a symboliser gives for each frame (addr2line's `dw_die_offset`),
//! or what [`DebugTypes::frame_entries`] finds at an address, for a reader that has none.

use gimli::{AttributeValue, DebugInfoOffset, EndianSlice, RunTimeEndian, UnitOffset};

type Reader<'a> = EndianSlice<'a, RunTimeEndian>;
type Dwarf<'a> = gimli::Dwarf<Reader<'a>>;
type Unit<'a> = gimli::Unit<Reader<'a>>;

/// How many references (`DW_AT_abstract_origin`, `DW_AT_specification`) lead from a frame's entry to the one with
/// its generic parameters or its name, at most; and how deep a type's elements nest in its name, at most.
const MAX_HOPS: usize = 8;

/// An executable's debug information, read in place from its bytes (`B`: the file, mapped or read, as the caller
/// holds it), with where each unit's code lies.
pub struct DebugTypes<B> {
    bytes: B,
    endian: RunTimeEndian,
    /// Each unit's ranges of code, `(begin, end, the unit's offset)`, by their beginning.
    ranges: Vec<(u64, u64, usize)>,
    /// Each unit's offset in `.debug_info`, in order.
    units: Vec<usize>,
}

impl<B: AsRef<[u8]>> DebugTypes<B> {
    /// The debug information of the ELF executable whose bytes are `bytes`; `None` when it cannot be read or has
    /// none.
    ///
    /// Where each unit's code lies is read from `.debug_aranges`, a table of the units' ranges, for the units it
    /// lists; only the units it leaves out are read for their ranges.
    pub fn new(bytes: B) -> Option<Self> {
        use object::Object;
        let endian = {
            let object = object::File::parse(bytes.as_ref()).ok()?;
            if object.is_little_endian() { RunTimeEndian::Little } else { RunTimeEndian::Big }
        };
        let mut types = Self { bytes, endian, ranges: Vec::new(), units: Vec::new() };
        let (mut ranges, mut units) = (Vec::new(), Vec::new());
        {
            let dwarf = types.dwarf()?;
            let mut listed = Vec::new();
            let mut tables = dwarf.debug_aranges.headers();
            while let Ok(Some(table)) = tables.next() {
                let unit = table.debug_info_offset().0;
                let mut entries = table.entries();
                // An entry that cannot be read (an address past the end of the address space) is passed over.
                while let Some(entry) = entries.next().transpose() {
                    if let Ok(entry) = entry
                        && entry.length() != 0
                    {
                        let range = entry.range();
                        ranges.push((range.begin, range.end, unit));
                        listed.push(unit);
                    }
                }
            }
            listed.sort_unstable();
            let mut headers = dwarf.units();
            while let Ok(Some(header)) = headers.next() {
                let Some(offset) = header.debug_info_offset() else { continue };
                units.push(offset.0);
                if listed.binary_search(&offset.0).is_ok() {
                    continue;
                }
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
        let object = object::File::parse(self.bytes.as_ref()).ok()?;
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

    /// The offsets of the units whose code holds the instruction at `address`, the one whose range begins last
    /// first.
    fn units_at(&self, address: u64) -> impl Iterator<Item = usize> + '_ {
        let first = self.ranges.partition_point(|&(begin, _, _)| begin <= address);
        self.ranges[..first].iter().rev().filter(move |&&(_, end, _)| address < end).map(|&(_, _, unit)| unit)
    }

    /// The argument of generic parameter `parameter` of the function whose entry is at `entry` in the unit whose
    /// code holds the instruction at `address`: a frame there, as [`frame_entries`](Self::frame_entries) or a
    /// symboliser gives it.
    pub fn argument(&self, address: u64, entry: usize, parameter: &str) -> Option<String> {
        let dwarf = self.dwarf()?;
        self.units_at(address).find_map(|unit| {
            let unit = self.unit(&dwarf, unit)?;
            let function = unit.entry(UnitOffset(entry)).ok()?;
            [gimli::DW_TAG_subprogram, gimli::DW_TAG_inlined_subroutine]
                .contains(&function.tag())
                .then(|| self.template_argument(&dwarf, &unit, UnitOffset(entry), parameter, 0))
                .flatten()
        })
    }

    /// The entry (its offset in its unit) of each frame of the instruction at `address`, innermost (inlined) first,
    /// for the frames [`frames_at_address`](crate::names::frames_at_address) names there from what a symboliser
    /// reads of the same entries: the inlined frames that have a name, then the function really at the address.
    /// One `None` where no function's entry holds the address.
    ///
    /// The function is the `DW_TAG_subprogram` whose ranges hold the address; its frames inlined there are the
    /// chain of `DW_TAG_inlined_subroutine` entries under it whose ranges hold it, each inside the one before
    /// (lexical blocks between them passed through, functions nested in it left out), as addr2line finds them.
    pub fn frame_entries(&self, address: u64) -> Vec<Option<usize>> {
        let Some(dwarf) = self.dwarf() else { return vec![None] };
        for unit in self.units_at(address) {
            let Some(unit) = self.unit(&dwarf, unit) else { continue };
            let Some(function) = function_at(&dwarf, &unit, address) else { continue };
            // Outermost first.
            let mut inlined = Vec::new();
            if let Ok(mut tree) = unit.entries_tree(Some(function))
                && let Ok(root) = tree.root()
            {
                inlined_at(&dwarf, &unit, root, address, &mut inlined);
            }
            return inlined
                .into_iter()
                .rev()
                .filter(|&offset| self.is_named(&dwarf, &unit, offset, 0))
                .map(|offset| Some(offset.0))
                .chain([Some(function.0)])
                .collect();
        }
        vec![None]
    }

    /// Whether the function of the entry at `offset` has a name: its own (`DW_AT_linkage_name`, `DW_AT_name`), or
    /// that of the entry it refers to as its origin or declaration.
    fn is_named(&self, dwarf: &Dwarf<'_>, unit: &Unit<'_>, offset: UnitOffset, hops: usize) -> bool {
        if hops > MAX_HOPS {
            return false;
        }
        let Ok(entry) = unit.entry(offset) else { return false };
        let named = [gimli::DW_AT_linkage_name, gimli::DW_AT_MIPS_linkage_name, gimli::DW_AT_name]
            .into_iter()
            .filter_map(|attribute| entry.attr_value(attribute))
            .any(|name| dwarf.attr_string(unit, name).is_ok());
        if named {
            return true;
        }
        let origin = [gimli::DW_AT_abstract_origin, gimli::DW_AT_specification]
            .into_iter()
            .find_map(|attribute| entry.attr_value(attribute));
        origin
            .and_then(|origin| self.follow(dwarf, unit, origin))
            .is_some_and(|(other, offset)| self.is_named(dwarf, other.as_ref().unwrap_or(unit), offset, hops + 1))
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

/// Whether the ranges of `entry` (`DW_AT_low_pc` and `DW_AT_high_pc`, or `DW_AT_ranges`) hold `address`.
fn holds<'a>(
    dwarf: &Dwarf<'a>,
    unit: &Unit<'a>,
    entry: &gimli::DebuggingInformationEntry<Reader<'a>>,
    address: u64,
) -> bool {
    let Ok(mut ranges) = dwarf.die_ranges(unit, entry) else { return false };
    while let Ok(Some(range)) = ranges.next() {
        if range.begin <= address && address < range.end {
            return true;
        }
    }
    false
}

/// The offset of the entry of the function (`DW_TAG_subprogram`) of `unit` whose code holds `address`. Only a
/// function's entry is read whole: the others' attributes are passed over as they are laid out.
fn function_at<'a>(dwarf: &Dwarf<'a>, unit: &Unit<'a>, address: u64) -> Option<UnitOffset> {
    let mut entries = unit.entries_raw(None).ok()?;
    while !entries.is_empty() {
        let offset = entries.next_offset();
        let Some(abbreviation) = entries.read_abbreviation().ok()? else { continue };
        entries.skip_attributes(abbreviation.attributes()).ok()?;
        if abbreviation.tag() == gimli::DW_TAG_subprogram
            && unit.entry(offset).is_ok_and(|entry| holds(dwarf, unit, &entry, address))
        {
            return Some(offset);
        }
    }
    None
}

/// Pushes onto `chain` the offsets of the inlined frames under `node` whose code holds `address`, outermost first:
/// the first `DW_TAG_inlined_subroutine` that holds it (through other entries, not through a nested function), then
/// those under it. Whether one was found.
fn inlined_at<'a>(
    dwarf: &Dwarf<'a>,
    unit: &Unit<'a>,
    node: gimli::EntriesTreeNode<'_, '_, Reader<'a>>,
    address: u64,
    chain: &mut Vec<UnitOffset>,
) -> bool {
    let mut children = node.children();
    while let Ok(Some(child)) = children.next() {
        let entry = child.entry();
        match entry.tag() {
            gimli::DW_TAG_subprogram => {}
            gimli::DW_TAG_inlined_subroutine => {
                if holds(dwarf, unit, entry, address) {
                    chain.push(entry.offset());
                    inlined_at(dwarf, unit, child, address, chain);
                    return true;
                }
            }
            _ => {
                if inlined_at(dwarf, unit, child, address, chain) {
                    return true;
                }
            }
        }
    }
    false
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
    fn open_vector<T: Default>() -> Box<T> {
        Box::new(T::default())
    }

    /// Inlined into its caller wherever it is called, in any build: its frame is an inlined one.
    #[inline(always)]
    fn make<T: Default>() -> T {
        T::default()
    }

    /// Calls `make`, inlined.
    #[inline(never)]
    fn open_inlined<T: Default>() -> RefCell<T> {
        black_box(make::<RefCell<T>>())
    }

    /// This test binary's bytes.
    fn executable() -> Vec<u8> {
        std::fs::read(std::env::current_exe().unwrap()).unwrap()
    }

    /// The address and size of the function of this module named `name` in the executable `bytes`.
    fn function(bytes: &[u8], name: &str) -> (u64, u64) {
        use object::{Object, ObjectSymbol};
        let object = object::File::parse(bytes).unwrap();
        let path = format!("debug_types::tests::{name}");
        let symbol = object
            .symbols()
            .find(|symbol| {
                symbol.name().is_ok_and(|symbol| format!("{:#}", rustc_demangle::demangle(symbol)).ends_with(&path))
            })
            .unwrap_or_else(|| panic!("{path} in the symbol table"));
        (symbol.address(), symbol.size())
    }

    #[test]
    fn a_generic_argument_is_read_at_the_entry_found_at_an_address() {
        black_box((open_session::<Session>(), open_vector::<Vec<RefCell<u8>>>()));
        let bytes = executable();
        let types = DebugTypes::new(bytes.as_slice()).unwrap();
        let argument = |name: &str, parameter: &str| {
            let (address, _) = function(&bytes, name);
            let entries = types.frame_entries(address);
            assert_eq!(entries.len(), 1, "{name} inlines nothing at its first instruction");
            types.argument(address, entries[0].unwrap(), parameter)
        };
        assert_eq!(argument("open_session", "T").as_deref(), Some("ying_frames::debug_types::tests::Session"));
        assert_eq!(argument("open_vector", "T").as_deref(), Some("alloc::vec::Vec<core::cell::RefCell<u8>>"));
        assert_eq!(argument("open_session", "U"), None, "no such parameter");
        assert_eq!(types.frame_entries(u64::MAX - 1), [None], "no function past the code");
    }

    #[test]
    fn an_inlined_frame_is_found_inside_the_function_it_was_inlined_into() {
        black_box(open_inlined::<Session>());
        let bytes = executable();
        let types = DebugTypes::new(bytes.as_slice()).unwrap();
        let (start, size) = function(&bytes, "open_inlined");
        // Some instruction of the function is in `make`'s inlined copy: two frames there, the inlined one first,
        // each with its own argument.
        let inlined = (start..start + size)
            .map(|address| (address, types.frame_entries(address)))
            .find(|(_, entries)| entries.len() == 2)
            .unwrap_or_else(|| panic!("no inlined frame in open_inlined"));
        let (address, entries) = inlined;
        let (inner, outer) = (entries[0].unwrap(), entries[1].unwrap());
        assert_ne!(inner, outer);
        assert_eq!(
            types.argument(address, inner, "T").as_deref(),
            Some("core::cell::RefCell<ying_frames::debug_types::tests::Session>")
        );
        assert_eq!(types.argument(address, outer, "T").as_deref(), Some("ying_frames::debug_types::tests::Session"));
        assert_eq!(types.frame_entries(start), [Some(outer)], "the function alone at its first instruction");
    }

    #[test]
    fn bytes_that_are_no_executable_have_no_debug_information() {
        assert!(DebugTypes::new(&b"not an executable"[..]).is_none());
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
