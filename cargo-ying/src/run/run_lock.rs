//! One run at a time per output directory: runs on one target directory share `<target-dir>/ying/` (scratch space,
//! reports, summary.json), so a second run waits for the first, saying so (`crate::lock`), rather than delete its
//! files.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::{Read as _, Seek as _, Write as _};
use std::path::Path;

/// The lock, held until dropped.
#[derive(Debug)]
pub(crate) struct RunLock {
    _file: File,
}

impl RunLock {
    /// Takes the lock of `out_dir` (`<out_dir>/lock`), waiting for the run that holds it; the lock file then names
    /// this process.
    pub(crate) fn acquire(out_dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(out_dir).map_err(Error::io("create", out_dir))?;
        let path = out_dir.join("lock");
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(Error::io("open", &path))?;
        crate::lock::take_or_wait(&file, &path, |file| {
            let mut holder = String::new();
            let _ = (&*file).read_to_string(&mut holder);
            let holder = holder.trim();
            let holder = if holder.is_empty() { String::new() } else { format!(" (process {holder})") };
            format!("waiting for another cargo ying run{holder} on {}", out_dir.display())
        })?;
        let wrote = file.set_len(0).and_then(|()| file.rewind()).and_then(|()| write!(file, "{}", std::process::id()));
        wrote.map_err(Error::io("write", &path))?;
        Ok(Self { _file: file })
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
