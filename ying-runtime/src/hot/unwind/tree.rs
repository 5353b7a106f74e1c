//! A tree of the walks a thread made while it holds a nursery (in a leak test, where every allocation's stack is
//! captured), behind the few walks it remembers in its thread-local sets (`remembered`).
//!
//! A compiler's test allocates from thousands of stacks, many from the same stack pointer (the allocator's frames
//! at the same depth, called from many places): regex's largest test walked 485,000 of its 1.57 million stacks
//! though all but 8,000 of those walks read what an earlier walk from the same place had read. A walk is a function
//! of where it starts and of the values it reads (see `walk_reading`), so the walks from one stack pointer form a
//! tree: they read the same slots until the first value that differs, and then go their own ways. Here each node
//! holds a run of reads (a radix tree), its children start with the same slot and differ in the value found there,
//! and each leaf is a whole walk with the caller's tag for its stack. Recognising a stack costs one load and compare
//! per read and a look at the children where walks part, where walking it costs a rule lookup per frame.
//!
//! The tree lives in the nursery's memory (mapped lazily, zero when fresh, never given back), so only the pages of
//! the nodes and reads in use are touched. Only the thread that holds the nursery uses it, plain loads and stores of
//! atomics; a nursery passed on to another thread hands on its walks, which are still true: a walk is recognised
//! only where every value it read is found again. When the tree is full, or the walker's rules change, or the
//! walks' limits do, it is emptied at once (a new generation: roots of an older one are empty).

use super::walk::{Regs, value_at};
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Roots (starting points) the tree keeps, in an open-addressed table.
const ROOTS: usize = 2048;
/// Slots of the root table tried for one starting point.
const ROOT_PROBES: usize = 8;
/// Nodes, including the unused node 0 ("none").
const NODES: usize = 1 << 15;
/// Reads all nodes hold together.
const READS: usize = 1 << 17;
/// The tag of a leaf not yet given one, and of every inner node.
const NO_TAG: u32 = u32::MAX;

/// The walks from one starting point.
struct Root {
    /// The generation it belongs to: a root of another is empty.
    generation: AtomicU64,
    ip: AtomicUsize,
    sp: AtomicUsize,
    node: AtomicU32,
}

/// A run of reads (`start..start + len` of [`WalkTree::reads`]), and what follows: the walks that part after it
/// (`child`, then each one's `sibling`), or for a leaf its tag.
struct Node {
    /// The slot and value of its first read, compared with the value found there when looking for a child of its
    /// parent (kept here so that the look reads no run).
    first_address: AtomicUsize,
    first_value: AtomicUsize,
    start: AtomicU32,
    len: AtomicU32,
    child: AtomicU32,
    sibling: AtomicU32,
    tag: AtomicU32,
}

/// A slot a walk read and the value it found there.
struct Read {
    address: AtomicUsize,
    value: AtomicUsize,
}

/// One thread's tree of walks (see the module docs). All zeros is an empty tree.
pub(crate) struct WalkTree {
    /// 0 in a fresh tree; bumped each time the tree is emptied.
    generation: AtomicU64,
    /// The rules' generation (`FLUSHES`), the depth limit and the capacity its walks were made with.
    flushes: AtomicU64,
    limit: AtomicUsize,
    capacity: AtomicUsize,
    nodes_used: AtomicU32,
    reads_used: AtomicU32,
    roots: [Root; ROOTS],
    nodes: [Node; NODES],
    reads: [Read; READS],
}

/// Where a leaf was made: the ticket [`remembered`](super::remembered) keeps to give it its tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Leaf {
    generation: u64,
    node: u32,
}

impl WalkTree {
    /// Whether the tree holds walks made with these settings.
    #[inline]
    fn current(&self, flushes: u64, limit: usize, capacity: usize) -> Option<u64> {
        let generation = self.generation.load(Relaxed);
        let same = generation != 0
            && self.flushes.load(Relaxed) == flushes
            && self.limit.load(Relaxed) == limit
            && self.capacity.load(Relaxed) == capacity;
        same.then_some(generation)
    }

