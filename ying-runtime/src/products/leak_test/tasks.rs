//! The async tasks a leak test's body left behind, found as the body ends while its runtime still runs.
//!
//! `#[ying::leak_test]` on an `async fn` runs the body through [`body_end`] inside the runtime its async test
//! attribute (`#[tokio::test]`) builds: once the body's future is done, it yields to the runtime a few times (so that
//! the tasks the body finished with or aborted are settled) and then looks at the measured scope's live blocks for
//! tokio's task cells: the blocks allocated under a cell's constructor (`KnownCode::task_cells`, from the
//! executable's symbol table). A cell begins with the task's state word (tokio's `Header`, first in the `#[repr(C)]`
//! cell, has the state first). A task complete with its `JoinHandle`'s interest still set is `unclaimed`: its output
//! is kept for a handle that was neither awaited nor dropped. A task not complete, neither running nor scheduled, is
//! `leaked` when nothing that could still wake it reaches it and `lingering` otherwise: the reachability scan marks
//! from the roots with the cells gated (`read::reach::wakeable`: a waker of the task, its cell's start beside tokio's
//! `WAKER_VTABLE`, or a pointer into its cell reaches it; tokio's lists of its tasks and `JoinHandle`s do not), as
//! Go's collector tells a goroutine blocked for good. This thread's stack is read from the body's end outwards,
//! where the runtime's state lies. The runtime's shutdown, after the body, would free the pending tasks that nothing
//! else holds: only here are they still to be seen. The runtime's own tasks (a multi-thread runtime's workers) are
//! left out. A test measured from outside (`unannotated`) is looked at the same way as its thread ends, its own
//! runtime shut down by then: what is found there was left on a runtime that outlives it.

use crate::base::ids::{ScopeId, StackId};
use crate::base::thread::as_profiler;
use crate::hot::{live, stacks};
use crate::read::symbol_table;
use crate::read::symbolize::{allocated_type, symbolize};
use core::cell::Cell;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::sync::Mutex;
use ying_frames::tasks::{future_of_cell, is_the_runtimes_own};
use ying_report::report::{TaskEntry, TaskKind};

// tokio's task state's flags (`tokio::runtime::task::state`): constants, which no debug information keeps, the same
// from tokio 0.2.14 to 1.54 (the cell's type and the state's place, first in its `#[repr(C)]` header, are tokio's
// layout as its own casts rely on it).

/// tokio's task state: the task is being polled (`tokio::runtime::task::state::RUNNING`).
const RUNNING: usize = 0b1;
/// tokio's task state: the task has completed (`COMPLETE`).
const COMPLETE: usize = 0b10;
/// tokio's task state: the task is scheduled to be polled (`NOTIFIED`).
const NOTIFIED: usize = 0b100;
/// tokio's task state: a `JoinHandle` still holds an interest in the output (`JOIN_INTEREST`).
const JOIN_INTEREST: usize = 0b1000;

/// tokio's task state: the flags below the reference count (`STATE_MASK`), and the most references a live task's
/// state counts here; a word above that is no state (a freed cell's first word, the allocator's link).
const FLAGS: usize = 0b11_1111;
const MOST_REFERENCES: usize = 1 << 24;

/// Whether `word` can be a live task's state: a reference count of at least one, and not absurdly many.
fn is_a_state(word: usize) -> bool {
    let references = word >> FLAGS.count_ones();
    (1..MOST_REFERENCES).contains(&references)
}

/// How many times the body's end yields to the runtime before its tasks are looked at.
const YIELDS: usize = 3;

/// How many of a stack's innermost frames are looked at for a cell's constructor (the allocator's frames, `Box::new`,
/// the constructor).
const CONSTRUCTOR_DEPTH: usize = 16;

std::thread_local! {
    /// The scope of the measured runs of the leak test this thread runs, while they run.
    static MEASURED: Cell<Option<ScopeId>> = const { Cell::new(None) };
}

/// The tasks the last measured run's body of each leak test running left, found as it ended, by the test's scope. A
/// static rather than a thread-local: a thread-local with a destructor would register it (an allocation) inside the
/// measured scope.
static FOUND: Mutex<Vec<(ScopeId, Vec<Found>)>> = Mutex::new(Vec::new());

/// [`FOUND`], whatever a panic left it as.
fn found() -> std::sync::MutexGuard<'static, Vec<(ScopeId, Vec<Found>)>> {
    FOUND.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A task found as a body ended, not named yet.
pub(super) struct Found {
    kind: TaskKind,
    stack: StackId,
    bytes: u64,
    /// Where its cell is.
    address: usize,
}

/// The measured runs of a leak test on this thread, until dropped: the bodies' ends look at scope `id`.
pub(super) struct Measuring {
    id: ScopeId,
    /// What this thread measured before (nothing: leak tests do not nest).
    before: Option<ScopeId>,
}

impl Measuring {
    pub(super) fn enter(id: ScopeId) -> Self {
        Self { id, before: MEASURED.try_with(|measured| measured.replace(Some(id))).ok().flatten() }
    }

