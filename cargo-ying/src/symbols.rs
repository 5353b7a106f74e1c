//! Symbolising the stacks a leak test deferred (`YING_DEFER_SYMBOLS`): once per test executable, here, instead of
//! every test process loading the executable's debug information for its report.

use addr2line::Loader;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use ying_report::Frame;
use ying_report::LeakReport;
use ying_report::names::{DebugFrame, frames_at_address};

/// Debug information of the test executables, each loaded on first use. The runner's workers share it, each
/// executable behind a lock of its own: reports of two executables are named at once.
#[derive(Default)]
pub struct Symbolizer {
    executables: Mutex<HashMap<PathBuf, Arc<Slot>>>,
}

/// An executable's debug information once loaded by the first thread to need it (the others wait for it), `None`
/// when it could not be read.
type Slot = OnceLock<Option<Mutex<Executable>>>;

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

/// The units of the standard library's crates that a test's stacks pass through: the harness (`test`), the
/// thread's start and the runtime (`std`), panics and formatting (`core`), the allocation plumbing (`alloc`). Each is
/// one unit of tens of thousands of line rows and entries: most of the time naming a binary's first report takes.
const LIBRARY_UNITS: [&str; 4] =
    ["/library/std/src/lib.rs", "/library/core/src/lib.rs", "/library/alloc/src/lib.rs", "/library/test/src/lib.rs"];

/// An address of each of `executable`'s [`LIBRARY_UNITS`] (each one's first), with the unit's entry of
/// [`LIBRARY_UNITS`], by a pass over its units' first entries alone; none when its debug information cannot be read.
fn library_unit_addresses(executable: &Path) -> Vec<(&'static str, u64)> {
    use object::{Object, ObjectSection};
    let Ok(file) = std::fs::File::open(executable) else { return Vec::new() };
    // SAFETY: a read-only private mapping of a test executable, which nothing writes while the run goes on (cargo
    // builds it before, and a running executable cannot be written); the bytes are only read, and a truncated file
    // at worst fails to parse.
    let Ok(bytes) = (unsafe { memmap2::Mmap::map(&file) }) else { return Vec::new() };
    let Ok(object) = object::File::parse(&*bytes) else { return Vec::new() };
    let endian = if object.is_little_endian() { gimli::RunTimeEndian::Little } else { gimli::RunTimeEndian::Big };
    let section = |id: gimli::SectionId| -> Result<gimli::EndianSlice<'_, gimli::RunTimeEndian>, gimli::Error> {
        let data = object.section_by_name(id.name()).and_then(|section| section.data().ok()).unwrap_or(&[]);
        Ok(gimli::EndianSlice::new(data, endian))
    };
    let Ok(dwarf) = gimli::Dwarf::load(section) else { return Vec::new() };
    let mut addresses = Vec::new();
    let mut headers = dwarf.units();
    while let Ok(Some(header)) = headers.next() {
        let Ok(unit) = dwarf.unit(header) else { continue };
        let Some(name) = unit.name.and_then(|name| std::str::from_utf8(name.slice()).ok()) else { continue };
        if let Some(library) = LIBRARY_UNITS.into_iter().find(|library| name.contains(library))
            && let Ok(Some(range)) = dwarf.unit_ranges(&unit).and_then(|mut ranges| ranges.next())
        {
            addresses.push((library, range.begin));
        }
    }
    addresses
}

impl Symbolizer {
    /// The slot of `path`'s debug information.
    fn slot(&self, path: &Path) -> Arc<Slot> {
        let mut executables = self.executables.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(executables.entry(path.to_owned()).or_default())
    }

    /// The debug information in `slot`, loaded from `path` if no thread has yet.
    fn loaded<'a>(slot: &'a Slot, path: &Path) -> Option<&'a Mutex<Executable>> {
        slot.get_or_init(|| {
            Loader::new(path).ok().map(|loader| Mutex::new(Executable { loader, frames: HashMap::new() }))
        })
        .as_ref()
    }

    /// Loads `executable`'s debug information and parses its [`LIBRARY_UNITS`] ahead of its first report, for a
    /// thread with nothing else to do while the tests are listed: naming the first report then takes a fraction of
    /// the time. A report of the executable waits until this is done (it would do the same work).
    pub fn prepare(&self, executable: &Path) {
        let slot = self.slot(executable);
        let Some(loaded) = Self::loaded(&slot, executable) else { return };
        let parsed = loaded.lock().unwrap_or_else(PoisonError::into_inner);
        for (_, address) in library_unit_addresses(executable) {
            if let Ok(mut frames) = parsed.loader.find_frames(address) {
                while let Ok(Some(_)) = frames.next() {}
            }
        }
    }

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
    pub fn complete(&self, report: &mut LeakReport, executable: &Path, package_dir: &Path) -> bool {
        let deferred_sites = report.retained_sites.iter().any(|site| !site.addresses.is_empty());
        if !deferred_sites && report.sampled_stacks.iter().all(|stack| stack.addresses.is_empty()) {
            return false;
        }
        let slot = self.slot(executable);
        let mut executable =
            Self::loaded(&slot, executable).map(|executable| executable.lock().unwrap_or_else(PoisonError::into_inner));
        let runtime_source = report.deferred.take().map(|deferred| deferred.runtime_source).unwrap_or_default();
        let mut stacks = Stacks {
            executable: executable.as_deref_mut(),
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
    use super::{LIBRARY_UNITS, demangle, library_unit_addresses};

    #[test]
    fn each_standard_library_unit_is_found_at_an_address_of_its_code() {
        // This test binary, as any built by libtest, links the four.
        let executable = std::env::current_exe().unwrap();
        let found = library_unit_addresses(&executable);
        for library in LIBRARY_UNITS {
            assert!(found.iter().any(|(unit, _)| *unit == library), "{library} in {found:?}");
        }
        let loader = addr2line::Loader::new(&executable).unwrap();
        for (library, address) in found {
            let mut frames = loader.find_frames(address).unwrap();
            let frame = frames.next().unwrap().unwrap_or_else(|| panic!("no frame at {address:#x} ({library})"));
            let file = frame.location.and_then(|location| location.file).unwrap_or_default();
            assert!(file.contains("/library/"), "{library}'s first code is the standard library's, not {file}");
        }
    }

    #[test]
    fn names_are_demangled_without_hashes() {
        assert_eq!(demangle("_ZN4core3ptr13drop_in_place17h2f1bfa0c6bb1e4b5E"), "core::ptr::drop_in_place");
        assert_eq!(demangle("start_thread"), "start_thread");
    }
}
