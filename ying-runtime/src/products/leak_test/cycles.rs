//! The reference cycles among a leak test's lost blocks, named for the report: each strongly connected component of
//! the blocks nothing reaches, by its members' types, the fields that hold its pointers, a smallest set of fields
//! to make `Weak`, and what that would free.
//!
//! A block's type and the fields of its pointers come from the debug information at the stack that allocated it
//! (`read::symbolize::allocated_layout`). A block that holds none of the user's types (a `Vec<Rc<Node>>`'s buffer, an
//! `Rc<RefCell<Vec<..>>>`'s) is looked through: its pointers are the field's that owns it (`Node.children[]`). A
//! `Weak`'s pointer keeps nothing alive and is no edge. The graph algorithms are `read::reach::cycles`'.

use crate::base::ids::StackId;
use crate::hot::stacks;
use crate::read::reach::LostGraph;
use crate::read::reach::cycles::{Edge, components, freed_if_weak, make_weak};
use crate::read::symbolize::allocated_layout;
use std::collections::HashMap;
use ying_frames::debug_types::layout::Layout;
use ying_frames::types::Holding;
use ying_report::report::{CycleEdge, CycleEntry, CycleField};

/// The standard library's wrappers a type is shown through: `RefCell<Node>` is shown as `Node`.
const WRAPPERS: [&str; 7] = [
    "core::cell::RefCell<",
    "core::cell::Cell<",
    "core::cell::UnsafeCell<",
    "std::sync::poison::mutex::Mutex<",
    "std::sync::poison::rwlock::RwLock<",
    "std::sync::mutex::Mutex<",
    "std::sync::rwlock::RwLock<",
];

/// The paths of the standard library's own types (and hashbrown's, which std's tables are).
const LIBRARY: [&str; 4] = ["core::", "alloc::", "std::", "hashbrown::"];

/// The names of fields that point back, to an owner or to what came before: the `Weak` of a cycle when nothing else
/// tells.
const BACK: [&str; 7] = ["parent", "prev", "previous", "back", "owner", "up", "root"];

/// What a block's stack tells of it.
#[derive(Clone)]
struct Typed {
    /// The type it holds as outputs show it; `?` when the debug information does not tell.
    name: String,
    /// Its layout, and where in the block its values lie.
    layout: Option<(Layout, Holding)>,
    /// It holds none of the user's types: it is looked through.
    through: bool,
}

impl Typed {
    /// What `stack` allocated.
    fn of(stack: Option<StackId>) -> Self {
        let layout = stack.and_then(stacks::ips).and_then(|ips| allocated_layout(&ips));
        let name = layout.as_ref().map_or_else(|| "?".to_owned(), |(layout, _)| shown(&layout.name));
        let through =
            layout.is_some() && (LIBRARY.iter().any(|prefix| name.starts_with(prefix)) || !name.contains("::"));
        Self { name, layout, through }
    }

    /// The field of the pointer at `offset` in the block, and whether it is a `Weak`'s; `?` where the layout does
    /// not say.
    fn field(&self, offset: usize) -> (String, bool) {
        let Some((layout, holding)) = &self.layout else { return ("?".to_owned(), false) };
        let pointer = holding
            .value_offset(offset as u64, layout.size, layout.align)
            .and_then(|offset| layout.pointers.iter().find(|pointer| pointer.offset == offset));
        match pointer {
            Some(pointer) if pointer.field.is_empty() => ("[]".to_owned(), pointer.weak),
            Some(pointer) => (pointer.field.clone(), pointer.weak),
            None => ("?".to_owned(), false),
        }
    }

    /// Whether the pointer at `offset` lies in an `Option` already.
    fn optional(&self, field: &str) -> bool {
        self.layout
            .as_ref()
            .is_some_and(|(layout, _)| layout.pointers.iter().any(|pointer| pointer.field == field && pointer.optional))
    }
}

/// A type as outputs show it: through the standard library's cells and locks (`RefCell<Node>` is `Node`), a
/// closure as `{closure}` in the function it is in.
fn shown(name: &str) -> String {
    let mut name = name;
    while let Some(prefix) = WRAPPERS.iter().find(|prefix| name.starts_with(**prefix)) {
        match name[prefix.len()..].strip_suffix('>') {
            Some(inner) => name = inner,
            None => break,
        }
    }
    ying_frames::tasks::as_the_user_names_it(name)
}

/// The labels of fields, by the type and the field's path: one label a field of a type.
#[derive(Default)]
struct Labels {
    by_field: HashMap<(String, String), u32>,
    fields: Vec<(String, String)>,
}

impl Labels {
    /// The label of `field` of type `from`.
    fn of(&mut self, from: &str, field: &str) -> u32 {
        let key = (from.to_owned(), field.to_owned());
        if let Some(&label) = self.by_field.get(&key) {
            return label;
        }
        let label = u32::try_from(self.fields.len()).unwrap_or(u32::MAX);
        self.fields.push(key.clone());
        self.by_field.insert(key, label);
        label
    }
}

