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
use std::sync::OnceLock;

pub mod layout;

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
    /// The units' ranges of code as `.debug_aranges` lists them, `(begin, end, the unit's offset)`, in its order: a
    /// process looks up a few addresses, a pass over them each, rather than order tens of thousands of ranges first.
    ranges: Vec<(u64, u64, usize)>,
    /// The same of the units `.debug_aranges` leaves out, once needed.
    unlisted: OnceLock<Vec<(u64, u64, usize)>>,
    /// Each unit's offset in `.debug_info`, in order.
    units: Vec<usize>,
}

impl<B: AsRef<[u8]>> DebugTypes<B> {
    /// The debug information of the ELF executable whose bytes are `bytes`; `None` when it cannot be read or has
    /// none.
    ///
    /// Where each unit's code lies is read from `.debug_aranges`, a table of the units' ranges; the units it leaves
    /// out are read for theirs only when an address is not found in it.
    pub fn new(bytes: B) -> Option<Self> {
        use object::Object;
        let endian = {
            let object = object::File::parse(bytes.as_ref()).ok()?;
            if object.is_little_endian() { RunTimeEndian::Little } else { RunTimeEndian::Big }
        };
        let mut types = Self { bytes, endian, ranges: Vec::new(), unlisted: OnceLock::new(), units: Vec::new() };
        let (mut ranges, mut units) = (Vec::new(), Vec::new());
        {
            let dwarf = types.dwarf()?;
            let mut tables = dwarf.debug_aranges.headers();
            while let Ok(Some(table)) = tables.next() {
                let unit = table.debug_info_offset().0;
                let mut entries = table.entries();
                // An entry that cannot be read (an address past the end of the address space) is passed over, and
                // one at address 0: code the linker dropped.
                while let Some(entry) = entries.next().transpose() {
                    if let Ok(entry) = entry
                        && entry.length() != 0
                        && entry.address() != 0
                    {
                        let range = entry.range();
                        ranges.push((range.begin, range.end, unit));
                    }
                }
            }
            let mut headers = dwarf.units();
            while let Ok(Some(header)) = headers.next() {
                if let Some(offset) = header.debug_info_offset() {
                    units.push(offset.0);
                }
            }
        }
        if units.is_empty() {
            return None;
        }
        types.ranges = ranges;
        types.units = units;
        Some(types)
    }

