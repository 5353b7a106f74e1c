//! The live table: the entries of the blocks the profiler must recognise when they are freed or reallocated, shared
//! by every thread.
//!
//! A block has an entry when it was sampled, when a scope owns (part of) it, or when the profiler allocated it for
//! itself. Most blocks have none, so every free first reads one bit of a filter, which answers "certainly absent"
//! for them: the filter is 4 KiB, small enough to stay in the first-level cache of a thread that frees often. Only
//! possible members lock a shard and probe. The shards are spin-locked hash maps whose memory comes from the system
//! allocator directly ([`RawSystem`]).
//!
//! A filter slot belongs to one shard (its high bits are the shard's number), so the slot's count of entries, and
//! its bit, which is set while the count is not zero, only change under that shard's lock. A count is a byte (a
//! test's process touches all of them, 8 pages); one that reaches its limit stops, and its bit stays set.
//!
//! The entries a thread keeps in its nursery while it has a scope open move here when the scope closes
//! ([`insert_moved`]); `entries` looks in the nurseries before it looks here.
//!
//! Nearly every entry of a leak test is of one shape: a block its scope allocated and recorded with certainty
//! ([`Entry::owned_block`]). A shard keeps those in a map of their own, in 32 bytes with their key where an entry
//! takes 72, and every other entry in a map of whole entries: a test that keeps hundreds of thousands of blocks
//! live pays 37 to 75 bytes of table for each (the map's load), where whole entries cost twice that and more. An
//! address has an entry in at most one of the two.

use super::entry::Entry;
use crate::base::ids::{ScopeId, StackId};
use crate::base::raw::RawSystem;
use crate::base::sync::SpinLock;
use core::hash::{BuildHasherDefault, Hasher};
use core::sync::atomic::{AtomicU8, AtomicU64, Ordering};

const SHARD_BITS: u32 = 6;
const SHARDS: usize = 1 << SHARD_BITS;
/// 32 Ki filter slots: a 4 KiB bitset, sparse enough for the thousands of sampled blocks a heap of a few GiB holds
/// at the default interval (and for the blocks a leak-test scope owns).
const FILTER_BITS: u32 = 15;
const SLOTS: usize = 1 << FILTER_BITS;

/// Hashes pointers for the shard maps (a different mix than [`spread`], so keys in one shard stay well spread).
#[derive(Default)]
struct PtrHasher(u64);

impl Hasher for PtrHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3);
        }
    }

    fn write_usize(&mut self, value: usize) {
        let z = (value as u64 ^ 0x2545_f491_4f6c_dd1d).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = z ^ (z >> 29);
    }
}

type Map<V> = hashbrown::HashMap<usize, V, BuildHasherDefault<PtrHasher>, RawSystem>;

/// An [`Entry::owned_block`]: its size, its scope and its stack ([packed](StackId::pack)).
#[derive(Clone, Copy)]
struct OwnedEntry {
    size: usize,
    scope: ScopeId,
    stack: u32,
}

const _: () = assert!(size_of::<(usize, OwnedEntry)>() == 32, "an owned block's entry and key take 32 bytes");

impl OwnedEntry {
    /// `entry` as an owned block, when it is one.
    #[inline]
    fn of(entry: &Entry) -> Option<Self> {
        let (scope, stack) = entry.owned_block_parts()?;
        Some(Self { size: entry.size, scope, stack: StackId::pack(stack) })
    }

    #[inline]
    fn entry(self) -> Entry {
        Entry::owned_block(self.size, Some(self.scope), StackId::unpack(self.stack))
    }
}

/// One shard's entries: owned blocks apart (see the module's documentation).
struct Shard {
    owned_blocks: Map<OwnedEntry>,
    others: Map<Entry>,
}

impl Shard {
    fn new() -> Self {
        Self {
            owned_blocks: Map::with_hasher_in(BuildHasherDefault::default(), RawSystem),
            others: Map::with_hasher_in(BuildHasherDefault::default(), RawSystem),
        }
    }

