//! Excuses: retained memory that a test keeps without leaking it, told apart by the stack that allocated it.

use crate::base::ids::{ScopeId, StackId};
use crate::base::thread::as_profiler;
use crate::hot::{live, stacks};
use crate::read::symbol_table;
use crate::read::symbolize::{deferrable_addresses, name_test_body, symbolize};
use std::collections::HashMap;
use ying_frames::excuses::frames_are_excused;

/// Code known by its addresses, without reading debug information: where the test harness and the C library
/// allocate what they keep on a test's behalf. A test measured from outside (see `unannotated`) sees the whole of
/// its thread and the C library's allocations, and retains some of these in nearly every run: telling them apart
/// must not cost a symbolisation.
struct ExcusingCode {
    /// libtest's functions that run a test on the test's thread.
    run_test: Vec<(usize, usize)>,
    /// libtest's frame through which it calls the test function.
    test_entry: Vec<(usize, usize)>,
    /// glibc's allocation of a new thread's thread-local storage (its dynamic thread vector), which stays with the
    /// thread's stack, kept by glibc for the next thread when this one exits.
    thread_storage: Option<(usize, usize)>,
    /// The standard library's backtraces: the debug information a panic's backtrace reads stays cached, megabytes
    /// of it, which the reachability scan then need not read.
    std_backtrace: Vec<(usize, usize)>,
}

/// What [`ExcusingCode`] excuses, as the one frame a report shows of it.
const LIBTEST_BOOKKEEPING: &str = "test::run_test_in_process";
const C_THREAD_STORAGE: &str = "_dl_allocate_tls";
const STD_BACKTRACE: &str = "std::backtrace_rs::symbolize";

impl ExcusingCode {
    /// The code of this process, looked up on first use.
    fn get() -> &'static Self {
        static KNOWN: std::sync::OnceLock<ExcusingCode> = std::sync::OnceLock::new();
        KNOWN.get_or_init(|| {
            let known = symbol_table::known_code();
            Self {
                run_test: symbol_table::in_process(&known.run_test),
                test_entry: symbol_table::in_process(&known.test_entry),
                thread_storage: symbol_table::shared_function(c"_dl_allocate_tls"),
                std_backtrace: symbol_table::in_process(&known.std_backtrace),
            }
        })
    }

    /// The frame that excuses memory allocated at `ips` (return addresses, innermost first), if its addresses
    /// tell: libtest's work on the test's thread outside the test function (the result it sends to its main
    /// thread), the C library's storage for a new thread, or the standard library's backtraces.
    fn excuse(&self, ips: &[usize]) -> Option<&'static str> {
        // A return address follows its call: the instruction before it is the caller's.
        let within = |ranges: &[(usize, usize)]| {
            ips.iter().any(|&ip| ranges.iter().any(|&(start, end)| (start..end).contains(&ip.wrapping_sub(1))))
        };
        if self.thread_storage.is_some_and(|range| within(&[range])) {
            Some(C_THREAD_STORAGE)
        } else if within(&self.std_backtrace) {
            Some(STD_BACKTRACE)
        } else if within(&self.run_test) && !within(&self.test_entry) {
            Some(LIBTEST_BOOKKEEPING)
        } else {
            None
        }
    }
}

/// Which recorded stacks are excused, each judged once.
pub(super) struct Excuses {
    patterns: &'static [&'static str],
    /// The test function's path, which names the frame of its body.
    function: String,
    /// Stacks whose names are left to the reader are not judged here (see `Plan::defers_excuses`).
    defer: bool,
    verdicts: HashMap<StackId, bool>,
    /// What [`known`](Self::known) found for each stack asked.
    known: HashMap<StackId, Option<&'static str>>,
}

impl Excuses {
    pub(super) fn new(patterns: &'static [&'static str], function: String, defer: bool) -> Self {
        Self { patterns, function, defer, verdicts: HashMap::new(), known: HashMap::new() }
    }

    /// Whether memory allocated from recorded stack `stack` is excused: by its addresses, or by its names unless
    /// they are left to the reader ([`deferred`](Self::deferred)).
    pub(super) fn is_excused(&mut self, stack: StackId) -> bool {
        if let Some(&verdict) = self.verdicts.get(&stack) {
            return verdict;
        }
        let verdict = self.known(stack).is_some()
            || (self.deferred(stack).is_none() && {
                let frames = stacks::ips(stack).map(|ips| name_test_body(symbolize(&ips), &self.function));
                frames_are_excused(&frames.unwrap_or_default(), self.patterns)
            });
        self.verdicts.insert(stack, verdict);
        verdict
    }

    /// The addresses of recorded stack `stack` in the executable, when the reader names and judges it instead of
    /// this process (see `RetainedSite::addresses`): names are deferred, its addresses excuse nothing
    /// ([`known`](Self::known)), and the executable made the allocation (see [`deferrable_addresses`]).
    pub(super) fn deferred(&mut self, stack: StackId) -> Option<Vec<u64>> {
        if !self.defer || self.known(stack).is_some() {
            return None;
        }
        stacks::ips(stack).and_then(|ips| deferrable_addresses(ips.as_slice()))
    }

    /// The frame that excuses memory allocated from recorded stack `stack` by its addresses alone (see
    /// [`ExcusingCode`]), if they do: its report shows that frame, and nothing is symbolised. Each stack is looked
    /// at once.
    pub(super) fn known(&mut self, stack: StackId) -> Option<&'static str> {
        *self
            .known
            .entry(stack)
            .or_insert_with(|| stacks::ips(stack).and_then(|ips| ExcusingCode::get().excuse(ips.as_slice())))
    }

    /// Bytes and blocks scope `id` owns whose stacks are excused.
    pub(super) fn owned(&mut self, id: ScopeId) -> (u64, u64) {
        as_profiler(|| {
            let mut excused = (0, 0);
            for block in live::owned_by(id).iter() {
                if block.stack.is_some_and(|stack| self.is_excused(stack)) {
                    excused.0 += block.owned as u64;
                    excused.1 += u64::from(block.owns_block);
                }
            }
            excused
        })
    }
}
