//! Call-frame rules: how to recover a caller's registers at an instruction address, computed once per address
//! with `gimli` from the object's `.eh_frame_hdr` search table and kept in a fixed table for the life of the
//! process (cleared when the loader unloads an object, and when the functions where stacks end become known).

use crate::base::sync::SpinLock;
use core::ops::ControlFlow;
use core::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering, fence};
use gimli::{
    BaseAddresses, CfaRule, EhFrame, EhFrameHdr, NativeEndian, Register, RegisterRule, UnwindContext,
    UnwindContextStorage, UnwindSection, UnwindTableRow, X86_64,
};

/// How to recover the caller's registers at one instruction address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Rule {
    /// The CFA is `rbp + cfa_offset` (else `rsp + cfa_offset`).
    pub(super) cfa_from_bp: bool,
    pub(super) cfa_offset: i32,
    /// The return address is saved at `CFA + ra_offset`; `None`: the outermost frame (no return address).
    pub(super) ra_offset: Option<i8>,
    /// The caller's `rbp` is saved at `CFA + bp_offset`; `None`: the callee did not change it.
    pub(super) bp_offset: Option<i16>,
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
pub(super) enum Miss {
    /// No call-frame information covers the address: the stack ends here.
    NoInfo,
    /// The information needs the system unwinder.
    Unsupported,
}

/// 1 Ki slots of 16 bytes: 4 pages, each touched (and cleared once, when the functions where stacks end become
/// known) by a test's process that lives a few milliseconds, where 4 Ki slots cost a tokio-util test's process 30
/// page faults more and 16 Ki more again. A walk seen before is remembered whole (`remembered`, the nursery's walk
/// tree), so the rules are looked up for new walks only, and a rule a slot lost is computed again from the
/// call-frame information: the real programs' workloads W6 and W7 take the same time with 4 Ki slots.
const CACHE_SLOTS: usize = 1024;
/// Slots an address may take, side by side in one cache line: with one, a tokio-util test's process computed 39 of
/// its 266 rules twice, two addresses taking turns at a slot, and lost them for the processes after it (`kept`).
const WAYS: usize = 4;
/// Sets of [`WAYS`] slots.
const SETS: usize = CACHE_SLOTS / WAYS;

/// One cached rule: the address it is for, and the packed rule.
struct Slot {
    address: AtomicUsize,
    rule: AtomicU64,
}

/// Rules by address, in sets of [`WAYS`] slots. Readers take no lock: a slot is read address, rule, address, and
/// used only when both reads of the address agree (writers, one at a time under [`WRITER`], clear the address
/// first).
static CACHE: [Slot; CACHE_SLOTS] =
    [const { Slot { address: AtomicUsize::new(0), rule: AtomicU64::new(0) } }; CACHE_SLOTS];
/// The way of each set a writer replaces next when the set is full.
static NEXT_WAY: [AtomicU8; SETS] = [const { AtomicU8::new(0) }; SETS];
/// Serialises writers of [`CACHE`], and holds the loader's unload count the cache was filled under.
static WRITER: SpinLock<u64> = SpinLock::new(0);

/// How many times [`CACHE`] was cleared: remembered walks are valid only under the count they were made at.
pub(super) static FLUSHES: AtomicU64 = AtomicU64::new(0);

/// Rules computed and kept in [`CACHE`] in this process (for the tests of `kept`).
#[cfg(test)]
static COMPUTED: AtomicUsize = AtomicUsize::new(0);

/// Most functions [`end_stacks_at`] keeps; any past them are walked through as before.
const STACK_ENDS: usize = 64;
/// The address ranges (start, end) of the functions where walks end ([`end_stacks_at`]): the first
/// [`STACK_END_COUNT`] are set, and never change once counted.
static STACK_ENDS_AT: [(AtomicUsize, AtomicUsize); STACK_ENDS] =
    [const { (AtomicUsize::new(0), AtomicUsize::new(0)) }; STACK_ENDS];
