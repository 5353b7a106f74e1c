//! The retained blocks as a graph: a word that points into a block is an edge to it. Roots are marked in the order
//! of their kinds, and each block takes the first kind (and root) that reaches it, passed on to every block it
//! reaches in turn; what no root reaches is lost, or in a cycle of blocks that nothing else reaches.

use super::heap::Chunks;
use super::memory::Reader;
use crate::base::raw::{RawSystem, RawVec};
use ying_report::report::Reach;

/// The size of a word the scan reads.
const WORD: usize = size_of::<usize>();

/// Where a block is reached from, named once the scan is over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Root {
    /// No root: lost, a cycle, or the heap with no static known.
    None,
    /// The address of the root word: in a static, or in a thread's thread-local storage.
    Word(usize),
    /// The thread whose stack holds the root word (its index in the scan's threads).
    Thread(usize),
}

/// What reaches a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Reached {
    pub(crate) kind: Reach,
    pub(crate) root: Root,
}

/// The blocks nothing reaches, and the pointers between them ([`Graph::lost_edges`]).
pub(crate) struct LostGraph {
    /// `(start, end)` of each block, by address.
    pub(crate) blocks: Vec<(usize, usize)>,
    /// `(from, offset in from, to)`, by index in `blocks`.
    pub(crate) edges: Vec<(usize, usize, usize)>,
}

/// The retained blocks, sorted by address, and what reaches each.
pub(super) struct Graph {
    /// `(start, end)` of each block, sorted by start.
    blocks: RawVec<(usize, usize)>,
    reached: RawVec<Option<Reached>>,
    /// Blocks reached whose words are still to follow.
    pending: RawVec<usize>,
    /// The blocks in use of the C library's heaps (the test's own among them, which are looked up first).
    chunks: Option<Chunks>,
    /// Chunks reached so far.
    visited: RawVec<bool>,
    /// Of each block no root reaches, the index of the block that owns it (see [`Graph::settle_unreached`]).
    owner: RawVec<usize>,
    /// Chunks reached whose words are still to read, with what reaches the test's blocks through them.
    through: RawVec<(usize, Reached)>,
    /// The words of one read that point somewhere the scan follows, kept from read to read (a mapping each).
    hits: RawVec<(usize, usize)>,
    /// The gated blocks (see [`gate`](Self::gate)), by index, when any is.
    gated: RawVec<bool>,
    /// The vtables whose address beside a gated block's start makes the pair a waker of it.
    wakers: RawVec<(usize, usize)>,
    /// The addresses of every block and chunk lie in `[low, high)`: a word outside is no pointer the scan follows,
    /// told without a search (most words of a program's memory are not).
    low: usize,
    high: usize,
}

impl Graph {
    /// The graph of the blocks at `(start, end)`, unreached.
    pub(super) fn new(blocks: impl IntoIterator<Item = (usize, usize)>) -> Self {
        let mut sorted = RawVec::new_in(RawSystem);
        sorted.extend(blocks);
        sorted.sort_unstable();
        let mut reached = RawVec::with_capacity_in(sorted.len(), RawSystem);
        reached.resize(sorted.len(), None);
        Self {
            blocks: sorted,
            reached,
            pending: RawVec::new_in(RawSystem),
            chunks: None,
            visited: RawVec::new_in(RawSystem),
            owner: RawVec::new_in(RawSystem),
            through: RawVec::new_in(RawSystem),
            hits: RawVec::new_in(RawSystem),
            gated: RawVec::new_in(RawSystem),
            wakers: RawVec::new_in(RawSystem),
            low: 0,
            high: 0,
        }
        .bounded()
    }

    /// Sets `[low, high)` from the blocks and the chunks.
    fn bounded(mut self) -> Self {
        let blocks = self.blocks.first().map(|first| first.0).zip(self.blocks.iter().map(|block| block.1).max());
        let chunks = self.chunks.as_ref().and_then(Chunks::bounds);
        let (low, high) = [blocks, chunks]
            .into_iter()
            .flatten()
            .fold((usize::MAX, 0), |(low, high), (start, end)| (low.min(start), high.max(end.max(start + 1))));
        (self.low, self.high) = (low, high);
        self
    }

