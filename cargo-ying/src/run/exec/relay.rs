//! A test's output passed on as it is written (to nextest, which captures it) while the wrapper keeps what it needs
//! to say why the test failed: the first panic's message, and the last lines, as nextest's JUnit keeps them. Each
//! stream is read on a thread of its own and written through whole; only the kept lines are held, so a test that
//! writes gigabytes costs no memory here.

use crate::model;
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::process::{ChildStderr, ChildStdout};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How many of the last lines are kept.
pub(crate) const TAIL_LINES: usize = 40;

/// The longest line kept, in bytes: the rest of a longer one is cut, with a mark.
const LINE_BYTES: usize = 1024;

/// How long the relay waits, once the test's process has ended, for its streams to close: a process it left
/// running keeps them open (nextest waits as long, by default, before it calls such a test leaky).
const GRACE: Duration = Duration::from_millis(100);

/// What the relay kept of a test's output.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Kept {
    /// The first panic's message, as the run model words it (`panicked at tests/a.rs:9:5: assertion failed`).
    pub panic: Option<String>,
    /// The last [`TAIL_LINES`] lines of standard output and error, interleaved as they were read.
    pub tail: String,
}

impl Kept {
    /// What is kept of a test's whole output `text` (its standard output and error, one after the other), as the
    /// relay keeps it of the streams: nextest's JUnit holds that of a test the wrapper did not relay.
    pub(crate) fn of_output(text: &str) -> Self {
        let lines = Mutex::new(Lines::default());
        pass_on(text.as_bytes(), std::io::sink(), &lines);
        lines.into_inner().unwrap_or_else(PoisonError::into_inner).kept()
    }
}

/// The lines seen so far, shared by the two streams' threads.
#[derive(Default)]
struct Lines {
    /// The last lines.
    tail: VecDeque<String>,
    /// The first panic's message, once its line and the next were seen.
    panic: Option<String>,
    /// A panic's first line waiting for the next (its message).
    panicking: Option<String>,
}

impl Lines {
    /// Takes one whole line (without its end).
    fn push(&mut self, line: &[u8]) {
        let mut text = String::from_utf8_lossy(&line[..line.len().min(LINE_BYTES)]).into_owned();
        if line.len() > LINE_BYTES {
            text.push_str(" [...]");
        }
        if self.panic.is_none() {
            match self.panicking.take() {
                Some(first) => self.panic = model::panic_message(&format!("{first}\n{text}")),
                None if text.contains(" panicked at ") => self.panicking = Some(text.clone()),
                None => {}
            }
        }
        if self.tail.len() == TAIL_LINES {
            self.tail.pop_front();
        }
        self.tail.push_back(text);
    }

    /// What was kept once the streams ended.
    fn kept(mut self) -> Kept {
        if let Some(first) = self.panicking.take().filter(|_| self.panic.is_none()) {
            self.panic = model::panic_message(&first);
        }
        let mut tail = String::new();
        for line in &self.tail {
            tail.push_str(line);
            tail.push('\n');
        }
        Kept { panic: self.panic, tail }
    }
}

/// The relay of one test process's two streams.
pub(crate) struct Relay {
    lines: Arc<Mutex<Lines>>,
    /// Closed once every stream's thread has read its stream to the end (each holds a sender until then).
    ended: Receiver<()>,
}

impl Relay {
    /// Starts passing `stdout` and `stderr` on to this process's.
    pub(crate) fn start(stdout: Option<ChildStdout>, stderr: Option<ChildStderr>) -> Self {
        let lines = Arc::new(Mutex::new(Lines::default()));
        let (reading, ended) = mpsc::channel::<()>();
        if let Some(stdout) = stdout {
            let (lines, reading) = (Arc::clone(&lines), reading.clone());
            std::thread::spawn(move || {
                pass_on(stdout, std::io::stdout(), &lines);
                drop(reading);
            });
        }
        if let Some(stderr) = stderr {
            let lines = Arc::clone(&lines);
            std::thread::spawn(move || {
                pass_on(stderr, std::io::stderr(), &lines);
                drop(reading);
            });
        }
        Self { lines, ended }
    }

    /// What was kept, once both streams closed or, when a process the test left running holds them, [`GRACE`]
    /// after the call (the threads then go on passing its output on while this process lives).
    pub(crate) fn finish(self) -> Kept {
        // Nothing is ever sent: the wait ends the moment the last thread's sender goes, or at the grace's end.
        let _ = self.ended.recv_timeout(GRACE);
        let lines = std::mem::take(&mut *self.lines.lock().unwrap_or_else(PoisonError::into_inner));
        lines.kept()
    }
}

/// Copies `from` to `to` as it comes, and gives `lines` each whole line (a last line without its end too).
fn pass_on(mut from: impl Read, mut to: impl Write, lines: &Mutex<Lines>) {
    let mut buffer = [0_u8; 8192];
    let mut line = Vec::new();
    loop {
        let read = match from.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let chunk = &buffer[..read];
        // Whatever becomes of this process's own streams, the test's are read to their end.
        let _ = to.write_all(chunk).and_then(|()| to.flush());
        let mut lines = lines.lock().unwrap_or_else(PoisonError::into_inner);
        for piece in chunk.split_inclusive(|&byte| byte == b'\n') {
            match piece.strip_suffix(b"\n") {
                Some(end) => {
                    if line.len() < LINE_BYTES * 2 {
                        line.extend_from_slice(end);
                    }
                    lines.push(line.strip_suffix(b"\r").unwrap_or(&line));
                    line.clear();
                }
                None if line.len() < LINE_BYTES * 2 => line.extend_from_slice(piece),
                None => {}
            }
        }
    }
    if !line.is_empty() {
        lines.lock().unwrap_or_else(PoisonError::into_inner).push(&line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(text: &str) -> Kept {
        Kept::of_output(text)
    }

    #[test]
    fn the_first_panic_is_kept_whatever_follows_it() {
        let mut text = String::from("running 1 test\nthread 't' (7) panicked at tests/a.rs:9:5:\nleft != right\n");
        for n in 0..500 {
            text.push_str(&format!("line {n}\n"));
        }
        text.push_str("thread 'u' panicked at tests/b.rs:1:1:\nlater\n");
        let kept = kept(&text);
        assert_eq!(kept.panic.as_deref(), Some("panicked at tests/a.rs:9:5: left != right"));
        assert_eq!(kept.tail.lines().count(), TAIL_LINES);
        assert!(kept.tail.ends_with("thread 'u' panicked at tests/b.rs:1:1:\nlater\n"), "{}", kept.tail);
    }

    #[test]
    fn a_panic_on_the_last_line_and_a_long_line_are_kept_bounded() {
        let kept = kept(&format!("{}\r\nthread 'main' panicked at src/lib.rs:3:1:", "x".repeat(100_000)));
        assert_eq!(kept.panic.as_deref(), Some("panicked at src/lib.rs:3:1"));
        let first = kept.tail.lines().next().unwrap();
        assert_eq!(first.len(), LINE_BYTES + " [...]".len());
    }
}
