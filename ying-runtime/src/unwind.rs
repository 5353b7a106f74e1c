//! A caching stack walker for sampled allocations (x86-64 Linux).
//!
//! The system unwinder (`_Unwind_Backtrace`) finds and interprets the DWARF call-frame information of every frame
//! on every capture: about 5 us for a 20-frame stack, which at the default sampling interval was a tenth of the
//! profiler's cost. The rule that recovers a caller's frame depends only on the instruction address, and x86-64
//! code almost always needs one of a few simple shapes (CFA = `rsp` or `rbp` plus an offset, the return address
//! and the saved `rbp` at fixed offsets from it). This walker computes each address's rule once, with `gimli`,
//! from the object's `.eh_frame_hdr` search table, and keeps it in a fixed table, so a capture is then a few
//! loads per frame and never allocates.
//!
//! Anything outside those shapes (a signal frame, a CFA given by an expression, a register saved in another
//! register, an object without `.eh_frame_hdr`) makes [`capture`] return `None`, and the caller falls back to the
//! system unwinder for that stack. A frame without call-frame information ends the stack, as it does for the
//! system unwinder.
//!
//! A thread that allocates from one place again and again walks the same stack again and again. Each thread keeps
//! its last few walks as the memory they read ([`capture_cached`]): a walk is a function of the registers it
//! starts from and of the values it reads, so when the registers are the same and every remembered slot still
//! holds the remembered value, the walk would find the same frames, and the caller's tag for that stack (the stack
//! table's index) is returned without walking. That is one load and compare per read instead of a rule lookup per
//! frame.
//!
//! Rules are keyed by address for the life of the process. An object unloaded (`dlclose`) and another loaded at
//! the same addresses could leave stale rules: the table is cleared whenever the loader reports that an object was
//! unloaded, which the walker checks on every table miss.

use core::mem::MaybeUninit;

/// The calling function's instruction, stack and frame pointers, as an `x86_64::Regs` to start a walk from. A
/// macro, not a function: a walk starts in the frame that read the registers, which must still be running.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
macro_rules! registers {
    () => {{
        let (ip, sp, bp): (usize, usize, usize);
        // SAFETY: reads the instruction pointer, stack pointer and frame pointer into registers; touches no memory
        // and leaves the stack and flags as they were.
        unsafe {
            core::arch::asm!(
                "lea {ip}, [rip]",
                "mov {sp}, rsp",
                "mov {bp}, rbp",
                ip = out(reg) ip,
                sp = out(reg) sp,
                bp = out(reg) bp,
                options(nomem, nostack, preserves_flags),
            );
        }
        x86_64::Regs { ip, sp, bp }
    }};
}

/// Walks the calling thread's stack into `ips` (return addresses, innermost caller of `capture` first). Stops when
/// `ips` is full, at the first frame whose CFA lies past `limit` (when not 0, that frame included), or at the end
/// of the stack. Returns the number of frames written, or `None` when the stack needs the system unwinder.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[inline(never)]
pub(crate) fn capture(ips: &mut [MaybeUninit<usize>], limit: usize) -> Option<usize> {
    x86_64::walk(registers!(), ips, limit)
}

/// Elsewhere the system unwinder does all captures.
#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
pub(crate) fn capture(_ips: &mut [MaybeUninit<usize>], _limit: usize) -> Option<usize> {
    None
}

/// What [`capture_cached`] found.
#[derive(Debug, PartialEq, Eq)]
#[cfg_attr(
    not(all(target_arch = "x86_64", target_os = "linux")),
    expect(dead_code, reason = "elsewhere every capture is `Unsupported`")
)]
pub(crate) enum Cached {
    /// The stack is one this thread walked before: the tag given to it with [`remember`].
    Hit(u32),
    /// Walked into `ips` (`len` frames). With a ticket, [`remember`] gives the stack its tag for the next time.
    Walked { len: u32, ticket: Option<Ticket> },
    /// The stack needs the system unwinder.
    Unsupported,
}

