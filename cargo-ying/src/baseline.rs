//! The committed baseline as `cargo ying` keeps it: found, read before anything runs (a corrupt one stops the run
//! and stays as it was), and updated with a run's entries, the other tests' entries kept.
//!
//! The baseline is only ever a regular file, replaced by a rename that keeps its mode; a symbolic link's target is
//! written and the link kept. A directory, named pipe or device is refused before it is opened, and a baseline that
//! is to be saved must be writable before anything runs. Saving takes a lock on the baseline's directory (no lock
//! file is left in the user's repository), reads the baseline again and merges the run's entries into what is on
//! disk then: two runs saving at once both keep their entries.

use crate::error::{BaselineFileError, Error, Result};
use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use ying_report::{Baseline, BaselineEntry, Measured, TestId};

/// The baseline file and what it holds (nothing yet when it does not exist).
pub(crate) struct BaselineFile {
    /// Where it is, as given.
    pub path: PathBuf,
    /// Its contents, when it exists.
    pub baseline: Option<Baseline>,
}

impl BaselineFile {
    /// Reads the baseline at `path`, to compare with. A read-only file is fine; anything but a regular file (or a
    /// link to one) is refused unopened.
    pub(crate) fn open(path: PathBuf) -> Result<Self> {
        let baseline = read(&path)?;
        Ok(Self { path, baseline })
    }

    /// Reads the baseline at `path`, which is to be saved: as [`open`](Self::open), and it must be writable.
    pub(crate) fn open_to_save(path: PathBuf) -> Result<Self> {
        let file = Self::open(path)?;
        file.check_writable()?;
        Ok(file)
    }

    /// Its entries (none when it does not exist).
    pub(crate) fn entries(&self) -> &BTreeMap<TestId, BaselineEntry> {
        static NONE: BTreeMap<TestId, BaselineEntry> = BTreeMap::new();
        self.baseline.as_ref().map_or(&NONE, |baseline| &baseline.tests)
    }

    /// Fails when the baseline could not be replaced: it is read-only, or its directory is.
    fn check_writable(&self) -> Result<()> {
        let error = |source| Error::SaveBaseline { path: self.path.clone(), source };
        let target = ying_report::resolve_symlinks(&self.path).map_err(|why| error(BaselineFileError::Check(why)))?;
        match std::fs::metadata(&target) {
            Ok(metadata) => {
                // An attribute that forbids any change, whatever the permissions (root's included).
                if let Some((flag, what)) = locking_attribute(&target) {
                    return Err(error(BaselineFileError::Attribute { flag, what, directory: false }));
                }
                // No write permission for anyone (as root too), or none for this user.
                if metadata.permissions().readonly() || !writable(&target) {
                    return Err(error(BaselineFileError::ReadOnly { mode: mode(&metadata) }));
                }
            }
            Err(why) if why.kind() == std::io::ErrorKind::NotFound => {}
            Err(why) => return Err(error(BaselineFileError::Check(why))),
        }
        let dir = directory(&target);
        if let Some((flag, what)) = locking_attribute(dir) {
            return Err(error(BaselineFileError::Attribute { flag, what, directory: true }));
        }
        if !writable(dir) {
            return Err(error(BaselineFileError::DirectoryReadOnly(dir.to_owned())));
        }
        Ok(())
    }

    /// Whether the baseline was read from a file of an earlier form, which the next save writes whole: every
    /// measured test's entry is to be saved then, not only those that changed.
    pub(crate) fn is_of_earlier_form(&self) -> bool {
        self.baseline.as_ref().is_some_and(|baseline| baseline.read_from.is_some())
    }

    /// Which tests the baseline's runs measured (the leak tests, when there is none).
    pub(crate) fn measured(&self) -> Measured {
        self.baseline.as_ref().map(|baseline| baseline.measured).unwrap_or_default()
    }

    /// Writes `entries`, of a run that `measured` those tests, into the baseline, over its existing entries of the
    /// same tests; the others stay as they are on disk now (another run may have saved since this one read it).
    /// Once a run with `--measure all` saved into it, the baseline stays one of every test. Returns the schema
    /// version of the earlier form the file was in, which it is no longer.
    pub(crate) fn save(&self, entries: BTreeMap<TestId, BaselineEntry>, measured: Measured) -> Result<Option<u32>> {
        let write_error = |source| Error::WriteBaseline { path: self.path.clone(), source };
        let target = ying_report::resolve_symlinks(&self.path).map_err(write_error)?;
        let _lock = lock(directory(&target), &self.path)?;
        // A baseline read is of this version or converted from an earlier one (others are refused), as is a new one.
        let mut baseline = read(&target)?.unwrap_or_default();
        let rewritten = baseline.read_from.take();
        if measured == Measured::All {
            baseline.measured = Measured::All;
        }
        for (id, entry) in entries {
            baseline.record(id, entry);
        }
        baseline.write(&target).map_err(write_error)?;
        Ok(rewritten)
    }
}

