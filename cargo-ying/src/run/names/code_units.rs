//! Where an instruction of a test executable lies in terms that hold for every executable of one build: the unit of
//! debug information it was compiled in, the symbol it is in, and its offset there ([`CodeKey`]).
//!
//! The test executables of a suite link the same compiled units: the standard library's, and each dependency's
//! codegen units. The frames an address is named with depend on nothing but its unit's debug information and its
//! place in its function, so the frames one executable's address was named with serve every other executable's
//! address at the same key ([`Symbolizer`](crate::run::names::symbols::Symbolizer)): the standard library's units, tens
//! of thousands of line rows each, are parsed once in a run instead of once per executable.
//!
//! Only units rustc names give keys: `<crate root>/@/<codegen unit>`, where the codegen unit's name carries a hash
//! of its crate (two crates' units never share a name; two C files may). A key holds for one build: the
//! executables of one run. A crate rebuilt keeps its units' names, so keys are never kept from one run to the next.
//! A key also holds the length of its unit's debug information, which the linker's relocations leave as it is:
//! where link-time optimisation compiled a unit's code anew for each executable, what it inlined (and so the unit's
//! entries) differs from one executable to the next, and so does its length.

use std::path::Path;
use std::sync::Arc;

/// An instruction's place in the code of one build: its unit, its symbol, its offset from the symbol's start.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CodeKey {
    unit: Arc<str>,
    unit_length: u64,
    symbol: Box<str>,
    offset: u64,
}

/// The ranges of code of an executable's units, by address.
#[derive(Default)]
pub(crate) struct CodeUnits {
    /// Start, end and the index of the unit's name in `names`, sorted by start.
    ranges: Vec<(u64, u64, usize)>,
    /// The greatest end of `ranges` up to each: where a look for the ranges holding an address stops.
    ends: Vec<u64>,
    names: Vec<Arc<str>>,
    /// The length of each unit's debug information, by the index of its name.
    lengths: Vec<u64>,
    /// The executable's sections of code: `.debug_aranges` gives the ranges of a unit's statics too.
    code: Vec<(u64, u64)>,
}

/// Whether a unit's name is one rustc gives a codegen unit: `<crate root>/@/<codegen unit>`.
fn named_by_rustc(name: &str) -> bool {
    name.contains("/@/")
}

impl CodeUnits {
    /// The units of `executable`, read from its debug information: none when it cannot be read or has none.
    pub(crate) fn read(executable: &Path) -> Self {
        Self::read_from(executable, true)
    }

