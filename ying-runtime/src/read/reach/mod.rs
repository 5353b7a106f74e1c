//! Why each block a test retained is still there: a conservative scan of the process at the end of the test, as
//! LeakSanitizer makes at the end of a process, for one test's blocks.
//!
//! The blocks are known exactly (the scope's). The roots are read for words that point into them (`roots`: the
//! writable data of every loaded object, each live thread's thread-local storage and stack), and the pointers
//! between blocks are followed (`graph`), and through the chunks in use of the C library's heap that the roots
//! reach (`heap`: blocks allocated before the test). Memory is read through the
//! kernel, which answers an error for a page that is gone (`memory`), into buffers mapped apart from the heap.
//! Roots are named by their symbols (`names`). Nothing of this runs for a test that retained nothing, and the heap
//! is walked only when the roots do not reach every block directly.

pub(crate) mod cycles;
mod graph;
mod heap;
mod memory;
mod names;
mod roots;

use crate::base::raw::{RawSystem, RawVec};
use graph::Graph;
pub(crate) use graph::{LostGraph, Reached, Root};
use memory::Reader;
use names::Namer;
use roots::Process;
pub(crate) use roots::{Caller, TestThread};
use ying_report::report::Reach;

/// Most blocks whose direct roots are looked for before the heap is walked (see [`Reachability::scan`]).
const DIRECT_FIRST: usize = 512;

/// The blocks of the heap the scan leaves unread, told by the allocation interposer.
static UNREAD_WHERE: std::sync::OnceLock<fn(usize) -> bool> = std::sync::OnceLock::new();

/// From now on, the scans leave unread each block in use of the heap whose start `unread` is true for. The first
/// call decides; the later ones change nothing.
pub(crate) fn leave_unread_where(unread: fn(usize) -> bool) {
    let _ = UNREAD_WHERE.set(unread);
}

/// The word at each of `addresses` (aligned), read through the kernel: `None` where nothing is mapped there (a block
/// another thread freed and the C library unmapped since is no fault).
pub(crate) fn words_at(addresses: impl IntoIterator<Item = usize>) -> Vec<Option<usize>> {
    let mut reader = Reader::new();
    addresses.into_iter().map(|address| reader.word(address)).collect()
}

/// What every scan starts from, alone in the process.
struct Start {
    /// One scan at a time in a process: a scan spills the words it reads onto its thread's stack, where another
    /// thread's scan would find them; a thread waiting here has no such frame live.
    _alone: std::sync::MutexGuard<'static, ()>,
    /// The blocks scanned for, `(start, end)`.
    blocks: RawVec<(usize, usize)>,
    process: Process,
    reader: Reader,
    namer: Namer,
}

impl Start {
    /// The scan for the `blocks` (`(address, size)`), the calling thread being `caller` to the test, once no other
    /// scan runs.
    fn now(blocks: impl IntoIterator<Item = (usize, usize)>, caller: Caller) -> Self {
        static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut ranges = RawVec::new_in(RawSystem);
        ranges.extend(blocks.into_iter().map(|(start, size)| (start, start.saturating_add(size))));
        Self { _alone, blocks: ranges, process: Process::now(caller), reader: Reader::new(), namer: Namer::default() }
    }
}

/// Of the `cells` (the starts of pending async tasks' cells, among the `blocks`, `(address, size)`: a test's live
/// blocks as its body ends), which something that could still wake them reaches, as Go's collector tells a
/// goroutine blocked for good: the scan marks from the roots with the cells gated ([`Graph::gate`]: a waker of a
/// task, its cell's start beside one of the `wakers` vtables, or a pointer into its cell reaches it; the runtime's
/// lists and `JoinHandle`s do not), and a cell reached is followed, for the tasks it can wake in turn. `caller`:
/// what the calling thread is to the test.
pub(crate) fn wakeable(
    blocks: impl IntoIterator<Item = (usize, usize)>,
    cells: &[usize],
    wakers: &[(usize, usize)],
    caller: Caller,
) -> Vec<bool> {
    let Start { _alone, blocks, process, mut reader, mut namer } = Start::now(blocks, caller);
    let mut graph = Graph::new(blocks.iter().copied()).with_heap(process.heap(&mut reader));
    graph.gate(cells.iter().copied(), wakers);
    if let Some(&unread) = UNREAD_WHERE.get() {
        graph.leave_unread_chunks(unread);
    }
    process.mark_direct_roots(&mut graph, &mut reader, &mut namer);
    graph.through_heap(&mut reader);
    cells.iter().map(|&cell| graph.reached(cell).is_some()).collect()
}

