//! What a retained site's frames tell of the type it allocated: which frame's generic argument names it. The
//! functions of a stack carry no generic arguments in their names (`alloc::boxed::Box<T>::new`), but the debug
//! information of a monomorphised function gives each of its parameters (`T = my_crate::Session`); this rule picks
//! the frame and the parameter, and the reader of the debug information (`debug_types`, with the `dwarf` feature)
//! names the argument.
//!
//! The frame is the innermost of the standard library's allocating generics, before the stack leaves the standard
//! library: `Box<T>` (its `T`), `Vec<T>` and `RawVec<T>` (the element type), `Rc<T>` and `Arc<T>` (their `T`, not
//! the `RcInner<T>` they box), `VecDeque<T>` and `BinaryHeap<T>` (the element type); a `String`'s buffer is `u8`.
//! A stack that reaches other code first (a dependency's table, the program's own allocation) tells nothing.

use crate::names;
use ying_report::Frame;

/// Where the allocated type of a stack is found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocatedType {
    /// The argument of generic parameter `parameter` of the function of frame `frame` (an index of the frames
    /// given): the debug information of that function names it.
    Argument {
        /// The frame's index.
        frame: usize,
        /// The generic parameter (`T`).
        parameter: &'static str,
    },
    /// A type the frame's function always allocates (`u8` for a `String`'s buffer), wherever the debug
    /// information describes the function at frame `frame`.
    Known {
        /// The frame's index.
        frame: usize,
        /// The type's path.
        name: &'static str,
    },
}

impl AllocatedType {
    /// The index of the frame the type is read at.
    pub fn frame(&self) -> usize {
        match *self {
            Self::Argument { frame, .. } | Self::Known { frame, .. } => frame,
        }
    }
}

/// One of the standard library's allocating generics: its module, its name, and what its methods allocate.
#[derive(Debug)]
struct Allocating {
    module: &'static str,
    name: &'static str,
    allocates: Allocates,
}

/// The standard library's allocating generics.
const ALLOCATING: &[Allocating] = &[
    Allocating { module: "alloc::boxed", name: "Box", allocates: Allocates::Parameter("T") },
    Allocating { module: "alloc::vec", name: "Vec", allocates: Allocates::Parameter("T") },
    Allocating { module: "alloc::raw_vec", name: "RawVec", allocates: Allocates::Parameter("T") },
    Allocating { module: "alloc::collections::vec_deque", name: "VecDeque", allocates: Allocates::Parameter("T") },
    Allocating { module: "alloc::collections::binary_heap", name: "BinaryHeap", allocates: Allocates::Parameter("T") },
    Allocating { module: "alloc::rc", name: "Rc", allocates: Allocates::Counted },
    Allocating { module: "alloc::rc", name: "UniqueRc", allocates: Allocates::Counted },
    Allocating { module: "alloc::sync", name: "Arc", allocates: Allocates::Counted },
    Allocating { module: "alloc::sync", name: "UniqueArc", allocates: Allocates::Counted },
    Allocating { module: "alloc::string", name: "String", allocates: Allocates::Type("u8") },
];