    /// The slots of the root table a walk from `regs` may be kept in.
    #[inline]
    fn probes(regs: Regs) -> impl Iterator<Item = usize> {
        let hash = ((regs.sp >> 3) as u64 ^ (regs.ip as u64).rotate_left(32)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let first = (hash >> (64 - ROOTS.trailing_zeros())) as usize;
        (0..ROOT_PROBES).map(move |probe| (first + probe) % ROOTS)
    }

    /// The root node of the walks from `regs`.
    #[inline]
    fn root(&self, regs: Regs, generation: u64) -> Option<u32> {
        Self::probes(regs).map(|slot| &self.roots[slot]).find_map(|root| {
            let found = root.generation.load(Relaxed) == generation
                && root.sp.load(Relaxed) == regs.sp
                && root.ip.load(Relaxed) == regs.ip;
            found.then(|| root.node.load(Relaxed))
        })
    }

    fn node(&self, index: u32) -> Option<&Node> {
        self.nodes.get(index as usize).filter(|_| index != 0)
    }

    fn run(&self, node: &Node) -> Option<&[Read]> {
        let start = node.start.load(Relaxed) as usize;
        self.reads.get(start..start + node.len.load(Relaxed) as usize)
    }

    /// The tag of the walk from `regs` when the tree holds it, telling `seen` each read in order (the walk's
    /// reads, when the answer is a tag).
    #[inline]
    pub(super) fn find(
        &self,
        regs: Regs,
        (flushes, limit, capacity): (u64, usize, usize),
        mut seen: impl FnMut(usize, usize),
    ) -> Option<u32> {
        let generation = self.current(flushes, limit, capacity)?;
        let mut node = self.node(self.root(regs, generation)?)?;
        loop {
            for read in self.run(node)? {
                let (address, value) = (read.address.load(Relaxed), read.value.load(Relaxed));
                // SAFETY: the tree keeps the reads of walks from `regs.ip` and `regs.sp` (its root's), in order,
                // and this one's every earlier read found the value it keeps: this is the slot the walk from `regs`
                // reads next (see `value_at`).
                if unsafe { value_at(address, regs) } != value {
                    return None;
                }
                seen(address, value);
            }
            let first_index = node.child.load(Relaxed);
            let Some(first_child) = self.node(first_index) else {
                let tag = node.tag.load(Relaxed);
                return (tag != NO_TAG).then_some(tag);
            };
            // Every child starts with the slot the walk reads next; they differ in the value found there.
            let address = first_child.first_address.load(Relaxed);
            // SAFETY: as above; the next read of every walk under this node.
            let value = unsafe { value_at(address, regs) };
            let parent = node;
            let (mut previous, mut index) = (None::<&Node>, first_index);
            node = loop {
                let candidate = self.node(index)?;
                if candidate.first_value.load(Relaxed) == value {
                    if let Some(previous) = previous {
                        // The child found goes first: the walks a thread makes again and again are found sooner.
                        previous.sibling.store(candidate.sibling.load(Relaxed), Relaxed);
                        candidate.sibling.store(first_index, Relaxed);
                        parent.child.store(index, Relaxed);
                    }
                    break candidate;
                }
                previous = Some(candidate);
                index = candidate.sibling.load(Relaxed);
            };
        }
    }

    /// Adds the walk from `regs` that read `reads` (address and value each, in order); returns its leaf, to be
    /// given a tag with [`tag`](Self::tag). `None` when the walk cannot be kept.
    pub(super) fn insert(
        &self,
        regs: Regs,
        settings @ (flushes, limit, capacity): (u64, usize, usize),
        reads: &[(usize, usize)],
    ) -> Option<Leaf> {
        if reads.is_empty() || reads.len() > READS / 4 {
            return None;
        }
        let full = self.nodes_used.load(Relaxed) as usize + 2 > NODES
            || self.reads_used.load(Relaxed) as usize + reads.len() > READS;
        let generation = match self.current(flushes, limit, capacity) {
            Some(generation) if !full => generation,
            _ => self.empty(settings),
        };
        let leaf = |node| Some(Leaf { generation, node });
        let Some(root) = self.root(regs, generation) else {
            let slot = Self::probes(regs)
                .find(|&slot| self.roots[slot].generation.load(Relaxed) != generation)
                .unwrap_or_else(|| Self::probes(regs).next().unwrap_or(0));
            let node = self.add(reads, 0, 0)?;
            let root = &self.roots[slot];
            root.ip.store(regs.ip, Relaxed);
            root.sp.store(regs.sp, Relaxed);
            root.node.store(node, Relaxed);
            root.generation.store(generation, Relaxed);
            return leaf(node);
        };
        let mut index = root;
        let mut at = 0;
        loop {
            let node = self.node(index)?;
            let run = self.run(node)?;
            let same = run
                .iter()
                .zip(&reads[at..])
                .take_while(|&(kept, &(address, value))| {
                    kept.address.load(Relaxed) == address && kept.value.load(Relaxed) == value
                })
                .count();
            if same < run.len() {
                if at + same == reads.len() {
                    return None; // ends inside a run: not a walk of this tree
                }
                // The walks part inside this run: its rest becomes a child, beside the new walk's rest.
                let start = node.start.load(Relaxed);
                let rest = self.node_at(
                    start + same as u32,
                    (run.len() - same) as u32,
                    node.child.load(Relaxed),
                    node.tag.load(Relaxed),
                )?;
                let new = self.add(reads, at + same, rest)?;
                node.len.store(same as u32, Relaxed);
                node.tag.store(NO_TAG, Relaxed);
                node.child.store(new, Relaxed);
                return leaf(new);
            }
            at += same;
            let first_child = node.child.load(Relaxed);
            if at == reads.len() {
                // The same walk again: its leaf.
                return if first_child == 0 { leaf(index) } else { None };
            }
            if first_child == 0 {
                return None; // goes on past a whole walk: not a walk of this tree
            }
            let value = reads[at].1;
            let mut child = first_child;
            index = loop {
                let Some(candidate) = self.node(child) else {
                    let new = self.add(reads, at, first_child)?;
                    node.child.store(new, Relaxed);
                    return leaf(new);
                };
                if candidate.first_value.load(Relaxed) == value {
                    break child;
                }
                child = candidate.sibling.load(Relaxed);
            };
        }
    }

    /// Gives the walk of `leaf` its tag, unless the tree was emptied since.
    pub(super) fn tag(&self, leaf: Leaf, tag: u32) {
        if self.generation.load(Relaxed) == leaf.generation
            && let Some(node) = self.node(leaf.node)
        {
            node.tag.store(tag, Relaxed);
        }
    }

    /// Empties the tree for walks made with `settings`; returns the new generation.
    #[cold]
    fn empty(&self, (flushes, limit, capacity): (u64, usize, usize)) -> u64 {
        let generation = self.generation.load(Relaxed) + 1;
        self.generation.store(generation, Relaxed);
        self.flushes.store(flushes, Relaxed);
        self.limit.store(limit, Relaxed);
        self.capacity.store(capacity, Relaxed);
        self.nodes_used.store(1, Relaxed);
        self.reads_used.store(0, Relaxed);
        generation
    }

    /// A new leaf, with no tag yet, holding `reads[from..]`, whose next sibling is `sibling`.
    fn add(&self, reads: &[(usize, usize)], from: usize, sibling: u32) -> Option<u32> {
        let start = self.reads_used.load(Relaxed);
        let rest = &reads[from..];
        let slots = self.reads.get(start as usize..start as usize + rest.len())?;
        for (slot, &(address, value)) in slots.iter().zip(rest) {
            slot.address.store(address, Relaxed);
            slot.value.store(value, Relaxed);
        }
        self.reads_used.store(start + rest.len() as u32, Relaxed);
        let index = self.node_at(start, rest.len() as u32, 0, NO_TAG)?;
        self.nodes[index as usize].sibling.store(sibling, Relaxed);
        Some(index)
    }

    /// A new node for the run `start..start + len` of kept reads, with `child` and `tag`.
    fn node_at(&self, start: u32, len: u32, child: u32, tag: u32) -> Option<u32> {
        let index = self.nodes_used.load(Relaxed);
        let node = self.nodes.get(index as usize)?;
        let first = self.reads.get(start as usize)?;
        node.first_address.store(first.address.load(Relaxed), Relaxed);
        node.first_value.store(first.value.load(Relaxed), Relaxed);
        node.start.store(start, Relaxed);
        node.len.store(len, Relaxed);
        node.child.store(child, Relaxed);
        node.sibling.store(0, Relaxed);
        node.tag.store(tag, Relaxed);
        self.nodes_used.store(index + 1, Relaxed);
        Some(index)
    }
}

#[cfg(test)]
mod tests {
    use super::super::walk::{BP_REGISTER, Regs};
    use super::WalkTree;

