//! Why a leak test's retained blocks are still there: the reachability scan (`read::reach`) run over the blocks
//! of its closed scope, and its findings summed per site.

use crate::base::raw::RawVec;
use crate::base::thread::THREAD;
use crate::hot::live::OwnedBlock;
use std::collections::HashMap;
use ying_report::report::{Reach, Why as SiteWhy};

/// The scan of a closed scope's blocks, where the platform has one.
pub(super) struct Why {
    #[cfg(target_os = "linux")]
    reach: crate::read::reach::Reachability,
}

impl Why {
    /// Scans the process for what reaches `blocks`, those marked `known` left out: the excuses know them by the
    /// code that allocated them (the standard library's backtraces, whose cache of debug information is megabytes),
    /// and they are neither classified nor read. The profiler's own blocks are not read either (a leak test's panic
    /// hook's work among them): what only they point to is not reached. `None` when no block is left (a test that
    /// retains nothing pays nothing) or the platform has no scan. The thread that ran a leak test's body keeps its thread-locals as roots,
    /// not its stack (see `Caller`); a thread that ends with its test (measured from outside) keeps neither.
    pub(super) fn scan(blocks: &RawVec<OwnedBlock>, known: &[bool]) -> Option<Self> {
        let marked = |as_known: bool| blocks.iter().zip(known).filter(move |&(_, &known)| known == as_known);
        marked(false).next()?;
        #[cfg(target_os = "linux")]
        {
            use crate::read::reach::Caller;
            // The runner marks its frame on the thread that runs the body; a test measured from outside is scanned
            // as its process ends.
            let in_runner = THREAD.try_with(|thread| thread.capture_limit.get() != 0).unwrap_or(false);
            let caller = if in_runner { Caller::RanTheBody } else { Caller::Ending };
            let targets = marked(false).map(|(block, _)| (block.address, block.size));
            let internal = crate::hot::live::internal_blocks();
            let unread = marked(true).map(|(block, _)| block.address).chain(internal.iter().copied());
            // Of a cycle, the member whose stack was recorded first (allocated first, where stacks differ) owns the
            // rest: the `Box<z_stream>` a test forgot, not the buffers the C library hung from it.
            let stacks: HashMap<usize, u64> = marked(false)
                .map(|(block, _)| (block.address, block.stack.map_or(u64::MAX, |stack| stack.index() as u64)))
                .collect();
            let first = |address: usize| stacks.get(&address).copied().unwrap_or(u64::MAX);
            Some(Self { reach: crate::read::reach::Reachability::scan(targets, unread, caller, first) })
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = THREAD;
            None
        }
    }

    /// What reaches the block at `address`.
    pub(super) fn of(&self, address: usize) -> Reached {
        #[cfg(target_os = "linux")]
        {
            self.reach.of(address)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = address;
            Reach::Lost
        }
    }

    /// The lost block that owns the lost block at `address` (itself, for an owner); `None` for a block something
    /// reaches, or where there is no scan.
    pub(super) fn owner(&self, address: usize) -> Option<usize> {
        #[cfg(target_os = "linux")]
        {
            self.reach.owner(address)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = address;
            None
        }
    }

    /// The reference cycles among the lost blocks, named (see `cycles`), each block's stack told by `stack_of` (by
    /// its address); none where there is no scan.
    pub(super) fn cycles(
        &self,
        stack_of: impl Fn(usize) -> Option<crate::base::ids::StackId>,
    ) -> Vec<ying_report::report::CycleEntry> {
        #[cfg(target_os = "linux")]
        {
            super::cycles::named(&self.reach.lost_graph(), stack_of)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = stack_of;
            Vec::new()
        }
    }

    /// `reached` as a report says it: the kind, and the root's name where it has one.
    fn said(&mut self, reached: Reached) -> (Reach, Option<String>) {
        #[cfg(target_os = "linux")]
        {
            (reached.kind, self.reach.name(reached))
        }
        #[cfg(not(target_os = "linux"))]
        {
            (reached, None)
        }
    }
}

/// What reaches a block, as the scan tells it (named only once a site's list is made).
#[cfg(target_os = "linux")]
pub(super) type Reached = crate::read::reach::Reached;
/// What reaches a block: where there is no scan, nothing is ever said.
#[cfg(not(target_os = "linux"))]
pub(super) type Reached = Reach;

/// A site's blocks by what reaches them: bytes and blocks of each.
#[derive(Default)]
pub(super) struct Whys(HashMap<Reached, (u64, u64)>);

impl Whys {
    /// Counts `bytes` (and a block, when `owns_block`) reached as `reached` says.
    pub(super) fn add(&mut self, reached: Reached, bytes: u64, owns_block: bool) {
        let (counted_bytes, counted_blocks) = self.0.entry(reached).or_default();
        *counted_bytes += bytes;
        *counted_blocks += u64::from(owns_block);
    }

    /// The list a report keeps, its roots named by `why` (whose scan found them): the most bytes first, then by kind
    /// and root. Two roots of one name are one entry.
    pub(super) fn into_list(self, why: &mut Why) -> Vec<SiteWhy> {
        let mut list: Vec<SiteWhy> = Vec::with_capacity(self.0.len());
        for (reached, (bytes, blocks)) in self.0 {
            let (kind, root) = why.said(reached);
            match list.iter_mut().find(|why| why.kind == kind && why.root == root) {
                Some(why) => {
                    why.bytes += bytes;
                    why.blocks += blocks;
                }
                None => list.push(SiteWhy { kind, root, bytes, blocks }),
            }
        }
        list.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| (a.kind, &a.root).cmp(&(b.kind, &b.root))));
        list
    }
}