    /// Records `entry` for `ptr`; returns the entry it replaces, if the address had one.
    #[inline]
    fn insert(&mut self, ptr: usize, entry: Entry) -> Option<Entry> {
        match OwnedEntry::of(&entry) {
            Some(block) => {
                let stale = self.owned_blocks.insert(ptr, block).map(OwnedEntry::entry);
                stale.or_else(|| self.remove_other(ptr))
            }
            None => {
                let stale = self.others.insert(ptr, entry);
                if stale.is_some() || self.owned_blocks.is_empty() { stale } else { self.remove_owned_block(ptr) }
            }
        }
    }

    #[inline(always)]
    fn remove(&mut self, ptr: usize) -> Option<Entry> {
        if !self.owned_blocks.is_empty()
            && let Some(entry) = self.remove_owned_block(ptr)
        {
            return Some(entry);
        }
        self.remove_other(ptr)
    }

    /// Removes `ptr`'s entry from the owned blocks. Taking the last one clears the map, which also forgets the slots
    /// removals left marked as deleted: a removal from a full group leaves a mark that counts against the room until
    /// the map grows, so a map filled and emptied again and again (a test run in a loop) would double its room.
    #[inline]
    fn remove_owned_block(&mut self, ptr: usize) -> Option<Entry> {
        // Cleared while it still holds the entry: hashbrown's `clear` returns at once from a map without entries,
        // leaving its marks (removing first, then clearing, kept W3's maps at twice their room).
        if self.owned_blocks.len() == 1 {
            let block = *self.owned_blocks.get(&ptr)?;
            self.owned_blocks.clear();
            return Some(block.entry());
        }
        self.owned_blocks.remove(&ptr).map(OwnedEntry::entry)
    }

    /// Removes `ptr`'s entry from the other entries (no probe while there are none: most leak tests).
    #[inline]
    fn remove_other(&mut self, ptr: usize) -> Option<Entry> {
        if self.others.is_empty() { None } else { self.others.remove(&ptr) }
    }

    /// Every entry that names scope `from` names `to`.
    fn hand_over(&mut self, from: ScopeId, to: ScopeId) {
        for block in self.owned_blocks.values_mut().filter(|block| block.scope == from) {
            block.scope = to;
        }
        for entry in self.others.values_mut().filter(|entry| from == entry.scope) {
            entry.scope = Some(to);
        }
    }

    fn for_each(&self, mut f: impl FnMut(usize, &Entry)) {
        self.owned_blocks.iter().for_each(|(&ptr, block)| f(ptr, &block.entry()));
        self.others.iter().for_each(|(&ptr, entry)| f(ptr, entry));
    }
}

static SHARD_MAPS: [SpinLock<Option<Shard>>; SHARDS] = [const { SpinLock::new(None) }; SHARDS];
/// The filter's bits: set while some entry's pointer falls in the slot. Read without locking on every free.
static FILTER: [AtomicU64; SLOTS / 64] = [const { AtomicU64::new(0) }; SLOTS / 64];
/// How many entries fall in each slot; changed only under the lock of the slot's shard. A byte each: a short-lived
/// process touches every page of them (the slots are spread over all of them), 8 pages rather than 32 of 4-byte
/// counts. A count that reaches [`STUCK`] stays there.
static COUNTS: [AtomicU8; SLOTS] = [const { AtomicU8::new(0) }; SLOTS];

/// The count of a slot that had that many entries at once: it is no longer counted, and the slot's filter bit stays
/// set for the process's life (a free of a block in the slot probes its shard, as one of a possible member does).
/// Uniformly spread, that takes some 8 million entries at once.
const STUCK: u8 = u8::MAX;

/// One bit per low byte of a scope's id (a scope's slot, see `hot::scope`): set when an entry the scope owns may be
/// in the table. A closing nested scope that never put one here hands its blocks over without reading the table.
static OWNERS: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

/// The word and bit of [`OWNERS`] for scope `id`.
#[inline]
fn owner_bit(id: ScopeId) -> (&'static AtomicU64, u64) {
    let low = id.bits() as usize & 0xff;
    (&OWNERS[low / 64], 1 << (low % 64))
}

