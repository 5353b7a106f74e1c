//! Where a type's pointers lie, and the fields that lead to each as its user names them, read from the debug
//! information: what a reference cycle's edges are named by (`Node.parent`, `Tree.children[]`, a closure's captured
//! `window`), and whether the field is a `Weak` already or an `Option` already.
//!
//! A type's members are walked down to the pointers they hold (`DW_TAG_pointer_type`, references), with their
//! offsets. The standard library's own types are looked through without naming their members (`Rc`, `Arc`,
//! `RefCell`, `Mutex`, `RwLock`, `Cell`, `Option`, `Box`, `NonNull`...): their pointers take the name of the user's
//! field they lie in. A collection (`Vec`, `VecDeque`, `String`, the standard library's and hashbrown's tables) marks
//! its field `[]`: its pointer leads to a buffer of elements. An enum's variants are each walked, the variant's name
//! in the path of a user's enum; a closure's captures are its members, named after the captured variables.

use super::{DebugTypes, Dwarf, MAX_HOPS, Unit, array_length};
use gimli::{AttributeValue, UnitOffset};

/// How deeply members nest inside one another, at most, before the walk stops.
const MAX_DEPTH: usize = 32;

/// The elements of an array walked, at most: the rest of a long array are alike.
const MAX_ELEMENTS: u64 = 64;

/// The paths of the standard library's types (and of hashbrown's, which std's tables are) whose members are looked
/// through without naming them.
const LIBRARY: [&str; 4] = ["core::", "alloc::", "std::", "hashbrown::"];

/// The collections whose pointer leads to a buffer of their elements: the field that holds one is named `[]`.
const COLLECTIONS: [&str; 4] = ["alloc::vec::Vec<", "alloc::collections::", "alloc::string::String", "hashbrown::"];

/// The weak references: a pointer in one keeps nothing alive.
const WEAK: [&str; 2] = ["alloc::rc::Weak<", "alloc::sync::Weak<"];

/// A type's size and alignment, and its pointers, in the order of their offsets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The type as Rust writes it.
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its alignment in bytes (that of a pointer where the debug information does not say).
    pub align: u64,
    /// Its pointers, by offset.
    pub pointers: Vec<PointerField>,
}

/// A pointer a type holds: where it lies, and the fields that lead to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PointerField {
    /// Its offset in the type.
    pub offset: u64,
    /// The user's fields that lead to it, from the type's own (`parent`, `children[]`, `on_close`, `links.next`):
    /// the standard library's members left out. Empty for a pointer of the type itself (a `T` that is an `Rc`).
    pub field: String,
    /// It lies in an `Option`: the field can be `None` already.
    pub optional: bool,
    /// It is a `Weak`'s: it keeps nothing alive.
    pub weak: bool,
}

impl<B: AsRef<[u8]>> DebugTypes<B> {
    /// The layout of the argument of generic parameter `parameter` of the function whose entry is at `entry`, in the
    /// unit whose code holds the instruction at `address` (as [`argument`](Self::argument) names it).
    pub fn argument_layout(&self, address: u64, entry: usize, parameter: &str) -> Option<Layout> {
        let dwarf = self.dwarf()?;
        self.units_at(address).into_iter().find_map(|unit| {
            let unit = self.unit(&dwarf, unit)?;
            let function = unit.entry(UnitOffset(entry)).ok()?;
            if ![gimli::DW_TAG_subprogram, gimli::DW_TAG_inlined_subroutine].contains(&function.tag()) {
                return None;
            }
            self.template_argument_with(&dwarf, &unit, UnitOffset(entry), parameter, 0, &|unit, argument| {
                self.layout_at(&dwarf, unit, argument)
            })
        })
    }

