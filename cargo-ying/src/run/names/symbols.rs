//! Symbolising the stacks a leak test deferred (`YING_DEFER_SYMBOLS`): once per test executable, here, instead of
//! every test process loading the executable's debug information for its report; code that several executables
//! link (the standard library's, a dependency's) once per run ([`CodeKey`]); and, while the executable does not
//! change, once for all runs ([`SymbolCache`]). A retained site's type is read there too, at the frame the frame
//! rules pick ([`ying_frames::types`]), by [`DebugTypes`] at the frame's entry addr2line gives.

use crate::run::names::code_units::{CodeKey, CodeUnits};
use crate::run::names::symbol_cache::{KeptTypes, SymbolCache};
use addr2line::Loader;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use ying_frames::debug_types::DebugTypes;
use ying_frames::names::{DebugFrame, frames_at_address};
use ying_frames::types::{AllocatedType, allocated_type};
use ying_report::Frame;
use ying_report::LeakReport;

/// Debug information of the test executables, each loaded on first use and let go once the executable's last
/// expected report is named ([`Symbolizer::expect`]): a run holds the debug information of the executables whose
/// tests are running, not of every one it ran. The runner's workers share it, each executable behind a lock of its
/// own: reports of two executables are named at once.
#[derive(Default)]
pub(crate) struct Symbolizer {
    executables: Mutex<HashMap<PathBuf, Arc<Slot>>>,
    /// Where each executable's frames are kept from one run to the next; `None`: nowhere.
    kept: Option<PathBuf>,
    /// The workspace's `allow` patterns, which excuse a deferred site as the runtime's excuses would.
    allow: Vec<String>,
    /// The reports still expected of each executable.
    expected: Mutex<HashMap<PathBuf, usize>>,
    /// How many executables have their debug information loaded.
    loaded: Arc<Loaded>,
    /// What every executable of the run named (see [`code_units`](crate::run::names::code_units)).
    shared: Arc<SharedFrames>,
}

/// The frames each executable of a run named, by their code's [`CodeKey`], which another executable of the build
/// finds the same frames at; and the units [`Symbolizer::prepare`] parsed.
#[derive(Default)]
struct SharedFrames {
    /// The process names one executable's stacks: nothing to share, no keys read.
    alone: bool,
    frames: Mutex<HashMap<CodeKey, Vec<Frame>>>,
    prepared: Mutex<HashSet<Arc<str>>>,
}

impl SharedFrames {
    fn get(&self, key: &CodeKey) -> Option<Vec<Frame>> {
        self.frames.lock().unwrap_or_else(PoisonError::into_inner).get(key).cloned()
    }

    fn insert(&self, key: CodeKey, frames: &[Frame]) {
        self.frames.lock().unwrap_or_else(PoisonError::into_inner).entry(key).or_insert_with(|| frames.to_vec());
    }

    /// Whether no executable prepared `unit` before (and the caller is to).
    fn first_to_prepare(&self, unit: &Arc<str>) -> bool {
        self.prepared.lock().unwrap_or_else(PoisonError::into_inner).insert(Arc::clone(unit))
    }
}

/// At most this many executables' debug information is loaded ahead of their reports ([`Symbolizer::prepare`]):
/// each is tens to hundreds of megabytes once parsed.
const PREPARED_AHEAD: usize = 2;

/// A count of the executables whose debug information is loaded, that [`Symbolizer::prepare`] waits on.
#[derive(Default)]
struct Loaded {
    count: Mutex<usize>,
    changed: Condvar,
}

impl Loaded {
    fn add(&self, change: isize) {
        let mut count = self.count.lock().unwrap_or_else(PoisonError::into_inner);
        *count = count.saturating_add_signed(change);
        self.changed.notify_all();
    }

    /// Waits until fewer than `most` are loaded.
    fn wait_below(&self, most: usize) {
        let count = self.count.lock().unwrap_or_else(PoisonError::into_inner);
        drop(self.changed.wait_while(count, |count| *count >= most).unwrap_or_else(PoisonError::into_inner));
    }
}

/// An executable's frames, opened by the first thread to need them (the others wait for it).
type Slot = OnceLock<Mutex<Executable>>;