/// Notes that `entry`, going into the table, may be owned by its scope.
#[inline]
fn note_owner(entry: &Entry) {
    if let Some(owner) = entry.scope {
        let (word, bit) = owner_bit(owner);
        if word.load(Ordering::Relaxed) & bit == 0 {
            word.fetch_or(bit, Ordering::Relaxed);
        }
    }
}

/// Scope `id` opens: no entry of the table is its yet. (An entry of an older scope of the same slot may set the bit
/// again: then a closing scope reads the table for nothing.)
pub(crate) fn forget_owner(id: ScopeId) {
    let (word, bit) = owner_bit(id);
    word.fetch_and(!bit, Ordering::Relaxed);
}

/// The blocks scope `from` owns are `to`'s now: every entry of the table that names `from` names `to` (under each
/// shard's lock, so a free or a move never sees half of it). Reads the table only if `from` may own an entry here.
pub(crate) fn hand_over(from: ScopeId, to: ScopeId) {
    let (word, bit) = owner_bit(from);
    if word.load(Ordering::Relaxed) & bit == 0 {
        return;
    }
    let (to_word, to_bit) = owner_bit(to);
    to_word.fetch_or(to_bit, Ordering::Relaxed);
    for shard in &SHARD_MAPS {
        if let Some(shard) = shard.lock().as_mut() {
            shard.hand_over(from, to);
        }
    }
}

