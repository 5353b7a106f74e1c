//! Standard error without allocating or locking: a message composed in a buffer on the stack and written with
//! `write(2)`, for what the allocator must say while it cannot allocate (a refused giant allocation).

use core::fmt;

/// A message for standard error, composed on the stack. What does not fit the buffer is written as it fills.
pub(crate) struct Stderr {
    buffer: [u8; 512],
    len: usize,
}

impl Stderr {
    pub(crate) const fn new() -> Self {
        Self { buffer: [0; 512], len: 0 }
    }

    /// Adds `bytes` to the message.
    pub(crate) fn bytes(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.len == self.buffer.len() {
                self.flush();
            }
            let room = (self.buffer.len() - self.len).min(bytes.len());
            self.buffer[self.len..self.len + room].copy_from_slice(&bytes[..room]);
            self.len += room;
            bytes = &bytes[room..];
        }
    }

    /// Writes `line` and a line break, then everything so far.
    pub(crate) fn line(mut self, line: &[u8]) {
        self.bytes(line);
        self.bytes(b"\n");
        self.flush();
    }

    /// Writes what the buffer holds. Errors are ignored: there is nowhere else to say anything.
    pub(crate) fn flush(&mut self) {
        let mut pending = &self.buffer[..self.len];
        while !pending.is_empty() {
            match write(pending) {
                Some(0) | None => break,
                Some(written) => pending = &pending[written..],
            }
        }
        self.len = 0;
    }
}

impl fmt::Write for Stderr {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        self.bytes(text.as_bytes());
        Ok(())
    }
}

/// Writes some of `bytes` to standard error; how many, or `None` on an error other than an interruption.
#[cfg(unix)]
fn write(bytes: &[u8]) -> Option<usize> {
    loop {
        // SAFETY: `bytes` is valid for reads of its length for the whole call; `write` reads nothing else.
        let written = unsafe { libc::write(libc::STDERR_FILENO, bytes.as_ptr().cast(), bytes.len()) };
        if written >= 0 {
            return Some(written as usize);
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return None;
        }
    }
}

/// Writes some of `bytes` to standard error (unbuffered in the standard library); how many, or `None` on an error.
#[cfg(not(unix))]
fn write(bytes: &[u8]) -> Option<usize> {
    std::io::Write::write(&mut std::io::stderr(), bytes).ok()
}