/// One executable's frames of each address named so far, the kept ones first: a suite's tests share most of their
/// frames (the harness's, the standard library's, common helpers), and a run most of them with the last run; and
/// its debug information, loaded at the first address that is not there. The same for the types of the frames
/// retained sites are typed at.
struct Executable {
    path: PathBuf,
    /// `None` until needed; then `Some(None)` when it cannot be read.
    loader: Option<Option<Loader>>,
    /// `None` until needed, as `loader`.
    units: Option<CodeUnits>,
    frames: HashMap<u64, Vec<Frame>>,
    /// The type read at each frame a site was typed at, by its address and its index among the address's frames;
    /// `None` where the debug information tells none.
    types: KeptTypes,
    /// `None` until needed; then `Some(None)` when it cannot be read.
    debug_types: Option<Option<DebugTypes<memmap2::Mmap>>>,
    cache: Option<SymbolCache>,
    /// The symbolizer's count of loaded executables, this one's loading and letting go counted in it.
    loaded: Arc<Loaded>,
    /// What the run's executables named.
    shared: Arc<SharedFrames>,
}

impl Executable {
    /// The executable at `path`, with the frames kept for it in `kept`.
    fn open(path: &Path, kept: Option<&Path>, loaded: Arc<Loaded>, shared: Arc<SharedFrames>) -> Self {
        let (cache, frames, types) = match kept {
            Some(dir) => {
                let (cache, frames, types) = SymbolCache::open(dir, path);
                (Some(cache), frames, types)
            }
            None => (None, HashMap::new(), HashMap::new()),
        };
        Self {
            path: path.to_owned(),
            loader: None,
            units: None,
            frames,
            types,
            debug_types: None,
            cache,
            loaded,
            shared,
        }
    }

    /// The executable's debug information, loaded the first time; `None` when it cannot be read.
    fn loader(&mut self) -> Option<&Loader> {
        if self.loader.is_none() {
            self.loader = Some(Loader::new(&self.path).ok());
            self.loaded.add(1);
        }
        self.loader.as_ref().and_then(Option::as_ref)
    }

    /// The executable's units, read the first time.
    fn units(&mut self) -> &CodeUnits {
        self.units.get_or_insert_with(|| CodeUnits::read(&self.path))
    }

    /// Lets go of the debug information (the frames and types named from it stay): loaded again if needed.
    fn let_go(&mut self) {
        self.debug_types = None;
        self.units = None;
        if self.loader.take().is_some() {
            self.loaded.add(-1);
        }
    }

    /// The frames at each of `addresses`, in order, each named from the debug information the first time.
    /// `None` when an address must be named and the debug information cannot be read.
    fn frames_at(&mut self, addresses: &[u64]) -> Option<Vec<Frame>> {
        let mut code = Vec::new();
        for address in addresses {
            if !self.frames.contains_key(address) {
                let named = self.name(*address)?;
                self.frames.insert(*address, named);
            }
            code.extend(self.frames[address].iter().cloned());
        }
        Some(code)
    }

    /// The frames at `address`: those another executable of the run named at the same code, else named from the
    /// debug information (and kept for the others). `None` when the debug information cannot be read.
    fn name(&mut self, address: u64) -> Option<Vec<Frame>> {
        // A return address points after the call: the call instruction is keyed, as it is looked up.
        let call = address.saturating_sub(1);
        let alone = self.shared.alone;
        let loader = self.loader()?;
        let symbol = (!alone)
            .then(|| loader.find_symbol_info(call).map(|symbol| (symbol.name().to_owned(), symbol.address())))
            .flatten();
        let key = symbol.and_then(|(name, start)| self.units().key(call, &name, start));
        if let Some(frames) = key.as_ref().and_then(|key| self.shared.get(key)) {
            return Some(frames);
        }
        let named = Symbolizer::frames(self.loader()?, address);
        if let Some(key) = key {
            self.shared.insert(key, &named);
        }
        Some(named)
    }

