//! One run at a time per output directory: runs on one target directory share `<target-dir>/ying/` (scratch space,
//! reports, summary.json), so a second run waits for the first, saying so, rather than delete its files.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::{Read as _, Seek as _, Write as _};
use std::path::Path;

/// The lock, held until dropped.
#[derive(Debug)]
pub struct RunLock {
    _file: File,
}

impl RunLock {
    /// Takes the lock of `out_dir` (`<out_dir>/lock`), waiting for the run that holds it; the lock file then names
    /// this process.
    pub fn acquire(out_dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(out_dir).map_err(Error::io("create", out_dir))?;
        let path = out_dir.join("lock");
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(Error::io("open", &path))?;
        if !flock(&file, libc::LOCK_EX | libc::LOCK_NB).map_err(Error::io("lock", &path))? {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            let holder = if holder.is_empty() { String::new() } else { format!(" (process {holder})") };
            eprintln!("{:>12} waiting for another cargo ying run{holder} on {}", "Blocking", out_dir.display());
            flock(&file, libc::LOCK_EX).map_err(Error::io("lock", &path))?;
        }
        let wrote = file.set_len(0).and_then(|()| file.rewind()).and_then(|()| write!(file, "{}", std::process::id()));
        wrote.map_err(Error::io("write", &path))?;
        Ok(Self { _file: file })
    }
}

/// `flock(2)` on `file`: `Ok(false)` when `LOCK_NB` was given and another holds it.
fn flock(file: &File, operation: libc::c_int) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd as _;
    loop {
        // SAFETY: the descriptor is open for the duration of the call.
        if unsafe { libc::flock(file.as_raw_fd(), operation) } == 0 {
            return Ok(true);
        }
        let error = std::io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EINTR) => {}
            Some(libc::EWOULDBLOCK) => return Ok(false),
            _ => return Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RunLock;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn a_second_run_waits_for_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let first = RunLock::acquire(dir.path()).unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("lock")).unwrap(), std::process::id().to_string());
        let (sender, receiver) = mpsc::channel();
        let path = dir.path().to_owned();
        let second = std::thread::spawn(move || {
            let lock = RunLock::acquire(&path).unwrap();
            sender.send(()).unwrap();
            lock
        });
        assert!(
            receiver.recv_timeout(Duration::from_millis(300)).is_err(),
            "the second waits while the first holds it"
        );
        drop(first);
        receiver.recv().unwrap();
        drop(second.join().unwrap());
    }
}