    /// The words of `[start, end)` that point into a block, or into a chunk not reached yet, with their addresses.
    fn hits_in(&mut self, start: usize, end: usize, reader: &mut Reader) -> RawVec<(usize, usize)> {
        let mut hits = core::mem::replace(&mut self.hits, RawVec::new_in(RawSystem));
        hits.clear();
        let (low, high) = (self.low, self.high);
        reader.words(start, end, |address, word| {
            if (low..high).contains(&word) && (self.find(word).is_some() || self.unvisited_chunk(word).is_some()) {
                hits.push((address, word));
            }
        });
        hits
    }

    /// Roots reach the test's blocks through these chunks of the heap too (see [`through_heap`](Self::through_heap)).
    pub(super) fn with_heap(mut self, chunks: Chunks) -> Self {
        self.visited = RawVec::with_capacity_in(chunks.len(), RawSystem);
        self.visited.resize(chunks.len(), false);
        self.chunks = Some(chunks);
        self.bounded()
    }

    /// The chunks of the heap at `addresses` are never read (as if reached already).
    pub(super) fn leave_unread(&mut self, addresses: impl IntoIterator<Item = usize>) {
        let Some(chunks) = &self.chunks else { return };
        for address in addresses {
            if let Some(chunk) = chunks.find(address) {
                self.visited[chunk] = true;
            }
        }
    }

    /// The chunks of the heap whose start `unread` is true for are never read (as if reached already).
    pub(super) fn leave_unread_chunks(&mut self, unread: fn(usize) -> bool) {
        let Some(chunks) = &self.chunks else { return };
        for chunk in 0..chunks.len() {
            if unread(chunks.range(chunk).0) {
                self.visited[chunk] = true;
            }
        }
    }

    /// Gates the blocks starting at `starts` (the cells of pending async tasks): a word reaches one only when it
    /// could wake the task: a waker (the block's start beside the address of one of the `wakers` vtables, `(start,
    /// end)`) or a pointer into the block past its start (a timer's entry, a waiter's node in the task's future). A
    /// pointer to the start alone (the runtime's lists of its tasks, a `JoinHandle`) does not. A gated block reached
    /// is followed as any block: what it holds may wake others. On a thread's stack only a waker reaches one.
    pub(super) fn gate(&mut self, starts: impl IntoIterator<Item = usize>, wakers: &[(usize, usize)]) {
        self.gated.resize(self.blocks.len(), false);
        for start in starts {
            if let Ok(index) = self.blocks.binary_search_by_key(&start, |&(start, _)| start) {
                self.gated[index] = true;
            }
        }
        self.wakers.extend(wakers.iter().copied());
    }

    /// Whether the word `word` at `address`, pointing into block `index`, reaches it (see [`gate`](Self::gate)).
    /// `on_stack`: the word lies on a thread's stack, where a pointer into a task's cell is a dead frame's (a live
    /// one is the task's own poll, which runs it) and only a waker counts.
    fn admits(&self, index: usize, address: usize, word: usize, on_stack: bool, reader: &mut Reader) -> bool {
        if !self.gated.get(index).copied().unwrap_or(false) {
            return true;
        }
        if word != self.blocks[index].0 {
            return !on_stack;
        }
        let is_waker = |word: Option<usize>| {
            word.is_some_and(|word| self.wakers.iter().any(|&(start, end)| (start..end).contains(&word)))
        };
        is_waker(address.checked_add(WORD).and_then(|next| reader.word(next)))
            || is_waker(address.checked_sub(WORD).and_then(|before| reader.word(before)))
    }

    /// The chunk of the heap (not a block of the test's) that `word` points into, when not reached yet.
    fn unvisited_chunk(&self, word: usize) -> Option<usize> {
        let chunk = self.chunks.as_ref()?.find(word)?;
        (!self.visited[chunk]).then_some(chunk)
    }

    /// Chunk `chunk` is reached: what it points to is reached through the heap, from `reached`'s root.
    fn visit(&mut self, chunk: usize, reached: Reached) {
        if !self.visited[chunk] {
            self.visited[chunk] = true;
            self.through.push((chunk, Reached { kind: Reach::Heap, root: reached.root }));
        }
    }

    /// Follows the chunks the roots reached, and the chunks they point to in turn: the test's blocks found so are
    /// reached through the heap, from the root the chain started at.
    pub(super) fn through_heap(&mut self, reader: &mut Reader) {
        while let Some((chunk, reached)) = self.through.pop() {
            let Some((start, end)) = self.chunks.as_ref().map(|chunks| chunks.range(chunk)) else { return };
            let hits = self.hits_in(start, end, reader);
            for &(address, word) in &hits {
                if self.find(word).is_some() {
                    self.root(address, word, reached, reader);
                } else if let Some(next) = self.unvisited_chunk(word) {
                    self.visit(next, reached);
                }
            }
            self.hits = hits;
        }
    }

