//! [`TestId`]: which test of which target of which package, shown one way everywhere and stored under a file name
//! no other test shares.

use core::fmt;
use core::str::FromStr;

/// The kind of a Cargo target whose tests run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TargetKind {
    /// The package's library (unit tests in `src/lib.rs`; also a proc-macro, rlib, dylib, cdylib or staticlib).
    Lib,
    /// A binary (unit tests in `src/main.rs` or `src/bin/`).
    Bin,
    /// An integration test (`tests/`).
    Test,
    /// A benchmark (`benches/`).
    Bench,
    /// An example (`examples/`).
    Example,
}

impl TargetKind {
    /// The kind of a target from the kinds cargo gives it (`["lib"]`, `["test"]`, `["proc-macro"]`, ...);
    /// `None` for a target that has no tests (a build script).
    pub fn from_cargo(kinds: &[&str]) -> Option<Self> {
        kinds.iter().find_map(|kind| match *kind {
            "lib" | "rlib" | "dylib" | "cdylib" | "staticlib" | "proc-macro" => Some(Self::Lib),
            "bin" => Some(Self::Bin),
            "test" => Some(Self::Test),
            "bench" => Some(Self::Bench),
            "example" => Some(Self::Example),
            _ => None,
        })
    }

    /// Its name: `lib`, `bin`, `test`, `bench` or `example`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Lib => "lib",
            Self::Bin => "bin",
            Self::Test => "test",
            Self::Bench => "bench",
            Self::Example => "example",
        }
    }

    /// Whether cargo compiles the target with `CARGO_BIN_NAME` set (binaries and examples).
    pub fn is_binary(self) -> bool {
        matches!(self, Self::Bin | Self::Example)
    }
}

impl fmt::Display for TargetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One test: package, target (kind and name) and the test's path as the test harness lists it.
///
/// Shown as cargo-nextest shows a test, the binary's id then the test: `my-crate tests::parses` (the library's
/// unit tests), `my-crate::bin/my-tool tests::parses` (a binary's), `my-crate::cache evicts` (an integration test),
/// `my-crate::bench/b x`, `my-crate::example/e x`.
///
/// ```
/// use ying_report::{TargetKind, TestId};
///
/// let lib = TestId::new("app", TargetKind::Lib, "app", "tests::same_unit");
/// let bin = TestId::new("app", TargetKind::Bin, "app", "tests::same_unit");
/// assert_eq!(lib.to_string(), "app tests::same_unit");
/// assert_eq!(bin.to_string(), "app::bin/app tests::same_unit");
/// assert_eq!(bin.to_string().parse::<TestId>().unwrap(), bin);
/// assert_eq!(lib.file_stem(), "app/lib/app/tests.same_unit");
/// assert_ne!(lib.report_path(), bin.report_path());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub struct TestId {
    /// The Cargo package.
    pub package: String,
    /// The kind of the target the test is in.
    pub kind: TargetKind,
    /// The target's name (`leaks` for `tests/leaks.rs`); for the library, the package's name: a package has one
    /// library, and its tests are known by the package.
    pub target: String,
    /// The test's path as the test harness lists it (`cache::tests::evicts`).
    pub name: String,
}

impl TestId {
    /// The test `name` of target `target` (of `kind`) of `package`. A library's target name is not kept: the
    /// package names it.
    pub fn new(
        package: impl Into<String>,
        kind: TargetKind,
        target: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        let package = package.into();
        let target = if kind == TargetKind::Lib { package.clone() } else { target.into() };
        Self { package, kind, target, name: name.into() }
    }

    /// The id of the test binary, as cargo-nextest writes it: `package` for the library, `package::target` for an
    /// integration test, `package::kind/target` for the others.
    pub fn binary_id(&self) -> String {
        match self.kind {
            TargetKind::Lib => self.package.clone(),
            TargetKind::Test => format!("{}::{}", self.package, self.target),
            kind => format!("{}::{kind}/{}", self.package, self.target),
        }
    }

