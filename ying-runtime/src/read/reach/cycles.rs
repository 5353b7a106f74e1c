//! Reference cycles among the lost blocks of a test (the blocks nothing reaches any more): which of them form
//! cycles ([`components`]), which fields to make `Weak` so that a cycle no longer keeps itself alive
//! ([`make_weak`]), and which blocks reference counting would then free ([`freed_if_weak`]).
//!
//! Blocks are indices, and the pointers between them edges labelled by the field that holds them (one label a
//! field of a type: every edge with one label is made `Weak` together). Nothing here reads memory: it runs on the
//! graph the scan leaves, once the scan is over. Every walk keeps its depth in a vector, not on the thread's stack,
//! so that a list of a million blocks is no deeper to it than a pair.

use std::cmp::Reverse;
use std::ops::Range;

/// A pointer from one lost block to another, through the field `label` names (one label a field of a type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Edge {
    /// The block that holds the pointer.
    pub(crate) from: usize,
    /// The block pointed to.
    pub(crate) to: usize,
    /// The field that holds the pointer.
    pub(crate) label: u32,
}

/// Most distinct labels in one component for which [`make_weak`] tries every set of labels (one bit each of a
/// `u32`); past this it picks them greedily.
const EXHAUSTIVE: usize = 16;

/// No index: a node not visited yet, or a block outside the component.
const NONE: usize = usize::MAX;

/// The edges of a graph grouped by the node they leave, each with a tag (a label's index, or nothing).
struct Adjacency {
    /// Where the edges that leave node `i` start in `targets` and `tags`; `starts[i + 1]` is where they end.
    starts: Vec<usize>,
    /// The node each edge points to.
    targets: Vec<usize>,
    /// The tag of each edge.
    tags: Vec<usize>,
}

impl Adjacency {
    /// The graph of `nodes` nodes and the `edges` between them, `(from, to, tag)`, which are read twice.
    fn new(nodes: usize, edges: impl Iterator<Item = (usize, usize, usize)> + Clone) -> Self {
        let mut starts = vec![0; nodes + 1];
        for (from, _, _) in edges.clone() {
            starts[from + 1] += 1;
        }
        for node in 0..nodes {
            starts[node + 1] += starts[node];
        }
        let mut next = starts.clone();
        let mut targets = vec![0; starts[nodes]];
        let mut tags = vec![0; starts[nodes]];
        for (from, to, tag) in edges {
            targets[next[from]] = to;
            tags[next[from]] = tag;
            next[from] += 1;
        }
        Self { starts, targets, tags }
    }

    /// How many nodes the graph has.
    fn nodes(&self) -> usize {
        self.starts.len() - 1
    }

    /// The positions in `targets` and `tags` of the edges that leave `node`.
    fn leaving(&self, node: usize) -> Range<usize> {
        self.starts[node]..self.starts[node + 1]
    }
}

/// The strongly connected components of `graph` through the edges whose tag `keep` is true for: the component of
/// each node, numbered from 0 in the order they close, and how many there are. Tarjan's algorithm, with the walk's
/// frames in a vector.
fn strong_components(graph: &Adjacency, keep: impl Fn(usize) -> bool) -> (Vec<usize>, usize) {
    let nodes = graph.nodes();
    // The order each node was first visited in, and the earliest such order it reaches back to.
    let mut order = vec![NONE; nodes];
    let mut low = vec![0; nodes];
    // A node visited is on Tarjan's stack until its component is known.
    let mut component = vec![NONE; nodes];
    let mut stack = Vec::new();
    // The walk's frames: a node, and the position of the next edge of it to follow.
    let mut frames: Vec<(usize, usize)> = Vec::new();
    let mut visited = 0;
    let mut closed = 0;
    for root in 0..nodes {
        if order[root] != NONE {
            continue;
        }
        order[root] = visited;
        low[root] = visited;
        visited += 1;
        stack.push(root);
        frames.push((root, graph.starts[root]));
        while let Some((node, next)) = frames.last_mut() {
            let node = *node;
            if *next < graph.starts[node + 1] {
                let edge = *next;
                *next += 1;
                if !keep(graph.tags[edge]) {
                    continue;
                }
                let target = graph.targets[edge];
                if order[target] == NONE {
                    order[target] = visited;
                    low[target] = visited;
                    visited += 1;
                    stack.push(target);
                    frames.push((target, graph.starts[target]));
                } else if component[target] == NONE {
                    low[node] = low[node].min(order[target]);
                }
                continue;
            }
            frames.pop();
            if let Some(&(parent, _)) = frames.last() {
                low[parent] = low[parent].min(low[node]);
            }
            if low[node] == order[node] {
                while let Some(member) = stack.pop() {
                    component[member] = closed;
                    if member == node {
                        break;
                    }
                }
                closed += 1;
            }
        }
    }
    (component, closed)
}