    /// What the last measured run's body left, named: the future each task runs and where the body spawned it,
    /// with `manifest_dir`'s files relative to it.
    pub(super) fn tasks(self, manifest_dir: &str) -> Vec<TaskEntry> {
        let found = as_profiler(|| {
            let mut found = found();
            let at = found.iter().position(|(scope, _)| *scope == self.id);
            at.map(|at| found.swap_remove(at).1).unwrap_or_default()
        });
        named(&found, manifest_dir)
    }
}

/// The tasks a test measured from outside left on a runtime that outlives it (a static one), looked at among the
/// live blocks of its scope `scope` as its thread ends (the test's own runtime has shut down by then), named with
/// `manifest_dir`'s files relative to it.
pub(super) fn left_as_the_test_ended(scope: ScopeId, manifest_dir: &str) -> Vec<TaskEntry> {
    let found = as_profiler(|| find(scope, Looking::AsTheTestEnds));
    named(&found, manifest_dir)
}

/// The tasks `found`, named: the future each runs and where it was spawned, with `manifest_dir`'s files relative to
/// it; the runtime's own left out; by where they were spawned.
fn named(found: &[Found], manifest_dir: &str) -> Vec<TaskEntry> {
    if found.is_empty() {
        return Vec::new();
    }
    as_profiler(|| {
        // Tasks spawned at one place share a stack: each stack is named once.
        let mut names: std::collections::HashMap<StackId, Names> = std::collections::HashMap::new();
        let mut tasks: Vec<TaskEntry> = found
            .iter()
            .map(|task| {
                let Names { future, spawned_at } =
                    names.entry(task.stack).or_insert_with(|| Names::of(task.stack, manifest_dir)).clone();
                TaskEntry::new(task.kind, future, spawned_at, task.bytes)
            })
            .filter(|task| !task.future.as_deref().is_some_and(is_the_runtimes_own))
            .collect();
        tasks.sort_by(|a, b| (&a.spawned_at, &a.future, a.bytes).cmp(&(&b.spawned_at, &b.future, b.bytes)));
        tasks
    })
}

/// Where the tasks are looked for from, and how the looking thread's stack is read.
#[derive(Clone, Copy)]
enum Looking {
    /// At a leak test's body's end, inside its runtime: this thread's stack from `from` (an address in the frame of
    /// the body's end) outwards, where the runtime keeps its state.
    AtTheBodysEnd { from: usize },
    /// As the thread of a test measured from outside ends: its stack is no root.
    AsTheTestEnds,
}

impl Drop for Measuring {
    fn drop(&mut self) {
        let _ = MEASURED.try_with(|measured| measured.set(self.before));
    }
}

/// Runs an async leak test's `body`, and as it ends, inside its runtime, looks for the tasks it left (see the
/// module's documentation). Called by the code `#[ying::leak_test]` generates for an `async fn`.
#[doc(hidden)]
pub async fn body_end<T>(body: impl Future<Output = T>) -> T {
    let output = body.await;
    for _ in 0..YIELDS {
        YieldOnce(false).await;
    }
    // The frame the scan reads this thread's stack from: the runtime's state lies in the frames outside it.
    let here = 0u8;
    at_body_end(core::ptr::from_ref(core::hint::black_box(&here)).addr());
    output
}

/// Pending once, its waker woken: the runtime runs what is ready before it polls the body again.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Looks at the live blocks of the measured scope for tokio's task cells, and keeps the tasks left behind. `from`:
/// an address of this thread's stack in the frame of the body's end.
#[inline(never)]
fn at_body_end(from: usize) {
    let Some(scope) = MEASURED.try_with(Cell::get).ok().flatten() else { return };
    let found = as_profiler(|| find(scope, Looking::AtTheBodysEnd { from }));
    as_profiler(|| {
        let mut kept = self::found();
        match kept.iter_mut().find(|(id, _)| *id == scope) {
            Some((_, tasks)) => *tasks = found,
            None => kept.push((scope, found)),
        }
    });
}

