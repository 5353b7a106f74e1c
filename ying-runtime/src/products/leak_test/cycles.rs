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
struct Typed {
    /// The type it holds as outputs show it; `?` when the debug information does not tell.
    name: String,
    /// Its layout, and where in the block its values lie.
    layout: Option<(Layout, Holding)>,
    /// It holds none of the user's types: it is looked through.
    through: bool,
}

/// Which field of a type holds a pointer: the index of the pointer in the type's layout, or one of these.
type Slot = u32;
/// A pointer the layout does not tell (`?`).
const UNKNOWN: Slot = Slot::MAX;
/// A pointer of a looked-through block whose field no owner carried to it: its elements' (`[]`).
const ELEMENTS: Slot = Slot::MAX - 1;

impl Typed {
    /// What `stack` allocated.
    fn of(stack: Option<StackId>) -> Self {
        let layout = stack.and_then(stacks::ips).and_then(|ips| allocated_layout(&ips));
        let name = layout.as_ref().map_or_else(|| "?".to_owned(), |(layout, _)| shown(&layout.name));
        let library = LIBRARY.iter().any(|prefix| name.starts_with(prefix)) || !name.contains("::");
        Self { through: layout.is_some() && library, name, layout }
    }

    /// The slot of the pointer at `offset` in the block, and whether it is a `Weak`'s.
    fn slot(&self, offset: usize) -> (Slot, bool) {
        let Some((layout, holding)) = &self.layout else { return (UNKNOWN, false) };
        let Some(offset) = holding.value_offset(offset as u64, layout.size, layout.align) else {
            return (UNKNOWN, false);
        };
        match layout.pointers.iter().position(|pointer| pointer.offset == offset) {
            Some(index) => (Slot::try_from(index).unwrap_or(UNKNOWN), layout.pointers[index].weak),
            None => (UNKNOWN, false),
        }
    }

    /// The field's path of `slot`: `?` where the layout does not tell, `[]` for a pointer of the type itself (an
    /// element of a buffer).
    fn field(&self, slot: Slot) -> String {
        let pointer = self.layout.as_ref().and_then(|(layout, _)| layout.pointers.get(slot as usize));
        match (slot, pointer) {
            (ELEMENTS, _) => "[]".to_owned(),
            (_, Some(pointer)) if pointer.field.is_empty() => "[]".to_owned(),
            (_, Some(pointer)) => pointer.field.clone(),
            (_, None) => "?".to_owned(),
        }
    }