    /// An empty tree, as a fresh nursery's.
    fn empty_tree() -> &'static WalkTree {
        // SAFETY: all zeros is an empty tree (every field an atomic integer).
        Box::leak(unsafe { Box::<WalkTree>::new_zeroed().assume_init() })
    }

    /// The reads of a walk over `memory`'s first `len` slots, each read's slot following from the values before it.
    fn reads(memory: &[usize], len: usize) -> Vec<(usize, usize)> {
        memory[..len].iter().map(|value| (core::ptr::from_ref(value) as usize, *value)).collect()
    }

    const START: Regs = Regs { ip: 0x1000, sp: 0x7000, bp: 0 };
    const SETTINGS: (u64, usize, usize) = (1, 0, 128);

    #[test]
    fn walks_that_part_anywhere_are_each_found_by_the_values_they_read() {
        let tree = empty_tree();
        let mut memory = vec![0usize; 6];
        // Four walks from one start: b parts from a at its third read, d from b at its fourth, c from all at its
        // first (and is shorter).
        let walks: [(&[usize], usize, u32); 4] = [
            (&[1, 2, 3, 4, 5], 5, 10),
            (&[1, 2, 7, 8, 9], 5, 11),
            (&[6, 2, 0, 0, 0], 2, 12),
            (&[1, 2, 7, 9, 4], 5, 13),
        ];
        for &(values, len, tag) in &walks {
            memory[..5].copy_from_slice(values);
            assert_eq!(tree.find(START, SETTINGS, |_, _| {}), None, "walk {tag} before it was added");
            let leaf = tree.insert(START, SETTINGS, &reads(&memory, len)).expect("kept");
            assert_eq!(tree.find(START, SETTINGS, |_, _| {}), None, "walk {tag} before it has a tag");
            tree.tag(leaf, tag);
        }
        for &(values, len, tag) in walks.iter().rev() {
            memory[..5].copy_from_slice(values);
            let mut seen = Vec::new();
            assert_eq!(tree.find(START, SETTINGS, |address, value| seen.push((address, value))), Some(tag));
            assert_eq!(seen, reads(&memory, len), "walk {tag}: every read, in order");
            // The same walk added again is the same leaf.
            let again = tree.insert(START, SETTINGS, &reads(&memory, len)).expect("kept");
            tree.tag(again, tag);
            assert_eq!(tree.find(START, SETTINGS, |_, _| {}), Some(tag));
        }
        // A walk that parts from a at its last read, one from elsewhere, one with other settings: none.
        memory[..5].copy_from_slice(&[1, 2, 3, 4, 6]);
        assert_eq!(tree.find(START, SETTINGS, |_, _| {}), None);
        memory[..5].copy_from_slice(&[1, 2, 3, 4, 5]);
        assert_eq!(tree.find(Regs { sp: START.sp + 16, ..START }, SETTINGS, |_, _| {}), None);
        assert_eq!(tree.find(Regs { ip: START.ip + 1, ..START }, SETTINGS, |_, _| {}), None);
        assert_eq!(tree.find(START, (2, 0, 128), |_, _| {}), None);
        assert_eq!(tree.find(START, SETTINGS, |_, _| {}), Some(10));
    }

