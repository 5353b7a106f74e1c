//! The paths of a file that name another module file of its crate: its imports, each with its line.
//!
//! Read in code only (comments, strings and character literals are blanked), in `use` lines and inline alike:
//!
//! - `crate::…` and `$crate::…`, from the crate root;
//! - `super::…`, climbing from the module the path is written in (the file's, and the inline modules around it): a
//!   path that stays inside the file is no import;
//! - `self::…`;
//! - a bare path whose first segment is a child module of the module it is written in (`runner::run` in
//!   `run/mod.rs`, `pub use report::LeakReport` in `lib.rs`), but not a segment after `::` nor one inside the group
//!   of another root (`std::{process, fs}` names no child module `process`);
//! - the string of an attribute written as a path, as serde reads it (`#[serde(with = "crate::baseline::sites")]`).
//!
//! A group is read branch by branch (`crate::{a::{b, c}, d::e}` is three paths), and each path names the deepest
//! module file its leading segments name (`crate::run::symbols::map_executable` names `run/symbols`,
//! `crate::Frame` the crate root). Test modules are not read, nor the paths of a visibility (`pub(in crate::a)`).

use crate::modules::Modules;
use crate::source::{Source, is_word_byte};

/// A path of a file that names another module file of its crate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Import {
    /// The line (from 1) of the path; in a group, of its branch.
    pub line: usize,
    /// The path, from its root to the end of its branch (`crate::cli::TestArgs` of `crate::cli::{GateOptions,
    /// TestArgs}`).
    pub path: String,
    /// The file it names, by its index among the crate's files.
    pub to: usize,
}

/// The imports of the file `from` of `modules`, whose text is `source`. A binary crate's own root has none.
pub fn imports(modules: &Modules, from: usize, source: &Source) -> Vec<Import> {
    let Some(own) = &modules.files[from].segments else { return Vec::new() };
    let mut found = Vec::new();
    let mut add = |written: &Written| {
        if source.in_test(written.start) {
            return;
        }
        let module: Vec<String> =
            own.iter().cloned().chain(source.inline_path(written.start).into_iter().map(str::to_owned)).collect();
        for leaf in &written.leaves {
            let Some(to) = resolve(modules, &module, written, &leaf.segments) else { continue };
            if to != from {
                let root = if written.dollar { "$" } else { "" };
                found.push(Import {
                    line: source.line(leaf.at),
                    path: root.to_owned() + &leaf.segments.join("::"),
                    to,
                });
            }
        }
    };
    for written in written_paths(&source.code) {
        add(&written);
    }
    for string in &source.attribute_strings {
        let Some(segments) = plain_path(&string.text) else { continue };
        // serde's `with = "module"` names a module on its own; any other single name is no module path.
        let joined = segments.len() > 1 || string.key.as_deref() == Some("with");
        let leaves = vec![Leaf { at: string.at, segments }];
        add(&Written { start: string.at, dollar: false, joined, leaves });
    }
    found.sort_by_key(|import| import.line);
    found
}

/// A path as written in code.
#[derive(Debug)]
struct Written {
    /// Where its first segment starts.
    start: usize,
    /// Whether its first segment is `$crate`.
    dollar: bool,
    /// Whether `::` follows its first segment.
    joined: bool,
    /// Its branches, each from its first segment.
    leaves: Vec<Leaf>,
}

/// One branch of a path, from the path's first segment to the end of the branch.
#[derive(Debug)]
struct Leaf {
    /// Where the branch's own text starts (the path's start, for a path without a group).
    at: usize,
    /// Its segments, without the `self` of a group (`{self, …}`).
    segments: Vec<String>,
}

/// The file that `segments` (a leaf of `written`, written in the module at `module`) names, if it names one.
fn resolve(modules: &Modules, module: &[String], written: &Written, segments: &[String]) -> Option<usize> {
    let (first, rest) = segments.split_first()?;
    if !written.joined {
        return None;
    }
    let mut absolute = module.to_vec();
    match first.as_str() {
        "crate" => absolute = rest.to_vec(),
        "super" => {
            let climbs = segments.iter().take_while(|&segment| segment == "super").count();
            absolute.truncate(absolute.len().checked_sub(climbs)?);
            absolute.extend_from_slice(&segments[climbs..]);
        }
        "self" => absolute.extend_from_slice(rest),
        _ if written.dollar => return None,
        _ => {
            absolute.push(first.clone());
            modules.file(&absolute)?;
            absolute.extend_from_slice(rest);
        }
    }
    modules.deepest(&absolute)
}

