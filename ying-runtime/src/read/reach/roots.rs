//! Where the scan looks for root words, in the order of their kinds: the writable data of every loaded object
//! (statics), each live thread's thread-local storage and stack, and the C library's heap (memory allocated before
//! the test: the test's own blocks in it are not roots).

use super::graph::{Graph, Reached, Root};
use super::heap::Chunks;
use super::memory::{Mapping, Reader};
use super::names::{EXECUTABLE, Namer};
use crate::read::tasks::{SystemCall, thread_file};
use core::ops::ControlFlow;
use core::sync::atomic::{AtomicI32, Ordering};
use ying_report::report::Reach;

/// The threads running a leak test's measured body now, by thread id (0: a free slot). Leak tests that share a
/// process run side by side on the harness's threads; a neighbour's stack holds only its own test's words, and a
/// stale copy of an address there (left by a thread that used the same stack before) is no reference.
static TEST_THREADS: [AtomicI32; 256] = [const { AtomicI32::new(0) }; 256];

#[cfg(test)]
std::thread_local! {
    /// Heaps walked on this thread (by [`Process::heap`]), which the scan's tests count.
    pub(super) static HEAP_WALKS: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
}

/// The calling thread runs a leak test until this is dropped: the scans of other tests leave its stack unread.
pub(crate) struct TestThread(Option<&'static AtomicI32>);

impl TestThread {
    pub(crate) fn enter() -> Self {
        // SAFETY: `gettid` has no preconditions.
        let id = unsafe { libc::gettid() };
        Self(TEST_THREADS.iter().find(|slot| slot.compare_exchange(0, id, Ordering::AcqRel, Ordering::Relaxed).is_ok()))
    }
}

impl Drop for TestThread {
    fn drop(&mut self) {
        if let Some(slot) = self.0 {
            slot.store(0, Ordering::Release);
        }
    }
}

/// Thread `id` runs a leak test now.
fn runs_a_test(id: i32) -> bool {
    TEST_THREADS.iter().any(|slot| slot.load(Ordering::Acquire) == id)
}

/// The thread that scans, as the scan takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Caller {
    /// It ran the test's body, which has returned: its thread-locals are roots, and its stack is none. The frames
    /// the body returned from are dead (a word they left behind holds nothing, as a word a freed block left does
    /// not), and the frames above the body (the runner's, the harness's) hold nothing the body allocated.
    RanTheBody,
    /// It ends with the test (a test measured from outside, scanned at the process's end): neither is a root.
    Ending,
    /// It runs the test's body, which is ending: its thread-locals are roots, and so is its stack from `from` (the
    /// frame of the body's end) outwards, where the body's runtime keeps its state; the frames below it are the
    /// scan's own.
    InTheBody {
        /// A stack address in the frame of the body's end.
        from: usize,
    },
}

/// What a thread spawned without a name is called, as std's panic messages call it. The kernel gives such a thread
/// the name of the thread that spawned it: one that shares the calling thread's name (the test's, whose body spawned
/// it) or the main thread's is taken for one.
const UNNAMED: &str = "<unnamed>";

/// A live thread of the process, as the scan reads it.
pub(crate) struct Thread {
    /// Its thread id.
    id: u64,
    /// Its name (its `comm` file), or [`UNNAMED`].
    pub(crate) name: String,
    /// Its stack in use, `(stack pointer, end of its mapping)`, when known.
    stack: Option<(usize, usize)>,
    /// Its stack is no root: it runs another leak test (see [`TestThread`]), or it is the calling thread, whose
    /// test's body has returned.
    stack_unread: bool,
    /// Its thread-local storage (and thread control block), `(start, end)`, when known.
    locals: Option<(usize, usize)>,
    /// The start of the executable's thread-local block, for naming a thread-local by its offset.
    executable_locals: Option<usize>,
}

/// What the scan knows of the process: its mappings and threads, and the executable's thread-local segment.
pub(super) struct Process {
    pub(super) mappings: Vec<Mapping>,
    pub(crate) threads: Vec<Thread>,
}

