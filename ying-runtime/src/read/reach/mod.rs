//! Why each block a test retained is still there: a conservative scan of the process at the end of the test, as
//! LeakSanitizer makes at the end of a process, for one test's blocks.
//!
//! The blocks are known exactly (the scope's). The roots are read for words that point into them (`roots`: the
//! writable data of every loaded object, each live thread's thread-local storage and stack), and the pointers
//! between blocks are followed (`graph`), and through the chunks in use of the C library's heap that the roots
//! reach (`heap`: blocks allocated before the test). Memory is read through the
//! kernel, which answers an error for a page that is gone (`memory`), into buffers mapped apart from the heap.
//! Roots are named by their symbols (`names`). Nothing of this runs for a test that retained nothing.

mod graph;
mod heap;
mod memory;
mod names;
mod roots;

use graph::Graph;
pub(crate) use graph::{Reached, Root};
use memory::Reader;
use names::Namer;
use roots::Process;
pub(crate) use roots::TestThread;
use ying_report::report::Reach;

/// The blocks of the heap the scan leaves unread, told by the allocation interposer.
static UNREAD_WHERE: std::sync::OnceLock<fn(usize) -> bool> = std::sync::OnceLock::new();

/// From now on, the scans leave unread each block in use of the heap whose start `unread` is true for. The first
/// call decides; the later ones change nothing.
pub(crate) fn leave_unread_where(unread: fn(usize) -> bool) {
    let _ = UNREAD_WHERE.set(unread);
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
    /// heap) are never read: what only they point to is not reached through them. `own_stack`: an address in the
    /// leak-test runner's frame on the calling thread, above which its stack is the harness's (roots); `None` when
    /// the calling thread ends with the test, its stack and thread-locals no roots.
    pub(crate) fn scan(
        blocks: impl IntoIterator<Item = (usize, usize)>,
        unread: impl IntoIterator<Item = usize>,
        own_stack: Option<usize>,
    ) -> Self {
        // One scan at a time in a process: a scan spills the words it reads onto its thread's stack, where another
        // thread's scan would find them; a thread waiting here has no such frame live.
        static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let graph = Graph::new(blocks.into_iter().map(|(start, size)| (start, start.saturating_add(size))));
        let process = Process::now(own_stack);
        let mut reader = Reader::new();
        let mut graph = graph.with_heap(process.heap(&mut reader));
        graph.leave_unread(unread);
        if let Some(&unread) = UNREAD_WHERE.get() {
            graph.leave_unread_chunks(unread);
        }
        let mut namer = Namer::default();
        process.mark_roots(&mut graph, &mut reader, &mut namer);
        if !graph.all_reached() {
            graph.settle_unreached(&mut reader);
        }
        Self { graph, process, namer, named: std::collections::HashMap::new() }
    }

    /// What reaches the block at `address`.
    pub(crate) fn of(&self, address: usize) -> Reached {
        self.graph.reached(address).unwrap_or(Reached { kind: Reach::Lost, root: Root::None })
    }

    /// The name of what reaches a block (see [`of`](Self::of)), when it has one: a static's or thread-local's path,
    /// a thread's name.
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
            (Reach::ThreadLocal, Root::Word(word)) => {
                let offset = self.process.thread_local_at(word).and_then(|(_, offset)| offset);
                offset.and_then(|offset| self.namer.thread_local_at(offset))
            }
            (_, Root::Word(word)) => self.namer.static_at(word),
        };
        self.named.insert(reached, name.clone());
        name
    }
}
