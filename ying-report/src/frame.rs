//! [`Frame`]: one symbolised frame of an allocation stack.

use core::fmt;

/// One symbolised frame of an allocation stack.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Frame {
    /// The demangled function name, without the hash suffix (`my_crate::cache::insert`).
    pub function: String,
    /// The source file, as recorded in the debug information.
    pub file: Option<String>,
    /// The line in `file`.
    pub line: Option<u32>,
    /// The function was inlined into the frame that follows (both are at the same machine instruction).
    #[serde(default, skip_serializing_if = "core::ops::Not::not")]
    pub inlined: bool,
}

impl Frame {
    /// A frame with the given function name and source location.
    pub fn new(function: impl Into<String>, file: Option<String>, line: Option<u32>) -> Self {
        Self { function: function.into(), file, line, inlined: false }
    }

    /// This frame, marked as inlined into the frame that follows (or not).
    #[must_use]
    pub fn inlined(mut self, inlined: bool) -> Self {
        self.inlined = inlined;
        self
    }
}

impl AsRef<Frame> for Frame {
    fn as_ref(&self) -> &Frame {
        self
    }
}

/// `function at file:line`, as failure messages show a frame.
impl fmt::Display for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.function)?;
        match (&self.file, self.line) {
            (Some(file), Some(line)) => write!(f, " at {file}:{line}"),
            (Some(file), None) => write!(f, " at {file}"),
            _ => Ok(()),
        }
    }
}
