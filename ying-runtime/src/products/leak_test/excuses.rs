//! Excuses: retained memory that a test keeps without leaking it, told apart by the stack that allocated it.

use crate::base::ids::{ScopeId, StackId};
use crate::base::thread::as_profiler;
use crate::hot::{live, stacks};
use crate::read::symbolize::symbolize;
use std::collections::HashMap;
use ying_report::Frame;

/// Frames of the standard library's output functions: memory they retain is libtest's captured output.
const CAPTURED_OUTPUT: &[&str] = &["std::io::stdio::print_to", "std::io::stdio::_print", "std::io::stdio::_eprint"];

/// Suffixes of the initialiser `thread_local!` generates (current and earlier toolchains): memory it allocates is
/// the thread-local's value, which lives until its thread exits.
const THREAD_LOCAL_INIT: &[&str] = &["::__rust_std_internal_init_fn", "::__init"];

/// Whether memory allocated at `frames` is excused: libtest's captured output, a thread-local's initial value, or
/// matched by one of the test's `allow` patterns.
pub(super) fn frames_are_excused(frames: &[Frame], patterns: &[&str]) -> bool {
    frames.iter().any(|frame| {
        CAPTURED_OUTPUT.iter().any(|name| frame.function.starts_with(name))
            || THREAD_LOCAL_INIT.iter().any(|suffix| frame.function.ends_with(suffix))
            || patterns.iter().any(|pattern| frame.function.contains(pattern))
    })
}

/// Which recorded stacks are excused, each judged once.
pub(super) struct Excuses {
    patterns: &'static [&'static str],
    verdicts: HashMap<StackId, bool>,
}

impl Excuses {
    pub(super) fn new(patterns: &'static [&'static str]) -> Self {
        Self { patterns, verdicts: HashMap::new() }
    }

    /// Whether memory allocated from recorded stack `stack` is excused.
    pub(super) fn is_excused(&mut self, stack: StackId) -> bool {
        if let Some(&verdict) = self.verdicts.get(&stack) {
            return verdict;
        }
        let frames = stacks::ips(stack).map(|ips| symbolize(&ips)).unwrap_or_default();
        let verdict = frames_are_excused(&frames, self.patterns);
        self.verdicts.insert(stack, verdict);
        verdict
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

#[cfg(test)]
mod tests {
    use super::frames_are_excused;
    use ying_report::Frame;

    fn frames(names: &[&str]) -> Vec<Frame> {
        names.iter().map(|name| Frame::new(*name, None, None)).collect()
    }

    #[test]
    fn captured_output_thread_locals_and_allowed_sites_are_excused() {
        assert!(frames_are_excused(&frames(&["alloc::vec::Vec<T>::reserve", "std::io::stdio::_print"]), &[]));
        assert!(frames_are_excused(&frames(&["app::CACHE::__rust_std_internal_init_fn"]), &[]));
        assert!(frames_are_excused(&frames(&["regex::compile", "app::parse"]), &["regex::"]));
        assert!(!frames_are_excused(&frames(&["app::leak", "app::parse"]), &["regex::"]));
    }
}
