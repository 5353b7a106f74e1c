//! The process's memory as the scan reads it: its mappings (`/proc/self/maps`) and their words, read through the
//! kernel (`process_vm_readv`, else `/proc/self/mem`), which answers an error for a page that is not mapped any
//! more instead of faulting. Words are copied into a buffer mapped apart from the heap, so that no copy of a
//! pointer the scan reads lands in memory the scan reads later. A range read whole once (a heap of a few MiB, whose
//! chunks the scan then reads one by one) is kept: the reads of its words that follow are served from the copy. A
//! larger heap is read a buffer at a time, so that the scan never holds a second copy of a large heap.

use crate::base::raw::{RawSystem, RawVec, zeroed_words};
use std::os::unix::fs::FileExt;

const WORD: usize = size_of::<usize>();
const PAGE: usize = 4096;
/// Words read per call.
const CHUNK: usize = 8192;

/// One mapping of the process, as `/proc/self/maps` lists it.
#[derive(Clone, Debug)]
pub(super) struct Mapping {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) readable: bool,
    pub(super) writable: bool,
    /// The file mapped, `[heap]`, `[stack]`, ...; empty for anonymous memory.
    pub(super) path: String,
}

impl Mapping {
    /// Whether `address` lies in it.
    pub(super) fn holds(&self, address: usize) -> bool {
        (self.start..self.end).contains(&address)
    }

    /// Anonymous memory the process may write: a thread's stack, a heap of the C library's, or memory mapped by
    /// other code.
    pub(super) fn is_anonymous_data(&self) -> bool {
        self.readable && self.writable && self.path.is_empty()
    }
}

/// The process's mappings, in address order.
pub(super) fn mappings() -> Vec<Mapping> {
    let Some(text) = crate::read::tasks::proc_file("/proc/self/maps", 16 * 1024) else { return Vec::new() };
    text.lines().filter_map(parse_mapping).collect()
}

/// One line of `/proc/self/maps`: `start-end perms offset dev inode path`.
fn parse_mapping(line: &str) -> Option<Mapping> {
    let mut fields = line.split_ascii_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let perms = fields.next()?.as_bytes();
    let path = fields.nth(3).map(str::to_owned).unwrap_or_default();
    Some(Mapping {
        start: usize::from_str_radix(start, 16).ok()?,
        end: usize::from_str_radix(end, 16).ok()?,
        readable: perms.first() == Some(&b'r'),
        writable: perms.get(1) == Some(&b'w'),
        path,
    })
}

/// The words of a range of the process, copied at once (the words of pages that could not be read are zero).
pub(super) struct Snapshot {
    start: usize,
    words: RawVec<usize>,
}

impl Snapshot {
    /// The word at `address`, which lies in the range (zero outside it).
    pub(super) fn word(&self, address: usize) -> usize {
        address.checked_sub(self.start).and_then(|offset| self.words.get(offset / WORD)).copied().unwrap_or(0)
    }

    /// The words of `[start, end)` (`start` aligned), when the range lies in the copy.
    fn slice(&self, start: usize, end: usize) -> Option<&[usize]> {
        let first = start.checked_sub(self.start)? / WORD;
        let count = end.saturating_sub(start) / WORD;
        self.words.get(first..first.checked_add(count)?)
    }
}

/// Reads the process's words without ever faulting.
pub(super) struct Reader {
    buffer: RawVec<usize>,
    /// `/proc/self/mem`, once `process_vm_readv` has been refused (a sandbox may forbid it).
    mem: Option<std::fs::File>,
    vm_refused: bool,
    /// This process, which a scan reads (it does not fork while it does).
    pid: libc::pid_t,
    /// The ranges copied whole ([`snapshot`](Self::snapshot)), whose words are read from the copy.
    snapshots: RawVec<Snapshot>,
    /// The range whose words the buffer holds, `(start, bytes)`, for [`word_near`](Self::word_near).
    held: (usize, usize),
    /// Bytes read a buffer at a time.
    #[cfg(test)]
    buffered_bytes: usize,
    /// Reads of the process's memory made.
    #[cfg(test)]
    reads: usize,
}