/// The segments of `text` if it is a path and nothing else (`crate::baseline::sites`).
fn plain_path(text: &str) -> Option<Vec<String>> {
    let segments: Vec<String> = text.split("::").map(str::to_owned).collect();
    let is_name =
        |segment: &String| segment.bytes().next().is_some_and(starts_name) && segment.bytes().all(is_word_byte);
    segments.iter().all(is_name).then_some(segments)
}

/// Whether a name may start with `byte`.
fn starts_name(byte: u8) -> bool {
    byte.is_ascii_alphabetic() || byte == b'_'
}

/// Every path written in `code` (blanked code) that starts a path of its own: not after `::` (`std::process`), `.`
/// (a method or a field), `'` (a lifetime), `#` (a raw name) or `$` (a macro's variable, but for `$crate`), not
/// inside another path's group, not a visibility's.
fn written_paths(code: &str) -> Vec<Written> {
    let bytes = code.as_bytes();
    let mut paths = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if !starts_name(bytes[at]) || (at > 0 && is_word_byte(bytes[at - 1])) {
            at += 1;
            continue;
        }
        let mut leaves = Vec::new();
        let end = tree(code, at, Vec::new(), at, &mut leaves);
        let before = code[..at].trim_end();
        let dollar = at > 0 && bytes[at - 1] == b'$';
        let after_other = before.ends_with("::")
            || before.ends_with('.')
            || (at > 0 && matches!(bytes[at - 1], b'\'' | b'#'))
            || (dollar && name_at(code, at) != "crate");
        if !after_other && !in_visibility(code, at) {
            let joined = code[at + name_at(code, at).len()..].trim_start().starts_with("::");
            paths.push(Written { start: at, dollar, joined, leaves });
        }
        at = end.max(at + 1);
    }
    paths
}

/// Reads the path tree whose text starts at `at` (a name, a group's `{` or a `*`) after the segments `prefix`:
/// pushes a leaf (starting at `leaf_at`) for each end of it, and returns where it ends.
fn tree(code: &str, mut at: usize, mut segments: Vec<String>, leaf_at: usize, leaves: &mut Vec<Leaf>) -> usize {
    let bytes = code.as_bytes();
    loop {
        match bytes.get(at) {
            Some(b'{') => return group(code, at, &segments, leaves),
            Some(b'*') => {
                segments.push("*".to_owned());
                leaves.push(Leaf { at: leaf_at, segments });
                return at + 1;
            }
            _ => {}
        }
        let name = name_at(code, at);
        if name.is_empty() {
            leaves.push(Leaf { at: leaf_at, segments });
            return at;
        }
        // `{self, …}` is the group's prefix itself.
        if name != "self" || segments.is_empty() {
            segments.push(name.to_owned());
        }
        at += name.len();
        let after = code[at..].trim_start();
        if let Some(next) = after.strip_prefix("::") {
            let next_at = code.len() - next.trim_start().len();
            if bytes.get(next_at).is_some_and(|&byte| byte == b'{' || byte == b'*' || starts_name(byte)) {
                at = next_at;
                continue;
            }
        }
        leaves.push(Leaf { at: leaf_at, segments });
        return at;
    }
}

/// Reads the group that opens at `open` (its `{`) after the segments `prefix`, each branch a tree of its own, and
/// returns where it ends.
fn group(code: &str, open: usize, prefix: &[String], leaves: &mut Vec<Leaf>) -> usize {
    let bytes = code.as_bytes();
    let mut at = open + 1;
    while at < bytes.len() {
        match bytes[at] {
            b'}' => return at + 1,
            b'{' | b'*' => at = tree(code, at, prefix.to_vec(), at, leaves),
            byte if starts_name(byte) && name_at(code, at) == "as" => {
                // `x as y`: the new name is no branch.
                let alias = code.len() - code[at + 2..].trim_start().len();
                at = alias + name_at(code, alias).len().max(1);
            }
            byte if starts_name(byte) => at = tree(code, at, prefix.to_vec(), at, leaves),
            _ => at += 1,
        }
    }
    at
}