    /// [`read`](Self::read), from `.debug_aranges` if `aranges` and it has any, else from every unit's first entry.
    fn read_from(executable: &Path, aranges: bool) -> Self {
        use object::{Object, ObjectSection};
        let mut units = Self::default();
        let Some((_, bytes)) = super::executable::map_executable(executable) else { return units };
        let Ok(object) = object::File::parse(&*bytes) else { return units };
        let endian = if object.is_little_endian() { gimli::RunTimeEndian::Little } else { gimli::RunTimeEndian::Big };
        let section = |id: gimli::SectionId| -> Result<gimli::EndianSlice<'_, gimli::RunTimeEndian>, gimli::Error> {
            let data = object.section_by_name(id.name()).and_then(|section| section.data().ok()).unwrap_or(&[]);
            Ok(gimli::EndianSlice::new(data, endian))
        };
        let Ok(dwarf) = gimli::Dwarf::load(section) else { return units };
        units.code = object
            .sections()
            .filter(|section| section.kind() == object::SectionKind::Text)
            .map(|section| (section.address(), section.address().saturating_add(section.size())))
            .collect();
        if aranges {
            units.read_aranges(&dwarf);
        }
        if units.names.is_empty() {
            units.read_units(&dwarf);
        }
        units.sorted()
    }

    /// The units with their ranges sorted, and the greatest end up to each.
    fn sorted(mut self) -> Self {
        self.ranges.sort_unstable();
        let mut end = 0;
        self.ends = self
            .ranges
            .iter()
            .map(|&(_, range_end, _)| {
                end = end.max(range_end);
                end
            })
            .collect();
        self
    }

    /// The units `.debug_aranges` gives ranges of, each unit's name read from its first entry alone.
    fn read_aranges<R: gimli::Reader>(&mut self, dwarf: &gimli::Dwarf<R>) {
        let mut headers = dwarf.debug_aranges.headers();
        while let Ok(Some(header)) = headers.next() {
            let Some((name, length)) = unit_name(dwarf, header.debug_info_offset()) else { continue };
            let mut entries = header.entries();
            let index = self.names.len();
            while let Ok(Some(entry)) = entries.next() {
                self.add_range(entry.range(), index);
            }
            if self.ranges.last().is_some_and(|&(_, _, last)| last == index) {
                self.names.push(name);
                self.lengths.push(length);
            }
        }
    }

    /// Every unit, its ranges read from its first entry: where there are no `.debug_aranges`.
    fn read_units<R: gimli::Reader>(&mut self, dwarf: &gimli::Dwarf<R>) {
        let mut headers = dwarf.units();
        while let Ok(Some(header)) = headers.next() {
            let length = gimli::ReaderOffset::into_u64(header.unit_length());
            let Ok(unit) = dwarf.unit(header) else { continue };
            let Some(name) = unit.name.as_ref().and_then(|name| name.to_string().ok().map(|name| Arc::from(&*name)))
            else {
                continue;
            };
            let Ok(mut ranges) = dwarf.unit_ranges(&unit) else { continue };
            let index = self.names.len();
            while let Ok(Some(range)) = ranges.next() {
                self.add_range(range, index);
            }
            if self.ranges.last().is_some_and(|&(_, _, last)| last == index) {
                self.names.push(name);
                self.lengths.push(length);
            }
        }
    }

    fn add_range(&mut self, range: gimli::Range, index: usize) {
        // Code the linker discarded keeps its ranges, at address 0.
        let in_code = self.code.iter().any(|&(start, end)| start <= range.begin && range.end <= end);
        if range.begin != 0 && range.begin < range.end && in_code {
            self.ranges.push((range.begin, range.end, index));
        }
    }

    /// The index of the unit whose code holds `address`; `None` when none does, or several (code the linker folded
    /// into one copy).
    fn unit_at(&self, address: u64) -> Option<usize> {
        let after = self.ranges.partition_point(|&(start, _, _)| start <= address);
        let mut holding = (0..after)
            .rev()
            .take_while(|&at| self.ends[at] > address)
            .filter(|&at| address < self.ranges[at].1)
            .map(|at| self.ranges[at].2);
        let unit = holding.next()?;
        holding.all(|other| other == unit).then_some(unit)
    }

    /// The key of the instruction at `address`, in the function `symbol` that starts at `start`; `None` when its
    /// unit is not one rustc named.
    pub(crate) fn key(&self, address: u64, symbol: &str, start: u64) -> Option<CodeKey> {
        let unit = self.unit_at(address).filter(|&unit| named_by_rustc(&self.names[unit]))?;
        let offset = address.checked_sub(start)?;
        let (name, unit_length) = (Arc::clone(&self.names[unit]), self.lengths[unit]);
        Some(CodeKey { unit: name, unit_length, symbol: symbol.into(), offset })
    }

    /// Each unit with the lowest address of its code.
    pub(crate) fn first_addresses(&self) -> Vec<(&Arc<str>, u64)> {
        let mut first: Vec<Option<u64>> = vec![None; self.names.len()];
        for &(start, _, index) in &self.ranges {
            first[index].get_or_insert(start);
        }
        self.names.iter().zip(first).filter_map(|(name, first)| Some((name, first?))).collect()
    }
}