/// What reaches each retained block, and names for the roots.
pub(crate) struct Reachability {
    graph: Graph,
    process: Process,
    namer: Namer,
    /// The names given so far.
    named: std::collections::HashMap<Reached, Option<String>>,
}

impl Reachability {
    /// Scans the process for what reaches the `blocks` (`(address, size)`). The blocks at `unread` (blocks of the
    /// heap) are never read: what only they point to is not reached through them. `caller`: what the calling
    /// thread is to the test (see [`Caller`]). `first`: the order in which lost blocks are taken as owners of the
    /// rest (see [`owner`](Self::owner)), by a block's address, lowest first.
    pub(crate) fn scan(
        blocks: impl IntoIterator<Item = (usize, usize)>,
        unread: impl IntoIterator<Item = usize>,
        caller: Caller,
        first: impl Fn(usize) -> u64,
    ) -> Self {
        let Start { _alone, blocks, process, mut reader, mut namer } = Start::now(blocks, caller);
        // The roots that point at the blocks themselves first, without the heap: what they reach takes the same kind
        // and root as when the heap is walked too (a block reached through the heap is one no root reached
        // directly), so a test whose blocks they all reach never walks the heap (tens of MiB in a test that printed
        // a backtrace). Without the heap's copy each block is read on its own: only for a few blocks.
        let direct = (blocks.len() <= DIRECT_FIRST).then(|| {
            let mut graph = Graph::new(blocks.iter().copied());
            process.mark_direct_roots(&mut graph, &mut reader, &mut namer);
            graph
        });
        let graph = match direct.filter(Graph::all_reached) {
            Some(graph) => graph,
            None => {
                let mut graph = Graph::new(blocks.iter().copied()).with_heap(process.heap(&mut reader));
                graph.leave_unread(unread);
                if let Some(&unread) = UNREAD_WHERE.get() {
                    graph.leave_unread_chunks(unread);
                }
                process.mark_direct_roots(&mut graph, &mut reader, &mut namer);
                graph.through_heap(&mut reader);
                if !graph.all_reached() {
                    graph.settle_unreached(&mut reader, first);
                }
                graph
            }
        };
        Self { graph, process, namer, named: std::collections::HashMap::new() }
    }

    /// What reaches the block at `address`.
    pub(crate) fn of(&self, address: usize) -> Reached {
        self.graph.reached(address).unwrap_or(Reached { kind: Reach::Lost, root: Root::None })
    }

    /// The lost block that owns the lost block at `address`, as valgrind groups lost memory: `address` itself for an
    /// owner; `None` for a block something reaches. A block nothing points to owns all it reaches; of a cycle, the
    /// member first in the scan's order owns the rest.
    pub(crate) fn owner(&self, address: usize) -> Option<usize> {
        self.graph.owner(address)
    }

    /// The blocks nothing reaches, with the pointers between them, for the reference cycles among them (see
    /// [`cycles`]).
    pub(crate) fn lost_graph(&self) -> LostGraph {
        self.graph.lost_edges(&mut Reader::new())
    }