/// The executable's thread-local segment: `(size in memory rounded up to its alignment)`, when it has one.
fn executable_tls_size() -> Option<usize> {
    crate::base::loaded::find_map(|object| {
        let size = object.segments(libc::PT_TLS).next().map(|(start, end, header)| {
            let align = (header.p_align as usize).max(1);
            (end - start).next_multiple_of(align)
        });
        ControlFlow::Break(size)
    })
    .flatten()
}

/// The calling thread's thread pointer (x86-64: the thread control block, above the static thread-local blocks).
#[cfg(target_arch = "x86_64")]
fn thread_pointer() -> Option<usize> {
    let pointer: usize;
    // SAFETY: reads the first word of the thread control block, which holds its own address (x86-64 TLS ABI).
    unsafe { core::arch::asm!("mov {}, fs:0", out(reg) pointer, options(nostack, readonly, preserves_flags)) };
    Some(pointer)
}

#[cfg(not(target_arch = "x86_64"))]
fn thread_pointer() -> Option<usize> {
    None
}

/// The stack pointer of thread `id` while it waits in a system call (its `syscall` file); `None` while it runs.
/// Tried a few times: a busy thread is caught between two calls.
fn stack_pointer(id: u64) -> Option<usize> {
    for _ in 0..3 {
        if let Some(call) = SystemCall::of_thread(id) {
            return Some(call.sp);
        }
        std::thread::yield_now();
    }
    None
}

impl Process {
    /// The process now, read from the calling thread, which is `caller`.
    pub(super) fn now(caller: Caller) -> Self {
        let mappings = super::memory::mappings();
        let tls_size = executable_tls_size();
        let mapping_end = |address: usize| mappings.iter().find(|mapping| mapping.holds(address)).map(|m| m.end);
        // Where the thread control block lies below the end of a thread's stack mapping: the same for every thread
        // the C library made, read from the calling thread's (when it is one such: the main thread's is elsewhere).
        let own_pointer = thread_pointer();
        let tcb_offset = own_pointer.and_then(|pointer| Some(mapping_end(pointer)? - pointer));
        let locals_of = |end: usize, reader: &mut Reader| -> Option<((usize, usize), Option<usize>)> {
            let pointer = end.checked_sub(tcb_offset?)?;
            // The thread control block starts with its own address.
            (reader.word(pointer) == Some(pointer)).then_some(())?;
            let executable = tls_size.map(|size| pointer - size);
            Some(((executable.unwrap_or(pointer), end), executable))
        };
        let mut reader = Reader::new();
        // SAFETY: `gettid` has no preconditions.
        let own_thread = u64::try_from(unsafe { libc::gettid() }).unwrap_or_default();
        let here = 0u8;
        let own_stack_pointer = match caller {
            Caller::InTheBody { from } => from,
            Caller::RanTheBody | Caller::Ending => core::ptr::from_ref(core::hint::black_box(&here)).addr(),
        };
        let mut threads = Vec::new();
        let tasks = std::fs::read_dir("/proc/self/task").into_iter().flatten().flatten();
        for id in tasks.filter_map(|task| task.file_name().to_str()?.parse::<u64>().ok()) {
            let name = thread_file(id, "comm").unwrap_or_default().trim_end().to_owned();
            let own = id == own_thread;
            let pointer = if own { Some(own_stack_pointer) } else { stack_pointer(id) };
            let Some(pointer) = pointer else {
                threads.push(Thread {
                    id,
                    name,
                    stack: None,
                    stack_unread: false,
                    locals: None,
                    executable_locals: None,
                });
                continue;
            };
            let Some(end) = mapping_end(pointer) else { continue };
            let (locals, executable_locals) = match locals_of(end, &mut reader) {
                Some((locals, executable)) => (Some(locals), executable),
                None => (None, None),
            };
            // The calling thread's thread-locals are no roots when it ends with the test.
            let (locals, executable_locals) =
                if own && matches!(caller, Caller::Ending) { (None, None) } else { (locals, executable_locals) };
            // A thread waiting in a system call holds nothing below its stack pointer: what lies there is stale.
            let stack_end = locals.map_or(end, |(start, _)| start);
            let stack_unread = match caller {
                Caller::InTheBody { .. } if own => false,
                _ => own || i32::try_from(id).is_ok_and(runs_a_test),
            };
            threads.push(Thread {
                id,
                name,
                stack: Some((pointer, stack_end)),
                stack_unread,
                locals,
                executable_locals,
            });
        }
        name_the_unnamed(&mut threads, own_thread);
        Self { mappings, threads }
    }