impl Reader {
    pub(super) fn new() -> Self {
        Self {
            buffer: zeroed_words(CHUNK),
            mem: None,
            vm_refused: false,
            // SAFETY: `getpid` has no preconditions.
            pid: unsafe { libc::getpid() },
            snapshots: RawVec::new_in(RawSystem),
            held: (0, 0),
            #[cfg(test)]
            buffered_bytes: 0,
            #[cfg(test)]
            reads: 0,
        }
    }

    /// Copies the words of `[start, end)` (`start` aligned) at once, and keeps them: the words of the range are read
    /// from the copy from now on.
    pub(super) fn snapshot(&mut self, start: usize, end: usize) -> &Snapshot {
        let count = end.saturating_sub(start) / WORD;
        let mut words = zeroed_words(count);
        let mut at = 0;
        while at < count {
            let wanted = (count - at) * WORD;
            let read = self.read_into(start + at * WORD, &mut words[at..]) / WORD;
            at += read;
            if read * WORD < wanted {
                // The page at `at` cannot be read: its words stay zero, on to the next page.
                at = ((start + at * WORD) & !(PAGE - 1)).saturating_add(PAGE).saturating_sub(start) / WORD;
            }
        }
        self.snapshots.push(Snapshot { start, words });
        self.snapshots.last().expect("a snapshot was just kept")
    }

    /// Bytes read a buffer at a time (by [`word_near`](Self::word_near) and [`words`](Self::words)).
    #[cfg(test)]
    pub(super) fn buffered_bytes(&self) -> usize {
        self.buffered_bytes
    }

    /// Bytes of the process kept copied ([`snapshot`](Self::snapshot)).
    #[cfg(test)]
    pub(super) fn copied_bytes(&self) -> usize {
        self.snapshots.iter().map(|snapshot| snapshot.words.len() * WORD).sum()
    }

    /// The copy that holds `[start, end)`, if one does.
    fn copied(&self, start: usize, end: usize) -> Option<&[usize]> {
        self.snapshots.iter().find_map(|snapshot| snapshot.slice(start, end))
    }

    /// The word at `address`, if it is mapped and readable.
    pub(super) fn word(&mut self, address: usize) -> Option<usize> {
        if !address.is_multiple_of(WORD) {
            return None;
        }
        if let Some(&[word]) = self.copied(address, address + WORD) {
            return Some(word);
        }
        self.paged(address, address + WORD).and_then(|words| words.first().copied())
    }

    /// The word at `address` (aligned), read with the words that follow it: a walk that moves forward through a
    /// range too large to copy whole reads it a buffer at a time. Zero where nothing can be read.
    pub(super) fn word_near(&mut self, address: usize) -> usize {
        let offset = address.wrapping_sub(self.held.0);
        if offset < self.held.1 {
            return self.buffer[offset / WORD];
        }
        let start = address & !(PAGE - 1);
        let read = self.read(start, CHUNK * WORD) / WORD * WORD;
        self.held = (start, read);
        let offset = address - start;
        if offset < read { self.buffer[offset / WORD] } else { 0 }
    }

    /// Calls `f(address, word)` with each aligned word of `[start, end)` that can be read; unmapped pages are
    /// skipped.
    pub(super) fn words(&mut self, start: usize, end: usize, mut f: impl FnMut(usize, usize)) {
        let mut at = start.next_multiple_of(WORD);
        let words = if self.copied(at, end).is_some() { self.copied(at, end) } else { self.paged(at, end) };
        if let Some(words) = words {
            for (index, &word) in words.iter().enumerate() {
                f(at + index * WORD, word);
            }
            return;
        }
        while at.saturating_add(WORD) <= end {
            let len = ((end - at) / WORD).min(CHUNK) * WORD;
            let read = self.read(at, len) / WORD * WORD;
            for (index, &word) in self.buffer[..read / WORD].iter().enumerate() {
                f(at + index * WORD, word);
            }
            at += read;
            if read < len {
                // The page at `at` cannot be read: on to the next.
                at = (at & !(PAGE - 1)).saturating_add(PAGE);
            }
        }
    }

