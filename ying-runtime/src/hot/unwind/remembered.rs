//! Remembered walks: each thread keeps its recent walks as the memory they read, in sets by the stack pointer they
//! started from, and recognises a stack it walked before without walking it again (see `unwind`).

use super::cached::{Cached, Ticket};
use super::rules::FLUSHES;
use super::tree::{Leaf, WalkTree};
use super::walk::{BP_REGISTER, Regs, registers, walk, walk_reading};
use core::cell::Cell;
use core::mem::MaybeUninit;
use core::num::NonZeroU64;
use core::sync::atomic::Ordering;

/// [`capture`](super::capture), recognising a stack this thread walked before (see `unwind`): returns its tag when
/// the stack is the same, else walks it and remembers what the walk read. `tree`: the thread's tree of walks (see
/// `tree`), looked in past the walks remembered here, and given each new walk.
#[inline]
pub(crate) fn capture_cached(ips: &mut [MaybeUninit<usize>], limit: usize, tree: Option<&'static WalkTree>) -> Cached {
    Cached::unpack(capture_packed(ips, limit, tree))
}

/// [`capture_cached`] with its answer [packed](Cached::pack) into two registers (an enum comes back through
/// memory), in the frame the walks start from.
#[inline(never)]
fn capture_packed(ips: &mut [MaybeUninit<usize>], limit: usize, tree: Option<&'static WalkTree>) -> (u64, u64) {
    let regs = registers!();
    let found = TRACES.try_with(|traces| traces.capture(regs, ips, limit, tree)).unwrap_or_else(|_| {
        match walk(regs, ips, limit) {
            Some(len) => Cached::Walked { len: len as u32, ticket: None },
            None => Cached::Unsupported,
        }
    });
    found.pack()
}

/// Gives the stack [`capture_cached`] walked under `ticket` its `tag`, returned when the same stack is met again.
pub(crate) fn remember(ticket: Ticket, tag: u32) {
    let _ = TRACES.try_with(|traces| traces.remember(ticket, tag));
}

impl Cached {
    const HIT: u64 = 0;
    const WALKED: u64 = 1 << 32;
    const UNSUPPORTED: u64 = 2 << 32;

    /// The kind and its 32-bit value in the first word, a ticket (0: none) in the second.
    #[inline]
    fn pack(self) -> (u64, u64) {
        match self {
            Self::Hit(tag) => (Self::HIT | u64::from(tag), 0),
            Self::Walked { len, ticket } => (Self::WALKED | u64::from(len), ticket.map_or(0, |ticket| ticket.0.get())),
            Self::Unsupported => (Self::UNSUPPORTED, 0),
        }
    }

    #[inline]
    fn unpack((word, ticket): (u64, u64)) -> Self {
        match word & !u64::from(u32::MAX) {
            Self::HIT => Self::Hit(word as u32),
            Self::WALKED => Self::Walked { len: word as u32, ticket: NonZeroU64::new(ticket).map(Ticket) },
            _ => Self::Unsupported,
        }
    }
}

impl Ticket {
    /// The ticket of remembered walk `entry` (below 256) in its `serial`-th use (from 1).
    fn new(entry: usize, serial: u64) -> Option<Self> {
        NonZeroU64::new(serial << 8 | entry as u64 & 0xff).filter(|_| serial != 0).map(Self)
    }

    fn entry(self) -> usize {
        (self.0.get() & 0xff) as usize
    }

    fn serial(self) -> u64 {
        self.0.get() >> 8
    }
}

/// Most memory reads a remembered walk holds (two per frame at most: return address and saved `rbp`).
const TRACE_READS: usize = 48;
/// Sets of remembered walks per thread: a walk is remembered in the set its starting stack pointer picks, so that
/// walks from different depths (a recursive parser's, a compiler's) do not push each other out.
const TRACE_SETS: usize = 8;
/// Walks remembered per set, replaced in turn.
const TRACE_WAYS: usize = 4;
/// Walks remembered per thread.
const TRACE_ENTRIES: usize = TRACE_SETS * TRACE_WAYS;