    /// The layout of the type `reference` refers to.
    fn layout_at<'a>(
        &self,
        dwarf: &Dwarf<'a>,
        unit: &Unit<'a>,
        reference: AttributeValue<super::Reader<'a>>,
    ) -> Option<Layout> {
        let (other, offset) = self.follow(dwarf, unit, reference)?;
        let unit = other.as_ref().unwrap_or(unit);
        let (unit_of_type, offset) = self.through_aliases(dwarf, unit, offset)?;
        let unit = unit_of_type.as_ref().unwrap_or(unit);
        let entry = unit.entry(offset).ok()?;
        let name = self.type_name(dwarf, unit, offset, 0).map(|name| super::without_default_allocator(&name))?;
        let size = entry.attr_value(gimli::DW_AT_byte_size).and_then(|size| size.udata_value())?;
        let align = entry
            .attr_value(gimli::DW_AT_alignment)
            .and_then(|align| align.udata_value())
            .unwrap_or(size_of::<usize>() as u64);
        let mut walk = Walk { types: self, dwarf, pointers: Vec::new() };
        walk.type_at(unit, offset, 0, &mut Path::default(), 0);
        let mut pointers = walk.pointers;
        pointers.sort_by_key(|pointer| pointer.offset);
        Some(Layout { name, size, align, pointers })
    }

    /// The entry a type alias, `const` or `volatile` type at `offset` stands for (the entry itself for any other).
    fn through_aliases<'a>(
        &self,
        dwarf: &Dwarf<'a>,
        unit: &Unit<'a>,
        mut offset: UnitOffset,
    ) -> Option<(Option<Unit<'a>>, UnitOffset)> {
        let mut other: Option<Unit<'a>> = None;
        for _ in 0..MAX_HOPS {
            let here = other.as_ref().unwrap_or(unit);
            let entry = here.entry(offset).ok()?;
            if ![gimli::DW_TAG_typedef, gimli::DW_TAG_const_type, gimli::DW_TAG_volatile_type].contains(&entry.tag()) {
                return Some((other, offset));
            }
            let (next, next_offset) = self.follow(dwarf, here, entry.attr_value(gimli::DW_AT_type)?)?;
            if next.is_some() {
                other = next;
            }
            offset = next_offset;
        }
        None
    }
}

/// The fields walked down to a member: the user's names, and whether an `Option` or a `Weak` was passed through.
#[derive(Clone, Default)]
struct Path {
    /// The user's fields, outermost first (`[]` appended to a collection's).
    fields: Vec<String>,
    optional: bool,
    weak: bool,
}

impl Path {
    /// The fields as one name: `children[]`, `links.next`.
    fn name(&self) -> String {
        let mut name = String::new();
        for field in &self.fields {
            if !name.is_empty() && field != "[]" {
                name.push('.');
            }
            name.push_str(field);
        }
        name
    }
}

/// A walk of a type's members down to its pointers.
struct Walk<'d, 'a, B> {
    types: &'d DebugTypes<B>,
    dwarf: &'d Dwarf<'a>,
    pointers: Vec<PointerField>,
}