    /// The type allocated at a stack deferred as `addresses`, whose frames are named already: read at the frame
    /// the frame rules pick ([`allocated_type`]), after the allocator's frames (`trim`); `None` where they pick none
    /// or the debug information tells none.
    fn allocated_type(&mut self, addresses: &[u64], trim: &ying_frames::Trim<'_>) -> Option<String> {
        let (address, index, allocated) = {
            let mut located = Vec::new();
            for address in addresses {
                for (index, frame) in self.frames.get(address)?.iter().enumerate() {
                    located.push(Located { frame, address: *address, index });
                }
            }
            trim.strip_allocator_frames(&mut located);
            let allocated = allocated_type(&located)?;
            let at = &located[allocated.frame()];
            (at.address, at.index, allocated)
        };
        if let Some(kept) = self.types.get(&(address, index)) {
            return kept.clone();
        }
        let read = self.read_type(address, index, allocated);
        self.types.insert((address, index), read.clone());
        read
    }

    /// The type `allocated` names at frame `index` of the instruction at `address`, from the debug information.
    fn read_type(&mut self, address: u64, index: usize, allocated: AllocatedType) -> Option<String> {
        let call = address.saturating_sub(1);
        let entry = frame_entries(self.loader()?, address).get(index).copied().flatten()?;
        match allocated {
            AllocatedType::Known { name, .. } => Some(name.to_owned()),
            AllocatedType::Argument { parameter, .. } => {
                let path = &self.path;
                let types = self.debug_types.get_or_insert_with(|| crate::run::names::types::open(path)).as_ref()?;
                types.argument(call, entry, parameter)
            }
        }
    }
}

/// A frame of a stack, with the address it was named at and its index among that address's frames.
struct Located<'a> {
    frame: &'a Frame,
    address: u64,
    index: usize,
}

impl AsRef<Frame> for Located<'_> {
    fn as_ref(&self) -> &Frame {
        self.frame
    }
}

