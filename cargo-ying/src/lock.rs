//! How every lock cargo ying takes is taken (the run's, the baseline's directory's): at once when it is free, else
//! saying that it waits, as cargo says it waits for its own locks.

use crate::error::{Error, Result};
use std::fs::File;
use std::path::Path;

/// Takes an exclusive lock on `file` (at `path`); while another process holds it, says so (`Blocking` and what
/// `waiting` gives, as cargo says it waits for its own locks) and waits.
pub(crate) fn take_or_wait(file: &File, path: &Path, waiting: impl FnOnce(&File) -> String) -> Result<()> {
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(std::fs::TryLockError::WouldBlock) => {
            eprintln!("{:>12} {}", "Blocking", waiting(file));
            file.lock().map_err(Error::io("lock", path))
        }
        Err(std::fs::TryLockError::Error(why)) => Err(Error::io("lock", path)(why)),
    }
}