/// Reads the baseline at `path` (a link is followed); `None` when there is none.
fn read(path: &Path) -> Result<Option<Baseline>> {
    let error = |source| Error::ReadBaseline { path: path.to_owned(), source };
    // A link to nothing is not a missing baseline: saving would replace the link.
    ying_report::resolve_symlinks(path).map_err(|why| error(why.into()))?;
    Baseline::read(path).map_err(error)
}

/// The directory `file` is in.
fn directory(file: &Path) -> &Path {
    file.parent().filter(|dir| !dir.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// The permission bits of a file.
#[cfg(unix)]
fn mode(metadata: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    metadata.permissions().mode() & 0o7777
}

/// The permission bits of a file, as Unix would show them.
#[cfg(not(unix))]
fn mode(metadata: &std::fs::Metadata) -> u32 {
    if metadata.permissions().readonly() { 0o444 } else { 0o644 }
}

/// The attribute of `path` that forbids replacing it whatever its permissions say, as chattr(1) names it with what
/// it makes the file: `i`, immutable; `a`, append-only. Linux's file attributes (`FS_IOC_GETFLAGS`).
#[cfg(target_os = "linux")]
fn locking_attribute(path: &Path) -> Option<(char, &'static str)> {
    use std::os::fd::AsRawFd as _;
    // linux/fs.h.
    const FS_IMMUTABLE_FL: libc::c_long = 0x10;
    const FS_APPEND_FL: libc::c_long = 0x20;
    let file = File::open(path).ok()?;
    let mut flags: libc::c_long = 0;
    // SAFETY: FS_IOC_GETFLAGS writes the file's flags (an int) through the pointer, to a zeroed local of at least
    // that size which outlives the call; the descriptor is open for the call.
    let got = unsafe { libc::ioctl(file.as_raw_fd(), libc::FS_IOC_GETFLAGS, &raw mut flags) };
    if got != 0 {
        return None;
    }
    if flags & FS_IMMUTABLE_FL != 0 {
        Some(('i', "immutable"))
    } else if flags & FS_APPEND_FL != 0 {
        Some(('a', "append-only"))
    } else {
        None
    }
}

/// No attribute forbids changes beyond the permissions here.
#[cfg(not(target_os = "linux"))]
fn locking_attribute(_path: &Path) -> Option<(char, &'static str)> {
    None
}

/// Whether this process may write `path`: the permissions say no more than `readonly` here.
#[cfg(not(unix))]
fn writable(_path: &Path) -> bool {
    true
}

/// Whether this process may write `path` (a file, or a directory to create and rename files in).
#[cfg(unix)]
fn writable(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt as _;
    let Ok(path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else { return false };
    // SAFETY: `path` is a NUL-terminated string that outlives the call; access(2) only reads it.
    unsafe { libc::access(path.as_ptr(), libc::W_OK) == 0 }
}

/// An exclusive lock on a directory, held until dropped.
struct DirectoryLock(#[expect(dead_code, reason = "held for its lock, released when closed")] Option<File>);

/// Takes an exclusive lock on `dir` (flock(2) on the directory itself: nothing is created in it), waiting with a
/// message naming `baseline` while another cargo ying holds it.
#[cfg(unix)]
fn lock(dir: &Path, baseline: &Path) -> Result<DirectoryLock> {
    let file = File::open(dir).map_err(Error::io("lock", dir))?;
    crate::lock::take_or_wait(&file, dir, |_| {
        format!("waiting for another cargo ying to finish writing {}", baseline.display())
    })?;
    Ok(DirectoryLock(Some(file)))
}

/// A directory cannot be opened to be locked here: saves are not serialised.
#[cfg(not(unix))]
fn lock(_dir: &Path, _baseline: &Path) -> Result<DirectoryLock> {
    Ok(DirectoryLock(None))
}

#[cfg(all(test, unix))]
mod tests {
    use super::{BaselineFile, lock};
    use std::collections::BTreeMap;
    use std::os::unix::fs::PermissionsExt as _;
    use ying_report::{Baseline, BaselineEntry, Measured, TargetKind, TestId};

    fn id(name: &str) -> TestId {
        TestId::new("pkg", TargetKind::Test, "leaks", name)
    }

    fn entries(name: &str, retained: u64) -> BTreeMap<TestId, BaselineEntry> {
        BTreeMap::from([(id(name), BaselineEntry { retained_bytes: retained, ..BaselineEntry::default() })])
    }

    fn save(file: &BaselineFile, entries: BTreeMap<TestId, BaselineEntry>) {
        assert_eq!(file.save(entries, Measured::LeakTests).unwrap(), None);
    }

    #[test]
    fn a_save_merges_into_what_is_on_disk_at_save_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ying-baseline.json");
        let first = BaselineFile::open_to_save(path.clone()).unwrap();
        let second = BaselineFile::open_to_save(path.clone()).unwrap();
        assert!(first.baseline.is_none() && second.baseline.is_none());
        // Both read the baseline before either saved; the later save keeps the earlier one's entry.
        save(&second, entries("b", 2));
        save(&first, entries("a", 1));
        let saved = Baseline::read(&path).unwrap().unwrap();
        assert_eq!(saved.tests.keys().cloned().collect::<Vec<_>>(), [id("a"), id("b")]);
        save(&first, entries("b", 3));
        assert_eq!(Baseline::read(&path).unwrap().unwrap().tests[&id("b")].retained_bytes, 3, "an entry replaced");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no lock or temporary file left");
    }

    #[test]
    fn an_earlier_form_is_written_whole_by_the_next_save_and_a_baseline_of_every_test_stays_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ying-baseline.json");
        let earlier = r#"{"schema_version": 2, "tests": {"pkg::leaks a": {"retained_bytes": 1, "peak_bytes": 2,
            "allocated_bytes": 3, "allocations": 4, "retained_stacks": ["leaks::a at tests/leaks.rs:3 1"]}}}"#;
        std::fs::write(&path, earlier).unwrap();
        let file = BaselineFile::open_to_save(path.clone()).unwrap();
        assert!(file.is_of_earlier_form());
        assert_eq!(file.save(entries("b", 5), Measured::All).unwrap(), Some(2), "it says it rewrote schema 2");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"schema_version\": 4") && !text.contains("tests/leaks.rs"), "{text}");
        assert_eq!(
            text.lines().filter(|line| line.starts_with("    \"pkg::leaks ")).count(),
            2,
            "a line a test: {text}"
        );
        let file = BaselineFile::open_to_save(path.clone()).unwrap();
        assert!(!file.is_of_earlier_form());
        assert_eq!(file.measured(), Measured::All);
        // A run of the leak tests saving into it keeps it a baseline of every test: its other entries are kept.
        save(&file, entries("a", 1));
        assert_eq!(Baseline::read(&path).unwrap().unwrap().measured, Measured::All);
    }

    #[test]
    fn a_read_only_baseline_is_read_but_not_saved() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ying-baseline.json");
        Baseline::default().write(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
        assert!(BaselineFile::open(path.clone()).unwrap().baseline.is_some(), "read for comparison");
        let error = BaselineFile::open_to_save(path.clone()).err().unwrap();
        assert_eq!(error.exit_code(), ying_report::exit_code::USAGE);
        let chain = error.chain();
        assert_eq!(
            chain,
            format!(
                "failed to save the baseline {}: it is read-only (mode 444); make it writable to save the baseline \
                 (chmod u+w)",
                path.display()
            )
        );
    }

    #[test]
    fn anything_but_a_regular_file_is_refused_unopened() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo.json");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let chain = BaselineFile::open(fifo.clone()).err().unwrap().chain();
        assert_eq!(
            chain,
            format!("failed to read the baseline {}: it is a named pipe (FIFO), not a regular file", fifo.display())
        );
        let chain = BaselineFile::open(dir.path().to_owned()).err().unwrap().chain();
        assert!(chain.ends_with("it is a directory, not a regular file"), "{chain}");
        let dangling = dir.path().join("dangling.json");
        std::os::unix::fs::symlink("nowhere.json", &dangling).unwrap();
        let chain = BaselineFile::open(dangling).err().unwrap().chain();
        assert!(chain.ends_with("it is a symbolic link to nowhere.json, which does not exist"), "{chain}");
    }

    #[test]
    fn a_linked_baseline_writes_its_target_in_the_targets_directory() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let target = elsewhere.join("real.json");
        Baseline::default().write(&target).unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o640)).unwrap();
        let link = dir.path().join("ying-baseline.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        save(&BaselineFile::open_to_save(link.clone()).unwrap(), entries("a", 1));
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert!(Baseline::read(&target).unwrap().unwrap().tests.contains_key(&id("a")));
        assert_eq!(std::fs::metadata(&target).unwrap().permissions().mode() & 0o777, 0o640);
    }

    #[test]
    fn a_second_saver_waits_for_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let held = lock(dir.path(), &dir.path().join("ying-baseline.json")).unwrap();
        let (sender, receiver) = std::sync::mpsc::channel();
        let path = dir.path().join("ying-baseline.json");
        let saver = std::thread::spawn(move || {
            save(&BaselineFile::open(path).unwrap(), entries("a", 1));
            sender.send(()).unwrap();
        });
        assert!(receiver.recv_timeout(std::time::Duration::from_millis(300)).is_err(), "it waits for the lock");
        drop(held);
        receiver.recv_timeout(std::time::Duration::from_secs(60)).unwrap();
        saver.join().unwrap();
    }

    /// An immutable baseline (chattr +i) is not read-only by its mode: the error says what it is and how to lift it.
    #[cfg(target_os = "linux")]
    #[test]
    fn an_immutable_baseline_is_named_immutable_not_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ying-baseline.json");
        Baseline::default().write(&path).unwrap();
        let chattr = |flag: &str| std::process::Command::new("chattr").arg(flag).arg(&path).status();
        if !chattr("+i").is_ok_and(|status| status.success()) {
            eprintln!("chattr +i is not available here (it needs root and a file system with attributes)");
            return;
        }
        let error = BaselineFile::open_to_save(path.clone()).err().map(|error| error.chain());
        let _ = chattr("-i");
        let error = error.expect("an immutable baseline cannot be saved");
        assert!(error.contains("is immutable (chattr +i)") && error.contains("chattr -i"), "{error}");
        assert!(!error.contains("chmod"), "{error}");
    }
}