/// The strongly connected components of the `blocks` (`0..blocks`) through the `edges` that are cycles: two blocks
/// or more, or one with an edge to itself. Each lists its blocks in ascending order, and they come in the order of
/// their first blocks.
pub(crate) fn components(blocks: usize, edges: &[Edge]) -> Vec<Vec<usize>> {
    let graph = Adjacency::new(blocks, edges.iter().map(|edge| (edge.from, edge.to, 0)));
    let (component, count) = strong_components(&graph, |_| true);
    let mut sizes = vec![0; count];
    for &of in &component {
        sizes[of] += 1;
    }
    let mut looped = vec![false; count];
    for edge in edges.iter().filter(|edge| edge.from == edge.to) {
        looped[component[edge.from]] = true;
    }
    // Where each component that is a cycle is in the answer, once its first block is met.
    let mut slots = vec![NONE; count];
    let mut cycles: Vec<Vec<usize>> = Vec::new();
    for (block, &of) in component.iter().enumerate() {
        if sizes[of] < 2 && !looped[of] {
            continue;
        }
        if slots[of] == NONE {
            slots[of] = cycles.len();
            cycles.push(Vec::with_capacity(sizes[of]));
        }
        cycles[slots[of]].push(block);
    }
    cycles
}

/// The labels to make `Weak` so that the edges among the blocks of `component` (edges with both ends in it; an edge
/// to itself is a cycle) no longer form a cycle: a smallest set, of those the one whose labels `score` highest in
/// sum, of those the first in order. Every set is tried, smallest first, for up to [`EXHAUSTIVE`] labels; past
/// that the labels are picked greedily ([`greedy_cut`]). In ascending order; none for a component with no cycle.
pub(crate) fn make_weak(component: &[usize], edges: &[Edge], score: impl Fn(u32) -> u32) -> Vec<u32> {
    let Some(&largest) = component.iter().max() else {
        return Vec::new();
    };
    // The index in the component of each block, up to its largest.
    let mut local = vec![NONE; largest + 1];
    for (index, &block) in component.iter().enumerate() {
        local[block] = index;
    }
    let within = |block: usize| local.get(block).copied().filter(|&index| index != NONE);
    let inside: Vec<(usize, usize, u32)> =
        edges.iter().filter_map(|edge| Some((within(edge.from)?, within(edge.to)?, edge.label))).collect();
    let mut labels: Vec<u32> = inside.iter().map(|&(_, _, label)| label).collect();
    labels.sort_unstable();
    labels.dedup();
    let index_of = |label: u32| labels.partition_point(|&other| other < label);
    let graph = Adjacency::new(component.len(), inside.iter().map(|&(from, to, label)| (from, to, index_of(label))));
    let scores: Vec<u64> = labels.iter().map(|&label| u64::from(score(label))).collect();
    let cut = if labels.len() <= EXHAUSTIVE {
        let reverse =
            Adjacency::new(component.len(), inside.iter().map(|&(from, to, label)| (to, from, index_of(label))));
        smallest_cut(&graph, &reverse, &scores)
    } else {
        greedy_cut(&graph, &scores)
    };
    cut.into_iter().map(|index| labels[index]).collect()
}

