//! The C library's heap, chunk by chunk: the blocks in use that the test did not allocate, through which a root can
//! reach the test's blocks. Each heap is walked from its first chunk by the sizes in the chunks' headers (glibc's
//! layout: a chunk's size is the second word of its header, with the bit "the previous chunk is in use"), so that
//! freed chunks, whose bytes are stale, are never read as pointers.
//!
//! The heaps are the main one (`[heap]`), those of the other arenas (each at a 64 MiB boundary, opening with its
//! size) and the blocks mapped on their own (each opening with its size and the bit that says so). A heap whose
//! chain of sizes does not end where the heap does is left out whole.

use super::memory::{Mapping, Reader, Snapshot};
use crate::base::raw::{RawSystem, RawVec};

const WORD: usize = size_of::<usize>();
const ARENA_HEAP: usize = 64 << 20;
const PREV_INUSE: usize = 1;
const IS_MMAPPED: usize = 2;
const SIZE_BITS: usize = !7;
/// glibc's per-thread cache of freed chunks (`tcache_perthread_struct`: 64 counts, then 64 lists): its lists point
/// at freed chunks, which it keeps looking in use.
const TCACHE_CHUNK: usize = 0x290;
const TCACHE_BINS: usize = 64;

/// The blocks in use of the C library's heaps, `(start, end)` of each one's bytes, sorted.
pub(super) struct Chunks {
    ranges: RawVec<(usize, usize)>,
}

impl Chunks {
    /// Walks the heaps among `mappings`, leaving out those holding a thread's stack pointer (`stacks`).
    pub(super) fn walk(mappings: &[Mapping], stacks: &[usize], reader: &mut Reader) -> Self {
        let mut ranges = RawVec::new_in(RawSystem);
        for mapping in mappings {
            if mapping.path == "[heap]" && mapping.writable {
                Heap::of(reader, mapping.start, mapping.end).walk_from_any(
                    mapping.start,
                    mapping.start + 4096,
                    mapping.end,
                    &mut ranges,
                );
                continue;
            }
            if !mapping.is_anonymous_data() || stacks.iter().any(|&sp| mapping.holds(sp)) {
                continue;
            }
            let mut at = mapping.start;
            while at < mapping.end {
                if at.is_multiple_of(ARENA_HEAP)
                    && let Some(size) = reader.word(at + 2 * WORD)
                    && (4096..=ARENA_HEAP).contains(&size)
                    && at + size <= mapping.end
                {
                    // After the heap's header (and, in an arena's first heap, the arena itself).
                    Heap::of(reader, at, at + size).walk_from_any(at + 4 * WORD, at + 8192, at + size, &mut ranges);
                    at += size.next_multiple_of(4096);
                    continue;
                }
                let correction = reader.word(at).unwrap_or(usize::MAX);
                let header = reader.word(at + WORD).unwrap_or(0);
                let size = header & SIZE_BITS;
                if header & IS_MMAPPED != 0
                    && correction < 4096
                    && correction.is_multiple_of(16)
                    && size.is_multiple_of(4096)
                    && size > 0
                    && at.saturating_add(correction).saturating_add(size) <= mapping.end
                {
                    ranges.push((at + correction + 2 * WORD, at + correction + size));
                    at += correction + size;
                    continue;
                }
                // Nothing of the C library's here: on to the next boundary where an arena's heap may start. (A
                // block mapped on its own that the system merged behind other memory is not found.)
                at = (at / ARENA_HEAP + 1) * ARENA_HEAP;
            }
        }
        ranges.sort_unstable();
        Self { ranges }
    }

    /// The index of the block `word` points into, if any.
    pub(super) fn find(&self, word: usize) -> Option<usize> {
        let index = self.ranges.partition_point(|&(start, _)| start <= word).checked_sub(1)?;
        (word < self.ranges[index].1).then_some(index)
    }

    /// The addresses all blocks lie in, `(start, end)`; `None` without blocks.
    pub(super) fn bounds(&self) -> Option<(usize, usize)> {
        Some((self.ranges.first()?.0, self.ranges.iter().map(|range| range.1).max()?))
    }

    /// How many blocks there are.
    pub(super) fn len(&self) -> usize {
        self.ranges.len()
    }

    /// The bytes of block `index`.
    pub(super) fn range(&self, index: usize) -> (usize, usize) {
        self.ranges[index]
    }
}

/// Most bytes of a heap copied whole: a larger one is read a buffer at a time as its chunks are walked, and its
/// chunks' words are read one chunk at a time by the scan (the standard library's debug information, which a test
/// that printed a backtrace keeps, is tens of MiB the scan does not read).
const MOST_COPIED: usize = 4 << 20;

