//! Why a leak test's retained blocks are still there: the reachability scan (`read::reach`) run over the blocks
//! of its closed scope, and its findings summed per site.

use crate::base::raw::RawVec;
use crate::base::thread::THREAD;
use crate::hot::live::OwnedBlock;
use ying_report::report::{Reach, Why as SiteWhy};

/// The scan of a closed scope's blocks, where the platform has one.
pub(super) struct Why {
    #[cfg(target_os = "linux")]
    reach: crate::read::reach::Reachability,
}

impl Why {
    /// Scans the process for what reaches `blocks`; `None` when there are none (a test that retains nothing pays
    /// nothing) or the platform has no scan. On the thread of a leak test's body, the stack above the runner's
    /// frame (the harness's) is a root; a thread that ends with its test (measured from outside) is none.
    pub(super) fn scan(blocks: &RawVec<OwnedBlock>) -> Option<Self> {
        if blocks.is_empty() {
            return None;
        }
        #[cfg(target_os = "linux")]
        {
            let own_stack = THREAD.try_with(|thread| thread.capture_limit.get()).ok().filter(|&limit| limit != 0);
            let targets = blocks.iter().map(|block| (block.address, block.size));
            Some(Self { reach: crate::read::reach::Reachability::scan(targets, own_stack) })
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = THREAD;
            None
        }
    }

    /// What reaches the block at `address`: its kind and its root's name.
    pub(super) fn of(&mut self, address: usize) -> (Reach, Option<String>) {
        #[cfg(target_os = "linux")]
        {
            self.reach.of(address)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = address;
            (Reach::Lost, None)
        }
    }
}

/// A site's blocks by what reaches them.
#[derive(Default)]
pub(super) struct Whys(Vec<SiteWhy>);

impl Whys {
    /// Counts `bytes` (and a block, when `owns_block`) reached as `reached` says.
    pub(super) fn add(&mut self, (kind, root): (Reach, Option<String>), bytes: u64, owns_block: bool) {
        let blocks = u64::from(owns_block);
        match self.0.iter_mut().find(|why| why.kind == kind && why.root == root) {
            Some(why) => {
                why.bytes += bytes;
                why.blocks += blocks;
            }
            None => self.0.push(SiteWhy { kind, root, bytes, blocks }),
        }
    }

    /// The list a report keeps: the most bytes first, then by kind and root.
    pub(super) fn into_list(mut self) -> Vec<SiteWhy> {
        self.0.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| (a.kind, &a.root).cmp(&(b.kind, &b.root))));
        self.0
    }
}