/// Of the sets of tags (indices into `scores`, at most [`EXHAUSTIVE`]) whose edges removed leave `graph` acyclic, a
/// smallest one, of those the one highest in the sum of its `scores`, of those the first in order; in ascending
/// order. `reverse` is `graph` with its edges turned around. The sets of each size are tried in turn, in order; a
/// set is not checked when it would score no higher than the best so far, or when it shares no tag with a cycle an
/// earlier check found (that cycle is left whole).
fn smallest_cut(graph: &Adjacency, reverse: &Adjacency, scores: &[u64]) -> Vec<usize> {
    let tags = scores.len();
    let mut finder = CycleFinder::default();
    // The tags of each cycle found, one bit a tag.
    let mut found: Vec<u32> = Vec::new();
    let mut chosen = Vec::with_capacity(tags);
    let mut best = Vec::with_capacity(tags);
    for size in 0..=tags {
        chosen.clear();
        chosen.extend(0..size);
        let mut best_score = None;
        loop {
            let sum: u64 = chosen.iter().map(|&tag| scores[tag]).sum();
            let removed = chosen.iter().fold(0, |removed, &tag| removed | (1 << tag));
            if best_score.is_none_or(|best_score| sum > best_score) && found.iter().all(|&cycle| cycle & removed != 0) {
                match finder.cycle(graph, reverse, removed) {
                    None => {
                        best_score = Some(sum);
                        best.clear();
                        best.extend_from_slice(&chosen);
                    }
                    Some(cycle) => found.push(cycle),
                }
            }
            if !next_combination(&mut chosen, tags) {
                break;
            }
        }
        if best_score.is_some() {
            return best;
        }
    }
    // Not reached: with every tag removed no edge is left.
    (0..tags).collect()
}

/// Moves `chosen` (ascending, each below `tags`) on to the next set of as many in order; false when it was the
/// last.
fn next_combination(chosen: &mut [usize], tags: usize) -> bool {
    let size = chosen.len();
    let Some(position) = (0..size).rev().find(|&position| chosen[position] < tags - size + position) else {
        return false;
    };
    chosen[position] += 1;
    for after in position + 1..size {
        chosen[after] = chosen[after - 1] + 1;
    }
    true
}

/// Tags (indices into `scores`) whose edges removed leave `graph` acyclic, picked one at a time: each time the tag
/// with the most edges left within a cycle (edges whose ends are in one strongly connected component), then the
/// highest scored, then the first. In ascending order. Not always a smallest set, for too many tags to try every
/// set.
fn greedy_cut(graph: &Adjacency, scores: &[u64]) -> Vec<usize> {
    let mut removed = vec![false; scores.len()];
    let mut within_cycles = vec![0_usize; scores.len()];
    let mut chosen = Vec::new();
    loop {
        let (component, _) = strong_components(graph, |tag| !removed[tag]);
        within_cycles.fill(0);
        for node in 0..graph.nodes() {
            for edge in graph.leaving(node) {
                let tag = graph.tags[edge];
                if !removed[tag] && component[node] == component[graph.targets[edge]] {
                    within_cycles[tag] += 1;
                }
            }
        }
        let Some(tag) = (0..scores.len())
            .filter(|&tag| within_cycles[tag] > 0)
            .max_by_key(|&tag| (within_cycles[tag], scores[tag], Reverse(tag)))
        else {
            break;
        };
        removed[tag] = true;
        chosen.push(tag);
    }
    chosen.sort_unstable();
    chosen
}

/// Finds a cycle left in a graph once the edges of some of its tags are removed, with buffers kept from one search
/// to the next.
#[derive(Default)]
struct CycleFinder {
    /// How many edges left point to each node.
    holders: Vec<usize>,
    /// Nodes no edge left points to, still to take away.
    ready: Vec<usize>,
    /// Where each node is in `path`, once it is.
    on_path: Vec<usize>,
    /// The tags of the edges walked back, the edge to the `n`th node of the walk `n`th.
    path: Vec<usize>,
}

