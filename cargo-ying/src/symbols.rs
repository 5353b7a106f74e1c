//! Symbolising the stacks a leak test deferred (`YING_DEFER_SYMBOLS`): once per test executable, here, instead of
//! every test process loading the executable's debug information for its report.

use addr2line::Loader;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use ying_report::Frame;
use ying_report::LeakReport;
use ying_report::names::{DebugFrame, frames_at_address};

/// Debug information of the test executables, each loaded on first use.
#[derive(Default)]
pub struct Symbolizer {
    executables: HashMap<PathBuf, Option<Executable>>,
}

/// One executable's debug information, and the frames of each address looked up in it so far: a suite's tests
/// share most of their frames (the harness's, the standard library's, common helpers).
struct Executable {
    loader: Loader,
    frames: HashMap<u64, Vec<Frame>>,
}

/// A demangled name without its hash, or the name as it is when it is not a Rust symbol.
fn demangle(name: &str) -> String {
    match rustc_demangle::try_demangle(name) {
        Ok(demangled) => format!("{demangled:#}"),
        Err(_) => name.to_owned(),
    }
}

impl Symbolizer {
    /// Frames (inlined ones expanded, innermost first) of the instruction at `address` of `executable`, named by
    /// the runtime's rule ([`frames_at_address`]).
    fn frames(loader: &Loader, address: u64) -> Vec<Frame> {
        let mut debug = Vec::new();
        // A return address points after the call: look up the call instruction itself.
        let call = address.saturating_sub(1);
        if let Ok(mut found) = loader.find_frames(call) {
            while let Ok(Some(frame)) = found.next() {
                let function =
                    frame.function.as_ref().and_then(|name| name.raw_name().ok()).map(|name| demangle(&name));
                let file = frame.location.as_ref().and_then(|location| location.file).map(str::to_owned);
                let line = frame.location.as_ref().and_then(|location| location.line);
                debug.push(DebugFrame::new(function, file, line));
            }
        }
        frames_at_address(address, debug, || loader.find_symbol(call).map(demangle))
    }

    /// Fills the frames of `report`'s deferred stacks, sampled and retained, from `executable`'s debug information,
    /// trimmed as the runtime trims them, the test body's frame named after the test, and with paths relative to
    /// `package_dir`; judges each deferred retained site's excuse by its frames, as the runtime would have. Returns
    /// whether anything changed.
    pub fn complete(&mut self, report: &mut LeakReport, executable: &Path, package_dir: &Path) -> bool {
        let deferred_sites = report.retained_sites.iter().any(|site| !site.addresses.is_empty());
        if !deferred_sites && report.sampled_stacks.iter().all(|stack| stack.addresses.is_empty()) {
            return false;
        }
        let executable = self.executables.entry(executable.to_owned()).or_insert_with(|| {
            Loader::new(executable).ok().map(|loader| Executable { loader, frames: HashMap::new() })
        });
        let runtime_source = report.deferred.take().map(|deferred| deferred.runtime_source).unwrap_or_default();
        let mut stacks = Stacks {
            executable: executable.as_mut(),
            trim: ying_report::Trim::new(&runtime_source),
            // A test runs alone in its process: the runner's frames in its stacks are this test's.
            function: report.test.function_path(),
            package_dir: package_dir.display().to_string(),
        };
        // What the runtime wrote of a deferred stack are the frames of its `tracing` spans, outside the code frames.
        for stack in &mut report.sampled_stacks {
            let addresses = std::mem::take(&mut stack.addresses);
            if let Some(mut frames) = stacks.frames(&addresses) {
                frames.append(&mut stack.frames);
                stack.frames = frames;
            }
        }
        for site in &mut report.retained_sites {
            let addresses = std::mem::take(&mut site.addresses);
            let Some(mut frames) = stacks.frames(&addresses) else { continue };
            frames.append(&mut site.frames);
            // Sites are deferred only by a test with no budget, measured from outside: it has no `allow` patterns.
            if !site.excused && ying_report::excuses::frames_are_excused(&frames, &[]) {
                site.excused = true;
                report.excused_bytes += site.bytes;
            }
            site.frames = frames;
        }
        if deferred_sites {
            // In the runtime's order, now that the deferred sites have frames.
            ying_report::report::RetainedSite::sort(&mut report.retained_sites);
        }
        true
    }
}

/// What [`Symbolizer::complete`] needs to name one report's deferred stacks.
struct Stacks<'a> {
    executable: Option<&'a mut Executable>,
    trim: ying_report::Trim<'a>,
    function: String,
    package_dir: String,
}

impl Stacks<'_> {
    /// The code frames of a stack deferred as `addresses`; `None` when there were no addresses or the executable
    /// could not be read.
    fn frames(&mut self, addresses: &[u64]) -> Option<Vec<Frame>> {
        let Executable { loader, frames } = self.executable.as_deref_mut().filter(|_| !addresses.is_empty())?;
        let code = addresses
            .iter()
            .flat_map(|&address| frames.entry(address).or_insert_with(|| Symbolizer::frames(loader, address)).clone())
            .collect();
        let code = self.trim.name_test_body(self.trim.tidy(code), &self.function);
        Some(ying_report::relative_paths(code, &[&self.package_dir]))
    }
}

#[cfg(test)]
mod tests {
    use super::demangle;

    #[test]
    fn names_are_demangled_without_hashes() {
        assert_eq!(demangle("_ZN4core3ptr13drop_in_place17h2f1bfa0c6bb1e4b5E"), "core::ptr::drop_in_place");
        assert_eq!(demangle("start_thread"), "start_thread");
    }
}