    /// Whether the pointer of `slot` lies in an `Option` already.
    fn optional(&self, slot: Slot) -> bool {
        let pointer = self.layout.as_ref().and_then(|(layout, _)| layout.pointers.get(slot as usize));
        pointer.is_some_and(|pointer| pointer.optional)
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

/// A field of a type, as a label stands for it: the type (its index among the types met), the pointer's slot, and
/// whether it is the pointer to a looked-through block the field owns (`#own`: a `Weak` of the field's elements
/// does not change it).
type Field = (usize, Slot, bool);

/// The labels of fields: one label a field of a type.
#[derive(Default)]
struct Labels {
    by_field: HashMap<Field, u32>,
    fields: Vec<Field>,
}

impl Labels {
    /// The label of `field`.
    fn of(&mut self, field: Field) -> u32 {
        *self.by_field.entry(field).or_insert_with(|| {
            self.fields.push(field);
            u32::try_from(self.fields.len() - 1).unwrap_or(u32::MAX)
        })
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
    // The blocks of every cycle and those their pointers lead to, typed by stack (many blocks share one), each type
    // once by its name and how a block holds it; the first, a type no stack told.
    let mut types = vec![Typed { name: "?".to_owned(), layout: None, through: false }];
    let mut of_stack: HashMap<Option<StackId>, usize> = HashMap::new();
    let mut in_cycle = vec![false; count];
    for &block in raw.iter().flatten() {
        in_cycle[block] = true;
    }
    let mut wanted: Vec<usize> = raw.iter().flatten().copied().collect();
    wanted.extend(graph.edges.iter().filter(|edge| in_cycle[edge.0]).map(|edge| edge.2));
    let mut type_at = vec![0usize; count];
    let mut typed = vec![false; count];
    let mut last_stack: Option<(Option<StackId>, usize)> = None;
    for block in wanted {
        if std::mem::replace(&mut typed[block], true) {
            continue;
        }
        let stack = stack_of(graph.blocks[block].0);
        // Blocks side by side are often of one stack (a list's nodes): the last one's type first.
        if let Some(&(last, at)) = last_stack.as_ref()
            && last == stack
        {
            type_at[block] = at;
            continue;
        }
        type_at[block] = *of_stack.entry(stack).or_insert_with(|| {
            let typed = Typed::of(stack);
            let holding = |typed: &Typed| typed.layout.as_ref().map(|(_, holding)| *holding);
            let alike = |known: &Typed| known.name == typed.name && holding(known) == holding(&typed);
            types.iter().position(|known| typed.layout.is_some() && alike(known)).unwrap_or_else(|| {
                types.push(typed);
                types.len() - 1
            })
        });
        last_stack = Some((stack, type_at[block]));
    }
    let type_of = |block: usize| &types[type_at[block]];
    let mut labels = Labels::default();
    // The pointers that keep blocks alive, by their fields' slots: a `Weak`'s keeps nothing alive.
    let strong: Vec<(usize, Slot, usize)> = graph
        .edges
        .iter()
        .filter_map(|&(from, offset, to)| {
            let (slot, weak) = type_of(from).slot(offset);
            (!weak).then_some((from, slot, to))
        })
        .collect();
    // A looked-through block carries the field of the pointer that leads to it, and passes it on to the
    // looked-through blocks it leads to.
    let mut carried: Vec<Option<u32>> = vec![None; count];
    for &(from, slot, to) in &strong {
        if !type_of(from).through && type_of(to).through && carried[to].is_none() {
            carried[to] = Some(labels.of((type_at[from], slot, false)));
        }
    }
    for _ in 0..4 {
        for &(from, _, to) in &strong {
            if type_of(from).through && type_of(to).through && carried[to].is_none() {
                carried[to] = carried[from];
            }
        }
    }
    let block_edges: Vec<Edge> = strong
        .iter()
        .map(|&(from, slot, to)| {
            let label = match (type_of(from).through, type_of(to).through) {
                (true, _) => carried[from].unwrap_or_else(|| labels.of((type_at[from], ELEMENTS, false))),
                (false, true) => labels.of((type_at[from], slot, true)),
                (false, false) => labels.of((type_at[from], slot, false)),
            };
            Edge { from, to, label }
        })
        .collect();
    let member_edges = members_graph(&block_edges, &carried, &|block| !type_of(block).through, count);
    // A block another lost block points to can be freed; one nothing points to was forgotten, and stays.
    let mut pointed_to = vec![false; count];
    for edge in &graph.edges {
        pointed_to[edge.2] = true;
    }
    let field_of = |label: u32| {
        let (at, slot, _) = labels.fields[label as usize];
        CycleField::new(types[at].name.clone(), types[at].field(slot))
    };
    let size = |block: usize| (graph.blocks[block].1 - graph.blocks[block].0) as u64;
    let member_components = components(count, &member_edges);
    // Each block's component, by its index; `usize::MAX` for a block in none.
    let mut component_of = vec![usize::MAX; count];
    for (index, component) in member_components.iter().enumerate() {
        for &block in component {
            component_of[block] = index;
        }
    }
    let mut cycles: Vec<CycleEntry> = member_components
        .iter()
        .enumerate()
        .map(|(index, component)| {
            let inside = |edge: &&Edge| component_of[edge.from] == index && component_of[edge.to] == index;
            let ours: Vec<Edge> = member_edges.iter().filter(inside).copied().collect();
            // Each label's score, once: a cycle has a few.
            let mut scores: Vec<(u32, u32)> = Vec::new();
            for edge in &ours {
                if scores.iter().all(|&(label, _)| label != edge.label) {
                    let (at, slot, _) = labels.fields[edge.label as usize];
                    let field = field_of(edge.label);
                    let score = score(edge.label, &ours, (&types[at].name, &field.field, types[at].optional(slot)));
                    scores.push((edge.label, score));
                }
            }
            let score_of =
                |wanted: u32| scores.iter().find(|&&(label, _)| label == wanted).map_or(0, |&(_, score)| score);
            let weak = make_weak(component, &ours, score_of);
            let freed = freed_if_weak(count, &block_edges, &weak, |block| pointed_to[block]);
            let mut members: Vec<&str> = Vec::new();
            for &block in component {
                if !members.contains(&type_of(block).name.as_str()) {
                    members.push(&type_of(block).name);
                }
            }
            // Each (field, type pointed to) once, named once.
            let mut pairs: Vec<(u32, usize)> = ours.iter().map(|edge| (edge.label, type_at[edge.to])).collect();
            pairs.sort_unstable();
            pairs.dedup();
            let mut edges: Vec<CycleEdge> = pairs
                .into_iter()
                .map(|(label, to)| {
                    let field = field_of(label);
                    CycleEdge::new(field.from, field.field, types[to].name.clone())
                })
                .collect();
            edges.sort_unstable();
            edges.dedup();
            let mut entry = CycleEntry::default();
            entry.members = members.into_iter().map(str::to_owned).collect();
            entry.bytes = held_only_by(component, graph).into_iter().map(size).sum();
            entry.edges = edges;
            entry.make_weak = weak.iter().map(|&label| field_of(label)).collect();
            entry.freed_if_weak = (0..count).filter(|&block| freed[block]).map(size).sum();
            entry
        })
        .collect();
    cycles.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.members.cmp(&b.members)));
    cycles
}

/// The targets of the pointers each block holds, by block, in one buffer: block `b`'s are
/// `targets[starts[b]..starts[b + 1]]` (a `Vec` a block would be a hundred thousand allocations for a list's).
struct Adjacent {
    starts: Vec<usize>,
    targets: Vec<usize>,
}

impl Adjacent {
    /// Of `count` blocks, by the pointers `(from, to)`.
    fn new(count: usize, pairs: impl Iterator<Item = (usize, usize)> + Clone) -> Self {
        let mut starts = vec![0; count + 1];
        for (from, _) in pairs.clone() {
            starts[from + 1] += 1;
        }
        for block in 0..count {
            starts[block + 1] += starts[block];
        }
        let mut next = starts.clone();
        let mut targets = vec![0; starts[count]];
        for (from, to) in pairs {
            targets[next[from]] = to;
            next[from] += 1;
        }
        Self { starts, targets }
    }