impl<'a, B: AsRef<[u8]>> Walk<'_, 'a, B> {
    /// Walks the type at `offset` of `unit`, which lies at `base` in the walked type, reached through `path`.
    fn type_at(&mut self, unit: &Unit<'a>, offset: UnitOffset, base: u64, path: &mut Path, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        let Some((other, offset)) = self.types.through_aliases(self.dwarf, unit, offset) else { return };
        let unit = other.as_ref().unwrap_or(unit);
        let Ok(entry) = unit.entry(offset) else { return };
        match entry.tag() {
            gimli::DW_TAG_pointer_type | gimli::DW_TAG_reference_type | gimli::DW_TAG_rvalue_reference_type => {
                self.pointers.push(PointerField {
                    offset: base,
                    field: path.name(),
                    optional: path.optional,
                    weak: path.weak,
                });
            }
            gimli::DW_TAG_structure_type | gimli::DW_TAG_union_type => {
                self.structure(unit, offset, base, path, depth);
            }
            gimli::DW_TAG_array_type => {
                let Some(element) = entry.attr_value(gimli::DW_AT_type) else { return };
                let Some((element_unit, element)) = self.types.follow(self.dwarf, unit, element) else { return };
                let element_unit = element_unit.as_ref().unwrap_or(unit);
                let stride = element_unit
                    .entry(element)
                    .ok()
                    .and_then(|entry| entry.attr_value(gimli::DW_AT_byte_size))
                    .and_then(|size| size.udata_value());
                let Some(stride) = stride.filter(|&stride| stride > 0) else { return };
                let length = array_length(unit, offset).unwrap_or(1).min(MAX_ELEMENTS);
                path.fields.push("[]".to_owned());
                for index in 0..length {
                    self.type_at(element_unit, element, base + index * stride, path, depth + 1);
                }
                path.fields.pop();
            }
            _ => {}
        }
    }

    /// Walks the structure (or union, or enum) at `offset` of `unit`: its members, and its variants' members.
    fn structure(&mut self, unit: &Unit<'a>, offset: UnitOffset, base: u64, path: &mut Path, depth: usize) {
        let name = self.types.type_name(self.dwarf, unit, offset, 0).unwrap_or_default();
        // A wide pointer (`&dyn Fn()`, `*const [T]`) is a structure of its address and its metadata.
        let library = LIBRARY.iter().any(|prefix| name.starts_with(prefix)) || name.starts_with(['&', '*']);
        let saved = path.clone();
        // A collection wrapping another (a `String` its `Vec<u8>`) is one.
        if COLLECTIONS.iter().any(|prefix| name.starts_with(prefix))
            && path.fields.last().is_none_or(|last| last != "[]")
        {
            path.fields.push("[]".to_owned());
        }
        path.optional |= name.starts_with("core::option::Option<");
        path.weak |= WEAK.iter().any(|prefix| name.starts_with(prefix));
        let Ok(mut tree) = unit.entries_tree(Some(offset)) else { return };
        let Ok(root) = tree.root() else { return };
        let mut members = Vec::new();
        let mut children = root.children();
        while let Ok(Some(child)) = children.next() {
            let entry = child.entry();
            match entry.tag() {
                gimli::DW_TAG_member => members.extend(member(self.dwarf, unit, entry)),
                gimli::DW_TAG_variant_part => {
                    let mut variants = child.children();
                    while let Ok(Some(variant)) = variants.next() {
                        if variant.entry().tag() != gimli::DW_TAG_variant {
                            continue;
                        }
                        let mut fields = variant.children();
                        while let Ok(Some(field)) = fields.next() {
                            if field.entry().tag() == gimli::DW_TAG_member {
                                members.extend(member(self.dwarf, unit, field.entry()));
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        for Member { name, location, kind } in members {
            let named = !library && !name.starts_with('<');
            if named {
                // A tuple's or a tuple variant's fields are `__0`, `__1`: `0`, `1` as Rust writes them.
                path.fields.push(name.strip_prefix("__").unwrap_or(&name).to_owned());
            }
            // A variant's member is the variant's own structure (named after it), its fields walked next.
            self.type_at(unit, kind, base + location, path, depth + 1);
            if named {
                path.fields.pop();
            }
        }
        *path = saved;
    }
}

/// A member of a structure or of an enum's variant: its name, its offset, its type's entry.
struct Member {
    name: String,
    location: u64,
    kind: UnitOffset,
}

/// The member at `entry`, when its type is an entry of `unit` (a type of another unit is not walked).
fn member<'a>(
    dwarf: &Dwarf<'a>,
    unit: &Unit<'a>,
    entry: &gimli::DebuggingInformationEntry<super::Reader<'a>>,
) -> Option<Member> {
    let name = entry
        .attr_value(gimli::DW_AT_name)
        .and_then(|name| dwarf.attr_string(unit, name).ok())
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let location = entry.attr_value(gimli::DW_AT_data_member_location).and_then(|at| at.udata_value()).unwrap_or(0);
    let kind = match entry.attr_value(gimli::DW_AT_type)? {
        AttributeValue::UnitRef(offset) => offset,
        AttributeValue::DebugInfoRef(offset) => offset.to_unit_offset(&unit.header)?,
        _ => return None,
    };
    Some(Member { name, location, kind })
}

#[cfg(test)]
mod tests {
    use super::super::DebugTypes;
    use super::super::tests::executable;
    use super::{Layout, PointerField};
    use std::cell::RefCell;
    use std::hint::black_box;
    use std::rc::{Rc, Weak};

    /// A tree's node, as users write one.
    #[expect(dead_code, reason = "read through its layout, not by its fields' names")]
    struct Node {
        _id: u32,
        parent: RefCell<Option<Rc<Node>>>,
        children: RefCell<Vec<Rc<Node>>>,
        up: RefCell<Weak<Node>>,
    }

    /// A window whose callback may capture it.
    #[expect(dead_code, reason = "read through its layout, not by its fields' names")]
    struct Window {
        title: String,
        on_close: RefCell<Option<Box<dyn Fn()>>>,
    }

    /// A user's enum holding a pointer in one variant.
    #[expect(dead_code, reason = "read through its layout, not by its fields' names")]
    enum Link {
        Strong(Rc<Node>),
        Empty,
    }

    /// A structure holding the enum.
    #[expect(dead_code, reason = "read through its layout, not by its fields' names")]
    struct Holder {
        _count: usize,
        next: Link,
    }

    /// A generic function, one instance for each type read here.
    #[inline(never)]
    fn hold<T>(value: T) -> Box<T> {
        Box::new(value)
    }

    /// The layout of the `T` of `hold`'s instance whose `T` is named `name`, as the debug information writes it
    /// (`{closure_env#0}<>` for a closure), after the last `::`.
    fn layout_of(name: &str) -> Layout {
        use object::{Object, ObjectSymbol};
        let bytes = executable();
        let types = DebugTypes::new(bytes.as_slice()).unwrap();
        let object = object::File::parse(bytes.as_slice()).unwrap();
        // `hold` has one symbol for each `T`, alike named.
        let layouts: Vec<Layout> = object
            .symbols()
            .filter(|symbol| {
                symbol.name().is_ok_and(|symbol| {
                    format!("{:#}", rustc_demangle::demangle(symbol)).ends_with("layout::tests::hold")
                })
            })
            .filter_map(|symbol| {
                let entry = types.frame_entries(symbol.address())[0]?;
                types.argument_layout(symbol.address(), entry, "T")
            })
            .collect();
        let found = layouts.iter().find(|layout| layout.name.rsplit("::").next() == Some(name));
        found.cloned().unwrap_or_else(|| {
            let names: Vec<&str> = layouts.iter().map(|layout| layout.name.as_str()).collect();
            panic!("no instance of hold for {name}: {names:?}")
        })
    }

    /// The word at `offset` of `value`.
    fn word_at<T>(value: &T, offset: u64) -> usize {
        let at = core::ptr::from_ref(value).cast::<u8>().wrapping_add(usize::try_from(offset).unwrap());
        // SAFETY: `offset` is a pointer's, inside `value`, as the layout read says: a word there is initialised.
        unsafe { at.cast::<usize>().read_unaligned() }
    }

    /// The `RcInner` an `Rc` points to: its counts, two words before its value.
    fn rc_block<T>(rc: &Rc<T>) -> usize {
        Rc::as_ptr(rc) as usize - 2 * size_of::<usize>()
    }

    #[test]
    fn a_nodes_pointers_are_named_by_its_fields_through_the_standard_librarys_types() {
        let parent = Rc::new(Node {
            _id: 1,
            parent: RefCell::new(None),
            children: RefCell::new(Vec::new()),
            up: RefCell::new(Weak::new()),
        });
        let child = Node {
            _id: 2,
            parent: RefCell::new(Some(parent.clone())),
            children: RefCell::new(vec![parent.clone()]),
            up: RefCell::new(Rc::downgrade(&parent)),
        };
        let child = hold(child);
        let layout = layout_of("Node");
        assert_eq!((layout.size, layout.align), (size_of::<Node>() as u64, align_of::<Node>() as u64));
        let fields: Vec<(&str, bool, bool)> =
            layout.pointers.iter().map(|pointer| (pointer.field.as_str(), pointer.optional, pointer.weak)).collect();
        let mut sorted = fields.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, [("children[]", false, false), ("parent", true, false), ("up", false, true)]);
        let at = |field: &str| layout.pointers.iter().find(|pointer| pointer.field == field).unwrap().offset;
        // The words at those offsets of a real node are the pointers named.
        assert_eq!(word_at(&*child, at("parent")), rc_block(&parent));
        assert_eq!(word_at(&*child, at("up")), rc_block(&parent));
        assert_eq!(word_at(&*child, at("children[]")), child.children.borrow().as_ptr() as usize);
        black_box(&child);
    }

    #[test]
    fn a_closures_captures_are_named_after_the_captured_variables() {
        let window = Rc::new(Window { title: "main".to_owned(), on_close: RefCell::new(None) });
        let captured = window.clone();
        let closure = hold(move || black_box(captured.title.len()));
        let layout = layout_of("{closure_env#0}");
        assert_eq!(
            layout.pointers,
            [PointerField { offset: 0, field: "captured".into(), optional: false, weak: false }]
        );
        assert_eq!(word_at(&*closure, 0), rc_block(&window));
        // The window's own: its title's buffer, its callback's box (its address, then its vtable).
        let window = hold(Window { title: "other".to_owned(), on_close: RefCell::new(Some(Box::new(|| ()))) });
        let layout = layout_of("Window");
        let mut fields: Vec<&str> = layout.pointers.iter().map(|pointer| pointer.field.as_str()).collect();
        fields.sort_unstable();
        assert_eq!(fields, ["on_close", "on_close", "title[]"]);
        let title = layout.pointers.iter().find(|pointer| pointer.field == "title[]").unwrap();
        assert_eq!(word_at(&*window, title.offset), window.title.as_ptr() as usize);
        assert!(layout.pointers.iter().filter(|pointer| pointer.field == "on_close").all(|pointer| pointer.optional));
    }

    #[test]
    fn a_users_enum_names_its_variant() {
        let node = Rc::new(Node {
            _id: 3,
            parent: RefCell::new(None),
            children: RefCell::new(Vec::new()),
            up: RefCell::new(Weak::new()),
        });
        let holder = hold(Holder { _count: 1, next: Link::Strong(node.clone()) });
        let layout = layout_of("Holder");
        let fields: Vec<&str> = layout.pointers.iter().map(|pointer| pointer.field.as_str()).collect();
        assert_eq!(fields, ["next.Strong.0"]);
        assert_eq!(word_at(&*holder, layout.pointers[0].offset), rc_block(&node));
        black_box(Link::Empty);
    }
}
