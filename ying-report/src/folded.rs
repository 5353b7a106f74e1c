//! [`FoldedStack`]: a stack and a count in the folded format of flamegraph tools (`root;...;leaf 1000`), the form
//! flamegraphs are drawn from.

use core::fmt;
use core::str::FromStr;

/// A stack, root first, with a count of bytes.
///
/// ```
/// use ying_report::FoldedStack;
///
/// let folded = FoldedStack::new(vec!["app::fill".into(), "alloc::vec::Vec<T>::with_capacity".into()], 1000);
/// assert_eq!(folded.to_string(), "app::fill;alloc::vec::Vec<T>::with_capacity 1000");
/// assert_eq!(folded.to_string().parse::<FoldedStack>().unwrap(), folded);
/// ```
///
/// Which frames of a symbolised stack a folded stack keeps, and which one carries its line, are the frame rules'
/// (`ying_frames::fold`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FoldedStack {
    /// Function names, root first; none contains `;`.
    functions: Vec<String>,
    bytes: u64,
}

impl FoldedStack {
    /// The name of a stack whose frames are unknown.
    pub const UNKNOWN: &str = "[unknown]";

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
    use super::FoldedStack;

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