/// The offset of each frame's entry in its unit of the debug information, for the frames [`frames_at_address`]
/// names at `address`, in their order; `None` for a frame the debug information has no entry for.
fn frame_entries(loader: &Loader, address: u64) -> Vec<Option<usize>> {
    let mut found = Vec::new();
    if let Ok(mut frames) = loader.find_frames(address.saturating_sub(1)) {
        while let Ok(Some(frame)) = frames.next() {
            found.push((
                frame.function.is_some(),
                frame.dw_die_offset.and_then(|offset| usize::try_from(gimli::ReaderOffset::into_u64(offset.0)).ok()),
            ));
        }
    }
    // As `frames_at_address` names them: the inlined frames that have a name, then the outermost.
    let Some((_, outermost)) = found.pop() else { return vec![None] };
    found.into_iter().filter(|(named, _)| *named).map(|(_, entry)| entry).chain([outermost]).collect()
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

/// Each of `units` that is one of [`LIBRARY_UNITS`], with an address of its code.
fn library_units(units: &CodeUnits) -> Vec<(Arc<str>, u64)> {
    let library = |name: &str| LIBRARY_UNITS.iter().any(|library| name.contains(library));
    units
        .first_addresses()
        .into_iter()
        .filter(|(name, _)| library(name))
        .map(|(name, at)| (Arc::clone(name), at))
        .collect()
}

impl Symbolizer {
    /// A symbolizer that keeps each executable's frames in `kept` from one run to the next (see [`SymbolCache`]).
    pub(crate) fn keeping_frames_in(kept: PathBuf) -> Self {
        Self { kept: Some(kept), ..Self::default() }
    }

    /// The symbolizer of a process that names the stacks of one executable only (nextest's wrapper, a process per
    /// test): it shares no frames, and reads no units to key them by.
    #[must_use]
    pub(crate) fn alone(mut self) -> Self {
        self.shared = Arc::new(SharedFrames { alone: true, ..SharedFrames::default() });
        self
    }

    /// The symbolizer, judging deferred sites with the workspace's `allow` patterns too.
    #[must_use]
    pub(crate) fn excusing(mut self, allow: Vec<String>) -> Self {
        self.allow = allow;
        self
    }

    /// The slot of `path`'s frames.
    fn slot(&self, path: &Path) -> Arc<Slot> {
        let mut executables = self.executables.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(executables.entry(path.to_owned()).or_default())
    }

    /// The frames in `slot`, opened for `path` if no thread has yet.
    fn opened<'a>(&self, slot: &'a Slot, path: &Path) -> &'a Mutex<Executable> {
        slot.get_or_init(|| {
            let (loaded, shared) = (Arc::clone(&self.loaded), Arc::clone(&self.shared));
            Mutex::new(Executable::open(path, self.kept.as_deref(), loaded, shared))
        })
    }

    /// One more report is expected of `executable` (a test of it is to run): its debug information, once loaded,
    /// is kept until the report is [`done`](Self::done).
    pub(crate) fn expect(&self, executable: &Path) {
        let mut expected = self.expected.lock().unwrap_or_else(PoisonError::into_inner);
        *expected.entry(executable.to_owned()).or_default() += 1;
    }

    /// Every report expected of `executable` is done: its tests ran before it was prepared.
    fn all_done(&self, executable: &Path) -> bool {
        self.expected.lock().unwrap_or_else(PoisonError::into_inner).get(executable) == Some(&0)
    }

    /// An expected report of `executable` is named (or its test ended without one): at the last, the executable's
    /// debug information is let go.
    pub(crate) fn done(&self, executable: &Path) {
        let last = {
            let mut expected = self.expected.lock().unwrap_or_else(PoisonError::into_inner);
            let left = expected.entry(executable.to_owned()).or_default();
            *left = left.saturating_sub(1);
            *left == 0
        };
        // Only an executable opened already has anything to let go.
        let slot = self.executables.lock().unwrap_or_else(PoisonError::into_inner).get(executable).cloned();
        if last && let Some(opened) = slot.as_deref().and_then(OnceLock::get) {
            opened.lock().unwrap_or_else(PoisonError::into_inner).let_go();
        }
    }

    /// Opens `executable`'s frames ahead of its first report and, unless frames were kept for it, loads its debug
    /// information and parses its [`LIBRARY_UNITS`] that no executable of the run parsed before (the others' frames
    /// serve it there, see [`code_units`](crate::run::names::code_units)), for a thread with nothing else to do while the
    /// tests are listed: naming the first report then takes a fraction of the time. A report of the executable
    /// waits until this is done (it would do the same work). Waits first until fewer than [`PREPARED_AHEAD`]
    /// executables have their debug information loaded.
    pub(crate) fn prepare(&self, executable: &Path) {
        self.loaded.wait_below(PREPARED_AHEAD);
        let slot = self.slot(executable);
        let mut opened = self.opened(&slot, executable).lock().unwrap_or_else(PoisonError::into_inner);
        // Checked with the executable locked: `done` lets go of what is loaded after this.
        if opened.cache.as_ref().is_some_and(SymbolCache::was_kept) || self.all_done(executable) {
            return;
        }
        if opened.loader().is_none() {
            return;
        }
        let units = library_units(opened.units());
        let Some(loader) = opened.loader() else { return };
        for (unit, address) in units {
            if self.shared.first_to_prepare(&unit)
                && let Ok(mut frames) = loader.find_frames(address)
            {
                while let Ok(Some(_)) = frames.next() {}
            }
        }
    }

    /// Keeps each executable's frames for the next run, where there are new ones. A file that cannot be written is
    /// not kept: the next run names those frames from the debug information again.
    pub(crate) fn save(&self) {
        let slots: Vec<Arc<Slot>> =
            self.executables.lock().unwrap_or_else(PoisonError::into_inner).values().cloned().collect();
        for slot in slots {
            let Some(executable) = slot.get() else { continue };
            let executable = executable.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(cache) = &executable.cache {
                let _ = cache.save(&executable.frames, &executable.types);
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
    /// the package's directory (`package_dirs`: where it is, and where it was built when that was elsewhere); judges each deferred retained site's excuse by its frames, as the runtime would have. Returns
    /// whether anything changed.
    pub(crate) fn complete(&self, report: &mut LeakReport, executable: &Path, package_dirs: &[&Path]) -> bool {
        let deferred_sites = report.retained_sites.iter().any(|site| !site.addresses.is_empty());
        if !deferred_sites && report.sampled_stacks.iter().all(|stack| stack.addresses.is_empty()) {
            return false;
        }
        let slot = self.slot(executable);
        let mut executable = self.opened(&slot, executable).lock().unwrap_or_else(PoisonError::into_inner);
        let runtime_source = report.deferred.take().map(|deferred| deferred.runtime_source).unwrap_or_default();
        let mut stacks = Stacks {
            executable: &mut executable,
            trim: ying_frames::Trim::new(&runtime_source),
            // A test runs alone in its process: the runner's frames in its stacks are this test's.
            function: report.test.function_path(),
            package_dirs: package_dirs.iter().map(|dir| dir.display().to_string()).collect(),
        };
        // What the runtime wrote of a deferred stack are the frames of its `tracing` spans, outside the code frames.
        for stack in &mut report.sampled_stacks {
            let addresses = std::mem::take(&mut stack.addresses);
            if let Some(mut frames) = stacks.frames(&addresses) {
                frames.append(&mut stack.frames);
                stack.frames = frames;
            }
        }
        let allow: Vec<&str> = self.allow.iter().map(String::as_str).collect();
        for site in &mut report.retained_sites {
            let addresses = std::mem::take(&mut site.addresses);
            let Some(mut frames) = stacks.frames(&addresses) else { continue };
            site.type_name = stacks.executable.allocated_type(&addresses, &stacks.trim);
            frames.append(&mut site.frames);
            // Sites are deferred only by a test with no budget, measured from outside: it has no `allow` patterns
            // of its own, only the workspace's.
            if !site.excused && ying_frames::excuses::frames_are_excused(&frames, &allow) {
                site.excused = true;
                report.excused_bytes += site.bytes;
            }
            site.frames = frames;
        }
        if deferred_sites {
            // In the runtime's order, now that the deferred sites have frames.
            ying_report::report::RetainedSite::sort(&mut report.retained_sites);
            // The threads the test left running, as the runtime tells them where it names the sites itself.
            report.tasks.extend(ying_frames::tasks::threads_left(&report.retained_sites));
        }
        true
    }
}

/// What [`Symbolizer::complete`] needs to name one report's deferred stacks.
struct Stacks<'a> {
    executable: &'a mut Executable,
    trim: ying_frames::Trim<'a>,
    function: String,
    package_dirs: Vec<String>,
}

impl Stacks<'_> {
    /// The code frames of a stack deferred as `addresses`; `None` when there were no addresses or the executable
    /// could not be read.
    fn frames(&mut self, addresses: &[u64]) -> Option<Vec<Frame>> {
        if addresses.is_empty() {
            return None;
        }
        let code = self.executable.frames_at(addresses)?;
        let code = self.trim.name_test_body(self.trim.tidy(code), &self.function);
        let bases: Vec<&str> = self.package_dirs.iter().map(String::as_str).collect();
        Some(ying_frames::relative_paths(code, &bases))
    }
}