/// What the methods of an allocating generic allocate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Allocates {
    /// Values of a generic parameter (a `Box<T>`'s `T`, a `Vec<T>`'s elements).
    Parameter(&'static str),
    /// A reference count's `T`, in a box of its own (`RcInner<T>`) that `Box<T>` allocates for it.
    Counted,
    /// Always this type.
    Type(&'static str),
}

/// Where the type allocated by a stack is named: `frames` run innermost first from the allocating code (the
/// allocator's own frames and its plumbing stripped, [`Trim::strip_allocator_frames`](crate::Trim)). The first
/// frame of the standard library's allocating generics gives it, before the stack leaves the standard library;
/// a `Box<T>` that an `Rc<T>` or `Arc<T>` allocates for its counts gives the count's `T` instead. `None` where no
/// such frame is found.
///
/// ```
/// use ying_frames::types::{AllocatedType, allocated_type};
/// use ying_report::Frame;
///
/// let frames: Vec<Frame> = ["alloc::boxed::box_new_uninit", "alloc::boxed::Box<T>::new", "alloc::rc::Rc<T>::new", "app::f"]
///     .iter()
///     .map(|function| Frame::new(*function, None, None))
///     .collect();
/// assert_eq!(allocated_type(&frames), Some(AllocatedType::Argument { frame: 2, parameter: "T" }));
/// assert_eq!(allocated_type(&frames[3..]), None);
/// ```
pub fn allocated_type<T: AsRef<Frame>>(frames: &[T]) -> Option<AllocatedType> {
    let functions: Vec<&str> = frames.iter().map(|frame| frame.as_ref().function.as_str()).collect();
    let library = functions.iter().take_while(|function| is_standard_library(function)).count();
    let (index, known) =
        functions[..library].iter().enumerate().find_map(|(index, function)| Some((index, allocating(function)?)))?;
    Some(match known.allocates {
        Allocates::Parameter(parameter) => {
            // A `Box<T>` an `Rc<T>` or `Arc<T>` allocates for its counts and value: the count's `T` was allocated.
            let counted = (known.name == "Box")
                .then(|| {
                    functions[index + 1..library]
                        .iter()
                        .take_while(|function| is_reference_counting(function))
                        .position(|function| {
                            allocating(function).is_some_and(|counted| counted.allocates == Allocates::Counted)
                        })
                })
                .flatten();
            match counted {
                Some(offset) => AllocatedType::Argument { frame: index + 1 + offset, parameter: "T" },
                None => AllocatedType::Argument { frame: index, parameter },
            }
        }
        Allocates::Counted => AllocatedType::Argument { frame: index, parameter: "T" },
        Allocates::Type(name) => AllocatedType::Known { frame: index, name },
    })
}

/// How a block holds the type its stack allocated ([`allocated_type`]): where in the block a value lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holding {
    /// One value at the block's start (a `Box<T>`'s).
    Value,
    /// One value after two counts (an `Rc<T>`'s `RcInner<T>`, an `Arc<T>`'s `ArcInner<T>`, both `#[repr(C)]`): at the
    /// first offset past two words aligned for it.
    Counted,
    /// Values one after another from the block's start (a `Vec<T>`'s buffer).
    Elements,
}

impl Holding {
    /// The offset in its value of the byte at `offset` in the block, the value being `size` bytes aligned to
    /// `align`; `None` for a byte of no value (an `Rc`'s counts, past a `Box`'s value).
    ///
    /// ```
    /// use ying_frames::types::Holding;
    /// assert_eq!(Holding::Counted.value_offset(24, 32, 8), Some(8));
    /// assert_eq!(Holding::Counted.value_offset(8, 32, 8), None);
    /// assert_eq!(Holding::Elements.value_offset(40, 16, 8), Some(8));
    /// assert_eq!(Holding::Value.value_offset(40, 16, 8), None);
    /// ```
    pub fn value_offset(self, offset: u64, size: u64, align: u64) -> Option<u64> {
        match self {
            Self::Value => (offset < size).then_some(offset),
            Self::Counted => {
                let counts = (2 * size_of::<usize>() as u64).next_multiple_of(align.max(1));
                offset.checked_sub(counts).filter(|&offset| offset < size)
            }
            Self::Elements => (size > 0).then(|| offset % size),
        }
    }
}

/// How the block whose stack is `frames` holds the type [`allocated_type`] found there, at `allocated`.
///
/// ```
/// use ying_frames::types::{Holding, allocated_type, holding};
/// use ying_report::Frame;
///
/// let frames: Vec<Frame> = ["alloc::boxed::Box<T>::new", "alloc::rc::Rc<T>::new", "app::f"]
///     .iter()
///     .map(|function| Frame::new(*function, None, None))
///     .collect();
/// assert_eq!(holding(&frames, allocated_type(&frames).unwrap()), Holding::Counted);
/// assert_eq!(holding(&frames[..1], allocated_type(&frames[..1]).unwrap()), Holding::Value);
/// ```
pub fn holding<T: AsRef<Frame>>(frames: &[T], allocated: AllocatedType) -> Holding {
    let function = frames.get(allocated.frame()).map_or("", |frame| frame.as_ref().function.as_str());
    match allocating(function) {
        Some(Allocating { allocates: Allocates::Counted, .. }) => Holding::Counted,
        Some(Allocating { name: "Box", .. }) | None => Holding::Value,
        Some(_) => Holding::Elements,
    }
}

