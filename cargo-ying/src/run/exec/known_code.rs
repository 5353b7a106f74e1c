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

/// The [`KNOWN_CODE_ENV`] value of each test binary, read on first need.
#[derive(Debug, Default)]
pub(crate) struct KnownCodes {
    by_executable: Mutex<HashMap<PathBuf, Option<Arc<str>>>>,
}

impl KnownCodes {
    /// The value of [`KNOWN_CODE_ENV`] for the test processes of `executable`; `None` when it cannot be read (each
    /// process then reads its own).
    pub(crate) fn env_value(&self, executable: &Path) -> Option<Arc<str>> {
        let lock = || self.by_executable.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(value) = lock().get(executable) {
            return value.clone();
        }
        // Read outside the lock: another worker's binary is not kept waiting. Two workers that start the same
        // binary's first tests at once both read it, and the first kept is used.
        let value = read(executable).map(Arc::from);
        lock().entry(executable.to_owned()).or_insert(value).clone()
    }
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
}