#[cfg(test)]
mod tests {
    use super::{LIBRARY_UNITS, Symbolizer, demangle, frame_entries, library_units};
    use crate::run::names::code_units::CodeUnits;
    use crate::run::names::executable::map_executable;
    use std::hint::black_box;
    use std::path::{Path, PathBuf};
    use ying_report::Frame;

    /// The frames `symbolizer` names at `address` of `executable`, as a report's stack would get them.
    fn name(symbolizer: &Symbolizer, executable: &Path, address: u64) -> Vec<Frame> {
        let slot = symbolizer.slot(executable);
        let mut opened = symbolizer.opened(&slot, executable).lock().unwrap();
        opened.frames_at(&[address]).unwrap()
    }

    /// A copy of this test binary in `dir` (its modification time is the test's to change), and the return
    /// address of a call at the standard library's first code in it.
    fn executable_in(dir: &Path) -> (PathBuf, u64) {
        let executable = dir.join("executable");
        std::fs::copy(std::env::current_exe().unwrap(), &executable).unwrap();
        let (_, address) = library_units(&CodeUnits::read(&executable))[0];
        (executable, address + 1)
    }

    /// The only file in `dir`.
    fn only_file(dir: &Path) -> PathBuf {
        let files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|entry| entry.unwrap().path()).collect();
        assert_eq!(files.len(), 1, "{files:?}");
        files.into_iter().next().unwrap()
    }

    #[test]
    fn frames_are_kept_for_the_next_run_while_the_executable_is_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let (executable, address) = executable_in(dir.path());
        let kept = dir.path().join("symbols");
        let first = Symbolizer::keeping_frames_in(kept.clone());
        let named = name(&first, &executable, address);
        assert!(named.iter().any(|frame| frame.file.as_ref().is_some_and(|file| file.contains("/library/"))));
        first.save();

        // The kept frame renamed: a run that names it from the kept file says so.
        let file = only_file(&kept);
        let mut json: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        json["frames"][0][1][0]["function"] = "kept::frame".into();
        std::fs::write(&file, serde_json::to_vec(&json).unwrap()).unwrap();
        let second = Symbolizer::keeping_frames_in(kept.clone());
        second.prepare(&executable);
        assert_eq!(name(&second, &executable, address)[0].function, "kept::frame");
        let slot = second.slot(&executable);
        assert!(slot.get().unwrap().lock().unwrap().loader.is_none(), "no debug information loaded");

        // The executable rebuilt: its frames are named from its debug information again, and kept anew.
        let modified = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
        std::fs::File::options().write(true).open(&executable).unwrap().set_modified(modified).unwrap();
        let third = Symbolizer::keeping_frames_in(kept.clone());
        assert_eq!(name(&third, &executable, address), named);
        third.save();
        let fourth = Symbolizer::keeping_frames_in(kept);
        assert_eq!(name(&fourth, &executable, address), named);
        assert!(fourth.slot(&executable).get().unwrap().lock().unwrap().loader.is_none());
    }

    /// Whether `symbolizer` holds `executable`'s debug information.
    fn holds(symbolizer: &Symbolizer, executable: &Path) -> bool {
        symbolizer.slot(executable).get().is_some_and(|opened| opened.lock().unwrap().loader.is_some())
    }

    #[test]
    fn debug_information_is_let_go_after_the_last_expected_report_and_prepared_at_most_two_ahead() {
        let dir = tempfile::tempdir().unwrap();
        let executables: Vec<(PathBuf, u64)> = (0..3)
            .map(|index| {
                let sub = dir.path().join(index.to_string());
                std::fs::create_dir(&sub).unwrap();
                executable_in(&sub)
            })
            .collect();
        let symbolizer = std::sync::Arc::new(Symbolizer::default());
        for (executable, address) in &executables[..2] {
            symbolizer.expect(executable);
            symbolizer.expect(executable);
            let named = name(&symbolizer, executable, *address);
            assert!(!named.is_empty() && holds(&symbolizer, executable));
        }

        // Two are loaded: the third is prepared only once one of them is let go.
        let (sender, receiver) = std::sync::mpsc::channel();
        let preparing = {
            let (symbolizer, third) = (std::sync::Arc::clone(&symbolizer), executables[2].0.clone());
            std::thread::spawn(move || {
                symbolizer.prepare(&third);
                sender.send(()).unwrap();
            })
        };
        let waited = receiver.recv_timeout(std::time::Duration::from_millis(300));
        assert!(waited.is_err(), "prepared while two executables were loaded");
        let first = &executables[0].0;
        symbolizer.done(first);
        assert!(holds(&symbolizer, first), "one report of the first is still expected");
        symbolizer.done(first);
        assert!(!holds(&symbolizer, first), "the first's last report is done");
        receiver.recv_timeout(std::time::Duration::from_secs(60)).expect("the third is prepared");
        preparing.join().unwrap();
        assert!(holds(&symbolizer, &executables[2].0));

        // An executable whose tests all ran before it was prepared is not loaded for nothing.
        let second = &executables[1].0;
        symbolizer.done(second);
        symbolizer.done(second);
        assert!(!holds(&symbolizer, second));
        symbolizer.prepare(second);
        assert!(!holds(&symbolizer, second), "prepared after its last report");
        // Named again after it was let go, from its debug information loaded anew.
        let address = executables[0].1 + 16;
        assert_eq!(name(&symbolizer, first, address), name(&Symbolizer::default(), first, address));
    }

    #[test]
    fn a_sites_type_is_read_at_the_frame_the_rules_pick_and_kept_for_the_next_run() {
        let dir = tempfile::tempdir().unwrap();
        let (executable, address) = executable_in(dir.path());
        let kept = dir.path().join("symbols");
        let trim = ying_frames::Trim::new("/build/ying-runtime/src/");
        let first = Symbolizer::keeping_frames_in(kept.clone());
        name(&first, &executable, address);
        {
            let slot = first.slot(&executable);
            let mut opened = first.opened(&slot, &executable).lock().unwrap();
            // A stack of two addresses: the allocator's frames, a box at the inner one, the program at the outer.
            let frame = |function: &str| Frame::new(function, None, None);
            opened.frames.insert(1, vec![frame("__rustc::__rust_alloc"), frame("alloc::boxed::Box<T>::new")]);
            opened.frames.insert(2, vec![frame("app::open_session")]);
            opened.types.insert((1, 1), Some("app::Session".into()));
            assert_eq!(opened.allocated_type(&[1, 2], &trim).as_deref(), Some("app::Session"));
            assert_eq!(opened.allocated_type(&[2], &trim), None, "no allocating generic");
        }
        first.save();

        let second = Symbolizer::keeping_frames_in(kept.clone());
        let slot = second.slot(&executable);
        let mut opened = second.opened(&slot, &executable).lock().unwrap();
        assert_eq!(opened.allocated_type(&[1, 2], &trim).as_deref(), Some("app::Session"));
        assert!(opened.loader.is_none(), "read from the kept frames and types");
        drop(opened);

        // A file of another layout is not read.
        let file = only_file(&kept);
        let mut json: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        json["identity"]["format"] = 1.into();
        std::fs::write(&file, serde_json::to_vec(&json).unwrap()).unwrap();
        let third = Symbolizer::keeping_frames_in(kept);
        let slot = third.slot(&executable);
        let opened = third.opened(&slot, &executable).lock().unwrap();
        assert!(opened.types.is_empty() && opened.frames.is_empty());
    }

    #[test]
    fn a_kept_file_that_cannot_be_read_is_named_anew_and_written_over() {
        let dir = tempfile::tempdir().unwrap();
        let (executable, address) = executable_in(dir.path());
        let kept = dir.path().join("symbols");
        let first = Symbolizer::keeping_frames_in(kept.clone());
        let named = name(&first, &executable, address);
        first.save();
        let file = only_file(&kept);
        std::fs::write(&file, "{\"identity\": 1").unwrap();
        let second = Symbolizer::keeping_frames_in(kept.clone());
        assert_eq!(name(&second, &executable, address), named);
        second.save();
        let json: serde_json::Value = serde_json::from_slice(&std::fs::read(only_file(&kept)).unwrap()).unwrap();
        assert_eq!(json["frames"][0][0], address, "written over whole");
    }

    #[test]
    fn frames_named_in_one_executable_serve_another_of_the_run_at_the_same_code() {
        let dir = tempfile::tempdir().unwrap();
        let [(first, address), (second, _)] = ["first", "second"].map(|name| {
            let sub = dir.path().join(name);
            std::fs::create_dir(&sub).unwrap();
            executable_in(&sub)
        });
        let symbolizer = Symbolizer::default();
        let named = name(&symbolizer, &first, address);
        assert!(named.iter().any(|frame| frame.file.as_ref().is_some_and(|file| file.contains("/library/"))));

        // What the first named, at the standard library's code, is what the second gets there: marked, to tell.
        let marked = vec![Frame::new("shared::frame".to_owned(), None, None)];
        {
            let mut shared = symbolizer.shared.frames.lock().unwrap();
            assert!(!shared.is_empty(), "the first's frames are shared");
            assert!(shared.values().any(|frames| *frames == named));
            for frames in shared.values_mut() {
                frames.clone_from(&marked);
            }
        }
        assert_eq!(name(&symbolizer, &second, address), marked);
        // Another run names it from the debug information.
        assert_eq!(name(&Symbolizer::default(), &second, address), named);
    }

    #[test]
    fn a_symbolizer_alone_shares_nothing_and_reads_no_units() {
        let dir = tempfile::tempdir().unwrap();
        let (executable, address) = executable_in(dir.path());
        let symbolizer = Symbolizer::default().alone();
        assert!(name(&symbolizer, &executable, address).iter().any(|frame| frame.file.is_some()));
        assert!(symbolizer.shared.frames.lock().unwrap().is_empty());
        let slot = symbolizer.slot(&executable);
        assert!(slot.get().unwrap().lock().unwrap().units.is_none(), "no units read");
    }

    #[test]
    fn each_library_unit_is_prepared_by_the_first_executable_of_the_run_only() {
        let dir = tempfile::tempdir().unwrap();
        let (executable, _) = executable_in(dir.path());
        let symbolizer = Symbolizer::default();
        symbolizer.prepare(&executable);
        let prepared = symbolizer.shared.prepared.lock().unwrap().clone();
        for library in LIBRARY_UNITS {
            assert!(prepared.iter().any(|unit| unit.contains(library)), "{library} in {prepared:?}");
        }
        assert!(prepared.iter().all(|unit| !symbolizer.shared.first_to_prepare(unit)));
    }

    #[test]
    fn without_a_place_to_keep_them_no_frames_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (executable, address) = executable_in(dir.path());
        let symbolizer = Symbolizer::default();
        assert!(!name(&symbolizer, &executable, address).is_empty());
        symbolizer.save();
        assert_eq!(only_file(dir.path()), executable, "nothing written beside it");
    }

    #[test]
    fn each_standard_library_unit_is_found_at_an_address_of_its_code() {
        // This test binary, as any built by libtest, links the four.
        let executable = std::env::current_exe().unwrap();
        let found = library_units(&CodeUnits::read(&executable));
        for library in LIBRARY_UNITS {
            assert!(found.iter().any(|(unit, _)| unit.contains(library)), "{library} in {found:?}");
        }
        let loader = addr2line::Loader::new(&executable).unwrap();
        for (library, address) in found {
            let mut frames = loader.find_frames(address).unwrap();
            let frame = frames.next().unwrap().unwrap_or_else(|| panic!("no frame at {address:#x} ({library})"));
            let file = frame.location.and_then(|location| location.file).unwrap_or_default();
            assert!(file.contains("/library/"), "{library}'s first code is the standard library's, not {file}");
        }
    }

    /// Inlined into its caller wherever it is called, in any build: its frame is an inlined one.
    #[inline(always)]
    fn doubled(value: u64) -> u64 {
        black_box(value) * 2
    }

    /// Calls `doubled`, inlined, twice.
    #[inline(never)]
    fn calls_inlined(value: u64) -> u64 {
        doubled(value) + doubled(value + 1)
    }

    #[test]
    fn the_frames_entries_found_at_an_address_are_those_addr2line_gives() {
        use object::{Object, ObjectSymbol};
        assert_eq!(calls_inlined(black_box(3)), 14);
        let executable = std::env::current_exe().unwrap();
        let loader = addr2line::Loader::new(&executable).unwrap();
        let types = crate::run::names::types::open(&executable).unwrap();
        let (_, map) = map_executable(&executable).unwrap();
        let object = object::File::parse(&*map).unwrap();
        // This test's function, unoptimised, and functions of the standard library, optimised, with much inlined
        // into them.
        let functions = [
            "cargo_ying::run::names::symbols::tests::calls_inlined",
            "core::fmt::write",
            "alloc::fmt::format::format_inner",
            "std::io::stdio::_print",
        ];
        let mut compared = 0;
        for name in functions {
            let symbol = object
                .symbols()
                .find(|symbol| symbol.name().is_ok_and(|symbol| demangle(symbol) == name))
                .unwrap_or_else(|| panic!("{name} in the symbol table"));
            let (start, size) = (symbol.address(), symbol.size());
            let mut inlined = 0;
            // Addresses spread over the function (each costs a pass over its unit's entries), instructions' and
            // bytes between them alike.
            for address in (start..start + size).step_by(usize::try_from(size / 48).unwrap().max(1)) {
                // `frame_entries` looks up the call before a return address.
                let expected = frame_entries(&loader, address + 1);
                assert_eq!(types.frame_entries(address), expected, "{name} at {address:#x}");
                inlined += usize::from(expected.len() > 1);
                compared += 1;
            }
            assert!(inlined > 0, "{name} has inlined frames");
        }
        assert!(compared > 150, "{compared} addresses");
    }

    #[test]
    fn names_are_demangled_without_hashes() {
        assert_eq!(demangle("_ZN4core3ptr13drop_in_place17h2f1bfa0c6bb1e4b5E"), "core::ptr::drop_in_place");
        assert_eq!(demangle("start_thread"), "start_thread");
    }
}
