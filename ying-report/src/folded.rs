//! [`FoldedStack`]: a stack and a count in the folded format of flamegraph tools (`root;...;leaf 1000`), the form
//! baselines keep retained memory in and flamegraphs are drawn from.

use crate::frame::Frame;
use crate::trim::{is_in_leak_test_runner, leak_site};
use core::fmt;
use core::str::FromStr;

/// A stack, root first, with a count of bytes.
///
/// ```
/// use ying_report::{FoldedStack, Frame};
///
/// // Frames come innermost first, as stacks are captured; the folded stack runs from the root.
/// let frames = [Frame::new("alloc::vec::Vec<T>::with_capacity", None, None), Frame::new("app::fill", None, None)];
/// let folded = FoldedStack::from_frames(&frames, 1000).unwrap();
/// assert_eq!(folded.to_string(), "app::fill;alloc::vec::Vec<T>::with_capacity 1000");
/// assert_eq!(folded.to_string().parse::<FoldedStack>().unwrap(), folded);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FoldedStack {
    /// Function names, root first; none contains `;`.
    functions: Vec<String>,
    bytes: u64,
}

impl FoldedStack {
    /// The name of a stack whose frames are unknown.
    pub const UNKNOWN: &str = "[unknown]";

    /// The folded stack of `frames` (innermost first) with `bytes`: function names, the leak site's
    /// ([`leak_site`](crate::leak_site)) with its location as reports show it (`app::fill at src/lib.rs:12`), so
    /// two sites in one function are two frames; frames from ying's leak-test runner outwards are the test
    /// harness's, the same for every test, and are left out, except the frames of `tracing` spans
    /// (`span:<name>`), which stay at the root. `None` for zero bytes.
    pub fn from_frames(frames: &[Frame], bytes: u64) -> Option<Self> {
        if bytes == 0 {
            return None;
        }
        let inner = frames.iter().position(is_in_leak_test_runner).unwrap_or(frames.len());
        let site = leak_site(frames);
        let spans = frames[inner..].iter().filter(|frame| frame.function.starts_with("span:"));
        let functions: Vec<String> = frames[..inner]
            .iter()
            .enumerate()
            .map(|(index, frame)| if Some(index) == site { frame.to_string() } else { frame.function.clone() })
            .chain(spans.map(|frame| frame.function.clone()))
            .rev()
            .collect();
        Some(Self::new(functions, bytes))
    }

    /// A stack of `functions`, root first (`;` in a name becomes `:`; no name at all is [`Self::UNKNOWN`]).
    pub fn new(functions: Vec<String>, bytes: u64) -> Self {
        let mut functions: Vec<String> = functions.into_iter().map(|name| name.replace(';', ":")).collect();
        if functions.is_empty() {
            functions.push(Self::UNKNOWN.to_owned());
        }
        Self { functions, bytes }
    }

    /// The function names, root first.
    pub fn functions(&self) -> &[String] {
        &self.functions
    }

    /// The count.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The stack without its count: `root;...;leaf`.
    pub fn stack(&self) -> String {
        self.functions.join(";")
    }
}

impl fmt::Display for FoldedStack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.stack(), self.bytes)
    }
}

/// Why a line is not a folded stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoldedStackError(String);

impl fmt::Display for FoldedStackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FoldedStackError {}

impl FromStr for FoldedStack {
    type Err = FoldedStackError;

    fn from_str(line: &str) -> Result<Self, FoldedStackError> {
        let error = |why: &str| FoldedStackError(format!("`{line}` is not a folded stack: {why}"));
        let (stack, count) = line.rsplit_once(' ').ok_or_else(|| error("it has no count after the stack"))?;
        let bytes = count.parse().map_err(|_| error("its count is not a whole number"))?;
        if stack.is_empty() || stack.split(';').any(str::is_empty) {
            return Err(error("a function name is empty"));
        }
        Ok(Self { functions: stack.split(';').map(str::to_owned).collect(), bytes })
    }
}

/// Written as its line, `root;...;leaf bytes`.
impl serde::Serialize for FoldedStack {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for FoldedStack {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let line = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        line.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::{FoldedStack, Frame};
    use crate::trim::LEAK_TEST_RUNNER;

    #[test]
    fn folded_stacks_run_root_to_leaf_and_stop_at_the_runner() {
        let frames = [
            Frame::new("alloc::boxed::Box<T>::new", None, None),
            Frame::new("app::leak;it", None, None),
            Frame::new(format!("{LEAK_TEST_RUNNER}::{{{{closure}}}}"), None, None),
            Frame::new("test::run_test", None, None),
            Frame::new("span:request", None, None),
        ];
        let folded = FoldedStack::from_frames(&frames, 1000).unwrap();
        assert_eq!(folded.to_string(), "span:request;app::leak:it;alloc::boxed::Box<T>::new 1000");
        assert_eq!(FoldedStack::from_frames(&frames, 0), None);
        assert_eq!(FoldedStack::from_frames(&[], 5).unwrap().to_string(), "[unknown] 5");
    }

    #[test]
    fn the_leak_site_keeps_its_line_so_two_sites_in_one_function_are_two_frames() {
        let stack = |line: u32| {
            [
                Frame::new("alloc::boxed::Box<T>::new", Some("/rustc/library/alloc/src/boxed.rs".into()), Some(260)),
                Frame::new("app::leak", Some("src/lib.rs".into()), Some(line)),
                Frame::new("app::caller", Some("src/main.rs".into()), Some(3)),
                Frame::new(LEAK_TEST_RUNNER, Some("/src/ying-runtime/src/runner.rs".into()), Some(9)),
            ]
        };
        let folded = |line: u32| FoldedStack::from_frames(&stack(line), 10).unwrap().to_string();
        assert_eq!(folded(7), "app::caller;app::leak at src/lib.rs:7;alloc::boxed::Box<T>::new 10");
        assert_ne!(folded(7), folded(8));
        assert_eq!(folded(8).parse::<FoldedStack>().unwrap().to_string(), folded(8));
        // Without a frame of the package's own code (absolute paths only), names alone.
        let library =
            [Frame::new("std::io::stdio::_print", Some("/rustc/library/std/src/io/stdio.rs".into()), Some(1))];
        assert_eq!(FoldedStack::from_frames(&library, 4).unwrap().to_string(), "std::io::stdio::_print 4");
    }

    #[test]
    fn lines_parse_back_and_bad_lines_say_why() {
        let line = "<app::Cache as core::ops::Drop>::drop;app::fill 42";
        let folded: FoldedStack = line.parse().unwrap();
        assert_eq!(folded.functions(), ["<app::Cache as core::ops::Drop>::drop", "app::fill"]);
        assert_eq!(folded.bytes(), 42);
        assert_eq!(folded.to_string(), line);
        assert!("app::fill".parse::<FoldedStack>().unwrap_err().to_string().contains("no count"));
        assert!("app::fill x".parse::<FoldedStack>().unwrap_err().to_string().contains("not a whole number"));
        assert!("a;;b 1".parse::<FoldedStack>().unwrap_err().to_string().contains("empty"));
        let json: Vec<FoldedStack> = serde_json::from_str("[\"a;b 3\"]").unwrap();
        assert_eq!(serde_json::to_string(&json).unwrap(), "[\"a;b 3\"]");
    }
}