/// The first entry of the set a walk starting at stack pointer `sp` is remembered in.
#[inline]
fn set_of(sp: usize) -> usize {
    // A multiplicative hash of the stack pointer's 16-byte slot; its top bits pick the set.
    let hash = ((sp >> 4) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (hash >> (64 - TRACE_SETS.trailing_zeros())) as usize * TRACE_WAYS
}
const _: () = assert!(TRACE_ENTRIES <= 256, "a ticket keeps the entry in 8 bits");
/// The tag of an entry that holds no usable walk.
const NO_TAG: u32 = u32::MAX;

/// One remembered walk: where it started, what it read, and the caller's tag for the stack it found.
struct Trace {
    tag: Cell<u32>,
    /// Bumped at every refill, so that a ticket for an entry filled again since names nothing.
    serial: Cell<u64>,
    flushes: Cell<u64>,
    /// `ip` and `sp` at the start.
    regs: [Cell<usize>; 2],
    /// The starting `bp`, when the walk used it (its read of [`BP_REGISTER`], see `walk_reading`): compared with
    /// the start rather than in the loop over the reads.
    bp: Cell<Option<usize>>,
    limit: Cell<usize>,
    capacity: Cell<usize>,
    reads: Cell<usize>,
    addresses: [Cell<usize>; TRACE_READS],
    values: [Cell<usize>; TRACE_READS],
    /// The walk's leaf in the thread's tree, which [`remember`] also gives the tag.
    leaf: Cell<Option<(&'static WalkTree, Leaf)>>,
}

impl Trace {
    const fn new() -> Self {
        Self {
            tag: Cell::new(NO_TAG),
            serial: Cell::new(0),
            flushes: Cell::new(0),
            regs: [const { Cell::new(0) }; 2],
            bp: Cell::new(None),
            limit: Cell::new(0),
            capacity: Cell::new(0),
            reads: Cell::new(0),
            addresses: [const { Cell::new(0) }; TRACE_READS],
            values: [const { Cell::new(0) }; TRACE_READS],
            leaf: Cell::new(None),
        }
    }

    /// The tag, when a walk from `regs` would read exactly what this one read (and so find the same frames).
    #[inline]
    fn replay(&self, regs: Regs, limit: usize, capacity: usize, flushes: u64) -> Option<u32> {
        let tag = self.tag.get();
        let same_start = self.regs[0].get() == regs.ip
            && self.regs[1].get() == regs.sp
            && self.limit.get() == limit
            && self.capacity.get() == capacity
            && self.flushes.get() == flushes
            && self.bp.get().is_none_or(|bp| bp == regs.bp);
        if tag == NO_TAG || !same_start {
            return None;
        }
        for (address, value) in self.addresses.iter().zip(&self.values).take(self.reads.get()) {
            // SAFETY: the walk from `regs` reads this slot at this point: its first read's address follows from
            // `regs` and the rule of `regs.ip`, the same as when it was remembered, and each later address
            // from the values read before it, which matched. So this is a read of a live frame's saved
            // register that the walk itself would make, as sound as `read`'s.
            if unsafe { (address.get() as *const usize).read() } != value.get() {
                return None;
            }
        }
        Some(tag)
    }

    /// Keeps the walk from `regs` that read `walk` (in order, the starting `bp` among them) with `settings`; false
    /// when it read more slots than an entry holds.
    fn fill(&self, regs: Regs, (flushes, limit, capacity): (u64, usize, usize), walk: &[(usize, usize)]) -> bool {
        let mut reads = 0;
        let mut bp = None;
        for &(address, value) in walk {
            if address == BP_REGISTER {
                bp = Some(value);
                continue;
            }
            let (Some(kept_address), Some(kept_value)) = (self.addresses.get(reads), self.values.get(reads)) else {
                return false;
            };
            kept_address.set(address);
            kept_value.set(value);
            reads += 1;
        }
        self.regs[0].set(regs.ip);
        self.regs[1].set(regs.sp);
        self.bp.set(bp);
        self.limit.set(limit);
        self.capacity.set(capacity);
        self.flushes.set(flushes);
        self.reads.set(reads);
        true
    }
}

/// The walks a thread remembers, in sets by their starting stack pointer, each set's replaced in turn.
struct Traces {
    /// The way of each set to replace next.
    next: [Cell<usize>; TRACE_SETS],
    /// The entry last used (hit or filled): tried first, never replaced next.
    last: Cell<usize>,
    entries: [Trace; TRACE_ENTRIES],
}

std::thread_local! {
    static TRACES: Traces = const {
        Traces {
            next: [const { Cell::new(0) }; TRACE_SETS],
            last: Cell::new(0),
            entries: [const { Trace::new() }; TRACE_ENTRIES],
        }
    };
}

impl Traces {
    /// See [`capture_cached`]. The walk used last is tried here; the rest is out of line.
    #[inline]
    fn capture(
        &self,
        regs: Regs,
        ips: &mut [MaybeUninit<usize>],
        limit: usize,
        tree: Option<&'static WalkTree>,
    ) -> Cached {
        let flushes = FLUSHES.load(Ordering::Acquire);
        let last = self.last.get();
        if let Some(tag) = self.entries[last].replay(regs, limit, ips.len(), flushes) {
            return Cached::Hit(tag);
        }
        self.capture_other(regs, ips, limit, flushes, tree)
    }

    /// [`capture`](Self::capture) past the walk used last: the other remembered walks of the set `regs` picks,
    /// else the thread's tree (whose walk is then remembered in the set), else a new walk, remembered in the set
    /// and given to the tree.
    #[cold]
    #[inline(never)]
    fn capture_other(
        &self,
        regs: Regs,
        ips: &mut [MaybeUninit<usize>],
        limit: usize,
        flushes: u64,
        tree: Option<&'static WalkTree>,
    ) -> Cached {
        let last = self.last.get();
        let set = set_of(regs.sp);
        for index in (set..set + TRACE_WAYS).filter(|&index| index != last) {
            if let Some(tag) = self.entries[index].replay(regs, limit, ips.len(), flushes) {
                self.last.set(index);
                return Cached::Hit(tag);
            }
        }
        let next = &self.next[set / TRACE_WAYS];
        let mut way = next.get();
        if set + way == last {
            way = (way + 1) % TRACE_WAYS;
        }
        next.set((way + 1) % TRACE_WAYS);
        let index = set + way;
        self.last.set(index);
        let entry = &self.entries[index];
        entry.tag.set(NO_TAG);
        entry.leaf.set(None);
        entry.serial.set(entry.serial.get() + 1);
        let settings = (flushes, limit, ips.len());
        // The reads of the walk (or of the tree's look), in order; counted past the buffer when there are more.
        let mut walk = [(0, 0); TRACE_READS + 1];
        let told = Cell::new(0);
        let mut record = |address, value| {
            if let Some(read) = walk.get_mut(told.get()) {
                *read = (address, value);
            }
            told.set(told.get() + 1);
        };
        if let Some(tag) = tree.and_then(|tree| tree.find(regs, settings, &mut record)) {
            if told.get() <= walk.len() && entry.fill(regs, settings, &walk[..told.get()]) {
                entry.tag.set(tag);
            }
            return Cached::Hit(tag);
        }
        told.set(0);
        let walked = walk_reading(regs, ips, limit, &mut record);
        let told = told.get();
        let Some(len) = walked else { return Cached::Unsupported };
        // Too deep to remember, or the rules changed during the walk: walked, not remembered.
        if told > walk.len() || FLUSHES.load(Ordering::Acquire) != flushes || !entry.fill(regs, settings, &walk[..told])
        {
            return Cached::Walked { len: len as u32, ticket: None };
        }
        if let Some(tree) = tree {
            entry.leaf.set(tree.insert(regs, settings, &walk[..told]).map(|leaf| (tree, leaf)));
        }
        Cached::Walked { len: len as u32, ticket: Ticket::new(index, entry.serial.get()) }
    }

    /// See [`remember`].
    fn remember(&self, ticket: Ticket, tag: u32) {
        let entry = &self.entries[ticket.entry()];
        if entry.serial.get() == ticket.serial() {
            entry.tag.set(tag);
            if let Some((tree, leaf)) = entry.leaf.get() {
                tree.tag(leaf, tag);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::walk::capture;
    use super::super::walk::tests::{buffer, read};
    use super::{Cached, WalkTree, capture_cached, remember};
    use core::mem::MaybeUninit;

    /// A way down to [`probe`].
    type Probe = fn(&mut [MaybeUninit<usize>]) -> Cached;

    #[inline(never)]
    fn probe(ips: &mut [MaybeUninit<usize>]) -> Cached {
        let cached = capture_cached(ips, 0, None);
        std::hint::black_box(cached)
    }

    #[inline(never)]
    fn through_a(ips: &mut [MaybeUninit<usize>]) -> Cached {
        std::hint::black_box(probe(ips))
    }

    #[inline(never)]
    fn through_b(ips: &mut [MaybeUninit<usize>]) -> Cached {
        std::hint::black_box(probe(ips))
    }

    #[test]
    fn a_remembered_walk_is_recognised_only_on_the_same_stack() {
        let paths: [Probe; 2] = [through_a, through_b];
        let mut walked: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
        let mut ips = buffer::<64>();
        for round in 0..3 {
            // Both paths reach `probe` from the same call site with the same stack depth: the walks start from
            // the same registers and differ only in a return address read on the way.
            for (tag, path) in paths.iter().enumerate() {
                match path(&mut ips) {
                    Cached::Walked { len, ticket: Some(ticket) } if round == 0 => {
                        walked[tag] = read(&ips[..len as usize]);
                        remember(ticket, tag as u32);
                    }
                    Cached::Hit(found) if round > 0 => assert_eq!(found, tag as u32, "round {round}"),
                    other => panic!("round {round}, path {tag}: {other:?}"),
                }
            }
        }
        assert_ne!(walked[0], walked[1]);
        // The remembered walk found what the walker finds without the cache: `walked` holds the return
        // addresses into the capture's frames, `probe`, `through_a` and this test, then this test's callers;
        // `fresh` the one into this test, then the same callers.
        let mut fresh = buffer::<64>();
        let len = capture(&mut fresh, 0).unwrap();
        let callers = &read(&fresh)[1..len];
        assert!(walked[0].len() >= callers.len() + 3 && walked[0].ends_with(callers), "{walked:?}\n{callers:?}");
        // A different depth is a different stack.
        assert!(matches!(nested_probe(3, &mut ips), Cached::Walked { .. }));
    }

    #[test]
    fn walks_from_more_depths_than_a_set_holds_are_each_recognised() {
        // The one change of the rules a test process makes, made before any walk is remembered.
        crate::read::symbol_table::end_stacks_at_thread_entries();
        // Six stacks, each starting at a depth of its own, met in turn: more than one set's ways, which a cache
        // that replaces its walks in turn whatever their depth would have replaced before each came round again.
        const DEPTHS: usize = 6;
        let mut ips = buffer::<64>();
        for round in 0..3 {
            for depth in 0..DEPTHS {
                match nested_probe(depth, &mut ips) {
                    Cached::Walked { ticket: Some(ticket), .. } if round == 0 => remember(ticket, depth as u32),
                    Cached::Hit(found) if round > 0 => assert_eq!(found, depth as u32, "round {round}"),
                    other => panic!("round {round}, depth {depth}: {other:?}"),
                }
            }
        }
    }

    /// Functions that each call [`probe_tree`] from a call site of their own, at the same depth.
    macro_rules! paths_to_the_tree_probe {
        ($($name:ident)*) => {
            $(
                #[inline(never)]
                fn $name(ips: &mut [MaybeUninit<usize>], tree: &'static WalkTree) -> Cached {
                    std::hint::black_box(probe_tree(ips, tree))
                }
            )*
            const TREE_PATHS: &[fn(&mut [MaybeUninit<usize>], &'static WalkTree) -> Cached] = &[$($name),*];
        };
    }
    paths_to_the_tree_probe!(
        t00 t01 t02 t03 t04 t05 t06 t07 t08 t09 t10 t11 t12 t13 t14 t15 t16 t17 t18 t19
        t20 t21 t22 t23 t24 t25 t26 t27 t28 t29 t30 t31 t32 t33 t34 t35 t36 t37 t38 t39
    );

    #[inline(never)]
    fn probe_tree(ips: &mut [MaybeUninit<usize>], tree: &'static WalkTree) -> Cached {
        std::hint::black_box(capture_cached(ips, 0, Some(tree)))
    }

    #[test]
    fn more_stacks_than_the_thread_remembers_are_each_recognised_through_its_tree() {
        // The one change of the rules a test process makes, made before any walk is remembered.
        crate::read::symbol_table::end_stacks_at_thread_entries();
        assert!(TREE_PATHS.len() > super::TRACE_ENTRIES);
        // SAFETY: all zeros is an empty tree (every field an atomic integer), as in a fresh nursery.
        let tree: &'static WalkTree = Box::leak(unsafe { Box::<WalkTree>::new_zeroed().assume_init() });
        let mut ips = buffer::<64>();
        let mut walked = Vec::new();
        for round in 0..3 {
            // Forty stacks met in turn: more than the walks a thread remembers, which replace each other in turn,
            // so that without the tree each would be walked again every round.
            for (tag, path) in TREE_PATHS.iter().enumerate() {
                match path(&mut ips, tree) {
                    Cached::Walked { len, ticket: Some(ticket) } if round == 0 => {
                        walked.push(read(&ips[..len as usize]));
                        remember(ticket, tag as u32);
                    }
                    Cached::Hit(found) if round > 0 => assert_eq!(found, tag as u32, "round {round}"),
                    other => panic!("round {round}, path {tag}: {other:?}"),
                }
            }
        }
        // Forty different stacks, each the walker's own.
        walked.sort();
        walked.dedup();
        assert_eq!(walked.len(), TREE_PATHS.len());
    }

    #[inline(never)]
    fn nested_probe(depth: usize, ips: &mut [MaybeUninit<usize>]) -> Cached {
        if depth == 0 { probe(ips) } else { std::hint::black_box(nested_probe(depth - 1, ips)) }
    }
}