static STACK_END_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Ends every walk from now on at a frame of one of the functions in `ranges` (start and end addresses), that
/// frame included, as if it were the outermost: a thread's entry, past which lie only the runtime's and the C
/// library's start-up frames, the same on every stack of the thread. Takes effect once; later calls change nothing.
pub(crate) fn end_stacks_at(ranges: impl IntoIterator<Item = (usize, usize)>) {
    let mut filled_under = WRITER.lock();
    if STACK_END_COUNT.load(Ordering::Relaxed) != 0 {
        return;
    }
    let mut count = 0;
    for ((start, end), slot) in ranges.into_iter().zip(&STACK_ENDS_AT) {
        slot.0.store(start, Ordering::Relaxed);
        slot.1.store(end, Ordering::Relaxed);
        count += 1;
    }
    STACK_END_COUNT.store(count, Ordering::Release);
    // The rules kept so far walk through those functions.
    clear(&mut filled_under, None);
}

/// Whether a walk ends at a frame running `address` (see [`end_stacks_at`]).
fn ends_stack(address: usize) -> bool {
    let count = STACK_END_COUNT.load(Ordering::Acquire);
    STACK_ENDS_AT[..count]
        .iter()
        .any(|(start, end)| (start.load(Ordering::Relaxed)..end.load(Ordering::Relaxed)).contains(&address))
}

/// Empties [`CACHE`] under the writers' lock (whose count becomes `unloads`, when given) and invalidates every
/// thread's remembered walks, which were made with the old rules.
fn clear(filled_under: &mut u64, unloads: Option<u64>) {
    for slot in &CACHE {
        slot.address.store(0, Ordering::Relaxed);
    }
    if let Some(unloads) = unloads {
        *filled_under = unloads;
    }
    FLUSHES.fetch_add(1, Ordering::Release);
}