impl CycleFinder {
    /// The tags (one bit a tag) of a cycle of `graph` through the edges whose tag is not among the `removed` (one
    /// bit a tag), none when there is no such cycle. Kahn's algorithm takes away the nodes no edge left points to,
    /// with their edges, until none is left (acyclic) or each left has an edge to it from another left; walking
    /// those edges back (through `reverse`, `graph` with its edges turned around) from a node left comes back to a
    /// node of the walk, which closes a cycle.
    fn cycle(&mut self, graph: &Adjacency, reverse: &Adjacency, removed: u32) -> Option<u32> {
        let Self { holders, ready, on_path, path } = self;
        let kept = |tag: usize| removed & (1 << tag) == 0;
        holders.clear();
        holders.resize(graph.nodes(), 0);
        for (&target, &tag) in graph.targets.iter().zip(&graph.tags) {
            if kept(tag) {
                holders[target] += 1;
            }
        }
        ready.clear();
        ready.extend((0..graph.nodes()).filter(|&node| holders[node] == 0));
        let mut taken = 0;
        while let Some(node) = ready.pop() {
            taken += 1;
            for edge in graph.leaving(node) {
                if !kept(graph.tags[edge]) {
                    continue;
                }
                let target = graph.targets[edge];
                holders[target] -= 1;
                if holders[target] == 0 {
                    ready.push(target);
                }
            }
        }
        if taken == graph.nodes() {
            return None;
        }
        let mut node = (0..graph.nodes()).find(|&node| holders[node] > 0)?;
        on_path.clear();
        on_path.resize(graph.nodes(), NONE);
        path.clear();
        while on_path[node] == NONE {
            on_path[node] = path.len();
            let back =
                reverse.leaving(node).find(|&edge| kept(reverse.tags[edge]) && holders[reverse.targets[edge]] > 0);
            let Some(edge) = back else {
                // Not reached: a node left has an edge to it from another left. Every tag then stands for the
                // cycle, which rules out only the empty set, already checked.
                return Some(u32::MAX);
            };
            path.push(reverse.tags[edge]);
            node = reverse.targets[edge];
        }
        Some(path[on_path[node]..].iter().fold(0, |cycle, &tag| cycle | (1 << tag)))
    }
}

/// Which of the `blocks` reference counting would free if every edge with a label in `weak` were a `Weak`: a block
/// `lost` is true for is freed once no strong edge from a block not freed points to it, and freeing it drops its
/// strong edges in turn. A block `lost` is false for is alive, and keeps what its strong edges point to.
pub(crate) fn freed_if_weak(blocks: usize, edges: &[Edge], weak: &[u32], lost: impl Fn(usize) -> bool) -> Vec<bool> {
    let mut weak = weak.to_vec();
    weak.sort_unstable();
    weak.dedup();
    let strong = |edge: &&Edge| weak.binary_search(&edge.label).is_err();
    let graph = Adjacency::new(blocks, edges.iter().filter(strong).map(|edge| (edge.from, edge.to, 0)));
    let mut holders = vec![0_usize; blocks];
    for &target in &graph.targets {
        holders[target] += 1;
    }
    let lost: Vec<bool> = (0..blocks).map(lost).collect();
    let mut freed = vec![false; blocks];
    let mut ready: Vec<usize> = (0..blocks).filter(|&block| lost[block] && holders[block] == 0).collect();
    while let Some(block) = ready.pop() {
        freed[block] = true;
        for edge in graph.leaving(block) {
            let target = graph.targets[edge];
            holders[target] -= 1;
            if holders[target] == 0 && lost[target] {
                ready.push(target);
            }
        }
    }
    freed
}

#[cfg(test)]
mod tests {
    use super::{Edge, components, freed_if_weak, make_weak};

    /// The label of a list's pointer to the next node.
    const NEXT: u32 = 1;
    /// The label of a list's pointer to the previous node.
    const PREV: u32 = 2;

    /// The edge from `from` to `to` through `label`.
    fn edge(from: usize, to: usize, label: u32) -> Edge {
        Edge { from, to, label }
    }

    /// Every label scored alike.
    fn alike(_: u32) -> u32 {
        1
    }

    /// Every block lost.
    fn all_lost(_: usize) -> bool {
        true
    }

