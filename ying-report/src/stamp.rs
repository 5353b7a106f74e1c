//! Which file an executable is, told without reading it: a test binary built anew since a run (or a process whose
//! executable is not the one a value was worked out for) has another stamp.

use serde::{Deserialize, Serialize};

/// Which file an executable is: its device, inode, length and modification time (nanoseconds since the Unix epoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ExecutableStamp {
    device: u64,
    inode: u64,
    len: u64,
    modified_ns: u128,
}

impl ExecutableStamp {
    /// The stamp of the file `metadata` describes; `None` where the platform does not tell a file apart this way.
    pub fn of(metadata: &std::fs::Metadata) -> Option<Self> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let modified = metadata.modified().ok()?.duration_since(std::time::UNIX_EPOCH).ok()?;
            Some(Self {
                device: metadata.dev(),
                inode: metadata.ino(),
                len: metadata.len(),
                modified_ns: modified.as_nanos(),
            })
        }
        #[cfg(not(unix))]
        {
            let _ = metadata;
            None
        }
    }

    /// A name for this stamp in a file name: the same for the same file, in every process that reads the same file.
    pub fn key(&self) -> String {
        format!("{:x}-{:x}-{:x}-{:x}", self.device, self.inode, self.len, self.modified_ns)
    }
}
