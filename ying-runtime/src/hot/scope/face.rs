//! The face of scopes: [`Scope`] and [`EnterGuard`], the public handle that carries a scope into other threads and
//! the guard of a thread that entered it, and [`OpenScope`], a scope as `measure` and the leak-test runner open and
//! close it (and read its figures).

use super::slots::{self, SLOTS, Slot, adopt_children, claim_slot, innermost_open, nearest_open, slot_of};
use crate::base::ids::ScopeId;
use crate::base::thread::THREAD;
use core::sync::atomic::{Ordering, fence};
use ying_report::report::{Attribution, ScopeStats};

/// An open scope; closes (and stops attributing) when dropped, so a panicking body never leaves it open.
pub(crate) struct OpenScope {
    id: ScopeId,
    attribution: Attribution,
    previous_thread_scope: Option<ScopeId>,
    /// The calling thread's home scope before this one (see
    /// [`ThreadState::home_scope`](crate::base::thread::ThreadState::home_scope)).
    previous_home: Option<ScopeId>,
    /// Opened and closed on its home thread: the home thread's updates skip the close protocol.
    _not_send: core::marker::PhantomData<*const ()>,
}

impl OpenScope {
    /// Opens a scope; with `capture`, every allocation attributed to it records its stack. Panics when every slot
    /// is in use or, for [`Attribution::Process`], when a process scope is already open.
    pub(crate) fn open(attribution: Attribution, capture: bool) -> Self {
        let (index, slot) =
            claim_slot().unwrap_or_else(|| panic!("ying: more than {SLOTS} measured scopes are open at once"));
        // The slot forgets the closed scope it held before it says anything of this one (see `forwarded`).
        slot.closed.store(None, Ordering::Relaxed);
        fence(Ordering::Release);
        slot.figures.reset();
        slot.has_children.store(false, Ordering::Relaxed);
        // The scope encloses what its thread does; it is enclosed by the innermost open scope its thread is in (a
        // process-attributed scope counts every thread, and is enclosed by none). It records every stack when that
        // scope does, so that the blocks it hands over on closing are named like the others.
        let parent = match attribution {
            Attribution::Process => None,
            _ => THREAD.try_with(innermost_open).unwrap_or(None),
        };
        let mut capture = capture;
        if let Some(parent) = parent {
            let parent = slot_of(parent);
            parent.has_children.store(true, Ordering::Relaxed);
            capture |= parent.capture.load(Ordering::Relaxed);
        }
        let id = slots::new_id(index, parent.is_some());
        slot.parent.store(parent, Ordering::Relaxed);
        slot.capture.store(capture, Ordering::Relaxed);
        crate::hot::live::on_scope_open(id);
        if attribution == Attribution::Process {
            if !slots::open_process_scope(id) {
                slot.claimed.store(false, Ordering::Release);
                panic!("ying: a process-attributed scope is already open; only one can be open at a time");
            }
            crate::hot::live::set_process_scope_open(true);
        }
        slot.id.store(Some(id), Ordering::SeqCst);
        // Before any allocation is attributed to the scope: this thread's updates go to the home counters. A nested
        // scope has no home thread: its updates take the shared path, which carries them outwards, so that the home
        // path of every other scope has nothing to test for nesting.
        let previous_home = THREAD
            .try_with(|t| if parent.is_none() { t.replace_home_scope(Some(id)) } else { t.home_scope() })
            .unwrap_or(None);
        let previous_thread_scope = match attribution {
            Attribution::Process => None,
            _ => THREAD.try_with(|t| t.replace_scope(Some(id))).unwrap_or(None),
        };
        Self { id, attribution, previous_thread_scope, previous_home, _not_send: core::marker::PhantomData }
    }

    /// The scope's id, which the blocks it owns carry in the live table.
    pub(crate) fn id(&self) -> ScopeId {
        self.id
    }

    /// The scope's figures so far, while it is open (`retained_*`: owned and live now).
    pub(crate) fn figures(&self) -> ScopeStats {
        read_figures(slot_of(self.id), self.id)
    }

    /// Closes the scope and returns its final figures.
    pub(crate) fn close(self) -> ScopeStats {
        let stats = self.finish();
        core::mem::forget(self);
        stats
    }

    fn finish(&self) -> ScopeStats {
        match self.attribution {
            Attribution::Process => {
                if slots::close_process_scope(self.id) {
                    crate::hot::live::set_process_scope_open(false);
                }
            }
            _ => {
                let previous = self.previous_thread_scope;
                let _ = THREAD.try_with(|t| t.replace_scope(previous));
            }
        }
        let previous_home = self.previous_home;
        let _ = THREAD.try_with(|t| t.replace_home_scope(previous_home));
        let slot = slot_of(self.id);
        let parent = slot.parent.load(Ordering::Relaxed);
        if let Some(parent) = parent {
            // Before the scope closes: an update that finds it closed finds where its blocks went.
            slot.closed_parent.store(Some(parent), Ordering::Relaxed);
            slot.closed.store(Some(self.id), Ordering::Release);
            if slot.has_children.load(Ordering::Relaxed) {
                adopt_children(self.id, parent);
            }
        }
        if !slot.id.compare_exchange(Some(self.id), None, Ordering::SeqCst, Ordering::Relaxed) {
            return ScopeStats::default(); // already closed
        }
        let stats = read_figures(slot, self.id);
        slot.figures.release(self.id);
        // The blocks the scope owns go to the nearest open scope enclosing it, which counted them all along; the
        // blocks this thread allocated in the scope stay recognisable after it: out of the nursery, unless the heir
        // is the thread's own scope, whose nursery it becomes again.
        let heir = nearest_open(parent);
        crate::hot::live::on_scope_close(self.id, heir, previous_home);
        slot.claimed.store(false, Ordering::Release);
        stats
    }
}