/// Names the walk [`capture_cached`] just remembered, to give it a tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(
    not(all(target_arch = "x86_64", target_os = "linux")),
    expect(dead_code, reason = "elsewhere nothing is remembered")
)]
pub(crate) struct Ticket(core::num::NonZeroU64);

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
impl Ticket {
    /// The ticket of remembered walk `entry` (below 256) in its `serial`-th use (from 1).
    fn new(entry: usize, serial: u64) -> Option<Self> {
        core::num::NonZeroU64::new(serial << 8 | entry as u64 & 0xff).filter(|_| serial != 0).map(Self)
    }

    fn entry(self) -> usize {
        (self.0.get() & 0xff) as usize
    }

    fn serial(self) -> u64 {
        self.0.get() >> 8
    }
}

/// [`capture`], recognising a stack this thread walked before (see the module docs): returns its tag when the
/// stack is the same, else walks it and remembers what the walk read.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[inline]
pub(crate) fn capture_cached(ips: &mut [MaybeUninit<usize>], limit: usize) -> Cached {
    Cached::unpack(capture_packed(ips, limit))
}

/// [`capture_cached`] with its answer [packed](Cached::pack) into two registers (an enum comes back through
/// memory), in the frame the walks start from.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[inline(never)]
fn capture_packed(ips: &mut [MaybeUninit<usize>], limit: usize) -> (u64, u64) {
    let regs = registers!();
    let found =
        x86_64::TRACES.try_with(|traces| traces.capture(regs, ips, limit)).unwrap_or_else(|_| {
            match x86_64::walk(regs, ips, limit) {
                Some(len) => Cached::Walked { len: len as u32, ticket: None },
                None => Cached::Unsupported,
            }
        });
    found.pack()
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
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
            Self::WALKED => Self::Walked { len: word as u32, ticket: core::num::NonZeroU64::new(ticket).map(Ticket) },
            _ => Self::Unsupported,
        }
    }
}

/// Elsewhere the system unwinder does all captures.
#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
pub(crate) fn capture_cached(_ips: &mut [MaybeUninit<usize>], _limit: usize) -> Cached {
    Cached::Unsupported
}

/// Gives the stack [`capture_cached`] walked under `ticket` its `tag`, returned when the same stack is met again.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub(crate) fn remember(ticket: Ticket, tag: u32) {
    let _ = x86_64::TRACES.try_with(|traces| traces.remember(ticket, tag));
}

