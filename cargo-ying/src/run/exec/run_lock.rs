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
        let mut options = std::fs::OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        // Never through a link (its target would be written), and never waiting on a named pipe to open.
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NOFOLLOW | libc::O_NONBLOCK);
        let file = match options.open(&path) {
            Ok(file) => file,
            Err(why) => {
                let kind = std::fs::symlink_metadata(&path).ok().map(|metadata| metadata.file_type());
                return Err(match kind.and_then(|kind| not_a_file(&kind)) {
                    Some(what) => Error::LockNotAFile { path, what },
                    None => Error::io("open", &path)(why),
                });
            }
        };
        let kind = file.metadata().map_err(Error::io("read", &path))?.file_type();
        if let Some(what) = not_a_file(&kind) {
            return Err(Error::LockNotAFile { path, what });
        }
        let mut file = file;
        crate::lock::take_or_wait(&file, &path, |file| {
            let holder = holder(file).map_or_else(String::new, |pid| format!(" (process {pid})"));
            format!("waiting for another cargo ying run{holder} on {}", out_dir.display())
        })?;
        let wrote = file.set_len(0).and_then(|()| file.rewind()).and_then(|()| write!(file, "{}", std::process::id()));
        wrote.map_err(Error::io("write", &path))?;
        Ok(Self { _file: file })
    }
}

/// What a file that is not a regular file is, in words; `None` for a regular file.
fn not_a_file(kind: &std::fs::FileType) -> Option<&'static str> {
    #[cfg(unix)]
    use std::os::unix::fs::FileTypeExt as _;
    if kind.is_file() {
        return None;
    }
    Some(if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_dir() {
        "a directory"
    } else {
        #[cfg(unix)]
        if kind.is_fifo() {
            return Some("a named pipe");
        }
        #[cfg(unix)]
        if kind.is_block_device() || kind.is_char_device() {
            return Some("a device");
        }
        "not a regular file"
    })
}

/// The process that holds the lock, as its file names it: a process id on the first line of its first bytes,
/// or nothing (a file written by something else is not shown).
fn holder(file: &File) -> Option<u32> {
    let mut start = Vec::new();
    let _ = file.take(32).read_to_end(&mut start);
    let text = String::from_utf8_lossy(&start);
    text.lines().next()?.trim().parse().ok()
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

#[cfg(all(test, unix))]
mod hostile {
    use super::{RunLock, holder};
    use std::io::{Seek as _, Write as _};

    #[test]
    fn a_lock_that_is_a_link_is_never_followed_and_its_target_stays_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("precious");
        std::fs::write(&target, "keep me").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join("lock")).unwrap();
        let error = RunLock::acquire(dir.path()).unwrap_err().chain();
        assert!(error.contains("is a symbolic link") && error.contains("remove it"), "{error}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
    }

    #[test]
    fn a_lock_that_is_a_named_pipe_or_a_directory_is_named_for_what_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = std::ffi::CString::new(dir.path().join("lock").to_str().unwrap()).unwrap();
        // SAFETY: mkfifo(3) with a NUL-terminated path that lives through the call.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        let error = RunLock::acquire(dir.path()).unwrap_err().chain();
        assert!(error.contains("is a named pipe"), "{error}");
        let other = tempfile::tempdir().unwrap();
        std::fs::create_dir(other.path().join("lock")).unwrap();
        assert!(RunLock::acquire(other.path()).unwrap_err().chain().contains("is a directory"));
    }

    #[test]
    fn the_holder_shown_is_a_process_id_never_the_files_contents() {
        let mut file = tempfile::tempfile().unwrap();
        write!(file, "{}", "x".repeat(1 << 20)).unwrap();
        file.rewind().unwrap();
        assert_eq!(holder(&file), None);
        let mut file = tempfile::tempfile().unwrap();
        writeln!(file, "4242").unwrap();
        file.rewind().unwrap();
        assert_eq!(holder(&file), Some(4242));
    }
}