    /// The name of what reaches a block (see [`of`](Self::of)), when it has one: a static's path, a thread-local's
    /// with its thread's name (`my_crate::BUF of thread `worker``), a thread's name.
    pub(crate) fn name(&mut self, reached: Reached) -> Option<String> {
        if let Some(name) = self.named.get(&reached) {
            return name.clone();
        }
        let name = match (reached.kind, reached.root) {
            (_, Root::None) => None,
            (Reach::Heap, Root::Thread(index)) => {
                self.process.threads.get(index).map(|thread| format!("the stack of thread `{}`", thread.name))
            }
            (_, Root::Thread(index)) => self.process.threads.get(index).map(|thread| thread.name.clone()),
            // With the thread whose it is: a worker's (`tokio-runtime-worker`) says whose runtime was left running.
            (Reach::ThreadLocal, Root::Word(word)) => {
                let found = self.process.thread_local_at(word).map(|(thread, offset)| (thread.name.clone(), offset));
                found.and_then(|(thread, offset)| {
                    let name = self.namer.thread_local_at(offset?)?;
                    Some(format!("{name} of thread `{thread}`"))
                })
            }
            (_, Root::Word(word)) => self.namer.static_at(word),
        };
        self.named.insert(reached, name.clone());
        name
    }
}

#[cfg(test)]
mod tests {
    use super::roots::{HEAP_WALKS, TestThread};
    use super::{Caller, Reachability};
    use core::hint::black_box;
    use std::cell::Cell;
    use ying_report::report::Reach;

    /// Hides an address from the scan: a word holding `address ^ HIDE` points nowhere.
    const HIDE: usize = 0x5a5a_5a5a_5a5a_5a5a;

    /// A block of `N` bytes at an address nothing ever held before: in a page of its own, mapped where the system
    /// maps nothing by itself (far from the heap and from the mappings it places) and never unmapped, past the
    /// page's start (which a reader of the process's mappings holds), its bytes `fill`; returns its address, hidden.
    /// The tests run side by side with the others of this binary, whose threads' stacks the scan reads whole: a heap
    /// block's address may have been another test's block before, and a page the system maps may lie where a
    /// thread's stack was, both left in words the scan rightly takes for references (a stack reused by the
    /// harness's next thread, the loader's list of cached stacks).
    #[inline(never)]
    fn fresh_block<const N: usize>(fill: u8) -> usize {
        use core::sync::atomic::{AtomicUsize, Ordering};
        /// Where the block starts in its page.
        const OFFSET: usize = 512;
        const { assert!(OFFSET + N <= 4096) };
        /// The next page to map: 48 TiB up, between the heap and the mappings the system places below the stack.
        static NEXT: AtomicUsize = AtomicUsize::new(0x3000_0000_0000);
        let at = NEXT.fetch_add(2 * 4096, Ordering::Relaxed);
        // SAFETY: an anonymous private mapping of one page at `at`, which `MAP_FIXED_NOREPLACE` maps only where
        // nothing is mapped: no existing memory is touched; its bytes are written only once it is mapped.
        let page = unsafe {
            let page = libc::mmap(
                core::ptr::without_provenance_mut(at),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
                -1,
                0,
            );
            assert_eq!(page.addr(), at, "a page at {at:#x}");
            page.cast::<u8>().add(OFFSET).write_bytes(fill, N);
            page
        };
        black_box(page.addr() + OFFSET) ^ HIDE
    }

    /// Scans for the block of `size` bytes at `hidden ^ HIDE` as the runner scans at the end of a leak test's body,
    /// the calling thread's stack no root.
    #[inline(never)]
    fn scan(hidden: usize, size: usize) -> Reachability {
        Reachability::scan([(black_box(hidden) ^ HIDE, size)], [], Caller::RanTheBody, |_| 0)
    }

    /// How the block at `hidden ^ HIDE` is reached, and by what, as `reach` names it.
    fn found(reach: &mut Reachability, hidden: usize) -> (Reach, Option<String>) {
        let reached = reach.of(hidden ^ HIDE);
        (reached.kind, reach.name(reached))
    }

    #[test]
    fn blocks_their_roots_reach_directly_are_found_without_walking_the_heap() {
        let _test = TestThread::enter();
        let held = held_only_by::<610>(&OTHER_WORD);
        let walks = HEAP_WALKS.with(Cell::get);
        let mut reach = scan(held, 610);
        let (kind, by) = found(&mut reach, held);
        assert_eq!(kind, Reach::ThreadLocal, "{by:?}");
        assert_eq!(HEAP_WALKS.with(Cell::get), walks, "the heap was walked");
        free_held(&OTHER_WORD);
    }