    #[test]
    fn a_two_block_cycle_is_one_component_that_one_label_breaks_and_frees() {
        let edges = [edge(0, 1, NEXT), edge(1, 0, PREV)];
        assert_eq!(components(2, &edges), [vec![0, 1]]);
        assert_eq!(make_weak(&[0, 1], &edges, alike), [NEXT]);
        assert_eq!(freed_if_weak(2, &edges, &[NEXT], all_lost), [true, true]);
        assert_eq!(freed_if_weak(2, &edges, &[], all_lost), [false, false]);
    }

    #[test]
    fn a_block_pointing_to_itself_is_a_cycle_its_own_label_breaks() {
        // Block 1 points nowhere, and is no cycle alone.
        let edges = [edge(0, 0, 5), edge(0, 1, 6)];
        assert_eq!(components(2, &edges), [vec![0]]);
        assert_eq!(make_weak(&[0], &edges, alike), [5]);
        assert_eq!(freed_if_weak(2, &edges, &[5], all_lost), [true, true]);
        assert_eq!(freed_if_weak(2, &edges, &[], all_lost), [false, false]);
    }

    #[test]
    fn the_higher_scored_of_the_parent_and_children_fields_is_made_weak() {
        const CHILDREN: u32 = 1;
        const PARENT: u32 = 2;
        let edges: Vec<Edge> = (1..4).flat_map(|child| [edge(0, child, CHILDREN), edge(child, 0, PARENT)]).collect();
        assert_eq!(components(4, &edges), [vec![0, 1, 2, 3]]);
        let parent_first = |label| if label == PARENT { 10 } else { 1 };
        assert_eq!(make_weak(&[0, 1, 2, 3], &edges, parent_first), [PARENT]);
        let children_first = |label| if label == CHILDREN { 10 } else { 1 };
        assert_eq!(make_weak(&[0, 1, 2, 3], &edges, children_first), [CHILDREN]);
        assert_eq!(freed_if_weak(4, &edges, &[PARENT], all_lost), [true; 4]);
    }

    #[test]
    fn of_labels_scored_alike_the_smallest_is_made_weak() {
        let edges = [edge(0, 1, 7), edge(1, 0, 5)];
        assert_eq!(make_weak(&[0, 1], &edges, alike), [5]);
    }

    #[test]
    fn a_doubly_linked_list_is_freed_by_making_prev_weak() {
        let nodes = 100_000;
        let edges: Vec<Edge> =
            (1..nodes).flat_map(|node| [edge(node - 1, node, NEXT), edge(node, node - 1, PREV)]).collect();
        let cycles = components(nodes, &edges);
        assert_eq!(cycles.len(), 1);
        assert!(cycles[0].iter().copied().eq(0..nodes));
        let prev_first = |label| if label == PREV { 10 } else { 1 };
        assert_eq!(make_weak(&cycles[0], &edges, prev_first), [PREV]);
        assert!(freed_if_weak(nodes, &edges, &[PREV], all_lost).into_iter().all(|freed| freed));
        assert!(freed_if_weak(nodes, &edges, &[], all_lost).into_iter().all(|freed| !freed));
    }

    #[test]
    fn a_chain_of_a_million_blocks_has_no_cycle_and_is_freed_whole() {
        let blocks = 1_000_000;
        let edges: Vec<Edge> = (1..blocks).map(|block| edge(block - 1, block, NEXT)).collect();
        assert!(components(blocks, &edges).is_empty());
        assert!(freed_if_weak(blocks, &edges, &[], all_lost).into_iter().all(|freed| freed));
    }

    #[test]
    fn blocks_with_no_cycle_among_them_need_no_weak_label() {
        let edges = [edge(0, 1, NEXT), edge(1, 2, NEXT), edge(0, 2, 3)];
        assert!(make_weak(&[0, 1, 2], &edges, alike).is_empty());
    }

    #[test]
    fn two_independent_cycles_are_two_components_in_the_order_of_their_first_blocks() {
        // 0 points into the first cycle, and the second points out to 6; neither is in a cycle.
        let edges =
            [edge(5, 2, 1), edge(2, 3, 1), edge(3, 5, 1), edge(4, 1, 2), edge(1, 4, 2), edge(0, 1, 3), edge(5, 6, 3)];
        assert_eq!(components(7, &edges), [vec![1, 4], vec![2, 3, 5]]);
    }