/// Spreads a pointer into (shard, filter slot); the slot's high bits are the shard.
#[inline]
fn spread(ptr: usize) -> (usize, usize) {
    let z = (ptr as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let slot = (z >> (64 - FILTER_BITS)) as usize;
    (slot >> (FILTER_BITS - SHARD_BITS), slot)
}

/// Whether the filter says `slot` may hold an entry.
#[inline]
fn slot_may_hold(slot: usize) -> bool {
    FILTER[slot / 64].load(Ordering::Relaxed) & (1 << (slot % 64)) != 0
}

/// Whether `ptr` may have an entry; `false` is certain. One bit read, for the free path.
#[inline(always)]
pub(crate) fn may_hold(ptr: usize) -> bool {
    slot_may_hold(spread(ptr).1)
}

/// Records `entry` for `ptr`, replacing any stale entry for the same address.
pub(crate) fn insert(ptr: usize, entry: Entry) {
    note_owner(&entry);
    let (shard, slot) = spread(ptr);
    let mut map = SHARD_MAPS[shard].lock();
    let map = map.get_or_insert_with(Shard::new);
    if map.insert(ptr, entry).is_none() && bump(slot, 1) == 0 {
        // Set while the shard is locked, before the pointer is handed to anyone: a free of `ptr` can only come
        // after the allocation returned, so it always sees the bit.
        set_bit(slot, true);
    }
}

/// Records `entry` for `ptr` as it moves out of a nursery: inserted under the shard's lock, then `clear_word`
/// clears the nursery's slot before the lock is released. When it fails, the thread that cleared the slot first has
/// freed the block, and the entry is taken back out.
pub(crate) fn insert_moved(ptr: usize, entry: Entry, clear_word: impl FnOnce() -> bool) {
    note_owner(&entry);
    let (shard, slot) = spread(ptr);
    let mut map = SHARD_MAPS[shard].lock();
    let map = map.get_or_insert_with(Shard::new);
    let stale = map.insert(ptr, entry);
    if stale.is_none() && bump(slot, 1) == 0 {
        set_bit(slot, true);
    }
    if !clear_word() {
        match stale {
            Some(stale) => {
                map.insert(ptr, stale);
            }
            None => {
                map.remove(ptr);
                if bump(slot, -1) == 1 {
                    set_bit(slot, false);
                }
            }
        }
    }
}

/// Removes and returns the entry for `ptr`, if the live table has one.
#[inline]
pub(crate) fn remove(ptr: usize) -> Option<Entry> {
    let (shard, slot) = spread(ptr);
    if !slot_may_hold(slot) {
        return None;
    }
    remove_locked(ptr, shard, slot)
}

/// [`remove`] past the filter: locks the shard and probes.
#[cold]
fn remove_locked(ptr: usize, shard: usize, slot: usize) -> Option<Entry> {
    let mut map = SHARD_MAPS[shard].lock();
    let entry = map.as_mut()?.remove(ptr)?;
    if bump(slot, -1) == 1 {
        set_bit(slot, false);
    }
    Some(entry)
}

/// Adds `by` to the count of `slot`, unless it is [`STUCK`]; returns the count before. Only under the lock of the
/// slot's shard, the count's only writer then: a plain read and write, no locked instruction.
fn bump(slot: usize, by: i8) -> u8 {
    let count = COUNTS[slot].load(Ordering::Relaxed);
    if count != STUCK {
        COUNTS[slot].store(count.wrapping_add_signed(by), Ordering::Relaxed);
    }
    count
}

/// Sets or clears the filter bit of `slot`. Only under the lock of the slot's shard: the 64 slots of a filter word
/// belong to one shard (a shard has `SLOTS / SHARDS` consecutive slots, a multiple of 64), so the word's only
/// writer is the holder of that lock.
fn set_bit(slot: usize, on: bool) {
    let word = &FILTER[slot / 64];
    let bits = word.load(Ordering::Relaxed);
    let bit = 1 << (slot % 64);
    word.store(if on { bits | bit } else { bits & !bit }, Ordering::Relaxed);
}

const _: () = assert!((SLOTS / SHARDS).is_multiple_of(64), "a filter word must belong to one shard");

/// Takes every shard's lock, in order, before the process forks (see `hot::fork`): no path holds two at once.
#[cfg(unix)]
pub(crate) fn lock_for_fork() {
    SHARD_MAPS.iter().for_each(SpinLock::lock_for_fork);
}

/// Releases the locks [`lock_for_fork`] took, in the parent and in the child.
///
/// # Safety
///
/// The calling thread took the locks with [`lock_for_fork`] (in a child: the thread that forked it did).
#[cfg(unix)]
pub(crate) unsafe fn unlock_after_fork() {
    for shard in &SHARD_MAPS {
        // SAFETY: the caller took every shard's lock with `lock_for_fork`, as this function's contract says.
        unsafe { shard.unlock_after_fork() };
    }
}

/// Calls `f` with every entry of the live table, shard by shard, each under its shard's lock: `f` must not
/// allocate through the global allocator (raw-system memory is fine).
pub(crate) fn for_each_at(mut f: impl FnMut(usize, &Entry)) {
    for shard in &SHARD_MAPS {
        if let Some(shard) = shard.lock().as_ref() {
            shard.for_each(&mut f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Entry, for_each_at, hand_over, insert, insert_moved, may_hold, remove};
    use crate::base::ids::{ScopeId, StackId};
    use crate::hot::live::Sample;
    use crate::hot::sampler::Weight;
    use core::num::NonZeroUsize;
    use std::time::Instant;

    /// Addresses no allocator hands out in this test binary (whose global allocator is not ying's): no free
    /// reaches them.
    const BASE: usize = 0x7ead_0000_0000;

    fn scope(bits: u64) -> ScopeId {
        ScopeId::from_bits(bits).unwrap()
    }

    /// What an entry says, to compare two.
    fn says(entry: Option<Entry>) -> Option<String> {
        entry.map(|entry| format!("{entry:?}"))
    }

    fn sampled(size: usize) -> Entry {
        let weight = Weight::Sampled(NonZeroUsize::new(4096).unwrap());
        let sample = Sample { stack: StackId::new(7), weight, born: Some(Instant::now()) };
        Entry { sample: Some(sample), ..Entry::untracked(size) }
    }

    /// A slot's count is a byte: one that reached its limit stops counting, and its filter bit stays set, so no
    /// entry of the slot is ever missed; below it, the bit goes when the slot's last entry does.
    #[test]
    fn a_slot_that_held_as_many_entries_as_its_count_can_say_keeps_its_bit() {
        let slot_of = |ptr: usize| super::spread(ptr).1;
        // Addresses of one slot that no other test's address falls in (the other tests see their bits go).
        let others = [0, 0x40, 0x80, 0xc0, 0x400, 0x1000, 0x1040].map(|offset| slot_of(BASE + offset));
        let base = BASE + 0x10_0000_0000;
        let target = (0..).map(|n: usize| slot_of(base + n * 16)).find(|slot| !others.contains(slot)).unwrap();
        let ptrs: Vec<usize> =
            (0..).map(|n: usize| base + n * 16).filter(|&ptr| slot_of(ptr) == target).take(300).collect();
        let entry = Entry::owned_block(16, Some(scope(0x1_0005)), None);
        insert(ptrs[0], entry);
        insert(ptrs[1], entry);
        assert!(remove(ptrs[0]).is_some() && may_hold(ptrs[1]));
        assert!(remove(ptrs[1]).is_some() && !may_hold(ptrs[1]), "the bit goes with the slot's last entry");
        for &ptr in &ptrs {
            insert(ptr, entry);
        }
        assert_eq!(super::COUNTS[target].load(core::sync::atomic::Ordering::Relaxed), super::STUCK);
        for &ptr in &ptrs[1..] {
            assert!(remove(ptr).is_some());
        }
        assert!(may_hold(ptrs[0]), "a stuck slot keeps its bit while its entries come and go");
        assert_eq!(remove(ptrs[0]).map(|entry| entry.size), Some(16), "and its last entry is found");
        assert!(may_hold(ptrs[0]), "for the process's life");
    }

    #[test]
    fn an_address_has_one_entry_whichever_shape_it_had_before() {
        let owned = Entry::owned_block(48, Some(scope(0x1_0003)), Some(StackId::new(3)));
        let unsampled = Entry::owned_block(16, Some(scope(0x1_0003)), None);
        for (index, (first, second)) in
            [(owned, sampled(64)), (sampled(64), owned), (owned, unsampled), (sampled(64), sampled(32))]
                .into_iter()
                .enumerate()
        {
            let ptr = BASE + index * 0x40;
            insert(ptr, first);
            assert!(may_hold(ptr));
            insert(ptr, second);
            assert_eq!(says(remove(ptr)), says(Some(second)), "case {index}");
            assert_eq!(says(remove(ptr)), None, "case {index}: the entry replaced is gone too");
            assert!(!may_hold(ptr), "case {index}");
        }
        // A move out of a nursery that loses the race to a free puts back what the address had.
        let (ptr, before) = (BASE + 0x400, sampled(64));
        insert(ptr, before);
        insert_moved(ptr, owned, || false);
        assert_eq!(says(remove(ptr)), says(Some(before)));
        insert_moved(ptr, owned, || false);
        assert_eq!(says(remove(ptr)), None);
    }

    #[test]
    fn a_scope_hands_over_entries_of_either_shape() {
        let (from, to) = (scope(0x2_0005), scope(0x2_0006));
        let owned = Entry::owned_block(48, Some(from), Some(StackId::new(3)));
        let grown = Entry { scope: Some(from), owned: 16, ..Entry::untracked(48) };
        let (first, second) = (BASE + 0x1000, BASE + 0x1040);
        insert(first, owned);
        insert(second, grown);
        hand_over(from, to);
        let mut owners = Vec::new();
        for_each_at(|_, entry| {
            if entry.scope == Some(from) || entry.scope == Some(to) {
                owners.push((entry.scope, entry.owned));
            }
        });
        owners.sort_by_key(|&(_, owned)| owned);
        assert_eq!(owners, [(Some(to), 16), (Some(to), 48)]);
        assert_eq!(says(remove(first)), says(Some(Entry { scope: Some(to), ..owned })));
        assert_eq!(says(remove(second)), says(Some(Entry { scope: Some(to), ..grown })));
    }
}