    /// The block `address` points into, if any.
    fn find(&self, address: usize) -> Option<usize> {
        block_at(&self.blocks, address)
    }

    /// What reaches the block at `start`, once the scan is over.
    pub(super) fn reached(&self, start: usize) -> Option<Reached> {
        let index = self.blocks.binary_search_by_key(&start, |&(start, _)| start).ok()?;
        self.reached[index]
    }

    /// Whether every block has been reached.
    pub(super) fn all_reached(&self) -> bool {
        self.reached.iter().all(Option::is_some)
    }

    /// A root word, `word` at `address`: when it points into a block not reached yet (and reaches it, see
    /// [`gate`](Self::gate)), that block and all it reaches are `reached`.
    pub(super) fn root(&mut self, address: usize, word: usize, reached: Reached, reader: &mut Reader) {
        if let Some(index) = self.find(word)
            && self.reached[index].is_none()
            && self.admits(index, address, word, reached.kind == Reach::ThreadStack, reader)
        {
            self.reached[index] = Some(reached);
            self.pending.push(index);
            self.follow(reached, reader);
        }
    }

    /// The words of `[start, end)` as roots, the blocks' own words left out (those are edges, not roots), each
    /// reaching what `reached(address of the word)` says.
    pub(super) fn roots_in(
        &mut self,
        start: usize,
        end: usize,
        reader: &mut Reader,
        mut reached: impl FnMut(usize) -> Reached,
    ) {
        // The pieces of the range between blocks.
        let mut at = start;
        let mut next = self.blocks.partition_point(|&(_, block_end)| block_end <= start);
        while at < end {
            let (piece_end, skip_to) = match self.blocks.get(next) {
                Some(&(block_start, block_end)) if block_start < end => (block_start.max(at), block_end),
                _ => (end, end),
            };
            if at < piece_end {
                let hits = self.hits_in(at, piece_end, reader);
                for &(address, word) in &hits {
                    match self.find(word) {
                        Some(_) => self.root(address, word, reached(address), reader),
                        None => {
                            let reached = reached(address);
                            if let Some(chunk) = self.unvisited_chunk(word).filter(|_| leads_through_heap(reached)) {
                                self.visit(chunk, reached);
                            }
                        }
                    }
                }
                self.hits = hits;
            }
            at = skip_to.max(at);
            next += 1;
        }
    }

    /// Passes `reached` on to every block the pending ones point to (and, while roots are marked, to the chunks of
    /// the heap they point to, for [`through_heap`](Self::through_heap)).
    fn follow(&mut self, reached: Reached, reader: &mut Reader) {
        while let Some(index) = self.pending.pop() {
            let (start, end) = self.blocks[index];
            let hits = self.hits_in(start, end, reader);
            for &(address, word) in &hits {
                match self.find(word) {
                    Some(found)
                        if self.reached[found].is_none() && self.admits(found, address, word, false, reader) =>
                    {
                        self.reached[found] = Some(reached);
                        self.pending.push(found);
                    }
                    Some(_) => {}
                    None if leads_through_heap(reached) => {
                        if let Some(chunk) = self.unvisited_chunk(word) {
                            self.visit(chunk, reached);
                        }
                    }
                    None => {}
                }
            }
            self.hits = hits;
        }
    }