    /// Where the test's files go, relative to the output directory and without extension:
    /// `package/kind/target/test`, each part a [file-name component](file_name_component).
    pub fn file_stem(&self) -> String {
        format!(
            "{}/{}/{}/{}",
            file_name_component(&self.package),
            self.kind,
            file_name_component(&self.target),
            file_name_component(&self.name)
        )
    }

    /// The test's report, relative to the output directory: `reports/<file stem>.json`.
    pub fn report_path(&self) -> String {
        format!("reports/{}.json", self.file_stem())
    }

    /// The whole output of the test when it failed, relative to the output directory: `output/<file stem>.log`.
    pub fn output_path(&self) -> String {
        format!("output/{}.log", self.file_stem())
    }

    /// A flamegraph of the test, relative to the output directory: `flamegraphs/<file stem>.<what>.svg`.
    pub fn flamegraph_path(&self, what: &str) -> String {
        format!("flamegraphs/{}.{what}.svg", self.file_stem())
    }
}

impl fmt::Display for TestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.binary_id(), self.name)
    }
}

/// Why a text is not a test id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestIdError(String);

impl fmt::Display for TestIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TestIdError {}

impl FromStr for TestId {
    type Err = TestIdError;

    /// Reads the display form back: `binary-id test`.
    fn from_str(text: &str) -> Result<Self, TestIdError> {
        let error = |why: &str| {
            TestIdError(format!("`{text}` is not a test id ({why}); ids read like `my-crate::cache tests::evicts`"))
        };
        let (binary, name) = text.split_once(' ').ok_or_else(|| error("no test name after the binary"))?;
        if name.is_empty() || binary.is_empty() {
            return Err(error("an empty part"));
        }
        let (package, kind, target) = match binary.split_once("::") {
            None => (binary, TargetKind::Lib, binary),
            Some((package, rest)) => match rest.split_once('/') {
                None => (package, TargetKind::Test, rest),
                Some(("bin", target)) => (package, TargetKind::Bin, target),
                Some(("bench", target)) => (package, TargetKind::Bench, target),
                Some(("example", target)) => (package, TargetKind::Example, target),
                Some((kind, _)) => return Err(error(&format!("unknown target kind `{kind}`"))),
            },
        };
        if package.is_empty() || target.is_empty() {
            return Err(error("an empty part"));
        }
        Ok(Self::new(package, kind, target, name))
    }
}

/// Serde with a [`TestId`] as its display form (`my-crate::cache tests::evicts`), for maps keyed by test.
pub mod as_display {
    use super::TestId;

    /// Writes the id as its display form.
    pub fn serialize<S: serde::Serializer>(id: &TestId, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(id)
    }

    /// Reads the id from its display form.
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<TestId, D::Error> {
        let text = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Names that Windows reserves for devices, whatever the extension.
const RESERVED: &[&str] = &[
    "con", "prn", "aux", "nul", "com1", "com2", "com3", "com4", "com5", "com6", "com7", "com8", "com9", "lpt1", "lpt2",
    "lpt3", "lpt4", "lpt5", "lpt6", "lpt7", "lpt8", "lpt9",
];

/// Longest encoded component kept whole; a longer one is cut and given a hash of the whole text.
const LONGEST: usize = 160;

/// `text` as one component of a file name, distinct for distinct texts and readable: ASCII lowercase letters,
/// digits, `_` and `-` stay as they are; `::` becomes `.`; an uppercase letter `X` becomes `~x` (so no two names
/// differ only in case, for file systems that ignore it); every other character becomes `~XX` per UTF-8 byte (two
/// uppercase hexadecimal digits). A Windows device name gets its last letter escaped, and a very long result is cut
/// and given a hash. Every character of the result is unreserved in URLs, so a link to the file needs no escaping.
///
/// ```
/// use ying_report::file_name_component;
///
/// assert_eq!(file_name_component("cache::tests::evicts"), "cache.tests.evicts");
/// assert_eq!(file_name_component("m__t"), "m__t");
/// assert_eq!(file_name_component("tests::café"), "tests.caf~C3~A9");
/// assert_eq!(file_name_component("Parser"), "~parser");
/// ```
pub fn file_name_component(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            'a'..='z' | '0'..='9' | '_' | '-' => out.push(c),
            'A'..='Z' => {
                out.push('~');
                out.push(c.to_ascii_lowercase());
            }
            ':' if chars.peek() == Some(&':') => {
                chars.next();
                out.push('.');
            }
            _ => {
                let mut bytes = [0; 4];
                for byte in c.encode_utf8(&mut bytes).bytes() {
                    out.push_str(&format!("~{byte:02X}"));
                }
            }
        }
    }
    if RESERVED.contains(&out.as_str()) {
        let last = out.pop().expect("reserved names are not empty");
        out.push_str(&format!("~{:02X}", last as u32));
    }
    if out.len() > LONGEST {
        let mut cut = LONGEST;
        // Cut on a whole escape.
        while out.as_bytes()[cut - 1] == b'~' || (cut >= 2 && out.as_bytes()[cut - 2] == b'~') {
            cut -= 1;
        }
        out.truncate(cut);
        out.push_str(&format!("~{:016x}", stable_hash(text)));
    }
    if out.is_empty() {
        out.push_str("~00");
    }
    out
}