    /// The ranges of the units `.debug_aranges` leaves out, read the first time they are needed.
    fn unlisted(&self) -> &[(u64, u64, usize)] {
        self.unlisted.get_or_init(|| {
            let Some(dwarf) = self.dwarf() else { return Vec::new() };
            let mut listed: Vec<usize> = self.ranges.iter().map(|&(_, _, unit)| unit).collect();
            listed.sort_unstable();
            listed.dedup();
            let mut ranges = Vec::new();
            for &offset in &self.units {
                if listed.binary_search(&offset).is_ok() {
                    continue;
                }
                let Some(unit) = self.unit(&dwarf, offset) else { continue };
                let Ok(mut unit_ranges) = dwarf.unit_ranges(&unit) else { continue };
                while let Ok(Some(range)) = unit_ranges.next() {
                    if 0 < range.begin && range.begin < range.end {
                        ranges.push((range.begin, range.end, offset));
                    }
                }
            }
            ranges
        })
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
    /// first: those `.debug_aranges` lists, else those it leaves out.
    fn units_at(&self, address: u64) -> Vec<usize> {
        let holding = |ranges: &[(u64, u64, usize)]| -> Vec<(u64, usize)> {
            ranges
                .iter()
                .filter(|&&(begin, end, _)| begin <= address && address < end)
                .map(|&(begin, _, unit)| (begin, unit))
                .collect()
        };
        let mut found = holding(&self.ranges);
        if found.is_empty() {
            found = holding(self.unlisted());
        }
        found.sort_unstable_by(|a, b| b.cmp(a));
        found.into_iter().map(|(_, unit)| unit).collect()
    }

    /// The argument of generic parameter `parameter` of the function whose entry is at `entry` in the unit whose
    /// code holds the instruction at `address`: a frame there, as [`frame_entries`](Self::frame_entries) or a
    /// symboliser gives it.
    pub fn argument(&self, address: u64, entry: usize, parameter: &str) -> Option<String> {
        let dwarf = self.dwarf()?;
        self.units_at(address).into_iter().find_map(|unit| {
            let unit = self.unit(&dwarf, unit)?;
            let function = unit.entry(UnitOffset(entry)).ok()?;
            [gimli::DW_TAG_subprogram, gimli::DW_TAG_inlined_subroutine]
                .contains(&function.tag())
                .then(|| {
                    self.template_argument_with(&dwarf, &unit, UnitOffset(entry), parameter, 0, &|unit, argument| {
                        self.type_name_at(&dwarf, unit, argument, 0)
                    })
                })
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

    /// Whether a unit whose code holds the instruction at `address` writes generic arguments at all: declares the
    /// `DW_TAG_template_type_parameter` entries that hold them. A unit built with line tables or limited debug
    /// information (the standard library's, as it is distributed) declares none, and reading its entries for an
    /// argument is for nothing. Reads the unit's table of abbreviations alone.
    pub fn has_arguments(&self, address: u64) -> bool {
        let Some(dwarf) = self.dwarf() else { return false };
        self.units_at(address).into_iter().any(|unit| {
            dwarf
                .debug_info
                .header_from_offset(DebugInfoOffset(unit))
                .is_ok_and(|header| declares_template_parameters(&dwarf, &header))
        })
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

    /// What `read` reads of the argument of `parameter` (a reference to its type, in the unit given) among the
    /// template parameters of the entry at `offset`, or of the entries it refers to as its origin or declaration.
    fn template_argument_with<'a, T>(
        &self,
        dwarf: &Dwarf<'a>,
        unit: &Unit<'a>,
        offset: UnitOffset,
        parameter: &str,
        hops: usize,
        read: &dyn Fn(&Unit<'a>, AttributeValue<Reader<'a>>) -> Option<T>,
    ) -> Option<T> {
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
                return read(unit, entry.attr_value(gimli::DW_AT_type)?);
            }
        }
        let (other, offset) = self.follow(dwarf, unit, origin?)?;
        self.template_argument_with(dwarf, other.as_ref().unwrap_or(unit), offset, parameter, hops + 1, read)
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
            return Some(match array_length(unit, offset) {
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

/// The length of the array type at `offset` of `unit`, from its (last) subrange: its count, or its upper bound and
/// one; `None` where it says neither (a slice).
fn array_length(unit: &Unit<'_>, offset: UnitOffset) -> Option<u64> {
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
    length
}

/// Whether the table of abbreviations of `header`'s unit declares a `DW_TAG_template_type_parameter`; true where the
/// table cannot be read, so that the entries are read instead.
fn declares_template_parameters<'a>(dwarf: &Dwarf<'a>, header: &gimli::UnitHeader<Reader<'a>>) -> bool {
    use gimli::{Reader as _, Section as _};
    let mut table = *dwarf.debug_abbrev.reader();
    if table.skip(header.debug_abbrev_offset().0).is_err() {
        return true;
    }
    // Each abbreviation: its code (0 ends the table), its tag, whether it has children, then its attributes'
    // names and forms up to a pair of zeros, an implicit constant's value after its form.
    loop {
        let Ok(code) = table.read_uleb128() else { return true };
        if code == 0 {
            return false;
        }
        let Ok(tag) = table.read_uleb128() else { return true };
        if tag == u64::from(gimli::DW_TAG_template_type_parameter.0) || table.read_u8().is_err() {
            return true;
        }
        loop {
            let (Ok(name), Ok(form)) = (table.read_uleb128(), table.read_uleb128()) else { return true };
            if (name, form) == (0, 0) {
                break;
            }
            if form == u64::from(gimli::DW_FORM_implicit_const.0) && table.read_sleb128().is_err() {
                return true;
            }
        }
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
    pub(super) fn executable() -> Vec<u8> {
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
    fn without_a_table_of_the_units_ranges_the_units_are_read_for_theirs() {
        black_box(open_session::<Session>());
        let bytes = executable();
        // The section renamed, wherever its name is written: it is not found.
        let mut renamed = bytes.clone();
        let name = b".debug_aranges\0";
        let mut renames = 0;
        for at in 0..renamed.len() - name.len() {
            if renamed[at..].starts_with(name) {
                renamed[at + name.len() - 2] = b'z';
                renames += 1;
            }
        }
        assert!(renames > 0, "the executable has a table of its units' ranges");
        let (listed, unlisted) = (DebugTypes::new(bytes.as_slice()).unwrap(), DebugTypes::new(renamed).unwrap());
        assert!(unlisted.ranges.is_empty() && !listed.ranges.is_empty());
        let (address, _) = function(&bytes, "open_session");
        let entries = unlisted.frame_entries(address);
        assert_eq!(entries, listed.frame_entries(address));
        let argument = unlisted.argument(address, entries[0].unwrap(), "T");
        assert_eq!(argument.as_deref(), Some("ying_frames::debug_types::tests::Session"));
    }

    /// Whether an entry of a unit whose code holds `address` is a `DW_TAG_template_type_parameter`, read entry by
    /// entry.
    fn any_template_parameter(types: &DebugTypes<&[u8]>, address: u64) -> bool {
        let dwarf = types.dwarf().unwrap();
        types.units_at(address).into_iter().any(|unit| {
            let unit = types.unit(&dwarf, unit).unwrap();
            let mut cursor = unit.entries();
            let mut found = false;
            while let Ok(Some(entry)) = cursor.next_dfs() {
                found |= entry.tag() == gimli::DW_TAG_template_type_parameter;
            }
            found
        })
    }

    #[test]
    fn a_unit_writes_generic_arguments_where_its_abbreviations_declare_them() {
        use object::{Object, ObjectSymbol};
        black_box(open_session::<Session>());
        let bytes = executable();
        let types = DebugTypes::new(bytes.as_slice()).unwrap();
        let (own, _) = function(&bytes, "open_session");
        assert!(types.has_arguments(own));
        // The standard library's units, as distributed, are built with limited debug information: without them.
        let object = object::File::parse(bytes.as_slice()).unwrap();
        let library = object
            .symbols()
            .find(|symbol| {
                symbol.name().is_ok_and(|name| format!("{:#}", rustc_demangle::demangle(name)) == "core::fmt::write")
            })
            .unwrap()
            .address();
        for address in [own, library] {
            assert_eq!(types.has_arguments(address), any_template_parameter(&types, address), "at {address:#x}");
        }
        assert!(!types.has_arguments(u64::MAX - 1), "no unit there");
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
