//! The frames named at each address of a test executable, and the types read at the frames retained sites were
//! typed at, kept from one run to the next under `<target-dir>/ying/symbols/`: while an executable is as it was, a
//! run names its reports' stacks and types from there, without loading the executable's debug information (tens of
//! milliseconds for each binary, on every run).
//!
//! A kept file holds for the executable it was written for (its path, length and modification time) and for the
//! cargo ying that named its frames (the same of cargo ying's own executable): a rebuilt test binary, or another
//! build of cargo ying, names its frames anew. A file that cannot be read, or is not a kept file, is left out the
//! same way (and written over at the end of the run): it is a cache, never an input.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;
use ying_report::Frame;

/// The layout of a kept file: a file of another layout is not read.
const FORMAT: u32 = 2;

/// The type read at each frame a retained site was typed at, by the frame's address and its index among the
/// address's frames; `None` where the debug information tells none.
pub(crate) type KeptTypes = HashMap<(u64, usize), Option<String>>;

/// What the kept frames were named from and by.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Identity {
    /// The layout of the file ([`FORMAT`]).
    format: u32,
    /// The test executable.
    executable: PathBuf,
    /// The test executable's length and modification time (nanoseconds since the Unix epoch).
    executable_file: (u64, u128),
    /// cargo ying's own executable's length and modification time.
    namer_file: (u64, u128),
}

/// A kept file: its identity, the frames of each address (a stack's return address), by address, and the types
/// read at frames (`[address, index, type]`), by address and index.
#[derive(serde::Serialize, serde::Deserialize)]
struct Kept {
    identity: Identity,
    frames: Vec<(u64, Vec<Frame>)>,
    types: Vec<(u64, usize, Option<String>)>,
}

/// The most a kept file is read: a larger one is not one cargo ying wrote for a test binary.
const MAX_KEPT: u64 = 256 << 20;

/// The bytes of the kept file at `path`, when it is a regular file (never through a link, never a named pipe or a
/// device, which could block or never end) of at most [`MAX_KEPT`] bytes.
fn read_kept(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read as _;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NOFOLLOW | libc::O_NONBLOCK);
    let file = options.open(path).ok()?;
    let metadata = file.metadata().ok()?;
    if !metadata.is_file() || metadata.len() > MAX_KEPT {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(MAX_KEPT + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= MAX_KEPT).then_some(bytes)
}

/// The length and modification time of the file at `path`.
fn file_stamp(path: &Path) -> Option<(u64, u128)> {
    let metadata = std::fs::metadata(path).ok()?;
    let modified = metadata.modified().ok()?.duration_since(UNIX_EPOCH).ok()?;
    Some((metadata.len(), modified.as_nanos()))
}

/// The frames kept for one executable, and where they are kept.
pub(crate) struct SymbolCache {
    /// The kept file.
    path: PathBuf,
    /// `None` when the executable or cargo ying's own cannot be told apart from another (nothing is kept).
    identity: Option<Identity>,
    /// How many addresses, and how many typed frames, the kept file had when it was read.
    read: (usize, usize),
}

impl SymbolCache {
    /// The kept frames and types of `executable` in `dir` when they hold for it, else none; and the cache to
    /// [`save`](Self::save) them to.
    pub(crate) fn open(dir: &Path, executable: &Path) -> (Self, HashMap<u64, Vec<Frame>>, KeptTypes) {
        let name = executable.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
        // The executable's name, and its path's hash: the same name in two directories (profiles, workspaces).
        let hash = twox_hash::XxHash3_128::oneshot(executable.as_os_str().as_encoded_bytes());
        let path = dir.join(format!("{name}.{:016x}.json", hash as u64));
        let namer = std::env::current_exe().ok().and_then(|namer| file_stamp(&namer));
        let identity = file_stamp(executable).zip(namer).map(|(executable_file, namer_file)| Identity {
            format: FORMAT,
            executable: executable.to_owned(),
            executable_file,
            namer_file,
        });
        let (frames, types): (HashMap<u64, Vec<Frame>>, KeptTypes) = identity
            .as_ref()
            .and_then(|identity| {
                let kept: Kept = serde_json::from_slice(&read_kept(&path)?).ok()?;
                let types = kept.types.into_iter().map(|(address, index, name)| ((address, index), name));
                (kept.identity == *identity).then(|| (kept.frames.into_iter().collect(), types.collect()))
            })
            .unwrap_or_default();
        (Self { path, identity, read: (frames.len(), types.len()) }, frames, types)
    }

    /// Whether frames were kept for the executable (a run names none of its addresses from its debug information).
    pub(crate) fn was_kept(&self) -> bool {
        self.read.0 > 0
    }

    /// Keeps `frames` and `types` for the next run, when there are more of either than were read: written aside,
    /// then moved over the kept file, so that a run reading it meanwhile (another run on this target directory)
    /// reads one whole.
    pub(crate) fn save(&self, frames: &HashMap<u64, Vec<Frame>>, types: &KeptTypes) -> std::io::Result<()> {
        let Some(identity) = &self.identity else { return Ok(()) };
        if frames.len() <= self.read.0 && types.len() <= self.read.1 {
            return Ok(());
        }
        let mut frames: Vec<(u64, Vec<Frame>)> =
            frames.iter().map(|(address, frames)| (*address, frames.clone())).collect();
        frames.sort_unstable_by_key(|(address, _)| *address);
        let mut types: Vec<(u64, usize, Option<String>)> =
            types.iter().map(|(&(address, index), name)| (address, index, name.clone())).collect();
        types.sort_unstable();
        let kept = Kept { identity: identity.clone(), frames, types };
        let json = serde_json::to_vec(&kept).map_err(std::io::Error::other)?;
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        ying_report::write_own_bytes(&self.path, &json, false)
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::SymbolCache;
    use std::time::Duration;

    /// The kept file's path for `executable` in `dir`, as `open` names it.
    fn kept_path(dir: &std::path::Path, executable: &std::path::Path) -> std::path::PathBuf {
        let name = executable.file_name().unwrap().to_string_lossy().into_owned();
        let hash = twox_hash::XxHash3_128::oneshot(executable.as_os_str().as_encoded_bytes());
        dir.join(format!("{name}.{:016x}.json", hash as u64))
    }

    #[test]
    fn a_kept_file_that_is_a_pipe_or_an_endless_device_is_passed_over_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let executable = dir.path().join("tests-0123");
        std::fs::write(&executable, "a test binary").unwrap();
        let kept = kept_path(dir.path(), &executable);
        let fifo = std::ffi::CString::new(kept.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo(3) with a NUL-terminated path that lives through the call.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        // Read in a thread, so that a read that never ends fails the test instead of hanging it.
        let open = |dir: std::path::PathBuf, executable: std::path::PathBuf| {
            let (sender, receiver) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let (cache, frames, _) = SymbolCache::open(&dir, &executable);
                let _ = sender.send((cache.was_kept(), frames.len()));
            });
            receiver.recv_timeout(Duration::from_secs(60)).expect("the kept file is passed over, not read forever")
        };
        assert_eq!(open(dir.path().to_owned(), executable.clone()), (false, 0), "a named pipe");
        std::fs::remove_file(&kept).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &kept).unwrap();
        assert_eq!(open(dir.path().to_owned(), executable), (false, 0), "a link to an endless device");
    }
}