    #[test]
    fn a_word_on_the_calling_threads_own_stack_holds_nothing() {
        // The body has returned when the runner scans: a live frame of the caller's holding the address is no
        // root, as the dead frames of the body are not.
        let _test = TestThread::enter();
        let held = black_box(fresh_block::<600>(7) ^ HIDE);
        let mut reach = scan(held ^ HIDE, 600);
        let (kind, by) = found(&mut reach, held ^ HIDE);
        assert_eq!(kind, Reach::Lost, "{by:?}");
        black_box(&held);
    }

    std::thread_local! {
        /// A vector of addresses: the thread-local holds the vector's buffer (a block of the heap from before the
        /// test), which holds the address.
        static HOLDER: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
    }

    /// Keeps the address of a fresh block of 700 bytes in [`HOLDER`]'s vector, in a frame of its own; returns the
    /// address, hidden: no frame of the caller's holds it.
    #[inline(never)]
    fn hold_in_a_vector() -> usize {
        let hidden = fresh_block::<700>(9);
        HOLDER.with(|holder| holder.borrow_mut().push(black_box(hidden ^ HIDE)));
        hidden
    }

    std::thread_local! {
        /// A word of a test's thread-local, as a program's own: a root.
        static PROGRAM_WORD: Cell<usize> = const { Cell::new(0) };
        /// Another, for another test.
        static OTHER_WORD: Cell<usize> = const { Cell::new(0) };
    }

    /// Makes a fresh block of `N` bytes whose address only `word` holds, in a frame of its own; returns it hidden.
    #[inline(never)]
    fn held_only_by<const N: usize>(word: &'static std::thread::LocalKey<Cell<usize>>) -> usize {
        let hidden = fresh_block::<N>(5);
        word.with(|word| word.set(black_box(hidden) ^ HIDE));
        hidden
    }

    #[test]
    fn a_word_in_yings_own_thread_locals_is_no_root_and_one_in_a_programs_is() {
        // A remembered stack walk keeps words it read from the stack: the address of a block the program lost
        // among them does not hold the block.
        let _test = TestThread::enter();
        let hidden = held_only_by::<650>(&super::roots::OWN_WORD);
        let mut reach = scan(hidden, 650);
        let (kind, by) = found(&mut reach, hidden);
        assert_eq!(kind, Reach::Lost, "{by:?}");

        let held = held_only_by::<650>(&PROGRAM_WORD);
        let mut reach = scan(held, 650);
        let reached = reach.of(held ^ HIDE);
        assert_eq!(reached.kind, Reach::ThreadLocal);
        let name = reach.name(reached).unwrap_or_default();
        // With the thread whose it is, the test's, as the system keeps its name (15 bytes).
        assert_eq!(name, "ying::read::reach::tests::PROGRAM_WORD of thread `read::reach::te`");
        free_held(&PROGRAM_WORD);
        free_held(&super::roots::OWN_WORD);
    }

    /// Lets go of the block [`held_only_by`] made: `word` holds it no more (its page stays mapped, so that no
    /// other block ever takes its address).
    fn free_held(word: &'static std::thread::LocalKey<Cell<usize>>) {
        word.with(|word| word.set(0));
    }

    #[test]
    fn a_block_held_through_a_block_from_before_is_found_by_walking_the_heap() {
        // The vector's buffer is no block of the scan's: only the heap's chunks lead from the thread-local to the
        // buffer it holds.
        let _test = TestThread::enter();
        let hidden = hold_in_a_vector();
        let walks = HEAP_WALKS.with(Cell::get);
        let mut reach = scan(hidden, 700);
        let (kind, by) = found(&mut reach, hidden);
        assert_eq!(kind, Reach::Heap, "{by:?}");
        assert_eq!(HEAP_WALKS.with(Cell::get), walks + 1);
        HOLDER.with(|holder| holder.borrow_mut().clear());
    }
}