/// FNV-1a: the same on every machine and every run.
pub fn stable_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::{TargetKind, TestId, file_name_component};
    use std::collections::BTreeSet;

    #[test]
    fn ids_show_as_nextest_shows_them_and_read_back() {
        let cases = [
            (TestId::new("app", TargetKind::Lib, "app_core", "tests::a"), "app tests::a"),
            (TestId::new("app", TargetKind::Bin, "app", "tests::a"), "app::bin/app tests::a"),
            (TestId::new("app", TargetKind::Test, "leaks", "box_leak"), "app::leaks box_leak"),
            (TestId::new("app", TargetKind::Bench, "b", "x"), "app::bench/b x"),
            (TestId::new("app", TargetKind::Example, "e", "x y"), "app::example/e x y"),
        ];
        for (id, shown) in cases {
            assert_eq!(id.to_string(), shown);
            assert_eq!(shown.parse::<TestId>().unwrap(), id);
        }
        assert!("app".parse::<TestId>().unwrap_err().to_string().contains("no test name"));
        assert!("app::lib/x t".parse::<TestId>().unwrap_err().to_string().contains("unknown target kind `lib`"));
    }

    #[test]
    fn file_names_never_collide() {
        let names = [
            "m::t",
            "m__t",
            "m.t",
            "m:t",
            "tests::é",
            "tests::è",
            "tests::ü",
            "Tests::a",
            "tests::a",
            "a b",
            "a%20b",
            "con",
            "CON",
            "x^y",
            "",
        ];
        let encoded: BTreeSet<String> = names.iter().map(|name| file_name_component(name)).collect();
        assert_eq!(encoded.len(), names.len(), "{encoded:?}");
        let lowercase: BTreeSet<String> = encoded.iter().map(|name| name.to_lowercase()).collect();
        assert_eq!(lowercase.len(), names.len(), "distinct on case-insensitive file systems too");
        for name in &encoded {
            assert!(
                name.chars().all(|c| c.is_ascii_alphanumeric() || "._-~".contains(c)),
                "{name} is a portable file name, unreserved in URLs"
            );
            assert!(!["con", "nul", "aux", "prn"].contains(&name.as_str()));
        }
    }

    #[test]
    fn long_names_are_cut_with_a_hash() {
        let long = "é".repeat(200);
        let other = format!("{}x", "é".repeat(199));
        let (a, b) = (file_name_component(&long), file_name_component(&other));
        assert_ne!(a, b);
        assert!(a.len() < 200 && b.len() < 200, "{a}");
        assert!(!a.ends_with('~'));
    }

    #[test]
    fn the_same_test_in_a_library_and_a_binary_has_two_ids_and_two_files() {
        let lib = TestId::new("p", TargetKind::Lib, "p", "tests::same_unit");
        let bin = TestId::new("p", TargetKind::Bin, "p", "tests::same_unit");
        assert_ne!(lib.to_string(), bin.to_string());
        assert_ne!(lib.report_path(), bin.report_path());
        assert_eq!(bin.flamegraph_path("retained"), "flamegraphs/p/bin/p/tests.same_unit.retained.svg");
    }
}