/// A heap's words: copied once when it is small (and kept by the reader, which serves the reads of its chunks from
/// the copy), else read a buffer at a time.
enum Heap<'a> {
    Copied(&'a Snapshot),
    Read(&'a mut Reader),
}

impl<'a> Heap<'a> {
    /// The heap `[start, end)`, copied when it is at most [`MOST_COPIED`] bytes.
    fn of(reader: &'a mut Reader, start: usize, end: usize) -> Self {
        if end - start <= MOST_COPIED { Self::Copied(reader.snapshot(start, end)) } else { Self::Read(reader) }
    }

    fn word(&mut self, address: usize) -> usize {
        match self {
            Self::Copied(copy) => copy.word(address),
            Self::Read(reader) => reader.word_near(address),
        }
    }

    /// Walks from the first position in `[from, until)` (16-aligned) whose chain of chunks ends at `end`, adding
    /// the chunks in use (and not the cache of freed ones) to `ranges`. One pass over the chain both checks it and
    /// adds its chunks: a heap too large to copy is read once (a test that printed a backtrace keeps tens of MiB
    /// there, and reading them twice was most of what its scan cost).
    fn walk_from_any(&mut self, from: usize, until: usize, end: usize, ranges: &mut RawVec<(usize, usize)>) {
        let mut first = from.next_multiple_of(16);
        while first < until.min(end) {
            let kept = ranges.len();
            if self.add_chain(first, end, ranges) {
                return;
            }
            ranges.truncate(kept);
            first += 16;
        }
    }

    /// Adds the chunks in use of the chain from `first` to `ranges`; returns whether the chunks follow one another
    /// to `end` (or to the two closing chunks an arena's older heap ends with, the last of size 0). When they do
    /// not, what it added is no heap's.
    fn add_chain(&mut self, first: usize, end: usize, ranges: &mut RawVec<(usize, usize)>) -> bool {
        let mut at = first;
        let mut chunks = 0;
        while at < end {
            let size = self.word(at + WORD) & SIZE_BITS;
            if size == 0 {
                return chunks > 1 && end - at <= 64;
            }
            // A size read from memory that holds no chunk can be any word: compared without overflowing.
            if !size.is_multiple_of(16) || size > end - at {
                return false;
            }
            let next = at + size;
            let in_use = next < end && self.word(next + WORD) & PREV_INUSE != 0;
            if in_use && !self.is_free_chunk_cache(at, size) {
                ranges.push((at + 2 * WORD, next));
            }
            at = next;
            chunks += 1;
        }
        at == end && chunks > 1
    }

    /// Whether the chunk at `at` is a thread's cache of freed chunks: its size, counts of at most a few hundred,
    /// and a list for each count that is not zero.
    fn is_free_chunk_cache(&mut self, at: usize, size: usize) -> bool {
        if size != TCACHE_CHUNK {
            return false;
        }
        let user = at + 2 * WORD;
        let counts: Vec<u16> = (0..TCACHE_BINS / 4)
            .flat_map(|index| {
                let word = self.word(user + index * WORD);
                (0..4).map(move |part| (word >> (16 * part)) as u16)
            })
            .collect();
        let lists = user + TCACHE_BINS * 2;
        counts.iter().all(|&count| count <= 1024)
            && (0..TCACHE_BINS).all(|bin| (counts[bin] == 0) == (self.word(lists + bin * WORD) == 0))
    }
}

#[cfg(test)]
mod tests {
    use super::{Heap, MOST_COPIED, PREV_INUSE, Reader, WORD};
    use crate::base::raw::{RawSystem, RawVec};

    #[test]
    fn a_heap_too_large_to_copy_is_walked_a_buffer_at_a_time_to_the_same_chunks_and_kept_nowhere() {
        // A heap of 64 KiB chunks, 16-aligned, larger than a copy may be; every other chunk in use.
        const CHUNK: usize = 64 << 10;
        let chunks = MOST_COPIED / CHUNK + 8;
        let mut words = vec![0usize; (chunks * CHUNK + 16) / WORD];
        let start = (words.as_ptr() as usize).next_multiple_of(16);
        let first = (start - words.as_ptr() as usize) / WORD;
        for chunk in 0..chunks {
            // The size of each chunk, and the bit of the chunk after: whether this one is in use.
            words[first + chunk * CHUNK / WORD + 1] = CHUNK | (usize::from(chunk % 2 == 1) * PREV_INUSE);
        }
        let end = start + chunks * CHUNK;
        std::hint::black_box(&mut words);
        let walk = |heap: &mut Heap<'_>| {
            let mut ranges = RawVec::new_in(RawSystem);
            heap.walk_from_any(start, start + 4096, end, &mut ranges);
            ranges.iter().copied().collect::<Vec<_>>()
        };
        let mut reader = Reader::new();
        let read = walk(&mut Heap::of(&mut reader, start, end));
        assert_eq!(reader.copied_bytes(), 0, "a heap of {} bytes was copied whole", end - start);
        // Read once: each chunk's buffer holds the header of the next.
        assert!(reader.buffered_bytes() < (end - start) * 3 / 2, "{} bytes read", reader.buffered_bytes());
        let copied = walk(&mut Heap::Copied(reader.snapshot(start, end)));
        // The chunks in use are those before a chunk whose header says so: the even ones, the last (which has no
        // chunk after it) left out.
        assert_eq!(read.len(), (0..chunks - 1).filter(|chunk| chunk % 2 == 0).count());
        assert_eq!(read, copied);
        assert_eq!(read[0], (start + 2 * WORD, start + CHUNK));
    }

    #[test]
    fn chunks_that_follow_one_another_to_the_end_are_a_chain_and_any_size_word_is_read_without_overflow() {
        // Three chunks of 32 bytes, each header's size the second of its four words.
        let mut words = vec![0usize; 12];
        for header in [1, 5, 9] {
            words[header] = 32 | PREV_INUSE;
        }
        let (start, end) = (words.as_ptr() as usize, words.as_ptr() as usize + words.len() * WORD);
        let mut reader = Reader::new();
        let mut ranges = RawVec::new_in(RawSystem);
        assert!(Heap::Copied(reader.snapshot(start, end)).add_chain(start, end, &mut ranges));
        // The first two chunks are in use (the chunk after each says so); the last has no chunk after it.
        assert_eq!(ranges.as_slice(), [(start + 2 * WORD, start + 32), (start + 32 + 2 * WORD, start + 64)]);
        // A position that holds no chunk: its "size" is any word, the largest one included.
        words[5] = usize::MAX & !15;
        std::hint::black_box(&mut words);
        assert!(!Heap::Copied(reader.snapshot(start, end)).add_chain(start, end, &mut RawVec::new_in(RawSystem)));
    }
}