    #[test]
    fn a_label_shared_by_two_cycles_is_made_weak_alone_even_when_scored_lowest() {
        // A -> B -> C -> A and A -> C -> A, the edge back to A in both.
        let edges = [edge(0, 1, 1), edge(1, 2, 2), edge(2, 0, 3), edge(0, 2, 4)];
        assert_eq!(components(3, &edges), [vec![0, 1, 2]]);
        let back_last = |label| if label == 3 { 0 } else { 100 };
        assert_eq!(make_weak(&[0, 1, 2], &edges, back_last), [3]);
    }

    #[test]
    fn two_cycles_with_no_label_in_common_need_a_label_of_each() {
        // 0 <-> 1 through 1 and 2, 1 <-> 2 through 3 and 4: one component.
        let edges = [edge(0, 1, 1), edge(1, 0, 2), edge(1, 2, 3), edge(2, 1, 4)];
        assert_eq!(components(3, &edges), [vec![0, 1, 2]]);
        assert_eq!(make_weak(&[0, 1, 2], &edges, alike), [1, 3]);
        let two_and_three = |label| if label == 2 || label == 3 { 10 } else { 1 };
        assert_eq!(make_weak(&[0, 1, 2], &edges, two_and_three), [2, 3]);
        assert_eq!(freed_if_weak(3, &edges, &[2, 3], all_lost), [true; 3]);
        // With one of the two cycles broken, only 0 is no longer held.
        assert_eq!(freed_if_weak(3, &edges, &[2], all_lost), [true, false, false]);
    }

    #[test]
    fn many_labels_are_made_weak_greedily_without_trying_every_set() {
        // Twenty 2-cycles, each through labels of its own: every set of labels up to twenty of forty would be 2^39.
        let edges: Vec<Edge> = (0..20_u32)
            .flat_map(|pair| {
                let (first, second) = (2 * pair as usize, 2 * pair as usize + 1);
                [edge(first, second, 2 * pair), edge(second, first, 2 * pair + 1)]
            })
            .collect();
        let blocks: Vec<usize> = (0..40).collect();
        let odd_first = |label: u32| label % 2;
        let odd: Vec<u32> = (0..20).map(|pair| 2 * pair + 1).collect();
        assert_eq!(make_weak(&blocks, &edges, odd_first), odd);
    }

    #[test]
    fn past_sixteen_labels_the_label_in_the_most_cycles_is_made_weak_first() {
        // A hub and twenty spokes, each out through a label of its own and back through one label for all.
        const BACK: u32 = 100;
        let edges: Vec<Edge> =
            (1..=20_u32).flat_map(|spoke| [edge(0, spoke as usize, spoke), edge(spoke as usize, 0, BACK)]).collect();
        let hub_and_spokes: Vec<usize> = (0..=20).collect();
        let back_last = |label| if label == BACK { 0 } else { 100 };
        assert_eq!(make_weak(&hub_and_spokes, &edges, back_last), [BACK]);
    }

    #[test]
    fn a_lost_block_kept_by_a_cycle_of_its_own_keeps_the_block_it_points_to() {
        // 0 <-> 1 made weak one way; 2 <-> 3 left strong, and 2 points to 1.
        let edges = [edge(0, 1, NEXT), edge(1, 0, PREV), edge(2, 3, 7), edge(3, 2, 8), edge(2, 1, 9)];
        assert_eq!(freed_if_weak(4, &edges, &[PREV], all_lost), [true, false, false, false]);
        assert_eq!(freed_if_weak(4, &edges, &[PREV, 8], all_lost), [true; 4]);
    }

    #[test]
    fn a_block_still_in_use_keeps_the_cycle_it_points_into() {
        // 2 is not lost, and points to 0 of the cycle 0 <-> 1, which nothing else points into.
        let edges = [edge(0, 1, NEXT), edge(1, 0, PREV), edge(2, 0, 9)];
        assert_eq!(freed_if_weak(3, &edges, &[PREV], |block| block != 2), [false; 3]);
        assert_eq!(freed_if_weak(3, &edges, &[PREV], all_lost), [true; 3]);
    }
}