    /// The chunks in use of the C library's heaps, thread stacks left out.
    pub(super) fn heap(&self, reader: &mut Reader) -> Chunks {
        #[cfg(test)]
        HEAP_WALKS.with(|walks| walks.set(walks.get() + 1));
        let stacks: Vec<usize> = self.threads.iter().filter_map(|thread| thread.stack.map(|(sp, _)| sp)).collect();
        Chunks::walk(&self.mappings, &stacks, reader)
    }

    /// Marks every block a root reaches directly (or through other blocks), in the order of the kinds: statics,
    /// thread-locals, thread stacks. With the heap in the graph, the chunks they reach are left for
    /// [`Graph::through_heap`].
    pub(super) fn mark_direct_roots(&self, graph: &mut Graph, reader: &mut Reader, namer: &mut Namer) {
        for (start, end) in writable_segments(namer) {
            graph.roots_in(start, end, reader, |address| Reached { kind: Reach::Static, root: Root::Word(address) });
        }
        // ying's own thread-locals lie in the executable's block where the runtime is linked into it.
        let mut own_locals = if self.threads.iter().any(|thread| thread.executable_locals.is_some()) {
            namer.own_thread_locals()
        } else {
            Vec::new()
        };
        own_locals.sort_unstable();
        for thread in &self.threads {
            let Some(locals) = thread.locals else { continue };
            // In the order of `own_locals`, each moved by the same block's start.
            let own: Vec<(usize, usize)> = match thread.executable_locals {
                Some(block) => own_locals.iter().map(|&(start, end)| (block + start, block + end)).collect(),
                None => Vec::new(),
            };
            for (start, end) in without(locals, &own) {
                graph.roots_in(start, end, reader, |address| Reached {
                    kind: Reach::ThreadLocal,
                    root: Root::Word(address),
                });
            }
        }
        for (index, thread) in self.threads.iter().enumerate().filter(|(_, thread)| !thread.stack_unread) {
            if let Some((start, end)) = thread.stack {
                let reached = Reached { kind: Reach::ThreadStack, root: Root::Thread(index) };
                graph.roots_in(start, end, reader, |_| reached);
            }
        }
    }

    /// The thread whose thread-local storage holds `address`, and the offset of `address` in the executable's
    /// thread-local block (when it lies there).
    pub(super) fn thread_local_at(&self, address: usize) -> Option<(&Thread, Option<usize>)> {
        let thread =
            self.threads.iter().find(|thread| thread.locals.is_some_and(|(s, e)| (s..e).contains(&address)))?;
        Some((thread, thread.executable_locals.and_then(|start| address.checked_sub(start))))
    }
}

/// Names [`UNNAMED`] the `threads` that share the name of the calling thread, `own_thread`, or of the main thread.
fn name_the_unnamed(threads: &mut [Thread], own_thread: u64) {
    // SAFETY: `getpid` has no preconditions.
    let main_thread = u64::try_from(unsafe { libc::getpid() }).unwrap_or_default();
    let spawners = [own_thread, main_thread];
    let inheritable: Vec<String> =
        threads.iter().filter(|thread| spawners.contains(&thread.id)).map(|thread| thread.name.clone()).collect();
    for thread in threads.iter_mut().filter(|thread| !spawners.contains(&thread.id)) {
        if inheritable.contains(&thread.name) {
            UNNAMED.clone_into(&mut thread.name);
        }
    }
}