    /// What no root reached, grouped as valgrind groups lost memory. `Lost` for the blocks no other unreached block
    /// points to, `Owned` for everything they reach; `Cycle` for the rest (reached only from a cycle among
    /// unreached blocks).
    /// Each such block gets an owner ([`owner`](Self::owner)): a block nothing points to owns what it reaches; of a
    /// cycle, the member first in `first`'s order (then by address) owns the rest and what hangs from them, and a
    /// cycle another cycle reaches joins that one's owner.
    pub(super) fn settle_unreached(&mut self, reader: &mut Reader, first: impl Fn(usize) -> u64) {
        let count = self.blocks.len();
        let mut pointed_to = RawVec::with_capacity_in(count, RawSystem);
        pointed_to.resize(count, false);
        for index in 0..count {
            if self.reached[index].is_some() {
                continue;
            }
            let (start, end) = self.blocks[index];
            let Self { blocks, reached, .. } = &*self;
            reader.words(start, end, |_, word| {
                if let Some(found) = block_at(blocks, word)
                    && found != index
                    && reached[found].is_none()
                {
                    pointed_to[found] = true;
                }
            });
        }
        // Owners are taken in this order: blocks nothing points to, then the rest, each by `first` and address.
        let mut candidates = RawVec::new_in(RawSystem);
        candidates.extend((0..count).filter(|&index| self.reached[index].is_none()));
        candidates.sort_unstable_by_key(|&index| (pointed_to[index], first(self.blocks[index].0), index));
        self.owner.clear();
        self.owner.resize(count, NO_OWNER);
        let mut pending = RawVec::new_in(RawSystem);
        // The candidate whose walk has seen each block.
        let mut seen = RawVec::with_capacity_in(count, RawSystem);
        seen.resize(count, NO_OWNER);
        let cycle = Reached { kind: Reach::Cycle, root: Root::None };
        for &candidate in &candidates {
            if self.reached[candidate].is_some() {
                continue;
            }
            let kind = if pointed_to[candidate] { Reach::Cycle } else { Reach::Lost };
            self.reached[candidate] = Some(Reached { kind, root: Root::None });
            // What a block nothing points to reaches, it owns; what a cycle reaches hangs from the cycle.
            let reached = Reached { kind: if kind == Reach::Lost { Reach::Owned } else { kind }, root: Root::None };
            self.owner[candidate] = candidate;
            seen[candidate] = candidate;
            pending.push(candidate);
            while let Some(index) = pending.pop() {
                let (start, end) = self.blocks[index];
                let Self { blocks, reached: all, owner, .. } = &mut *self;
                reader.words(start, end, |_, word| {
                    let Some(found) = block_at(blocks, word) else { return };
                    if seen[found] == candidate {
                        return;
                    }
                    if all[found].is_none() {
                        all[found] = Some(reached);
                        owner[found] = candidate;
                    } else if all[found] == Some(cycle) && owner[found] != NO_OWNER {
                        // Another cycle's blocks, walked through: when the walk meets that cycle's owner, the
                        // cycle hangs from this one, and joins it.
                        if owner[found] == found {
                            owner[found] = candidate;
                        }
                    } else {
                        return;
                    }
                    seen[found] = candidate;
                    pending.push(found);
                });
            }
        }
    }

    /// The blocks no root reached ([`Reach::is_lost`]), `(start, end)`, with the pointers between them: `(from,
    /// offset in from, to)`, by index among those blocks, in the order of their addresses. A block's pointer into
    /// itself counts only at its start (an `Rc` of its own `RcInner`), not into its middle (a value pointing at its
    /// own field).
    pub(super) fn lost_edges(&self, reader: &mut Reader) -> LostGraph {
        let lost = |reached: &Option<Reached>| reached.is_some_and(|reached| reached.kind.is_lost());
        // Each block's index among the lost ones.
        let mut index_of = vec![NO_OWNER; self.blocks.len()];
        let mut blocks = Vec::new();
        for (index, reached) in self.reached.iter().enumerate() {
            if lost(reached) {
                index_of[index] = blocks.len();
                blocks.push(self.blocks[index]);
            }
        }
        let mut edges = Vec::new();
        for (index, &(start, end)) in self.blocks.iter().enumerate() {
            let from = index_of[index];
            if from == NO_OWNER {
                continue;
            }
            reader.words(start, end, |address, word| {
                let Some(found) = block_at(&self.blocks, word) else { return };
                let to = index_of[found];
                if to != NO_OWNER && (found != index || word == start) {
                    edges.push((from, address - start, to));
                }
            });
        }
        LostGraph { blocks, edges }
    }

    /// The block that owns the lost block at `start` (see [`settle_unreached`](Self::settle_unreached)): its start,
    /// which is `start` for an owner; `None` for a block something reaches.
    pub(super) fn owner(&self, start: usize) -> Option<usize> {
        let mut index = self.blocks.binary_search_by_key(&start, |&(start, _)| start).ok()?;
        // An owner another cycle took has that cycle's owner as its own: a few steps at most.
        while let Some(&next) = self.owner.get(index).filter(|&&next| next != NO_OWNER && next != index) {
            index = next;
        }
        (self.owner.get(index) == Some(&index)).then(|| self.blocks[index].0)
    }
}

/// No owner: the block is reached, or the scan did not settle.
const NO_OWNER: usize = usize::MAX;

/// Whether what `reached` reaches leads on through the heap's chunks: from statics and thread-locals. A thread's
/// stack reaches the test's blocks directly only: its frames' slots not written yet hold stale words, and the
/// chunks those point to (the harness's, a runtime's) hold more, which made a lost block read as held.
fn leads_through_heap(reached: Reached) -> bool {
    matches!(reached.kind, Reach::Static | Reach::ThreadLocal | Reach::Heap)
}