/// The allocating generic whose method `function` is, if it is one.
fn allocating(function: &str) -> Option<&'static Allocating> {
    let (module, name) = self_type(function)?;
    ALLOCATING.iter().find(|known| known.module == module && known.name == name)
}

/// The module and the name of the type whose method `function` is: `("alloc::vec", "Vec")` for
/// `alloc::vec::Vec<T,A>::push` and for `<alloc::vec::Vec<T,A> as core::clone::Clone>::clone`. A function outside
/// an `impl` gives its module (`("alloc", "boxed")` for `alloc::boxed::box_new_uninit`), which no allocating
/// generic is; a single segment gives `None`.
fn self_type(function: &str) -> Option<(String, &str)> {
    let path = match function.strip_prefix('<') {
        // `<Self as Trait>::method` or `<Self>::method`: the self type's path.
        Some(qualified) => names::segments(self_of_qualified(qualified)?),
        None => {
            let mut segments = names::segments(function);
            segments.pop()?;
            segments
        }
    };
    let (name, module) = path.split_last()?;
    Some((module.join("::"), name))
}

/// The self type of a qualified path, given after its opening `<`: `alloc::vec::Vec<T,A>` for
/// `alloc::vec::Vec<T,A> as core::clone::Clone>::clone`; `None` when the group does not close.
fn self_of_qualified(qualified: &str) -> Option<&str> {
    let mut depth = 0usize;
    for (at, byte) in qualified.bytes().enumerate() {
        match byte {
            b'<' => depth += 1,
            b'>' if at > 0 && qualified.as_bytes()[at - 1] == b'-' => {}
            b'>' if depth == 0 => return Some(&qualified[..at]),
            b'>' => depth -= 1,
            b' ' if depth == 0 && qualified[at..].starts_with(" as ") => return Some(&qualified[..at]),
            _ => {}
        }
    }
    None
}

/// The crates of the standard library, as a function's path starts.
const LIBRARY_CRATES: &[&str] = &["alloc::", "core::", "std::"];

/// Whether `function` is the standard library's: its path, or the trait it implements for a type named without a
/// path (`<T as alloc::vec::spec_from_elem::SpecFromElem>::from_elem`, `<u8 as core::clone::Clone>::clone`).
pub(crate) fn is_standard_library(function: &str) -> bool {
    let in_library = |path: &str| LIBRARY_CRATES.iter().any(|krate| path.starts_with(krate));
    match function.strip_prefix('<') {
        Some(qualified) => match self_of_qualified(qualified) {
            Some(self_type) if in_library(self_type) => true,
            Some(self_type) if !self_type.contains("::") => {
                qualified[self_type.len()..].strip_prefix(" as ").is_some_and(in_library)
            }
            _ => false,
        },
        None => in_library(function),
    }
}

/// Whether `function` is of the standard library's reference counting (`alloc::rc`, `alloc::sync`) or the box it
/// allocates through.
fn is_reference_counting(function: &str) -> bool {
    let function = function.trim_start_matches('<');
    ["alloc::rc::", "alloc::sync::", "alloc::boxed::"].iter().any(|module| function.starts_with(module))
}

#[cfg(test)]
mod tests {
    use super::{AllocatedType, allocated_type, is_standard_library, self_type};
    use ying_report::Frame;

    fn frames(functions: &[&str]) -> Vec<Frame> {
        functions.iter().map(|function| Frame::new(*function, None, None)).collect()
    }

    fn argument(frame: usize) -> Option<AllocatedType> {
        Some(AllocatedType::Argument { frame, parameter: "T" })
    }

    #[test]
    fn a_box_names_its_value() {
        let boxed = frames(&["alloc::boxed::box_new_uninit", "alloc::boxed::Box<T>::new", "app::open_session"]);
        assert_eq!(allocated_type(&boxed), argument(1));
        let cloned = frames(&["<alloc::boxed::Box<T,A> as core::clone::Clone>::clone", "app::copy"]);
        assert_eq!(allocated_type(&cloned), argument(0));
    }