/// The writable data of every loaded object: its statics, the C library's and the dynamic loader's included, as
/// valgrind's roots are (what the C library keeps for itself, its name-service state after a `getaddrinfo`, is
/// reached from there, never lost; its allocator's lists point at chunk headers, which are no pointers into a block:
/// see `graph::block_at`). ying's own statics are left out (its caches' tables hold stale words in their empty
/// slots): a library that is ying itself (the interposer of `--measure all`: ying, its standard library and its
/// symbolisers, none of them the program's) wholly, without reading its symbols.
fn writable_segments(namer: &mut Namer) -> Vec<(usize, usize)> {
    let mut objects = Vec::new();
    let this_code = writable_segments as *const () as usize;
    crate::base::loaded::find_map(|object| {
        let name = object.name.to_bytes();
        if !name.is_empty() && object.holds(this_code) {
            return ControlFlow::Continue(());
        }
        let path = if name.is_empty() { EXECUTABLE.to_owned() } else { object.name.to_string_lossy().into_owned() };
        let writable: Vec<(usize, usize)> = object
            .segments(libc::PT_LOAD)
            .filter(|(_, _, header)| header.p_flags & libc::PF_W != 0)
            .map(|(start, end, _)| (start, end))
            .collect();
        objects.push((path, object.bias, writable));
        ControlFlow::<()>::Continue(())
    });
    let mut segments = Vec::new();
    for (path, bias, writable) in objects {
        let mut own = namer.own_statics(&path, bias);
        own.sort_unstable();
        for range in writable {
            segments.extend(without(range, &own));
        }
    }
    segments
}

/// The parts of `range`, `(start, end)`, outside all of `holes` (sorted by their starts).
fn without((start, end): (usize, usize), holes: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let mut parts = Vec::new();
    let mut at = start;
    for &(hole_start, hole_end) in holes.iter().filter(|&&(s, e)| s < end && e > start) {
        if at < hole_start {
            parts.push((at, hole_start));
        }
        at = at.max(hole_end);
    }
    if at < end {
        parts.push((at, end));
    }
    parts
}

#[cfg(test)]
std::thread_local! {
    /// A word of one of ying's own thread-locals (its path is under no `tests` module, as the runtime's own are not):
    /// for the tests that the scan does not read them as roots.
    pub(super) static OWN_WORD: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
}

#[cfg(test)]
mod tests {
    use super::{Caller, Process, UNNAMED, without};

    #[test]
    fn a_thread_spawned_without_a_name_is_unnamed_not_named_after_its_spawner() {
        let (ids, threads) = std::sync::mpsc::channel();
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let stopped = std::sync::Arc::new(std::sync::Mutex::new(stopped));
        let spawn = |builder: std::thread::Builder| {
            let (ids, stopped) = (ids.clone(), stopped.clone());
            builder
                .spawn(move || {
                    // SAFETY: `gettid` has no preconditions.
                    ids.send(unsafe { libc::gettid() }).unwrap();
                    let _ = stopped.lock().unwrap().recv();
                })
                .unwrap()
        };
        let handles = [spawn(std::thread::Builder::new()), spawn(std::thread::Builder::new().name("ticker".into()))];
        let (unnamed, named) = (threads.recv().unwrap(), threads.recv().unwrap());
        // The two may have started in either order: the named one tells which is which.
        let process = Process::now(Caller::RanTheBody);
        let name = |id: i32| {
            let thread = process.threads.iter().find(|thread| thread.id == u64::try_from(id).unwrap());
            thread.map(|thread| thread.name.as_str())
        };
        let (unnamed, named) = if name(unnamed) == Some("ticker") { (named, unnamed) } else { (unnamed, named) };
        assert_eq!(name(named), Some("ticker"));
        assert_eq!(name(unnamed), Some(UNNAMED), "the kernel gave it the test thread's name");
        drop(stop);
        for handle in handles {
            handle.join().unwrap();
        }
    }

    #[test]
    fn a_range_without_its_holes_keeps_what_lies_between_them() {
        assert_eq!(without((100, 200), &[]), [(100, 200)]);
        assert_eq!(without((100, 200), &[(120, 130), (150, 160)]), [(100, 120), (130, 150), (160, 200)]);
        assert_eq!(without((100, 200), &[(50, 110), (190, 250)]), [(110, 190)], "holes over either end");
        assert_eq!(without((100, 200), &[(0, 100), (200, 300)]), [(100, 200)], "holes that only touch it");
        assert_eq!(without((100, 200), &[(90, 210)]), [], "a hole over all of it");
        assert_eq!(without((100, 200), &[(120, 140), (130, 150)]), [(100, 120), (150, 200)], "overlapping holes");
    }
}