/// The reference cycles among the lost blocks of `graph`, each block's stack told by `stack_of` (by its start):
/// the most bytes first.
pub(super) fn named(graph: &LostGraph, stack_of: impl Fn(usize) -> Option<StackId>) -> Vec<CycleEntry> {
    let count = graph.blocks.len();
    let unlabelled: Vec<Edge> = graph.edges.iter().map(|&(from, _, to)| Edge { from, to, label: 0 }).collect();
    let raw = components(count, &unlabelled);
    if raw.is_empty() {
        return Vec::new();
    }
    // The blocks of every cycle and those their pointers lead to, typed (by stack: many blocks share one).
    let mut by_stack: HashMap<Option<StackId>, Typed> = HashMap::new();
    let mut typed: Vec<Option<Typed>> = vec![None; count];
    let mut wanted: Vec<usize> = raw.iter().flatten().copied().collect();
    wanted.extend(graph.edges.iter().filter(|edge| raw.iter().any(|c| c.binary_search(&edge.0).is_ok())).map(|e| e.2));
    for block in wanted {
        if typed[block].is_none() {
            let stack = stack_of(graph.blocks[block].0);
            typed[block] = Some(by_stack.entry(stack).or_insert_with(|| Typed::of(stack)).clone());
        }
    }
    let unknown = Typed { name: "?".to_owned(), layout: None, through: false };
    let type_of = |block: usize| typed[block].as_ref().unwrap_or(&unknown);
    let mut labels = Labels::default();
    // The pointers that keep blocks alive, labelled by their fields: a looked-through block's carry the field of
    // the pointer that leads to it; the pointer to it, that field's own (`#own`), which a `Weak` does not change.
    let mut carried: Vec<Option<u32>> = vec![None; count];
    let mut strong: Vec<(usize, String, usize)> = Vec::new();
    for &(from, offset, to) in &graph.edges {
        let (field, weak) = type_of(from).field(offset);
        if !weak {
            strong.push((from, field, to));
        }
    }
    for &(from, ref field, to) in &strong {
        if !type_of(from).through && type_of(to).through && carried[to].is_none() {
            carried[to] = Some(labels.of(&type_of(from).name, field));
        }
    }
    // A looked-through block another looked-through block leads to carries the same field.
    for _ in 0..4 {
        for &(from, _, to) in &strong {
            if type_of(from).through && type_of(to).through && carried[to].is_none() {
                carried[to] = carried[from];
            }
        }
    }
    let block_edges: Vec<Edge> = strong
        .iter()
        .map(|&(from, ref field, to)| {
            let (from_type, to_type) = (type_of(from), type_of(to));
            let label = match (from_type.through, to_type.through) {
                (true, _) => carried[from].unwrap_or_else(|| labels.of(&from_type.name, "[]")),
                (false, true) => labels.of(&from_type.name, &format!("{field}#own")),
                (false, false) => labels.of(&from_type.name, field),
            };
            Edge { from, to, label }
        })
        .collect();
    // The members' graph: a looked-through block's pointers are its owner's field's, to the members they lead to.
    let member = |block: usize| !type_of(block).through;
    let mut member_edges: Vec<Edge> = Vec::new();
    for &Edge { from, to, label } in &block_edges {
        if member(from) && member(to) {
            member_edges.push(Edge { from, to, label });
        }
    }
    let mut leaving: Vec<Vec<usize>> = vec![Vec::new(); count];
    for (index, edge) in block_edges.iter().enumerate() {
        leaving[edge.from].push(index);
    }
    for &Edge { from, to, .. } in &block_edges {
        if !member(from) || member(to) {
            continue;
        }
        let Some(label) = carried[to] else { continue };
        // The members the looked-through block at `to` leads to, through others like it.
        let (mut pending, mut seen) = (vec![to], vec![to]);
        while let Some(block) = pending.pop() {
            for &index in &leaving[block] {
                let next = block_edges[index].to;
                if member(next) {
                    member_edges.push(Edge { from, to: next, label });
                } else if !seen.contains(&next) && seen.len() < 64 {
                    seen.push(next);
                    pending.push(next);
                }
            }
        }
    }
    member_edges.sort_unstable_by_key(|edge| (edge.from, edge.to, edge.label));
    member_edges.dedup();
    // A block another lost block points to can be freed; one nothing points to was forgotten, and stays.
    let mut pointed_to = vec![false; count];
    for edge in &graph.edges {
        pointed_to[edge.2] = true;
    }
    let mut cycles: Vec<CycleEntry> = components(count, &member_edges)
        .into_iter()
        .map(|component| {
            let optional = |block: usize, field: &str| type_of(block).optional(field);
            let score = |label: u32| score(label, &component, &member_edges, &labels, &optional);
            let weak = make_weak(&component, &member_edges, score);
            let freed = freed_if_weak(count, &block_edges, &weak, |block| pointed_to[block]);
            let size = |block: usize| (graph.blocks[block].1 - graph.blocks[block].0) as u64;
            let bytes = held_only_by(&component, graph).into_iter().map(size).sum();
            let mut members: Vec<String> = Vec::new();
            for &block in &component {
                if !members.contains(&type_of(block).name) {
                    members.push(type_of(block).name.clone());
                }
            }
            let inside =
                |edge: &&Edge| component.binary_search(&edge.from).is_ok() && component.binary_search(&edge.to).is_ok();
            let mut edges: Vec<CycleEdge> = member_edges
                .iter()
                .filter(inside)
                .map(|edge| {
                    let (from, field) = &labels.fields[edge.label as usize];
                    CycleEdge::new(from.clone(), field.clone(), type_of(edge.to).name.clone())
                })
                .collect();
            edges.sort_unstable();
            edges.dedup();
            let make_weak = weak
                .iter()
                .map(|&label| {
                    let (from, field) = &labels.fields[label as usize];
                    CycleField::new(from.clone(), field.clone())
                })
                .collect();
            let freed_if_weak = (0..count).filter(|&block| freed[block]).map(size).sum();
            let mut entry = CycleEntry::default();
            entry.members = members;
            entry.bytes = bytes;
            entry.edges = edges;
            entry.make_weak = make_weak;
            entry.freed_if_weak = freed_if_weak;
            entry
        })
        .collect();
    cycles.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.members.cmp(&b.members)));
    cycles
}