/// The name (identifier or keyword) that starts at `at` in `code`; empty if none does.
fn name_at(code: &str, at: usize) -> &str {
    let rest = &code[at..];
    let len = rest.bytes().take_while(|&byte| is_word_byte(byte)).count();
    if rest.bytes().next().is_some_and(starts_name) { &rest[..len] } else { "" }
}

/// Whether the path at `at` is a visibility's (`pub(in crate::run)`).
fn in_visibility(code: &str, at: usize) -> bool {
    let Some(before) = code[..at].trim_end().strip_suffix("in") else { return false };
    if before.bytes().next_back().is_some_and(is_word_byte) {
        return false;
    }
    before.trim_end().strip_suffix('(').is_some_and(|before| before.trim_end().ends_with("pub"))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::imports;
    use crate::modules::Modules;
    use crate::source::Source;

    /// A file of the runtime's `hot/scope/` that names other modules in every way a path can: from the crate root
    /// and through `super`, in groups, inline and in `use` lines; and in comments, strings and a test module, which
    /// are no code. The rules' tests judge the same file.
    pub(crate) const RUNTIME_EXAMPLE: &str = "\
use crate::base::ids::ScopeId;
use crate::products::measure;
use crate::{
    hot::stacks,
    read::symbolize::{self, symbolize},
};
fn f() -> crate::Scope {
    crate::read::stack_stats::top(super::super::super::products::report::X, crate::hot::scope::attributed(t));
    // crate::products in a comment, /* crate::report */ and \"crate::report\" in a string are not code
    let _ = r#\"crate::report\"#;
    let _ = ('\"', '\\'', '─', b'{');
}
mod inner {
    use super::super::super::super::products::spans;
    use super::super::super::scope::parts;
    use super::f;
}
#[cfg(test)]
mod tests {
    use crate::products::measure;
}
";

    /// The imports of `file` among `files` (paths under `src/`) as (line, path, module named).
    fn read<'a>(files: &'a [&str], file: &str, text: &str) -> Vec<(usize, String, &'a str)> {
        let modules = Modules::new(files.iter().copied());
        let from = files.iter().position(|&path| path == file).expect("the file is among the files");
        let imports = imports(&modules, from, &Source::read(text));
        imports.into_iter().map(|import| (import.line, import.path, files[import.to])).collect()
    }

    /// The runtime's files the old layering test named.
    const RUNTIME: [&str; 14] = [
        "lib.rs",
        "base/mod.rs",
        "base/ids.rs",
        "hot/mod.rs",
        "hot/stacks.rs",
        "hot/scope/mod.rs",
        "hot/scope/parts.rs",
        "hot/scope/example.rs",
        "read/mod.rs",
        "read/symbolize.rs",
        "read/stack_stats.rs",
        "products/measure.rs",
        "products/report.rs",
        "products/spans.rs",
    ];

    #[test]
    fn paths_from_the_root_groups_and_climbs_are_read_in_code_only() {
        let source = RUNTIME_EXAMPLE;
        let found = read(&RUNTIME, "hot/scope/example.rs", source);
        let expected = [
            (1, "crate::base::ids::ScopeId", "base/ids.rs"),
            (2, "crate::products::measure", "products/measure.rs"),
            (4, "crate::hot::stacks", "hot/stacks.rs"),
            (5, "crate::read::symbolize", "read/symbolize.rs"),
            (5, "crate::read::symbolize::symbolize", "read/symbolize.rs"),
            (7, "crate::Scope", "lib.rs"),
            (8, "crate::read::stack_stats::top", "read/stack_stats.rs"),
            (8, "super::super::super::products::report::X", "products/report.rs"),
            (8, "crate::hot::scope::attributed", "hot/scope/mod.rs"),
            (14, "super::super::super::super::products::spans", "products/spans.rs"),
            (15, "super::super::super::scope::parts", "hot/scope/parts.rs"),
        ];
        let expected: Vec<(usize, String, &str)> =
            expected.into_iter().map(|(line, path, file)| (line, path.to_owned(), file)).collect();
        assert_eq!(found, expected);
    }

    #[test]
    fn nested_groups_give_each_branch_on_its_own() {
        let files = ["lib.rs", "a/mod.rs", "a/b.rs", "a/c.rs", "d.rs", "e.rs"];
        let source = "use crate::{a::{b::X, c::{self, Y as Z}}, d::{self as dd, *},\n    e};\n";
        let found = read(&files, "lib.rs", source);
        let paths: Vec<(usize, &str, &str)> =
            found.iter().map(|(line, path, file)| (*line, path.as_str(), *file)).collect();
        assert_eq!(
            paths,
            [
                (1, "crate::a::b::X", "a/b.rs"),
                (1, "crate::a::c", "a/c.rs"),
                (1, "crate::a::c::Y", "a/c.rs"),
                (1, "crate::d", "d.rs"),
                (1, "crate::d::*", "d.rs"),
                (2, "crate::e", "e.rs"),
            ]
        );
    }

    #[test]
    fn bare_paths_name_child_modules_only() {
        let files = ["lib.rs", "run/mod.rs", "run/runner.rs", "run/process.rs", "report.rs", "fs.rs"];
        let root = "\
mod report;
mod run;
pub use report::LeakReport;
use std::{process, fs};
fn main() { run::runner::run(); std::process::exit(0); x.report::<u8>(); let run = 1; pub(in crate::run) fn f() {} }
";
        let found = read(&files, "lib.rs", root);
        assert_eq!(
            found,
            [(3, "report::LeakReport".to_owned(), "report.rs"), (5, "run::runner::run".to_owned(), "run/runner.rs")]
        );
        // In `run/mod.rs` the children are `run`'s; `report` is no child there.
        let run = "pub use runner::run;\nuse process::Child;\nuse report::LeakReport;\nuse self::process::X;\n";
        let found = read(&files, "run/mod.rs", run);
        assert_eq!(
            found,
            [
                (1, "runner::run".to_owned(), "run/runner.rs"),
                (2, "process::Child".to_owned(), "run/process.rs"),
                (4, "self::process::X".to_owned(), "run/process.rs"),
            ]
        );
        // A leaf's `super` climbs to its parent; `super` in an inline module that stays in the file is no import.
        let runner = "use super::process::Child;\nfn f() {}\nmod inner { use super::f; }\n";
        assert_eq!(read(&files, "run/runner.rs", runner), [(1, "super::process::Child".to_owned(), "run/process.rs")]);
    }

    #[test]
    fn macro_crate_paths_and_serde_attribute_paths_are_imports() {
        let files = ["lib.rs", "baseline.rs", "summary.rs", "report.rs"];
        let source = "\
macro_rules! m { ($x:ident) => { $crate::report::make($x); $x::report::no() } }
#[derive(Serialize)]
struct S {
    #[serde(default, skip_serializing_if = \"Vec::is_empty\", with = \"crate::baseline::sites\")]
    sites: Vec<Site>,
    #[serde(with = \"baseline\")]
    other: u8,
}
#[expect(unused, reason = \"crate::report in words\")]
fn f() {}
";
        assert_eq!(
            read(&files, "summary.rs", source),
            [
                (1, "$crate::report::make".to_owned(), "report.rs"),
                (4, "crate::baseline::sites".to_owned(), "baseline.rs")
            ]
        );
        // From the root, `with = "baseline"` names its child module `baseline`.
        assert_eq!(read(&files, "lib.rs", source)[2], (6, "baseline".to_owned(), "baseline.rs"));
    }

    #[test]
    fn a_binary_of_its_own_imports_nothing() {
        let files = ["lib.rs", "cli.rs", "main.rs", "bin/tool.rs"];
        assert!(read(&files, "main.rs", "use crate::cli::X;\nfn main() { cli::run() }\n").is_empty());
        assert!(read(&files, "bin/tool.rs", "use crate::cli::X;\n").is_empty());
    }
}