/// The tasks among the live blocks of scope `scope`, classified, the looking thread read as `looking` says.
fn find(scope: ScopeId, looking: Looking) -> Vec<Found> {
    let known = symbol_table::known_code();
    let constructors = symbol_table::in_process(&known.task_cells);
    if constructors.is_empty() {
        return Vec::new();
    }
    let constructed = |ip: usize| constructors.iter().any(|&(start, end)| (start..end).contains(&ip.wrapping_sub(1)));
    let blocks = live::owned_by(scope);
    // Many blocks share a stack: each stack is looked at once.
    let mut of_stack: std::collections::HashMap<StackId, bool> = std::collections::HashMap::new();
    let cells: Vec<(usize, u64, StackId)> = blocks
        .iter()
        .filter_map(|block| {
            let stack = block.stack?;
            let is_cell = *of_stack.entry(stack).or_insert_with(|| {
                stacks::ips(stack)
                    .is_some_and(|ips| ips.as_slice().iter().take(CONSTRUCTOR_DEPTH).any(|&ip| constructed(ip)))
            });
            is_cell.then_some((block.address, block.size as u64, stack))
        })
        .collect();
    let first_words = states(cells.iter().map(|&(address, ..)| address));
    // A word that is no task's state: the cell was freed by another thread since the blocks were listed (the
    // allocator's own link in its place).
    let cells: Vec<((usize, u64, StackId), usize)> = cells
        .into_iter()
        .zip(first_words)
        .filter_map(|(cell, state)| Some((cell, state.filter(|&state| is_a_state(state))?)))
        .collect();
    // The pending tasks nothing is running or about to run: whether anything could still wake them.
    let waiting: Vec<usize> = cells
        .iter()
        .filter(|&&(_, state)| state & (COMPLETE | RUNNING | NOTIFIED) == 0)
        .map(|&((address, ..), _)| address)
        .collect();
    let wakers = symbol_table::in_process(&known.task_wakers);
    let wakeable = if waiting.is_empty() || wakers.is_empty() {
        Vec::new()
    } else {
        wakeable(blocks.iter().map(|block| (block.address, block.size)), &waiting, &wakers, looking)
    };
    // The waiting cells' answers, in the cells' order.
    let mut wakeable = wakeable.into_iter();
    let found: Vec<Found> = cells
        .into_iter()
        .filter_map(|((address, bytes, stack), state)| {
            let kind = if state & COMPLETE != 0 {
                (state & JOIN_INTEREST != 0).then_some(TaskKind::Unclaimed)?
            } else if state & (RUNNING | NOTIFIED) != 0 {
                TaskKind::Lingering
            } else {
                // Without the wakers' vtable nothing tells a waiting task's wakers from its handles: no answer.
                if wakeable.next()? { TaskKind::Lingering } else { TaskKind::Leaked }
            };
            Some(Found { kind, stack, bytes, address })
        })
        .collect();
    // Another thread (a runtime that outlives the body, shutting down) may have freed a cell while it was looked
    // at: the allocator's link then stands in its first word, which is no state. Only the cells whose first word
    // is still a state are left behind.
    let again = states(found.iter().map(|found| found.address));
    found.into_iter().zip(again).filter(|(_, state)| state.is_some_and(is_a_state)).map(|(found, _)| found).collect()
}

/// Of the `waiting` task cells among the `blocks`, which something that could still wake them reaches (see
/// `read::reach::wakeable`), this thread's stack read as `looking` says.
#[cfg(target_os = "linux")]
fn wakeable(
    blocks: impl IntoIterator<Item = (usize, usize)>,
    waiting: &[usize],
    wakers: &[(usize, usize)],
    looking: Looking,
) -> Vec<bool> {
    use crate::read::reach::Caller;
    let caller = match looking {
        Looking::AtTheBodysEnd { from } => Caller::InTheBody { from },
        Looking::AsTheTestEnds => Caller::Ending,
    };
    crate::read::reach::wakeable(blocks, waiting, wakers, caller)
}

/// Where memory cannot be read through the kernel no waiting task is classified.
#[cfg(not(target_os = "linux"))]
fn wakeable(_: impl IntoIterator<Item = (usize, usize)>, _: &[usize], _: &[(usize, usize)], _: Looking) -> Vec<bool> {
    Vec::new()
}

/// The state word of each task cell at `addresses` (the first word of the cell), read through the kernel.
#[cfg(target_os = "linux")]
fn states(addresses: impl IntoIterator<Item = usize>) -> Vec<Option<usize>> {
    crate::read::reach::words_at(addresses)
}

/// No task is looked at where memory cannot be read through the kernel.
#[cfg(not(target_os = "linux"))]
fn states(addresses: impl IntoIterator<Item = usize>) -> Vec<Option<usize>> {
    addresses.into_iter().map(|_| None).collect()
}

/// What a task cell's stack tells of its task: the future it runs and where it was spawned.
#[derive(Clone, Default)]
struct Names {
    future: Option<String>,
    spawned_at: Option<String>,
}

impl Names {
    /// The names from the cell's `stack`, with `manifest_dir`'s files relative to it.
    fn of(stack: StackId, manifest_dir: &str) -> Self {
        let Some(ips) = stacks::ips(stack) else { return Self::default() };
        let frames = super::report::relative_frames(symbolize(&ips), manifest_dir);
        let spawned_at = ying_frames::user_frame(&frames).and_then(|index| {
            let frame = &frames[index];
            Some(format!("{}:{}", frame.file.as_deref()?, frame.line?))
        });
        Self { future: allocated_type(&ips).and_then(|cell| future_of_cell(&cell)), spawned_at }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_word_is_a_state_with_one_reference_or_more_not_an_allocators_link() {
        // tokio's INITIAL_STATE: three references, JOIN_INTEREST and NOTIFIED.
        assert!(super::is_a_state((3 << 6) | 0b1100));
        assert!(super::is_a_state(0x92));
        assert!(!super::is_a_state(0x7f87_b800_0190), "a freed cell's first word, glibc's link");
        assert!(!super::is_a_state(0b1010), "no reference left: the cell is being freed");
    }
}