/// Elsewhere nothing is remembered.
#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
pub(crate) fn remember(_ticket: Ticket, _tag: u32) {}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod x86_64 {
    use super::{Cached, Ticket};
    use crate::sync::SpinLock;
    use core::cell::Cell;
    use core::mem::MaybeUninit;
    use core::ops::ControlFlow;
    use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};
    use gimli::{
        BaseAddresses, CfaRule, EhFrame, EhFrameHdr, NativeEndian, Register, RegisterRule, UnwindContext,
        UnwindContextStorage, UnwindSection, UnwindTableRow, X86_64,
    };

    /// The registers a walk needs: instruction, stack and frame pointers.
    #[derive(Clone, Copy)]
    pub(super) struct Regs {
        pub(super) ip: usize,
        pub(super) sp: usize,
        pub(super) bp: usize,
    }

    /// How to recover the caller's registers at one instruction address.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct Rule {
        /// The CFA is `rbp + cfa_offset` (else `rsp + cfa_offset`).
        cfa_from_bp: bool,
        cfa_offset: i32,
        /// The return address is saved at `CFA + ra_offset`; `None`: the outermost frame (no return address).
        ra_offset: Option<i8>,
        /// The caller's `rbp` is saved at `CFA + bp_offset`; `None`: the callee did not change it.
        bp_offset: Option<i16>,
    }

    impl Rule {
        const VALID: u64 = 1;
        const FROM_BP: u64 = 2;
        const HAS_RA: u64 = 4;
        const HAS_BP: u64 = 8;

        fn pack(self) -> u64 {
            let mut word = Self::VALID;
            word |= if self.cfa_from_bp { Self::FROM_BP } else { 0 };
            if let Some(ra) = self.ra_offset {
                word |= Self::HAS_RA | (u64::from(ra as u8) << 8);
            }
            if let Some(bp) = self.bp_offset {
                word |= Self::HAS_BP | (u64::from(bp as u16) << 16);
            }
            word | (u64::from(self.cfa_offset as u32) << 32)
        }

        /// A cached "no call-frame information here" (the end of a stack), which is not a rule.
        const NO_INFO: u64 = 16;

        fn unpack(word: u64) -> Option<Self> {
            (word & Self::VALID != 0 && word & Self::NO_INFO == 0).then(|| Self {
                cfa_from_bp: word & Self::FROM_BP != 0,
                cfa_offset: (word >> 32) as u32 as i32,
                ra_offset: (word & Self::HAS_RA != 0).then_some((word >> 8) as u8 as i8),
                bp_offset: (word & Self::HAS_BP != 0).then_some((word >> 16) as u16 as i16),
            })
        }
    }

    /// Why a rule could not be had.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Miss {
        /// No call-frame information covers the address: the stack ends here.
        NoInfo,
        /// The information needs the system unwinder.
        Unsupported,
    }

    /// Deepest plausible distance, in bytes, between the first frame and the outermost one: a CFA further away
    /// means a rule went wrong, and the walk stops rather than read far memory.
    const MAX_STACK_SPAN: usize = 1 << 30;

    pub(super) fn walk(regs: Regs, ips: &mut [MaybeUninit<usize>], limit: usize) -> Option<usize> {
        walk_reading(regs, ips, limit, |_, _| {}, &Cell::new(false))
    }

    /// [`walk`], telling `reads` every slot of memory whose value the walk depends on and the value it found there,
    /// and setting `uses_bp` when the starting `rbp` served as a CFA base. Optimised code often keeps data in
    /// `rbp`, which frames save and restore as any callee-saved register: a restored `rbp` counts (and its slot is
    /// told) only once a CFA is computed from it, and the starting one only if a CFA is computed from it before any
    /// restore. What the walk finds is a function of its start (`ip`, `sp`, `bp` when used) and of these values.
    #[inline(always)]
    fn walk_reading(
        mut regs: Regs,
        ips: &mut [MaybeUninit<usize>],
        limit: usize,
        mut reads: impl FnMut(usize, usize),
        uses_bp: &Cell<bool>,
    ) -> Option<usize> {
        if DISABLED.load(Ordering::Relaxed) {
            return None;
        }
        let start_sp = regs.sp;
        let mut len = 0;
        // The first address is inside `capture` itself (exact); the others are return addresses, looked up one
        // byte back so that a call at the very end of a function finds that function's rule.
        let mut lookup = regs.ip;
        let mut first = true;
        let mut bp_restored = false;
        // The slot the current `rbp` was restored from and its value, until a CFA is computed from it.
        let mut bp_slot = None;
        loop {
            let rule = match rule_for(lookup) {
                Ok(rule) => rule,
                Err(Miss::NoInfo) if len > 0 => return Some(len),
                Err(_) => {
                    if len == 0 {
                        // Not even `capture` itself can be walked: this process needs the system unwinder.
                        DISABLED.store(true, Ordering::Relaxed);
                    }
                    return None;
                }
            };
            if rule.cfa_from_bp {
                if !bp_restored {
                    uses_bp.set(true);
                }
                if let Some((address, value)) = bp_slot.take() {
                    reads(address, value);
                }
            }
            let base = if rule.cfa_from_bp { regs.bp } else { regs.sp };
            let cfa = base.wrapping_add_signed(rule.cfa_offset as isize);
            if cfa <= regs.sp || cfa - start_sp > MAX_STACK_SPAN {
                return Some(len); // not a caller's frame: stop
            }
            if !first {
                ips[len] = MaybeUninit::new(regs.ip);
                len += 1;
                if len == ips.len() || (limit != 0 && cfa > limit) {
                    return Some(len);
                }
            }
            let Some(ra_offset) = rule.ra_offset else { return Some(len) };
            let ra_slot = cfa.wrapping_add_signed(isize::from(ra_offset));
            let ra = read(ra_slot)?;
            reads(ra_slot, ra);
            if let Some(bp_offset) = rule.bp_offset {
                let address = cfa.wrapping_add_signed(isize::from(bp_offset));
                regs.bp = read(address)?;
                bp_slot = Some((address, regs.bp));
                bp_restored = true;
            }
            if ra == 0 {
                return Some(len);
            }
            regs = Regs { ip: ra, sp: cfa, ..regs };
            lookup = ra - 1;
            first = false;
        }
    }

    /// Reads a saved register from the stack.
    fn read(address: usize) -> Option<usize> {
        if !address.is_multiple_of(core::mem::align_of::<usize>()) {
            return None;
        }
        // SAFETY: `address` is an aligned slot of a live frame of this thread's stack, between the current stack
        // pointer and the CFA of a caller still running: the call-frame information of the frame being unwound
        // says its caller's register was saved there.
        Some(unsafe { (address as *const usize).read() })
    }

    const CACHE_SLOTS: usize = 4096;

    /// One cached rule: the address it is for, and the packed rule.
    struct Slot {
        address: AtomicUsize,
        rule: AtomicU64,
    }

    /// Rules by address. Readers take no lock: a slot is read address, rule, address, and used only when both
    /// reads of the address agree (writers, one at a time under [`WRITER`], clear the address first).
    static CACHE: [Slot; CACHE_SLOTS] =
        [const { Slot { address: AtomicUsize::new(0), rule: AtomicU64::new(0) } }; CACHE_SLOTS];
    /// Serialises writers of [`CACHE`], and holds the loader's unload count the cache was filled under.
    static WRITER: SpinLock<u64> = SpinLock::new(0);
    /// Set when the walker cannot walk even its own frame (no `.eh_frame_hdr`): every capture falls back.
    static DISABLED: AtomicBool = AtomicBool::new(false);

    /// How many times [`CACHE`] was cleared: remembered walks are valid only under the count they were made at.
    static FLUSHES: AtomicU64 = AtomicU64::new(0);

    /// Most memory reads a remembered walk holds (two per frame at most: return address and saved `rbp`).
    const TRACE_READS: usize = 48;
    /// Walks remembered per thread.
    const TRACE_ENTRIES: usize = 4;
    const _: () = assert!(TRACE_ENTRIES <= 256, "a ticket keeps the entry in 8 bits");
    /// The tag of an entry that holds no usable walk.
    const NO_TAG: u32 = u32::MAX;

    /// One remembered walk: where it started, what it read, and the caller's tag for the stack it found.
    struct Trace {
        tag: Cell<u32>,
        /// Bumped at every refill, so that a ticket for an entry filled again since names nothing.
        serial: Cell<u64>,
        flushes: Cell<u64>,
        /// `ip`, `sp` and `bp` at the start; `bp` is compared only when the walk used it (`uses_bp`).
        regs: [Cell<usize>; 3],
        uses_bp: Cell<bool>,
        limit: Cell<usize>,
        capacity: Cell<usize>,
        reads: Cell<usize>,
        addresses: [Cell<usize>; TRACE_READS],
        values: [Cell<usize>; TRACE_READS],
    }

    impl Trace {
        const fn new() -> Self {
            Self {
                tag: Cell::new(NO_TAG),
                serial: Cell::new(0),
                flushes: Cell::new(0),
                regs: [const { Cell::new(0) }; 3],
                uses_bp: Cell::new(false),
                limit: Cell::new(0),
                capacity: Cell::new(0),
                reads: Cell::new(0),
                addresses: [const { Cell::new(0) }; TRACE_READS],
                values: [const { Cell::new(0) }; TRACE_READS],
            }
        }

        /// The tag, when a walk from `regs` would read exactly what this one read (and so find the same frames).
        #[inline]
        fn replay(&self, regs: Regs, limit: usize, capacity: usize, flushes: u64) -> Option<u32> {
            let tag = self.tag.get();
            let same_start = self.regs[0].get() == regs.ip
                && self.regs[1].get() == regs.sp
                && (!self.uses_bp.get() || self.regs[2].get() == regs.bp)
                && self.limit.get() == limit
                && self.capacity.get() == capacity
                && self.flushes.get() == flushes;
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
    }

    /// The walks a thread remembers, replaced in turn.
    pub(super) struct Traces {
        /// The entry to replace next.
        next: Cell<usize>,
        /// The entry last used (hit or filled): tried first, never replaced next.
        last: Cell<usize>,
        entries: [Trace; TRACE_ENTRIES],
    }

    std::thread_local! {
        pub(super) static TRACES: Traces = const {
            Traces { next: Cell::new(0), last: Cell::new(0), entries: [const { Trace::new() }; TRACE_ENTRIES] }
        };
    }

    impl Traces {
        /// See [`super::capture_cached`]. The walk used last is tried here; the rest is out of line.
        #[inline]
        pub(super) fn capture(&self, regs: Regs, ips: &mut [MaybeUninit<usize>], limit: usize) -> Cached {
            let flushes = FLUSHES.load(Ordering::Acquire);
            let last = self.last.get();
            if let Some(tag) = self.entries[last].replay(regs, limit, ips.len(), flushes) {
                return Cached::Hit(tag);
            }
            self.capture_other(regs, ips, limit, flushes)
        }

        /// [`capture`](Self::capture) past the walk used last: the other remembered walks, else a new walk.
        #[cold]
        #[inline(never)]
        fn capture_other(&self, regs: Regs, ips: &mut [MaybeUninit<usize>], limit: usize, flushes: u64) -> Cached {
            let last = self.last.get();
            for (index, entry) in self.entries.iter().enumerate().filter(|&(index, _)| index != last) {
                if let Some(tag) = entry.replay(regs, limit, ips.len(), flushes) {
                    self.last.set(index);
                    return Cached::Hit(tag);
                }
            }
            let mut index = self.next.get();
            if index == last {
                index = (index + 1) % TRACE_ENTRIES;
            }
            self.next.set((index + 1) % TRACE_ENTRIES);
            self.last.set(index);
            let entry = &self.entries[index];
            entry.tag.set(NO_TAG);
            entry.serial.set(entry.serial.get() + 1);
            let mut reads = 0;
            let uses_bp = Cell::new(false);
            let record = |address, value| {
                if reads < TRACE_READS {
                    entry.addresses[reads].set(address);
                    entry.values[reads].set(value);
                }
                reads += 1;
            };
            let walked = walk_reading(regs, ips, limit, record, &uses_bp);
            let Some(len) = walked else { return Cached::Unsupported };
            // Too deep to remember, or the rules changed during the walk: walked, not remembered.
            if reads > TRACE_READS || FLUSHES.load(Ordering::Acquire) != flushes {
                return Cached::Walked { len: len as u32, ticket: None };
            }
            for (cell, value) in entry.regs.iter().zip([regs.ip, regs.sp, regs.bp]) {
                cell.set(value);
            }
            entry.uses_bp.set(uses_bp.get());
            entry.limit.set(limit);
            entry.capacity.set(ips.len());
            entry.flushes.set(flushes);
            entry.reads.set(reads);
            Cached::Walked { len: len as u32, ticket: Ticket::new(index, entry.serial.get()) }
        }

        /// See [`super::remember`].
        pub(super) fn remember(&self, ticket: Ticket, tag: u32) {
            let entry = &self.entries[ticket.entry()];
            if entry.serial.get() == ticket.serial() {
                entry.tag.set(tag);
            }
        }
    }

    fn slot_of(address: usize) -> &'static Slot {
        let hash = (address as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        &CACHE[(hash >> (64 - CACHE_SLOTS.trailing_zeros())) as usize]
    }

    fn rule_for(address: usize) -> Result<Rule, Miss> {
        let slot = slot_of(address);
        let seen = slot.address.load(Ordering::Acquire);
        let word = slot.rule.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        if seen == address && slot.address.load(Ordering::Relaxed) == address {
            if let Some(rule) = Rule::unpack(word) {
                return Ok(rule);
            }
            if word & Rule::NO_INFO != 0 {
                return Err(Miss::NoInfo);
            }
        }
        let (found, unloads) = compute(address);
        let word = match found {
            Ok(rule) => rule.pack(),
            // Where a stack ends (often in code without call-frame information, such as a thread's or the
            // process's entry) is met on every walk that gets there: remembered too.
            Err(Miss::NoInfo) => Rule::NO_INFO,
            Err(Miss::Unsupported) => return found,
        };
        let mut filled_under = WRITER.lock();
        if *filled_under != unloads {
            // An object was unloaded since the cached rules were computed: they may describe code that is gone.
            for slot in &CACHE {
                slot.address.store(0, Ordering::Relaxed);
            }
            *filled_under = unloads;
            // Every thread's remembered walks were made with the old rules.
            FLUSHES.fetch_add(1, Ordering::Release);
        }
        slot.address.store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        slot.rule.store(word, Ordering::Relaxed);
        slot.address.store(address, Ordering::Release);
        found
    }

    /// Where an object's call-frame information lies, as the loader reports it.
    #[derive(Default)]
    struct Object {
        /// Address and size of `.eh_frame_hdr` (the `PT_GNU_EH_FRAME` segment); 0 when the object has none.
        hdr: (usize, usize),
        /// The object's loaded segments (start, end), to bound `.eh_frame`, whose size the header does not give.
        loads: [(usize, usize); 16],
        load_count: usize,
    }

    /// Finds the object holding `address`, without allocating; also returns the loader's unload count.
    fn object_of(address: usize) -> (Option<Object>, u64) {
        let mut unloads = 0;
        let found = crate::loaded::find_map(|object| {
            unloads = object.unloads;
            if !object.holds(address) {
                return ControlFlow::Continue(());
            }
            let mut found = Object::default();
            if let Some((start, end, _)) = object.segments(libc::PT_GNU_EH_FRAME).next() {
                found.hdr = (start, end - start);
            }
            for (start, end, _) in object.segments(libc::PT_LOAD).take(found.loads.len()) {
                found.loads[found.load_count] = (start, end);
                found.load_count += 1;
            }
            ControlFlow::Break(found)
        });
        (found, unloads)
    }

    /// Storage of `gimli`'s evaluation context on the stack: no allocation while walking.
    struct OnStack;

    impl UnwindContextStorage<usize> for OnStack {
        type Rules = [(Register, RegisterRule<usize>); 16];
        type Stack = [UnwindTableRow<usize, Self>; 4];
    }

    /// Computes the rule at `address` from its object's call-frame information; also returns the loader's unload
    /// count.
    #[cold]
    #[inline(never)]
    fn compute(address: usize) -> (Result<Rule, Miss>, u64) {
        let (object, unloads) = object_of(address);
        (object.ok_or(Miss::NoInfo).and_then(|object| rule_in(&object, address)), unloads)
    }

    /// The rule at `address`, from the call-frame information of `object`, which holds it.
    fn rule_in(object: &Object, address: usize) -> Result<Rule, Miss> {
        if object.hdr.0 == 0 {
            return Err(Miss::Unsupported);
        }
        // SAFETY: the `PT_GNU_EH_FRAME` segment of a loaded object is mapped and readable, and stays so while code
        // of that object is on this thread's stack (it is: `address` is one of its frames).
        let hdr = unsafe { core::slice::from_raw_parts(object.hdr.0 as *const u8, object.hdr.1) };
        let bases = BaseAddresses::default().set_eh_frame_hdr(object.hdr.0 as u64);
        let parsed = EhFrameHdr::new(hdr, NativeEndian).parse(&bases, 8).map_err(|_| Miss::Unsupported)?;
        let eh_frame_start = parsed.eh_frame_ptr().direct().map_err(|_| Miss::Unsupported)? as usize;
        let table = parsed.table().ok_or(Miss::Unsupported)?;
        let segment = object.loads[..object.load_count]
            .iter()
            .find(|(start, end)| (*start..*end).contains(&eh_frame_start))
            .ok_or(Miss::Unsupported)?;
        // SAFETY: `.eh_frame` lies in a loaded segment of the object, mapped and readable up to the segment's end
        // while the object's code runs on this thread's stack.
        let eh_frame_bytes =
            unsafe { core::slice::from_raw_parts(eh_frame_start as *const u8, segment.1 - eh_frame_start) };
        let eh_frame = EhFrame::new(eh_frame_bytes, NativeEndian);
        let bases = bases.set_eh_frame(eh_frame_start as u64);
        let fde = match table.fde_for_address(&eh_frame, &bases, address as u64, EhFrame::cie_from_offset) {
            Ok(fde) => fde,
            Err(gimli::Error::NoUnwindInfoForAddress) => return Err(Miss::NoInfo),
            Err(_) => return Err(Miss::Unsupported),
        };
        if fde.is_signal_trampoline() {
            return Err(Miss::Unsupported);
        }
        let mut context = UnwindContext::<usize, OnStack>::new_in();
        let row = fde.unwind_info_for_address(&eh_frame, &bases, &mut context, address as u64).map_err(|error| {
            if error == gimli::Error::NoUnwindInfoForAddress { Miss::NoInfo } else { Miss::Unsupported }
        })?;
        rule_of(row)
    }

    /// The simple shape of an unwind table row, if it has one.
    fn rule_of(row: &UnwindTableRow<usize, OnStack>) -> Result<Rule, Miss> {
        let CfaRule::RegisterAndOffset { register, offset } = *row.cfa() else { return Err(Miss::Unsupported) };
        let cfa_from_bp = match register {
            X86_64::RSP => false,
            X86_64::RBP => true,
            _ => return Err(Miss::Unsupported),
        };
        let cfa_offset = i32::try_from(offset).map_err(|_| Miss::Unsupported)?;
        let ra_offset = match row.register(X86_64::RA) {
            Some(RegisterRule::Offset(offset)) => Some(i8::try_from(offset).map_err(|_| Miss::Unsupported)?),
            None | Some(RegisterRule::Undefined) => None,
            Some(_) => return Err(Miss::Unsupported),
        };
        let bp_offset = match row.register(X86_64::RBP) {
            Some(RegisterRule::Offset(offset)) => Some(i16::try_from(offset).map_err(|_| Miss::Unsupported)?),
            None | Some(RegisterRule::SameValue | RegisterRule::Undefined) => None,
            Some(_) => return Err(Miss::Unsupported),
        };
        Ok(Rule { cfa_from_bp, cfa_offset, ra_offset, bp_offset })
    }

    #[cfg(test)]
    mod tests {
        use super::Rule;
        use core::mem::MaybeUninit;

        /// A walk's buffer, initialised so that the tests may read all of it.
        fn buffer<const N: usize>() -> [MaybeUninit<usize>; N] {
            [MaybeUninit::new(0); N]
        }

        /// The addresses in a [`buffer`].
        fn read(buffer: &[MaybeUninit<usize>]) -> Vec<usize> {
            // SAFETY: every buffer here comes from `buffer`, which initialises every element.
            buffer.iter().map(|ip| unsafe { ip.assume_init() }).collect()
        }

        /// Walks from here with both unwinders and checks that they agree on every caller.
        #[inline(never)]
        fn both_agree(depth: usize) -> usize {
            let mut ours = buffer::<128>();
            let len = crate::unwind::capture(&mut ours, 0).expect("the caching walker handles this stack");
            let ours = read(&ours);
            let mut theirs = Vec::new();
            backtrace::trace(|frame| {
                // The system unwinder reports the end of the stack as a last frame at address 0.
                if !frame.ip().is_null() {
                    theirs.push(frame.ip() as usize);
                }
                true
            });
            // `ours[0]` returns into this function, a different call site than the system unwinder's; from the
            // caller of this function on, both must list the same return addresses down to the end.
            let ours = &ours[1..len];
            let at = theirs.iter().position(|&ip| ip == ours[0]).expect("the system unwinder saw our first caller");
            assert_eq!(ours, &theirs[at..], "depth {depth}");
            assert!(ours.len() > depth, "{} frames for {depth} nested calls", ours.len());
            ours.len()
        }

        #[inline(never)]
        fn nested(depth: usize, buffer: &mut [u8]) -> usize {
            // A frame of varying size, and a loop of closures and iterators around the calls.
            let mut local = [0u8; 512];
            local[depth % 512] = buffer.first().copied().unwrap_or(1);
            if depth == 0 {
                return (0..1).map(|_| both_agree(local.len() / 512)).sum();
            }
            let mut total = 0;
            for item in [depth - 1].iter().copied() {
                total += nested(item, &mut local[..depth % 64 + 1]);
            }
            std::hint::black_box(total)
        }

        #[test]
        fn the_walker_finds_the_same_frames_as_the_system_unwinder() {
            for depth in [0, 1, 5, 30] {
                nested(depth, &mut [3]);
            }
            // On a spawned thread, the stack ends in the thread's start routine.
            std::thread::spawn(|| nested(10, &mut [7])).join().unwrap();
        }

        #[test]
        fn the_walk_stops_past_the_limit_and_when_full() {
            let mut all = buffer::<128>();
            let len = crate::unwind::capture(&mut all, 0).unwrap();
            assert!(len > 4);
            let mut three = buffer::<3>();
            assert_eq!(crate::unwind::capture(&mut three, 0), Some(3));
            // A limit just above this frame's locals: the walk keeps this test's frame and stops there.
            let marker = 0u8;
            let limit = core::ptr::from_ref(&marker) as usize;
            let mut limited = buffer::<128>();
            let kept = crate::unwind::capture(&mut limited, limit).unwrap();
            assert_eq!(kept, 1, "{:x?}", &read(&limited)[..kept]);
        }

        /// A way down to [`probe`].
        type Probe = fn(&mut [MaybeUninit<usize>]) -> crate::unwind::Cached;

        #[inline(never)]
        fn probe(ips: &mut [MaybeUninit<usize>]) -> crate::unwind::Cached {
            let cached = crate::unwind::capture_cached(ips, 0);
            std::hint::black_box(cached)
        }

        #[inline(never)]
        fn through_a(ips: &mut [MaybeUninit<usize>]) -> crate::unwind::Cached {
            std::hint::black_box(probe(ips))
        }

        #[inline(never)]
        fn through_b(ips: &mut [MaybeUninit<usize>]) -> crate::unwind::Cached {
            std::hint::black_box(probe(ips))
        }

        #[test]
        fn a_remembered_walk_is_recognised_only_on_the_same_stack() {
            use crate::unwind::{Cached, capture, remember};
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

        #[inline(never)]
        fn nested_probe(depth: usize, ips: &mut [MaybeUninit<usize>]) -> crate::unwind::Cached {
            if depth == 0 { probe(ips) } else { std::hint::black_box(nested_probe(depth - 1, ips)) }
        }

        #[test]
        fn rules_survive_packing() {
            for rule in [
                Rule { cfa_from_bp: false, cfa_offset: 8, ra_offset: Some(-8), bp_offset: None },
                Rule { cfa_from_bp: true, cfa_offset: 16, ra_offset: Some(-8), bp_offset: Some(-16) },
                Rule { cfa_from_bp: false, cfa_offset: i32::MAX, ra_offset: None, bp_offset: Some(i16::MIN) },
                Rule { cfa_from_bp: true, cfa_offset: -4, ra_offset: Some(i8::MIN), bp_offset: Some(i16::MAX) },
            ] {
                assert_eq!(Rule::unpack(rule.pack()), Some(rule));
            }
            assert_eq!(Rule::unpack(0), None);
        }
    }
}