/// The block of `blocks` (sorted `(start, end)`) that `word` points into, if any.
///
/// A word 16-aligned from the block's start in its last 16 bytes is not taken for a pointer into it: the C library
/// keeps the header of the next chunk there (a block of 24 bytes takes a chunk of 32, the next chunk's header at
/// 16), and its lists of free chunks point at such headers.
fn block_at(blocks: &[(usize, usize)], word: usize) -> Option<usize> {
    let index = blocks.partition_point(|&(start, _)| start <= word).checked_sub(1)?;
    let (start, end) = blocks[index];
    if word == start {
        return Some(index);
    }
    let next_header = (word - start).is_multiple_of(16) && word.saturating_add(16) > end;
    (word < end && !next_header).then_some(index)
}

#[cfg(test)]
mod tests {
    use super::{Graph, Reach, Reached, Root};
    use crate::read::reach::memory::Reader;

    /// Blocks of eight words each, in one array the test owns: block `i` is words `8 * i ..`.
    struct Heap([usize; 64]);

    impl Heap {
        fn block(&self, index: usize) -> (usize, usize) {
            let start = self.0.as_ptr() as usize + index * 64;
            (start, start + 64)
        }

        fn point(&mut self, from: usize, word: usize, to: usize) {
            // An interior pointer counts: a hash table's pointer to its control bytes points into the middle.
            self.0[from * 8 + word] = self.block(to).0 + 8;
        }
    }

    #[test]
    fn a_gated_block_is_reached_by_a_waker_or_a_pointer_into_it_and_then_wakes_what_it_holds() {
        // A waker's vtable: the word beside a gated block's start that makes the pair a waker.
        static VTABLE: [usize; 4] = [1, 2, 3, 4];
        let vtable = (VTABLE.as_ptr() as usize, VTABLE.as_ptr() as usize + size_of_val(&VTABLE));
        let mut heap = Box::new(Heap([0; 64]));
        let start = |heap: &Heap, index: usize| heap.block(index).0;
        // 0, a root's: a waker of 1 (start, vtable) and the bare start of 2 (a handle, a runtime's list).
        heap.0[0] = start(&heap, 1);
        heap.0[1] = vtable.0;
        heap.0[3] = start(&heap, 2);
        // 1: a waker of 3, vtable first.
        heap.0[8 + 2] = vtable.0 + 8;
        heap.0[8 + 3] = start(&heap, 3);
        // 2 (never woken): points to 4, an ordinary block, and holds a waker of 7.
        heap.0[16] = start(&heap, 4);
        heap.0[16 + 4] = start(&heap, 7);
        heap.0[16 + 5] = vtable.0;
        // 5, a root's: a pointer into 6 past its start (a timer's entry in the task's future).
        heap.0[40] = start(&heap, 6) + 16;
        let mut graph = Graph::new((0..8).map(|index| heap.block(index)));
        graph.gate([1, 2, 3, 6, 7].map(|index| start(&heap, index)), &[vtable]);
        let mut reader = Reader::new();
        let root = Reached { kind: Reach::Static, root: Root::Word(0x1000) };
        graph.root(0, start(&heap, 0), root, &mut reader);
        graph.root(0, start(&heap, 5), root, &mut reader);
        let reached: Vec<bool> = (0..8).map(|index| graph.reached(start(&heap, index)).is_some()).collect();
        assert_eq!(reached, [true, true, false, true, false, true, true, false]);

        // On a thread's stack a pointer into a gated block is a dead frame's: only a waker reaches it.
        let on_stack = Reached { kind: Reach::ThreadStack, root: Root::Thread(0) };
        let words = [start(&heap, 2) + 16, start(&heap, 2), vtable.0];
        let at = |index: usize| core::ptr::from_ref(&words[index]).addr();
        graph.root(at(0), words[0], on_stack, &mut reader);
        assert!(graph.reached(start(&heap, 2)).is_none());
        graph.root(at(1), words[1], on_stack, &mut reader);
        assert!(graph.reached(start(&heap, 2)).is_some());
        // Now woken, 2 reaches what it holds: 4, and 7 through its waker.
        assert!(graph.reached(start(&heap, 4)).is_some() && graph.reached(start(&heap, 7)).is_some());
    }