/// The name (`DW_AT_name`) of the unit at `offset`, from its first entry alone, and the unit's length.
fn unit_name<R: gimli::Reader>(
    dwarf: &gimli::Dwarf<R>,
    offset: gimli::DebugInfoOffset<R::Offset>,
) -> Option<(Arc<str>, u64)> {
    let header = dwarf.debug_info.header_from_offset(offset).ok()?;
    let length = gimli::ReaderOffset::into_u64(header.unit_length());
    let abbreviations = header.abbreviations(&dwarf.debug_abbrev).ok()?;
    let mut entries = header.entries_raw(&abbreviations, None).ok()?;
    let abbreviation = entries.read_abbreviation().ok()??;
    for spec in abbreviation.attributes() {
        let attribute = entries.read_attribute(*spec).ok()?;
        if attribute.name() == gimli::DW_AT_name {
            let name = match attribute.value() {
                gimli::AttributeValue::String(name) => name,
                gimli::AttributeValue::DebugStrRef(at) => dwarf.debug_str.get_str(at).ok()?,
                gimli::AttributeValue::DebugLineStrRef(at) => dwarf.debug_line_str.get_str(at).ok()?,
                _ => return None,
            };
            return Some((Arc::from(&*name.to_string().ok()?), length));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{CodeUnits, named_by_rustc};
    use std::hint::black_box;
    use std::sync::Arc;

    impl CodeUnits {
        /// The name of the unit whose code holds `address`.
        fn name_at(&self, address: u64) -> Option<&Arc<str>> {
            self.unit_at(address).map(|unit| &self.names[unit])
        }
    }

    /// A function of this test's own crate, kept out of line.
    #[inline(never)]
    fn own_code(value: u64) -> u64 {
        black_box(value).wrapping_mul(3)
    }

    /// The address and mangled name of this test binary's `own_code`, as its symbol table gives them.
    fn own_code_symbol() -> (u64, String) {
        use object::{Object, ObjectSymbol};
        assert_eq!(own_code(black_box(2)), 6);
        let (_, map) = crate::run::names::executable::map_executable(&std::env::current_exe().unwrap()).unwrap();
        let object = object::File::parse(&*map).unwrap();
        let symbol = object.symbols().find(|symbol| symbol.name().is_ok_and(|name| name.contains("own_code"))).unwrap();
        (symbol.address(), symbol.name().unwrap().to_owned())
    }

    #[test]
    fn an_address_is_in_the_unit_rustc_compiled_its_function_in_and_keyed_by_its_offset_there() {
        let units = CodeUnits::read(&std::env::current_exe().unwrap());
        let (start, name) = own_code_symbol();
        let unit = units.name_at(start + 1).expect("own_code's unit");
        assert!(named_by_rustc(unit) && unit.contains("cargo-ying/src/lib.rs/@/"), "{unit}");
        let key = units.key(start + 1, &name, start).unwrap();
        assert_eq!((&*key.unit, &*key.symbol, key.offset), (&**unit, name.as_str(), 1));
        assert_eq!(units.key(start, &name, start).unwrap().offset, 0);
        assert!(units.key(start, &name, start + 1).is_none(), "an address before its symbol");
        assert!(units.name_at(0).is_none(), "discarded code is in no unit");

        // The standard library's units are among them, each at an address of its code.
        let firsts = units.first_addresses();
        let std = firsts.iter().find(|(name, _)| name.contains("/library/std/src/lib.rs")).expect("std's unit");
        assert_eq!(units.name_at(std.1), Some(std.0));

        // Without `.debug_aranges`, every unit's own ranges give the same units.
        let read_whole = CodeUnits::read_from(&std::env::current_exe().unwrap(), false);
        assert!(read_whole.names.len() >= units.names.len(), "{} units", read_whole.names.len());
        for (name, first) in &firsts {
            assert_eq!(read_whole.name_at(*first), Some(*name));
        }
        assert_eq!(read_whole.key(start + 1, &name, start), Some(key));
    }

    #[test]
    fn an_address_two_units_hold_is_in_neither() {
        let names = vec![Arc::from("src/lib.rs/@/a.0-cgu.0"), Arc::from("src/lib.rs/@/b.1-cgu.0")];
        let ranges = vec![(0x100, 0x200, 0), (0x150, 0x160, 1), (0x180, 0x300, 0), (0x400, 0x480, 1)];
        let units = CodeUnits { ranges, names, lengths: vec![10, 20], ..CodeUnits::default() }.sorted();
        let unit = |address| units.name_at(address).map(|name| name.as_ref().to_owned());
        assert_eq!(unit(0x120).as_deref(), Some("src/lib.rs/@/a.0-cgu.0"));
        assert_eq!(unit(0x155), None, "folded: a and b");
        assert_eq!(unit(0x1f0).as_deref(), Some("src/lib.rs/@/a.0-cgu.0"), "two ranges of a");
        assert_eq!(unit(0x250).as_deref(), Some("src/lib.rs/@/a.0-cgu.0"), "past a shorter range");
        assert_eq!(unit(0x401).as_deref(), Some("src/lib.rs/@/b.1-cgu.0"));
        assert_eq!((unit(0x90), unit(0x300), unit(0x380)), (None, None, None));
    }

    #[test]
    fn the_same_code_in_a_unit_of_another_length_has_another_key() {
        let units = |length| {
            let names = vec![Arc::from("src/lib.rs/@/a.0-cgu.0"), Arc::from("a.c")];
            CodeUnits {
                ranges: vec![(0x100, 0x200, 0), (0x200, 0x300, 1)],
                names,
                lengths: vec![length, 1],
                ..CodeUnits::default()
            }
            .sorted()
        };
        let (built, optimised_again) = (units(4000), units(4100));
        assert_eq!(built.key(0x110, "f", 0x100), units(4000).key(0x110, "f", 0x100));
        assert_ne!(built.key(0x110, "f", 0x100), optimised_again.key(0x110, "f", 0x100));
        assert!(built.key(0x210, "g", 0x200).is_none(), "a unit rustc did not name");
    }

    #[test]
    fn only_units_rustc_named_give_keys() {
        assert!(named_by_rustc("src/lib.rs/@/tokio.4d1f5a2c1b03e9f7-cgu.03"));
        assert!(named_by_rustc("tests/codecs.rs/@/02ebittojdgo1587q19wt5egs"));
        assert!(!named_by_rustc("src/zlib/deflate.c"));
    }
}