    /// The words of `[start, end)` (`start` aligned) from the whole pages that hold them, read into the buffer and
    /// kept there for the reads that follow ([`held`](Self::held)): a test's blocks lie side by side, a dozen to a
    /// page, and each read is a system call. `None` when the pages are more than the buffer holds or cannot all be
    /// read.
    fn paged(&mut self, start: usize, end: usize) -> Option<&[usize]> {
        let held =
            |(held_start, held_len): (usize, usize)| start >= held_start && end <= held_start.saturating_add(held_len);
        if !held(self.held) {
            let first = start & !(PAGE - 1);
            let len = end.checked_next_multiple_of(PAGE)?.checked_sub(first)?;
            if len > CHUNK * WORD {
                return None;
            }
            let read = self.read(first, len);
            self.held = (first, read / WORD * WORD);
            if !held(self.held) {
                return None;
            }
        }
        let first = (start - self.held.0) / WORD;
        self.buffer.get(first..first + end.saturating_sub(start) / WORD)
    }

    /// Reads up to `len` bytes (at most the buffer) at `address` into the buffer; returns how many were read.
    fn read(&mut self, address: usize, len: usize) -> usize {
        self.held = (0, 0);
        let mut buffer = core::mem::replace(&mut self.buffer, RawVec::new_in(RawSystem));
        let words = len.min(CHUNK * WORD).div_ceil(WORD);
        let read = self.read_into(address, &mut buffer[..words]).min(len);
        self.buffer = buffer;
        #[cfg(test)]
        {
            self.buffered_bytes += read;
        }
        read
    }