/// The set of slots `address` may take, and its index.
fn set_of(address: usize) -> (usize, &'static [Slot]) {
    let hash = (address as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let set = (hash >> (64 - SETS.trailing_zeros())) as usize;
    (set, &CACHE[set * WAYS..(set + 1) * WAYS])
}

/// The address a slot holds a word for and the word, read without a lock (see [`CACHE`]): `None` for an empty
/// slot, or one a writer changed meanwhile.
#[inline]
fn read(slot: &Slot) -> Option<(usize, u64)> {
    let address = slot.address.load(Ordering::Acquire);
    let word = slot.rule.load(Ordering::Relaxed);
    fence(Ordering::Acquire);
    (address != 0 && slot.address.load(Ordering::Relaxed) == address).then_some((address, word))
}

/// The word a slot of `set` holds for `address`, if one does.
#[inline]
fn cached(set: &[Slot], address: usize) -> Option<u64> {
    set.iter().find_map(|slot| read(slot).filter(|&(seen, _)| seen == address).map(|(_, word)| word))
}

/// Keeps `word` for `address` in its set: in the slot that has it already, else an empty one, else the set's next
/// way. The caller holds [`WRITER`].
fn insert(address: usize, word: u64) {
    let (set, slots) = set_of(address);
    let held = slots.iter().position(|slot| slot.address.load(Ordering::Relaxed) == address);
    let way =
        held.or_else(|| slots.iter().position(|slot| slot.address.load(Ordering::Relaxed) == 0)).unwrap_or_else(|| {
            let next = &NEXT_WAY[set];
            let way = usize::from(next.load(Ordering::Relaxed)) % WAYS;
            next.store(((way + 1) % WAYS) as u8, Ordering::Relaxed);
            way
        });
    let slot = &slots[way];
    slot.address.store(0, Ordering::Relaxed);
    fence(Ordering::Release);
    slot.rule.store(word, Ordering::Relaxed);
    slot.address.store(address, Ordering::Release);
}

/// The rule at `address`: from the table, else computed and kept there.
pub(super) fn rule_for(address: usize) -> Result<Rule, Miss> {
    if let Some(word) = cached(set_of(address).1, address) {
        if let Some(rule) = Rule::unpack(word) {
            return Ok(rule);
        }
        if word & Rule::NO_INFO != 0 {
            return Err(Miss::NoInfo);
        }
    }
    let ends = STACK_END_COUNT.load(Ordering::Acquire);
    let (found, unloads) = compute(address);
    let word = match found {
        Ok(rule) => rule.pack(),
        // Where a stack ends (often in code without call-frame information, such as a thread's or the
        // process's entry) is met on every walk that gets there: remembered too.
        Err(Miss::NoInfo) => Rule::NO_INFO,
        Err(Miss::Unsupported) => return found,
    };
    let mut filled_under = WRITER.lock();
    if STACK_END_COUNT.load(Ordering::Relaxed) != ends {
        // Computed before the functions where stacks end were known: used, not kept.
        return found;
    }
    if *filled_under != unloads {
        // An object was unloaded since the cached rules were computed: they may describe code that is gone.
        clear(&mut filled_under, Some(unloads));
    }
    insert(address, word);
    #[cfg(test)]
    COMPUTED.fetch_add(1, Ordering::Relaxed);
    found
}

/// Whether `word` is what [`CACHE`] keeps for an address: a rule, or "no call-frame information".
fn is_kept_word(word: u64) -> bool {
    Rule::unpack(word).is_some() || word == Rule::NO_INFO
}

/// Calls `f(address, word)` with each rule in [`CACHE`] but those of frames where stacks end (which depend on what
/// this process was told, see [`end_stacks_at`]).
pub(super) fn each(mut f: impl FnMut(usize, u64)) {
    for (address, word) in CACHE.iter().filter_map(read) {
        if is_kept_word(word) && !ends_stack(address) {
            f(address, word);
        }
    }
}

/// Puts `rules` (address, word), which [`each`] gave in another process for the same code at the same offsets,
/// into [`CACHE`]; `unloads` is the loader's unload count they were placed under. Words that are no rule and
/// frames where stacks end are left out.
pub(super) fn put(rules: impl IntoIterator<Item = (usize, u64)>, unloads: u64) {
    let mut filled_under = WRITER.lock();
    if *filled_under != unloads {
        clear(&mut filled_under, Some(unloads));
    }
    for (address, word) in rules {
        if address != 0 && is_kept_word(word) && !ends_stack(address) {
            insert(address, word);
        }
    }
}

/// Rules computed and kept in this process so far.
#[cfg(test)]
pub(super) fn computed() -> usize {
    COMPUTED.load(Ordering::Relaxed)
}

/// Takes the writers' lock before the process forks (see `hot::fork`).
pub(crate) fn lock_for_fork() {
    WRITER.lock_for_fork();
}

/// Releases the lock [`lock_for_fork`] took, in the parent and in the child.
///
/// # Safety
///
/// The calling thread took the lock with [`lock_for_fork`] (in a child: the thread that forked it did).
pub(crate) unsafe fn unlock_after_fork() {
    // SAFETY: the caller took the lock with `lock_for_fork`, as this function's contract says.
    unsafe { WRITER.unlock_after_fork() };
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
    let found = crate::base::loaded::find_map(|object| {
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
    let rule = object.ok_or(Miss::NoInfo).and_then(|object| rule_in(&object, address));
    // A frame where stacks end has no caller to the walker.
    (rule.map(|rule| if ends_stack(address) { Rule { ra_offset: None, ..rule } } else { rule }), unloads)
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
    use super::{Rule, WRITER, cached, insert, set_of};
    use core::sync::atomic::Ordering;

    #[test]
    fn four_addresses_that_fall_in_one_set_are_all_kept() {
        // Addresses of the first page, which no code lies at, that fall in one set: five.
        let set = set_of(8).0;
        let addresses: Vec<usize> = (1..).map(|n| n * 8).filter(|&address| set_of(address).0 == set).take(5).collect();
        let rule =
            |n: usize| Rule { cfa_from_bp: false, cfa_offset: 8 * n as i32, ra_offset: Some(-8), bp_offset: None };
        // Held throughout: no other thread writes the table meanwhile.
        let _writer = WRITER.lock();
        for (n, &address) in addresses[..4].iter().enumerate() {
            insert(address, rule(n).pack());
        }
        let slots = set_of(8).1;
        let found: Vec<Option<Rule>> =
            addresses.iter().map(|&address| cached(slots, address).and_then(Rule::unpack)).collect();
        let expected: Vec<Option<Rule>> = (0..4).map(|n| Some(rule(n))).chain([None]).collect();
        assert_eq!(found, expected);
        // A fifth takes one of their slots, and the other three stay.
        insert(addresses[4], rule(4).pack());
        let kept = addresses.iter().filter(|&&address| cached(slots, address).is_some()).count();
        assert_eq!(kept, 4);
        for slot in slots {
            if addresses.contains(&slot.address.load(Ordering::Relaxed)) {
                slot.address.store(0, Ordering::Relaxed);
            }
        }
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