    #[test]
    fn a_vector_names_its_elements_at_its_innermost_generic_frame() {
        let vector = frames(&[
            "alloc::raw_vec::RawVecInner<A>::try_allocate_in",
            "alloc::raw_vec::RawVecInner<A>::with_capacity_in",
            "alloc::raw_vec::RawVec<T,A>::with_capacity_in",
            "alloc::vec::Vec<T,A>::with_capacity_in",
            "alloc::vec::Vec<T>::with_capacity",
            "app::forget",
        ]);
        assert_eq!(allocated_type(&vector), argument(2));
        // The strings a vector of strings clones are the strings' buffers, not the vector's elements.
        let cloned = frames(&[
            "alloc::raw_vec::RawVec<T,A>::with_capacity_in",
            "<T as alloc::slice::<impl [T]>::to_vec_in::ConvertVec>::to_vec",
            "<alloc::string::String as core::clone::Clone>::clone",
            "alloc::vec::Vec<T,A>::extend_from_slice",
            "app::copy",
        ]);
        assert_eq!(allocated_type(&cloned), argument(0));
        let deque = frames(&["alloc::collections::vec_deque::VecDeque<T,A>::with_capacity_in", "app::queue"]);
        assert_eq!(allocated_type(&deque), argument(0));
    }

    #[test]
    fn a_string_is_bytes() {
        let string = frames(&["<alloc::string::String as core::fmt::Write>::write_str", "core::fmt::write", "app::f"]);
        assert_eq!(allocated_type(&string), Some(AllocatedType::Known { frame: 0, name: "u8" }));
    }

    #[test]
    fn a_reference_count_names_its_value_not_the_box_of_its_counts() {
        let counted = frames(&[
            "alloc::boxed::box_new_uninit",
            "alloc::boxed::Box<T>::new",
            "alloc::rc::Rc<T>::new",
            "app::cycle",
        ]);
        assert_eq!(allocated_type(&counted), argument(2));
        let shared = frames(&["alloc::boxed::Box<T>::new", "alloc::sync::Arc<T>::new", "std::thread::spawn", "app::f"]);
        assert_eq!(allocated_type(&shared), argument(1));
        let from =
            frames(&["alloc::boxed::Box<T>::new", "<alloc::rc::Rc<T> as core::convert::From<T>>::from", "app::f"]);
        assert_eq!(allocated_type(&from), argument(1));
        // A box the program makes of a reference count is the box's.
        let boxed = frames(&["alloc::boxed::Box<T>::new", "app::f", "alloc::rc::Rc<T>::new"]);
        assert_eq!(allocated_type(&boxed), argument(0));
    }

    #[test]
    fn a_stack_that_leaves_the_standard_library_first_tells_nothing() {
        for stack in [
            &[
                "hashbrown::raw::RawTableInner::fallible_with_capacity",
                "std::collections::hash::map::HashMap<K,V,S>::insert",
            ][..],
            &["app::Pool<T>::grow", "alloc::vec::Vec<T,A>::push"],
            &["<app::Node as core::clone::Clone>::clone", "alloc::boxed::Box<T>::new"],
            // Line tables only name functions bare: nothing says they are the standard library's.
            &["with_capacity_in<u8, alloc::alloc::Global>", "app::forget"],
            &["alloc::boxed::box_new_uninit", "app::f"],
            &[],
        ] {
            assert_eq!(allocated_type(&frames(stack)), None, "{stack:?}");
        }
    }

    #[test]
    fn a_method_is_of_its_self_type() {
        assert_eq!(self_type("alloc::vec::Vec<T,A>::push"), Some(("alloc::vec".into(), "Vec")));
        assert_eq!(
            self_type("<alloc::vec::Vec<T,A> as core::ops::drop::Drop>::drop"),
            Some(("alloc::vec".into(), "Vec"))
        );
        assert_eq!(self_type("<alloc::rc::Rc<T>>::new"), Some(("alloc::rc".into(), "Rc")));
        assert_eq!(self_type("alloc::boxed::box_new_uninit"), Some(("alloc".into(), "boxed")));
        assert_eq!(self_type("main"), None);
        assert!(is_standard_library("<T as alloc::vec::spec_from_elem::SpecFromElem>::from_elem"));
        assert!(is_standard_library("<alloc::string::String as core::fmt::Write>::write_str"));
        assert!(!is_standard_library("<app::Node as core::clone::Clone>::clone"));
        assert!(!is_standard_library("<fn() -> u8 as app::Make>::make"));
    }
}
