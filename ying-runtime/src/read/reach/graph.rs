//! The retained blocks as a graph: a word that points into a block is an edge to it. Roots are marked in the order
//! of their kinds, and each block takes the first kind (and root) that reaches it, passed on to every block it
//! reaches in turn; what no root reaches is lost, or in a cycle of blocks that nothing else reaches.

use super::heap::Chunks;
use super::memory::Reader;
use crate::base::raw::{RawSystem, RawVec};
use ying_report::report::Reach;

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
    /// Chunks reached whose words are still to read, with what reaches the test's blocks through them.
    through: RawVec<(usize, Reached)>,
    /// The words of one read that point somewhere the scan follows, kept from read to read (a mapping each).
    hits: RawVec<(usize, usize)>,
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
            through: RawVec::new_in(RawSystem),
            hits: RawVec::new_in(RawSystem),
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
            for &(_, word) in &hits {
                if self.find(word).is_some() {
                    self.root(word, reached, reader);
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

    /// A root word: when it points into a block not reached yet, that block and all it reaches are `reached`.
    pub(super) fn root(&mut self, word: usize, reached: Reached, reader: &mut Reader) {
        if let Some(index) = self.find(word)
            && self.reached[index].is_none()
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
                        Some(_) => self.root(word, reached(address), reader),
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
            for &(_, word) in &hits {
                match self.find(word) {
                    Some(found) if self.reached[found].is_none() => {
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

    /// What no root reached: `Lost` for the blocks no other unreached block points to and everything they reach;
    /// `Cycle` for the rest (reached only from a cycle among unreached blocks).
    pub(super) fn settle_unreached(&mut self, reader: &mut Reader) {
        let mut pointed_to = RawVec::with_capacity_in(self.blocks.len(), RawSystem);
        pointed_to.resize(self.blocks.len(), false);
        for index in 0..self.blocks.len() {
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
        let lost = Reached { kind: Reach::Lost, root: Root::None };
        for index in 0..self.blocks.len() {
            if self.reached[index].is_none() && !pointed_to[index] {
                self.reached[index] = Some(lost);
                self.pending.push(index);
                self.follow(lost, reader);
            }
        }
        for reached in self.reached.iter_mut().filter(|reached| reached.is_none()) {
            *reached = Some(Reached { kind: Reach::Cycle, root: Root::None });
        }
    }
}

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
    fn blocks_take_the_first_root_that_reaches_them_and_the_rest_are_lost_or_in_a_cycle() {
        let mut heap = Box::new(Heap([0; 64]));
        // 0 -> 1 (reached from a root); 2 -> 3 (2 lost, 3 reached only through it); 4 <-> 5, 5 -> 6 (a cycle and
        // what hangs from it); 7 points to itself only (lost).
        heap.point(0, 3, 1);
        heap.point(2, 0, 3);
        heap.point(4, 7, 5);
        heap.point(5, 1, 4);
        heap.point(5, 2, 6);
        heap.point(7, 0, 7);
        let mut graph = Graph::new((0..8).map(|index| heap.block(index)));
        let mut reader = Reader::new();
        let root = Reached { kind: Reach::Static, root: Root::Word(0x1000) };
        graph.root(heap.block(0).0, root, &mut reader);
        graph.root(heap.block(1).0, Reached { kind: Reach::Heap, root: Root::None }, &mut reader);
        assert!(!graph.all_reached());
        graph.settle_unreached(&mut reader);
        let kinds: Vec<Reach> = (0..8).map(|index| graph.reached(heap.block(index).0).unwrap().kind).collect();
        use Reach::{Cycle, Lost, Static};
        assert_eq!(kinds, [Static, Static, Lost, Lost, Cycle, Cycle, Cycle, Lost]);
        assert_eq!(graph.reached(heap.block(1).0).unwrap().root, Root::Word(0x1000));
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
        graph.settle_unreached(&mut reader);
        assert_eq!(graph.reached(heap.block(2).0).unwrap(), Reached { kind: Reach::Heap, root: Root::Word(start) });
        assert_eq!(graph.reached(heap.block(1).0).unwrap().kind, Reach::Lost);
        assert_eq!(graph.reached(heap.block(3).0).unwrap().kind, Reach::Lost);
    }
}