    /// The blocks `block` points to.
    fn of(&self, block: usize) -> &[usize] {
        &self.targets[self.starts[block]..self.starts[block + 1]]
    }
}

/// The pointers between members (the blocks `member` tells): those of `block_edges` between two, and a member's
/// pointer to a looked-through block continued to the members that block leads to, with the field the block
/// `carried`.
fn members_graph(
    block_edges: &[Edge],
    carried: &[Option<u32>],
    member: &dyn Fn(usize) -> bool,
    count: usize,
) -> Vec<Edge> {
    let mut member_edges: Vec<Edge> =
        block_edges.iter().filter(|edge| member(edge.from) && member(edge.to)).copied().collect();
    if block_edges.iter().all(|edge| member(edge.to)) {
        // Nothing to look through: each pointer is one field's, to one block, once.
        return member_edges;
    }
    // By edge index, to keep each edge's label.
    let leaving = Adjacent::new(count, block_edges.iter().enumerate().map(|(index, edge)| (edge.from, index)));
    for &Edge { from, to, .. } in block_edges {
        if !member(from) || member(to) {
            continue;
        }
        let Some(label) = carried[to] else { continue };
        // The members the looked-through block at `to` leads to, through others like it.
        let (mut pending, mut seen) = (vec![to], vec![to]);
        while let Some(block) = pending.pop() {
            for &index in leaving.of(block) {
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
    member_edges
}

/// The blocks only the blocks of `component` hold, theirs among them, as valgrind tells what a lost block owns (its
/// "indirectly lost"): what they lead to in `graph` (a `Weak`'s pointer too, which keeps the allocation), but for
/// what another lost block leads to as well.
fn held_only_by(component: &[usize], graph: &LostGraph) -> Vec<usize> {
    let count = graph.blocks.len();
    let leaving = Adjacent::new(count, graph.edges.iter().map(|&(from, _, to)| (from, to)));
    let entering = Adjacent::new(count, graph.edges.iter().map(|&(from, _, to)| (to, from)));
    let mut held = vec![false; count];
    let mut pending: Vec<usize> = component.to_vec();
    for &block in component {
        held[block] = true;
    }
    while let Some(block) = pending.pop() {
        for &next in leaving.of(block) {
            if !held[next] {
                held[next] = true;
                pending.push(next);
            }
        }
    }
    // A block something outside leads to is not only the component's, nor is what it leads to in turn.
    let mut member = vec![false; count];
    for &block in component {
        member[block] = true;
    }
    let own = |block: usize| member[block];
    let mut pending: Vec<usize> = (0..count).filter(|&block| held[block] && !own(block)).collect();
    while let Some(block) = pending.pop() {
        if held[block] && entering.of(block).iter().any(|&from| !held[from]) {
            held[block] = false;
            pending.extend(leaving.of(block).iter().copied().filter(|&next| held[next] && !own(next)));
        }
    }
    (0..count).filter(|&block| held[block]).collect()
}

/// How much making the field `label` a `Weak` is the fix a user would make, of the fields that break a cycle
/// alike (`edges`: the cycle's): a field many blocks point through to one (a child's `parent`, an observer's
/// registry) most, then a closure's capture (a callback that captured its owner), a field that can be `None` already,
/// a field named as pointing back (`parent`, `prev`). `field`: the type's name, the field's path and whether it is an
/// `Option`.
fn score(label: u32, edges: &[Edge], (from, field, optional): (&str, &str, bool)) -> u32 {
    let mut targets: Vec<usize> = edges.iter().filter(|edge| edge.label == label).map(|edge| edge.to).collect();
    let pointers = targets.len();
    targets.sort_unstable();
    targets.dedup();
    let converging = pointers > targets.len();
    let closure = from.ends_with("{closure}");
    let last = field.rsplit('.').next().unwrap_or(field).trim_end_matches("[]");
    let back = BACK.contains(&last);
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