    #[test]
    fn a_walk_that_read_the_starting_frame_pointer_is_found_only_from_the_same_one() {
        let tree = empty_tree();
        let memory = [3usize, 4];
        let walk = [(BP_REGISTER, 0x5000), (core::ptr::from_ref(&memory[0]) as usize, 3)];
        let start = Regs { bp: 0x5000, ..START };
        let leaf = tree.insert(start, SETTINGS, &walk).expect("kept");
        tree.tag(leaf, 7);
        assert_eq!(tree.find(start, SETTINGS, |_, _| {}), Some(7));
        assert_eq!(tree.find(Regs { bp: 0x5008, ..start }, SETTINGS, |_, _| {}), None);
    }

    #[test]
    fn a_full_tree_is_emptied_and_a_tag_for_a_walk_it_held_is_dropped() {
        let tree = empty_tree();
        let memory: Vec<usize> = (1..=48).collect();
        let walk = reads(&memory, 48);
        // Walks from as many starts as fill the reads: the next one empties the tree first.
        let starts = super::READS / 48;
        let first = tree.insert(START, SETTINGS, &walk).expect("kept");
        for start in 1..starts {
            tree.insert(Regs { sp: START.sp + 16 * start, ..START }, SETTINGS, &walk).expect("kept");
        }
        let last = Regs { sp: START.sp + 16 * starts, ..START };
        let leaf = tree.insert(last, SETTINGS, &walk).expect("kept after emptying");
        tree.tag(first, 1);
        tree.tag(leaf, 2);
        assert_eq!(tree.find(START, SETTINGS, |_, _| {}), None);
        assert_eq!(tree.find(last, SETTINGS, |_, _| {}), Some(2));
    }
}