/// The figures of scope `id` in `slot`: each the sum of its parts. Called on the home thread, which sees its own
/// writes.
fn read_figures(slot: &Slot, id: ScopeId) -> ScopeStats {
    let sums = slot.figures.sums(id);
    let mut stats = ScopeStats::default();
    stats.retained_bytes = sums.live_bytes.max(0) as u64;
    stats.retained_blocks = sums.live_blocks.max(0) as u64;
    stats.peak_bytes = slot.figures.peak().max(0) as u64;
    stats.allocated_bytes = sums.allocated_bytes;
    stats.allocations = sums.allocations;
    stats.freed_bytes = sums.freed_bytes;
    stats.frees = sums.frees;
    stats
}

impl Drop for OpenScope {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A handle on an open scope, to carry it into threads or tasks that the measured code spawns.
///
/// Under [`Attribution::Thread`] a scope counts only the allocations of its own thread. Work the measured code
/// hands to another thread joins the scope when that thread enters it:
///
/// ```
/// # #[global_allocator]
/// # static ALLOC: ying::YingProfiler = ying::YingProfiler::new();
/// let ((), stats) = ying::measure(|| {
///     let scope = ying::Scope::current();
///     std::thread::spawn(move || {
///         let _entered = scope.enter();
///         Box::leak(Box::new([0u8; 100])); // counted by the scope
///     })
///     .join()
///     .unwrap();
/// });
/// assert_eq!(stats.retained_bytes, 100);
/// ```
///
/// Scopes nest: a scope opened while its thread is in another (a [`measure`](crate::measure) inside a leak test,
/// or inside another `measure`) is enclosed by it, and everything counted in the inner scope counts in the
/// enclosing ones too. A thread in a scope is in the scopes enclosing it as well.
///
/// A handle outliving its scope is harmless: a closed scope attributes nothing, and hides nothing either (see
/// [`enter`](Self::enter)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Scope {
    id: Option<ScopeId>,
}

impl Scope {
    /// The scope the calling thread is in: the innermost [`measure`](crate::measure) on this thread, or the scope
    /// this thread entered. When there is none, the handle is inert and entering it does nothing.
    pub fn current() -> Self {
        Self { id: THREAD.try_with(|t| t.scope()).unwrap_or(None) }
    }

    /// Whether this handle names a scope (open or since closed), rather than none.
    pub fn is_some(&self) -> bool {
        self.id.is_some()
    }

    /// Attributes the calling thread's allocations to this scope, and to the scopes enclosing it, until the guard
    /// is dropped.
    ///
    /// While this scope is closed (it closed before the thread entered it, or while the guard was held), the
    /// thread is in the scopes it is really in:
    ///
    /// - the scopes that enclosed this one and are still open (the thread's work belongs to the code that
    ///   measured it), or, when none is,
    /// - the scope the thread was in when it entered this one, and the scopes enclosing that, if open;
    /// - under process attribution, the process-attributed scope in any case: it counts every thread.
    ///
    /// Entering an inert handle (of no scope) changes nothing.
    #[must_use = "the thread leaves the scope when the guard is dropped"]
    pub fn enter(&self) -> EnterGuard {
        let (previous, previous_from) = match self.id {
            None => THREAD.try_with(|t| (t.scope(), t.entered_from())).unwrap_or((None, None)),
            Some(id) => THREAD
                .try_with(|t| {
                    let previous = t.replace_scope(Some(id));
                    (previous, t.replace_entered_from(previous))
                })
                .unwrap_or((None, None)),
        };
        EnterGuard { previous, previous_from, _not_send: core::marker::PhantomData }
    }
}

/// Keeps the calling thread in a [`Scope`]; dropping it restores the thread's previous scope.
///
/// A guard may outlive its scope: the thread is then in the scopes [`Scope::enter`] describes.
#[derive(Debug)]
pub struct EnterGuard {
    previous: Option<ScopeId>,
    /// The scope the thread had entered its previous scope from.
    previous_from: Option<ScopeId>,
    /// The guard changes the state of the thread that created it, so it must be dropped on that thread.
    _not_send: core::marker::PhantomData<*const ()>,
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        let (previous, from) = (self.previous, self.previous_from);
        let _ = THREAD.try_with(|t| {
            t.replace_scope(previous);
            t.replace_entered_from(from);
        });
    }
}