    /// Reads the words at `address` into `into`, as far as they can be read; returns how many bytes were.
    fn read_into(&mut self, address: usize, into: &mut [usize]) -> usize {
        let len = size_of_val(into);
        #[cfg(test)]
        {
            self.reads += 1;
        }
        if !self.vm_refused {
            let local = libc::iovec { iov_base: into.as_mut_ptr().cast(), iov_len: len };
            let remote = libc::iovec { iov_base: address as *mut libc::c_void, iov_len: len };
            // SAFETY: `local` is the `len` bytes of `into`, borrowed mutably; the kernel reads `remote` for us
            // and answers an error (rather than a fault) for memory that is not mapped.
            let read = unsafe { libc::process_vm_readv(self.pid, &raw const local, 1, &raw const remote, 1, 0) };
            if let Ok(read) = usize::try_from(read) {
                return read;
            }
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EFAULT | libc::ESRCH) => return 0,
                _ => self.vm_refused = true,
            }
        }
        if self.mem.is_none() {
            self.mem = std::fs::File::open("/proc/self/mem").ok();
        }
        let Some(mem) = &self.mem else { return 0 };
        // SAFETY: `into` is `len` bytes the slice borrows mutably, written as bytes; any bytes are a valid `usize`.
        let bytes = unsafe { core::slice::from_raw_parts_mut(into.as_mut_ptr().cast::<u8>(), len) };
        mem.read_at(bytes, address as u64).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::{Reader, mappings, parse_mapping};

    #[test]
    fn a_line_of_the_maps_reads_as_its_range_rights_and_path() {
        let mapping = parse_mapping("7f00-7f10 rw-p 00000000 00:00 0                  [heap]").unwrap();
        assert_eq!((mapping.start, mapping.end, mapping.readable, mapping.writable), (0x7f00, 0x7f10, true, true));
        assert_eq!(mapping.path, "[heap]");
        let anonymous = parse_mapping("1000-2000 r--p 00000000 00:00 0").unwrap();
        assert!(!anonymous.writable && anonymous.path.is_empty() && !anonymous.is_anonymous_data());
    }

    #[test]
    fn words_are_read_where_mapped_and_unmapped_pages_are_skipped_without_a_fault() {
        let values: Vec<usize> = (0..5000).collect();
        let (start, end) = (values.as_ptr() as usize, values.as_ptr() as usize + values.len() * 8);
        let mut reader = Reader::new();
        let mut seen = Vec::new();
        reader.words(start, end, |_, word| seen.push(word));
        assert_eq!(seen, values);
        assert_eq!(reader.word(start + 8), Some(1));
        // Nothing is mapped at the first page.
        assert_eq!(reader.word(8), None);
        let mut count = 0;
        reader.words(0, 3 * 4096, |_, _| count += 1);
        assert_eq!(count, 0);
        assert!(mappings().iter().any(|mapping| mapping.holds(start)));
    }

    #[test]
    fn the_read_buffer_is_not_touched_before_it_is_read_into() {
        let reader = Reader::new();
        let pages = reader.buffer.len() * 8 / 4096;
        let mut resident = vec![0u8; pages];
        // SAFETY: the buffer's pages (a mapping of its own, page-aligned), one byte of `resident` for each.
        let answer =
            unsafe { libc::mincore(reader.buffer.as_ptr().cast_mut().cast(), pages * 4096, resident.as_mut_ptr()) };
        assert_eq!(answer, 0);
        assert_eq!(resident.iter().filter(|&&page| page & 1 == 1).count(), 0, "of {pages} pages");
    }

    #[test]
    fn blocks_side_by_side_are_read_a_page_at_a_time() {
        // Two pages of words, as twelve blocks of 336 bytes side by side in each, read in turn as the scan reads a
        // test's blocks: one read of the process's memory for each page, not one for each block.
        let values: Vec<usize> = (0..3000).collect();
        let start = (values.as_ptr() as usize).next_multiple_of(4096);
        let mut reader = Reader::new();
        let mut seen = Vec::new();
        for block in 0..24 {
            let from = start + block * 336;
            reader.words(from, from + 336, |address, word| seen.push((address, word)));
        }
        let expected: Vec<(usize, usize)> = (start..start + 24 * 336)
            .step_by(8)
            .map(|address| (address, (address - values.as_ptr() as usize) / 8))
            .collect();
        assert_eq!(seen, expected);
        // The second page's first block straddles the two.
        assert!(reader.reads <= 3, "{} reads", reader.reads);
        assert_eq!(reader.word(start + 8), Some((start + 8 - values.as_ptr() as usize) / 8));
    }

    #[test]
    fn a_snapshot_serves_its_range_as_it_was_copied_and_a_page_it_could_not_read_as_zero() {
        let mut values: Vec<usize> = (0..3000).collect();
        let (start, end) = (values.as_ptr() as usize, values.as_ptr() as usize + values.len() * 8);
        let mut reader = Reader::new();
        assert_eq!(reader.snapshot(start, end).word(start + 16), 2);
        values[2] = 99;
        std::hint::black_box(&mut values);
        assert_eq!(reader.word(start + 16), Some(2), "read from the copy");
        let mut seen = Vec::new();
        reader.words(start + 8, start + 32, |address, word| seen.push((address - start, word)));
        assert_eq!(seen, [(8, 1), (16, 2), (24, 3)]);

        // Three pages, the middle one unmapped.
        // SAFETY: a fresh anonymous mapping of three pages, then its middle page unmapped; nothing else uses them.
        let pages = unsafe {
            let pages = libc::mmap(
                core::ptr::null_mut(),
                3 * 4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(pages, libc::MAP_FAILED);
            core::ptr::write_bytes(pages.cast::<u8>(), 0xab, 3 * 4096);
            assert_eq!(libc::munmap(pages.cast::<u8>().add(4096).cast(), 4096), 0);
            pages as usize
        };
        let snapshot = reader.snapshot(pages, pages + 3 * 4096);
        let words: Vec<usize> =
            [0, 4088, 4096, 8184, 8192, 12280].iter().map(|&at| snapshot.word(pages + at)).collect();
        let ones = usize::from_ne_bytes([0xab; 8]);
        assert_eq!(words, [ones, ones, 0, 0, ones, ones]);
        // SAFETY: the first and last pages mapped above, which nothing uses any more.
        unsafe {
            libc::munmap(pages as *mut libc::c_void, 4096);
            libc::munmap((pages + 2 * 4096) as *mut libc::c_void, 4096);
        }
    }
}