    #[test]
    fn blocks_take_the_first_root_that_reaches_them_and_the_rest_are_lost_owned_or_in_a_cycle() {
        let mut heap = Box::new(Heap([0; 64]));
        // 0 -> 1 (reached from a root); 2 -> 3 (2 lost, 3 owned: reached only through it); 4 <-> 5, 5 -> 6 (a cycle
        // and what hangs from it); 7 points to itself only (lost).
        heap.point(0, 3, 1);
        heap.point(2, 0, 3);
        heap.point(4, 7, 5);
        heap.point(5, 1, 4);
        heap.point(5, 2, 6);
        heap.point(7, 0, 7);
        let mut graph = Graph::new((0..8).map(|index| heap.block(index)));
        let mut reader = Reader::new();
        let root = Reached { kind: Reach::Static, root: Root::Word(0x1000) };
        graph.root(0, heap.block(0).0, root, &mut reader);
        graph.root(0, heap.block(1).0, Reached { kind: Reach::Heap, root: Root::None }, &mut reader);
        assert!(!graph.all_reached());
        graph.settle_unreached(&mut reader, |_| 0);
        let kinds: Vec<Reach> = (0..8).map(|index| graph.reached(heap.block(index).0).unwrap().kind).collect();
        use Reach::{Cycle, Lost, Owned, Static};
        assert_eq!(kinds, [Static, Static, Lost, Owned, Cycle, Cycle, Cycle, Lost]);
        assert_eq!(graph.reached(heap.block(1).0).unwrap().root, Root::Word(0x1000));
        // As valgrind groups them: 2 owns 3; 4, first of the cycle in address order, owns 5 and 6; 7 owns itself.
        let owners: Vec<Option<usize>> = (0..8).map(|index| graph.owner(heap.block(index).0)).collect();
        let at = |index: usize| Some(heap.block(index).0);
        assert_eq!(owners, [None, None, at(2), at(2), at(4), at(4), at(4), at(7)]);
    }

    #[test]
    fn the_member_of_a_cycle_first_in_the_given_order_owns_it_and_a_cycle_another_reaches_joins_that_one() {
        let mut heap = Box::new(Heap([0; 64]));
        // 0 <-> 1, 1 -> 2 <-> 3: two cycles, the second hanging from the first.
        heap.point(0, 0, 1);
        heap.point(1, 0, 0);
        heap.point(1, 1, 2);
        heap.point(2, 0, 3);
        heap.point(3, 0, 2);
        let blocks: Vec<(usize, usize)> = (0..4).map(|index| heap.block(index)).collect();
        // Taken first: 3, then 1 (the order a runner gives by the blocks' stacks).
        let rank = |start: usize| match blocks.iter().position(|&(block, _)| block == start) {
            Some(3) => 0,
            Some(1) => 1,
            _ => 2,
        };
        let mut graph = Graph::new(blocks.iter().copied());
        let mut reader = Reader::new();
        graph.settle_unreached(&mut reader, rank);
        let owners: Vec<Option<usize>> = (0..4).map(|index| graph.owner(heap.block(index).0)).collect();
        assert_eq!(owners, [Some(heap.block(1).0); 4], "3's cycle joins the one that reaches it, which 1 owns");
        let kinds: Vec<Reach> = (0..4).map(|index| graph.reached(heap.block(index).0).unwrap().kind).collect();
        assert_eq!(kinds, [Reach::Cycle; 4]);
    }

    #[test]
    fn words_of_a_range_are_roots_and_the_blocks_inside_it_are_not() {
        let mut heap = Box::new(Heap([0; 64]));
        heap.point(0, 0, 2);
        heap.point(1, 0, 3);
        let blocks = [heap.block(1), heap.block(2), heap.block(3)];
        let mut graph = Graph::new(blocks);
        let mut reader = Reader::new();
        // Blocks 0 (not retained) and 1 lie in the range; only 0's word is a root.
        let (start, end) = (heap.block(0).0, heap.block(2).0);
        graph.roots_in(start, end, &mut reader, |address| Reached { kind: Reach::Heap, root: Root::Word(address) });
        graph.settle_unreached(&mut reader, |_| 0);
        assert_eq!(graph.reached(heap.block(2).0).unwrap(), Reached { kind: Reach::Heap, root: Root::Word(start) });
        assert_eq!(graph.reached(heap.block(1).0).unwrap().kind, Reach::Lost);
        assert_eq!(graph.reached(heap.block(3).0).unwrap().kind, Reach::Owned, "only the lost block 1 points to it");
    }
}