/// The blocks only the blocks of `component` hold, theirs among them, as valgrind tells what a lost block owns (its
/// "indirectly lost"): what they lead to in `graph` (a `Weak`'s pointer too, which keeps the allocation), but for
/// what another lost block leads to as well.
fn held_only_by(component: &[usize], graph: &LostGraph) -> Vec<usize> {
    let count = graph.blocks.len();
    let (mut leaving, mut entering) = (vec![Vec::new(); count], vec![Vec::new(); count]);
    for &(from, _, to) in &graph.edges {
        leaving[from].push(to);
        entering[to].push(from);
    }
    let mut held = vec![false; count];
    let mut pending: Vec<usize> = component.to_vec();
    for &block in component {
        held[block] = true;
    }
    while let Some(block) = pending.pop() {
        for &next in &leaving[block] {
            if !held[next] {
                held[next] = true;
                pending.push(next);
            }
        }
    }
    // A block something outside leads to is not only the component's, nor is what it leads to in turn.
    let own = |block: usize| component.binary_search(&block).is_ok();
    let mut pending: Vec<usize> = (0..count).filter(|&block| held[block] && !own(block)).collect();
    while let Some(block) = pending.pop() {
        if held[block] && entering[block].iter().any(|&from| !held[from]) {
            held[block] = false;
            pending.extend(leaving[block].iter().copied().filter(|&next| held[next] && !own(next)));
        }
    }
    (0..count).filter(|&block| held[block]).collect()
}

/// How much making the field `label` a `Weak` is the fix a user would make, of the fields that break the cycle
/// `component` alike: a field many blocks point through to one (a child's `parent`, an observer's registry) most,
/// then a closure's capture (a callback that captured its owner), a field that can be `None` already (`optional`
/// tells, by the block and the field), a field named as pointing back (`parent`, `prev`).
fn score(
    label: u32,
    component: &[usize],
    edges: &[Edge],
    labels: &Labels,
    optional: &dyn Fn(usize, &str) -> bool,
) -> u32 {
    let ours: Vec<&Edge> =
        edges.iter().filter(|edge| edge.label == label && component.binary_search(&edge.from).is_ok()).collect();
    let Some(first) = ours.first() else { return 0 };
    let mut targets: Vec<usize> = ours.iter().map(|edge| edge.to).collect();
    targets.sort_unstable();
    targets.dedup();
    let converging = ours.len() > targets.len();
    let (from, field) = &labels.fields[label as usize];
    let closure = from.ends_with("{closure}");
    let optional = optional(first.from, field);
    let back =
        BACK.iter().any(|back| field.rsplit('.').next().is_some_and(|last| last.trim_end_matches("[]") == *back));
    8 * u32::from(converging) + 4 * u32::from(closure) + 2 * u32::from(optional) + u32::from(back)
}

#[cfg(test)]
mod tests {
    use super::shown;

    #[test]
    fn a_type_is_shown_through_its_cells_and_a_closure_in_its_function() {
        assert_eq!(shown("core::cell::RefCell<app::Node>"), "app::Node");
        assert_eq!(shown("std::sync::poison::mutex::Mutex<core::cell::RefCell<app::Ring>>"), "app::Ring");
        assert_eq!(shown("app::Window::new::{closure#0}::{closure_env#0}<>"), "app::Window::new::{closure}");
        assert_eq!(shown("alloc::rc::Rc<app::Node>"), "alloc::rc::Rc<app::Node>");
    }
}
