//! The code of each test binary that its test processes know by address ([`KnownCode`]: the standard library's
//! thread entries, libtest's functions around a test, whether the binary has the default global allocator), read
//! from the binary's symbol table once per run and passed to each of its test processes in [`KNOWN_CODE_ENV`]:
//! a process then does not search its executable's symbol table itself (a megabyte or more of names in a test
//! binary built without optimisation, for every test).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use ying_frames::{ExecutableStamp, KnownCode};

pub(crate) use ying_report::KNOWN_CODE_ENV;

/// The largest kept value read back ([`KnownCodes::kept_in`]): far more than any binary's.
const KEPT_MAX: u64 = 1 << 20;

/// The [`KNOWN_CODE_ENV`] value of each test binary, read on first need.
#[derive(Debug, Default)]
pub(crate) struct KnownCodes {
    by_executable: Mutex<HashMap<PathBuf, Option<Arc<str>>>>,
    /// The directory of the nextest run whose other processes (the interposer in each test, a wrapper) find the
    /// values kept there.
    kept: Option<PathBuf>,
}

impl KnownCodes {
    /// Known codes kept in the directory `run_dir` of a nextest run as well, by binary and stamp
    /// (`ying_report::nextest::known_code_path`): the first process of a run to need a binary's reads its symbol
    /// table, the others read the value it wrote.
    pub(crate) fn kept_in(run_dir: PathBuf) -> Self {
        Self { kept: Some(run_dir), ..Self::default() }
    }

    /// The value of [`KNOWN_CODE_ENV`] for the test processes of `executable`; `None` when it cannot be read (each
    /// process then reads its own).
    pub(crate) fn env_value(&self, executable: &Path) -> Option<Arc<str>> {
        let lock = || self.by_executable.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(value) = lock().get(executable) {
            return value.clone();
        }
        // Read outside the lock: another worker's binary is not kept waiting. Two workers that start the same
        // binary's first tests at once both read it, and the first kept is used.
        let value = match &self.kept {
            Some(dir) => kept(dir, executable),
            None => read(executable),
        }
        .map(Arc::from);
        lock().entry(executable.to_owned()).or_insert(value).clone()
    }
}

/// The value of `executable` kept in the run's directory `run_dir` (its file named by the binary's name and stamp),
/// read and kept there when it is not. The value carries the stamp, which the test's runtime checks against its own
/// executable.
fn kept(run_dir: &Path, executable: &Path) -> Option<String> {
    use std::io::Read as _;
    let stamp = ExecutableStamp::of(&std::fs::metadata(executable).ok()?)?;
    let path = ying_report::nextest::known_code_path(run_dir, executable, &stamp);
    let dir = path.parent()?;
    let mut text = String::new();
    // A regular file only, never through a link.
    let regular = std::fs::symlink_metadata(&path).is_ok_and(|metadata| metadata.is_file());
    if regular && std::fs::File::open(&path).and_then(|file| file.take(KEPT_MAX).read_to_string(&mut text)).is_ok() {
        return Some(text);
    }
    let value = read(executable)?;
    // Written aside, then renamed: a process reading it meanwhile sees all of it or none. A failure only costs the
    // next test's wrapper this read again.
    let _ = std::fs::create_dir_all(dir).and_then(|()| ying_report::write_own_bytes(&path, value.as_bytes(), false));
    Some(value)
}

/// The [`KNOWN_CODE_ENV`] value of `executable`, stamped with the file read.
fn read(executable: &Path) -> Option<String> {
    let (file, bytes) = crate::run::names::executable::map_executable(executable)?;
    let stamp = ExecutableStamp::of(&file.metadata().ok()?)?;
    Some(KnownCode::read(&bytes).to_env(stamp))
}

#[cfg(test)]
mod tests {
    use super::KnownCodes;
    use ying_frames::{ExecutableStamp, KnownCode};

    #[test]
    fn a_binarys_known_code_is_read_once_and_stamped_with_its_file() {
        let executable = std::env::current_exe().unwrap();
        let codes = KnownCodes::default();
        let value = codes.env_value(&executable).expect("this test binary is readable");
        let stamp = ExecutableStamp::of(&std::fs::metadata(&executable).unwrap()).unwrap();
        let code = KnownCode::from_env(&value, stamp).expect("stamped with this executable");
        assert!(!code.thread_entries.is_empty(), "{code:?}");
        assert!(std::sync::Arc::ptr_eq(&value, &codes.env_value(&executable).unwrap()), "read once");
        assert_eq!(codes.env_value(&executable.with_file_name("no-such-binary")), None);
    }

    #[test]
    fn a_kept_value_is_read_back_by_the_next_process_and_a_rebuilt_binary_gets_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let binary = dir.path().join("bin");
        std::fs::copy(std::env::current_exe().unwrap(), &binary).unwrap();
        let run = dir.path().join("run");
        let kept = run.join("known");
        let first = KnownCodes::kept_in(run.clone()).env_value(&binary).unwrap();
        let files: Vec<_> = std::fs::read_dir(&kept).unwrap().flatten().map(|entry| entry.path()).collect();
        assert_eq!(files.len(), 1, "{files:?}");
        // The next process reads what the first kept: a value written there is what it gets.
        std::fs::write(&files[0], "kept").unwrap();
        assert_eq!(&*KnownCodes::kept_in(run.clone()).env_value(&binary).unwrap(), "kept");
        // Built anew: another stamp, another file, read from the binary.
        std::fs::write(&binary, b"not an executable").unwrap();
        let rebuilt = KnownCodes::kept_in(run).env_value(&binary).unwrap();
        assert!(rebuilt.contains("\"len\":17") && rebuilt.contains("\"thread_entries\":[]"), "{rebuilt}");
        assert_eq!(std::fs::read_dir(&kept).unwrap().count(), 2);
        assert!(first.contains("thread_entries") && !first.contains("\"thread_entries\":[]"), "{first}");
    }
}
