//! How a test process that nextest's wrapper started in its own place (`exec`) says how it ended: the allocation
//! interposer, loaded into it, writes one short line to the file [`END_MARK_ENV`] names as the process exits
//! (`exit 101 at <ns>`, with the processes it ended as it did: `exit 0 ended 2 at <ns>`) or as a signal that ends
//! it arrives (`signal 15 at <ns>`), `<ns>` the time it ended, in nanoseconds since the Unix epoch. No line at all says that the process ended without a word: killed by `SIGKILL`, or by a signal
//! whose handler is the program's or the standard library's (`SIGSEGV`).
//!
//! The line is rendered into a caller's buffer ([`EndMark::render`]): the interposer writes it from a signal
//! handler, where nothing may allocate.

/// The environment variable naming the file a test process's end mark goes to.
pub const END_MARK_ENV: &str = "YING_END_MARK";

/// The longest end mark there is, in bytes: a buffer this long holds any [`EndMark::render`]s.
pub const END_MARK_MAX: usize = 64;

/// How a test process ended, as it said itself, and when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndMark {
    /// How.
    pub ending: Ending,
    /// When, in nanoseconds since the Unix epoch.
    pub at_ns: u64,
}

/// How a test process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// It exited with this code, having ended `ended` processes it left running (its children, and what it
    /// adopted as their subreaper).
    Exited {
        /// The exit code.
        code: i32,
        /// The processes it ended on its way out.
        ended: u32,
    },
    /// This signal ended it.
    Signalled(i32),
}

impl EndMark {
    /// Renders the mark into `buf`, without allocating; returns the length written. `buf` must be
    /// [`END_MARK_MAX`] bytes or more.
    #[must_use]
    pub fn render(self, buf: &mut [u8]) -> usize {
        let mut len = 0;
        let mut put = |bytes: &[u8]| {
            buf[len..len + bytes.len()].copy_from_slice(bytes);
            len += bytes.len();
        };
        match self.ending {
            Ending::Exited { code, ended } => {
                put(b"exit ");
                put(digits(i64::from(code), &mut [0; 24]));
                if ended > 0 {
                    put(b" ended ");
                    put(digits(i64::from(ended), &mut [0; 24]));
                }
            }
            Ending::Signalled(signal) => {
                put(b"signal ");
                put(digits(i64::from(signal), &mut [0; 24]));
            }
        }
        put(b" at ");
        put(digits(i64::try_from(self.at_ns).unwrap_or(i64::MAX), &mut [0; 24]));
        put(b"\n");
        len
    }

    /// The mark `text` holds; `None` for anything else (a file cut short, or another's).
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        let (ending, at) = text.strip_suffix('\n')?.split_once(" at ")?;
        let words: Vec<&str> = ending.split(' ').collect();
        let ending = match words.as_slice() {
            ["exit", code] => Ending::Exited { code: code.parse().ok()?, ended: 0 },
            ["exit", code, "ended", ended] => Ending::Exited { code: code.parse().ok()?, ended: ended.parse().ok()? },
            ["signal", signal] => Ending::Signalled(signal.parse().ok().filter(|signal| *signal > 0)?),
            _ => return None,
        };
        Some(Self { ending, at_ns: at.parse().ok()? })
    }
}

/// `value` in decimal, in `buf`.
fn digits(value: i64, buf: &mut [u8; 24]) -> &[u8] {
    let mut at = buf.len();
    let mut rest = value.unsigned_abs();
    loop {
        at -= 1;
        buf[at] = b'0' + u8::try_from(rest % 10).unwrap_or(0);
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    if value < 0 {
        at -= 1;
        buf[at] = b'-';
    }
    &buf[at..]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(mark: EndMark) -> String {
        let mut buf = [0; END_MARK_MAX];
        let len = mark.render(&mut buf);
        String::from_utf8(buf[..len].to_vec()).unwrap()
    }

    #[test]
    fn every_mark_reads_back_as_written() {
        let endings = [
            Ending::Exited { code: 0, ended: 0 },
            Ending::Exited { code: 101, ended: 2 },
            Ending::Exited { code: i32::MIN, ended: u32::MAX },
            Ending::Signalled(15),
        ];
        for (ending, at_ns) in endings.into_iter().zip([0, 1, 1_796_609_909_891_657_210, i64::MAX as u64]) {
            let mark = EndMark { ending, at_ns };
            let text = rendered(mark);
            assert!(text.len() <= END_MARK_MAX);
            assert_eq!(EndMark::parse(&text), Some(mark), "{text:?}");
        }
        let mark = EndMark { ending: Ending::Exited { code: 101, ended: 2 }, at_ns: 7 };
        assert_eq!(rendered(mark), "exit 101 ended 2 at 7\n");
    }

    #[test]
    fn anything_else_is_no_mark() {
        let texts =
            ["", "exit 1 at 2", "exit 1\n", "exit at 2\n", "exit x at 2\n", "signal 0 at 2\n", "signal 15 9 at 2\n"];
        for text in texts.into_iter().chain(["exit 0 ended at 2\n", "exit 0 at -1\n", "exit 0 at x\n", "{}\n"]) {
            assert_eq!(EndMark::parse(text), None, "{text:?}");
        }
    }
}
